"""Posterior summaries of a clustering by sampling: every asked pair's probability of one entity
and every given cluster's probability of being exactly one entity, in one run.

Target π(y) ∝ exp(ψ(y)) (τ = 1) over partitions, sampled by the entity moves of
`pdbq.inference.coreference.entity_moves` with one explicit xorshift stream per chain
(`pdbq.inference.mcmc.rng`, streams from `config.seed`). Each chain starts at `start` (a
clustering, e.g. the MAP one) or at `config.init`, discards `config.burn_in` passes (one pass = n
mention-level steps) and then, after each of `config.sweeps` passes, counts

* per asked pair (qa[k], qb[k]): whether both mentions share an entity;
* per given cluster C (a CSR `cl_ptr`/`cl_mem` of mention indices): whether C is *exactly* an
  entity of the state: all its members share one entity and that entity has |C| members.

A chain's estimate is its fraction of passes; the reported value is the mean over chains and its
standard error the standard deviation across chains / √chains (independent chains, so the
error includes the autocorrelation within a chain).

>>> from pdbq.coref.layout import pair_graph
>>> from pdbq.inference.coreference.resolve import CorefConfig
>>> g = pair_graph(2, np.array([0]), np.array([1]), np.array([0.0]))
>>> post = sample_posterior(g, np.array([0]), np.array([1]), clusters_csr(np.array([0, 0])),
...                         CorefConfig(sweeps=2000, burn_in=10, chains=4, seed=3))
>>> bool(abs(post.pair_prob[0] - 0.5) < 4 * post.pair_stderr[0] + 0.01)
True
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from pdbq.coref.layout import PairGraph
from pdbq.errors import InferenceError
from pdbq.inference.coreference.entity_moves import (
    C_ACCEPTED,
    C_EVALS,
    C_PROPOSALS,
    check_groups,
    new_scratch,
    state_from_labels,
)
from pdbq.inference.coreference.pair_gibbs import asked_csr, gibbs_state, gibbs_sweeps
from pdbq.inference.coreference.resolve import (
    CorefConfig,
    _graph_for,
    _initial,
    _Mover,
    _scorer,
    group_clash,
)
from pdbq.inference.coreference.subsample import subsample_seeds, subsample_state
from pdbq.inference.mcmc.rng import chain_states

__all__ = ["ClusteringPosterior", "clusters_csr", "sample_mention_moves", "sample_posterior"]


@dataclass(frozen=True, eq=False)
class ClusteringPosterior:
    """Pair and cluster posteriors (means over chains) with standard errors across chains.

    pair_prob[k]: P(qa[k] and qb[k] are one entity). cluster_prob[c]: P(cluster c is exactly
    one entity). `*_stderr`: NaN with one chain (a warning says so)."""

    pair_prob: np.ndarray
    pair_stderr: np.ndarray
    cluster_prob: np.ndarray
    cluster_stderr: np.ndarray
    samples: int
    factor_evaluations: int
    proposals: int
    accepted: int
    seconds: float
    warnings: tuple[str, ...] = field(default=())


def clusters_csr(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cl_ptr int64[k+1], cl_mem int64[n]) of a labelling: the members of cluster c (clusters
    ordered by their smallest label value) are cl_mem[cl_ptr[c]:cl_ptr[c+1]], ascending."""
    labels = np.asarray(labels)
    _, dense = np.unique(labels, return_inverse=True)
    dense = dense.reshape(-1)
    order = np.argsort(dense, kind="stable").astype(np.int64)
    ptr = np.zeros(int(dense.max(initial=-1)) + 2, np.int64)
    np.cumsum(np.bincount(dense, minlength=ptr.size - 1), out=ptr[1:])
    return ptr, order


@njit(cache=True)
def _count(label, size, qa, qb, cl_ptr, cl_mem, pair_hits, cluster_hits):
    for k in range(qa.shape[0]):
        if label[qa[k]] == label[qb[k]]:
            pair_hits[k] += 1
    for c in range(cl_ptr.shape[0] - 1):
        lo = cl_ptr[c]
        hi = cl_ptr[c + 1]
        e = label[cl_mem[lo]]
        if size[e] != hi - lo:
            continue
        exact = True
        for p in range(lo + 1, hi):
            if label[cl_mem[p]] != e:
                exact = False
                break
        if exact:
            cluster_hits[c] += 1


