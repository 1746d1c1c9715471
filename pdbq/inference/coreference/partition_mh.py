"""Sampling partitions of the mentions by Metropolis–Hastings mention moves, for posterior summaries.

Target: π(y) ∝ exp(ψ(y)) over clusterings y, ψ(y) = Σ_C S_C with S_C = Σ_{i<j ∈ C} w_ij, the
coreference model's own score (`pdbq.coref.layout`: candidate pairs only, others add 0).

One step picks a mention m (in turn) and proposes a new cluster for it: the cluster of a
neighbour drawn uniformly from m's row of the pair graph (probability 1 − `P_NEW`), or a cluster
of its own (`P_NEW`); it is accepted with the Metropolis–Hastings ratio of the target and of the
proposal probabilities, both computed from m's links into the two clusters. Moves along
candidate pairs only, and a move that would leave m's old cluster in two pieces (no chain of
candidate pairs inside it between two of its members) is rejected: the chain samples π
restricted to **connected clusterings**, those whose every cluster is connected by candidate
pairs (all clusterings when every pair is a candidate). That set is reached from any of its
members by these moves (a connected cluster always has a member whose leaving keeps it
connected), so π restricted to it is the chain's one stationary distribution.

State layout (`PartitionState`, arrays of length n): `label[m]` the cluster id of mention m (ids
in [0, n)), `size[c]` the size of cluster id c, `free[:n_free[0]]` a stack of unused
ids; per mention, `in_sum`/`in_cnt` its summed links into its own cluster and their number and
`pos_out` its summed positive links to other clusters, kept up to date by every move (a scan of
the moving mention's row). They let most proposals be rejected in O(1): the links into the
proposed cluster sum to at most `pos_out`, so where even that bound is rejected no row is
scanned (exactly the same decisions: the uniform is drawn first). `mark`/`queue`/`stamp` serve
the connectivity search.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pdbq.inference.mcmc.rng import bounded, next_state, uniform

__all__ = ["PartitionState", "partition_state", "mh_sweeps", "partition_score", "connected_clusters", "P_NEW"]

P_NEW = 0.1


class PartitionState(NamedTuple):
    label: np.ndarray   # int64[n]
    size: np.ndarray    # int64[n]
    free: np.ndarray    # int64[n]
    n_free: np.ndarray  # int64[1]
    in_sum: np.ndarray   # float64[n]: per mention, its summed links into its own cluster
    in_cnt: np.ndarray   # int64[n]: and their number
    pos_out: np.ndarray  # float64[n]: its summed positive links to mentions outside its cluster
    pos_in_old: np.ndarray  # float64[1] scratch
    mark: np.ndarray     # int64[n] scratch: search stamp per mention
    queue: np.ndarray    # int64[n] scratch
    stamp: np.ndarray    # int64[1]: the last search's stamp
    reads: np.ndarray    # int64[1]: pair scores read so far (the work done)


def partition_state(labels: np.ndarray, indptr: np.ndarray, nbr: np.ndarray, score: np.ndarray) -> PartitionState:
    """The state of a clustering `labels` (any int labels; mentions with equal labels share a
    cluster), each cluster cut into its pieces connected by candidate pairs (the chain's support,
    module docstring)."""
    n = labels.shape[0]
    _, dense = np.unique(np.asarray(labels), return_inverse=True)
    label = _pieces(dense.reshape(-1).astype(np.int64), indptr, nbr)
    size = np.bincount(label, minlength=n).astype(np.int64)
    free = np.flatnonzero(size == 0)[::-1].astype(np.int64)
    free = np.concatenate([free, np.zeros(n - free.size, np.int64)])
    src = np.repeat(np.arange(n), np.diff(indptr))
    inside = label[src] == label[nbr]
    in_sum = np.bincount(src[inside], weights=score[inside], minlength=n).astype(np.float64)
    in_cnt = np.bincount(src[inside], minlength=n).astype(np.int64)
    out = ~inside & (score > 0)
    pos_out = np.bincount(src[out], weights=score[out], minlength=n).astype(np.float64)
    return PartitionState(label, size, free, np.array([int((size == 0).sum())], np.int64), in_sum, in_cnt, pos_out,
                          np.zeros(1, np.float64), np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(1, np.int64),
                          np.zeros(1, np.int64))


def connected_clusters(labels: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    """Whether every cluster of `labels` is connected by the pairs (a, b) (numpy reference)."""
    labels = np.asarray(labels)
    parent = np.arange(labels.size)

    def root(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j in zip(np.asarray(a), np.asarray(b)):
        if labels[i] == labels[j]:
            parent[root(i)] = root(j)
    roots = np.array([root(x) for x in range(labels.size)])
    return all(np.unique(roots[labels == c]).size == 1 for c in np.unique(labels))


@njit(cache=True)
def _pieces(dense, indptr, nbr):
    """Labels of the pieces of each cluster of `dense` connected by candidate pairs (union-find)."""
    n = dense.shape[0]
    parent = np.arange(n)
    for i in range(n):
        for p in range(indptr[i], indptr[i + 1]):
            j = nbr[p]
            if dense[j] != dense[i]:
                continue
            x = i
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            y = j
            while parent[y] != y:
                parent[y] = parent[parent[y]]
                y = parent[y]
            if x != y:
                parent[x] = y
    out = np.empty(n, np.int64)
    for i in range(n):
        x = i
        while parent[x] != x:
            x = parent[x]
        out[i] = x
    return out


@njit(cache=True)
def _stays_connected(m, a, st, indptr, nbr):
    """Whether cluster a (connected, holding m) stays connected without m: a search inside
    a \\ m from one of m's neighbours in a must reach all the others (it stops when it has)."""
    label, mark, queue = st.label, st.mark, st.queue
    st.stamp[0] += 1
    t = st.stamp[0]
    need = 0
    first = -1
    for p in range(indptr[m], indptr[m + 1]):
        x = nbr[p]
        if label[x] == a:
            need += 1
            first = x
    if need <= 1:
        return True  # m is a leaf of its cluster
    # m's neighbours in a are the targets: marked t, visited ones get -t
    for p in range(indptr[m], indptr[m + 1]):
        x = nbr[p]
        if label[x] == a:
            mark[x] = t
    mark[m] = -t
    mark[first] = -t
    found = 1
    head = 0
    tail = 0
    queue[tail] = first
    tail += 1
    while head < tail:
        x = queue[head]
        head += 1
        st.reads[0] += indptr[x + 1] - indptr[x]
        for p in range(indptr[x], indptr[x + 1]):
            y = nbr[p]
            if label[y] != a or mark[y] == -t:
                continue
            if mark[y] == t:
                found += 1
                if found == need:
                    return True
            mark[y] = -t
            queue[tail] = y
            tail += 1
    return False


