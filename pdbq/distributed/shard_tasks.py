"""What the workers run in sharded coreference MAP (`pdbq.distributed.shards`): a shard's round,
the entities it sends away before one, and a shard rebuilt from the files and replayed.

A worker keeps each shard it holds in this process (`_HELD`, by run and shard) with its version:
the rounds of moves it ran (``done``) and the last round whose entities it sent away (``out``).
A task checks the version it needs before it touches the state. When the state is not there or
not at that version (its worker died, Dask ran the task elsewhere), the task rebuilds the shard
from the Parquet files and replays its rounds from the task's ``history``; without one (the
client sends it only to replay) it raises `ShardLost` and the client replays the run. Every
step is a pure function of the data, the plan, the seed, the round and the client's moves, so a
replayed shard is the shard an undisturbed run would hold.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from pdbq.coref.contract import dense_groups
from pdbq.distributed.config import DistributedConfig
from pdbq.distributed.shard_plan import ShardSource
from pdbq.distributed.shard_state import (Boundary, Held, Package, ShardLost, admit, assemble, boundary, export,
                                          package_from_rows, read_rows, read_whole)
from pdbq.distributed.tasks import RoundTask, timed_round
from pdbq.errors import InferenceError
from pdbq.inference.coreference.entity_moves import C_ACCEPTED, C_EVALS, C_PROPOSALS

__all__ = ["ShardRound", "ShardReport", "shard_round", "shard_export", "sent_count", "shard_rebuild", "shard_labels", "release"]

Sends = tuple[tuple[int, np.ndarray], ...]  # (destination shard, sorted entity keys) each
Arrivals = tuple[tuple[int, np.ndarray, np.ndarray], ...]  # (source shard, mention ids, their keys) each


class ShardRound(NamedTuple):
    token: str  # the run
    shard: int
    blocks: np.ndarray  # the shard's whole blocks (to rebuild it)
    round: int
    temperatures: tuple[float, ...]  # of rounds 0..round (replayed after a rebuild)
    steps: int  # proposals of this round on this shard
    config: DistributedConfig
    # `time.time()` instant (the workers' clocks) at which the moves stop, the round then ``cut``
    # and the shard left as it was: a cancelled Dask task that already runs is not stopped
    deadline: float | None = None
    stop_event: str | None = None  # the client's stop flag for a cancelled statement (`cluster.raise_stop`)
    split: np.ndarray | None = None  # the plan's mentions of split groups on this shard (to rebuild it)
    sends: Sends = ()  # the entities this shard sends away before this round's moves
    sources: tuple[int, ...] = ()  # the shards whose packages the task gets, in argument order
    # what a rebuild replays: None (not given: a task finding no state raises `ShardLost`), or per
    # round 0..round-1 its (steps, sends, arrivals); () for a shard that never exchanges entities
    # (its rounds replay with ``steps``)
    history: tuple[tuple[int, Sends, Arrivals], ...] | None = ()
    mobile: bool = False  # the run exchanges entities: report the shard's `Boundary`


class ShardReport(NamedTuple):
    shard: int
    mentions: int  # held after the round
    accepted: int
    seconds: float
    replayed: int  # rounds replayed before this one (0 when the shard's state was here)
    worker: str  # the worker that now holds the shard
    evaluations: int = 0  # pair-score reads of this call (replayed rounds included)
    proposals: int = 0
    cut: bool = False  # the deadline stopped the moves: the shard holds its entities as before them
    boundary: Boundary | None = None  # the cut pairs summed (exchanging runs)
    arrivals: Arrivals = ()  # the entities that arrived this round
    bytes_in: int = 0  # bytes of the packages that arrived


@dataclass
class _Shard:
    state: Held
    done: int  # rounds of moves run
    out: int  # the last round whose sends were taken out (-1: none)
    cut: bool = False  # a round stopped at the deadline after its arrivals: only its labels are read
    rebuilt: int = -1  # the round before which it was rebuilt and replayed here (-1: never)


_HELD: dict[tuple[str, int], _Shard] = {}  # per worker process: the shards it holds
_LOCK = threading.Lock()
# Runs that ended (`finish`): a task the client cancelled (a cancelled statement, a cut round)
# may still be running here when its run ends; when it ends, its shard is dropped instead of
# kept for nobody.
_FINISHED: collections.deque[str] = collections.deque(maxlen=4096)


def _keep(task: ShardRound, shard: _Shard) -> None:
    """Hold ``shard`` for the next task of its run, unless the run has ended."""
    with _LOCK:
        if task.token not in _FINISHED:
            _HELD[(task.token, task.shard)] = shard


def _moves(state: Held, task: ShardRound, r: int, steps: int, counters: np.ndarray,
           timed: bool) -> tuple[np.ndarray, bool]:
    cfg = task.config
    local = np.arange(state.mentions.size, dtype=np.int64)
    rt = RoundTask(r, task.shard, local, state.labels, steps, task.temperatures[r], cfg.seed, cfg.hierarchy,
                   cfg.sub_bias, cfg.p_new, cfg.p_split_merge, task.deadline if timed else None,
                   task.stop_event if timed else None)
    out, finished = timed_round(state.graph, rt, counters)
    if finished and out.shape[0] != state.mentions.size:
        raise InferenceError(f"shard {task.shard} returned {out.shape[0]} labels for {state.mentions.size} mentions")
    return out, finished


def _replay(source: ShardSource, task: ShardRound, upto: int, counters: np.ndarray) -> _Shard:
    """The shard after ``upto`` rounds, rebuilt from the files (module docstring)."""
    hist = task.history or ()
    if task.mobile and len(hist) < upto:
        raise InferenceError(f"shard {task.shard}: a replay to round {upto} got the history of {len(hist)} rounds")
    if task.mobile:
        arrived = [ids for _, _, arrivals in hist[:upto] for _, ids, _ in arrivals]
        also = np.concatenate(arrived) if arrived else np.zeros(0, np.int64)
        split = np.zeros(0, np.int64) if task.split is None else task.split
        mentions, init, a, b, w = read_rows(source, task.blocks, split, also)
        labels = np.arange(mentions.size, dtype=np.int64) if init is None else dense_groups(init)[0]
        pos = np.minimum(np.searchsorted(mentions, a), max(mentions.size - 1, 0))
        mine = (mentions[pos] == a) if mentions.size else np.zeros(a.size, bool)
        state = assemble(mentions, labels, a[mine], b[mine], w[mine])
    else:
        state = read_whole(source, task.blocks)
    for r in range(upto):
        steps = task.steps
        if task.mobile:
            steps, sends, arrivals = hist[r]
            if sends:
                state = export(state, task.shard, sends)[0]
            if arrivals:
                state = admit(state, tuple(package_from_rows(ids, keys, a, b, w) for _, ids, keys in arrivals))
        state = state._replace(labels=_moves(state, task, r, steps, counters, False)[0])
    return _Shard(state, upto, upto - 1 if upto else -1, rebuilt=upto)


def _state(source: ShardSource, task: ShardRound, counters: np.ndarray, sent: bool) -> tuple[_Shard, int]:
    """The shard before round ``task.round``'s moves and arrivals, its sends taken out when
    ``sent`` (a round task: it takes them out here when its export ran on another worker), and
    the rounds replayed to get it."""
    key = (task.token, task.shard)
    r = task.round
    with _LOCK:
        held = _HELD.get(key)
    replayed = 0
    usable = held is not None and not held.cut and held.done == r and (held.out < r or (sent and task.sends))
    if not usable:
        if task.history is None:
            raise ShardLost(f"shard {task.shard} is not held at round {r} by the worker that runs it")
        held = _replay(source, task, r, counters)
        replayed = r
    if sent and task.sends and held.out < r:
        held = _Shard(export(held.state, task.shard, task.sends)[0], r, r, rebuilt=held.rebuilt)
    if held.rebuilt == r:  # rebuilt by this round's export task
        replayed = r
    return held, replayed


def shard_export(source: ShardSource, task: ShardRound) -> tuple[Package, ...]:
    """Take ``task.sends`` out of the shard before round ``task.round``: one package per
    destination, in the order of ``task.sends`` (each travels to its shard's round task)."""
    counters = np.zeros(4, np.int64)
    held, _ = _state(source, task, counters, sent=False)
    state, packages = export(held.state, task.shard, task.sends)
    _keep(task, _Shard(state, task.round, task.round, rebuilt=held.rebuilt))
    return packages


def sent_count(packages: tuple[Package, ...]) -> int:
    """How many packages a shard's export made (a small result the shard's own round task waits
    on, so that its export has run first)."""
    return len(packages)


def shard_round(source: ShardSource, task: ShardRound, sent: int, *packages: Package) -> ShardReport:
    """Round ``task.round`` of one shard: its sends out (``sent``: the packages its export task
    made, which ran first), ``packages`` (from ``task.sources``) in, then its moves; at
    ``task.deadline`` the moves stop and the shard keeps its entities as they were before them
    (``cut``)."""
    t0 = time.perf_counter()
    counters = np.zeros(4, np.int64)
    held, replayed = _state(source, task, counters, sent=True)
    state = admit(held.state, packages)
    arrivals = tuple((s, p.ids, p.keys) for s, p in zip(task.sources, packages))
    before = counters.copy()  # the report counts the task's own round, not the replayed ones
    labels, finished = _moves(state, task, task.round, task.steps, counters, True)
    own = counters - before
    if finished:
        state = state._replace(labels=labels)
    shard = _Shard(state, task.round + (1 if finished else 0), held.out, not finished)
    _keep(task, shard)
    edge = boundary(state, task.config.super_bias) if task.mobile and finished else None
    return ShardReport(task.shard, int(state.mentions.size), int(own[C_ACCEPTED]), time.perf_counter() - t0, replayed,
                       _worker(), int(own[C_EVALS]), int(own[C_PROPOSALS]), not finished, edge, arrivals,
                       sum(p.nbytes for p in packages))


def shard_rebuild(source: ShardSource, task: ShardRound) -> str:
    """Rebuild the shard after rounds 0..``task.round`` from the files and ``task.history``
    (which covers them), keep it here, and say where."""
    held = _replay(source, task, task.round + 1, np.zeros(4, np.int64))
    _keep(task, held)
    return _worker()


def _worker() -> str:
    from distributed import get_worker  # noqa: PLC0415 - runs on a worker

    try:
        return str(get_worker().address)
    except ValueError:  # called outside a worker (tests calling the task directly)
        return ""


def shard_labels(token: str, shard: int) -> tuple[np.ndarray, np.ndarray]:
    """(global mention ids, local labels) of a shard this worker holds (then dropped)."""
    with _LOCK:
        held = _HELD.pop((token, shard), None)
    if held is None:
        raise InferenceError(f"shard {shard} is no longer held by its worker")
    return held.state.mentions, held.state.labels


def release(token: str, *, finished: bool = False) -> int:
    """Drop every shard of run ``token`` this process holds; returns how many. ``finished``: the
    run has ended, so a task of it still running here keeps nothing when it ends (without it, a
    retried round's tasks hold their rebuilt shards again)."""
    with _LOCK:
        if finished:
            _FINISHED.append(token)
        keys = [k for k in _HELD if k[0] == token]
        for k in keys:
            del _HELD[k]
    return len(keys)
