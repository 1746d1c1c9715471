"""Ground-level analysis (seed 004): hierarchy width, bounds, maximum factor weight, Theorem 2,
LINEAR-semantics warnings, and the `analyze` API on factor graphs."""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
import pytest

import pdbq
from pdbq.analysis import Analysis, AnalysisError, analyze, analyze_graph, semantics_warnings
from pdbq.analysis.bounds import mixing_bound, mixing_bound_log10
from pdbq.analysis.hierarchy import HierarchySearch, greedy_upper_bound, hierarchy_width, lower_bound
from pdbq.analysis.hypergraph import build_hypergraph
from pdbq.analysis.weights import hyperedge_weights
from pdbq.graph.builder import GraphBuilder
from pdbq.inference.exact.potentials import condition, hyperedges
from pdbq.language.nodes import FactorFunction, Semantics

F = FactorFunction


# ----------------------------------------------------------------------------- models


def voting(n, semantics, *, w=0.5, prior=(-1.0, 0.0), seed=0, q_evidence=None):
    """The voting model of §2.1: Q, T_1..T_n, F_1..F_n; one vote per voter (LINEAR: standalone
    VOTE factors; LOGICAL/RATIO: one head group per side) and one prior factor per voter.

    VOTE(T_i → Q) = (2Q − 1)·T_i reads Q ∈ {0, 1} as ±1, so weight w on the T side and −w on the
    F side give the paper's energy; a prior VOTE on a voter alone is 2T − 1, so weight w_T/2 gives
    w_T·T up to a constant. Returns (graph, index of the T-vote weight).
    """
    rng = np.random.default_rng(seed)
    b = GraphBuilder()
    q = b.add_variable(evidence=q_evidence)
    ts, fs = b.add_variables(n), b.add_variables(n)
    wt, wf = b.add_weight(w), b.add_weight(-w)
    if semantics == Semantics.LINEAR:
        for t in ts:
            b.add_factor(F.VOTE, [t, q], weight=wt, literals=[1, 1])
        for f in fs:
            b.add_factor(F.VOTE, [f, q], weight=wf, literals=[1, 1])
    else:
        gt, gf = b.add_group(semantics, wt), b.add_group(semantics, wf)
        for t in ts:
            b.add_factor(F.VOTE, [t, q], group=gt, literals=[1, 1])
        for f in fs:
            b.add_factor(F.VOTE, [f, q], group=gf, literals=[1, 1])
    for v in ts + fs:
        b.add_factor(F.VOTE, [v], weight=b.add_weight(rng.uniform(*prior) / 2), literals=[1])
    return b.build(), wt


def path_edges(n):
    return [{i, i + 1} for i in range(n - 1)]


def graph_of(edges, n_vars, w=1.0):
    """A factor graph with one EQUAL factor per hyperedge (arity-1 edges: ISTRUE)."""
    b = GraphBuilder()
    b.add_variables(n_vars)
    wi = b.add_weight(w)
    for e in edges:
        b.add_factor(F.EQUAL if len(e) > 1 else F.ISTRUE, sorted(e), weight=wi)
    return b.build()


def naive_width(edges):
    """Definition 3 literally: components, 1 + min over removals; memoised, no pruning."""
    edges = [frozenset(e) for e in edges]

    def comps(ids):
        left, out = set(ids), []
        while left:
            stack = [left.pop()]
            comp = set(stack)
            while stack:
                e = stack.pop()
                for f in list(left):
                    if edges[e] & edges[f]:
                        left.discard(f)
                        comp.add(f)
                        stack.append(f)
            out.append(frozenset(comp))
        return out

    @lru_cache(maxsize=None)
    def hw(ids):
        parts = comps(ids)
        if len(parts) > 1:
            return max(hw(p) for p in parts)
        if not ids:
            return 0
        return 1 + min(hw(ids - {e}) for e in ids)

    return hw(frozenset(range(len(edges))))


def random_hypergraph(rng, n_vars, n_edges, max_arity=3):
    return [set(rng.choice(n_vars, size=int(rng.integers(1, min(max_arity, n_vars) + 1)), replace=False).tolist())
            for _ in range(n_edges)]


# ----------------------------------------------------------------------------- hierarchy width


@pytest.mark.parametrize("n", range(1, 25))
def test_path_width_is_ceil_log2_n(n):
    # Lemma 1. The exact search, not a bound: for n >= 4 this differs from n - 1 (removing one
    # factor at a time) and from the degree bound 2.
    assert hierarchy_width(path_edges(n)) == math.ceil(math.log2(n))
    assert analyze_graph(graph_of(path_edges(n), n)).hierarchy_width == math.ceil(math.log2(n))


