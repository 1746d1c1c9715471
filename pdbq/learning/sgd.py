"""Weight learning by stochastic gradient ascent on the log-likelihood (DeepDive/numbskull style).

Two worlds share one weights array (their kernel graphs are rewritten for it every epoch, see
`reweight`):

- the *clamped* world fixes the training evidence and samples every other variable;
- the *free* world samples every variable, the training evidence included.

Both are persistent Gibbs chains (contrastive divergence with persistent chains): each epoch
runs ``sweeps`` sweeps of every chain with `pdbq.inference.mcmc.kernels.run_chain`, then counts each
weight's feature F_k in both worlds. The gradient of the log-likelihood is
E[F_k | evidence] − E[F_k] ≈ F_k(clamped) − F_k(free); regularization adds −reg·n_k·w_k (l2).

Step (docs/learning.md): a weight with n_k groundings moves by η_k · gradient with
η_k = 1 / (n_k · (v_k + reg) + 1 / lr_t), lr_t = learning_rate · decay^t: DeepDive's step per
grounding while it is small, never beyond the diagonal Newton step (v_k: the free world's
per-grounding feature variance, a running mean), where a batch update would begin to overshoot;
and never more than `STEP_CAP` per epoch. The result averages the weights of the last
``average`` fraction of epochs (Polyak averaging), which removes most of the sampling noise of
the final iterates.

Standard errors: the inverse of the observed information, estimated from the same epochs as
Cov(F | free) − Cov(F | clamped) (+ the regularizer's curvature): the asymptotic standard error
of the maximum-likelihood weight, NaN where the information is not positive or too few epochs
were kept.

Chains of both worlds run in parallel on nogil threads (``threads``).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from pdbq.errors import LearningError, OptionError
from pdbq.graph.layout import FactorGraph, validate
from pdbq.inference.mcmc.gibbs import initial_states, make_schedule
from pdbq.inference.mcmc.kernels import Accum, Best, group_sums_into, run_chain
from pdbq.inference.mcmc.rng import chain_states
from pdbq.learning.config import LearnConfig
from pdbq.learning.features import feature_totals, grounding_counts
from pdbq.learning.reweight import refresh, reweighable
from pdbq.option_values import MAX_COUNT, shown

__all__ = ["learn_sgd", "sgd_setup", "sgd_epochs", "sgd_step", "sgd_result", "SGDRun", "SGDResult", "EpochInfo", "STEP_CAP"]

STEP_CAP = 1.0  # largest change of one weight in one epoch (a trust region for early epochs)
_VAR_FLOOR = 1.0e-3
_FULL_COV_MAX = 200  # learnable weights up to which the full information matrix is inverted
_HISTORY_MAX = 1000  # learned weights up to which every iterate is kept in SGDResult.history
_CHUNK_UPDATES = 1 << 20  # updates per kernel call between deadline checks


@dataclass(frozen=True)
class EpochInfo:
    """Passed to ``on_epoch`` after every epoch."""

    epoch: int  # epochs finished
    epochs: int  # epochs planned
    gradient_norm: float  # RMS of the per-grounding gradient over the learned weights
    elapsed: float


@dataclass(frozen=True, eq=False)
class SGDResult:
    """Learned weights (float64[n_weights]; unlearned entries unchanged) and their standard
    errors (NaN where unknown, 0 for weights not learned)."""

    weights: np.ndarray
    stderr: np.ndarray
    learned: np.ndarray  # bool[n_weights]: the weights that were learned
    groundings: np.ndarray  # int64[n_weights]
    epochs: int
    seconds: float
    interrupted: bool  # stopped by Ctrl-C / cancel: the weights are those of the last full epoch
    stopped_by_time: bool
    history: np.ndarray  # float64[epochs, n_learned]: the iterates (only the last beyond 1,000 weights)
    # float64[n_weights]: estimated distance still to go to the optimum where the gradient stayed
    # significantly non-zero over the averaging window (0 elsewhere): not converged
    remaining: np.ndarray | None = None


def _threads(requested: int | None, tasks: int) -> int:
    return max(1, min(tasks, requested if requested is not None else (os.cpu_count() or 1)))


def learn_sgd(
    graph: FactorGraph,
    config: LearnConfig = LearnConfig(),
    *,
    learn: np.ndarray | None = None,
    on_epoch: Callable[[EpochInfo], bool | None] | None = None,
    deadline: float | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> SGDResult:
    """Learn ``graph``'s learnable weights from its evidence (every evidence variable is a
    training label). ``learn``: bool[n_weights] mask of the weights to learn (default
    ``graph.learnable``); the others stay fixed. ``on_epoch(info)`` returning True stops after
    that epoch (cancellation); KeyboardInterrupt does the same. ``deadline``: a
    `time.perf_counter` value by which learning stops (default: ``config.time_limit`` from now);
    an epoch the deadline cuts short is discarded. Raises `LearningError` for a graph with no
    evidence or nothing to learn, and for divergence."""
    config = config.check()
    run = sgd_setup(graph, config, learn)
    if deadline is not None:
        run.deadline = deadline
    run.should_stop = should_stop
    sgd_epochs(run, on_epoch)
    return sgd_result(run)


@dataclass(eq=False)
class SGDRun:
    """The working state of one SGD run: the two worlds' chains (`sgd_setup`), the iterate and
    the running sums of the averaging window (`sgd_epochs`, `sgd_step`), read by `sgd_result`."""

    graph: FactorGraph
    config: LearnConfig
    t0: float
    w: np.ndarray  # the shared weights array both worlds' kernel graphs read
    rw_c: object
    rw_f: object
    samplers: list  # (graph, kernel graph, shard state, shard schedule)
    counters: list  # (graph, kernel graph, chain state, group sums, out_sum, out_sq, f0, f1)
    part_sums: np.ndarray
    part_sq: np.ndarray
    shards: int
    n_threads: int
    acc: Accum
    unused: Best
    mask: np.ndarray
    n_k: np.ndarray
    idx: np.ndarray
    nk: np.ndarray
    l2: float
    l1: float
    window_start: int
    avg_sum: np.ndarray
    g_sum: np.ndarray  # gradients over the averaging window (convergence check)
    g_sq: np.ndarray
    mom: np.ndarray  # Σ F_free, Σ F_free², Σ F_clamped, Σ F_clamped²
    full_cov: bool
    samples_c: list = field(default_factory=list)
    samples_f: list = field(default_factory=list)
    avg_n: int = 0
    mom_n: int = 0
    vbar: np.ndarray | None = None
    history: list = field(default_factory=list)
    last_good: np.ndarray | None = None
    interrupted: bool = False
    should_stop: Callable[[], bool] | None = None  # a cancel, read between chunks of an epoch's updates
    stopped_by_time: bool = False
    done: int = 0
    deadline: float | None = None  # time.perf_counter() value at which sampling stops


def sgd_setup(graph: FactorGraph, config: LearnConfig, learn: np.ndarray | None = None) -> SGDRun:
    """Check the graph and the mask, start both worlds' persistent chains, and lay out the
    sampling and counting jobs (`SGDRun`). ``config`` must be checked."""
    validate(graph)
    t0 = time.perf_counter()
    mask = graph.learnable.copy() if learn is None else np.asarray(learn, dtype=bool).copy()
    if mask.shape != graph.learnable.shape:
        raise LearningError("learn mask needs one entry per weight")
    n_k = grounding_counts(graph)
    mask &= n_k > 0
    if not mask.any():
        raise LearningError("nothing to learn: no learnable weight has a grounding")
    train = graph.evidence >= 0
    if not train.any():
        raise LearningError("nothing to learn from: the model has no evidence")

    w = graph.weights.copy()
    g_clamped = graph._replace(weights=w)
    g_free = graph._replace(weights=w, evidence=np.full(graph.n_vars, -1, dtype=np.int32))
    rw_c = reweighable(g_clamped)
    rw_f = reweighable(g_free)
    kg = rw_f.kg
    sites_c = np.flatnonzero(~train).astype(np.int32)
    sites_f = np.arange(graph.n_vars, dtype=np.int32)
    chains = config.chains
    states_c, _, gs_c = initial_states(g_clamped, kg, chains, config.seed, dispersed=False)
    states_f, vals_f, gs_f = initial_states(g_free, kg, chains, config.seed + 1, dispersed=False)
    vals_f[:, train] = graph.evidence[train]  # the free chains start from the data
    dtype = states_c[0].values.dtype
    acc = Accum(np.full(graph.n_vars, -1, np.int32), np.zeros((0, kg.max_card)), np.zeros(0, np.int64))
    unused = Best(np.zeros(2), np.zeros(0, dtype=dtype), np.ones(1))
    nw = w.shape[0]
    n_threads = _threads(config.threads, 1 << 20)
    # Hogwild shards (as DimmWitted/numbskull): with more threads than chains, each chain's sweep
    # is split into contiguous site ranges updated concurrently on the shared values. Shards read
    # neighbours another thread may be updating (a stale read is a valid, slightly older state);
    # head-group sums are per chain and would race, so graphs with head groups are not sharded.
    shards = 1 if graph.n_groups else max(1, n_threads // (2 * chains))
    rng_shards = chain_states(config.seed + 7, 2 * chains * shards)
    # feature counts: one row per (world, chain, factor range), summed per (world, chain)
    part_sums = np.zeros((2 * chains * shards, nw))
    part_sq = np.zeros((2 * chains * shards, nw))
    f_bounds = np.linspace(0, graph.n_factors, shards + 1).astype(np.int64)
    samplers: list[tuple] = []
    counters: list[tuple] = []
    for world, (g_w, rw, states, gsums, sites) in enumerate(
        ((g_clamped, rw_c, states_c, gs_c, sites_c), (g_free, rw_f, states_f, gs_f, sites_f))
    ):
        for c in range(chains):
            st = states[c]
            row = world * chains + c
            for i in range(shards):
                r = row * shards + i
                counters.append((g_w, rw.kg, st, gsums[c], part_sums[r], part_sq[r], f_bounds[i], f_bounds[i + 1]))
            if sites.shape[0] == 0:
                continue
            for i, part in enumerate(np.array_split(sites, min(shards, sites.shape[0]))):
                k = row * shards + i
                shard_state = st._replace(rng=rng_shards[k : k + 1].copy(), pos=np.zeros(1, np.int64)) if shards > 1 else st
                samplers.append((g_w, rw.kg, shard_state, make_schedule(np.ascontiguousarray(part), "sweep", None)))

    for args in counters:
        if args[0].n_groups:
            group_sums_into(args[0], args[1].tables, args[2].values, args[3])
    if sites_c.shape[0] == 0:  # fully observed: the clamped world never changes, count it once
        for args in counters[: chains * shards]:
            _count(*args)
        counters = counters[chains * shards :]

    idx = np.flatnonzero(mask)
    window_start = int(math.floor(config.epochs * (1.0 - config.average))) if config.average > 0 else config.epochs - 1
    n_idx = idx.shape[0]
    return SGDRun(
        graph=graph, config=config, t0=t0, w=w, rw_c=rw_c, rw_f=rw_f, samplers=samplers, counters=counters,
        part_sums=part_sums, part_sq=part_sq, shards=shards, n_threads=n_threads, acc=acc, unused=unused,
        mask=mask, n_k=n_k, idx=idx, nk=n_k[idx].astype(np.float64),
        l2=config.reg if config.regularization == "l2" else 0.0,
        l1=config.reg if config.regularization == "l1" else 0.0,
        window_start=min(max(window_start, 0), config.epochs - 1),
        avg_sum=np.zeros(n_idx), g_sum=np.zeros(n_idx), g_sq=np.zeros(n_idx), mom=np.zeros((4, n_idx)),
        full_cov=n_idx <= _FULL_COV_MAX, last_good=w.copy(),
        deadline=None if config.time_limit is None else t0 + config.time_limit,
    )


def _count(g, kgw, st, gsum, out_sum, out_sq, f0, f1):
    feature_totals(g, kgw.tables, st.values, out_sum, out_sq, f0, f1)
    if g.n_groups:  # exact group sums for the next sweep (no drift from incremental updates)
        group_sums_into(g, kgw.tables, st.values, gsum)


def sgd_epochs(run: SGDRun, on_epoch: Callable[[EpochInfo], bool | None] | None = None) -> None:
    """Run the epochs of ``run`` (sample both worlds, count features, `sgd_step`) until the
    planned number, a stop from ``on_epoch`` or Ctrl-C, or the time limit."""
    config = run.config
    sweeps = config.sweeps
    deadline = run.deadline
    late = [False]
    widest = max((int(a[3].sites.shape[0]) for a in run.samplers), default=1)
    if sweeps * max(widest, 1) > MAX_COUNT:  # the kernels count updates in 64 bits
        raise OptionError(f"option 'sweeps' is {shown(sweeps)}: times the {widest:,} variables sampled that is "
                          f"over {MAX_COUNT:,} updates per epoch (64-bit counts); lower 'sweeps'")

    should_stop = run.should_stop
    cancelled = [False]

    def sample(g, kgw, st, sched):
        n = sched.sites.shape[0]
        if deadline is None and should_stop is None:
            run_chain(g, kgw, st, sched, run.acc, run.unused, n * sweeps, False)
            return
        # a deadline and a cancel are checked between chunks of about a million updates, so that
        # a huge ``sweeps`` cannot hold the statement beyond its time limit or its cancel
        chunk = max(1, _CHUNK_UPDATES // max(n, 1))
        left = sweeps
        while left > 0:
            if cancelled[0] or (should_stop is not None and should_stop()):
                cancelled[0] = True
                return
            if deadline is not None and (late[0] or time.perf_counter() >= deadline):
                late[0] = True
                return
            k = min(chunk, left)
            run_chain(g, kgw, st, sched, run.acc, run.unused, n * k, False)
            left -= k

    pool = ThreadPoolExecutor(max_workers=run.n_threads)
    try:
        for t in range(config.epochs):
            refresh(run.rw_c, run.w)
            refresh(run.rw_f, run.w)
            futures: list = []
            try:
                for fn, jobs in ((sample, run.samplers), (_count, run.counters)):
                    futures = [pool.submit(fn, *a) for a in jobs]
                    for f in futures:
                        f.result()
            except KeyboardInterrupt:
                for f in futures:
                    f.cancel()
                run.interrupted = True
                break
            if cancelled[0]:  # a cancel cut this epoch short: the last full epoch's weights stand
                run.interrupted = True
                break
            if late[0]:  # the deadline cut this epoch's sweeps short: its counts are not used
                run.stopped_by_time = True
                break
            grad = sgd_step(run, t)
            elapsed = time.perf_counter() - run.t0
            stop = False
            if on_epoch is not None:
                rms = float(np.sqrt(np.mean((grad / run.nk) ** 2)))
                stop = bool(on_epoch(EpochInfo(run.done, config.epochs, rms, elapsed)))
            if stop:
                run.interrupted = True
                break
            if deadline is not None and time.perf_counter() >= deadline and run.done < config.epochs:
                run.stopped_by_time = True
                break
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def sgd_step(run: SGDRun, t: int) -> np.ndarray:
    """Epoch ``t``'s weight update from the feature counts just taken; returns the gradient.
    Raises `LearningError` when a weight diverges."""
    config, idx, nk, l2, l1 = run.config, run.idx, run.nk, run.l2, run.l1
    chains, nw = config.chains, run.w.shape[0]
    sums = run.part_sums.reshape(2 * chains, run.shards, nw).sum(axis=1)
    sq = run.part_sq.reshape(2 * chains, run.shards, nw).sum(axis=1)
    fc = sums[:chains, idx].mean(axis=0)
    ff = sums[chains:, idx].mean(axis=0)
    sqf = sq[chains:, idx].mean(axis=0)
    v = np.maximum(sqf / nk - (ff / nk) ** 2, _VAR_FLOOR)
    run.vbar = v if run.vbar is None else 0.8 * run.vbar + 0.2 * v
    wk = run.w[idx]
    grad = fc - ff - l2 * nk * wk
    lr_t = config.learning_rate * config.decay**t
    eta = 1.0 / (nk * (run.vbar + l2) + 1.0 / lr_t)
    step = eta * grad
    step = np.clip(step, -STEP_CAP, STEP_CAP)
    new = wk + step
    if l1:
        shrink = np.minimum(eta * l1 * nk, STEP_CAP)
        new = np.sign(new) * np.maximum(np.abs(new) - shrink, 0.0)
    bad = ~np.isfinite(new) | (np.abs(new) > config.max_weight)
    if bad.any():
        k = int(idx[np.flatnonzero(bad)[0]])
        raise LearningError(
            f"learning diverged at epoch {t + 1}: weight {k} reached {new[np.flatnonzero(bad)[0]]!r} "
            f"(limit ±{config.max_weight:g}); lower learning_rate or raise reg. The previous weights are kept"
        )
    run.w[idx] = new
    run.last_good = run.w.copy()
    if idx.shape[0] <= _HISTORY_MAX or not run.history:
        run.history.append(new.copy())
    else:
        run.history[0] = new.copy()  # many weights: only the latest iterate is kept
    run.done = t + 1
    if t >= run.window_start:
        run.avg_sum += new
        run.avg_n += 1
        run.g_sum += grad
        run.g_sq += grad * grad
        for c in range(chains):
            a_c, a_f = sums[c, idx], sums[chains + c, idx]
            run.mom[0] += a_f
            run.mom[1] += a_f * a_f
            run.mom[2] += a_c
            run.mom[3] += a_c * a_c
            run.mom_n += 1
            if run.full_cov:
                run.samples_c.append(a_c.copy())
                run.samples_f.append(a_f.copy())
    return grad


def sgd_result(run: SGDRun) -> SGDResult:
    """The averaged weights, their standard errors and the convergence check of a finished run."""
    idx, nk, l2, nw = run.idx, run.nk, run.l2, run.w.shape[0]
    result = run.last_good.copy()
    if run.avg_n:
        result[idx] = run.avg_sum / run.avg_n
    stderr = np.zeros(nw)
    stderr[idx] = _stderr(run.mom, run.mom_n, run.samples_c, run.samples_f, nk, l2)
    hist = np.stack(run.history) if run.history else np.zeros((0, idx.shape[0]))
    remaining = np.zeros(nw)
    if run.avg_n >= 10 and run.vbar is not None:
        # A gradient that stays away from 0 over the window (t > 4) means the optimum was not
        # reached; its Newton distance estimates how far the weight still is from it.
        mean = run.g_sum / run.avg_n
        sd = np.sqrt(np.maximum(run.g_sq / run.avg_n - mean * mean, 0.0))
        t_stat = np.abs(mean) / (sd / np.sqrt(run.avg_n) + 1e-300)
        dist = mean / (nk * (run.vbar + l2))
        remaining[idx] = np.where(t_stat > 4.0, dist, 0.0)
    return SGDResult(
        weights=result,
        stderr=stderr,
        learned=run.mask,
        groundings=run.n_k,
        epochs=run.done,
        seconds=time.perf_counter() - run.t0,
        interrupted=run.interrupted,
        stopped_by_time=run.stopped_by_time,
        history=hist,
        remaining=remaining,
    )


def _stderr(mom, n, samples_c, samples_f, nk, l2) -> np.ndarray:
    """sqrt(diag(I⁻¹)) with I = Cov_free(F) − Cov_clamped(F) + l2·diag(n_k); NaN where unknown."""
    out = np.full(nk.shape[0], np.nan)
    if n < 10:
        return out
    if samples_f:
        sf = np.stack(samples_f)
        sc = np.stack(samples_c)
        info = np.atleast_2d(np.cov(sf, rowvar=False)) - np.atleast_2d(np.cov(sc, rowvar=False)) + np.diag(l2 * nk)
        try:
            eig = np.linalg.eigvalsh(info)
            if eig.min() > 0:
                return np.sqrt(np.diag(np.linalg.inv(info)))
        except np.linalg.LinAlgError:
            pass
    var_f = mom[1] / n - (mom[0] / n) ** 2
    var_c = mom[3] / n - (mom[2] / n) ** 2
    info = (var_f - var_c) * n / (n - 1) + l2 * nk
    ok = info > 0
    out[ok] = 1.0 / np.sqrt(info[ok])
    return out
