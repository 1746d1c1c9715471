"""The fixed cost of `ground_all` (issue 12 item 10): fingerprints taken in one statement, one
hash sum per input, no LIMIT where row counts already bound the join; and that none of it lets a
change made through plain SQL go unnoticed, or a failure leave the store changed."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest
from test_grounding_golden import load_model

from pdbq.grounding.fingerprint import fingerprint_many, fingerprint_query, fingerprint_relation, many_fingerprint_sql
from pdbq.grounding.ground import ground_all
from pdbq.grounding.limits import GroundingConfig

MODEL = """
CREATE TABLE users AS SELECT range::INT AS usr FROM range(30);
CREATE TABLE movies AS SELECT range::INT AS movie FROM range(10);
CREATE TABLE tweets AS SELECT (range % 30)::INT AS usr, ((range * 7) % 10)::INT AS movie FROM range(200);
CREATE TABLE liked AS SELECT range::INT AS usr FROM range(5);
CREATE VARIABLE is_popular(movie INT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies);
CREATE VARIABLE is_fan(usr INT) DOMAIN BOOLEAN FROM (SELECT usr FROM users) EVIDENCE (SELECT usr, TRUE FROM liked);
CREATE RULE fans_vote WEIGHT 0.8 AS is_popular(m) :- tweets(u, m), is_fan(u);
"""


class Logged:
    """A connection that records the text of every statement run through it."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con
        self.log: list[str] = []

    def execute(self, sql, *args, **kw):
        self.log.append(sql)
        return self.con.execute(sql, *args, **kw)

    def __getattr__(self, name: str):
        return getattr(self.con, name)


def _reset(con, rule: str) -> None:
    con.execute("DELETE FROM pdbq_fs_rules WHERE rule = ?", [rule])
    con.execute("DELETE FROM pdbq_fs_weights WHERE rule = ?", [rule])
    con.execute(f'DROP TABLE IF EXISTS "pdbq_fs_factors__{rule}"')


def test_one_new_rule_is_grounded_in_eight_statements_with_one_for_all_fingerprints():
    con = duckdb.connect()
    V, R = load_model(con, MODEL)
    for _ in range(2):  # the registries' contents as they will be below have been read once
        ground_all(con, V, R)
        _reset(con, "fans_vote")
    logged = Logged(con)
    stats = ground_all(logged, V, R)
    assert stats.grounded == ["fans_vote"] and stats.factors["fans_vote"] == 200
    # two txid probes, BEGIN, fingerprints (inputs and registries), CTAS, registry row, weight
    # row, COMMIT (12 before the fourth pass: a statement per fingerprint, two registry reads)
    assert len(logged.log) == 8, logged.log
    hashing = [s for s in logged.log if "HASH(" in s.upper()]
    assert len(hashing) == 1
    # FROM and EVIDENCE of both relations (3 items), the observed table, the two registries
    assert hashing[0].upper().count("UNION ALL") == 5
    for name in ('"tweets"', "liked", "users", "movies", '"pdbq_fs_relations"', '"pdbq_fs_rules"'):
        assert name in hashing[0]
    assert not any("FROM pdbq_fs_rules" in s or "FROM pdbq_fs_relations" in s for s in logged.log)


