"""Map/redistribute rounds of coreference MAP on Dask `distributed` (seed 001).

Each round (map): the entities are dealt to ``workers`` partitions; every partition runs MH
entity moves on its own mentions with only partition-local pair factors, as one Dask task; the
coordinator gathers the new labels (redistribute) and deals the entities again, at random or
keeping each super-entity (a group of similar entities, `pdbq.inference.coreference.hierarchy.super_entities`)
on one partition. The pair graph is scattered to every worker once and stays there.

After every round the coordinator checks the partition: every mention came back exactly once,
or the run stops with an `InferenceError` — a mention is never silently lost or duplicated. A
task is a pure function of (graph, mentions, labels, round, partition, seed), so the answer
depends on the seed and ``config.workers`` only, not on the cluster, and a task whose worker dies
is simply re-run: Dask reschedules it, and if the round still fails because the cluster lost a
worker or the scattered graph, the round is submitted again from the last state
(``config.retries`` bounds both).

Where it runs: in-process by default (`LocalCluster(processes=False)`, no set-up cost, but the
kernels share one interpreter), a local process cluster with ``processes=True``, an existing
cluster with ``scheduler="tcp://host:8786"``, or the caller's own ``client``.

>>> from pdbq.coref.personx import person_x
>>> data = person_x(600, per_name=100, seed=2)
>>> res = resolve_distributed(data.graph, DistributedConfig(workers=2, rounds=4, steps_per_round=20_000))
>>> res.labels.shape[0], len(res.rounds) >= 4
(600, True)
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pdbq.coref.contract import affine_groups, dense_groups
from pdbq.coref.layout import PairGraph, validate_pair_graph
from pdbq.distributed.cluster import open_client, round_or_cut, run_round, scheduler_address
from pdbq.distributed.config import DistributedConfig
from pdbq.distributed.tasks import PartitionResult, RoundTask, round_stream, run_partition
from pdbq.errors import InferenceError
from pdbq.inference.coreference.entity_moves import C_ACCEPTED, C_EVALS, C_PROPOSALS, partition_score
from pdbq.inference.coreference.hierarchy import LevelMoves, super_entities

__all__ = ["RoundStats", "DistributedResult", "resolve_distributed", "deal_entities", "check_partition"]


@dataclass(frozen=True)
class RoundStats:
    """Where one round's time went: ``wall`` from submit to gather, ``compute_max``/``compute_sum``
    the partitions' compute on the workers, ``redistribute`` the coordinator's dealing."""

    round: int
    temperature: float
    wall: float
    compute_max: float
    compute_sum: float
    redistribute: float
    accepted: int
    reruns: int = 0  # times the round was submitted again after its data or a worker was lost
    bytes_sent: int = 0  # array bytes the client sent in the round's tasks (mentions and labels)
    bytes_received: int = 0  # array bytes of the partitions' results

    @property
    def overhead(self) -> float:
        """Seconds of the round not spent computing on the slowest partition."""
        return max(0.0, self.wall - self.compute_max) + self.redistribute


@dataclass(frozen=True, eq=False)
class DistributedResult:
    """The MAP clustering (``labels[m]``: smallest mention index of m's entity) and the run."""

    labels: np.ndarray
    log_score: float
    factor_evaluations: int
    proposals: int
    accepted: int
    seconds: float
    workers: int
    rounds: tuple[RoundStats, ...] = field(default=())
    scheduler: str = ""  # where the rounds ran
    dask_workers: int = 0  # workers of the cluster (partitions are dealt over them)
    stopped_by_time: bool = False  # time_limit ended the run before its planned rounds

    def summary(self) -> dict:
        """Where the run's time went, for diagnostics (keys as `pdbq.distributed.chains.DaskRun`):
        compute is the slowest partition's, summed over the rounds."""
        return {"scheduler": self.scheduler, "dask_workers": self.dask_workers, "groups": self.workers,
                "rounds": len(self.rounds), "wall": sum(r.wall for r in self.rounds),
                "compute_max": sum(r.compute_max for r in self.rounds),
                "compute_sum": sum(r.compute_sum for r in self.rounds),
                "redistribute": sum(r.redistribute for r in self.rounds),
                "overhead": sum(r.overhead for r in self.rounds), "reruns": sum(r.reruns for r in self.rounds),
                "bytes_sent": sum(r.bytes_sent for r in self.rounds),
                "bytes_received": sum(r.bytes_received for r in self.rounds)}

    def efficiency(self) -> float:
        """Parallel efficiency: compute summed over partitions ÷ (partitions × round time)."""
        busy = sum(r.compute_sum for r in self.rounds)
        span = sum(r.wall + r.redistribute for r in self.rounds)
        return busy / (self.workers * span) if span > 0 else 0.0


def deal_entities(labels: np.ndarray, workers: int, rng: np.random.Generator,
                  groups: np.ndarray | None = None) -> list[np.ndarray]:
    """Deal whole entities (whole ``groups`` of entities, when given: one group id per mention,
    constant over each entity) to ``workers`` partitions of about equal mention counts, in a
    random order; returns each partition's sorted mention indices."""
    n = labels.shape[0]
    unit = dense_groups(labels if groups is None else groups)[0]
    k = int(unit.max()) + 1 if n else 0
    rank = np.empty(k, np.int64)
    rank[rng.permutation(k)] = np.arange(k)
    sizes = np.bincount(unit, minlength=k)
    by_rank = np.empty(k, np.int64)
    by_rank[rank] = sizes
    before = np.cumsum(by_rank) - by_rank  # mentions dealt before each unit, in dealing order
    part_of_rank = np.minimum(before * workers // max(n, 1), workers - 1)
    part = part_of_rank[rank][unit]
    order = np.argsort(part, kind="stable")
    cuts = np.searchsorted(part[order], np.arange(1, workers))
    return np.split(order.astype(np.int64), cuts)


def check_partition(n: int, parts: list[np.ndarray], results: list[PartitionResult]) -> None:
    """Every mention dealt and returned exactly once, labels aligned: else `InferenceError`."""
    seen = np.bincount(np.concatenate(parts) if parts else np.zeros(0, np.int64), minlength=n)
    if seen.shape[0] != n or np.any(seen != 1):
        bad = int(np.flatnonzero(seen != 1)[0]) if seen.shape[0] == n else n
        raise InferenceError(f"distributed round lost or duplicated mention {bad}: partitions are inconsistent")
    for p, r in zip(parts, results):
        if r.labels.shape[0] != p.shape[0] or (r.labels.size and (r.labels.min() < 0 or r.labels.max() >= p.shape[0])):
            raise InferenceError(f"partition {r.partition} returned {r.labels.shape[0]} labels for {p.shape[0]} mentions")


def resolve_distributed(
    g: PairGraph,
    config: DistributedConfig = DistributedConfig(),
    *,
    labels: np.ndarray | None = None,
    client: Any = None,
    scheduler: str | None = None,
    processes: bool = False,
    on_round: Callable[[RoundStats, Any], None] | None = None,
    poll: Callable[[], None] | None = None,
) -> DistributedResult:
    """Annealed MAP clustering of ``g`` by map/redistribute rounds (module docstring), from
    ``labels`` (default: singletons). ``on_round(stats, client)`` is called after each round.
    ``config.time_limit`` is watched while a round runs too: the round under way at the limit is
    cancelled and the answer is the last finished round's labels (``stopped_by_time``; no round
    finished: the starting labels). ``poll()`` is called while waiting on a round (whatever it
    raises, e.g. a cancelled statement, cancels the round and propagates)."""
    from pdbq.inference.coreference.resolve import stable_labels  # noqa: PLC0415 - one relabelling rule for all drivers

    validate_pair_graph(g)
    config.check()
    n = g.indptr.shape[0] - 1
    t0 = time.perf_counter()
    deadline = None if config.time_limit is None else t0 + config.time_limit
    current = np.arange(n, dtype=np.int64) if labels is None else dense_groups(labels)[0]
    client, close = open_client(client, scheduler, processes, config.workers, config.time_limit)
    stopped_by_time = False
    token = uuid.uuid4().hex[:12]
    stop = None if poll is None else f"pdbq-coref-stop-{token}"
    counters = np.zeros(4, np.int64)
    stats: list[RoundStats] = []
    address, n_workers = scheduler_address(client), 0
    try:
        n_workers = len(client.scheduler_info()["workers"])
        (graph_future,) = client.scatter([g], broadcast=True, hash=False)
        cooling = (config.min_temperature / config.temperature) ** (1.0 / max(config.rounds - 1, 1))
        temp = config.temperature
        for r in range(config.rounds + config.greedy_rounds):
            if deadline is not None and time.perf_counter() >= deadline:
                stopped_by_time = True
                break
            greedy = r >= config.rounds
            t = 0.0 if greedy else temp
            t_deal = time.perf_counter()
            deal_rng = np.random.default_rng(np.random.SeedSequence([config.seed, r, 0xDEA1]))
            groups = None
            if config.redistribution == "super" and config.workers > 1:
                groups, reads = affine_groups(g, current, config.super_bias, max_size=max(1, n // config.workers))
                counters[C_EVALS] += reads
            elif config.redistribution == "super_mcmc" and config.workers > 1:
                sup_rng = round_stream(config.seed, r, 1 << 20)
                groups, reads = super_entities(g, current, config.super_bias, LevelMoves(1.0, config.p_new, config.p_split_merge),
                                               max(t, config.min_temperature), sup_rng, counters)
                counters[C_EVALS] += reads
            parts = deal_entities(current, config.workers, deal_rng, groups)
            redistribute = time.perf_counter() - t_deal
            t_round = time.perf_counter()
            # the tasks' own deadline on the workers' clock: a running task Dask cancels does not stop
            task_deadline = None if deadline is None else time.time() + (deadline - time.perf_counter())
            tasks = [
                RoundTask(r, p, part, current[part], config.steps_per_round, t, config.seed, config.hierarchy,
                          config.sub_bias, config.p_new, config.p_split_merge, task_deadline, stop)
                for p, part in enumerate(parts)
            ]
            done = round_or_cut(client, stop, lambda: run_round(
                client, run_partition, [graph_future], lambda: client.scatter([g], broadcast=True, hash=False), tasks,
                f"pdbq-coref-{token}-r{r}", config.retries, f"distributed round {r}", deadline=deadline, poll=poll))
            if done is None:  # the limit came first: this round is dropped, the last one's labels kept
                stopped_by_time = True
                break
            results, (graph_future,), reruns = done.results, done.shared, done.reruns
            if any(res.cut for res in results):  # a task stopped at the limit: no round's result
                stopped_by_time = True
                break
            wall = time.perf_counter() - t_round
            check_partition(n, parts, results)
            before = int(counters[C_ACCEPTED])
            new = np.empty(n, np.int64)
            base = 0
            for part, res in zip(parts, results):
                new[part] = base + res.labels
                base += part.shape[0]
                counters += res.counters
            current = new
            secs = [res.seconds for res in results]
            sent = sum(task.mentions.nbytes + task.labels.nbytes for task in tasks)
            received = sum(res.labels.nbytes + res.counters.nbytes for res in results)
            round_stats = RoundStats(r, t, wall, max(secs, default=0.0), float(sum(secs)), redistribute,
                                     int(counters[C_ACCEPTED]) - before, reruns, sent, received)
            stats.append(round_stats)
            if on_round is not None:
                on_round(round_stats, client)
            if greedy and round_stats.accepted == 0:
                break
            temp = max(temp * cooling, config.min_temperature)
    finally:
        close()
    return DistributedResult(
        stable_labels(current), float(partition_score(g, current)), int(counters[C_EVALS]), int(counters[C_PROPOSALS]),
        int(counters[C_ACCEPTED]), time.perf_counter() - t0, config.workers, tuple(stats), address, n_workers,
        stopped_by_time,
    )
