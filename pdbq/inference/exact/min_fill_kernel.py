"""Greedy min-fill elimination as one numba kernel, for interaction graphs small enough for a dense
adjacency matrix (issue 20: the order is most of exact inference's cost on small networks,
~10 ms in Python's sets and heap on Grids_12 against well under 1 ms here).

Layout (`MinFillGraph`, built by `min_fill_graph`, which checks the inputs; the kernel checks
nothing):

- ``n`` variables, indexed ``0..n-1`` in ascending order of their ids (``ids[i]``, int64), so a
  tie broken towards the smaller index is broken towards the smaller id;
- ``adj`` (uint8[n, n], symmetric, zero diagonal): 1 where two variables share a scope;
- ``card`` (float64[n]): each variable's cardinality (clique sizes are products of these,
  exact below 2**53).

The rule is `pdbq.inference.exact.elimination_order.min_fill_order`'s: eliminate the variable with
the fewest fill edges, ties by the smallest clique table (a float product, exact below 2**53),
then by the smallest id, every variable with ``held[i]`` (uint8[n]) after all the others; stop
after the first clique whose table is over ``stop_above`` (< 0: never). The two give the same
order.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pdbq.errors import InferenceError

__all__ = ["MAX_DENSE", "MinFillGraph", "min_fill_graph", "min_fill_kernel"]

MAX_DENSE = 1024  # variables: a 1 MiB adjacency matrix; the kernel's steps scan rows of n


class MinFillGraph(NamedTuple):
    ids: np.ndarray  # int64[n], ascending
    adj: np.ndarray  # uint8[n, n]
    card: np.ndarray  # float64[n]


def min_fill_graph(scopes, cardinality: np.ndarray) -> MinFillGraph:
    """The dense layout of the interaction graph of ``scopes`` (int arrays of variable ids);
    `InferenceError` for a bad cardinality or more than `MAX_DENSE` variables."""
    parts = [np.asarray(s, dtype=np.int64) for s in scopes]
    parts = [s for s in parts if s.size]
    ids = np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
    if ids.size > MAX_DENSE:
        raise InferenceError(f"min_fill_graph: {ids.size} variables, over the dense layout's {MAX_DENSE}")
    cardinality = np.asarray(cardinality)
    if ids.size and (ids[0] < 0 or ids[-1] >= cardinality.shape[0]):
        raise InferenceError("min_fill_graph: a scope names a variable outside the cardinalities")
    card = cardinality[ids].astype(np.float64)
    if np.any(card < 1):
        raise InferenceError("min_fill_graph: a cardinality below 1")
    n = ids.shape[0]
    adj = np.zeros((n, n), dtype=np.uint8)
    if parts:
        # all pairs within each scope, scopes of one length at a time
        lens = np.array([s.size for s in parts], dtype=np.int64)
        flat = np.searchsorted(ids, np.concatenate(parts))
        start = np.cumsum(lens) - lens
        rows, cols = [], []
        for k in np.unique(lens).tolist():
            base = start[lens == k]
            a = np.repeat(np.arange(k), k)
            b = np.tile(np.arange(k), k)
            rows.append(flat[(base[:, None] + a[None, :]).ravel()])
            cols.append(flat[(base[:, None] + b[None, :]).ravel()])
        adj[np.concatenate(rows), np.concatenate(cols)] = 1
        np.fill_diagonal(adj, 0)
    return MinFillGraph(ids, adj, card)


@njit(cache=True)
def _fill_and_weight(adj, card, alive, u, nb):
    n = adj.shape[0]
    d = 0
    w = card[u]
    for a in range(n):
        if alive[a] and adj[u, a]:
            nb[d] = a
            d += 1
            w *= card[a]
    linked = 0
    for i in range(d):
        for j in range(i + 1, d):
            if adj[nb[i], nb[j]]:
                linked += 1
    return d * (d - 1) // 2 - linked, w


@njit(cache=True)
def min_fill_kernel(adj, card, held, stop_above):
    """``(order, clique_members, clique_offsets, complete)`` in compact indices; ``adj`` is
    changed (fill edges added, eliminated rows cleared): pass a copy to keep it."""
    n = adj.shape[0]
    alive = np.ones(n, dtype=np.uint8)
    fill = np.zeros(n, dtype=np.int64)
    nb = np.empty(n, dtype=np.int64)
    weight = np.zeros(n, dtype=np.float64)
    for u in range(n):
        fill[u], weight[u] = _fill_and_weight(adj, card, alive, u, nb)
    order = np.empty(n, dtype=np.int64)
    members = np.empty(0, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    buf = np.empty(n, dtype=np.int64)
    touched = np.zeros(n, dtype=np.uint8)
    chunks = []
    total = 0
    complete = True
    done = 0
    for step in range(n):
        v = -1
        for u in range(n):
            if alive[u] and (v < 0 or held[u] < held[v] or (held[u] == held[v] and (
                    fill[u] < fill[v] or (fill[u] == fill[v] and weight[u] < weight[v])))):
                v = u
        # the clique {v} ∪ N(v), ascending
        k = 0
        size = 1.0
        for u in range(n):
            if u == v or (alive[u] and adj[v, u]):
                buf[k] = u
                k += 1
                size *= card[u]
        clique = buf[:k].copy()
        chunks.append(clique)
        total += k
        order[step] = v
        offsets[step + 1] = total
        done = step + 1
        if stop_above >= 0 and size > stop_above:
            complete = False
            break
        alive[v] = 0
        # fill edges between v's neighbours; who may see its fill change: the neighbours and
        # their neighbours (common neighbours of a new edge's ends)
        touched[:] = 0
        for i in range(k):
            a = clique[i]
            if a == v:
                continue
            touched[a] = 1
            for b in range(n):
                if alive[b] and adj[a, b]:
                    touched[b] = 1
            for j in range(i + 1, k):
                c = clique[j]
                if c != v and adj[a, c] == 0:
                    adj[a, c] = 1
                    adj[c, a] = 1
        for i in range(k):
            a = clique[i]
            if a == v:
                continue
            for b in range(n):
                if alive[b] and adj[a, b]:
                    touched[b] = 1
        for u in range(n):
            adj[v, u] = 0
            adj[u, v] = 0
        for u in range(n):
            if touched[u] and alive[u]:
                fill[u], weight[u] = _fill_and_weight(adj, card, alive, u, nb)
    members = np.empty(total, dtype=np.int64)
    p = 0
    for c in chunks:
        for x in c:
            members[p] = x
            p += 1
    return order[:done], members, offsets[: done + 1], complete
