"""A chain group that lives on a Dask worker and runs a budget-governed run segment by segment.

A run that stops on its ``tolerance`` or at a deadline cannot be cut into groups that each run
to the end on their own: the stopping rule looks at all chains. So each group (chains
``first_chain …`` of the whole run, `GibbsConfig.first_chain`) is built once on a worker
(`gibbs.start_chains`, with the mixing moves of `mixing.mixing_moves` when the run has any) and
kept there between *segments*: a segment runs explicit burn-in, or a few kept rounds, and
returns each kept round's per-chain Rao-Blackwellised sums (`SegmentReport`); the client books
them in the run's `RunBook` exactly as an in-process run books its own rounds
(`pdbq.distributed.chain_rounds`).

A segment is a pure function of the run's inputs and the group's history (burn-in updates made,
kept rounds and their updates): a task that finds no group, or a group with another history (its
worker died, Dask ran the task elsewhere), builds the group again and replays that history
first — the round partition and the moves' adaptation are the same, so the chains are the same.
Only the clock is not replayed: a segment stops at the time it is given (seconds from its start
on the worker, so clocks of different machines never meet).
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from typing import NamedTuple

import numpy as np

from pdbq.distributed.chain_job import ChainJob
from pdbq.distributed.cluster import stop_poll
from pdbq.errors import InferenceError
from pdbq.inference.mcmc.gibbs import Moves, StartedRun, start_chains
from pdbq.inference.moves.cutset import cutset_plan
from pdbq.inference.moves.adaptation import Adapted, BurnStats, adapts
from pdbq.inference.moves.domain_chains import domain_moves
from pdbq.inference.moves.mixing import MixingSetup, MovesReport, mixing_moves, mixing_report

__all__ = ["SegmentTask", "SegmentReport", "GroupShape", "group_segment", "release_groups", "whole"]


def whole(n: int, unit: int) -> int:
    """n rounded up to a positive multiple of unit (0 stays 0), as `run_gibbs` sizes its rounds."""
    return 0 if n <= 0 else -(-n // unit) * unit


class SegmentTask(NamedTuple):
    token: str  # the run
    group: int
    first_chain: int
    chains: int
    burned: int  # the group's history: explicit burn-in updates per chain made so far
    kept: int  # kept rounds booked so far
    kept_updates: int  # their updates per chain
    kind: str  # "open" | "burn" | "keep" | "finish"
    lengths: tuple[int, ...] = ()  # "keep": the rounds' updates per chain; "burn": (updates to reach,)
    seconds: float | None = None  # time left to the run's deadline when sent (None: no deadline)
    burn_seconds: float | None = None  # "burn": time left to burn-in's own limit
    check_hard: bool = False  # "finish": check the chains' states against hard constraints
    # the client's stop flag for a cancelled statement (`cluster.raise_stop`): a running Dask task
    # is not stopped by cancelling it, so the group's chains poll it
    stop_event: str | None = None
    # moves that adapt from all chains (`adaptation`): the client's adaptations so far (one per
    # burn-in round), the latest (to adopt if this group has not), and all of them (only when a
    # group rebuilt elsewhere asked for them to replay its burn-in: ``needs_history``)
    adapted: int = 0
    adaptation: Adapted | None = None
    history: tuple[Adapted, ...] = ()


class GroupShape(NamedTuple):
    """The run's shape as the group's set-up computed it (the client's book needs it)."""

    round_len: int
    unit: int
    moves_burn_in: int  # explicit burn-in the moves need (`Moves.burn_in`)
    constant: np.ndarray  # bool per live target
    independent: bool = False  # `Moves.independent`


class SegmentReport(NamedTuple):
    group: int
    shape: GroupShape | None  # "open" only
    burned: int  # "burn": explicit burn-in updates made in this segment
    cut: bool  # "burn": the time ended burn-in early
    sums: np.ndarray  # "keep": float64[rounds, chains, live, card] of the rounds completed
    counts: np.ndarray  # int64[rounds, chains, live]
    seconds: float  # compute on the worker
    replayed: int  # updates per chain replayed to rebuild the group (0: it was held)
    worker: str
    moves: MovesReport | None = None  # "finish", with mixing moves
    burn_stats: BurnStats | None = None  # "burn" with adapting moves: the round's rows for the client
    needs_history: bool = False  # rebuilt here: send the task again with ``history`` (nothing was run)


class _Group:
    def __init__(self, run: StartedRun, setup: MixingSetup | None):
        self.run, self.setup = run, setup
        self.burned = 0
        self.kept = 0
        self.kept_updates = 0
        self.applied = 0  # the client's adaptations adopted
        # moves that adapt from all chains wait for the client's adaptation after each burn-in round
        self.cycle = setup.made[-1] if setup is not None and setup.made and adapts(setup.mixing) else None
        if self.cycle is not None:
            self.cycle.deferred = True

    def adopt(self, task: SegmentTask) -> None:
        """Adopt the client's latest adaptation unless adopted already."""
        if self.cycle is None or self.applied >= task.adapted:
            return
        if self.applied != task.adapted - 1 or task.adaptation is None:
            raise InferenceError(f"chain group {task.group} on Dask adopted {self.applied} of {task.adapted} "
                                 "adaptations of its moves: it cannot catch up")
        self.cycle.adopt(task.adaptation)
        self.applied += 1


_HELD: dict[tuple[str, int], _Group] = {}  # per worker process: the groups it holds
_LOCK = threading.Lock()
# Runs already released: a segment the client stopped waiting for (late for the deadline) may
# still be running here; when it ends, its group is dropped instead of kept for nobody.
_RELEASED: collections.deque[str] = collections.deque(maxlen=4096)


def _open(job: ChainJob, task: SegmentTask) -> _Group:
    cfg = dataclasses.replace(job.config, chains=task.chains, first_chain=task.first_chain,
                              total_chains=job.config.chains, time_limit=None)
    setup, moves, targets, sites, kernel = None, Moves(), job.targets, job.sites, job.kernel
    if job.cutset is not None:  # every free variable is sampled; the sampled targets were given
        plan = cutset_plan(job.graph, job.targets, job.cutset, kernel=job.kernel)
        moves, targets, sites, kernel = plan.moves, plan.sampled, None, plan.kernel
    elif job.domain:  # AUTO's whole-domain blocks, drawn with their exact marginals
        moves = domain_moves(job.graph, job.blocks, job.sites, job.sweeps)
    elif job.mixing is not None and job.mixing.active:
        setup = mixing_moves(job.graph, job.targets, cfg, job.mixing, sites=job.sites, kernel=job.kernel,
                             blocks=job.blocks, sweeps=job.sweeps)
        moves, kernel = setup.moves, setup.kernel
    # an endless deadline: the run is budget-governed as the client's (its round length, its
    # burn-in share) and its rounds are cut in clock-sized chunks; each segment brings its stop
    # a fixed-length run's rounds are sized as one process sizes them (no deadline)
    run = start_chains(job.graph, targets, cfg, sites=sites, selection=job.selection if job.cutset is None else None,
                       kernel=kernel, deadline=None if job.fixed else float("inf"), moves=moves,
                       poll=stop_poll(task.stop_event), cut_setup=False)
    if run.chains is None:
        raise InferenceError("a chain group on Dask has nothing to sample (no sites or no live target)")
    return _Group(run, setup)


def _replay(g: _Group, task: SegmentTask) -> int:
    """Bring a fresh group to the task's history (module docstring); returns the updates run."""
    ch = g.run.chains
    while g.burned < task.burned:
        m = min(ch.round_len, task.burned - g.burned)
        ch.run_round(m, False, None)
        ch.end_round("burn_in")
        g.burned += m
        if g.cycle is not None and g.applied < len(task.history):  # the client's adaptation of that round
            g.cycle.adopt(task.history[g.applied])
            g.applied += 1
    while g.kept < task.kept:
        m = min(ch.round_len, task.kept_updates - g.kept_updates)
        ch.run_round(m, True, None)
        ch.end_round("kept")
        g.kept += 1
        g.kept_updates += m
    return g.burned + g.kept_updates


def _held(job: ChainJob, task: SegmentTask) -> tuple[_Group | None, int]:
    """The group as the task expects it, rebuilt and replayed if need be; None when replaying
    needs the client's adaptations and the task did not bring them."""
    key = (task.token, task.group)
    with _LOCK:
        g = _HELD.pop(key, None)
    if g is not None and (g.burned, g.kept, g.kept_updates) == (task.burned, task.kept, task.kept_updates):
        return g, 0
    if g is not None and task.kind == "finish" and g.kept >= task.kept:
        return g, 0  # rounds beyond the booked ones ran, then the run stopped: nothing to replay
    if g is not None:
        g.run.chains.close()
    g = _open(job, task)
    if g.cycle is not None and len(task.history) < task.adapted:
        g.run.chains.close()
        return None, 0
    return g, _replay(g, task)


def _burn(g: _Group, target: int, stop_at: float | None, until: float | None) -> tuple[int, bool]:
    """Burn-in rounds up to ``target`` updates per chain: (updates made, cut by the time)."""
    ch, made = g.run.chains, 0
    limit = until if stop_at is None else (stop_at if until is None else min(stop_at, until))
    while g.burned < target:
        n = whole(min(ch.round_len, target - g.burned), ch.unit)
        if limit is not None and time.perf_counter() >= limit:
            return made, True
        m = ch.run_round(n, False, limit)
        ch.end_round("burn_in")  # a cut burn-in round still adapts: nothing was kept
        g.burned += m
        made += m
        if m < n:
            return made, True
    return made, False


def _keep(g: _Group, lengths: tuple[int, ...], stop_at: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Kept rounds of ``lengths`` updates until the time ``stop_at``: their sums and counts."""
    ch = g.run.chains
    sums, counts = [], []
    for n in lengths:
        if stop_at is not None and time.perf_counter() >= stop_at:
            break
        if ch.run_round(n, True, stop_at) < n:
            ch.end_round("cut")
            break
        ch.end_round("kept")
        g.kept += 1
        g.kept_updates += n
        sums.append(ch.rsums.copy())
        counts.append(ch.rcounts.copy())
    shape = ch.rsums.shape
    return (np.stack(sums) if sums else np.zeros((0, *shape)),
            np.stack(counts) if counts else np.zeros((0, *shape[:2]), np.int64))


def group_segment(job: ChainJob, task: SegmentTask) -> SegmentReport:
    """One segment of one group, on the worker that holds it (module docstring)."""
    t0 = time.perf_counter()
    stop_at = None if task.seconds is None else t0 + task.seconds
    g, replayed = _held(job, task)
    if g is None:
        z = np.zeros(0)
        return SegmentReport(task.group, None, 0, False, z, z.astype(np.int64), time.perf_counter() - t0, 0, _worker(),
                             needs_history=True)
    g.adopt(task)
    ch = g.run.chains
    empty = (np.zeros((0,) + ch.rsums.shape), np.zeros((0,) + ch.rcounts.shape, np.int64))
    shape, burned, cut, moves, stats = None, 0, False, None, None
    sums, counts = empty
    if task.kind == "open":
        shape = GroupShape(ch.round_len, ch.unit, int(g.run.plan.burn_in), ch.book.constant, ch.book.independent)
    elif task.kind == "burn":
        until = None if task.burn_seconds is None else t0 + task.burn_seconds
        burned, cut = _burn(g, task.lengths[0], stop_at, until)
        if g.cycle is not None and g.cycle.pending is not None:
            stats, g.cycle.pending = g.cycle.pending.for_shipping(), None
    elif task.kind == "keep":
        sums, counts = _keep(g, task.lengths, stop_at)
    elif task.kind == "finish":
        if task.check_hard:
            ch.check_hard()
        moves = mixing_report(g.setup, task.kept_updates) if g.setup is not None else None
    else:
        raise InferenceError(f"unknown chain-group segment {task.kind!r}")
    with _LOCK:
        keep = task.kind != "finish" and task.token not in _RELEASED
        if keep:
            _HELD[(task.token, task.group)] = g
    if not keep:
        ch.close()
    return SegmentReport(task.group, shape, burned, cut, sums, counts, time.perf_counter() - t0, replayed,
                         _worker(), moves, stats)


def _worker() -> str:
    from distributed import get_worker  # noqa: PLC0415 - runs on a worker

    try:
        return str(get_worker().address)
    except ValueError:  # called outside a worker (tests calling the task directly)
        return ""


def release_groups(token: str) -> int:
    """Drop every group of run ``token`` this process holds; returns how many."""
    with _LOCK:
        _RELEASED.append(token)
        keys = [k for k in _HELD if k[0] == token]
        groups = [_HELD.pop(k) for k in keys]
    for g in groups:
        g.run.chains.close()
    return len(keys)