def test_path_search_stays_small():
    search = HierarchySearch(path_edges(24))
    assert search.width() == 5
    assert search.states < 24 * 24  # connected sub-paths are intervals: O(n^2) states


@pytest.mark.parametrize("n", range(3, 13))
def test_cycle_width_is_one_more_than_its_path(n):
    # every removal from a cycle leaves the path on all n variables
    cycle = path_edges(n) + [{n - 1, 0}]
    assert hierarchy_width(cycle) == 1 + math.ceil(math.log2(n))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("semantics", [Semantics.LOGICAL, Semantics.RATIO])
def test_voting_logical_ratio_width_is_3(n, semantics):
    graph, _ = voting(n, semantics)
    r = analyze_graph(graph)
    assert r.hierarchy_width == 3  # Lemma 2
    assert r.max_degree == 2
    assert r.n_hyperedges == 2 + 2 * n


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6, 30])
def test_voting_linear_width_is_2n_plus_1(n):
    graph, _ = voting(n, Semantics.LINEAR)
    r = analyze_graph(graph)
    assert r.hierarchy_width == 2 * n + 1  # Lemma 3
    assert r.max_degree == 2 * n  # Statement 3's bound is one short here
    assert r.hierarchy_width_bounds == (2 * n + 1, 2 * n + 1)


def test_voting_linear_exact_search_agrees_without_bounds_meeting():
    # n = 3 has 12 hyperedges: small enough for the naive definition as a cross-check
    graph, _ = voting(3, Semantics.LINEAR)
    hg = build_hypergraph(graph)
    edges = [hg.edge(h).tolist() for h in range(hg.n_edges)]
    assert naive_width(edges) == HierarchySearch(edges).width() == 7


def test_exact_search_matches_definition_on_random_hypergraphs():
    rng = np.random.default_rng(4)
    for trial in range(120):
        edges = random_hypergraph(rng, n_vars=int(rng.integers(2, 8)), n_edges=int(rng.integers(1, 8)))
        exact = naive_width(edges)
        assert hierarchy_width(edges) == exact, edges
        assert lower_bound(edges) <= exact <= greedy_upper_bound(edges), edges


# The clamped hypergraph of the movies demo's query graph (13 variables, priors as singletons):
# the search without the domination rule visited 2,366 states (seconds in Python).
MOVIES_DEMO_EDGES = [[6], [1], [2], [2, 3], [3, 4], [1], [4, 6], [6, 7], [2, 3, 4, 6, 8], [4, 10], [1, 11],
                     [1, 2, 3, 12], [1], [2], [3], [4], [6], [7], [8], [9], [10], [11], [12]]


def test_small_model_is_searched_in_few_states():
    search = HierarchySearch(MOVIES_DEMO_EDGES)
    assert search.width() == 7
    assert search.states <= 64


def test_dominated_removals_keep_the_exact_width():
    # priors beside larger hyperedges and twins are where the domination rule skips candidates
    rng = np.random.default_rng(29)
    for _ in range(60):
        edges = random_hypergraph(rng, n_vars=int(rng.integers(2, 6)), n_edges=int(rng.integers(2, 7)))
        edges += [{v} for v in sorted(set().union(*edges))]
        assert hierarchy_width(edges) == naive_width(edges), edges


def test_lower_bound_plus_one_rule_is_sound_and_used():
    star_with_priors = [{0, i} for i in range(1, 5)] + [{i} for i in range(1, 5)]
    assert lower_bound(star_with_priors) == 5 == hierarchy_width(star_with_priors)
    star = [{0, i} for i in range(1, 5)]
    assert lower_bound(star) == 4 == hierarchy_width(star)


def test_state_limit_gives_none_and_bounds_still_hold():
    edges = path_edges(40)
    assert hierarchy_width(edges, state_limit=5) is None
    r = analyze_graph(graph_of(edges, 40), exact_limit=5)
    lo, hi = r.hierarchy_width_bounds
    assert lo <= math.ceil(math.log2(40)) <= hi <= 39
    assert r.hierarchy_width is None
    # components too large for the exact search: greedy bisection still finds log2 on a path
    r = analyze_graph(graph_of(path_edges(300), 300), exact_max_edges=10)
    assert r.hierarchy_width_bounds[0] <= 9 <= r.hierarchy_width_bounds[1] <= 12


