"""The query-graph cache: a repeated query reuses its graph and derived arrays, and no change to
the inputs — definitions, data changed through plain SQL, evidence, GIVEN — is ever answered from
a stale graph."""

from __future__ import annotations

import numpy as np
import pytest
from test_query import CHAIN, chain_exact

import pdbq
from pdbq.errors import OptionError
from pdbq.graph.builder import GraphBuilder
from pdbq.graph.cache import CachedGraph, GraphCache, graph_key, nbytes

EXACT_Q = "SELECT PROB(v) AS p FROM x v WHERE v.i = {i} {given} USING EXACT"


@pytest.fixture
def db():
    d = pdbq.connect()
    d.execute(CHAIN)
    yield d
    d.close()


def ask(db, i=1, given=""):
    r = db.execute(EXACT_Q.format(i=i, given=given))
    return r.fetchall()[0][0], r.diagnostics["graph_cached"]


def test_repeat_is_cached_and_answers_the_same(db):
    first, cached1 = ask(db)
    second, cached2 = ask(db)
    assert (cached1, cached2) == (False, True)
    assert first == second == pytest.approx(chain_exact({3: 1})[1], abs=1e-9)
    # the small model is grounded whole at once: its graph and the query's entry
    assert db.graph_cache.hits == 1 and len(db.graph_cache) == 2


def test_sampled_answer_with_cache_equals_answer_without(db):
    sql = "SELECT PROB(v) AS p, STDERR(v) AS se FROM x v WHERE v.i = 5 USING QAM WITH (steps = 20000, seed = 7)"
    db.execute(sql)
    warm = db.execute(sql)
    assert warm.diagnostics["graph_cached"]
    cold = pdbq.connect(cache_bytes=0)
    cold.execute(CHAIN)
    ref = cold.execute(sql)
    assert not ref.diagnostics["graph_cached"] and len(cold.graph_cache) == 0
    assert warm.fetchall() == ref.fetchall()  # same seed, same graph, same kernel arrays: same numbers
    cold.close()


def test_one_graph_serves_several_methods(db):
    exact, _ = ask(db, 5)
    r = db.execute("SELECT PROB(v) AS p, STDERR(v) AS se FROM x v WHERE v.i = 5 USING QAM WITH (steps = 50000, seed = 1)")
    assert r.diagnostics["graph_cached"]
    p, se = r.fetchall()[0]
    assert abs(p - exact) <= 5 * se + 1e-3
    auto = db.execute("SELECT PROB(v) AS p FROM x v WHERE v.i = 5")
    assert auto.diagnostics["graph_cached"] and auto.diagnostics["method"] == "EXACT"
    assert auto.fetchall()[0][0] == pytest.approx(exact, abs=1e-12)


@pytest.mark.parametrize(
    "change, evidence",
    [
        # an input table of a rule, changed through plain SQL: the x(1)-x(2) link is gone
        ("DELETE FROM edges WHERE a = 1", None),
        # the stored evidence: x(3) observed FALSE instead of TRUE
        ("UPDATE obs SET v = FALSE", {3: 0}),
        # the evidence table empties: x(1) now reaches the whole chain
        ("DELETE FROM obs", {}),
    ],
)
def test_data_changes_through_plain_sql_are_never_served_stale(db, change, evidence):
    before, _ = ask(db)
    assert ask(db)[1]
    db.execute(change)
    after, cached = ask(db)
    assert not cached
    if evidence is None:  # x(1) keeps only x(0) and its own prior: a two-variable model
        w, h0, h1 = 0.8, -4.5 * 0.3, -3.5 * 0.3
        z = {(a, b): np.exp(w * (1 if a == b else -1) + h0 * (2 * a - 1) + h1 * (2 * b - 1)) for a in (0, 1) for b in (0, 1)}
        expected = (z[0, 1] + z[1, 1]) / sum(z.values())
    else:
        expected = chain_exact(evidence)[1]
    assert after == pytest.approx(expected, abs=1e-9)
    assert abs(after - before) > 1e-3  # the change matters, so a stale answer would fail


