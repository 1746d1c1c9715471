"""Grounding behaviour: query-driven regions, staleness, limits, errors, key <-> vid maps."""

from __future__ import annotations

import dataclasses

import duckdb
import numpy as np
import pytest
from test_grounding_golden import load_model

from pdbq.errors import EvidenceError, GroundingError, OptionError
from pdbq.graph.from_store import full_graph, query_graph
from pdbq.grounding.compile import observed_columns
from pdbq.grounding.ground import ground_all
from pdbq.grounding.limits import GroundingConfig
from pdbq.grounding.variables import keys_to_vids, relation_info, stored_evidence, sync_variables, vids_to_keys
from pdbq.language.nodes import Column, CreateVariable, Domain, DomainKind, FactorFunction

TWO_PARTS = """
CREATE TABLE nodes AS SELECT * FROM (VALUES (1), (2), (3), (4), (10), (11), (12)) t(id);
CREATE TABLE edges AS SELECT * FROM (VALUES (1, 2), (2, 3), (3, 4), (10, 11), (11, 12)) t(a, b);
CREATE VARIABLE v(id INT) DOMAIN BOOLEAN FROM (SELECT id FROM nodes);
CREATE RULE chain WEIGHT 1.0 FUNCTION EQUAL AS v(x) = v(y) :- edges(x, y);
CREATE RULE prior WEIGHT 0.1 AS v(x) :- nodes(x);
"""


# Region grounding itself: small models are otherwise grounded whole at once (whole_model_factors).
REGION = GroundingConfig(whole_model_factors=0)


def factor_count(con, rule: str) -> int:
    return con.execute(f'SELECT count(*) FROM "pdbq_fs_factors__{rule}"').fetchone()[0]


def test_query_grounds_only_the_reachable_part():
    con = duckdb.connect()
    V, R = load_model(con, TWO_PARTS)
    sync_variables(con, V)
    seed = keys_to_vids(con, "v", [(1,)])
    g, vids, stats = query_graph(con, V, R, seed, {}, config=REGION)
    # component {1,2,3,4}: 3 chain factors + 4 priors; the other component is never grounded
    assert g.n_vars == 4 and g.n_factors == 7 and not stats.full_fallback
    assert factor_count(con, "chain") == 3 and factor_count(con, "prior") == 4
    keys = vids_to_keys(con, vids)["v"].order("pos").fetchall()
    assert [k[-1] for k in keys] == [1, 2, 3, 4]
    # the other part, asked next, is grounded then and the first part reused
    g2, vids2, _ = query_graph(con, V, R, keys_to_vids(con, "v", [(12,)]), {}, config=REGION)
    assert g2.n_vars == 3 and g2.n_factors == 5
    assert factor_count(con, "chain") == 5 and factor_count(con, "prior") == 7
    # a full grounding afterwards completes without duplicating anything
    full, _, st = full_graph(con, V, R)
    assert full.n_factors == 12 and factor_count(con, "chain") == 5


def test_evidence_stops_expansion():
    con = duckdb.connect()
    V, R = load_model(con, TWO_PARTS)
    sync_variables(con, V)
    v1, v2 = keys_to_vids(con, "v", [(1,), (2,)])
    g, vids, _ = query_graph(con, V, R, [v1], {int(v2): 1}, config=REGION)
    # v(2) is evidence: its factor with v(1) is kept (clamped), nothing behind it is reached
    assert list(vids) == [v1, v2]
    assert g.n_factors == 2  # chain(1,2) and prior(1)
    assert list(g.evidence) == [-1, 1]
    assert factor_count(con, "chain") == 1 and factor_count(con, "prior") == 1
    # without the evidence the same seed reaches the whole component (teeth: the stop matters)
    g, vids, _ = query_graph(con, V, R, [v1], {}, config=REGION)
    assert len(vids) == 4 and g.n_factors == 7