def _check(n, qa, qb, clusters, start):
    qa = np.ascontiguousarray(qa, dtype=np.int64)
    qb = np.ascontiguousarray(qb, dtype=np.int64)
    if qa.shape != qb.shape or qa.ndim != 1:
        raise InferenceError("asked pairs qa, qb must be one-dimensional and of equal length")
    if qa.size and (min(qa.min(), qb.min()) < 0 or max(qa.max(), qb.max()) >= n):
        raise InferenceError(f"asked pairs must be mention indices in [0, {n})")
    cl_ptr = np.ascontiguousarray(clusters[0], dtype=np.int64)
    cl_mem = np.ascontiguousarray(clusters[1], dtype=np.int64)
    if (cl_ptr.ndim != 1 or cl_ptr.size < 1 or cl_ptr[0] != 0 or cl_ptr[-1] != cl_mem.size
            or np.any(np.diff(cl_ptr) < 1)):
        raise InferenceError("clusters must be a CSR (cl_ptr, cl_mem) of non-empty clusters")
    if cl_mem.size and (cl_mem.min() < 0 or cl_mem.max() >= n):
        raise InferenceError(f"cluster members must be mention indices in [0, {n})")
    if start is not None:
        start = np.asarray(start, dtype=np.int64)
        if start.shape != (n,):
            raise InferenceError(f"start must label all {n} mentions, got shape {start.shape}")
    return qa, qb, cl_ptr, cl_mem, start


def sample_posterior(g: PairGraph, qa: np.ndarray, qb: np.ndarray, clusters: tuple[np.ndarray, np.ndarray],
                     config: CorefConfig, start: np.ndarray | None = None,
                     cannot_link: np.ndarray | None = None) -> ClusteringPosterior:
    """Pair and cluster posteriors under π(y) ∝ exp(ψ(y)) (module docstring). `config`: its
    `sweeps`, `burn_in`, `chains`, `seed`, `p_new`, `p_split_merge`, `proposal`, `subsample`,
    `time_limit` and (without `start`) `init`; `temperature` is not used (τ = 1). `cannot_link`:
    as in `resolve_map` (π restricted to clusterings without two mentions of one group; `start`
    must be one of them)."""
    _graph_for(g, config)
    n = g.indptr.shape[0] - 1
    qa, qb, cl_ptr, cl_mem, start = _check(n, qa, qb, clusters, start)
    group = check_groups(cannot_link, n)
    if start is not None and group_clash(start, group) is not None:
        a, b = group_clash(start, group)
        raise InferenceError(f"start puts mentions {a} and {b} of one cannot-link group in one entity")
    t0 = time.perf_counter()
    k_clusters = cl_ptr.size - 1
    if n == 0:
        z = np.zeros(0)
        return ClusteringPosterior(z, z, z, z, 0, 0, 0, 0, 0.0)
    rngs = chain_states(config.seed, config.chains)
    sub_seeds = subsample_seeds(config.seed, config.chains)
    counters = np.zeros(4, np.int64)
    sc = new_scratch(g, subsample_state(config.subsample, sub_seeds[0]), group)
    pairs = np.zeros((config.chains, qa.size))
    clusters_p = np.zeros((config.chains, k_clusters))
    warnings: list[str] = []
    if not config.subsample.is_exact:
        warnings.append(f"subsample {config.subsample.label()}: moves are scored on a sample of their factors, so the "
                        "chain's stationary distribution is only approximately the model's; the standard errors do "
                        "not include that bias")
    psi = _scorer(g, None)
    initial = state_from_labels(start) if start is not None else _initial(g, config, group)
    total = 0
    ran = 0
    for c in range(config.chains):
        if c and config.time_limit is not None and time.perf_counter() - t0 > config.time_limit:
            warnings.append(f"time_limit {config.time_limit} s reached: {c} of {config.chains} chains ran")
            break
        st = type(initial)(*[a.copy() for a in initial])
        move = _Mover(g, config, st)
        log = np.array([psi(st.label)])
        rng = rngs[c : c + 1]
        sc.sub.rng[0] = sub_seeds[c]
        move(sc, rng, n * config.burn_in, 1.0, counters, log)
        pair_hits = np.zeros(qa.size, np.int64)
        cluster_hits = np.zeros(k_clusters, np.int64)
        done = 0
        for _ in range(config.sweeps):
            if config.time_limit is not None and done and time.perf_counter() - t0 > config.time_limit:
                warnings.append(f"time_limit {config.time_limit} s reached: chain {c} kept {done} of "
                                f"{config.sweeps} samples")
                break
            move(sc, rng, n, 1.0, counters, log)
            _count(st.label, st.size, qa, qb, cl_ptr, cl_mem, pair_hits, cluster_hits)
            done += 1
        pairs[c] = pair_hits / done
        clusters_p[c] = cluster_hits / done
        total += done
        ran += 1
    pairs, clusters_p = pairs[:ran], clusters_p[:ran]
    if ran > 1:
        pse = pairs.std(axis=0, ddof=1) / math.sqrt(ran)
        cse = clusters_p.std(axis=0, ddof=1) / math.sqrt(ran)
    else:
        pse = np.full(qa.size, np.nan)
        cse = np.full(k_clusters, np.nan)
        warnings.append("one chain: no standard error (use chains >= 2)")
    return ClusteringPosterior(pairs.mean(axis=0), pse, clusters_p.mean(axis=0), cse, total,
                               int(counters[C_EVALS]), int(counters[C_PROPOSALS]), int(counters[C_ACCEPTED]),
                               time.perf_counter() - t0,
                               tuple(warnings))


