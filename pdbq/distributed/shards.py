"""Sharded coreference MAP on Dask: shards that live on the workers, rounds that cost what moved.

`resolve_distributed` ships the whole pair graph to every worker and deals the entities again
every round, so memory per worker and the client's work per round grow with all the pairs. Here
each worker builds and keeps its own shard:

1. **plan** (client, once, `shard_plan.plan_shards`): the blocks' mention and pair counts (one
   DuckDB aggregate over the Parquet files) and the links between blocks that a candidate pair
   crosses; linked blocks form a group dealt whole, largest pair count first, to the shard with
   the fewest pairs. A group with more pairs than a shard's share is split (a breadth-first
   partition of its pairs, read once): its pieces are dealt like groups and the pairs between
   two shards are the run's **cut pairs**;
2. **build** (each worker, once): the worker reads its mentions and their pairs from the Parquet
   files with DuckDB and keeps its shard (`shard_state.Held`: the pairs it holds both mentions of,
   its cut pairs, labels) — nothing is scattered from the client;
3. **rounds**: every round each shard runs its moves on the entities it holds, scored exactly
   (an entity lives on one shard at a time) and reports a few numbers. With cut pairs it also
   reports its cut pairs summed by (entity, mention across), from which the client decides which
   entities should meet on one shard (`shard_colocate.colocate`); before the next round's moves
   those entities leave their shard with every pair of their mentions and travel worker to
   worker as Dask futures to the shard that takes them in (`shard_tasks`). The client reads
   O(cut pairs) and sends O(moved entities) per round; the annealing schedule, the greedy rounds
   and their stop are those of `resolve_distributed`;
4. **labels** (once, at the end): each shard returns its mentions and labels.

Checks: a worker refuses a pair from a mention of a whole block to a mention outside its shard
(`InferenceError` naming it: the files changed after the plan); every round the mentions each
shard holds must be what the plan and the moves between shards say, and what arrives must be what
was sent; at the end every mention comes back exactly once.

Determinism and faults: a shard's round is a pure function of (data, plan, seed, round, the
moves between shards before it), its stream from `tasks.round_stream(seed, round, shard)`, and
the moves are a pure function of the shards' reports. A task that finds no state for its shard
(the worker died, Dask moved the task) rebuilds the shard from the files and replays the rounds
before it — by itself when shards never exchange entities, else every shard from the files and
the moves the client booked (the mentions that arrived, not their pairs: those are read again) —
so the answer is that of an undisturbed run, at the cost of the replay (no checkpoint is kept).

Where the data must be: every worker reads the Parquet files itself, so they must be reachable
at the same paths from every worker (a local cluster, or shared storage); or, with ``ship``, this
process sends each shard's rows to its worker once (`shard_shipping`).
"""

from __future__ import annotations

import operator
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pdbq.distributed.cluster import await_round, lost, open_client, pinned, round_or_cut, scheduler_address
from pdbq.distributed.config import DistributedConfig
from pdbq.distributed.shard_colocate import colocate
from pdbq.distributed.shard_plan import ShardPlan, ShardSource, plan_shards, shard_by_components, write_pairs
from pdbq.distributed.shard_state import ShardLost
from pdbq.distributed.shard_tasks import (_HELD, _LOCK, ShardReport, ShardRound, release, sent_count, shard_export,
                                          shard_labels, shard_rebuild, shard_round)
from pdbq.errors import InferenceError, OptionError

__all__ = ["ShardSource", "ShardPlan", "ShardedResult", "ShardedRound", "plan_shards", "resolve_sharded", "write_pairs",
           "shard_by_components", "ShardReport", "ShardRound", "_HELD", "_LOCK"]


@dataclass(frozen=True)
class ShardedRound:
    round: int
    temperature: float
    wall: float
    compute_max: float
    compute_sum: float
    accepted: int
    replayed: int  # shards rebuilt and replayed in this round
    reruns: int
    bytes_sent: int = 0  # array bytes of the round's tasks (each shard's block ids)
    evaluations: int = 0  # pair-score reads of the round's moves
    proposals: int = 0
    moved: int = 0  # mentions that changed shards before the round's moves (with their entities)
    bytes_moved: int = 0  # bytes of their packages (ids, keys, pair lists), worker to worker
    bytes_boundary: int = 0  # bytes of the shards' boundary summaries the client read

    @property
    def overhead(self) -> float:
        """Seconds of the round not spent computing on the slowest shard."""
        return max(0.0, self.wall - self.compute_max)