def test_head_group_is_reached_whole():
    con = duckdb.connect()
    V, R = load_model(con, """
    CREATE TABLE movies AS SELECT * FROM (VALUES ('Up'), ('Cars')) t(movie);
    CREATE TABLE people AS SELECT * FROM (VALUES ('bart'), ('lisa'), ('homer')) t(person);
    CREATE TABLE tweets AS SELECT * FROM (VALUES ('Up', 'bart'), ('Up', 'lisa'), ('Cars', 'homer')) t(movie, person);
    CREATE VARIABLE is_popular(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies);
    CREATE VARIABLE is_fan(person TEXT) DOMAIN BOOLEAN FROM (SELECT person FROM people);
    CREATE RULE r WEIGHT 1.5 SEMANTICS RATIO AS is_popular(^m) :- tweets(m, p), is_fan(p);
    """)
    sync_variables(con, V)
    bart, lisa = keys_to_vids(con, "is_fan", [("bart",), ("lisa",)])
    up = keys_to_vids(con, "is_popular", [("Up",)])[0]
    # Up is evidence, yet lisa is in bart's Markov blanket through the RATIO group of Up
    g, vids, _ = query_graph(con, V, R, [bart], {int(up): 1}, config=REGION)
    assert set(vids) == {bart, lisa, up} and g.n_factors == 2 and g.n_groups == 1
    assert factor_count(con, "r") == 2


def test_fallback_to_full_grounding_matches_sql_region():
    con = duckdb.connect()
    V, R = load_model(con, TWO_PARTS)
    sync_variables(con, V)
    seed = keys_to_vids(con, "v", [(1,)])
    g1, vids1, s1 = query_graph(con, V, R, seed, {}, config=GroundingConfig(max_frontier_rounds=1, whole_model_factors=0))
    assert s1.full_fallback
    con2 = duckdb.connect()
    V2, R2 = load_model(con2, TWO_PARTS)
    g2, vids2, s2 = query_graph(con2, V2, R2, seed, {}, config=REGION)
    assert not s2.full_fallback
    assert np.array_equal(vids1, vids2)
    for a, b in zip(g1, g2):
        assert np.array_equal(a, b)


def test_staleness_plain_sql_changes_are_seen_and_only_affected_rules_reground():
    con = duckdb.connect()
    V, R = load_model(con, TWO_PARTS + "CREATE TABLE other AS SELECT 1 AS id;")
    first = ground_all(con, V, R)
    assert sorted(first.grounded) == ["chain", "prior"]
    con.execute("INSERT INTO edges VALUES (4, 10)")  # plain DuckDB SQL, behind pdbq's back
    st = ground_all(con, V, R)
    assert st.grounded == ["chain"] and st.reused == ["prior"] and st.invalidated == ["chain"]
    assert factor_count(con, "chain") == 6
    con.execute("UPDATE edges SET b = 3 WHERE a = 10")  # same row count: the hash notices
    st = ground_all(con, V, R)
    assert st.grounded == ["chain"]
    assert con.execute('SELECT count(*) FROM "pdbq_fs_factors__chain" WHERE v1 = v0').fetchone()[0] == 0
    # an unrelated table changes: nothing is re-grounded
    con.execute("INSERT INTO other VALUES (2)")
    st = ground_all(con, V, R)
    assert st.grounded == [] and sorted(st.reused) == ["chain", "prior"]


def test_variable_rows_added_shift_other_relations_in_place():
    script = TWO_PARTS + """
    CREATE TABLE ws AS SELECT * FROM (VALUES (1), (2)) t(id);
    CREATE VARIABLE w(id INT) DOMAIN BOOLEAN FROM (SELECT id FROM ws);
    CREATE RULE wprior WEIGHT 0.2 AS w(x) :- ws(x);
    """
    con = duckdb.connect()
    V, R = load_model(con, script)
    ground_all(con, V, R)
    con.execute("INSERT INTO nodes VALUES (0)")  # v sorts before w... and w sorts after v: w moves
    st = ground_all(con, V, R)
    assert "wprior" in st.reused and "prior" in st.grounded
    g_inc, _, _ = full_graph(con, V, R)
    fresh = duckdb.connect()
    V2, R2 = load_model(fresh, script)
    fresh.execute("INSERT INTO nodes VALUES (0)")
    g_new, _, _ = full_graph(fresh, V2, R2)
    for name, a, b in zip(g_inc._fields, g_inc, g_new):
        assert np.array_equal(a, b), name


