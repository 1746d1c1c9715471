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
order. `min_fill_steps` runs a bounded piece of the order at a time (the caller checks its
deadline and a cancel between pieces: on a thousand densely tied variables the whole order can
take seconds).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pdbq.errors import InferenceError

__all__ = ["MAX_DENSE", "MinFillGraph", "MinFillState", "min_fill_graph", "min_fill_kernel", "min_fill_start",
           "min_fill_steps"]

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


class MinFillState(NamedTuple):
    """A min-fill run in progress, so that it can go in bounded pieces (`min_fill_steps`) with a
    deadline and a cancel checked between them: ``alive`` (uint8[n]), ``fill`` (int64[n]) and
    ``weight`` (float64[n]) per variable, ``order`` (int64[n]), ``offsets`` (int64[n + 1]) and
    ``members`` (int64[n(n + 1)/2], the cliques' members back to back: no clique has more
    members than variables left) of the eliminations so far; ``adj`` is changed in place."""

    alive: np.ndarray
    fill: np.ndarray
    weight: np.ndarray
    order: np.ndarray
    offsets: np.ndarray
    members: np.ndarray


@njit(cache=True)
def min_fill_start(adj, card):
    """The state before the first elimination (every variable's fill and clique weight)."""
    n = adj.shape[0]
    alive = np.ones(n, dtype=np.uint8)
    fill = np.zeros(n, dtype=np.int64)
    nb = np.empty(n, dtype=np.int64)
    weight = np.zeros(n, dtype=np.float64)
    for u in range(n):
        fill[u], weight[u] = _fill_and_weight(adj, card, alive, u, nb)
    return alive, fill, weight, np.empty(n, dtype=np.int64), np.zeros(n + 1, dtype=np.int64), \
        np.empty(n * (n + 1) // 2, dtype=np.int64)


@njit(cache=True)
def min_fill_steps(adj, card, held, stop_above, alive, fill, weight, order, offsets, members, done, budget):
    """Eliminate from step ``done`` on until the order is complete, a clique is over
    ``stop_above`` (< 0: never), or about ``budget`` elementary operations (< 0: no bound) are
    spent; returns ``(done, stopped_above)``. The state arrays are updated in place."""
    n = adj.shape[0]
    nb = np.empty(n, dtype=np.int64)
    buf = np.empty(n, dtype=np.int64)
    touched = np.zeros(n, dtype=np.uint8)
    work = 0
    while done < n:
        if budget >= 0 and work >= budget:
            break
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
        base = offsets[done]
        for i in range(k):
            members[base + i] = buf[i]
        order[done] = v
        offsets[done + 1] = base + k
        done += 1
        work += n * (2 * k + 2)
        if stop_above >= 0 and size > stop_above:
            return done, True
        alive[v] = 0
        # fill edges between v's neighbours; who may see its fill change: the neighbours and
        # their neighbours (common neighbours of a new edge's ends)
        touched[:] = 0
        for i in range(k):
            a = buf[i]
            if a == v:
                continue
            touched[a] = 1
            for b in range(n):
                if alive[b] and adj[a, b]:
                    touched[b] = 1
            for j in range(i + 1, k):
                c = buf[j]
                if c != v and adj[a, c] == 0:
                    adj[a, c] = 1
                    adj[c, a] = 1
        for i in range(k):
            a = buf[i]
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
                work += n + k * k
    return done, False


@njit(cache=True)
def min_fill_kernel(adj, card, held, stop_above):
    """``(order, clique_members, clique_offsets, complete)`` in compact indices, in one call
    (no deadline); ``adj`` is changed (fill edges added, eliminated rows cleared): pass a copy
    to keep it."""
    alive, fill, weight, order, offsets, members = min_fill_start(adj, card)
    done, above = min_fill_steps(adj, card, held, stop_above, alive, fill, weight, order, offsets, members, 0, -1)
    return order[:done], members[: offsets[done]].copy(), offsets[: done + 1], not above
