"""Ground-level analysis of a factor graph: sizes, degree, hierarchy width, M, Theorem 2.

The graph analysed is the clamped hypergraph of `pdbq.analysis.hypergraph` (head groups as one
hyperedge, evidence variables removed). Hierarchy width:

- lower bound: per component, Statement 3's maximum degree (strengthened by one where
  `HierarchySearch.lower_bound` proves it), and at least the global maximum degree;
- upper bounds: the number of hyperedges of each component (remove them one by one), a greedy
  elimination per component (`HierarchySearch.greedy_upper_bound`), and Lemma 7's E when the
  caller states that the graph instantiates a hierarchical template with E template factors;
- exact: the memoised search on components of at most ``exact_max_edges`` hyperedges within
  ``exact_limit`` search states, or wherever the bounds meet.

Components are visited largest first; once a component has no more hyperedges than the best
lower bound so far it (and every smaller one) cannot raise the width and is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdbq.analysis.bounds import mixing_bound, mixing_bound_log10
from pdbq.analysis.hierarchy import DEFAULT_STATE_LIMIT, HierarchySearch, SearchBudgetExceeded
from pdbq.analysis.hypergraph import Hypergraph, build_hypergraph, component_labels
from pdbq.analysis.weights import DEFAULT_ENUM_LIMIT, hyperedge_weights
from pdbq.graph.layout import FactorGraph, validate

__all__ = ["GraphAnalysis", "analyze_graph", "width_bounds", "DEFAULT_EXACT_MAX_EDGES"]

DEFAULT_EXACT_MAX_EDGES = 64
_COMPONENT_LIMIT = 20_000  # components examined one by one; beyond, only their sizes count
_GREEDY_WORK = 2_000_000


@dataclass(frozen=True)
class GraphAnalysis:
    n_vars: int
    n_free_vars: int  # variables Gibbs samples (not evidence)
    n_factors: int
    n_groups: int
    n_hyperedges: int  # standalone factors + head groups touching a free variable
    n_components: int  # connected components with at least one hyperedge
    largest_component: int  # hyperedges in the largest component
    max_degree: int  # most hyperedges at one free variable (Statement 3: hw >= max_degree)
    max_cardinality: int  # s of Theorem 2 (over free variables)
    hierarchy_width: int | None  # exact, or None when only bounds are known
    hierarchy_width_bounds: tuple[int, int]
    max_factor_weight: float  # M, Definition 4
    max_factor_weight_exact: bool  # False: M is an upper bound
    mixing_bound: float | None  # Theorem 2 (None: overflows a float; see the log10 form)
    mixing_bound_log10: float | None  # None when no variable is free


def _shape_key(edges: list[list[int]]) -> tuple[tuple[int, ...], ...]:
    """The hyperedges with variables renamed by first appearance: equal for groundings of the
    same shape, so their width is computed once."""
    names: dict[int, int] = {}
    out = []
    for e in edges:
        out.append(tuple(sorted(names.setdefault(v, len(names)) for v in e)))
    return tuple(out)


def width_bounds(
    hg: Hypergraph,
    *,
    exact_limit: int = DEFAULT_STATE_LIMIT,
    exact_max_edges: int = DEFAULT_EXACT_MAX_EDGES,
    template_factors: int | None = None,
) -> tuple[int, int]:
    """(lower, upper) bounds on the hierarchy width of ``hg``; equal when it is known exactly."""
    if hg.n_edges == 0:
        return 0, 0
    labels, n_comp = component_labels(hg)
    sizes = np.bincount(labels, minlength=n_comp)
    order = np.argsort(labels, kind="stable")
    starts = np.zeros(n_comp + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    lo = int(hg.degree.max())
    hi = 0
    states_left = exact_limit
    cache: dict[tuple, tuple[int, int]] = {}
    for n_seen, c in enumerate(np.argsort(-sizes, kind="stable")):
        m = int(sizes[c])
        if m <= lo:
            break  # this and every smaller component has width <= m <= lo
        if n_seen >= _COMPONENT_LIMIT:
            hi = max(hi, m)
            break
        ids = order[starts[c] : starts[c + 1]]
        edges = [hg.edge(int(h)).tolist() for h in ids]
        key = _shape_key(edges)
        got = cache.get(key)
        if got is None:
            search = HierarchySearch(edges, state_limit=max(states_left, 0))
            c_lo = search.lower_bound(range(m))
            c_hi = m
            if m <= exact_max_edges and states_left > 0:
                try:
                    c_lo = c_hi = search.width()
                except SearchBudgetExceeded:
                    pass
                states_left -= search.states
            if c_lo < c_hi:
                greedy = search.greedy_upper_bound(work_limit=_GREEDY_WORK)
                if greedy is not None:
                    c_hi = min(c_hi, greedy)
            got = cache[key] = (c_lo, c_hi)
        lo = max(lo, got[0])
        hi = max(hi, got[1])
    hi = max(hi, lo)
    if template_factors is not None:
        # Lemma 7 holds only under its premises; a lower bound above E shows they fail, so E is
        # then not used.
        if template_factors >= lo:
            hi = min(hi, int(template_factors))
    return lo, hi


def analyze_graph(
    graph: FactorGraph,
    *,
    exact_limit: int = DEFAULT_STATE_LIMIT,
    exact_max_edges: int = DEFAULT_EXACT_MAX_EDGES,
    template_factors: int | None = None,
    enum_limit: int = DEFAULT_ENUM_LIMIT,
) -> GraphAnalysis:
    """Analyse a grounded model or a query's pruned graph (see the module docstring).

    ``exact_limit``: search states the exact hierarchy-width search may visit (beyond: bounds);
    ``exact_max_edges``: largest component (in hyperedges) searched exactly;
    ``template_factors``: E of Lemma 7, when the caller knows the graph is an instance of a
    hierarchical template whose rules each give one factor per head assignment;
    ``enum_limit``: joint states enumerated to make a factor's or group's M exact.

    >>> from pdbq.graph.builder import GraphBuilder
    >>> from pdbq.language.nodes import FactorFunction
    >>> b = GraphBuilder(); vs = b.add_variables(5); w = b.add_weight(0.5)
    >>> for a, c in zip(vs, vs[1:]):
    ...     _ = b.add_factor(FactorFunction.EQUAL, [a, c], weight=w)
    >>> r = analyze_graph(b.build())
    >>> r.hierarchy_width, r.max_degree, r.max_factor_weight
    (3, 2, 1.0)
    """
    validate(graph)
    hg = build_hypergraph(graph)
    lo, hi = width_bounds(hg, exact_limit=exact_limit, exact_max_edges=exact_max_edges, template_factors=template_factors)
    fw = hyperedge_weights(graph, hg, enum_limit=enum_limit)
    n_free = int(hg.free.sum())
    labels, n_comp = component_labels(hg)
    largest = int(np.bincount(labels).max()) if labels.size else 0
    s = int(graph.cardinality[hg.free].max()) if n_free else 1
    kw = dict(n=n_free, s=s, e=hg.n_edges, m=fw.max_weight, h=hi)
    return GraphAnalysis(
        n_vars=graph.n_vars,
        n_free_vars=n_free,
        n_factors=graph.n_factors,
        n_groups=graph.n_groups,
        n_hyperedges=hg.n_edges,
        n_components=n_comp,
        largest_component=largest,
        max_degree=int(hg.degree.max()) if hg.n_vars else 0,
        max_cardinality=s,
        hierarchy_width=lo if lo == hi else None,
        hierarchy_width_bounds=(lo, hi),
        max_factor_weight=fw.max_weight,
        max_factor_weight_exact=fw.max_exact,
        mixing_bound=mixing_bound(**kw),
        mixing_bound_log10=mixing_bound_log10(**kw),
    )