def test_components_take_the_max_and_shapes_are_reused():
    edges = path_edges(9) + [{v + 20, v + 21} for v in range(3)] + [{40, 41}, {40, 42}, {40, 43}, {40, 44}, {40, 45}]
    assert hierarchy_width(edges) == 5  # the 5-star beats the path (4) and the short path (2)
    r = analyze_graph(graph_of(edges, 46))
    assert (r.hierarchy_width, r.n_components) == (5, 3)
    many = [{2 * i, 2 * i + 1} for i in range(5000)] + [{20000, 20001}, {20001, 20002}]
    r = analyze_graph(graph_of(many, 20003))
    assert (r.hierarchy_width, r.n_components) == (2, 5001)


def test_lemma7_upper_bound_is_used_only_when_consistent():
    graph, _ = voting(3, Semantics.LOGICAL)
    assert analyze_graph(graph, exact_max_edges=0).hierarchy_width_bounds[1] >= 3
    r = analyze_graph(graph, exact_max_edges=0, template_factors=3)
    assert r.hierarchy_width_bounds == (3, 3)
    # a claim below the proven lower bound is rejected (the template premises cannot hold)
    r = analyze_graph(graph, exact_max_edges=0, template_factors=1)
    assert r.hierarchy_width_bounds[1] >= 3


# ----------------------------------------------------------------------------- tw <= hw (Statement 1)


def gyo_acyclic(edges):
    """GYO reduction: a hypergraph is alpha-acyclic (hypertree width 1) iff it reduces to nothing."""
    edges = [set(e) for e in edges]
    changed = True
    while changed and edges:
        changed = False
        counts = {}
        for e in edges:
            for v in e:
                counts[v] = counts.get(v, 0) + 1
        for e in edges:
            lonely = {v for v in e if counts[v] == 1}
            if lonely:
                e -= lonely
                changed = True
        edges = [e for e in edges if e]
        for i, e in enumerate(edges):
            if any(j != i and e <= f for j, f in enumerate(edges)):
                edges.pop(i)
                changed = True
                break
    return not edges


def primal_treewidth(edges):
    """Exact treewidth of the primal graph by dynamic programming over elimination sets."""
    vs = sorted({v for e in edges for v in e})
    adj = {v: set() for v in vs}
    for e in edges:
        for a, c in itertools.combinations(e, 2):
            adj[a].add(c)
            adj[c].add(a)

    def q(s, v):  # vertices outside s ∪ {v} reachable from v through s
        seen, stack, out = {v}, [v], set()
        while stack:
            x = stack.pop()
            for y in adj[x]:
                if y in seen:
                    continue
                seen.add(y)
                if y in s:
                    stack.append(y)
                else:
                    out.add(y)
        return len(out)

    @lru_cache(maxsize=None)
    def tw(s):
        if not s:
            return -1
        return min(max(tw(s - {v}), q(s - {v}, v)) for v in s)

    return max(tw(frozenset(vs)), 0)


def test_trees_have_tw_1_le_hw():
    rng = np.random.default_rng(11)
    for n in range(2, 12):
        parent = [int(rng.integers(0, i)) for i in range(1, n)]
        edges = [{i + 1, p} for i, p in enumerate(parent)]
        assert gyo_acyclic(edges) and primal_treewidth(edges) == 1
        hw = hierarchy_width(edges)
        assert 1 <= hw <= n - 1
        assert hw >= max(np.bincount([v for e in edges for v in e]))  # Statement 3


def test_hw_bounds_hypertree_width_on_small_graphs():
    # For pairwise factors, a hypertree decomposition of width k has bags of at most 2k
    # variables, so tw_primal <= 2·htw - 1 <= 2·hw - 1 (Statement 1); hw = 1 forces acyclicity.
    rng = np.random.default_rng(12)
    for trial in range(60):
        n = int(rng.integers(3, 8))
        edges = random_hypergraph(rng, n, int(rng.integers(2, 9)), max_arity=2)
        hw = hierarchy_width(edges)
        assert primal_treewidth(edges) <= 2 * hw - 1
        if hw <= 1:
            assert gyo_acyclic(edges)
    grid = [{r * 3 + c, r * 3 + c + 1} for r in range(3) for c in range(2)] + \
           [{r * 3 + c, r * 3 + c + 3} for r in range(2) for c in range(3)]
    assert primal_treewidth(grid) == 3 and not gyo_acyclic(grid)
    assert hierarchy_width(grid) >= 2


# ----------------------------------------------------------------------------- M (Definition 4)


@pytest.mark.parametrize("n", [1, 3, 10, 50])
def test_voting_max_factor_weight_matches_the_paper(n):
    w = 0.5
    tiny = (-0.01, 0.0)  # priors too weak to hold the maximum
    for sem, expected in ((Semantics.LINEAR, 2 * w), (Semantics.LOGICAL, 2 * w), (Semantics.RATIO, 2 * w * math.log(n + 1))):
        r = analyze_graph(voting(n, sem, w=w, prior=tiny)[0])
        assert r.max_factor_weight == pytest.approx(expected), sem
        assert r.max_factor_weight_exact