@dataclass(frozen=True, eq=False)
class ShardedResult:
    """The MAP clustering (``labels[m]``: smallest mention index of m's entity) and the run."""

    labels: np.ndarray
    plan: ShardPlan
    rounds: tuple[ShardedRound, ...]
    seconds: float
    scheduler: str
    dask_workers: int = 0
    stopped_by_time: bool = False  # time_limit ended the run before its planned rounds
    shipped: int = 0  # bytes of shard rows this process sent to the workers (0: they read the files)
    resent: int = 0  # shards' rows sent again after their worker was lost

    def summary(self) -> dict:
        """Where the run's time went, for diagnostics (the keys of
        `pdbq.distributed.runner.DistributedResult.summary`, and ``mode``: 'sharded')."""
        return {"mode": "sharded", "scheduler": self.scheduler, "dask_workers": self.dask_workers,
                "groups": len(self.plan.blocks), "rounds": len(self.rounds), "wall": sum(r.wall for r in self.rounds),
                "compute_max": sum(r.compute_max for r in self.rounds),
                "compute_sum": sum(r.compute_sum for r in self.rounds), "redistribute": 0.0,
                "overhead": sum(r.overhead for r in self.rounds), "reruns": sum(r.reruns for r in self.rounds),
                "replayed": sum(r.replayed for r in self.rounds), "bytes_sent": sum(r.bytes_sent for r in self.rounds),
                "cross_pairs": self.plan.cross_pairs, "cut_pairs": self.plan.cut_pairs,
                "split_groups": self.plan.split_groups, "moved": sum(r.moved for r in self.rounds),
                "bytes_moved": sum(r.bytes_moved for r in self.rounds),
                "bytes_boundary": sum(r.bytes_boundary for r in self.rounds),
                "source": "shipped" if self.shipped else "files", "bytes_shipped": self.shipped, "resent": self.resent,
                "shard_mentions_max": int(self.plan.mentions.max()) if self.plan.mentions.size else 0}

    def efficiency(self) -> float:
        """Compute summed over shards ÷ (shards × round time)."""
        busy = sum(r.compute_sum for r in self.rounds)
        span = sum(r.wall for r in self.rounds)
        return busy / (len(self.plan.blocks) * span) if span > 0 else 0.0


def _temperatures(config: DistributedConfig) -> list[float]:
    """Annealed rounds then greedy ones (temperature 0), as `resolve_distributed` runs them."""
    cooling = (config.min_temperature / config.temperature) ** (1.0 / max(config.rounds - 1, 1))
    out, temp = [], config.temperature
    for _ in range(config.rounds):
        out.append(temp)
        temp = max(temp * cooling, config.min_temperature)
    return out + [0.0] * config.greedy_rounds