def test_a_registry_changed_through_plain_sql_is_read_again():
    con = duckdb.connect()
    V, R = load_model(con, MODEL)
    ground_all(con, V, R)
    assert ground_all(con, V, R).reused == ["fans_vote"]
    logged = Logged(con)
    assert ground_all(logged, V, R).reused == ["fans_vote"]
    assert not any("FROM pdbq_fs_rules" in s for s in logged.log)  # unchanged: the cached rows
    # another definition hash in the registry: the rule's factors are no longer known current
    con.execute("UPDATE pdbq_fs_rules SET def_hash = 'edited' WHERE rule = 'fans_vote'")
    logged = Logged(con)
    st = ground_all(logged, V, R)
    assert st.grounded == ["fans_vote"] and st.invalidated == ["fans_vote"]
    assert any("FROM pdbq_fs_rules" in s for s in logged.log)
    # a vid map's registry row edited: its map is rebuilt
    con.execute("UPDATE pdbq_fs_relations SET source_fp = 'edited' WHERE relation = 'is_fan'")
    st = ground_all(con, V, R)
    assert st.grounded == ["fans_vote"]
    assert con.execute("SELECT source_fp FROM pdbq_fs_relations WHERE relation = 'is_fan'").fetchone()[0] != "edited"
    # the count mode reads both registries (a row count does not address a content)
    logged = Logged(con)
    ground_all(logged, V, R, GroundingConfig(fingerprint="count"))
    assert any("FROM pdbq_fs_rules" in s for s in logged.log) and any("FROM pdbq_fs_relations" in s for s in logged.log)


def test_fingerprint_many_gives_each_single_fingerprint_in_either_mode():
    con = duckdb.connect()
    load_model(con, MODEL)
    items = [("query", "SELECT usr FROM users"), ("relation", "tweets"), ("query", "SELECT usr, TRUE FROM liked")]
    for mode in ("hash", "count"):
        many = fingerprint_many(con, items, mode)
        assert many == {
            items[0]: fingerprint_query(con, items[0][1], mode),
            items[1]: fingerprint_relation(con, "tweets", mode),
            items[2]: fingerprint_query(con, items[2][1], mode),
        }
        assert fingerprint_many(con, items[1:2], mode) == {items[1]: fingerprint_relation(con, "tweets", mode)}
    assert fingerprint_many(con, []) == {}
    assert many["relation", "tweets"] == "200"
    with pytest.raises(ValueError, match="kind"):
        many_fingerprint_sql((("file", "x.csv"), ("relation", "tweets")))


def test_the_hash_is_the_wrapping_64_bit_sum_of_each_rows_hash_shifted_by_one():
    # an independent computation of the documented formula, over more rows than any 64-bit sum
    # of 63-bit values holds without wrapping (a changed formula, an XOR or a 128-bit sum fails)
    con = duckdb.connect()
    con.execute("SET threads = 2")
    con.execute("CREATE TABLE t AS SELECT (range % 977)::INT AS a, (range * 31)::BIGINT AS b FROM range(400000)")
    h = con.execute("SELECT hash(a, b) >> 1 AS h FROM t").fetchnumpy()["h"].astype(np.uint64)
    total = int(h.sum(dtype=np.uint64))
    expected = total - 2**64 if total >= 2**63 else total
    assert fingerprint_relation(con, "t") == f"400000:{expected}"
    assert fingerprint_query(con, "SELECT a, b FROM t") == f"400000:{expected}"


def test_every_kind_of_change_moves_the_fingerprint_and_no_change_keeps_it():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (1, 'x'), (1, 'x'), (2, 'y')) v(a, b)")
    con.execute("CREATE TABLE other (a INT)")

    def fp() -> str:
        return fingerprint_many(con, [("relation", "t"), ("relation", "other")])["relation", "t"]

    seen = [fp()]
    con.execute("INSERT INTO other VALUES (5)")  # another table: t's fingerprint stays
    assert fp() == seen[0]
    con.execute("DELETE FROM t WHERE a = 2")
    con.execute("INSERT INTO t VALUES (2, 'y')")  # the same multiset in another order
    assert fp() == seen[0]
    changes = [
        "INSERT INTO t VALUES (3, 'z')",
        "DELETE FROM t WHERE a = 3",  # back to the start: must equal seen[0] again
        "INSERT INTO t VALUES (1, 'x')",  # a third duplicate: a multiset hash counts it
        "DELETE FROM t WHERE a = 1",
        "INSERT INTO t VALUES (1, 'w'), (1, 'w')",  # three rows again, other ones
        "UPDATE t SET b = 'v' WHERE a = 1",  # both duplicates change together: an XOR misses it
        "UPDATE t SET a = 2, b = 'y' WHERE a = 1",  # now three equal rows
        "UPDATE t SET b = NULL",  # NULLs hash too
    ]
    for sql in changes:
        con.execute(sql)
        seen.append(fp())
    assert seen[2] == seen[0]
    rest = [s for i, s in enumerate(seen) if i != 2]
    assert len(set(rest)) == len(rest), seen