def exact_weights(graph):
    """M per hyperedge from the inference layer's log-tables, evidence sliced in."""
    out = {}
    for h in condition(hyperedges(graph), graph.evidence.astype(np.int64)):
        if h.scope.size:
            out[h.source] = float(h.log_table.max() - h.log_table.min())
    return out


def random_graph(rng):
    b = GraphBuilder()
    cards = [int(rng.choice([2, 2, 3])) for _ in range(int(rng.integers(2, 6)))]
    vs = [b.add_variable(c) for c in cards]
    for v, c in zip(vs, cards):
        if rng.random() < 0.25:
            b.set_evidence(v, int(rng.integers(0, c)))
    groups = [b.add_group(Semantics(int(rng.integers(0, 3))), b.add_weight(float(rng.normal()))) for _ in range(2)]
    for _ in range(int(rng.integers(1, 7))):
        fn = F(int(rng.choice([0, 1, 2, 3, 4, 13, 30, 31])))
        arity = int(rng.integers(1, 4))
        args = [int(x) for x in rng.choice(vs, size=arity, replace=bool(arity > len(vs) or rng.random() < 0.3))]
        if fn == F.TABLE:
            size = int(np.prod([cards[a] for a in args]))
            b.add_factor(fn, args, table=rng.normal(size=size), weight=b.add_weight(float(rng.normal())))
            continue
        if fn == F.EQUAL and rng.random() < 0.5:
            lits = None  # raw values, categorical allowed
        else:
            lits = [int(rng.integers(0, cards[a])) for a in args]
        grouped = fn in (F.VOTE, F.IMPLY, F.IMPLY_MLN) and rng.random() < 0.6
        if grouped:
            b.add_factor(fn, args, literals=lits, group=groups[int(rng.integers(0, 2))])
        else:
            b.add_factor(fn, args, literals=lits, weight=b.add_weight(float(rng.normal())))
    return b.build()


def test_factor_weights_agree_with_exact_tables():
    rng = np.random.default_rng(5)
    n_exact = 0
    for trial in range(300):
        graph = random_graph(rng)
        hg = build_hypergraph(graph)
        fw = hyperedge_weights(graph, hg)
        truth = exact_weights(graph)
        for h in range(hg.n_edges):
            src = f"{'group' if hg.is_group[h] else 'factor'} {int(hg.source[h])}"
            assert fw.weight[h] >= truth[src] - 1e-9, (trial, src)
            if fw.exact[h]:
                n_exact += 1
                assert fw.weight[h] == pytest.approx(truth[src], abs=1e-9), (trial, src)
        assert len(truth) == hg.n_edges  # the same non-constant hyperedges
    assert n_exact > 300  # the comparison is not vacuous


def test_group_bound_without_shared_head_is_an_upper_bound():
    # two votes for different heads in one group (not what grounding emits): the sum's range
    # is taken factor by factor and must still enclose the truth
    b = GraphBuilder()
    x, y, h1, h2 = b.add_variables(4)
    g = b.add_group(Semantics.RATIO, b.add_weight(1.0))
    b.add_factor(F.VOTE, [x, h1], group=g, literals=[1, 1])
    b.add_factor(F.VOTE, [y, h2], group=g, literals=[1, 1])
    graph = b.build()
    fw = hyperedge_weights(graph, build_hypergraph(graph), enum_limit=1)
    assert fw.weight[0] >= exact_weights(graph)["group 0"] and not fw.exact[0]
    assert hyperedge_weights(graph, build_hypergraph(graph)).exact[0]  # enumeration makes it exact


def test_evidence_is_clamped():
    graph, _ = voting(5, Semantics.LINEAR, q_evidence=1)
    r = analyze_graph(graph)
    assert r.n_free_vars == 10 and r.hierarchy_width == 2  # each voter: its vote and its prior
    assert r.max_factor_weight <= 1.0  # a clamped vote is w·T: range w = 0.5, priors up to 1


# ----------------------------------------------------------------------------- Theorem 2