def resolve_sharded(source: ShardSource, config: DistributedConfig = DistributedConfig(), *, client: Any = None,
                    scheduler: str | None = None, processes: bool = False, on_round=None,
                    poll: Callable[[], None] | None = None, split: bool = True, ship: bool = False) -> ShardedResult:
    """Annealed MAP clustering from singletons by rounds over shards that live on the workers
    (module docstring). ``config.steps_per_round`` proposals per shard and round on average
    (each shard gets its share of ``workers`` × that, by the mentions it holds); a group of
    linked blocks too big for one shard is split over several (``split``; else kept whole) and
    entities then change shards between rounds; ``redistribution`` does not apply.
    ``on_round(stats, client)`` after each round. ``config.time_limit`` holds inside a round:
    its tasks stop their moves at the deadline and the client cancels a round still running
    then; each shard keeps its entities as they were before the moves it did not finish.
    ``poll()`` is called while waiting on a round (whatever it raises, a cancelled statement,
    cancels it and propagates). ``ship``: this process cuts the shards from the files and sends
    each one's rows to its worker (`shard_shipping`: for a cluster that cannot read the files)
    instead of the workers reading them."""
    config.check()
    if config.redistribution != "super":
        raise OptionError("sharded rounds move entities between shards only across the pairs that join them: "
                          "option 'redistribution' does not apply (leave it at its default)")
    if not split and config.super_bias != DistributedConfig().super_bias:
        raise OptionError("option 'super_bias' has no effect on sharded rounds whose groups stay whole (split=False): "
                          "it decides which entities move between shards")
    t0 = time.perf_counter()
    deadline = None if config.time_limit is None else t0 + config.time_limit
    plan = plan_shards(source, config.workers, split=split)
    run = _Run(source, plan, config, _temperatures(config), uuid.uuid4().hex[:12])
    client, close = open_client(client, scheduler, processes, config.workers, config.time_limit)
    stop = None if poll is None else f"pdbq-shard-stop-{run.token}"
    stats: list[ShardedRound] = []
    stopped_by_time = False
    try:
        if ship:
            from pdbq.distributed.shard_shipping import ship_shards  # noqa: PLC0415 - shipping imports this package

            run.shipment = ship_shards(client, source, plan)
        n_workers = len(client.scheduler_info()["workers"])
        for r, t in enumerate(run.temps):
            if deadline is not None and time.perf_counter() >= deadline:
                stopped_by_time = True  # no round starts after the time limit: the last round's clustering
                break
            # the tasks' own deadline on the workers' clock
            task_deadline = None if deadline is None else time.time() + (deadline - time.perf_counter())
            tasks = run.tasks(r, task_deadline, stop)
            # past the deadline, the tasks' own reports of where their moves stopped are awaited a
            # little (a few measured round trips) before the round is cancelled
            grace = 0.2 + 3 * max((x.overhead for x in stats), default=0.05)
            until = None if deadline is None else deadline + grace
            done = round_or_cut(client, stop, lambda: _exchange_round(
                client, run, tasks, f"pdbq-shard-{run.token}-r{r}", until, poll))
            if done is None:  # the limit came first: this round is dropped
                stopped_by_time = True
                break
            reports, wall, reruns = done
            if any(x.cut for x in reports):
                stopped_by_time = True
                break
            secs = [x.seconds for x in reports]
            run.check_and_book(r, tasks, reports)
            st = ShardedRound(r, t, wall, max(secs), float(sum(secs)), sum(x.accepted for x in reports),
                              sum(1 for x in reports if x.replayed), reruns,
                              sum(_task_bytes(task) for task in tasks), sum(x.evaluations for x in reports),
                              sum(x.proposals for x in reports),
                              sum(ids.size for x in reports for _, ids, _ in x.arrivals),
                              sum(x.bytes_in for x in reports),
                              sum(x.boundary.nbytes for x in reports if x.boundary is not None))
            stats.append(st)
            if on_round is not None:
                on_round(st, client)
            if r >= config.rounds and st.accepted == 0 and not run.sends:
                break
        labels = _gather_labels(client, run, len(stats) - 1)
        address = scheduler_address(client)
    finally:
        try:
            client.run(release, run.token, finished=True)
        except Exception:  # noqa: BLE001 - a worker lost at the very end holds nothing to release
            pass
        close()
    from pdbq.inference.coreference.resolve import stable_labels  # noqa: PLC0415 - one relabelling rule for all drivers

    shipment = run.shipment
    return ShardedResult(stable_labels(labels), plan, tuple(stats), time.perf_counter() - t0, address, n_workers,
                         stopped_by_time, 0 if shipment is None else shipment.shipped,
                         0 if shipment is None else shipment.resent)


def _task_bytes(task: ShardRound) -> int:
    return int(task.blocks.nbytes + 8 * len(task.temperatures) + (0 if task.split is None else task.split.nbytes)
               + sum(k.nbytes for _, k in task.sends))