def test_a_column_named_like_the_row_alias_is_hashed_like_any_other():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT 1 AS a, 2 AS pdbq_fp_row")
    before = fingerprint_relation(con, "t")
    con.execute("UPDATE t SET a = 5")
    assert fingerprint_relation(con, "t") != before


def test_plain_sql_changes_to_every_fingerprinted_input_are_seen_through_one_statement():
    con = duckdb.connect()
    V, R = load_model(con, MODEL)
    assert ground_all(con, V, R).grounded == ["fans_vote"]
    assert ground_all(con, V, R).reused == ["fans_vote"]  # nothing changed: nothing grounded
    # the observed table, with the row count unchanged
    con.execute("UPDATE tweets SET movie = (movie + 1) % 10 WHERE usr = 3")
    st = ground_all(con, V, R)
    assert st.grounded == ["fans_vote"] and st.invalidated == ["fans_vote"]
    # a variable relation's FROM: the map is rebuilt and the rule grounded again
    con.execute("INSERT INTO users VALUES (30)")
    con.execute("INSERT INTO tweets VALUES (30, 1)")
    st = ground_all(con, V, R)
    assert st.grounded == ["fans_vote"] and st.factors["fans_vote"] == 201
    # an EVIDENCE query's input: the stored evidence follows
    con.execute("UPDATE liked SET usr = 7 WHERE usr = 4")
    ground_all(con, V, R)
    vids = con.execute(
        "SELECT m.usr FROM pdbq_fs_evidence e JOIN pdbq_fs_vars__is_fan m USING (vid) WHERE e.relation = 'is_fan' ORDER BY 1"
    ).fetchall()
    assert [r[0] for r in vids] == [0, 1, 2, 3, 7]


