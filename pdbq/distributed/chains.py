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
workers; with tempering or mode jumps each group adapts its own ladder in burn-in (a valid
chain, another answer within the standard errors).

A task is a pure function of its inputs, so a group whose worker dies is re-run by Dask
elsewhere, and when a round still fails because the cluster lost a worker or the scattered
data, the data are scattered again and the round submitted again (`cluster.run_round`): the
answer is that of an undisturbed run.

Only runs of a fixed length distribute (``steps`` or ``sweeps``, no ``tolerance`` or
``time_limit``): every group must keep the same batches for the pooled errors, and a stopping
rule that looked at all chains between rounds would cost a round trip per round.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from pdbq.distributed.cluster import open_client, run_round, scheduler_address
from pdbq.errors import OptionError
from pdbq.graph.layout import FactorGraph, validate
from pdbq.inference.mcmc.config import GibbsConfig, MixingConfig
from pdbq.inference.mcmc.gibbs import GibbsResult, run_gibbs
from pdbq.inference.mcmc.kernels import KernelGraph, prepare_kernel_graph
from pdbq.inference.mcmc.pooling import chain_groups, pool_groups
from pdbq.inference.moves.mixing import run_mixing

__all__ = ["DASK_FIXED_LENGTH", "ChainJob", "GroupTask", "GroupResult", "DaskRun", "run_group", "run_chains", "check_fixed_length"]


DASK_FIXED_LENGTH = ("chains on Dask (workers/scheduler) need a fixed run length: give steps or sweeps, and neither "
                     "tolerance nor time_limit (stopping on the errors of all chains across workers is not "
                     "implemented)")


class ChainJob(NamedTuple):
    """What every chain group of one answer needs: scattered to each worker once."""

    graph: FactorGraph
    targets: np.ndarray  # int64 graph ids
    sites: np.ndarray  # int32 sampled variables
    selection: tuple[np.ndarray, np.ndarray] | None  # QAM's alias table over the sites
    config: GibbsConfig  # the whole run's (chains: all of them)
    mixing: MixingConfig | None  # None: single-site chains
    blocks: list | None  # the blocks of block moves, built once on the client
    kernel: KernelGraph  # the kernel arrays, derived once on the client (cheaper to ship than to derive again)


class GroupTask(NamedTuple):
    group: int
    first_chain: int
    chains: int


class GroupResult(NamedTuple):
    group: int
    result: GibbsResult  # its chains' answer, with the kept batches
    seconds: float  # compute on the worker (kernel arrays included)


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

    @property
    def overhead(self) -> float:
        return max(0.0, self.wall - self.compute_max) + self.scatter

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["overhead"] = self.overhead
        return d

    def describe(self) -> str:
        """One line for the method's reason."""
        return (f"chains on Dask ({self.scheduler}): {self.chains} chains in {self.groups} group(s) on "
                f"{self.dask_workers} worker(s), slowest group {self.compute_max:.2f} s, overhead {self.overhead:.2f} s"
                + (f" (cluster start {self.start:.2f} s)" if self.start else "")
                + (f", {self.reruns} re-run(s) after lost workers" if self.reruns else ""))


def check_fixed_length(config: GibbsConfig, deadline: float | None, workers: int) -> None:
    """`OptionError` unless the run can be cut into ``workers`` groups that pool exactly."""
    if config.steps is None or config.tolerance is not None or config.time_limit is not None or deadline is not None:
        raise OptionError(DASK_FIXED_LENGTH)
    if workers > config.chains:
        raise OptionError(f"workers = {workers} needs at least as many chains, got chains = {config.chains}: "
                          "each worker runs whole chains")


def _nbytes(x: object) -> int:
    """Array bytes inside nested tuples/lists/dataclasses (what crosses the network, roughly)."""
    if isinstance(x, np.ndarray):
        return int(x.nbytes)
    if isinstance(x, (tuple, list)):
        return sum(_nbytes(v) for v in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return sum(_nbytes(getattr(x, f.name)) for f in dataclasses.fields(x))
    return 0


def run_group(job: ChainJob, task: GroupTask) -> GroupResult:
    """One group's chains, on a worker (module docstring): a pure function of its inputs."""
    t0 = time.perf_counter()
    cfg = dataclasses.replace(job.config, chains=task.chains, first_chain=task.first_chain,
                              total_chains=job.config.chains)
    kw = dict(sites=job.sites, selection=job.selection, kernel=job.kernel)
    if job.mixing is not None and job.mixing.active:
        r = run_mixing(job.graph, job.targets, cfg, job.mixing, blocks=job.blocks, **kw)
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
) -> tuple[GibbsResult, list[GibbsResult], DaskRun]:
    """Run ``config.chains`` chains in ``workers`` groups on Dask and pool them (module
    docstring). Returns the pooled answer, each group's own answer (for what its moves did) and
    the run's record. Where: ``client`` (the caller's), else ``scheduler`` (an address), else an
    in-process cluster of ``workers`` workers (a local process cluster with ``processes``).
    ``kernel``: the graph's kernel arrays when the caller has them (else derived here, once)."""
    config = config.check()
    check_fixed_length(config, None, workers)
    if kernel is None:
        kernel = prepare_kernel_graph(validate(graph))
    tasks = [GroupTask(g, first, n) for g, (first, n) in enumerate(chain_groups(config.chains, workers))]
    job = ChainJob(graph, np.asarray(targets, dtype=np.int64), np.asarray(sites, dtype=np.int32), selection, config,
                   mixing, blocks, kernel)
    t_start = time.perf_counter()
    client, close = open_client(client, scheduler, processes, workers)
    try:
        t0 = time.perf_counter()
        start = t0 - t_start
        (shared,) = client.scatter([job], broadcast=True, hash=False)
        scatter = time.perf_counter() - t0
        n_workers = len(client.scheduler_info()["workers"])
        done = run_round(client, run_group, [shared], lambda: client.scatter([job], broadcast=True, hash=False),
                         tasks, f"pdbq-chains-{uuid.uuid4().hex[:12]}", retries, "chains on Dask")
        address = scheduler_address(client)
    finally:
        close()
    results = sorted(done.results, key=lambda g: g.group)
    parts = [g.result for g in results]
    pooled = pool_groups(graph, config, parts)
    secs = [g.seconds for g in results]
    run = DaskRun(address, n_workers, len(tasks), config.chains, 1, done.wall, max(secs), float(sum(secs)), scatter,
                  done.reruns, _nbytes(job) * max(n_workers, 1), _nbytes(parts), start)
    return pooled, parts, run