def test_limit_error_names_rule_and_leaves_store_unchanged():
    con = duckdb.connect()
    V, R = load_model(con, TWO_PARTS)
    ground_all(con, V, R)
    before = con.execute('SELECT * FROM "pdbq_fs_factors__chain" ORDER BY ALL').fetchall()
    con.execute("INSERT INTO edges SELECT 1, 2 FROM range(50)")
    with pytest.raises(GroundingError, match=r"rule 'chain'.*5[0-9] groundings.*max_groundings = 10"):
        ground_all(con, V, R, GroundingConfig(max_groundings=10))
    assert con.execute('SELECT * FROM "pdbq_fs_factors__chain" ORDER BY ALL').fetchall() == before
    assert con.execute("SELECT n_factors FROM pdbq_fs_rules WHERE rule = 'chain'").fetchone()[0] == 5
    with pytest.raises(OptionError):
        GroundingConfig(max_groundings=-1)


def test_estimate_blocks_a_huge_join_before_running_it():
    con = duckdb.connect()
    V, R = load_model(con, """
    CREATE TABLE big AS SELECT range % 1000 AS k FROM range(100000);
    CREATE TABLE ids AS SELECT range AS id FROM range(3);
    CREATE VARIABLE x(id BIGINT) DOMAIN BOOLEAN FROM (SELECT id FROM ids);
    CREATE RULE huge WEIGHT 1 AS x(i) :- ids(i), big(k), big(k);
    """)
    with pytest.raises(GroundingError, match=r"rule 'huge': its join is estimated at"):
        ground_all(con, V, R, GroundingConfig(max_groundings=1_000_000))
    # rolled back: not even the store's tables were left behind
    assert not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE 'pdbq_%'").fetchone()[0]


GRID2 = """
CREATE TABLE cells AS SELECT r, c FROM range(30) a(r), range(30) b(c);
CREATE TABLE links AS SELECT r, c, r + 1 AS r2, c AS c2 FROM cells WHERE r < 29
    UNION ALL SELECT r, c, r, c + 1 FROM cells WHERE c < 29;
CREATE VARIABLE g(r BIGINT, c BIGINT) DOMAIN BOOLEAN FROM (SELECT r, c FROM cells);
CREATE RULE link WEIGHT 0.4 FUNCTION EQUAL AS g(r, c) = g(r2, c2) :- links(r, c, r2, c2);
"""


def test_an_overestimated_join_is_counted_not_refused(monkeypatch):
    import pdbq.grounding.limits as limits

    # the optimizer's guess for a join on (row, column) keys can be far too high: never trusted alone
    monkeypatch.setattr(limits, "estimate_groundings", lambda con, select, text=None: 10**12)
    con = duckdb.connect()
    V, R = load_model(con, GRID2)
    stats = ground_all(con, V, R, GroundingConfig(max_groundings=2 * 29 * 30))
    assert stats.factors["link"] == 2 * 29 * 30
    con2 = duckdb.connect()
    V2, R2 = load_model(con2, GRID2)
    with pytest.raises(GroundingError, match=r"rule 'link': its join is estimated at 1,000,000,000,000 groundings "
                                             r"and yields more than max_groundings = 1,739"):
        ground_all(con2, V2, R2, GroundingConfig(max_groundings=2 * 29 * 30 - 1))
    assert not con2.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE 'pdbq_fs_factors%'").fetchone()[0]


