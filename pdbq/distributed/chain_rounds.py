"""Chains on Dask that stop on their ``tolerance`` or at a deadline, as one in-process run does.

The chains are cut into groups (`pooling.chain_groups`), each kept on a worker between segments
(`chain_groups`). The client keeps the run's books (`run_book.RunBook`): it sends every group the
same segment — explicit burn-in, then kept rounds up to the next check of the stopping rule
(the rule's own fixed schedule of rounds, so a check never waits for a round trip of its own) —
books the rounds that come back in chain order, and evaluates the stopping rule on the pooled
batches after each round, exactly as `run_gibbs` does between its rounds. So with the same seed
and the same workers, a run the tolerance (or the step cap) ends is the in-process run, bit for
bit, for every move: moves that adapt from all chains in burn-in (the ladder of tempering, the
mode pool of jumps, `adaptation`) burn in one round per segment, each group's rows come back and
this process adapts once and sends the result to every group with the next segment.

The clock: each segment carries the time left to the deadline, and the workers stop there (a
round the deadline cuts is dropped, as in this process); the client waits for a segment no
longer than the deadline plus a grace of a few measured round trips. If the workers have not
answered by then, the segment is cancelled and the answer comes from the rounds already booked,
with a warning saying so: a slow or stuck worker never holds the query past its time limit by
more than the grace.

Faults: a group lost with its worker is rebuilt by the next segment wherever Dask runs it, its
history replayed (`chain_groups`); a segment whose tasks still fail because the cluster lost
workers or the shipped job is shipped again and submitted again (``retries`` times).
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from pdbq.distributed.chain_groups import SegmentReport, SegmentTask, group_segment, release_groups, whole
from pdbq.distributed.chain_job import ChainJob, fixed_length, nbytes
from pdbq.distributed.cluster import lost, open_client, pinned, raise_stop, scheduler_address, wait_futures
from pdbq.errors import InferenceError
from pdbq.graph.layout import FactorGraph, validate
from pdbq.inference.mcmc.config import GibbsConfig, MixingConfig
from pdbq.inference.mcmc.estimates import STORE_BYTES, BatchStore
from pdbq.inference.mcmc.gibbs import (
    BURN_IN_TIME_SHARE,
    GibbsResult,
    Moves,
    RoundInfo,
    StartedRun,
    check_targets,
    result_from_book,
)
from pdbq.inference.mcmc.kernels import KernelGraph, prepare_kernel_graph
from pdbq.inference.mcmc.pooling import chain_groups
from pdbq.inference.mcmc.run_book import MIN_ROUNDS_FOR_TOLERANCE, RunBook, plan_run
from pdbq.inference.moves.adaptation import Adaptation, BurnStats, adapts
from pdbq.inference.moves.mixing import MovesReport, pooled_moves_report, with_moves_report

__all__ = ["run_chain_rounds", "SEGMENT_GRACE"]

# Seconds past the deadline the client waits for a segment, besides 3 round trips as measured in
# the run: a result on its way when the deadline passes is worth the wait, a stuck worker is not.
SEGMENT_GRACE = 0.2


class _Segments:
    """Submitting one segment to every group and waiting for it (module docstring)."""

    def __init__(self, client: Any, job, groups: list[tuple[int, int]], token: str, retries: int,
                 poll: Callable[[], None] | None = None):
        self.client, self.job, self.groups, self.token, self.retries = client, job, groups, token, retries
        self.poll = poll
        self.stop = None if poll is None else f"pdbq-rounds-stop-{token}"
        (self.shared,) = client.scatter([job], broadcast=True, hash=False)
        self.where: list[str | None] = [None] * len(groups)
        self.count = 0
        self.reruns = self.replayed = 0
        self.wall = self.compute_max = self.compute_sum = 0.0
        self.rtt = 0.0
        self.bytes_gathered = 0
        self.history: list = []  # the client's adaptations of the moves, one per burn-in round (`_Run`)

    def run(self, tasks: list[SegmentTask], stop: float | None) -> list[SegmentReport] | None:
        """The groups' reports, or None when ``stop`` (a `time.perf_counter()` instant; None:
        no limit) plus the grace passed first (the segment is cancelled). ``poll()`` is called
        while waiting: whatever it raises (a cancelled statement) cancels the segment and propagates."""
        t0 = time.perf_counter()
        key = f"pdbq-rounds-{self.token}-s{self.count}"
        self.count += 1
        attempt = 0
        while True:
            addresses = sorted(self.client.scheduler_info()["workers"])
            futures = []
            for i, task in enumerate(tasks):
                task = task._replace(stop_event=self.stop)
                futures.append(self.client.submit(group_segment, self.shared, task, key=f"{key}-g{i}-a{attempt}",
                                                  pure=False, retries=self.retries,
                                                  **pinned(self.where[i], addresses, i)))
            until = None if stop is None else max(stop, time.perf_counter()) + SEGMENT_GRACE + 3 * self.rtt
            try:
                finished = wait_futures(futures, until, self.poll)
            except BaseException:
                self.client.cancel(futures)
                if self.stop is not None:  # a cancel: the running groups stop themselves
                    raise_stop(self.client, self.stop)
                raise
            if not finished:
                self.client.cancel(futures)
                return None
            try:
                reports = self.client.gather(futures)
                redo = [i for i, r in enumerate(reports) if r.needs_history]
                if redo:  # groups rebuilt on another worker replay their burn-in with every adaptation
                    again = [self.client.submit(group_segment, self.shared,
                                                tasks[i]._replace(stop_event=self.stop, history=tuple(self.history)),
                                                key=f"{key}-g{i}-a{attempt}-h", pure=False, retries=self.retries)
                             for i in redo]
                    for i, r in zip(redo, self.client.gather(again)):
                        reports[i] = r
                break
            except Exception as exc:
                if not lost(exc):
                    raise
                if attempt == self.retries:
                    raise InferenceError(f"chains on Dask: a segment failed {self.retries + 1} times (the cluster "
                                         f"lost workers or data: {type(exc).__name__}: {exc})") from exc
                self.client.cancel(futures)
                (self.shared,) = self.client.scatter([self.job], broadcast=True, hash=False)
                attempt += 1
                self.reruns += 1
        wall = time.perf_counter() - t0
        secs = [r.seconds for r in reports]
        self.wall += wall
        self.compute_max += max(secs)
        self.compute_sum += float(sum(secs))
        self.rtt = max(self.rtt, wall - max(secs))
        self.replayed += sum(r.replayed for r in reports)
        self.bytes_gathered += sum(r.sums.nbytes + r.counts.nbytes for r in reports)
        self.where = [r.worker or None for r in reports]
        return reports


class _Run:
    """The client's side of one run: the books, each group's history, the segments."""

    def __init__(self, seg: _Segments, book: RunBook, config: GibbsConfig, t0: float,
                 on_round: Callable[[RoundInfo], None] | None, unit: int):
        self.seg, self.book, self.config, self.t0, self.on_round, self.unit = seg, book, config, t0, on_round, unit
        self.burned = [0] * len(seg.groups)
        self.late = False
        self.stop = book.plan.stop_at
        # moves that adapt from all chains: adapted here after every burn-in round, for every group
        self.adaptation = Adaptation(seg.job.mixing) if seg.job.cutset is None and adapts(seg.job.mixing) else None

    def task(self, g: int, kind: str, **kw) -> SegmentTask:
        first, n = self.seg.groups[g]
        hist = self.seg.history
        return SegmentTask(self.seg.token, g, first, n, self.burned[g], self.book.rounds_done, self.book.done, kind, **kw,
                           adapted=len(hist), adaptation=hist[-1] if hist else None)

    def left(self, at: float | None) -> float | None:
        return None if at is None else at - time.perf_counter()

    def past(self) -> bool:
        return self.stop is not None and time.perf_counter() >= self.stop

    def report(self, burn_in: bool) -> None:
        if self.on_round is not None:
            b = self.book
            self.on_round(RoundInfo(steps=b.burned + b.done, burn_in=burn_in,
                                    max_stderr=float("nan") if burn_in else b.max_se,
                                    elapsed=time.perf_counter() - self.t0))

    def burn_in(self) -> None:
        """Explicit burn-in, as `gibbs._Chains.burn_in`: at most `BURN_IN_TIME_SHARE` of the time."""
        book, plan = self.book, self.book.plan
        if book.burned >= plan.burn_in:
            return
        until = None if self.stop is None else self.t0 + BURN_IN_TIME_SHARE * max(self.stop - self.t0, 0.0)
        if self._burn_ends(until):
            return
        while book.burned < plan.burn_in:
            # adapting moves: one round per segment, adapted here from every group's rows
            to = plan.burn_in if self.adaptation is None else book.burned + whole(
                min(book.round_len, plan.burn_in - book.burned), self.unit)
            tasks = [self.task(g, "burn", lengths=(to,), seconds=self.left(self.stop),
                               burn_seconds=self.left(until)) for g in range(len(self.burned))]
            reports = self.seg.run(tasks, self.stop)
            if reports is None:
                self.late = True
                book.stopped_by = "time"
                return
            for r in reports:
                self.burned[r.group] += r.burned
            book.burned = min(self.burned)
            stats = [r.burn_stats for r in reports]
            # a group the clock stopped before its round has none: burn-in ends cut, unadapted
            if self.adaptation is not None and all(x is not None for x in stats):
                self.adaptation.after_round(BurnStats.concat(stats))
                self.seg.history.append(self.adaptation.snapshot())
            if any(r.cut for r in reports):
                book.burn_in_cut()
                return
            self.report(True)
            if self._burn_ends(until):
                return

    def _burn_ends(self, until: float | None) -> bool:
        """Whether burn-in ends now: the deadline passed (the run stops on time), or burn-in's
        share of the time did (burn-in is cut)."""
        if self.past():
            self.book.stopped_by = "time"
            return True
        if until is not None and time.perf_counter() >= until:
            self.book.burn_in_cut()
            return True
        return False

    def lengths(self) -> list[int]:
        """The kept rounds of the next segment: up to the stopping rule's next check (doubling
        when no tolerance stops the run), each as long as `run_gibbs` would make it."""
        book, steps = self.book, self.book.plan.steps
        checks = self.config.tolerance is not None and self.config.tolerance_stops
        upto = book.next_check if checks else max(2 * book.rounds_done, MIN_ROUNDS_FOR_TOLERANCE)
        out, done = [], book.done
        for _ in range(max(upto - book.rounds_done, 1)):
            n = book.round_len if steps is None else whole(min(book.round_len, steps - done), self.unit)
            if n <= 0:
                break
            out.append(n)
            done += n
        return out

    def sample(self) -> None:
        """Kept rounds until the step cap, the deadline or the tolerance, as `gibbs._Chains.sample`."""
        book = self.book
        while not book.stopped_by:
            lengths = self.lengths()
            if not lengths:
                book.stopped_by = "steps"
                return
            if self.past():
                book.stopped_by = "time"
                return
            tasks = [self.task(g, "keep", lengths=tuple(lengths), seconds=self.left(self.stop))
                     for g in range(len(self.burned))]
            reports = self.seg.run(tasks, self.stop)
            if reports is None:
                self.late = True
                book.stopped_by = "time"
                return
            got = min(r.sums.shape[0] for r in reports)
            for i in range(got):
                reached = book.keep_round(np.concatenate([r.sums[i] for r in reports]),
                                          np.concatenate([r.counts[i] for r in reports]), lengths[i])
                self.report(False)
                if reached:
                    book.stopped_by = "tolerance"
                    return
            if got < len(lengths) or self.past():
                book.stopped_by = "time"

    def finish(self) -> list[MovesReport]:
        """Each group's moves report (and the hard-constraint check of its chains), unless the
        workers were late: then nothing more is asked of them."""
        if self.late:
            return []
        stop = None if self.stop is None else max(self.stop, time.perf_counter())
        tasks = [self.task(g, "finish", check_hard=self.book.kept() > 0) for g in range(len(self.burned))]
        reports = self.seg.run(tasks, stop)
        if reports is None:
            self.late = True
            return []
        return [r.moves for r in reports if r.moves is not None]


def run_chain_rounds(
    graph: FactorGraph,
    targets: np.ndarray,
    config: GibbsConfig,
    *,
    workers: int,
    sites: np.ndarray,
    selection: tuple[np.ndarray, np.ndarray] | None = None,
    mixing: MixingConfig | None = None,
    blocks: list | None = None,
    kernel: KernelGraph | None = None,
    sweeps: int = 1,
    scheduler: str | None = None,
    client: Any = None,
    processes: bool = False,
    retries: int = 3,
    deadline: float | None = None,
    on_round: Callable[[RoundInfo], None] | None = None,
    cutset=None,
    poll: Callable[[], None] | None = None,
    domain: bool = False,
):
    """Run ``config.chains`` chains in ``workers`` groups on Dask until ``config.tolerance``,
    ``config.time_limit`` / ``deadline`` (a `time.perf_counter()` instant) or ``config.steps``
    ends the run (module docstring). Returns the answer (a `MixingResult` with mixing moves)
    and the run's counts as a dict for `chains.DaskRun`. Arguments as in `chains.run_chains`;
    ``on_round(info)`` after every booked round (it may raise to cancel the run); ``poll()``
    about every 50 ms while a segment runs (whatever it raises, a cancelled statement, cancels
    the segment's tasks and ends the run with it)."""

    config = config.check()
    t0 = time.perf_counter()
    checked = check_targets(graph, targets, sites)
    live = checked.live
    kmax = int(graph.cardinality[checked.uniq].max()) if checked.uniq.size else 2
    if kernel is None:
        kernel = prepare_kernel_graph(validate(graph))
    if not (checked.sites.shape[0] and live.shape[0]):  # nothing to sample: no cluster needed
        plan = plan_run(config, Moves(), checked.sites.shape[0], live.shape[0], t0, deadline)
        empty = dict(scheduler="", dask_workers=0, groups=0, chains=config.chains, rounds=0, wall=0.0,
                     compute_max=0.0, compute_sum=0.0, scatter=0.0, reruns=0, bytes_gathered=0, bytes_scattered=0)
        return result_from_book(graph, StartedRun(config, checked, kmax, plan, None, t0), None, None), empty
    groups = chain_groups(config.chains, workers)
    job = ChainJob(graph, np.asarray(targets, dtype=np.int64), np.asarray(sites, dtype=np.int32), selection,
                   config, mixing, blocks, kernel, sweeps, cutset, fixed_length(config, deadline), domain)
    stop = deadline
    if config.time_limit is not None:
        stop = t0 + config.time_limit if stop is None else min(stop, t0 + config.time_limit)
    client, close = open_client(client, scheduler, processes, workers, None if stop is None else stop - t0)
    token = uuid.uuid4().hex[:12]
    start = time.perf_counter() - t0
    try:
        t_sc = time.perf_counter()
        seg = _Segments(client, job, groups, token, retries, poll)
        scatter = time.perf_counter() - t_sc
        n_workers = len(client.scheduler_info()["workers"])
        opened = seg.run([SegmentTask(token, g, f, n, 0, 0, 0, "open") for g, (f, n) in enumerate(groups)], None)
        shape = opened[0].shape
        if any(r.shape.round_len != shape.round_len or r.shape.unit != shape.unit for r in opened):
            raise InferenceError("chain groups on Dask disagree on the round length: the workers run different "
                                 "versions of pdbq")
        plan = plan_run(config, Moves(unit=shape.unit, burn_in=shape.moves_burn_in), checked.sites.shape[0],
                        live.shape[0], t0, deadline)
        store = BatchStore(config.chains, live.shape[0], kmax, max_bytes=STORE_BYTES)
        book = RunBook(graph, live, config, plan, shape.constant, store, shape.round_len, independent=shape.independent)
        run = _Run(seg, book, config, t0, on_round, shape.unit)
        run.burn_in()
        run.sample()
        moves = run.finish()
        address = scheduler_address(client)
    finally:
        try:
            client.run(release_groups, token)
        except Exception:  # noqa: BLE001 - a worker lost at the very end holds nothing to release
            pass
        close()
    started = StartedRun(config, checked, kmax, plan, None, t0)
    r: GibbsResult = result_from_book(graph, started, book, book.estimates())
    if run.late:
        r = dataclasses.replace(r, warnings=(
            f"the Dask workers had not answered {SEGMENT_GRACE + 3 * seg.rtt:.2g} s after the time limit: the "
            f"answer comes from the {book.rounds_done} round(s) booked before (a slow or lost worker)",) + r.warnings)
    if moves:
        r = with_moves_report(r, pooled_moves_report(moves, book.done))
    counts = dict(scheduler=address, dask_workers=n_workers, groups=len(groups), chains=config.chains,
                  rounds=seg.count, wall=seg.wall, compute_max=seg.compute_max, compute_sum=seg.compute_sum,
                  scatter=scatter, reruns=seg.reruns, bytes_gathered=seg.bytes_gathered, start=start,
                  replayed=seg.replayed, late=run.late, bytes_scattered=nbytes(job) * max(n_workers, 1))
    return r, counts
