"""What one partition does in one round, on a Dask worker: pure functions of their inputs.

A task gets the whole pair graph (scattered once, kept on the workers), its mentions and their
current entity labels, and returns new labels for the same mentions. Only the pairs with both
mentions in the partition are scored (seed 001's partition-local factors), so no entity ever
spans two partitions during a round. The stream is derived from (seed, round, partition), so a
re-run after a worker dies gives exactly the same labels.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from pdbq.coref.contract import contract, dense_groups, subgraph, within
from pdbq.coref.layout import PairGraph
from pdbq.distributed.cluster import stop_flag
from pdbq.inference.coreference.entity_moves import new_scratch, run_moves, state_from_labels
from pdbq.inference.coreference.hierarchy import LevelMoves, run_level

__all__ = ["RoundTask", "PartitionResult", "round_stream", "run_partition", "local_round", "timed_round"]


class RoundTask(NamedTuple):
    """One partition's work in one round."""

    round: int
    partition: int
    mentions: np.ndarray  # int64, global mention indices of the partition
    labels: np.ndarray  # int64, current entity label of each (any integers; equal = same entity)
    steps: int
    temperature: float
    seed: int
    hierarchy: bool
    sub_bias: float
    p_new: float
    p_split_merge: float
    # `time.time()` instant (the workers' clocks) at which the moves stop, the result then marked
    # ``cut``: a cancelled Dask task that already runs is not stopped, so it stops itself
    deadline: float | None = None
    # the client's stop flag (`cluster.raise_stop`) for a cancelled statement, asked between chunks
    stop_event: str | None = None


class PartitionResult(NamedTuple):
    partition: int
    labels: np.ndarray  # int64 dense local labels, aligned with the task's mentions
    counters: np.ndarray  # int64[4] as in entity_moves (evaluations include the subgraph's reads)
    seconds: float  # compute time on the worker
    cut: bool = False  # the deadline stopped the moves early: not a round's result


def round_stream(seed: int, round_: int, partition: int) -> np.ndarray:
    """The uint64[1] xorshift state of one (round, partition): independent of everything else."""
    s = np.random.SeedSequence([seed, round_, partition]).generate_state(1, dtype=np.uint64)
    return np.array([s[0] if s[0] != 0 else np.uint64(0x9E3779B97F4A7C15)], dtype=np.uint64)


def run_partition(g: PairGraph, task: RoundTask) -> PartitionResult:
    """Run one round of moves on the partition's local graph (module docstring)."""
    t0 = time.perf_counter()
    lg, reads = subgraph(g, task.mentions)
    counters = np.zeros(4, np.int64)
    counters[0] += reads
    labels, finished = timed_round(lg, task, counters)
    return PartitionResult(task.partition, labels, counters, time.perf_counter() - t0, not finished)


_CHUNK_SECONDS = 0.05  # with a deadline, the moves run in chunks of about this long
_FIRST_CHUNK = 4096


def local_round(lg: PairGraph, task: RoundTask, counters: np.ndarray) -> np.ndarray:
    """One round of moves on a partition's own graph ``lg`` (mention i of ``lg`` is
    ``task.mentions[i]``, labelled ``task.labels[i]``): its new dense local labels."""
    return timed_round(lg, task, counters)[0]


def timed_round(lg: PairGraph, task: RoundTask, counters: np.ndarray) -> tuple[np.ndarray, bool]:
    """`local_round`, and False when ``task.deadline`` stopped the moves first (the labels are
    then no round's result)."""
    n = task.mentions.shape[0]
    if n == 0:
        return np.zeros(0, np.int64), True
    rng = round_stream(task.seed, task.round, task.partition)
    if task.hierarchy:
        return _hierarchical_round(lg, task, rng, counters), True
    st = state_from_labels(task.labels)
    log = np.zeros(1)
    sc = new_scratch(lg)
    timed = task.deadline is not None or task.stop_event is not None
    stopped = None if task.stop_event is None else stop_flag(task.stop_event)
    left, chunk = task.steps, task.steps if not timed else _FIRST_CHUNK
    while left > 0:
        # chunks continue the same chain (state, stream and counters carry over): same labels
        m = min(left, chunk)
        t = time.perf_counter()
        run_moves(lg, st, sc, rng, m, task.temperature, task.p_new, task.p_split_merge, counters, log)
        left -= m
        if timed and left > 0:
            if (task.deadline is not None and time.time() >= task.deadline) or (stopped is not None and stopped()):
                return st.label.astype(np.int64), False
            chunk = max(_FIRST_CHUNK, int(m * _CHUNK_SECONDS / max(time.perf_counter() - t, 1e-9)))
    return st.label.astype(np.int64), True


def _hierarchical_round(lg: PairGraph, task: RoundTask, rng: np.ndarray, counters: np.ndarray) -> np.ndarray:
    """Half the steps at the sub-entity level, half moving whole sub-entities; sub-entities start
    as the entities' within-entity structure found by the sub level itself."""
    n = lg.indptr.shape[0] - 1
    ent = dense_groups(task.labels)[0]
    half = max(1.0, task.steps / 2 / n)
    gs, k = within(lg, ent, shift=-task.sub_bias)
    counters[0] += k
    sub = run_level(gs, ent, LevelMoves(half, task.p_new, task.p_split_merge), task.temperature, rng, counters)
    sub = dense_groups(ent * (int(sub.max()) + 1) + sub)[0]
    cg, k = contract(lg, sub)
    counters[0] += k
    first = np.full(cg.indptr.shape[0] - 1, -1, np.int64)
    first[sub[::-1]] = np.arange(n - 1, -1, -1)
    nodes = cg.indptr.shape[0] - 1
    moves = LevelMoves(max(1.0, task.steps / 2 / max(nodes, 1)), task.p_new, task.p_split_merge)
    return run_level(cg, ent[first], moves, task.temperature, rng, counters)[sub]
