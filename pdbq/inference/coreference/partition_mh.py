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
ids; the scratch arrays `acc`/`cnt` (per cluster id: m's summed links into it and their number)
hold the current step's values where `seen` holds its stamp (`stamp[1]`), so no step clears
them; `mark`/`queue`/`stamp[0]` serve the connectivity search.
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
    acc: np.ndarray     # float64[n] scratch
    cnt: np.ndarray     # int64[n] scratch
    seen: np.ndarray    # int64[n] scratch: the step that last reset acc/cnt of a cluster id
    mark: np.ndarray    # int64[n] scratch: search stamp per mention
    queue: np.ndarray   # int64[n] scratch
    stamp: np.ndarray   # int64[2]: the last search's and the last step's stamps


def partition_state(labels: np.ndarray, indptr: np.ndarray, nbr: np.ndarray) -> PartitionState:
    """The state of a clustering `labels` (any int labels; mentions with equal labels share a
    cluster), each cluster cut into its pieces connected by candidate pairs (the chain's support,
    module docstring)."""
    n = labels.shape[0]
    _, dense = np.unique(np.asarray(labels), return_inverse=True)
    label = _pieces(dense.reshape(-1).astype(np.int64), indptr, nbr)
    size = np.bincount(label, minlength=n).astype(np.int64)
    free = np.flatnonzero(size == 0)[::-1].astype(np.int64)
    free = np.concatenate([free, np.zeros(n - free.size, np.int64)])
    return PartitionState(label, size, free, np.array([int((size == 0).sum())], np.int64),
                          np.zeros(n, np.float64), np.zeros(n, np.int64), np.zeros(n, np.int64),
                          np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(2, np.int64))


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
def _step(m, st, indptr, nbr, score, rng):
    label, size, free, n_free, acc, cnt, seen = st.label, st.size, st.free, st.n_free, st.acc, st.cnt, st.seen
    a = label[m]
    lo = indptr[m]
    hi = indptr[m + 1]
    deg = hi - lo
    st.stamp[1] += 1
    t = st.stamp[1]
    for p in range(lo, hi):
        c = label[nbr[p]]
        if seen[c] != t:
            seen[c] = t
            acc[c] = 0.0
            cnt[c] = 0
        acc[c] += score[p]
        cnt[c] += 1
    if seen[a] != t:  # no link into m's own cluster
        seen[a] = t
        acc[a] = 0.0
        cnt[a] = 0
    rng = next_state(rng)
    b = -1  # -1: a cluster of its own
    if uniform(rng) >= P_NEW and deg > 0:
        rng = next_state(rng)
        b = label[nbr[lo + bounded(rng, deg)]]
    moved = False
    # no move when b is m's cluster, or m is alone and asks for a cluster of its own; a move
    # m could not be proposed back from (no link into a \ m) has reverse probability 0
    if b != a and not (b < 0 and size[a] == 1) and (size[a] == 1 or cnt[a] > 0):
        xa = acc[a]
        q_f = P_NEW if b < 0 else (1.0 - P_NEW) * cnt[b] / deg
        q_r = P_NEW if size[a] == 1 else (1.0 - P_NEW) * cnt[a] / deg
        d = -xa + (acc[b] if b >= 0 else 0.0)
        log_ratio = d + np.log(q_r) - np.log(q_f)
        rng = next_state(rng)
        accept = log_ratio >= 0.0 or uniform(rng) < np.exp(log_ratio)
        if accept and (size[a] == 1 or _stays_connected(m, a, st, indptr, nbr)):
            moved = True
            size[a] -= 1
            if b < 0:
                n_free[0] -= 1
                b = free[n_free[0]]
            size[b] += 1
            label[m] = b
            if size[a] == 0:
                free[n_free[0]] = a
                n_free[0] += 1
    return rng, moved


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
