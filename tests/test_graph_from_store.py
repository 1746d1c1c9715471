"""Graph arrays from the factor store equal GraphBuilder's; subgraph extraction."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest
from test_grounding_golden import load_model

from pdbq.graph.builder import GraphBuilder
from pdbq.graph.from_store import factor_rules, full_graph, reachable
from pdbq.graph.layout import GraphError
from pdbq.graph.subgraph import subgraph
from pdbq.language.nodes import FactorFunction, Semantics

MODEL = """
CREATE TABLE movies AS SELECT * FROM (VALUES ('Up'), ('Cars')) t(movie);
CREATE TABLE people AS SELECT * FROM (VALUES ('bart'), ('lisa'), ('homer')) t(person);
CREATE TABLE tweets AS SELECT * FROM (VALUES ('Up', 'bart'), ('Up', 'lisa'), ('Cars', 'homer'), ('Cars', 'lisa')) t(movie, person);
CREATE TABLE sims AS SELECT * FROM (VALUES ('bart', 'lisa', 0.5), ('lisa', 'lisa', 0.25)) t(a, b, s);
CREATE TABLE lab AS SELECT * FROM (VALUES ('Cars', TRUE)) t(movie, v);
CREATE VARIABLE is_popular(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies) EVIDENCE (SELECT movie, v FROM lab);
CREATE VARIABLE is_fan(person TEXT) DOMAIN BOOLEAN FROM (SELECT person FROM people);
CREATE RULE a_ratio WEIGHT ?(m) SEMANTICS RATIO AS is_popular(^m) :- tweets(m, p), is_fan(p);
CREATE RULE b_sim WEIGHT = s * 2 FUNCTION EQUAL AS is_fan(a) = is_fan(b) :- sims(a, b, s);
CREATE RULE c_doubt WEIGHT -0.5 AS is_popular(m) :- tweets(m, p), NOT is_fan(p);
"""


def builder_graph():
    """The same model built by hand. vids: is_fan bart 0, homer 1, lisa 2; is_popular Cars 3, Up 4."""
    b = GraphBuilder()
    bart, homer, lisa, cars, up = b.add_variables(5)
    b.set_evidence(cars, 1)
    # ungrouped rules first, by name: b_sim (expression weights), then c_doubt
    w_sim1 = b.add_weight(1.0)
    b.add_factor(FactorFunction.EQUAL, [bart, lisa], weight=w_sim1)
    w_sim2 = b.add_weight(0.5)
    b.add_factor(FactorFunction.EQUAL, [lisa, lisa], weight=w_sim2)
    w_doubt = b.add_weight(-0.5)
    for fan, movie in [(bart, up), (lisa, up), (homer, cars), (lisa, cars)]:
        b.add_factor(FactorFunction.VOTE, [fan, movie], weight=w_doubt, literals=[0, 1])
    # grouped rule a_ratio: tied weights numbered in tie order (Cars, Up); groups in head order
    w_cars = b.add_weight(0.0, learnable=True)
    w_up = b.add_weight(0.0, learnable=True)
    g_cars = b.add_group(Semantics.RATIO, w_cars)
    g_up = b.add_group(Semantics.RATIO, w_up)
    for fan in (homer, lisa):
        b.add_factor(FactorFunction.VOTE, [fan, cars], literals=[1, 1], group=g_cars)
    for fan in (bart, lisa):
        b.add_factor(FactorFunction.VOTE, [fan, up], literals=[1, 1], group=g_up)
    return b.build()


def test_weight_rules_map_every_factor_to_its_rule_and_survive_subgraph():
    con = duckdb.connect()
    V, R = load_model(con, MODEL)
    g, _, stats = full_graph(con, V, R)
    # b_sim: one expression weight per factor; c_doubt: one constant; a_ratio: tied per movie
    assert stats.weight_rules == (("b_sim", 0, 2), ("c_doubt", 2, 3), ("a_ratio", 3, 5))
    rule, names = factor_rules(g, stats.weight_rules)
    assert [names[int(r)] for r in rule] == ["b_sim"] * 2 + ["c_doubt"] * 4 + ["a_ratio"] * 4
    sub, old = subgraph(g, np.array([0, 2, 4]))  # bart, lisa, Up: weights are kept as they are
    sub_rule, _ = factor_rules(sub, stats.weight_rules)
    assert sorted({names[int(r)] for r in sub_rule}) == ["a_ratio", "b_sim", "c_doubt"]
    # a weight index outside every rule's range (an imported model's) maps to no rule
    none, _ = factor_rules(g._replace(weight=np.full(g.n_factors, 7, dtype=np.int32)), stats.weight_rules)
    assert (none == -1).all()
    assert (factor_rules(g, ())[0] == -1).all()


def test_store_graph_equals_builder_graph():
    con = duckdb.connect()
    V, R = load_model(con, MODEL)
    g, vids, _ = full_graph(con, V, R)
    expected = builder_graph()
    assert list(vids) == [0, 1, 2, 3, 4]
    # factor order inside a rule follows the store's insertion order: compare factors as sets
    assert g.n_factors == expected.n_factors and g.n_edges == expected.n_edges

    def canon(graph):
        rows = []
        for f in range(graph.n_factors):
            lo, hi = graph.factor_offsets[f], graph.factor_offsets[f + 1]
            gw = graph.weights[graph.weight[f]]
            grp = int(graph.group[f])
            sem = int(graph.semantics[grp]) if grp >= 0 else -1
            rows.append((int(graph.function[f]), tuple(graph.factor_vars[lo:hi]), tuple(graph.factor_literals[lo:hi]),
                         float(gw), bool(graph.learnable[graph.weight[f]]), sem))
        return sorted(rows)

    assert canon(g) == canon(expected)
    # arrays that do not depend on the order of factors inside a rule are equal outright
    for name in ("cardinality", "evidence", "var_offsets", "semantics", "learnable", "group", "function",
                 "factor_offsets", "group_weight", "table_offset"):
        assert np.array_equal(getattr(g, name), getattr(expected, name)), name
    assert np.array_equal(np.sort(g.weights), np.sort(expected.weights))
    # reading the same store twice gives identical arrays (stored order is stable)
    g2, _, _ = full_graph(con, V, R)
    for a, b in zip(g, g2):
        assert np.array_equal(a, b)
    # each variable's factors sorted by (group, factor), the layout's promise
    for v in range(g.n_vars):
        fs = g.var_adjacent_factors(v)
        keys = list(zip(g.group[fs], fs))
        assert keys == sorted(keys)
    assert g.nbytes() / g.n_edges <= 48 + 64  # tiny graph: fixed costs dominate; see the benchmark


def test_repeated_variable_in_one_factor_is_kept():
    con = duckdb.connect()
    V, R = load_model(con, MODEL)
    g, _, _ = full_graph(con, V, R)
    lisa = 2
    both = [f for f in range(g.n_factors) if list(g.factor_args(f)) == [lisa, lisa]]
    assert len(both) == 1
    # listed once per argument slot in lisa's adjacency
    assert list(g.var_adjacent_factors(lisa)).count(both[0]) == 2


def chain_graph(n=6):
    b = GraphBuilder()
    vs = b.add_variables(n)
    w = b.add_weight(1.0)
    for i in range(n - 1):
        b.add_factor(FactorFunction.EQUAL, [vs[i], vs[i + 1]], weight=w)
    ws = b.add_weight(0.5)
    g = b.add_group(Semantics.LOGICAL, ws)
    b.add_factor(FactorFunction.VOTE, [vs[0], vs[1]], literals=[1, 1], group=g)
    b.add_factor(FactorFunction.VOTE, [vs[2], vs[1]], literals=[1, 1], group=g)
    return b.build()


def test_subgraph_induced_and_renumbered():
    g = chain_graph()
    sub, old = subgraph(g, np.array([5, 3, 4]))
    assert list(old) == [3, 4, 5]
    assert sub.n_vars == 3 and sub.n_factors == 2 and sub.n_groups == 0
    assert [list(sub.factor_args(f)) for f in range(2)] == [[0, 1], [1, 2]]
    sub, old = subgraph(g, np.arange(3))
    assert sub.n_factors == 4 and sub.n_groups == 1 and list(sub.group) == [-1, -1, 0, 0]
    assert np.array_equal(sub.weights, g.weights)


def test_subgraph_refuses_to_cut_a_group_or_take_outside_factors():
    g = chain_graph()
    with pytest.raises(GraphError, match="head group 0 is cut"):
        subgraph(g, np.array([0, 1]))
    with pytest.raises(GraphError, match="outside the variable set"):
        subgraph(g, np.array([0, 1]), factors=np.array([1]))
    sub, _ = subgraph(g, np.array([0, 1, 2]), factors=np.array([0]))
    assert sub.n_factors == 1


def test_reachable_stops_at_evidence_and_takes_whole_groups():
    g = chain_graph()
    vmask, fmask = reachable(g, np.array([4]))
    assert vmask.all() and fmask.all()
    ev = g.evidence.copy()
    ev[3] = 1
    g2 = g._replace(evidence=ev)
    vmask, fmask = reachable(g2, np.array([4]))
    assert list(np.flatnonzero(vmask)) == [3, 4, 5] and list(np.flatnonzero(fmask)) == [3, 4]
    vmask, fmask = reachable(g2, np.array([0]))
    # group {0-1, 2-1} brings 2 in; 2's factor to 3 is reached, 3 is evidence: stop
    assert list(np.flatnonzero(vmask)) == [0, 1, 2, 3] and list(np.flatnonzero(fmask)) == [0, 1, 2, 5, 6]


@pytest.mark.parametrize("two_pass", [False, True])
def test_variable_csr_is_a_stable_sort_by_variable(two_pass):
    from pdbq.graph.from_store import _var_csr_fast
    from pdbq.graph.subgraph import var_csr

    rng = np.random.default_rng(7)
    for n_vars, arity in [(1, 2), (5, 0), (70, 3), (5_000, 2), (70_000, 1)]:
        sizes = rng.integers(0, 4, 20_000) if arity == 0 else np.full(20_000, arity)
        offsets = np.zeros(sizes.size + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        fv = rng.integers(0, n_vars, int(offsets[-1])).astype(np.int32)
        got = _var_csr_fast(offsets, fv, n_vars, two_pass=two_pass, arity=arity)  # 0: variable arities
        want = var_csr(offsets, fv, n_vars)  # numpy's stable argsort: the reference
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    # a perturbed order (one swap inside a variable) is told apart
    bad = want[1].copy()
    v = int(np.argmax(np.diff(want[0])))
    bad[want[0][v]], bad[want[0][v] + 1] = bad[want[0][v] + 1], bad[want[0][v]]
    assert not np.array_equal(got[1], bad)
