"""Influence of neighbouring variables on each other, and influence trail scores (seed 003, eq. 9).

For two neighbouring variables ``i`` and ``j`` (sharing a factor or a head group) the *edge
influence* is the total-variation influence of their approximate pairwise joint

    ι(i, j) = ‖φ(x_i, x_j) − φ(x_i) φ(x_j)‖_TV = ½ Σ |φ(x_i, x_j) − φ(x_i) φ(x_j)|

where ``φ`` is the normalised product of their MUTUAL factors only. Each mutual factor enters
through its pairwise reduction: its potential (probability space, ``exp`` of its log-table) is
averaged over its other non-evidence arguments at uniform, and sliced at the observed value of
its evidence arguments. A head group (LOGICAL/RATIO semantics) enters the same way through the
log-table of its whole hyperedge (`pdbq.inference.exact.potentials.hyperedges`): this is the
documented approximation for groups, exact for the group's own pairwise coupling at a uniform
background but blind to the rest of the graph, like every other factor here. Hyperedges wider
than ``max_table`` entries: see `edge_influence`.

A variable's *trail score* is the best product of edge influences along a trail from any query
variable through non-evidence variables: Dijkstra on edge cost ``−log ι``. Query variables
score 1; variables no trail reaches score 0.

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder()
>>> x = b.add_variables(3)
>>> _ = b.add_factor(FactorFunction.TABLE, [x[0], x[1]], table=[1.0, 0.0, 0.0, 1.0])
>>> _ = b.add_factor(FactorFunction.TABLE, [x[1], x[2]], table=[1.0, 0.0, 0.0, 1.0])
>>> s = trail_scores(b.build(), [0])
>>> [round(float(v), 4) for v in s]
[1.0, 0.2311, 0.0534]
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from pdbq.arrays import unique
from pdbq.errors import InferenceError
from pdbq.graph.layout import FactorGraph
from pdbq.inference.exact import potentials
from pdbq.language.nodes import FactorFunction

__all__ = [
    "EdgeInfluence",
    "edge_influence",
    "pair_tv",
    "trail_scores",
    "graph_distance",
    "neighbour_csr",
]

# The largest hyperedge table (entries) reduced to pairs; see `edge_influence` for wider ones.
DEFAULT_MAX_TABLE = 1 << 16


class EdgeInfluence(NamedTuple):
    """Undirected neighbour pairs ``u[k] < v[k]`` with their TV influence ``iota[k]`` in [0, 1]."""

    u: np.ndarray  # int32[m]
    v: np.ndarray  # int32[m]
    iota: np.ndarray  # float64[m]


# --------------------------------------------------------------------------- pairwise joints


@numba.njit(cache=True)
def _pair_tv(t: np.ndarray, out: np.ndarray) -> None:
    m, ca, cb = t.shape
    phi = np.empty((ca, cb))
    pa = np.empty(ca)
    pb = np.empty(cb)
    for k in range(m):
        top = -np.inf
        for a in range(ca):
            for b in range(cb):
                if t[k, a, b] > top:
                    top = t[k, a, b]
        if top == -np.inf:  # an impossible pair (all -inf) couples nothing
            out[k] = 0.0
            continue
        z = 0.0
        for a in range(ca):
            for b in range(cb):
                phi[a, b] = np.exp(t[k, a, b] - top)
                z += phi[a, b]
        pa[:] = 0.0
        pb[:] = 0.0
        for a in range(ca):
            for b in range(cb):
                phi[a, b] /= z
                pa[a] += phi[a, b]
                pb[b] += phi[a, b]
        acc = 0.0
        for a in range(ca):
            for b in range(cb):
                acc += abs(phi[a, b] - pa[a] * pb[b])
        out[k] = 0.5 * acc


def pair_tv(log_tables: np.ndarray) -> np.ndarray:
    """TV influence of each pairwise log-table: ``log_tables`` float64[m, ca, cb] → float64[m].

    ``½ Σ_ab |φ(a,b) − φ(a)φ(b)|`` with ``φ`` the normalised ``exp`` of the table.

    >>> round(float(pair_tv(np.array([[[1.0, 0.0], [0.0, 1.0]]]))[0]), 6)  # (e − 1) / (2(e + 1))
    0.231059
    """
    t = np.ascontiguousarray(log_tables, dtype=np.float64)
    if t.ndim != 3:
        raise InferenceError("pair_tv expects an array of shape (pairs, card_a, card_b)")
    if np.any(np.isnan(t)) or np.any(np.isposinf(t)):
        raise InferenceError("pairwise log-tables must not hold NaN or +inf")
    out = np.zeros(t.shape[0], dtype=np.float64)
    _pair_tv(t, out)
    return out


def _logmeanexp(t: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    if not axes:
        return t
    m = t.max(axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.mean(np.exp(t - m), axis=axes, keepdims=True)) + m
    return np.squeeze(out, axis=axes)


def _hyperedge_pairs(scope: np.ndarray, table: np.ndarray):
    """Pairwise log-tables of one (evidence-conditioned) hyperedge: every other argument averaged
    out at uniform, in probability space. Yields ``(a, b, 2-d log-table)`` with ``a < b``."""
    k = scope.shape[0]
    for r in range(k):
        for s in range(r + 1, k):
            others = tuple(q for q in range(k) if q != r and q != s)
            yield int(scope[r]), int(scope[s]), _logmeanexp(table, others)


def _weighted_tables(w: np.ndarray, phi: np.ndarray) -> np.ndarray:
    """``w · φ`` per table with ``0 · (−inf) = 0`` (as in `potentials.hyperedges`)."""
    with np.errstate(invalid="ignore"):
        out = w[:, None, None] * phi
    zero = w == 0.0
    if np.any(zero):
        out[zero] = 0.0
    return out


class _Part(NamedTuple):
    """Pairs ``a < b`` whose pairwise log-table is ``lib[idx]`` (a small library when many
    factors share one table, as a template's groundings do)."""

    a: np.ndarray
    b: np.ndarray
    lib: np.ndarray  # float64[L, ca, cb]
    idx: np.ndarray  # int64[m]


def _oriented(a, b, lib, idx, explicit: bool) -> list[_Part]:
    """Split records into ``a < b`` parts, transposing the tables of swapped ones."""
    swap = a > b
    out = []
    for sel, flip in ((~swap, False), (swap, True)):
        if not np.any(sel):
            continue
        if explicit:  # one table per record: keep only this side's
            sub = lib[idx[sel]]
            ii = np.arange(sub.shape[0], dtype=np.int64)
        else:
            sub, ii = lib, idx[sel]
        if flip:
            out.append(_Part(b[sel], a[sel], np.ascontiguousarray(np.swapaxes(sub, 1, 2)), ii))
        else:
            out.append(_Part(a[sel], b[sel], sub, ii))
    return out


def _pairwise_parts(graph: FactorGraph, f2: np.ndarray, a: np.ndarray, b: np.ndarray, card: np.ndarray):
    """Parts for standalone two-argument factors, vectorised: factors with the same (function,
    literals, cardinalities, weight) share one table ``w · φ``, with φ evaluated once by
    `potentials.factor_value`; TABLE factors bring their own tables."""
    lo = graph.factor_offsets[f2]
    code = graph.function[f2].astype(np.int64)
    l0 = graph.factor_literals[lo].astype(np.int64)
    l1 = graph.factor_literals[lo + 1].astype(np.int64)
    ca, cb = card[a], card[b]
    widx = graph.weight[f2].astype(np.int64)
    out: list[_Part] = []
    # one int64 key per (function, literals, cardinalities): mixed radix
    rl = int(max(l0.max(), l1.max())) + 2
    rc = int(max(ca.max(), cb.max())) + 1
    key = (((code * rl + (l0 + 1)) * rl + (l1 + 1)) * rc + ca) * rc + cb
    if np.all(key == key[0]):
        groups = [np.arange(key.shape[0])]
    else:
        order = np.argsort(key, kind="stable")
        ks = key[order]
        groups = np.split(order, np.flatnonzero(ks[1:] != ks[:-1]) + 1)
    for sel in groups:
        c = int(code[sel[0]])
        na, nb = int(ca[sel[0]]), int(cb[sel[0]])
        w_sel = widx[sel]
        if c == int(FactorFunction.TABLE):
            tix = graph.table_offset[f2[sel]][:, None] + np.arange(na * nb, dtype=np.int64)[None, :]
            lib = _weighted_tables(graph.weights[w_sel], graph.tables[tix].reshape(-1, na, nb))
            out += _oriented(a[sel], b[sel], lib, np.arange(sel.shape[0], dtype=np.int64), True)
            continue
        f0 = int(f2[sel[0]])
        va, vb = int(a[sel[0]]), int(b[sel[0]])
        state = np.zeros(graph.n_vars, dtype=np.int64)
        one = np.empty((na, nb))
        for x in range(na):
            for y in range(nb):
                state[va], state[vb] = x, y
                one[x, y] = potentials.factor_value(graph, f0, state)
        if w_sel.min() == w_sel.max():
            uw, inv = w_sel[:1], np.zeros(sel.shape[0], dtype=np.int64)
        else:
            uw, inv = np.unique(w_sel, return_inverse=True)
        lib = _weighted_tables(graph.weights[uw], np.broadcast_to(one, (uw.shape[0], na, nb)))
        out += _oriented(a[sel], b[sel], lib, inv.ravel().astype(np.int64), False)
    return out


def _subgraph(graph: FactorGraph, factors: np.ndarray, ungroup: np.ndarray) -> FactorGraph:
    """The graph restricted to ``factors`` (variables, weights and groups kept); factors in
    ``ungroup`` lose their group (linearised: they count alone with the group's weight)."""
    arity = np.diff(graph.factor_offsets)[factors]
    offs = np.zeros(factors.shape[0] + 1, dtype=np.int64)
    np.cumsum(arity, out=offs[1:])
    edge = np.concatenate(
        [np.arange(graph.factor_offsets[f], graph.factor_offsets[f + 1]) for f in factors]
    ) if factors.shape[0] else np.zeros(0, dtype=np.int64)
    group = graph.group[factors].copy()
    group[ungroup[factors]] = -1
    return graph._replace(
        function=graph.function[factors],
        weight=graph.weight[factors],
        group=group,
        factor_offsets=offs,
        factor_vars=graph.factor_vars[edge],
        factor_literals=graph.factor_literals[edge],
        table_offset=graph.table_offset[factors],
    )


def _collect_pairs(graph: FactorGraph, max_table: int):
    """Every pairwise log-table of mutual factors, as `_Part` lists (``a < b``), and the forced
    pairs; evidence variables are sliced out, pairs touching them dropped."""
    card = graph.cardinality.astype(np.int64)
    ev = graph.evidence
    arity = np.diff(graph.factor_offsets)
    lo = graph.factor_offsets[:-1]
    parts = []
    forced = []  # pairs of factors too wide to tabulate: influence 1 (see edge_influence)

    # Fast path: standalone factors over two distinct non-evidence variables (chains, grids).
    two = (graph.group < 0) & (arity == 2)
    f2 = np.flatnonzero(two)
    a = graph.factor_vars[lo[f2]].astype(np.int64)
    b = graph.factor_vars[lo[f2] + 1].astype(np.int64)
    keep = (a != b) & (ev[a] < 0) & (ev[b] < 0)
    if np.any(keep):
        parts += _pairwise_parts(graph, f2[keep], a[keep], b[keep], card)
    # Pairs with evidence or a repeated variable still couple nothing new; the rest of the
    # two-argument factors are done. Everything else goes through hyperedge tables.
    rest = np.flatnonzero(~two & ((arity >= 2) | (graph.group >= 0)))
    if rest.shape[0]:
        # A head group (or a standalone factor) whose table would exceed max_table is reduced
        # factor by factor (group linearised), or, for one wide factor, forced (see below).
        ungroup = np.zeros(graph.n_factors, dtype=bool)
        grouped = rest[graph.group[rest] >= 0]
        if grouped.shape[0]:
            gsize: dict[int, set] = {}
            for f in grouped:
                gsize.setdefault(int(graph.group[f]), set()).update(
                    graph.factor_vars[graph.factor_offsets[f] : graph.factor_offsets[f + 1]].tolist())
            wide = {gid for gid, vs in gsize.items() if np.prod(card[list(vs)].astype(float)) > max_table}
            if wide:
                ungroup[grouped[np.isin(graph.group[grouped], list(wide))]] = True
        alone = ~(graph.group >= 0) | ungroup
        fsize = np.array([np.prod(card[graph.factor_vars[lo[f]:lo[f] + arity[f]]].astype(float)) for f in rest])
        too_wide = alone[rest] & (fsize > max_table)
        for f in rest[too_wide]:
            vs = np.unique(graph.factor_vars[lo[f]:lo[f] + arity[f]])
            vs = vs[ev[vs] < 0]
            forced.extend((int(x), int(y)) for i, x in enumerate(vs) for y in vs[i + 1:])
        sub = _subgraph(graph, rest[~too_wide], ungroup)
        by_shape: dict[tuple[int, int], tuple[list, list, list]] = {}
        for he in potentials.condition(potentials.hyperedges(sub), ev):
            for x, y, t2 in _hyperedge_pairs(he.scope, he.log_table):
                xs, ys, ts = by_shape.setdefault(t2.shape, ([], [], []))
                xs.append(x)
                ys.append(y)
                ts.append(t2)
        for xs, ys, ts in by_shape.values():
            parts.append(_Part(np.array(xs, dtype=np.int64), np.array(ys, dtype=np.int64), np.stack(ts),
                               np.arange(len(ts), dtype=np.int64)))
    return parts, forced


def edge_influence(graph: FactorGraph, *, max_table: int = DEFAULT_MAX_TABLE) -> EdgeInfluence:
    """TV influence of every neighbouring pair of non-evidence variables (module docstring).

    A hyperedge whose table would exceed ``max_table`` entries is not tabulated: a head group
    that wide is linearised (each member factor counted alone with the group's weight); a
    single standalone factor that wide couples each pair of its variables with influence 1
    (the conservative choice: its variables are never starved of updates).
    """
    if max_table < 4:
        raise InferenceError(f"max_table must be at least 4, got {max_table}")
    n = graph.n_vars
    parts, forced = _collect_pairs(graph, max_table)
    buckets: dict[tuple[int, int], list[_Part]] = {}
    for part in parts:
        buckets.setdefault(part.lib.shape[1:], []).append(part)
    us, vs, ios = [], [], []
    for chunk in buckets.values():
        a = np.concatenate([p.a for p in chunk]).astype(np.int64)
        b = np.concatenate([p.b for p in chunk]).astype(np.int64)
        shift = np.cumsum([0] + [p.lib.shape[0] for p in chunk[:-1]])
        idx = np.concatenate([p.idx + k for p, k in zip(chunk, shift)])
        lib = np.concatenate([p.lib for p in chunk]).astype(np.float64)
        lib_tv = pair_tv(lib)
        key = a * n + b
        if key.shape[0] > 1 and np.all(key[1:] > key[:-1]):  # sorted, one factor per pair (chains)
            us.append(a)
            vs.append(b)
            ios.append(lib_tv[idx])
            continue
        order = np.argsort(key, kind="stable")
        key = key[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        count = np.diff(np.r_[starts, key.shape[0]])
        io = lib_tv[idx[order[starts]]]  # right for pairs with one mutual factor
        multi = np.flatnonzero(count > 1)
        if multi.shape[0]:
            # log of the product of the mutual factors' potentials = sum of their log-tables
            rec = np.repeat(starts[multi], count[multi]) + (
                np.arange(int(count[multi].sum())) - np.repeat(np.cumsum(count[multi]) - count[multi], count[multi])
            )
            sub_starts = np.cumsum(count[multi]) - count[multi]
            summed = np.add.reduceat(lib[idx[order[rec]]], sub_starts, axis=0)
            io[multi] = pair_tv(summed)
        us.append(a[order][starts])
        vs.append(b[order][starts])
        ios.append(io)
    if forced:
        fp = np.array(forced, dtype=np.int64).reshape(-1, 2)
        us.append(fp[:, 0])
        vs.append(fp[:, 1])
        ios.append(np.ones(fp.shape[0]))
    if not us:
        z = np.zeros(0, dtype=np.int32)
        return EdgeInfluence(z, z.copy(), np.zeros(0, dtype=np.float64))
    u = np.concatenate(us)
    v = np.concatenate(vs)
    io = np.concatenate(ios)
    if len(us) > 1:  # one pair can come from several buckets only through `forced`: keep the max
        key = u * n + v
        order = np.lexsort((-io, key))
        key = key[order]
        first = np.r_[True, key[1:] != key[:-1]]
        u, v, io = u[order][first], v[order][first], io[order][first]
    return EdgeInfluence(u.astype(np.int32), v.astype(np.int32), io)


# --------------------------------------------------------------------------- trails


@numba.njit(cache=True)
def _fill_csr(u, v, w, offsets, nbr, ww):
    n = offsets.shape[0] - 1
    deg = np.zeros(n, dtype=np.int64)
    for k in range(u.shape[0]):
        deg[u[k]] += 1
        deg[v[k]] += 1
    for i in range(n):
        offsets[i + 1] = offsets[i] + deg[i]
    pos = offsets[:-1].copy()
    for k in range(u.shape[0]):
        a, b = u[k], v[k]
        nbr[pos[a]] = b
        ww[pos[a]] = w[k]
        pos[a] += 1
        nbr[pos[b]] = a
        ww[pos[b]] = w[k]
        pos[b] += 1


def neighbour_csr(n_vars: int, u: np.ndarray, v: np.ndarray, w: np.ndarray):
    """Symmetric CSR adjacency ``(offsets int64[n+1], nbr int32[2m], weight float64[2m])``
    from undirected pairs (a counting sort: linear time)."""
    m = u.shape[0]
    offsets = np.zeros(n_vars + 1, dtype=np.int64)
    nbr = np.empty(2 * m, dtype=np.int32)
    ww = np.empty(2 * m, dtype=np.float64)
    _fill_csr(
        np.ascontiguousarray(u, dtype=np.int32), np.ascontiguousarray(v, dtype=np.int32),
        np.ascontiguousarray(w, dtype=np.float64), offsets, nbr, ww,
    )
    return offsets, nbr, ww


@numba.njit(cache=True, inline="always")
def _heap_push(hd, hv, size, d, v):  # pragma: no cover - compiled
    """Push (d, v) on the binary min-heap held in hd/hv[:size]; returns the new size."""
    i = size
    hd[i] = d
    hv[i] = v
    while i > 0:
        p = (i - 1) >> 1
        if hd[p] <= hd[i]:
            break
        hd[p], hd[i] = hd[i], hd[p]
        hv[p], hv[i] = hv[i], hv[p]
        i = p
    return size + 1


@numba.njit(cache=True)
def _dijkstra(offsets, nbr, cost, sources, max_cost):
    """Multi-source shortest paths with a binary heap (lazy deletion); returns float64[n].
    Paths longer than ``max_cost`` are not followed (their nodes stay at inf)."""
    n = offsets.shape[0] - 1
    dist = np.full(n, np.inf)
    cap = nbr.shape[0] + sources.shape[0] + 1
    hd = np.empty(cap, dtype=np.float64)
    hv = np.empty(cap, dtype=np.int64)
    size = 0
    for s in sources:
        dist[s] = 0.0
        size = _heap_push(hd, hv, size, 0.0, s)
    while size > 0:
        d = hd[0]
        x = hv[0]
        size -= 1
        hd[0] = hd[size]
        hv[0] = hv[size]
        i = 0
        while True:
            l = 2 * i + 1
            if l >= size:
                break
            c = l
            if l + 1 < size and hd[l + 1] < hd[l]:
                c = l + 1
            if hd[i] <= hd[c]:
                break
            hd[c], hd[i] = hd[i], hd[c]
            hv[c], hv[i] = hv[i], hv[c]
            i = c
        if d > dist[x]:
            continue
        for k in range(offsets[x], offsets[x + 1]):
            y = nbr[k]
            nd = d + cost[k]
            if nd < dist[y] and nd <= max_cost:
                dist[y] = nd
                size = _heap_push(hd, hv, size, nd, y)
    return dist


def _check_query(graph: FactorGraph, query_vars) -> np.ndarray:
    q = unique(np.asarray(query_vars, dtype=np.int64))
    if q.shape[0] == 0:
        raise InferenceError("a query needs at least one query variable")
    if q[0] < 0 or q[-1] >= graph.n_vars:
        raise InferenceError(f"query variable id out of range 0..{graph.n_vars - 1}: {int(q[q < 0][0] if q[0] < 0 else q[-1])}")
    bad = q[graph.evidence[q] >= 0]
    if bad.shape[0]:
        raise InferenceError(f"query variable {int(bad[0])} is evidence: it cannot be sampled")
    return q


def trail_scores(
    graph: FactorGraph, query_vars, *, influence: EdgeInfluence | None = None, max_table: int = DEFAULT_MAX_TABLE
) -> np.ndarray:
    """Influence trail score of every variable (float64[n_vars]): max over trails from a query
    variable of the product of edge influences; 1 for query variables, 0 where no trail reaches
    (evidence variables block trails and score 0)."""
    q = _check_query(graph, query_vars)
    inf = influence if influence is not None else edge_influence(graph, max_table=max_table)
    keep = inf.iota > 0
    with np.errstate(divide="ignore"):
        cost = -np.log(np.minimum(inf.iota[keep], 1.0))
    offsets, nbr, w = neighbour_csr(graph.n_vars, inf.u[keep], inf.v[keep], cost)
    # exp(−746) underflows to 0 in float64: trails that weak are not followed at all
    dist = _dijkstra(offsets, nbr, w, q, 746.0)
    return np.exp(-dist)


def graph_distance(graph: FactorGraph, query_vars, *, influence: EdgeInfluence | None = None) -> np.ndarray:
    """Shortest number of hops from any query variable through non-evidence neighbours
    (float64[n_vars], ``inf`` where unreachable). Neighbours: pairs sharing a factor or group."""
    q = _check_query(graph, query_vars)
    inf = influence if influence is not None else edge_influence(graph)
    offsets, nbr, w = neighbour_csr(graph.n_vars, inf.u, inf.v, np.ones(inf.u.shape[0]))
    return _dijkstra(offsets, nbr, w, q, np.inf)