def test_definition_changes_are_never_served_stale(db):
    ask(db)
    db.execute("CREATE OR REPLACE RULE link WEIGHT 0.2 FUNCTION EQUAL AS x(a) = x(b) :- edges(a, b)")
    p, cached = ask(db)
    assert not cached
    assert abs(p - chain_exact({3: 1})[1]) > 1e-3  # weight 0.8 no longer holds


def test_new_variable_rows_are_noticed(db):
    ask(db, 9)
    db.execute("INSERT INTO nodes VALUES (10, 'n10'); INSERT INTO edges VALUES (9, 10)")
    r = db.execute("SELECT PROB(v) AS p FROM x v WHERE v.i = 9 USING EXACT")
    assert not r.diagnostics["graph_cached"]
    assert r.diagnostics["latent_vars"] == 6  # x(4..8) and the new x(10)


def test_given_is_part_of_the_key(db):
    a, _ = ask(db, 5, "GIVEN x(6) = FALSE")
    b, cached_b = ask(db, 5, "GIVEN x(6) = TRUE")
    c, cached_c = ask(db, 5, "GIVEN x(6) = FALSE")
    assert not cached_b and cached_c
    assert a == c == pytest.approx(chain_exact({3: 1, 6: 0})[5], abs=1e-9)
    assert b == pytest.approx(chain_exact({3: 1, 6: 1})[5], abs=1e-9)


def test_rolled_back_changes_are_not_served(db):
    before, _ = ask(db)
    db.execute("BEGIN")
    db.execute("UPDATE obs SET v = FALSE")
    inside, cached_inside = ask(db)  # a query inside the caller's transaction sees its changes
    db.execute("ROLLBACK")
    after, cached_after = ask(db)
    assert not cached_inside and inside == pytest.approx(chain_exact({3: 0})[1], abs=1e-9)
    assert cached_after and after == before  # the data is as before, so the first graph is valid again


def test_queries_inside_a_users_transaction_commit_with_it(db):
    db.execute("BEGIN")
    p, _ = ask(db, 2)
    db.execute("COMMIT")
    assert p == pytest.approx(chain_exact({3: 1})[2], abs=1e-9)


def test_cache_off_and_bad_size():
    d = pdbq.connect(cache_bytes=0)
    d.execute(CHAIN)
    assert not ask(d)[1] and not ask(d)[1]
    d.close()
    with pytest.raises(OptionError, match="cache_bytes"):
        pdbq.connect(cache_bytes=-1)


def _tiny_graph(n):
    b = GraphBuilder()
    vs = b.add_variables(n)
    w = b.add_weight(0.5)
    for u, v in zip(vs, vs[1:]):
        b.add_factor(1, [u, v], weight=w)
    return b.build()