def sample_mention_moves(g: PairGraph, qa: np.ndarray, qb: np.ndarray, clusters: tuple[np.ndarray, np.ndarray],
                         config: CorefConfig, start: np.ndarray | None = None, batches: int = 10) -> ClusteringPosterior:
    """The same summaries as `sample_posterior`, from Gibbs mention moves
    (`pdbq.inference.coreference.pair_gibbs`: no split/merge moves, no subsampling, no
    cannot-link groups). A pair's probability is Rao–Blackwellised: the mean over the passes of
    its conditional probability of one cluster at its mentions' steps, not the fraction of
    passes that joined it (never exactly 0 or 1 where the model is not); a cluster's is the
    fraction of passes in which it is exactly a cluster. Standard errors by batch means: each
    chain's `config.sweeps` passes after `config.burn_in` are cut into `batches` consecutive
    batches, and a value's standard error is the standard deviation of its batch means over all
    chains' batches / √(their number), which includes the autocorrelation within a chain as long
    as a batch is longer than it; it is never below 1 / (the number of samples) (for a cluster
    the resolution of counting; for a pair what chains started at one clustering may not have
    visited yet). Chains
    start at `start` (e.g. the MAP clustering; a cluster of it that candidate pairs do not
    connect is cut into its connected pieces, the sampler's support) or, without it, with every
    mention alone. `config.time_limit` is checked between batches: a run stopped by it keeps its
    whole batches and warns. `factor_evaluations` counts the pair scores read; `proposals` the
    steps; `accepted` the steps that moved a mention."""

    _graph_for(g, config)
    n = g.indptr.shape[0] - 1
    qa, qb, cl_ptr, cl_mem, start = _check(n, qa, qb, clusters, start)
    if batches < 2 or config.sweeps < batches:
        raise InferenceError(f"batch means need at least 2 batches of at least one pass, got {batches} batches "
                             f"of {config.sweeps} passes")
    t0 = time.perf_counter()
    k_clusters = cl_ptr.size - 1
    if n == 0:
        z = np.zeros(0)
        return ClusteringPosterior(z, z, z, z, 0, 0, 0, 0, 0.0)
    rngs = chain_states(config.seed, config.chains)
    start = np.arange(n) if start is None else start
    q_ptr, q_idx, q_oth = asked_csr(n, qa, qb)
    empty = np.zeros(0, np.int64)
    none = (np.zeros(n + 1, np.int64), empty, empty)  # burn-in: no pair asked
    scratch = np.zeros(0)
    per = config.sweeps // batches
    sums = [np.zeros(qa.size), np.zeros(qa.size), np.zeros(k_clusters), np.zeros(k_clusters)]
    warnings: list[str] = []
    done = accepted = reads = 0
    nb = 0
    over = False
    ran = 0
    for c in range(config.chains):
        if c and config.time_limit is not None and time.perf_counter() - t0 > config.time_limit:
            warnings.append(f"time_limit {config.time_limit} s reached: {c} of {config.chains} chains ran")
            break
        st = gibbs_state(start, g.indptr, g.nbr, g.score)
        rng = rngs[c : c + 1].copy()
        accepted += gibbs_sweeps(st, g.indptr, g.nbr, g.score, rng, config.burn_in, *none, scratch)
        for k_batch in range(batches):
            if k_batch and config.time_limit is not None and time.perf_counter() - t0 > config.time_limit:
                warnings.append(f"time_limit {config.time_limit} s reached: chain {c} kept {k_batch} of {batches} "
                                "batches")
                over = True
                break
            ph = np.zeros(qa.size)
            ch = np.zeros(k_clusters, np.int64)
            for _ in range(per):
                accepted += gibbs_sweeps(st, g.indptr, g.nbr, g.score, rng, 1, q_ptr, q_idx, q_oth, ph)
                _count(st.label, st.size, empty, empty, cl_ptr, cl_mem, empty, ch)
            for k, x in enumerate((ph / per, ch / per)):
                sums[2 * k] += x
                sums[2 * k + 1] += x * x
            done += per
            nb += 1
        reads += int(st.reads[0])
        ran += 1
        if over:
            break
    mean_p, mean_c = sums[0] / nb, sums[2] / nb
    if nb > 1:
        # never below 1 / samples: the batch means miss what the chains, started at one clustering,
        # have not yet visited (measured: with the bare batch-means error 90% of small models'
        # pairs were within 3 errors, not 99%); for clusters it is counting's resolution
        floor = 1.0 / done
        se_p = np.maximum(np.sqrt(np.maximum(sums[1] / nb - mean_p ** 2, 0.0) / (nb - 1)), floor)
        se_c = np.maximum(np.sqrt(np.maximum(sums[3] / nb - mean_c ** 2, 0.0) / (nb - 1)), floor)
    else:
        se_p, se_c = np.full(qa.size, np.nan), np.full(k_clusters, np.nan)
        warnings.append("one batch: no standard error (give more time or passes)")
    passes = ran * config.burn_in + nb * per
    return ClusteringPosterior(mean_p, se_p, mean_c, se_c, done, reads, n * passes, accepted, time.perf_counter() - t0,
                               tuple(warnings))