def test_mixing_bound_formula():
    n, s, e, m, h = 21, 2, 22, 1.0, 3
    expected = (math.log(4) + n * math.log(s) + e * m) * n * math.exp(3 * h * m)
    assert mixing_bound(n=n, s=s, e=e, m=m, h=h) == pytest.approx(expected)
    assert mixing_bound_log10(n=n, s=s, e=e, m=m, h=h) == pytest.approx(math.log10(expected))
    assert mixing_bound(n=10**6, s=2, e=10**6, m=2.0, h=1000) is None  # overflows a float
    assert mixing_bound(n=0, s=1, e=0, m=0.0, h=0) == 0.0


def test_mixing_bound_separates_linear_from_ratio():
    lin = analyze_graph(voting(50, Semantics.LINEAR)[0])
    rat = analyze_graph(voting(50, Semantics.RATIO)[0])
    log = analyze_graph(voting(50, Semantics.LOGICAL)[0])
    assert lin.mixing_bound_log10 > 100 > rat.mixing_bound_log10 > log.mixing_bound_log10
    n, e = 101, 102
    m = log.max_factor_weight
    assert log.mixing_bound == pytest.approx((math.log(4) + n * math.log(2) + e * m) * n * math.exp(9 * m))


# ----------------------------------------------------------------------------- warnings (Theorem 1)


def test_warning_fires_on_linear_voting_and_names_the_rule():
    graph, wt = voting(12, Semantics.LINEAR)
    warnings = semantics_warnings(graph, {wt: "t_votes", wt + 1: "f_votes"})
    assert len(warnings) == 2
    assert "'t_votes'" in warnings[0] and "12 coupled votes" in warnings[0]
    assert "RATIO" in warnings[0] and "LOGICAL" in warnings[0]
    assert "'f_votes'" in warnings[1]


@pytest.mark.parametrize("semantics", [Semantics.RATIO, Semantics.LOGICAL])
def test_warning_silent_on_grouped_semantics(semantics):
    assert semantics_warnings(voting(12, semantics)[0], None) == []


def test_warning_threshold_and_evidence():
    assert semantics_warnings(voting(9, Semantics.LINEAR)[0]) == []
    assert len(semantics_warnings(voting(9, Semantics.LINEAR)[0], threshold=9)) == 2
    # a clamped head is never sampled: nothing to mix
    assert semantics_warnings(voting(12, Semantics.LINEAR, q_evidence=1)[0]) == []
    # explicit factor -> rule ids
    graph, _ = voting(12, Semantics.LINEAR)
    rule = np.zeros(graph.n_factors, dtype=np.int64)
    rule[24:] = 1  # the priors
    (msg,) = semantics_warnings(graph, {0: "votes", 1: "priors"}, factor_rule=rule)
    assert "'votes'" in msg and "24 coupled votes" in msg


# ----------------------------------------------------------------------------- analyze()


def test_analyze_graph_result():
    graph, _ = voting(12, Semantics.LINEAR)
    a = analyze(graph)
    assert isinstance(a, Analysis)
    assert (a.hierarchy_width, a.hierarchy_width_bounds, a.max_degree) == (25, (25, 25), 24)
    assert a.hierarchical is None and a.hierarchy_depth is None and a.template is None
    assert a.max_factor_weight == pytest.approx(1.0) and a.mixing_bound is not None
    assert len(a.warnings) == 2
    with pytest.raises(AttributeError):
        a.hierarchy_width = 3  # frozen


def test_analyze_errors():
    with pytest.raises(AnalysisError, match="FactorGraph or a CreateRule"):
        analyze(42)
    with pytest.raises(AnalysisError, match="database"):
        analyze(path_graph := graph_of(path_edges(3), 3), rule="fans_vote")
    with pytest.raises(AnalysisError, match="database"):
        pdbq.analyze(path_graph, query="SELECT 1")
    with pytest.raises(AnalysisError, match=r"pdbq\.analyze\(db"):
        analyze(pdbq.connect(), rule="fans_vote")


def test_degenerate_graphs():
    empty = analyze_graph(GraphBuilder().build())
    assert (empty.hierarchy_width, empty.max_factor_weight, empty.mixing_bound) == (0, 0.0, 0.0)
    b = GraphBuilder()
    b.add_variables(3)
    lone = analyze_graph(b.build())  # free variables, no factors: width 0, Theorem 2 still applies
    assert (lone.hierarchy_width, lone.n_hyperedges) == (0, 0)
    assert lone.mixing_bound == pytest.approx(3 * (math.log(4) + 3 * math.log(2)))
    b = GraphBuilder()
    x = b.add_variable(evidence=1)
    b.add_factor(F.ISTRUE, [x], weight=b.add_weight(1.0))
    clamped = analyze_graph(b.build())  # a factor over evidence only is a constant
    assert (clamped.n_factors, clamped.n_hyperedges, clamped.hierarchy_width) == (1, 0, 0)