def test_lru_bound_by_bytes_and_memo_sizes_count():
    g = _tiny_graph(50)
    size = nbytes(CachedGraph(g, np.arange(50), ()))
    cache = GraphCache(max_bytes=int(2.5 * size))
    for k in "abc":
        cache.put(k, CachedGraph(_tiny_graph(50), np.arange(50), ()))
    assert len(cache) == 2 and cache.get("a") is None and cache.get("b") is not None
    # "b" is now the most recent; a derived array that overflows the bound evicts "c"
    memo = cache.memo(cache.get("b").graph)
    memo.put("big", np.zeros(size // 8 + 1))
    assert cache.get("c") is None and cache.get("b") is not None
    assert cache.memo(g) is None  # not cached: nothing is kept for it
    assert memo.get_or_make("big", lambda: 1 / 0) is memo.get("big")


def test_key_depends_on_every_part():
    s, ev = np.array([1, 2]), (np.array([5, 3]), np.array([1, 0]))
    k = graph_key("t", s, ev, "cfg")
    assert k == graph_key("t", s, (np.array([3, 5]), np.array([0, 1])), "cfg")  # evidence order is irrelevant
    others = [
        graph_key("u", s, ev, "cfg"),
        graph_key("t", np.array([1, 3]), ev, "cfg"),
        graph_key("t", s, (np.array([5, 3]), np.array([1, 1])), "cfg"),
        graph_key("t", s, ev, "cfg2"),
    ]
    assert k not in others and len(set(others)) == 4


# Two components: a chain of 40 (more than max_frontier_rounds = 12 rounds from one end: the
# query-driven grounding falls back to the whole model) and a chain of 5 (a bounded region).
TWO_CHAINS = """
CREATE TABLE nodes AS SELECT i FROM range(45) r(i);
CREATE TABLE edges AS SELECT i AS a, i + 1 AS b FROM range(44) r(i) WHERE i <> 39;
CREATE VARIABLE y(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM nodes);
CREATE RULE link WEIGHT 0.6 FUNCTION EQUAL AS y(a) = y(b) :- edges(a, b);
CREATE RULE field WEIGHT = (i % 7 - 3) * 0.2 FUNCTION ISTRUE AS y(i) :- nodes(i);
"""
SAMPLED = "SELECT PROB(v) AS p, STDERR(v) AS se FROM y v WHERE v.i = {i} USING QAM WITH (steps = 30000, seed = 5)"


def test_whole_model_graph_serves_other_regions_in_memory():
    from pdbq.api import query_plan

    d = pdbq.connect()
    d.execute(TWO_CHAINS)
    first = query_plan(d, SAMPLED.format(i=0))
    # a small model: grounded whole at once, not region by region
    assert first.grounding.small_model and not first.grounding.full_fallback and first.graph.n_vars == 40
    other = query_plan(d, SAMPLED.format(i=20))  # same component, another query variable
    assert other.grounding.cached == "model" and other.grounding.rounds == 0
    assert other.graph is first.graph  # the same region: one graph, one set of kernel arrays
    small = d.execute(SAMPLED.format(i=42))  # the other component, cut out of the model graph in memory
    assert small.diagnostics["graph_cached"] and small.diagnostics["latent_vars"] == 4
    # the answer is the one the query-driven grounding gives (same graph up to weight numbering)
    fresh = pdbq.connect()
    fresh.execute(TWO_CHAINS)
    ref = fresh.execute(SAMPLED.format(i=42))
    assert not ref.diagnostics["graph_cached"] and ref.diagnostics["latent_vars"] == 4
    assert small.fetchall() == ref.fetchall()
    d.close()
    fresh.close()


def test_memo_keeps_only_the_most_recent_values_of_a_kind():
    cache = GraphCache()
    entry = cache.put("k", CachedGraph(_tiny_graph(5), np.arange(5), ()))
    memo = cache.memo(entry.graph)
    memo.put("kernel", np.zeros(3))
    for i in range(6):
        memo.put(("selection", i), np.full(2, i), keep=4)
    assert sorted(k[1] for k in memo.derived if isinstance(k, tuple)) == [2, 3, 4, 5]
    assert "kernel" in memo.derived  # other kinds are untouched
    assert memo.get_or_make(("selection", 9), lambda: np.ones(1), keep=4) is memo.get(("selection", 9))
    assert sorted(k[1] for k in memo.derived if isinstance(k, tuple)) == [3, 4, 5, 9]


def test_selection_with_shared_edge_influences_equals_the_direct_one():
    from pdbq.inference.query_aware.influence import edge_influence
    from pdbq.inference.query_aware.selection import SelectionConfig, selection_distribution

    g = _tiny_graph(30)
    sites = np.arange(30)
    inf = edge_influence(g)
    for rule in ("trail", "distance"):
        cfg = SelectionConfig(selection=rule)
        a = selection_distribution(g, [7], sites, cfg)
        b = selection_distribution(g, [7], sites, cfg, influence=inf)
        np.testing.assert_array_equal(a.p, b.p)


def test_explain_says_a_small_model_was_grounded_whole(db):
    rows = dict(db.execute("EXPLAIN SELECT PROB(v) FROM x v WHERE v.i = 2").fetchall())
    assert "the whole model at once" in rows["grounding"] and "frontier rounds" not in rows["grounding"]
    rows = dict(db.execute("EXPLAIN SELECT PROB(v) FROM x v WHERE v.i = 2").fetchall())
    assert rows["grounding"].startswith("cached graph")