class _Run:
    """The client's side of one run: the plan, where each shard is, what each holds, the moves
    decided for the next round and, when entities change shards, the history a replay needs."""

    def __init__(self, source: ShardSource, plan: ShardPlan, config: DistributedConfig, temps: list[float], token: str):
        self.source, self.plan, self.config, self.temps, self.token = source, plan, config, temps, token
        self.workers = config.workers
        self.n = int(plan.mentions.sum())
        self.mobile = plan.cut_pairs > 0
        self.split = plan.split or tuple(np.zeros(0, np.int64) for _ in range(self.workers))
        self.loads = plan.mentions.astype(np.int64).copy()  # mentions each shard holds
        self.after = self.loads.copy()  # ... after the next round's moves between shards
        self.sends: dict = {}  # shard -> its sends before the next round
        self.history: list[dict[int, tuple]] = []  # per finished round: shard -> (steps, sends, arrivals)
        self.where: list[str | None] = [None] * self.workers  # the worker holding each shard
        # a group gathers on one shard only up to a shard's share of the mentions, and no shard
        # grows past a quarter above the largest planned one (it would set the rounds' time)
        self.max_group = max(1, self.n // self.workers)
        self.max_load = int(np.ceil(1.25 * int(plan.mentions.max()))) if plan.mentions.size else 0
        self.shipment = None  # `shard_shipping.Shipment`: each shard's rows sent to its worker

    def source_for(self, task: ShardRound) -> Any:
        """What ``task`` reads its shard's rows from: the files, or the future of its shipped rows
        (for a replay that takes in entities, with the pairs of the mentions that arrive)."""
        if self.shipment is None:
            return self.source
        arrived = [ids for _, _, arrivals in (task.history or ()) for _, ids, _ in arrivals]
        if task.mobile and arrived:
            return self.shipment.for_replay(task.shard, np.concatenate(arrived))
        return self.shipment.futures[task.shard]

    def reship(self) -> None:
        """Send again the shipped rows lost with their workers (nothing when the workers read files)."""
        if self.shipment is not None:
            self.shipment.reship(self.where)

    def steps(self) -> list[int]:
        budget = self.config.steps_per_round * self.workers
        return [max(1, int(budget * m // max(self.n, 1))) for m in self.after.tolist()]

    def tasks(self, r: int, deadline: float | None, stop: str | None) -> list[ShardRound]:
        steps = self.steps()
        first = r == 0 or not self.mobile
        out = []
        for s in range(self.workers):
            sources = tuple(src for src in sorted(self.sends) for d, _ in self.sends[src] if d == s)
            out.append(ShardRound(self.token, s, self.plan.blocks[s], r, tuple(self.temps[: r + 1]), steps[s],
                                  self.config, deadline, stop, self.split[s] if first else None,
                                  self.sends.get(s, ()), sources, () if first else None, self.mobile))
        return out

    def replay(self, task: ShardRound) -> ShardRound:
        """``task`` with what rebuilding its shard needs (the plan's split mentions, the history)."""
        if not self.mobile:
            return task
        hist = tuple(h[task.shard] for h in self.history[: task.round])
        return task._replace(split=self.split[task.shard], history=hist)

    def check_and_book(self, r: int, tasks: list[ShardRound], reports: list[ShardReport]) -> None:
        """Every mention held by exactly the shards the moves said (`InferenceError` else); then
        the round booked and the next round's moves decided from the shards' boundaries."""
        held = np.array([x.mentions for x in reports], np.int64)
        if held.sum() != self.n or not np.array_equal(held, self.after):
            bad = int(np.flatnonzero(held != self.after)[0]) if held.shape == self.after.shape else 0
            raise InferenceError(f"sharded round {r}: shard {bad} holds {held[bad]} mentions, {self.after[bad]} were "
                                 f"expected ({held.sum()} of {self.n} in all)")
        for task, x in zip(tasks, reports):
            for src, ids, keys in x.arrivals:
                want = dict(self.sends[src])[task.shard]
                if not np.array_equal(np.unique(keys), want):
                    raise InferenceError(f"sharded round {r}: shard {task.shard} received other entities from shard "
                                         f"{src} than were sent")
        self.where = [x.worker or None for x in reports]
        self.loads = held
        if not self.mobile:
            return
        self.history.append({x.shard: (task.steps, task.sends, x.arrivals) for task, x in zip(tasks, reports)})
        self.sends, self.after = colocate([x.boundary for x in reports], held, self.config.super_bias,
                                          self.max_group, self.max_load)


def _exchange_round(client, run: _Run, tasks: list[ShardRound], key: str, deadline: float | None,
                    poll: Callable[[], None] | None) -> tuple[list[ShardReport], float, int]:
    """Submit one round: each sending shard's export, its packages to their shards' round tasks
    (worker to worker: Dask moves a package to the task that takes it), every shard's round.
    One task per shard on the worker holding it (a preference: a shard whose worker died runs
    elsewhere). A shard lost with its worker (`ShardLost`, or the cluster's own loss): every
    shard is dropped and rebuilt from the files and the history, and the round submitted again,
    up to ``retries`` times; a shard that never exchanges entities replays itself instead.
    Returns the reports in shard order, the wall time and the re-submissions."""
    t0 = time.perf_counter()
    attempt = 0
    while True:
        alive = sorted(client.scheduler_info()["workers"])

        def pin(s: int) -> dict:
            return pinned(run.where[s], alive, s)

        parcels: dict[int, list] = {s: [] for s in range(len(tasks))}
        sent: dict[int, Any] = {}  # a shard's round waits for its own export (they share its state)
        futures = []
        for t in tasks:
            if t.sends:
                f = client.submit(shard_export, run.source_for(t), t, key=f"{key}-x{t.shard}-a{attempt}", pure=False,
                                  **pin(t.shard))
                sent[t.shard] = client.submit(sent_count, f, key=f"{key}-n{t.shard}-a{attempt}", pure=False)
                futures += [f, sent[t.shard]]
                for i, (d, _) in enumerate(t.sends):
                    g = client.submit(operator.getitem, f, i, key=f"{key}-x{t.shard}-{d}-a{attempt}", pure=False)
                    futures.append(g)
                    parcels[d].append(g)
        rounds = [client.submit(shard_round, run.source_for(t), t, sent.get(t.shard, 0), *parcels[t.shard],
                                key=f"{key}-t{t.shard}-a{attempt}", pure=False, **pin(t.shard)) for t in tasks]
        futures += rounds
        await_round(client, futures, rounds, deadline, poll, f"sharded round {tasks[0].round}")
        try:
            return sorted(client.gather(rounds), key=lambda x: x.shard), time.perf_counter() - t0, attempt
        except Exception as exc:
            if not (isinstance(exc, ShardLost) or lost(exc)):
                raise
            client.cancel(futures)
            if attempt == run.config.retries:
                raise InferenceError(f"sharded round {tasks[0].round} failed {attempt + 1} times (the cluster lost "
                                     f"workers or shards: {type(exc).__name__}: {exc})") from exc
            attempt += 1
            run.reship()
            if run.mobile:
                client.run(release, run.token)
            tasks = [run.replay(t) for t in tasks]


def _gather_labels(client, run: _Run, last: int) -> np.ndarray:
    """Every shard's labels from the worker holding it, checked: every mention exactly once.
    A shard whose worker died since is rebuilt from the files and replayed to the end of the last
    finished round first; when entities change shards, every shard is (a shard is missing, or the
    shards do not add up to a clustering: a round cut between its exports and its arrivals)."""
    out = np.full(run.n, -1, np.int64)
    base = 0
    alive = set(client.scheduler_info()["workers"])
    for s in range(run.workers):
        try:
            mentions, labels = _read(client, run, s, alive)
        except Exception as exc:  # not held any more (or its worker died): rebuild it, then read it there
            if not (isinstance(exc, InferenceError) or lost(exc)):
                raise
            if run.mobile:
                return _rebuild_all(client, run, last)
            run.where[s] = _rebuild(client, run, s, last).result() or None
            alive = set(client.scheduler_info()["workers"])
            mentions, labels = _read(client, run, s, alive)
        if mentions.size and (out[mentions] >= 0).any():
            if run.mobile:
                return _rebuild_all(client, run, last)
            raise InferenceError(f"shard {s} returned mention {int(mentions[out[mentions] >= 0][0])} twice")
        out[mentions] = base + labels
        base += mentions.size
    if (out < 0).any():
        if run.mobile:
            return _rebuild_all(client, run, last)
        raise InferenceError(f"mention {int(np.flatnonzero(out < 0)[0])} came back from no shard")
    return out


def _read(client, run: _Run, s: int, alive: set) -> tuple[np.ndarray, np.ndarray]:
    worker = run.where[s]
    # a preference, not a restriction: pinned to a worker that dies meanwhile, the task would
    # wait for it forever; run elsewhere it finds no shard and the shard is rebuilt
    pin = dict(workers=[worker], allow_other_workers=True) if worker in alive else {}
    return client.submit(shard_labels, run.token, s, pure=False, **pin).result()


def _rebuild(client, run: _Run, s: int, last: int):
    """A future of shard ``s`` rebuilt after rounds 0..``last`` (its worker's address)."""
    steps = run.history[last][s][0] if run.mobile and last >= 0 else run.steps()[s]
    task = ShardRound(run.token, s, run.plan.blocks[s], last, tuple(run.temps[: last + 1]), steps, run.config,
                      split=run.split[s], mobile=run.mobile,
                      history=tuple(h[s] for h in run.history[: last + 1]) if run.mobile else ())
    run.reship()
    return client.submit(shard_rebuild, run.source_for(task), task, pure=False)


def _rebuild_all(client, run: _Run, last: int) -> np.ndarray:
    client.run(release, run.token)
    futures = [_rebuild(client, run, s, last) for s in range(run.workers)]
    for s, f in enumerate(futures):
        run.where[s] = f.result() or None
    out = np.full(run.n, -1, np.int64)
    base = 0
    alive = set(client.scheduler_info()["workers"])
    for s in range(run.workers):
        mentions, labels = _read(client, run, s, alive)
        if mentions.size and (out[mentions] >= 0).any():
            raise InferenceError(f"shard {s} returned mention {int(mentions[out[mentions] >= 0][0])} twice")
        out[mentions] = base + labels
        base += mentions.size
    if (out < 0).any():
        raise InferenceError(f"mention {int(np.flatnonzero(out < 0)[0])} came back from no shard")
    return out