@njit(cache=True)
def _move(m, a, b, st, indptr, nbr, score):
    """Move m from cluster a to cluster id b and update its neighbours' sums (`in_sum`,
    `in_cnt`, `pos_out`) and its own."""
    label, in_sum, in_cnt, pos_out = st.label, st.in_sum, st.in_cnt, st.pos_out
    st.reads[0] += indptr[m + 1] - indptr[m]
    s = 0.0
    k = 0
    pos_in = 0.0
    for p in range(indptr[m], indptr[m + 1]):
        x = nbr[p]
        w = score[p]
        if label[x] == a:
            in_sum[x] -= w
            in_cnt[x] -= 1
            if w > 0.0:
                pos_out[x] += w
        elif label[x] == b:
            in_sum[x] += w
            in_cnt[x] += 1
            if w > 0.0:
                pos_out[x] -= w
            s += w
            k += 1
            if w > 0.0:
                pos_in += w
    pos_out[m] += st.pos_in_old[0] - pos_in
    in_sum[m] = s
    in_cnt[m] = k
    st.size[a] -= 1
    st.size[b] += 1
    label[m] = b
    if st.size[a] == 0:
        st.free[st.n_free[0]] = a
        st.n_free[0] += 1


@njit(cache=True)
def _links_into(m, b, st, indptr, nbr, score):
    """(summed links, their number, summed positive links) of m into cluster b: a row scan."""
    s = 0.0
    k = 0
    pos = 0.0
    st.reads[0] += indptr[m + 1] - indptr[m]
    for p in range(indptr[m], indptr[m + 1]):
        if st.label[nbr[p]] == b:
            w = score[p]
            s += w
            k += 1
            if w > 0.0:
                pos += w
    return s, k, pos


