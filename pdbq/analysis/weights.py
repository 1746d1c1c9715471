"""Maximum factor weight M (seed 004, Definition 4) of a factor graph, per hyperedge.

M = max over hyperedges of (max − min) of the hyperedge's energy contribution, over the worlds
Gibbs can visit (evidence clamped). A standalone factor contributes ``w · φ``, so its weight is
``|w| · range(φ)``; a head group contributes ``w · g(Σ_f φ_f)`` with g monotone, so its weight is
``|w| · (g(S_max) − g(S_min))`` over the attainable sums S.

Ranges of φ (docs/factors.md), from which values each argument can still take:

| function | range when its arguments vary freely |
|---|---|
| IMPLY, VOTE (boolean head) | {−1, 0, +1} (VOTE with a categorical head: {0, 1}) |
| OR, AND, ISTRUE, EQUAL | {−1, +1} |
| IMPLY_MLN | {0, 1} |
| LINEAR / RATIO / LOGICAL (m body arguments) | [0, m] / [0, log2(1+m)] / {0, 1} |
| TABLE | max − min of the entries consistent with the evidence |

so, e.g., a LINEAR-semantics vote has M = 2|w|, a LOGICAL group M = 2|w| and a RATIO group over n
free voters M = 2|w|·log(n+1): the values in the paper's §2.3.

How exact: each factor's range is computed exactly (vectorised over the whole graph) when its
free arguments are distinct variables; a factor that repeats a free variable is enumerated
(``enum_limit`` joint states) or else given a safe enclosing range. A group's sum range is exact
when its factors are head/body functions sharing one free head literal and their bodies share no
free variable (the voting model and every grounding of one head): the range is then taken per
head value. Otherwise small groups are enumerated and large ones get the sum of their factors'
ranges — an upper bound, which is what Theorem 2 needs. `FactorWeights.exact` says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import numpy as np

from pdbq.analysis.hypergraph import Hypergraph
from pdbq.graph.layout import FactorGraph
from pdbq.inference.exact.potentials import factor_value, group_function
from pdbq.language.nodes import FactorFunction, Semantics

__all__ = ["FactorWeights", "factor_ranges", "hyperedge_weights", "DEFAULT_ENUM_LIMIT"]

DEFAULT_ENUM_LIMIT = 4096  # joint states of one factor's or group's free variables
_ENUM_BUDGET = 200_000  # factor evaluations spent on enumeration per graph

_F = FactorFunction
_HEAD_BODY = (int(_F.IMPLY), int(_F.IMPLY_MLN), int(_F.VOTE))
_VECTOR = (int(_F.OR), int(_F.AND), int(_F.ISTRUE), int(_F.EQUAL)) + _HEAD_BODY


@dataclass(frozen=True, eq=False)
class FactorWeights:
    """Per-hyperedge weights (aligned with the `Hypergraph`'s hyperedges) and their maximum."""

    weight: np.ndarray  # float64[n_hyperedges]: |w| · range of the contribution
    exact: np.ndarray  # bool[n_hyperedges]: False where `weight` is an upper bound
    max_weight: float  # M (0.0 for a graph without hyperedges)
    max_exact: bool  # M itself is exact (its hyperedge's value is exact)
    argmax: int  # hyperedge holding M, or -1


def _edge_flags(graph: FactorGraph, head_truth: int | None = None):
    """Per edge: can its truth be 1 / be 0 (c1, c0); `odd` where truth is not 0/1 (a raw argument
    over a categorical variable). ``head_truth`` forces every factor's last argument."""
    v = graph.factor_vars.astype(np.int64)
    lit = graph.factor_literals.astype(np.int64)
    ev = graph.evidence.astype(np.int64)[v]
    card = graph.cardinality.astype(np.int64)[v]
    free = ev < 0
    raw = lit < 0
    t_ev = np.where(raw, ev, (ev == lit).astype(np.int64))
    c1 = np.where(free, True, t_ev != 0)
    c0 = np.where(free, True, t_ev == 0)
    odd = raw & (card > 2)
    if head_truth is not None and graph.n_factors:
        heads = graph.factor_offsets[1:][np.diff(graph.factor_offsets) > 0] - 1
        c1 = c1.copy()
        c0 = c0.copy()
        c1[heads] = head_truth == 1
        c0[heads] = head_truth == 0
    return c1, c0, odd


def _count(edge_factor: np.ndarray, mask: np.ndarray, nf: int) -> np.ndarray:
    return np.bincount(edge_factor[mask], minlength=nf)


def _vector_ranges(graph: FactorGraph, head_truth: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """φ ranges [lo, hi] for the functions of `_VECTOR`, assuming distinct argument variables
    (NaN for other functions)."""
    nf = graph.n_factors
    arity = np.diff(graph.factor_offsets)
    edge_factor = np.repeat(np.arange(nf, dtype=np.int64), arity)
    c1, c0, _ = _edge_flags(graph, head_truth)
    is_head = np.zeros(graph.n_edges, dtype=bool)
    if graph.n_edges:
        is_head[graph.factor_offsets[1:][arity > 0] - 1] = True
    body = ~is_head
    all1 = _count(edge_factor, ~c1, nf) == 0
    all0 = _count(edge_factor, ~c0, nf) == 0
    any1 = _count(edge_factor, c1, nf) > 0
    any0 = _count(edge_factor, c0, nf) > 0
    body_all1 = _count(edge_factor, body & ~c1, nf) == 0
    body_any0 = _count(edge_factor, body & c0, nf) > 0
    head_idx = np.maximum(graph.factor_offsets[1:] - 1, 0)
    h1 = np.where(arity > 0, c1[head_idx] if graph.n_edges else False, False)
    h0 = np.where(arity > 0, c0[head_idx] if graph.n_edges else False, False)
    head_bool = np.where(arity > 0, graph.cardinality[graph.factor_vars[head_idx]] == 2 if graph.n_edges else True, True)

    lo = np.full(nf, np.inf)
    hi = np.full(nf, -np.inf)

    def allow(mask: np.ndarray, value) -> None:
        val = np.broadcast_to(np.asarray(value, dtype=np.float64), (nf,))
        np.minimum(lo, np.where(mask, val, np.inf), out=lo)
        np.maximum(hi, np.where(mask, val, -np.inf), out=hi)

    fn = graph.function.astype(np.int64)
    is_or = fn == _F.OR
    allow(is_or & any1, 1.0)
    allow(is_or & all0, -1.0)
    is_and = (fn == _F.AND) | (fn == _F.ISTRUE)
    allow(is_and & all1, 1.0)
    allow(is_and & any0, -1.0)
    is_eq = fn == _F.EQUAL
    allow(is_eq & ((arity <= 1) | all1 | all0), 1.0)
    allow(is_eq & (arity >= 2) & any1 & any0, -1.0)
    is_imp = fn == _F.IMPLY
    allow(is_imp & body_all1 & h1, 1.0)
    allow(is_imp & body_all1 & h0, -1.0)
    allow(is_imp & body_any0, 0.0)
    is_mln = fn == _F.IMPLY_MLN
    allow(is_mln & body_all1 & h0, 0.0)
    allow(is_mln & (body_any0 | h1), 1.0)
    is_vote = fn == _F.VOTE
    allow(is_vote & body_all1 & h1, 1.0)
    allow(is_vote & body_all1 & h0, np.where(head_bool, -1.0, 0.0))
    allow(is_vote & body_any0, 0.0)
    known = np.isin(fn, _VECTOR) & (arity > 0)
    lo[~known] = np.nan
    hi[~known] = np.nan
    return lo, hi


def _needs_fallback(graph: FactorGraph) -> np.ndarray:
    """Factors the vectorised rules cannot handle exactly: other functions, no arguments, raw
    categorical arguments outside EQUAL/TABLE semantics, or a free variable used twice."""
    nf, nv = graph.n_factors, max(graph.n_vars, 1)
    arity = np.diff(graph.factor_offsets)
    edge_factor = np.repeat(np.arange(nf, dtype=np.int64), arity)
    _, _, odd = _edge_flags(graph)
    fn = graph.function.astype(np.int64)
    out = ~np.isin(fn, _VECTOR) | (arity == 0)
    out |= _count(edge_factor, odd, nf) > 0
    free_e = graph.evidence[graph.factor_vars] < 0 if graph.n_edges else np.zeros(0, dtype=bool)
    n_free = _count(edge_factor, free_e, nf)
    pairs = np.unique(edge_factor[free_e] * nv + graph.factor_vars[free_e])
    n_distinct = np.bincount(pairs // nv, minlength=nf)
    out |= n_free != n_distinct
    return out


def _enumerate(graph: FactorGraph, factors: list[int], values: np.ndarray, enum_limit: int, budget: list[int]):
    """Exact (min, max) of Σ φ_f over the joint states of these factors' free variables, or None
    when there are more than ``enum_limit`` states or the budget is spent."""
    scope = sorted({int(v) for f in factors for v in graph.factor_args(f) if graph.evidence[v] < 0})
    cards = [int(graph.cardinality[v]) for v in scope]
    n_states = int(np.prod(cards, dtype=np.float64)) if cards else 1
    cost = n_states * len(factors)
    if n_states > enum_limit or cost > budget[0]:
        return None
    budget[0] -= cost
    lo, hi = np.inf, -np.inf
    for state in product(*(range(c) for c in cards)):
        values[scope] = state
        s = sum(factor_value(graph, f, values) for f in factors)
        lo, hi = min(lo, s), max(hi, s)
    return lo, hi


def _enclosing_range(graph: FactorGraph, f: int) -> tuple[float, float]:
    """A range that contains φ_f whatever its arguments (used when enumeration is too large)."""
    code = int(graph.function[f])
    args = graph.factor_args(f)
    if code == _F.TABLE:
        size = int(np.prod(graph.cardinality[args].astype(np.int64))) if args.size else 1
        tab = graph.tables[int(graph.table_offset[f]) : int(graph.table_offset[f]) + size]
        return float(tab.min()), float(tab.max())
    m = max(args.shape[0] - 1, 1)
    if code == _F.LINEAR:
        return 0.0, float(m)
    if code == _F.RATIO:
        return 0.0, float(np.log2(1.0 + m))
    if code == _F.LOGICAL:
        return 0.0, 1.0
    top = int(graph.cardinality[args].max()) - 1 if args.size else 1
    return -1.0, float(max(1, top))


def factor_ranges(graph: FactorGraph, *, enum_limit: int = DEFAULT_ENUM_LIMIT, _budget: list[int] | None = None):
    """(lo, hi, exact) arrays over factors: the range of the unweighted φ_f with evidence clamped.

    >>> from pdbq.graph.builder import GraphBuilder
    >>> b = GraphBuilder(); q, t = b.add_variables(2)
    >>> _ = b.add_factor(FactorFunction.VOTE, [t, q], weight=b.add_weight(0.5))
    >>> lo, hi, exact = factor_ranges(b.build())
    >>> float(lo[0]), float(hi[0]), bool(exact[0])
    (-1.0, 1.0, True)
    """
    budget = [_ENUM_BUDGET] if _budget is None else _budget
    lo, hi = _vector_ranges(graph)
    exact = np.ones(graph.n_factors, dtype=bool)
    fallback = np.flatnonzero(_needs_fallback(graph))
    values = np.maximum(graph.evidence.astype(np.int64), 0)
    for f in fallback:
        got = _enumerate(graph, [int(f)], values, enum_limit, budget)
        if got is None:
            got = _enclosing_range(graph, int(f))
            exact[f] = False
        lo[f], hi[f] = got
    return lo, hi, exact


def _g(semantics: int, s: np.ndarray) -> np.ndarray:
    return np.asarray(group_function(int(semantics), np.asarray(s, dtype=np.float64)), dtype=np.float64)


def hyperedge_weights(graph: FactorGraph, hg: Hypergraph, *, enum_limit: int = DEFAULT_ENUM_LIMIT) -> FactorWeights:
    """M per hyperedge of ``hg`` (built from ``graph``) and overall; see the module docstring."""
    budget = [_ENUM_BUDGET]
    lo, hi, exact_f = factor_ranges(graph, enum_limit=enum_limit, _budget=budget)
    w_abs = np.abs(graph.weights[graph.weight]) if graph.n_factors else np.zeros(0)
    ng, nv = graph.n_groups, max(graph.n_vars, 1)

    # -------- groups: sum of ranges, refined per head value where that is exact
    grp = graph.group.astype(np.int64)
    in_g = grp >= 0
    s_lo = np.bincount(grp[in_g], weights=lo[in_g], minlength=ng)
    s_hi = np.bincount(grp[in_g], weights=hi[in_g], minlength=ng)
    g_exact = np.zeros(ng, dtype=bool)
    if ng and np.any(in_g):
        arity = np.diff(graph.factor_offsets)
        head_e = np.maximum(graph.factor_offsets[1:] - 1, 0)
        hv = np.where(arity > 0, graph.factor_vars[head_e], -1).astype(np.int64)
        hl = np.where(arity > 0, graph.factor_literals[head_e], -2).astype(np.int64)
        fallback = _needs_fallback(graph)
        ok_f = np.isin(graph.function.astype(np.int64), _HEAD_BODY) & (arity > 0) & ~fallback
        ok_f &= np.where(hv >= 0, graph.evidence[np.maximum(hv, 0)] < 0, False)
        gf = grp[in_g]
        same_head = (np.bincount(gf, minlength=ng) > 0)
        for arr in (hv, hl):
            same_head &= np.equal(
                np.bincount(gf, weights=np.where(ok_f[in_g], 0, 1), minlength=ng), 0
            ) & (_group_min(gf, arr[in_g], ng) == _group_max(gf, arr[in_g], ng))
        # bodies: free variables pairwise distinct within the group and never the head
        edge_factor = np.repeat(np.arange(graph.n_factors, dtype=np.int64), arity)
        body_e = np.ones(graph.n_edges, dtype=bool)
        body_e[head_e[arity > 0]] = False
        sel = body_e & (grp[edge_factor] >= 0) & (graph.evidence[graph.factor_vars] < 0)
        eg = grp[edge_factor[sel]]
        evar = graph.factor_vars[sel].astype(np.int64)
        n_body = np.bincount(eg, minlength=ng)
        n_distinct = np.bincount(np.unique(eg * nv + evar) // nv, minlength=ng)
        gh = _group_min(gf, hv[in_g], ng)
        head_in_body = np.bincount(eg[evar == gh[eg]], minlength=ng) > 0
        g_exact = same_head & (n_body == n_distinct) & ~head_in_body
        if np.any(g_exact):
            best_lo = np.full(ng, np.inf)
            best_hi = np.full(ng, -np.inf)
            for t in (1, 0):
                lo_t, hi_t = _vector_ranges(graph, head_truth=t)
                sl = np.bincount(grp[in_g], weights=np.nan_to_num(lo_t[in_g]), minlength=ng)
                sh = np.bincount(grp[in_g], weights=np.nan_to_num(hi_t[in_g]), minlength=ng)
                # a free head literal can be both true and false
                best_lo = np.minimum(best_lo, sl)
                best_hi = np.maximum(best_hi, sh)
            s_lo = np.where(g_exact, best_lo, s_lo)
            s_hi = np.where(g_exact, best_hi, s_hi)
        members: dict[int, list[int]] = {}
        for f in np.flatnonzero(in_g):
            members.setdefault(int(grp[f]), []).append(int(f))
        values = np.maximum(graph.evidence.astype(np.int64), 0)
        for g in np.flatnonzero(~g_exact):
            if int(g) not in members:
                continue
            got = _enumerate(graph, members[int(g)], values, enum_limit, budget)
            if got is not None:
                s_lo[g], s_hi[g] = got
                g_exact[g] = True
    gw = np.abs(graph.weights[graph.group_weight]) if ng else np.zeros(0)
    sem = graph.semantics.astype(np.int64)
    m_group = np.zeros(ng)
    for code in (Semantics.LINEAR, Semantics.LOGICAL, Semantics.RATIO):
        sel_g = sem == int(code)
        if np.any(sel_g):
            m_group[sel_g] = gw[sel_g] * (_g(int(code), s_hi[sel_g]) - _g(int(code), s_lo[sel_g]))

    m_factor = w_abs * (hi - lo) if graph.n_factors else np.zeros(0)
    m_factor = np.where(w_abs == 0, 0.0, m_factor)
    m_group = np.where(gw == 0, 0.0, m_group)
    src = hg.source
    weight = np.where(hg.is_group, m_group[np.where(hg.is_group, src, 0)] if ng else 0.0,
                      m_factor[np.where(hg.is_group, 0, src)] if graph.n_factors else 0.0)
    exact = np.where(hg.is_group, g_exact[np.where(hg.is_group, src, 0)] if ng else True,
                     exact_f[np.where(hg.is_group, 0, src)] if graph.n_factors else True)
    weight = np.asarray(weight, dtype=np.float64).reshape(-1)
    exact = np.asarray(exact, dtype=bool).reshape(-1)
    if weight.size == 0:
        return FactorWeights(weight, exact, 0.0, True, -1)
    arg = int(np.argmax(weight))
    return FactorWeights(weight, exact, float(weight[arg]), bool(exact[arg]), arg)


def _group_min(groups: np.ndarray, values: np.ndarray, ng: int) -> np.ndarray:
    out = np.full(ng, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(out, groups, values.astype(np.int64))
    return out


def _group_max(groups: np.ndarray, values: np.ndarray, ng: int) -> np.ndarray:
    out = np.full(ng, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(out, groups, values.astype(np.int64))
    return out