def test_a_failing_fingerprint_statement_rolls_everything_back():
    con = duckdb.connect()
    V, R = load_model(con, MODEL.replace("FROM (SELECT usr FROM users)", "FROM (SELECT CAST(name AS INT) AS usr FROM users2)")
                      .replace("CREATE TABLE liked", "CREATE TABLE users2 AS SELECT range::VARCHAR AS name FROM range(30);\nCREATE TABLE liked"))
    ground_all(con, V, R)
    before = {t: con.execute(f'SELECT * FROM "{t}" ORDER BY ALL').fetchall()
              for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'pdbq_fs_%'").fetchall()}
    con.execute("INSERT INTO users2 VALUES ('not a number')")  # the FROM query now fails when run
    con.execute("UPDATE tweets SET movie = 0")  # and an input of the rule changed too
    with pytest.raises(duckdb.ConversionException, match="not a number"):
        ground_all(con, V, R)
    after = {t: con.execute(f'SELECT * FROM "{t}" ORDER BY ALL').fetchall() for t in before}
    assert after == before
    con.execute("DELETE FROM users2 WHERE name = 'not a number'")  # the connection is usable again
    assert ground_all(con, V, R).grounded == ["fans_vote"]


def test_no_limit_where_row_counts_bound_the_join_and_the_guard_where_they_do_not(monkeypatch):
    import pdbq.grounding.limits as limits  # noqa: PLC0415
    from pdbq.errors import GroundingError  # noqa: PLC0415

    asked = []
    # an optimizer that underestimates: only the LIMIT guard and the count stop the join
    monkeypatch.setattr(limits, "estimate_groundings", lambda con, select, text=None: asked.append(1) or 0)
    con = duckdb.connect()
    V, R = load_model(con, MODEL)
    logged = Logged(con)
    ground_all(logged, V, R, GroundingConfig(max_groundings=200))  # tweets has 200 rows: bounded
    ctas = [s for s in logged.log if s.startswith('CREATE OR REPLACE TABLE "pdbq_fs_factors__')]
    assert len(ctas) == 1 and "LIMIT" not in ctas[0].upper()
    con2 = duckdb.connect()
    V2, R2 = load_model(con2, MODEL.replace(":- tweets(u, m), is_fan(u)", ":- tweets(u, x), is_fan(u), is_popular(m)"))
    logged2 = Logged(con2)
    ground_all(logged2, V2, R2, GroundingConfig(max_groundings=2000))  # bound 200 * 10 = 2,000: still none
    ctas = [s for s in logged2.log if s.startswith('CREATE OR REPLACE TABLE "pdbq_fs_factors__')]
    assert len(ctas) == 1 and "LIMIT" not in ctas[0].upper()
    _reset(con2, "fans_vote")
    logged3 = Logged(con2)
    assert asked == []
    # bound 2,000 > 1,999: the estimate is asked for and the LIMIT guard kept; the count is 2,000
    with pytest.raises(GroundingError, match="max_groundings = 1,999"):
        ground_all(logged3, V2, R2, GroundingConfig(max_groundings=1999))
    ctas = [s for s in logged3.log if s.startswith('CREATE OR REPLACE TABLE "pdbq_fs_factors__')]
    assert len(ctas) == 1 and ctas[0].upper().endswith("LIMIT 2000")
    assert asked == [1]
    assert not con2.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'pdbq_fs_factors__fans_vote'").fetchone()[0]


def test_cached_registry_rows_are_copies():
    from pdbq.grounding.registry import REGISTRY_ITEMS, registry_rows  # noqa: PLC0415

    con = duckdb.connect()
    V, R = load_model(con, MODEL)
    ground_all(con, V, R)
    fp = fingerprint_many(con, [REGISTRY_ITEMS["rules"]])[REGISTRY_ITEMS["rules"]]
    first = registry_rows(con, "rules", fp)
    first[0][4].append("changed by a caller")
    again = registry_rows(con, "rules", fp)
    assert again == con.execute("SELECT rule, def_hash, inputs_fp, complete, relations, n_factors, position FROM pdbq_fs_rules").fetchall()


CHAIN10 = """
CREATE TABLE nodes AS SELECT range::INT AS id FROM range(10);
CREATE TABLE edges AS SELECT range::INT AS a, (range + 1)::INT AS b FROM range(9);
CREATE VARIABLE v(id INT) DOMAIN BOOLEAN FROM (SELECT id FROM nodes);
CREATE RULE chain WEIGHT 1.0 FUNCTION EQUAL AS v(x) = v(y) :- edges(x, y);
CREATE RULE prior WEIGHT 0.1 AS v(x) :- nodes(x);
"""


def _first_query(whole_model_factors: int):
    from pdbq.graph.from_store import query_graph
    from pdbq.grounding.variables import keys_to_vids, sync_variables

    con = duckdb.connect()
    V, R = load_model(con, CHAIN10)
    sync_variables(con, V)
    logged = Logged(con)
    seed = keys_to_vids(con, "v", [(0,)])
    g, _, stats = query_graph(logged, V, R, seed, {}, config=GroundingConfig(whole_model_factors=whole_model_factors))
    return g, stats, len(logged.log)


def test_a_small_model_is_grounded_whole_in_a_quarter_of_the_statements():
    g_region, s_region, n_region = _first_query(0)
    g_whole, s_whole, n_whole = _first_query(100_000)
    assert (s_region.rounds, s_region.small_model) == (10, False)  # one round per link of the chain
    assert (s_whole.rounds, s_whole.small_model, s_whole.full_fallback) == (0, True, False)
    for a, b in zip(g_region, g_whole):  # the same graph either way
        assert np.array_equal(a, b)
    # 164 statements round by round, 39 at once (two preparations, one INSERT per rule, the read)
    assert n_region >= 150 and n_whole <= 40, (n_region, n_whole)
    # the row counts bound the model by its exact 19 factors here
    _, s_tight, _ = _first_query(19)
    assert s_tight.small_model
