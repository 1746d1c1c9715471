"""Gibbs sampling of partitions with Rao–Blackwellised pair probabilities.

Target: π(y) ∝ exp(ψ(y)) over the clusterings y whose every cluster is connected by candidate
pairs, ψ(y) = Σ_C Σ_{i<j ∈ C} w_ij (the coreference model's own score, candidate pairs only;
the support of `pdbq.inference.coreference.partition_mh`).

One step takes a mention m (in turn) and draws its cluster from the full conditional
π(m's cluster | the others'): the cluster of any of its neighbours (log-weight: m's summed links
into it), a cluster of its own (0), or where it is (its summed links there). Its own cluster is
the only choice when leaving would cut that cluster in two pieces (the support's restriction).
All weights are read from m's row.

At each step, for every asked pair (m, j), half the conditional probability that m shares j's
cluster, P(m ~ j | the others), is added to the pair's sum (j's step adds the other half). The
mean over the passes is a Rao–Blackwellised estimate of P(m ~ j): unbiased like counting
whether m and j share a cluster after each pass, with a smaller variance, and never 0 or 1
where the conditional is not (counting gives exactly 0 for a pair no sample joined).

State layout (`GibbsState`, arrays of length n): `label[m]` m's cluster id in [0, n), `size[c]`,
`free[:n_free[0]]` unused ids; scratch per cluster id during a step: `acc` (m's summed links into
it), `cnt` (their number), `prob` (its conditional probability); `touched` the ids a step wrote;
`mark`/`queue`/`stamp` for the connectivity search; `reads` the pair scores read so far.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pdbq.inference.coreference.partition_mh import _pieces, _stays_connected
from pdbq.inference.mcmc.rng import next_state, uniform

__all__ = ["GibbsState", "asked_csr", "gibbs_state", "gibbs_sweeps"]


class GibbsState(NamedTuple):
    label: np.ndarray    # int64[n]
    size: np.ndarray     # int64[n]
    free: np.ndarray     # int64[n]
    n_free: np.ndarray   # int64[1]
    acc: np.ndarray      # float64[n] scratch
    cnt: np.ndarray      # int64[n] scratch
    prob: np.ndarray     # float64[n] scratch
    touched: np.ndarray  # int64[n] scratch
    mark: np.ndarray     # int64[n] scratch
    queue: np.ndarray    # int64[n] scratch
    stamp: np.ndarray    # int64[1]
    reads: np.ndarray    # int64[1]


def gibbs_state(labels: np.ndarray, indptr: np.ndarray, nbr: np.ndarray, score: np.ndarray) -> GibbsState:
    """The state of a clustering `labels` (any int labels), each cluster cut into its pieces
    connected by candidate pairs (the support)."""
    n = int(np.asarray(labels).shape[0])
    _, dense = np.unique(np.asarray(labels), return_inverse=True)
    label = _pieces(dense.reshape(-1).astype(np.int64), indptr, nbr)
    size = np.bincount(label, minlength=n).astype(np.int64)
    free = np.flatnonzero(size == 0)[::-1].astype(np.int64)
    n_free = free.size
    free = np.concatenate([free, np.zeros(n - n_free, np.int64)])
    z = np.zeros(n, np.int64)
    return GibbsState(label, size, free, np.array([n_free], np.int64), np.zeros(n), z.copy(), np.zeros(n),
                      z.copy(), z.copy(), z.copy(), np.zeros(1, np.int64), np.zeros(1, np.int64))


def asked_csr(n: int, qa: np.ndarray, qb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per mention, its asked pairs: (ptr int64[n+1], pair index int64[2k], other mention int64[2k]);
    pair k appears under both its mentions."""
    k = np.arange(qa.size, dtype=np.int64)
    own = np.concatenate([qa, qb]).astype(np.int64)
    other = np.concatenate([qb, qa]).astype(np.int64)
    idx = np.concatenate([k, k])
    order = np.argsort(own, kind="stable")
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(own, minlength=n), out=ptr[1:])
    return ptr, idx[order], other[order]


@njit(cache=True)
def _step(m, st, indptr, nbr, score, q_ptr, q_idx, q_oth, pair_sum, rng):
    label, size, acc, cnt, prob, touched = st.label, st.size, st.acc, st.cnt, st.prob, st.touched
    a = label[m]
    lo = indptr[m]
    hi = indptr[m + 1]
    st.reads[0] += hi - lo
    nt = 0
    for p in range(lo, hi):
        c = label[nbr[p]]
        if cnt[c] == 0:
            touched[nt] = c
            nt += 1
        cnt[c] += 1
        acc[c] += score[p]
    ka = size[a]
    fixed = ka > 1 and not _stays_connected(m, a, st, indptr, nbr)
    choice = a
    if fixed:
        prob[a] = 1.0
        for t in range(nt):
            if touched[t] != a:
                prob[touched[t]] = 0.0
    else:
        # log-weights relative to m alone (0): staying in a (when a has others), joining c
        la = acc[a] if ka > 1 else 0.0
        top = la if ka > 1 else 0.0
        top = max(top, 0.0)
        for t in range(nt):
            c = touched[t]
            if c == a:
                continue
            lc = acc[c]
            prob[c] = lc
            top = max(top, lc)
        z = np.exp(-top)  # m alone (when ka == 1 this is staying)
        if ka > 1:
            prob[a] = np.exp(la - top)
            z += prob[a]
        for t in range(nt):
            c = touched[t]
            if c != a:
                prob[c] = np.exp(prob[c] - top)
                z += prob[c]
        alone = np.exp(-top) / z
        for t in range(nt):
            prob[touched[t]] /= z
        if ka == 1:
            prob[a] = alone
        rng = next_state(rng)
        u = uniform(rng)
        choice = -1  # a new cluster
        if u >= alone:
            u -= alone
            for t in range(nt):
                c = touched[t]
                if c == a and ka == 1:
                    continue
                choice = c
                if u < prob[c]:
                    break
                u -= prob[c]
        elif ka == 1:
            choice = a
    for p in range(q_ptr[m], q_ptr[m + 1]):
        c = label[q_oth[p]]
        if cnt[c] > 0 or c == a:
            pair_sum[q_idx[p]] += 0.5 * prob[c]
    if choice != a:
        if choice < 0:
            st.n_free[0] -= 1
            choice = st.free[st.n_free[0]]
            acc[choice] = 0.0
        size[a] -= 1
        size[choice] += 1
        label[m] = choice
        if size[a] == 0:
            st.free[st.n_free[0]] = a
            st.n_free[0] += 1
    for t in range(nt):
        c = touched[t]
        acc[c] = 0.0
        cnt[c] = 0
        prob[c] = 0.0
    prob[a] = 0.0
    return rng


@njit(cache=True)
def gibbs_sweeps(st, indptr, nbr, score, rng_state, sweeps, q_ptr, q_idx, q_oth, pair_sum):
    """`sweeps` passes of n Gibbs steps (mentions in turn), adding every asked pair's
    conditional probability of one cluster to `pair_sum` (one pass adds at most 1 per pair:
    `asked_csr` lists pair k under both its mentions, each adding half). `rng_state`: uint64[1],
    advanced in place. Returns the number of steps that changed a mention's cluster."""
    n = st.label.shape[0]
    rng = rng_state[0]
    moved = 0
    for _ in range(sweeps):
        for m in range(n):
            before = st.label[m]
            rng = _step(m, st, indptr, nbr, score, q_ptr, q_idx, q_oth, pair_sum, rng)
            if st.label[m] != before:
                moved += 1
    rng_state[0] = rng
    return moved
