"""The chains of a marginal query on Dask workers (``USING GIBBS/QAM/AUTO WITH (workers = N)``).

The run's chains are cut into ``workers`` groups of about equal size (`pooling.chain_groups`);
each group is one Dask task that runs `run_gibbs` (or `run_mixing`, for tempering, block moves,
cluster moves and mode jumps) on the worker with ``GibbsConfig(first_chain=…,
total_chains=…)``, so its chains are the very chains of an in-process run: same starts, same
random streams, same round lengths. The graph, its kernel arrays, the query, the selection table
and the blocks are scattered to every worker once (one broadcast, before any task); a task returns its kept
batches, and the client pools them (`pooling.pool_groups`): the estimator, the batch-means
standard errors, R-hat across all chains and the warnings are those of one in-process run. For
single-site chains the answer is the in-process answer bit for bit, whatever the number of
workers, and so is a run with block, cluster or cutset moves (each chain draws the moves' streams
of its index in the run, `MoveContext.first`), and so is AUTO's domain-chain run (``domain``:
the whole-domain blocks chosen on the client, drawn by `domain_chains` with their exact
marginals); tempering and mode jumps adapt from all chains in burn-in, so their runs go segment
by segment (`chain_rounds`), bit for bit as well.

A task is a pure function of its inputs, so a group whose worker dies is re-run by Dask
elsewhere, and when a round still fails because the cluster lost a worker or the scattered
data, the data are scattered again and the round submitted again (`cluster.run_round`): the
answer is that of an undisturbed run.

A run of a fixed length (``steps`` or ``sweeps``, no ``tolerance``, ``time_limit`` or deadline)
runs each group to its end in one task. A run its budget ends goes round by round instead
(`chain_rounds`): the groups stay on their workers, and the client books their rounds and
evaluates the stopping rule between segments, as one in-process run does.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from pdbq.distributed.chain_job import ChainJob, fixed_length, nbytes
from pdbq.distributed.cluster import open_client, raise_stop, run_round, scheduler_address, stop_poll
from pdbq.errors import OptionError
from pdbq.graph.layout import FactorGraph, validate
from pdbq.inference.mcmc.config import GibbsConfig, MixingConfig
from pdbq.inference.mcmc.gibbs import GibbsResult, run_gibbs
from pdbq.inference.mcmc.kernels import KernelGraph, prepare_kernel_graph
from pdbq.inference.mcmc.pooling import chain_groups, pool_groups
from pdbq.inference.moves.cutset import cutset_plan
from pdbq.inference.moves.adaptation import adapts
from pdbq.inference.moves.domain_chains import domain_moves
from pdbq.inference.moves.mixing import MovesReport, mixing_moves, mixing_report, pooled_moves_report, with_moves_report

__all__ = ["ChainJob", "GroupTask", "GroupResult", "DaskRun", "run_group", "run_chains", "check_groups", "check_moves",
           "fixed_length"]


class GroupTask(NamedTuple):
    group: int
    first_chain: int
    chains: int
    # the name of a Dask `Event` the client sets when the statement is cancelled: a cancelled Dask
    # task that already runs is not stopped, so the group polls it and stops itself
    stop_event: str | None = None


class GroupResult(NamedTuple):
    group: int
    result: GibbsResult  # its chains' answer, with the kept batches
    seconds: float  # compute on the worker (kernel arrays included)
    moves: MovesReport | None = None  # what its mixing moves did (None: single-site chains or cutset)


@dataclass(frozen=True)
class DaskRun:
    """Where the chains ran and where the time went (diagnostics ``dask``, EXPLAIN, ``.last``).

    ``wall``: first submit to the last group's result; ``compute_max``/``compute_sum``: the
    groups' compute on the workers (slowest / summed); ``scatter``: shipping the job to every
    worker; ``overhead``: what the run spent beyond its slowest group; ``start``: starting a
    cluster of our own and connecting to it (0 with the caller's client). ``bytes_scattered`` is what
    the client sent (once per worker), ``bytes_gathered`` what came back."""

    scheduler: str
    dask_workers: int
    groups: int
    chains: int
    rounds: int
    wall: float
    compute_max: float
    compute_sum: float
    scatter: float
    reruns: int
    bytes_scattered: int
    bytes_gathered: int
    start: float = 0.0
    replayed: int = 0  # updates per chain replayed to rebuild groups lost with their workers (budget-governed runs)
    late: bool = False  # the workers had not answered by the deadline: the answer is from the rounds booked before

    @property
    def overhead(self) -> float:
        return max(0.0, self.wall - self.compute_max) + self.scatter

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["overhead"] = self.overhead
        return d

    def describe(self) -> str:
        """One line for the method's reason."""
        if self.groups == 0:
            return "workers/scheduler unused: no target left to sample"
        how = "in one task each" if self.rounds == 1 else f"in {self.rounds} segment(s), the stopping rule pooled between them"
        return (f"chains on Dask ({self.scheduler}): {self.chains} chains in {self.groups} group(s) on "
                f"{self.dask_workers} worker(s) {how}, slowest group {self.compute_max:.2f} s, overhead {self.overhead:.2f} s"
                + (f" (cluster start {self.start:.2f} s)" if self.start else "")
                + (f", {self.reruns} re-run(s) after lost workers" if self.reruns else "")
                + (f", {self.replayed:,} updates replayed" if self.replayed else "")
                + ("; the workers were late for the time limit" if self.late else ""))


def check_groups(config: GibbsConfig, workers: int) -> None:
    """`OptionError` unless the run's chains can be cut into ``workers`` groups of whole chains."""
    if workers > config.chains:
        raise OptionError(f"workers = {workers} needs at least as many chains, got chains = {config.chains}: "
                          "each worker runs whole chains")


def check_moves(mixing: MixingConfig | None, blocks, sweeps: int, cutset, selection, domain: bool = False) -> None:
    """`OptionError` for a move argument of `run_chains` that the run would not read."""
    active = mixing is not None and mixing.active
    if domain:
        if active or cutset is not None:
            raise OptionError("domain chains run AUTO's whole-domain blocks alone: give neither mixing nor cutset")
        if not blocks:
            raise OptionError("domain chains need the whole-domain blocks (blocks = [...])")
        return
    if cutset is not None and (active or selection is not None):
        raise OptionError(f"{'mixing' if active else 'selection'} has no effect with cutset: the groups run cutset "
                          "sweeps over every free variable")
    if not active and blocks is not None:
        raise OptionError("blocks have no effect without mixing moves (give mixing = MixingConfig(blocks=...))")
    if not active and sweeps != 1:
        raise OptionError("sweeps (single-site passes per mixing cycle) has no effect without mixing moves")


def run_group(job: ChainJob, task: GroupTask) -> GroupResult:
    """One group's chains, on a worker (module docstring): a pure function of its inputs."""
    t0 = time.perf_counter()
    cfg = dataclasses.replace(job.config, chains=task.chains, first_chain=task.first_chain,
                              total_chains=job.config.chains)
    poll = stop_poll(task.stop_event)
    kw = dict(sites=job.sites, selection=job.selection, kernel=job.kernel, poll=poll)
    if job.cutset is not None:
        plan = cutset_plan(job.graph, job.targets, job.cutset, kernel=job.kernel)
        r = run_gibbs(job.graph, plan.sampled, cfg, kernel=plan.kernel, moves=plan.moves, poll=poll)
    elif job.domain:
        hook = domain_moves(job.graph, job.blocks, job.sites, job.sweeps)
        r = run_gibbs(job.graph, job.targets, cfg, moves=hook, **kw)
    elif job.mixing is not None and job.mixing.active:
        setup = mixing_moves(job.graph, job.targets, cfg, job.mixing, sites=job.sites, kernel=job.kernel,
                             blocks=job.blocks, sweeps=job.sweeps, poll=poll)
        r = run_gibbs(job.graph, job.targets, cfg, sites=job.sites, selection=job.selection, kernel=setup.kernel,
                      moves=setup.moves, poll=poll)
        report = mixing_report(setup, r.steps)
        return GroupResult(task.group, with_moves_report(r, report), time.perf_counter() - t0, report)
    else:
        r = run_gibbs(job.graph, job.targets, cfg, **kw)
    return GroupResult(task.group, r, time.perf_counter() - t0)


def run_chains(
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
    scheduler: str | None = None,
    client: Any = None,
    processes: bool = False,
    retries: int = 3,
    deadline: float | None = None,
    on_round=None,
    sweeps: int = 1,
    cutset: Any = None,
    poll=None,
    domain: bool = False,
) -> tuple[GibbsResult, list[GibbsResult], DaskRun]:
    """Run ``config.chains`` chains in ``workers`` groups on Dask and pool them (module
    docstring). Returns the pooled answer, each group's own answer (for what its moves did; the
    pooled one for a run its budget ends) and the run's record. Where: ``client`` (the caller's),
    else ``scheduler`` (an address), else an in-process cluster of ``workers`` workers (a local
    process cluster with ``processes``). ``kernel``: the graph's kernel arrays when the caller
    has them (else derived here, once). ``deadline`` (a `time.perf_counter()` instant),
    ``on_round`` and ``sweeps`` (single-site passes per mixing cycle) as in `run_mixing`;
    ``on_round`` is called only by a run its budget ends (after each booked round). ``cutset``:
    cutset sampling (`cutset.cutset_plan`) instead of mixing moves; then ``targets`` must be the
    plan's sampled targets and ``sites`` every free variable (`cutset_result` merges the rest).
    ``poll()``: called about every 50 ms while the workers run (whatever it raises, a cancelled
    statement, cancels their tasks and propagates). ``domain``: ``blocks`` are AUTO's whole-domain
    blocks (`domains.whole_domain_blocks`), run as `domain_chains.domain_moves` runs them with
    ``sweeps`` single-site passes per draw (no ``mixing``)."""
    config = config.check()
    check_groups(config, workers)
    check_moves(mixing, blocks, sweeps, cutset, selection, domain)
    # moves that adapt from all chains in burn-in (a ladder, a mode pool) go segment by segment
    # even for a fixed length: the client adapts them between burn-in rounds for every group
    if not fixed_length(config, deadline) or (cutset is None and adapts(mixing)):
        from pdbq.distributed.chain_rounds import run_chain_rounds  # noqa: PLC0415

        r, counts = run_chain_rounds(graph, targets, config, workers=workers, sites=sites, selection=selection,
                                     mixing=mixing, blocks=blocks, kernel=kernel, sweeps=sweeps, scheduler=scheduler,
                                     client=client, processes=processes, retries=retries, deadline=deadline,
                                     on_round=on_round, cutset=cutset, poll=poll, domain=domain)
        return r, [r], DaskRun(**counts)
    if kernel is None:
        kernel = prepare_kernel_graph(validate(graph))
    token = uuid.uuid4().hex[:12]
    stop_event = None if poll is None else f"pdbq-chains-stop-{token}"
    tasks = [GroupTask(g, first, n, stop_event) for g, (first, n) in enumerate(chain_groups(config.chains, workers))]
    job = ChainJob(graph, np.asarray(targets, dtype=np.int64), np.asarray(sites, dtype=np.int32), selection, config,
                   mixing, blocks, kernel, sweeps, cutset, domain=domain)
    t_start = time.perf_counter()
    client, close = open_client(client, scheduler, processes, workers)
    try:
        t0 = time.perf_counter()
        start = t0 - t_start
        (shared,) = client.scatter([job], broadcast=True, hash=False)
        scatter = time.perf_counter() - t0
        n_workers = len(client.scheduler_info()["workers"])
        try:
            done = run_round(client, run_group, [shared], lambda: client.scatter([job], broadcast=True, hash=False),
                             tasks, f"pdbq-chains-{token}", retries, "chains on Dask", poll=poll)
        except BaseException:
            if stop_event is not None:  # the running groups stop themselves (closing waits for them)
                raise_stop(client, stop_event)
            raise
        address = scheduler_address(client)
    finally:
        close()
    results = sorted(done.results, key=lambda g: g.group)
    parts = [g.result for g in results]
    pooled = pool_groups(graph, config, parts)
    if all(g.moves is not None for g in results):
        pooled = with_moves_report(pooled, pooled_moves_report([g.moves for g in results], pooled.steps))
    secs = [g.seconds for g in results]
    run = DaskRun(address, n_workers, len(tasks), config.chains, 1, done.wall, max(secs), float(sum(secs)), scatter,
                  done.reruns, nbytes(job) * max(n_workers, 1), nbytes(parts), start)
    return pooled, parts, run