def test_a_join_bounded_by_row_counts_skips_the_estimate_and_one_that_is_not_asks_for_it(monkeypatch):
    import pdbq.grounding.limits as limits

    asked = []
    monkeypatch.setattr(limits, "estimate_groundings", lambda con, select, text=None: asked.append(1) or 0)
    con = duckdb.connect()
    V, R = load_model(con, GRID2)
    # links has 1,740 rows and both g atoms are keyed by its columns: at most 1,740 groundings
    stats = ground_all(con, V, R, GroundingConfig(max_groundings=1740))
    assert stats.factors["link"] == 1740 and asked == []
    con2 = duckdb.connect()
    V2, R2 = load_model(con2, GRID2.replace(":- links(r, c, r2, c2)", ":- links(r, c, r3, c3), cells(r2, c2)"))
    ground_all(con2, V2, R2, GroundingConfig(max_groundings=10**9))  # bound 1,740 * 900 <= 1e9: not asked
    assert asked == []
    con3 = duckdb.connect()
    V3, R3 = load_model(con3, GRID2.replace(":- links(r, c, r2, c2)", ":- links(r, c, r3, c3), cells(r2, c2)"))
    with pytest.raises(GroundingError, match="over max_groundings = 1,000"):  # the estimate (0 here) let it run
        ground_all(con3, V3, R3, GroundingConfig(max_groundings=1000))
    assert asked == [1]


def test_size_bound_counts_tables_and_unkeyed_variable_atoms():
    from pdbq.grounding.compile import compile_rule  # noqa: PLC0415

    con = duckdb.connect()
    V, R = load_model(con, GRID2 + "CREATE RULE pair WEIGHT 1 AS g(r, c) :- g(r2, c2), cells(r, c), NOT links(r, c, r2, c2);")
    lookup = observed_columns(con)
    assert compile_rule(R["link"], V, lookup).size_bound == (("table", "links"),)
    # g(r2, c2) is keyed by nothing bound elsewhere: every cell; the negated atom only filters
    assert compile_rule(R["pair"], V, lookup).size_bound == (("table", "cells"), ("map", "g"))


@pytest.mark.parametrize(
    "rule, message",
    [
        ("CREATE RULE r WEIGHT 1 AS v(x) :- nodes(x), y > 3;", "names 'y', which no positive body atom binds"),
        ("CREATE RULE r WEIGHT 1 AS v(x) :- nodez(x);", "Did you mean 'nodes'"),
        ("CREATE RULE r WEIGHT 1 AS v(x) :- edges(x);", "has 1 terms but 'edges' has 2 columns"),
        ("CREATE RULE r WEIGHT 1 AS t(x) :- nodes(x);", "categorical; compare it with a value"),
        ("CREATE RULE r WEIGHT 1 AS v(x) :- nodes(x), t(x);", "body atom 't' is categorical"),
        ("CREATE RULE r WEIGHT 1 AS t(x) = 'Q' :- nodes(x);", "not in the domain"),
        ("CREATE RULE r WEIGHT = 1 / (x - x) AS v(x) :- nodes(x);", "NULL or not finite"),
    ],
)
def test_bad_rules_raise_grounding_errors(rule, message):
    con = duckdb.connect()
    V, R = load_model(con, TWO_PARTS + "CREATE VARIABLE t(id INT) DOMAIN ('P', 'O') FROM (SELECT id FROM nodes);" + rule)
    with pytest.raises(GroundingError, match=message):
        ground_all(con, V, {"r": R["r"]})


def test_aggregate_functions_are_refused_by_grounding():
    # the parser refuses them too; nodes built by hand (importers, tests) get a clear error
    con = duckdb.connect()
    V, R = load_model(con, TWO_PARTS)
    bad = dataclasses.replace(R["prior"], function=FactorFunction.RATIO)
    with pytest.raises(GroundingError, match="FUNCTION RATIO is not grounded"):
        ground_all(con, V, {"prior": bad})


def test_evidence_errors():
    con = duckdb.connect()
    con.execute("CREATE TABLE n AS SELECT * FROM (VALUES (1), (2)) t(id)")
    con.execute("CREATE TABLE lab AS SELECT * FROM (VALUES (1, 'P'), (1, 'O'), (2, 'X')) t(id, v)")
    mk = lambda ev: {"t": CreateVariable("t", (Column("id", "INT"),), Domain(DomainKind.VALUES, ("P", "O"), 2), "SELECT id FROM n", ev)}
    with pytest.raises(EvidenceError, match=r"key \('1',\) two values \['O', 'P'\]"):
        sync_variables(con, mk("SELECT id, v FROM lab WHERE id = 1"))
    con2 = duckdb.connect()
    con2.execute("CREATE TABLE n AS SELECT * FROM (VALUES (1), (2)) t(id)")
    con2.execute("CREATE TABLE lab AS SELECT * FROM (VALUES (2, 'X')) t(id, v)")
    with pytest.raises(EvidenceError, match="'X'.*outside the domain"):
        sync_variables(con2, mk("SELECT id, v FROM lab"))