@njit(cache=True)
def _step(m, st, indptr, nbr, score, rng):
    label, size = st.label, st.size
    a = label[m]
    lo = indptr[m]
    deg = indptr[m + 1] - lo
    rng = next_state(rng)
    b = -1  # -1: a cluster of its own
    if uniform(rng) >= P_NEW and deg > 0:
        rng = next_state(rng)
        b = label[nbr[lo + bounded(rng, deg)]]
    # no move when b is m's cluster, or m is alone and asks for a cluster of its own; a move
    # m could not be proposed back from (no link into a \ m) has reverse probability 0
    if b == a or (b < 0 and size[a] == 1) or (size[a] > 1 and st.in_cnt[m] == 0):
        return rng, False
    xa = st.in_sum[m]
    q_r = P_NEW if size[a] == 1 else (1.0 - P_NEW) * st.in_cnt[m] / deg
    rng = next_state(rng)
    log_u = np.log(uniform(rng))
    if b < 0:
        if -xa + np.log(q_r) - np.log(P_NEW) < log_u:
            return rng, False
    else:
        # an upper bound first, in O(1): m's links into b sum to at most its positive links
        # outside its cluster, and b holds at least one of its neighbours
        # (1e-9: the sums are kept by additions and may drift by rounding; the bound must hold)
        if st.pos_out[m] + 1e-9 - xa + np.log(q_r) - np.log((1.0 - P_NEW) / deg) < log_u:
            return rng, False
        xb, kb, _ = _links_into(m, b, st, indptr, nbr, score)
        if xb - xa + np.log(q_r) - np.log((1.0 - P_NEW) * kb / deg) < log_u:
            return rng, False
    if size[a] > 1 and not _stays_connected(m, a, st, indptr, nbr):
        return rng, False
    if b < 0:
        st.n_free[0] -= 1
        b = st.free[st.n_free[0]]
    # m's positive links into a, which become links out of its cluster
    _, _, st.pos_in_old[0] = _links_into(m, a, st, indptr, nbr, score)
    _move(m, a, b, st, indptr, nbr, score)
    return rng, True


@njit(cache=True)
def mh_sweeps(st, indptr, nbr, score, rng_state, sweeps, qa, qb, cl_ptr, cl_mem, pair_hits, cluster_hits):
    """`sweeps` passes of n steps each (mentions in turn); after each pass, count the asked
    pairs (qa[k], qb[k]) that share a cluster (`pair_hits`) and the given clusters (CSR
    `cl_ptr`/`cl_mem`) that are exactly a cluster of the state (`cluster_hits`). `rng_state`:
    uint64[1], advanced in place. Returns the number of accepted moves."""
    n = st.label.shape[0]
    accepted = 0
    rng = rng_state[0]
    for _ in range(sweeps):
        for m in range(n):
            rng, moved = _step(m, st, indptr, nbr, score, rng)
            if moved:
                accepted += 1
        label = st.label
        for k in range(pair_hits.shape[0]):
            if label[qa[k]] == label[qb[k]]:
                pair_hits[k] += 1
        for c in range(cluster_hits.shape[0]):
            lo = cl_ptr[c]
            hi = cl_ptr[c + 1]
            e = label[cl_mem[lo]]
            if st.size[e] != hi - lo:
                continue
            exact = True
            for p in range(lo + 1, hi):
                if label[cl_mem[p]] != e:
                    exact = False
                    break
            if exact:
                cluster_hits[c] += 1
    rng_state[0] = rng
    return accepted


def partition_score(labels: np.ndarray, a: np.ndarray, b: np.ndarray, w: np.ndarray) -> float:
    """ψ(y) of a clustering `labels` from the pairs (a, b, w), in numpy: the reference the
    sampler is tested against."""
    labels = np.asarray(labels)
    return float(np.asarray(w)[labels[np.asarray(a)] == labels[np.asarray(b)]].sum())
