"""Sharded coreference MAP on Dask: shards that live on the workers, rounds that move nothing.

`resolve_distributed` ships the whole pair graph to every worker and deals the entities again
every round, so memory per worker and the client's work per round grow with all the pairs. When
the candidate pairs come from blocking (every pair inside one block: a name, a postcode…), no
entity can gain from spanning two blocks, so a partition of the *blocks* never has to change:

1. **plan** (client, once): the blocks' mention and pair counts (one DuckDB aggregate over the
   Parquet files, O(blocks) rows back) and the links between blocks that a candidate pair
   crosses (O(linked block pairs) rows); linked blocks form a group that stays on one shard, so
   no pair ever crosses two shards; the groups are dealt to ``workers`` shards greedily by pair
   count, largest first — balanced, and the same for the same data and ``workers``;
2. **build** (each worker, once): the worker reads its own blocks' mentions and pairs from the
   Parquet files with DuckDB and keeps its shard's pair graph and labels in its memory —
   nothing is scattered from the client, and a worker holds only its shard;
3. **rounds**: every round the client sends each shard a few numbers (round, temperature,
   steps) and gets a few back (mentions held, accepted moves, seconds); the annealing schedule,
   the greedy rounds and their stop are those of `resolve_distributed`;
4. **labels** (once, at the end): each shard returns its mentions and labels.

Checks: a worker refuses a pair whose second mention lies outside its shard (`InferenceError`
naming it: the files changed after the plan, so the shard would lose factors); every round each
shard reports the mentions it holds and the client checks they add up to the plan's; at the
end every mention comes back exactly once.

Determinism and faults: a shard's round is a pure function of (data, plan, seed, round), its
stream from `tasks.round_stream(seed, round, shard)`. A round task that finds no state for its
shard on its worker (the worker died, Dask moved the task) rebuilds the shard from the Parquet
files and replays the rounds before it, so the answer is that of an undisturbed run, at the cost
of the replay (no checkpoint is kept).

Where the data must be: every worker reads the Parquet files itself, so they must be reachable
at the same paths from every worker (a local cluster, or shared storage).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from pdbq.coref.contract import dense_groups
from pdbq.coref.layout import PairGraph, pair_graph
from pdbq.distributed.cluster import RoundCut, lost, open_client, raise_stop, run_round, scheduler_address
from pdbq.distributed.config import DistributedConfig
from pdbq.distributed.shard_plan import (ShardPlan, ShardSource, duckdb_connect, plan_shards, shard_by_components,
                                          write_pairs)
from pdbq.distributed.tasks import RoundTask, timed_round
from pdbq.errors import InferenceError, OptionError
from pdbq.inference.coreference.entity_moves import C_ACCEPTED, C_EVALS, C_PROPOSALS

__all__ = ["ShardSource", "ShardPlan", "ShardedResult", "plan_shards", "resolve_sharded", "write_pairs",
           "shard_by_components"]


# ---------------------------------------------------------------------------------------------
# on the workers


class ShardRound(NamedTuple):
    token: str  # the run
    shard: int
    blocks: np.ndarray  # the shard's block ids (to rebuild it)
    round: int
    temperatures: tuple[float, ...]  # of rounds 0..round (replayed after a rebuild)
    steps: int  # proposals per round of this shard
    config: DistributedConfig
    # `time.time()` instant (the workers' clocks) at which the moves stop, the round then ``cut``
    # and the shard left as it was: a cancelled Dask task that already runs is not stopped
    deadline: float | None = None
    stop_event: str | None = None  # the client's stop flag for a cancelled statement (`cluster.raise_stop`)


class ShardReport(NamedTuple):
    shard: int
    mentions: int  # held after the round
    accepted: int
    seconds: float
    replayed: int  # rounds replayed before this one (0 when the shard's state was here)
    worker: str  # the worker that now holds the shard
    evaluations: int = 0  # pair-score reads of this call (replayed rounds included)
    proposals: int = 0
    cut: bool = False  # the deadline stopped the moves: the shard holds its last finished round


@dataclass
class _Shard:
    graph: PairGraph
    mentions: np.ndarray  # global ids, sorted
    labels: np.ndarray  # local dense labels
    done: int  # rounds run


_HELD: dict[tuple[str, int], _Shard] = {}  # per worker process: the shards it holds
_LOCK = threading.Lock()


def build_shard(source: ShardSource, blocks: np.ndarray) -> tuple[PairGraph, np.ndarray, np.ndarray]:
    """The shard's pair graph over its own mentions (local indices: rank among the sorted global
    ids), those ids and their starting labels (the source's ``init`` column, else singletons),
    read from the Parquet files by this process."""
    import pyarrow as pa  # noqa: PLC0415

    con = duckdb_connect()
    try:
        con.register("shard_blocks", pa.table({"block": np.asarray(blocks, np.int64)}))
        names = [d[0] for d in con.execute("SELECT * FROM read_parquet(?) LIMIT 0", [source.mentions]).description]
        init_col = ", init" if "init" in names else ""
        m = con.execute(f"SELECT mention{init_col} FROM read_parquet(?) WHERE block IN (SELECT block FROM shard_blocks) "
                        "ORDER BY mention", [source.mentions]).fetchnumpy()
        mentions = np.asarray(m["mention"], np.int64)
        con.register("shard_mentions", pa.table({"mention": mentions}))
        p = con.execute("SELECT a, b, score FROM read_parquet(?) WHERE a IN (SELECT mention FROM shard_mentions)",
                        [source.pairs]).fetchnumpy()
    finally:
        con.close()
    init = dense_groups(np.asarray(m["init"], np.int64))[0] if init_col else np.arange(mentions.size, dtype=np.int64)
    a, b, w = (np.asarray(p[c]) for c in ("a", "b", "score"))
    ia = np.searchsorted(mentions, a)
    ib = np.searchsorted(mentions, b)
    if b.size:
        outside = mentions[np.minimum(ib, mentions.size - 1)] != b
        if outside.any():
            k = int(np.flatnonzero(outside)[0])
            raise InferenceError(f"pair ({int(a[k])}, {int(b[k])}) has its second mention outside its shard: the "
                                 "Parquet files changed after the shards were planned")
    return pair_graph(mentions.size, ia, ib, np.asarray(w, np.float64)), mentions, init


def shard_round(source: ShardSource, task: ShardRound) -> ShardReport:
    """Round ``task.round`` of one shard, on the worker that holds it (module docstring). At
    ``task.deadline`` the moves stop and the shard keeps the last round it finished (``cut``)."""
    t0 = time.perf_counter()
    key = (task.token, task.shard)
    with _LOCK:
        held = _HELD.get(key)
    replayed = 0
    if held is None or held.done != task.round:
        g, mentions, init = build_shard(source, task.blocks)
        held = _Shard(g, mentions, init, 0)
        replayed = task.round
    cfg = task.config
    counters = np.zeros(4, np.int64)
    local = np.arange(held.mentions.size, dtype=np.int64)
    labels, done, cut = held.labels, held.done, False
    while done <= task.round:
        r = done
        before = counters.copy()  # the report counts the task's own round, not the replayed ones
        rt = RoundTask(r, task.shard, local, labels, task.steps, task.temperatures[r], cfg.seed, cfg.hierarchy,
                       cfg.sub_bias, cfg.p_new, cfg.p_split_merge, task.deadline, task.stop_event)
        out, finished = timed_round(held.graph, rt, counters)
        if not finished:
            cut = True
            break
        if out.shape[0] != held.mentions.size:
            raise InferenceError(f"shard {task.shard} returned {out.shape[0]} labels for {held.mentions.size} mentions")
        labels, done = out, done + 1
    own = counters - before
    with _LOCK:
        held.labels, held.done = labels, done
        _HELD[key] = held
    return ShardReport(task.shard, int(held.mentions.size), int(own[C_ACCEPTED]), time.perf_counter() - t0, replayed,
                       _worker(), int(own[C_EVALS]), int(own[C_PROPOSALS]), cut)


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
    return held.mentions, held.labels


def release(token: str) -> int:
    """Drop every shard of run ``token`` this process holds; returns how many."""
    with _LOCK:
        keys = [k for k in _HELD if k[0] == token]
        for k in keys:
            del _HELD[k]
    return len(keys)


# ---------------------------------------------------------------------------------------------
# the client


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

    def summary(self) -> dict:
        """Where the run's time went, for diagnostics (the keys of
        `pdbq.distributed.runner.DistributedResult.summary`, and ``mode``: 'sharded')."""
        return {"mode": "sharded", "scheduler": self.scheduler, "dask_workers": self.dask_workers,
                "groups": len(self.plan.blocks), "rounds": len(self.rounds), "wall": sum(r.wall for r in self.rounds),
                "compute_max": sum(r.compute_max for r in self.rounds),
                "compute_sum": sum(r.compute_sum for r in self.rounds), "redistribute": 0.0,
                "overhead": sum(r.overhead for r in self.rounds), "reruns": sum(r.reruns for r in self.rounds),
                "replayed": sum(r.replayed for r in self.rounds), "bytes_sent": sum(r.bytes_sent for r in self.rounds),
                "cross_pairs": self.plan.cross_pairs,
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
                    poll: Callable[[], None] | None = None) -> ShardedResult:
    """Annealed MAP clustering from singletons by rounds over shards of blocks that live on the
    workers (module docstring). ``config.steps_per_round`` proposals per shard and round on
    average (each shard gets its share of ``workers`` × that, by mentions); ``redistribution``
    does not apply (shards never change). ``on_round(stats, client)`` after each round.
    ``config.time_limit`` holds inside a round: its tasks stop their moves at the deadline and
    the client cancels a round still running then; each shard keeps the last round it finished
    (shards share no pair, so together they are a clustering). ``poll()`` is called while
    waiting on a round (whatever it raises, a cancelled statement, cancels it and propagates)."""
    config.check()
    if config.redistribution != "super":
        raise OptionError("sharded rounds keep each shard's blocks for the whole run: option 'redistribution' "
                          "does not apply (leave it at its default)")
    t0 = time.perf_counter()
    deadline = None if config.time_limit is None else t0 + config.time_limit
    plan = plan_shards(source, config.workers)
    n = int(plan.mentions.sum())
    temps = _temperatures(config)
    budget = config.steps_per_round * config.workers
    steps = [max(1, int(budget * m // max(n, 1))) for m in plan.mentions.tolist()]
    client, close = open_client(client, scheduler, processes, config.workers, config.time_limit)
    token = uuid.uuid4().hex[:12]
    stop = None if poll is None else f"pdbq-shard-stop-{token}"
    stats: list[ShardedRound] = []
    where: list[str | None] = [None] * config.workers  # the worker holding each shard
    stopped_by_time = False
    try:
        n_workers = len(client.scheduler_info()["workers"])
        for r, t in enumerate(temps):
            if deadline is not None and time.perf_counter() >= deadline:
                stopped_by_time = True  # no round starts after the time limit: the last round's clustering
                break
            # the tasks' own deadline on the workers' clock
            task_deadline = None if deadline is None else time.time() + (deadline - time.perf_counter())
            tasks = [ShardRound(token, s, plan.blocks[s], r, tuple(temps[: r + 1]), steps[s], config, task_deadline,
                                stop) for s in range(config.workers)]
            try:
                done = run_round(client, shard_round, [source], lambda: [source], tasks, f"pdbq-shard-{token}-r{r}",
                                 config.retries, f"sharded round {r}", placement=where, deadline=deadline, poll=poll)
            except RoundCut:  # the shards keep their last finished round
                stopped_by_time = True
                break
            except BaseException:
                if stop is not None:  # a cancel: the running tasks stop themselves (closing waits for them)
                    raise_stop(client, stop)
                raise
            reports = sorted(done.results, key=lambda x: x.shard)
            if any(x.cut for x in reports):
                stopped_by_time = True
                break
            where = [x.worker or None for x in reports]
            held = np.array([x.mentions for x in reports], np.int64)
            if not np.array_equal(held, plan.mentions):
                bad = int(np.flatnonzero(held != plan.mentions)[0])
                raise InferenceError(f"sharded round {r}: shard {bad} holds {held[bad]} mentions, the plan gave it "
                                     f"{plan.mentions[bad]}")
            secs = [x.seconds for x in reports]
            st = ShardedRound(r, t, done.wall, max(secs), float(sum(secs)), sum(x.accepted for x in reports),
                              sum(1 for x in reports if x.replayed), done.reruns,
                              sum(task.blocks.nbytes + 8 * len(task.temperatures) for task in tasks),
                              sum(x.evaluations for x in reports), sum(x.proposals for x in reports))
            stats.append(st)
            if on_round is not None:
                on_round(st, client)
            if r >= config.rounds and st.accepted == 0:
                break
        labels = _gather_labels(client, token, plan, n, len(stats) - 1, temps, steps, config, source, where)
        address = scheduler_address(client)
    finally:
        try:
            client.run(release, token)
        except Exception:  # noqa: BLE001 - a worker lost at the very end holds nothing to release
            pass
        close()
    from pdbq.inference.coreference.resolve import stable_labels  # noqa: PLC0415 - one relabelling rule for all drivers

    return ShardedResult(stable_labels(labels), plan, tuple(stats), time.perf_counter() - t0, address, n_workers,
                         stopped_by_time)


def _gather_labels(client, token, plan: ShardPlan, n: int, last: int, temps, steps, config, source,
                   where: list[str | None]) -> np.ndarray:
    """Every shard's labels from the worker holding it (a shard whose worker died since the last
    round is rebuilt and replayed first), checked: every mention exactly once."""
    out = np.full(n, -1, np.int64)
    base = 0
    alive = set(client.scheduler_info()["workers"])

    def read(s: int, worker: str | None):
        # a preference, not a restriction: pinned to a worker that dies meanwhile, the task would
        # wait for it forever; run elsewhere it finds no shard and the shard is replayed
        pin = dict(workers=[worker], allow_other_workers=True) if worker in alive else {}
        return client.submit(shard_labels, token, s, pure=False, **pin).result()

    for s in range(config.workers):
        try:
            mentions, labels = read(s, where[s])
        except Exception as exc:  # not held any more (or its worker died): replay it, then read it there
            if not (isinstance(exc, InferenceError) or lost(exc)):
                raise
            task = ShardRound(token, s, plan.blocks[s], last, tuple(temps[: last + 1]), steps[s], config)
            report = client.submit(shard_round, source, task, pure=False).result()
            alive = set(client.scheduler_info()["workers"])
            mentions, labels = read(s, report.worker or None)
        if mentions.size and (out[mentions] >= 0).any():
            raise InferenceError(f"shard {s} returned mention {int(mentions[out[mentions] >= 0][0])} twice")
        out[mentions] = base + labels
        base += mentions.size
    if (out < 0).any():
        raise InferenceError(f"mention {int(np.flatnonzero(out < 0)[0])} came back from no shard")
    return out