def test_keys_and_vids_round_trip_and_stored_evidence():
    con = duckdb.connect()
    V, R = load_model(con, """
    CREATE TABLE c AS SELECT * FROM (VALUES ('b', 2), ('a', 1), ('a', 1), ('b', NULL)) t(p, k);
    CREATE TABLE lab AS SELECT * FROM (VALUES ('b', 2, TRUE)) t(p, k, v);
    CREATE VARIABLE l(p TEXT, k INT) DOMAIN BOOLEAN FROM (SELECT p, k FROM c) EVIDENCE (SELECT p, k, v FROM lab);
    """)
    rep = sync_variables(con, V)
    assert any("1 FROM rows with a NULL key" in w for w in rep.warnings)
    assert relation_info(con)["l"].n == 2
    vids = keys_to_vids(con, "l", [("b", 2), ("zz", 9), ("a", 1)])
    assert list(vids) == [1, -1, 0]
    assert list(keys_to_vids(con, "l", "SELECT 'a', 1")) == [0]
    back = vids_to_keys(con, [1, 0])["l"].order("pos").fetchall()
    assert [(r[2], r[3]) for r in back] == [("b", 2), ("a", 1)]
    ev_vids, ev_vals = stored_evidence(con)
    assert list(ev_vids) == [1] and list(ev_vals) == [1]


def test_per_row_cardinality_relation():
    con = duckdb.connect()
    con.execute("CREATE TABLE uai AS SELECT * FROM (VALUES (0, 2), (1, 3), (2, 5)) t(i, card)")
    V = {"x": CreateVariable("x", (Column("i", "INT"),), Domain(DomainKind.CATEGORICAL, (), 5), "SELECT i, card FROM uai",
                             per_row_cardinality=True)}
    sync_variables(con, V)
    g, vids, _ = full_graph(con, V, {})
    assert list(g.cardinality) == [2, 3, 5]
    con.execute("INSERT INTO uai VALUES (3, 1)")
    with pytest.raises(GroundingError, match="cardinality"):
        sync_variables(con, V)


def test_more_than_a_row_group_of_groundings_survives_the_transaction():
    # regression: DuckDB 2.0 loses rows inserted in the transaction that created the table by an
    # empty CTAS; factor tables are created with explicit columns instead
    con = duckdb.connect()
    V, R = load_model(con, """
    CREATE TABLE ids AS SELECT range::INT AS id FROM range(1000);
    CREATE TABLE pairs AS SELECT (range % 1000)::INT AS a, ((range * 7) % 1000)::INT AS b FROM range(300000);
    CREATE VARIABLE x(id INT) DOMAIN BOOLEAN FROM (SELECT id FROM ids);
    CREATE RULE r WEIGHT 1 FUNCTION EQUAL AS x(a) = x(b) :- pairs(a, b);
    """)
    g, _, st = full_graph(con, V, R)
    assert st.factors["r"] == 300000 and g.n_factors == 300000
    assert len(con.execute('SELECT v0 FROM "pdbq_fs_factors__r"').fetchnumpy()["v0"]) == 300000


def test_end_to_end_through_connect_and_the_catalog():
    import pdbq

    db = pdbq.connect()
    db.execute(TWO_PARTS)
    con, cat = db.duckdb, db.catalog
    V, R = cat.variables(), cat.rules()
    sync_variables(con, V)
    seed = keys_to_vids(con, "v", [(10,)])
    g, vids, _ = query_graph(con, V, R, seed, {})
    assert g.n_vars == 3 and g.n_factors == 5
    db.execute("INSERT INTO nodes VALUES (13); INSERT INTO edges VALUES (12, 13);")
    g, vids, st = query_graph(con, cat.variables(), cat.rules(), keys_to_vids(con, "v", [(10,)]), {})
    assert g.n_vars == 4 and g.n_factors == 7
