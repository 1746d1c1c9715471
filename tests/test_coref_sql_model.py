"""DOMAIN CLUSTER rules weighted by a stored pair model (WEIGHT MODEL 'name[@v]' ON records): the
SQL path scores exactly as the front door, says which version answered, and refuses bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import pdbq
from pdbq.coref.ground import design, drop_map
from pdbq.errors import CatalogError, GroundingError, InferenceError
from pdbq.linkage import dedupe

PEOPLE = [
    (1, "John Smith", "12 Oak Street", "1980"), (2, "Jon Smith", "12 Oak St", "1980"),
    (3, "John Smyth", "12 Oak Street", "1980"), (4, "Mary Jones", "7 Elm Road", "1975"),
    (5, "Mary Jones", "7 Elm Rd", "1975"), (6, "Peter Brown", "99 Pine Avenue", "1990"),
    (7, "Mary Johnson", "300 Lake Drive", "1962"), (8, "Peter Browne", "99 Pine Ave", "1990"),
    (9, "Anna Lee", "5 Birch Lane", "2001"),
]
FIELDS = ["name", "address", "born"]
RULE = "CREATE RULE fs WEIGHT MODEL {ref} ON people FUNCTION EQUAL AS entity(a) = entity(b) :- pairs(a, b)"


@pytest.fixture
def db():
    d = pdbq.connect()
    rows = ", ".join(f"({i}, '{n}', '{a}', '{b}')" for i, n, a, b in PEOPLE)
    d.execute(f"CREATE TABLE people AS SELECT * FROM (VALUES {rows}) t(pid, name, address, born)")
    d.execute("CREATE TABLE pairs AS SELECT l.pid AS a, r.pid AS b FROM people l JOIN people r ON l.pid < r.pid")
    d.execute("CREATE VARIABLE entity(pid BIGINT) DOMAIN CLUSTER FROM (SELECT pid FROM people)")
    yield d
    d.close()


def _design(d):
    cat = d.catalog
    try:
        return design(d.duckdb, cat.variables()["entity"], cat.variables(), cat.rules(), 10_000)
    finally:
        drop_map(d.duckdb, "entity")


def test_sql_scores_as_the_front_door(db):
    fit = dedupe("people", id="pid", fields=FIELDS, con=db, model_name="people")
    db.execute(RULE.format(ref="'people'"))
    d = _design(db)
    assert [(m.rule, m.name, m.version) for m in d.models] == [("fs", "people", 1)]
    # every pair the front door scored has the same match weight (nats) in the SQL design
    ids = np.asarray(d.keys)
    sql = {(int(ids[a]), int(ids[b])): w for a, b, w in zip(d.a, d.b, d.scores())}
    front = {(int(fit.ids[a]), int(fit.ids[b])): w * math.log(2) for a, b, w in zip(fit.scores.a, fit.scores.b,
                                                                                       fit.scores.match_weight)}
    assert front and set(front) <= set(sql)
    assert [sql[k] for k in front] == pytest.approx([front[k] for k in front], abs=1e-9)
    r = db.execute("SELECT e.pid AS id, MAP(e) AS cluster FROM entity e ORDER BY e.pid")
    assert r.arrow().to_pydict() == fit.clusters.to_pydict()
    assert r.diagnostics["e.pair_models"] == {"fs": "people@1"}


def test_versions_answer_and_show_weights_says_which(db):
    dedupe("people", id="pid", fields=FIELDS, con=db, model_name="people")
    dedupe("people", id="pid", fields=["name", "born"], con=db, model_name="people")  # version 2
    db.execute(RULE.format(ref="'people'"))
    db.execute(RULE.replace("fs", "pinned").format(ref="'people@1'"))
    assert {(m.rule, m.version) for m in _design(db).models} == {("fs", 2), ("pinned", 1)}
    shown = db.execute("SHOW WEIGHTS").arrow().to_pylist()
    rules = {r["rule"]: (json.loads(r["tie"]), r["version"]) for r in shown if r["rule"] in ("fs", "pinned")}
    assert rules == {"fs": ({"model": "people", "version": 2, "records": "people"}, 2),
                     "pinned": ({"model": "people", "version": 1, "records": "people"}, 1)}
    # the levels of both versions that answer are listed (version 1 is no longer the latest)
    assert {r["version"] for r in shown if r["rule"] == "people"} == {1, 2}
    r = db.execute("SELECT e.pid, MAP(e) FROM entity e")
    assert r.diagnostics["e.pair_models"] == {"fs": "people@2", "pinned": "people@1"}


def test_bad_model_rules_change_nothing(db):
    dedupe("people", id="pid", fields=FIELDS, con=db, model_name="people")
    before = db.execute("SHOW RULES").arrow().num_rows
    for ref, match in (("'nope'", "no pair model 'nope'; stored: people"),
                       ("'people@7'", "has no version 7; stored versions: 1")):
        with pytest.raises(CatalogError, match=match):
            db.execute(RULE.format(ref=ref))
    with pytest.raises(CatalogError, match="no column 'pid'.*compares"):
        db.execute(RULE.format(ref="people").replace("ON people", "ON pairs"))
    with pytest.raises(CatalogError, match="no table or view 'nosuch'"):
        db.execute(RULE.format(ref="people").replace("ON people", "ON nosuch"))
    db.execute("CREATE VARIABLE flag(pid BIGINT) DOMAIN BOOLEAN FROM (SELECT pid FROM people)")
    with pytest.raises(CatalogError, match="DOMAIN CLUSTER pair rules only"):
        db.execute("CREATE RULE bad WEIGHT MODEL 'people' ON people AS flag(a) :- people(a, n, x, y)")
    with pytest.raises(pdbq.ParseError, match="expected ON <records table>"):
        db.execute("CREATE RULE bad WEIGHT MODEL 'people' FUNCTION EQUAL AS entity(a) = entity(b) :- pairs(a, b)")
    assert db.execute("SHOW RULES").arrow().num_rows == before
    # records that break after the rule was made: a query names the rule and the key, stores nothing
    db.execute(RULE.format(ref="people"))
    db.duckdb.execute("INSERT INTO people VALUES (9, 'Anna Lea', '5 Birch Lane', '2001')")
    with pytest.raises(GroundingError, match="rule 'fs'.*key 9 2 times"):
        db.execute("SELECT e.pid, MAP(e) FROM entity e")
    left = db.duckdb.execute("SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()
    assert not [t for (t,) in left if t.startswith(("__pdbq_model", "__pdbq_cluster"))]


def test_explain_match_rows_are_the_front_doors(db):
    fit = dedupe("people", id="pid", fields=FIELDS, con=db, model_name="people")
    db.execute(RULE.format(ref="'people'"))
    r = db.execute("EXPLAIN MATCH entity (2, 1), (4, 5)")
    got = r.arrow()
    want = fit.explain(id_l=[2, 4], id_r=[1, 5])
    assert set(got.column("rule").to_pylist()) == {"fs"} and set(got.column("model").to_pylist()) == {"people@1"}
    for c in ("id_l", "id_r", "term", "level"):
        assert got.column(c).to_pylist() == want.column(c).to_pylist(), c
    for c in ("contribution", "match_weight"):
        assert got.column(c).to_pylist() == pytest.approx(want.column(c).to_pylist(), abs=1e-12), c
    assert got.schema.metadata == {b"unit": b"bits"}
    everything = db.execute("EXPLAIN MATCH entity").arrow()
    assert everything.num_rows == 36 * (len(FIELDS) + 1) and r.diagnostics["pair_models"] == {"fs": "people@1"}


def test_explain_match_errors(db):
    with pytest.raises(InferenceError, match="no rule over 'entity' is weighted by a stored pair model"):
        db.execute("EXPLAIN MATCH entity")
    dedupe("people", id="pid", fields=FIELDS, con=db, model_name="people")
    db.execute(RULE.format(ref="people"))
    with pytest.raises(CatalogError, match="no variable relation 'entiti'. Did you mean 'entity'"):
        db.execute("EXPLAIN MATCH entiti")
    with pytest.raises(InferenceError, match="no mention has key 99"):
        db.execute("EXPLAIN MATCH entity (1, 99)")
    with pytest.raises(InferenceError, match="'x' is not a key of type BIGINT"):
        db.execute("EXPLAIN MATCH entity ('x', 2)")
    db.duckdb.execute("DELETE FROM pairs WHERE a = 1 AND b = 9")
    with pytest.raises(InferenceError, match=r"\(1, 9\) is not a candidate pair"):
        db.execute("EXPLAIN MATCH entity (1, 9)")
    with pytest.raises(pdbq.ParseError, match=r"a pair is two constant keys"):
        db.execute("EXPLAIN MATCH entity (1)")


def test_explain_match_rows_can_be_saved(db, tmp_path):
    dedupe("people", id="pid", fields=FIELDS, con=db, model_name="people")
    db.execute(RULE.format(ref="people"))
    db.execute("CREATE TEMP TABLE why AS EXPLAIN MATCH entity")
    sums = db.duckdb.execute("SELECT id_l, id_r, sum(contribution) - any_value(match_weight) FROM why "
                             "GROUP BY id_l, id_r").fetchall()
    assert len(sums) == 36 and max(abs(d) for *_, d in sums) < 1e-9  # the terms add up to the weight
    out = tmp_path / "why.csv"
    db.execute(f"COPY (EXPLAIN MATCH entity (1, 2)) TO '{out}' (HEADER)")
    assert len(out.read_text().splitlines()) == 1 + len(FIELDS) + 1
    with pytest.raises(pdbq.ParseError, match="a view cannot hold"):
        db.execute("CREATE VIEW v AS EXPLAIN MATCH entity")
