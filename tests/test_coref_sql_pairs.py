"""PROB(a = b) / STDERR(a = b) over two aliases of a DOMAIN CLUSTER relation: the pairwise match
probabilities of the clustering posterior as one SQL answer (checked against enumeration)."""

from __future__ import annotations

import pytest

import pdbq
from pdbq.errors import InferenceError
from test_coref_sql import _exact_same, db  # noqa: F401 - the fixture and the exact answer

PAIRS_SQL = ("SELECT a.id AS l, b.id AS r, PROB(a = b) AS p, STDERR(a = b) AS se "
             "FROM entity AS a JOIN entity AS b ON a.id < b.id JOIN pairs ON pairs.a = a.id AND pairs.b = b.id "
             "WHERE pairs.sim > 0.5 ORDER BY l, r WITH (sweeps = 3000, chains = 4, seed = 3)")


def test_pair_probabilities_match_enumeration(db):  # noqa: F811
    r = db.execute(PAIRS_SQL)
    rows = r.arrow().to_pylist()
    want = db.duckdb.execute("SELECT a, b FROM pairs WHERE sim > 0.5 ORDER BY a, b").fetchall()
    assert [(x["l"], x["r"]) for x in rows] == want  # exactly the pairs the join names
    assert r.diagnostics["a=b.pairs"] == len(want)
    for x in rows:
        exact = _exact_same(db, x["l"], x["r"])
        assert abs(x["p"] - exact) <= 5 * x["se"] + 2e-3, (x, exact)
    # the pairs' answers differ (0.66, 0.74, < 0.01): a lookup of another pair's value fails above
    assert max(x["p"] for x in rows) > 0.5 > min(x["p"] for x in rows)


def test_pair_estimates_in_where_and_saved(db):  # noqa: F811
    r = db.execute("SELECT a.id, b.id AS other, MAP(a) AS m FROM entity a, entity b "
                   "WHERE a.id = 1 AND b.id <> 1 AND PROB(a = b) > 0.3 WITH (seed = 1)")
    assert r.arrow().column("other").to_pylist() == [2]
    db.execute("CREATE TABLE saved AS SELECT a.id AS l, b.id AS r, PROB(a = b) AS p "
               "FROM entity a JOIN entity b ON a.id < b.id WITH (seed = 2, sweeps = 400)")
    got = db.duckdb.execute("SELECT count(*), min(p), max(p) FROM saved").fetchall()[0]
    assert got[0] == 10 and got[1] >= 0.0 and 0.5 < got[2] <= 1.0
    assert "__pdbq" not in " ".join([c[0] for c in db.duckdb.execute("SELECT * FROM saved").description])


def test_pair_errors(db):  # noqa: F811
    with pytest.raises(InferenceError, match="asks for 25 pairs of rows, above max_pairs = 20"):
        db.execute("SELECT PROB(a = b) FROM entity a, entity b WITH (max_pairs = 20)")
    with pytest.raises(InferenceError, match="same SELECT"):
        db.execute("SELECT PROB(a = b) FROM entity a, (SELECT * FROM entity b) s")
    with pytest.raises(InferenceError, match=r"STDERR\(a = b\)"):
        db.execute("SELECT STDERR(a) FROM entity a, entity b")
    with pytest.raises(InferenceError, match="two aliases of one DOMAIN CLUSTER"):
        db.execute("SELECT PROB(a = b) FROM entity a, records b")
    db.execute("CREATE VARIABLE flag(id BIGINT) DOMAIN BOOLEAN FROM (SELECT id FROM records)")
    with pytest.raises(InferenceError, match="two aliases of one DOMAIN CLUSTER"):
        db.execute("SELECT PROB(a = b) FROM flag a, flag b")
    with pytest.raises(pdbq.ParseError, match=r"relation alone.*PROB\(a = b\)"):
        db.execute("SELECT PROB(a.e = b.e) FROM entity a, entity b")
    with pytest.raises(pdbq.ParseError, match="no relation or alias 'c'"):
        db.execute("SELECT PROB(a = c) FROM entity a, entity b")
    with pytest.raises(pdbq.ParseError, match="with itself"):
        db.execute("SELECT PROB(a = a) FROM entity a")
    assert db.duckdb.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '__pdbq_cluster%'").fetchall() == [(0,)]


def test_pair_estimates_insert_and_copy(db, tmp_path):  # noqa: F811
    db.execute("CREATE TABLE probs(l BIGINT, r BIGINT, p DOUBLE, se DOUBLE)")
    sql = ("SELECT a.id, b.id, PROB(a = b), STDERR(a = b) FROM entity a JOIN entity b ON a.id < b.id "
           "JOIN pairs ON pairs.a = a.id AND pairs.b = b.id WITH (seed = 4, sweeps = 300)")
    db.execute(f"INSERT INTO probs {sql}")
    assert db.duckdb.execute("SELECT count(*), count(p), count(se) FROM probs").fetchall() == [(10, 10, 10)]
    out = tmp_path / "probs.csv"
    db.execute(f"COPY ({sql}) TO '{out}' (HEADER)")
    assert len(out.read_text().splitlines()) == 11
