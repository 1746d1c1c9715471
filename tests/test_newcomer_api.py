"""A newcomer's first hour in Python (issue 13): DuckDB habits, saving answers from SQL, optional
pandas, one shape for DIST, inference shapes, events over several variables, ProbLog/MLN habits,
UAI statements."""

from __future__ import annotations

import builtins
import itertools
import math
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import pdbq
from pdbq.errors import CatalogError, InferenceError, ParseError, PdbqError

# People who smoke (a ProbLog-style prior), friends who agree, and an MLN clause smokes => cancer.
SMOKERS = """
CREATE TABLE people AS SELECT * FROM (VALUES ('ann'), ('bob'), ('cat')) t(name);
CREATE TABLE friends AS SELECT * FROM (VALUES ('ann', 'bob'), ('bob', 'cat')) t(a, b);
CREATE VARIABLE smokes(name TEXT) DOMAIN BOOLEAN FROM (SELECT name FROM people);
CREATE VARIABLE cancer(name TEXT) DOMAIN BOOLEAN FROM (SELECT name FROM people);
CREATE RULE prior AS 0.3::smokes(p) :- people(p);
CREATE RULE agree WEIGHT 0.8 FUNCTION EQUAL AS smokes(a) = smokes(b) :- friends(a, b);
CREATE RULE causes WEIGHT 1.5 AS smokes(p) => cancer(p);
"""
PEOPLE = ("ann", "bob", "cat")


def _worlds():
    """Every world of SMOKERS with its unnormalised weight, computed from the documented factor
    functions: ISTRUE and EQUAL are ±1-valued, IMPLY_MLN is 1 when the clause holds, else 0."""
    w_prior = 0.5 * math.log(0.3 / 0.7)
    for bits in itertools.product((False, True), repeat=6):
        s = dict(zip(PEOPLE, bits[:3]))
        c = dict(zip(PEOPLE, bits[3:]))
        e = sum(w_prior * (1 if s[p] else -1) for p in PEOPLE)
        e += sum(0.8 * (1 if s[a] == s[b] else -1) for a, b in (("ann", "bob"), ("bob", "cat")))
        e += sum(1.5 * (1 if (not s[p] or c[p]) else 0) for p in PEOPLE)
        yield s, c, math.exp(e)


def _brute(event, given=lambda s, c: True) -> float:
    num = den = 0.0
    for s, c, w in _worlds():
        if given(s, c):
            den += w
            num += w if event(s, c) else 0.0
    return num / den


@pytest.fixture()
def smokers():
    with pdbq.connect() as db:
        db.execute(SMOKERS)
        yield db


# ------------------------------------------------------------------------------ item 3: DuckDB habits


def test_bound_parameters_in_plain_sql_and_probabilistic_queries(smokers) -> None:
    db = smokers
    assert db.execute("SELECT ? + 1 AS x, $2 AS y", [41, "z"]).fetchall() == [(42, "z")]
    assert db.execute("SELECT $a || $b AS s", {"a": "x", "b": "y"}).fetchone() == ("xy",)
    by_literal = db.execute("SELECT s.name, PROB(s) AS p FROM smokes s WHERE s.name = 'bob' USING EXACT").fetchall()
    assert db.execute("SELECT s.name, PROB(s) AS p FROM smokes s WHERE s.name = ? USING EXACT", ["bob"]).fetchall() == by_literal
    assert db.execute("SELECT s.name, PROB(s) AS p FROM smokes s WHERE s.name = $who USING EXACT",
                      {"who": "bob"}).fetchall() == by_literal
    # a parameter is a value, never SQL: a quote in it cannot change the statement
    assert db.execute("SELECT s.name, PROB(s) FROM smokes s WHERE s.name = ? USING EXACT", ["x' OR TRUE --"]).fetchall() == []
    # GIVEN values bind too
    given = db.execute("SELECT PROB(s) FROM smokes s WHERE s.name = 'bob' GIVEN smokes(?) = ? USING EXACT", ["ann", True])
    assert given.fetchone()[0] == pytest.approx(_brute(lambda s, c: s["bob"], lambda s, c: s["ann"]), abs=1e-9)
    opts = db.execute("SELECT PROB(s) FROM smokes s WHERE s.name = 'bob' USING GIBBS WITH (seed = ?, steps = ?)", [3, 500])
    assert opts.diagnostics["seed"] == 3 and opts.diagnostics["steps"] == 500
    with pytest.raises(ParseError, match="2 parameter"):
        db.execute("SELECT PROB(s) FROM smokes s WHERE s.name = ? AND ? USING EXACT", ["bob"])
    with pytest.raises(ParseError, match="no values were given"):
        db.execute("SELECT PROB(s) FROM smokes s WHERE s.name = ? USING EXACT")
    with pytest.raises(ParseError, match="one statement"):
        db.execute("SELECT 1; SELECT ?", [1])


def test_data_frames_and_arrow_tables_are_queried_by_name(smokers) -> None:
    db = smokers
    extra_people = pd.DataFrame({"name": ["dan", "eve"]})
    scores = pa.table({"name": ["ann", "bob"], "score": [1.0, 2.0]})
    assert db.execute("SELECT count(*) FROM extra_people").fetchone() == (2,)
    assert db.sql("SELECT sum(score) AS s FROM scores").fetchall() == [(3.0,)]
    joined = db.execute("SELECT s.name, sc.score, PROB(s) AS p FROM smokes s JOIN scores sc ON sc.name = s.name "
                        "ORDER BY s.name USING EXACT").fetchall()
    assert [r[:2] for r in joined] == [("ann", 1.0), ("bob", 2.0)]
    people = pd.DataFrame({"name": ["shadowed"]})  # a table of that name wins, as in DuckDB
    assert db.execute("SELECT count(*) FROM people").fetchone() == (3,)
    assert len(people) == 1
    tables = {r[0] for r in db.duckdb.sql("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    assert "extra_people" not in tables and "scores" not in tables  # registered only for the call


def test_results_fetch_like_duckdb_and_ddl_chains(smokers) -> None:
    db = smokers
    r = db.execute("CREATE TABLE t(a INT)").execute("INSERT INTO t VALUES (1), (2), (3)").execute("SELECT a FROM t ORDER BY a")
    assert r.fetchone() == (1,) and r.fetchmany(5) == [(2,), (3,)] and r.fetchone() is None
    assert r.fetchall() == [(1,), (2,), (3,)]
    assert list(r.fetchdf()["a"]) == [1, 2, 3] and list(r.df()["a"]) == [1, 2, 3]
    empty = db.execute("CREATE TABLE u(b INT)")
    assert isinstance(empty, pdbq.Result) and len(empty) == 0 and empty.columns == []


def test_show_prints_a_box(smokers, capsys) -> None:
    smokers.execute("SELECT 1 AS one").show()
    assert "│  one  │" in capsys.readouterr().out


# ------------------------------------------------------------------------------ item 4: pandas


def test_df_without_pandas_says_how_to_install_it(smokers, monkeypatch) -> None:
    real_import = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("No module named 'pandas'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    with pytest.raises(PdbqError, match=r"pip install 'pdbq\[pandas\]'"):
        smokers.execute("SELECT 1 AS one").df()


# ------------------------------------------------------------------------------ item 2: saving answers


def test_create_insert_copy_from_a_probabilistic_query(smokers, tmp_path: Path) -> None:
    db = smokers
    exact = {p: _brute(lambda s, c, p=p: c[p]) for p in PEOPLE}
    made = db.execute("CREATE TABLE risk AS SELECT c.name, PROB(c) AS p, STDERR(c) AS se FROM cancer c "
                      "WHERE c.name <> 'cat' USING EXACT")
    assert made.diagnostics["method"] == "EXACT"  # the answer's diagnostics stay visible
    db.execute("INSERT INTO risk SELECT c.name, PROB(c), STDERR(c) FROM cancer c WHERE c.name = ? USING EXACT", ["cat"])
    rows = db.execute("SELECT name, p, se FROM risk ORDER BY name").fetchall()
    assert [r[0] for r in rows] == list(PEOPLE)
    for name, p, se in rows:
        assert p == pytest.approx(exact[name], abs=1e-9) and se == 0.0
    target = tmp_path / "risk.parquet"
    db.execute(f"COPY (SELECT c.name, PROB(c) AS p FROM cancer c USING EXACT) TO '{target}' (FORMAT parquet)")
    back = dict(duckdb.sql(f"SELECT name, p FROM '{target}'").fetchall())
    assert back == pytest.approx(exact, abs=1e-9)
    db.execute("CREATE OR REPLACE TABLE risk AS SELECT c.name FROM cancer c WHERE PROB(c) > 0.6 USING EXACT")
    assert {r[0] for r in db.execute("SELECT name FROM risk").fetchall()} == {p for p in PEOPLE if exact[p] > 0.6}


def test_create_view_over_prob_is_refused_with_advice(smokers) -> None:
    before = smokers.execute("SHOW TABLES").fetchall()
    with pytest.raises(ParseError, match="CREATE TABLE name AS"):
        smokers.execute("CREATE VIEW risk AS SELECT c.name, PROB(c) AS p FROM cancer c")
    assert smokers.execute("SHOW TABLES").fetchall() == before


# ------------------------------------------------------------------------------ item 5: internals


def test_show_tables_hides_pdbq_storage(smokers) -> None:
    smokers.execute("SELECT PROB(s) FROM smokes s USING EXACT")
    names = [r[0] for r in smokers.execute("SHOW TABLES").fetchall()]
    assert names == ["cancer", "friends", "people", "smokes"]
    assert all(not r[2].startswith("pdbq_") for r in smokers.execute("SHOW ALL TABLES").fetchall())


def test_dist_is_a_dict_from_fetchall_as_from_a_relation(smokers) -> None:
    q = "SELECT s.name, DIST(s) AS d FROM smokes s WHERE s.name = 'ann' USING EXACT"
    from_result = smokers.execute(q).fetchall()
    from_relation = smokers.sql(q).fetchall()
    assert isinstance(from_result[0][1], dict) and from_result == from_relation
    assert sum(from_result[0][1].values()) == pytest.approx(1.0)


def test_sampler_warnings_name_variables_by_key() -> None:
    with pdbq.connect() as db:
        db.execute("CREATE TABLE n AS SELECT range AS i FROM range(60); "
                   "CREATE TABLE e AS SELECT range AS a, range + 1 AS b FROM range(59); "
                   "CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM n); "
                   "CREATE RULE tie WEIGHT 4 FUNCTION EQUAL AS x(a) = x(b) :- e(a, b);")
        r = db.execute("SELECT PROB(v) FROM x v WHERE v.i IN (0, 30) USING GIBBS WITH (steps = 20000, seed = 1)")
        stuck = [w for w in r.diagnostics["warnings"] if "not converged" in w]
        assert stuck, r.diagnostics["warnings"]  # weight 4 on a chain: the chains disagree
        assert "for x(" in stuck[0] and "variable " not in stuck[0]


# ------------------------------------------------------------------------------ item 7: inference API


def test_infer_accepts_the_obvious_shapes(smokers) -> None:
    expected = _brute(lambda s, c: s["bob"], lambda s, c: s["ann"])
    targets = ({"smokes": "bob"}, {"smokes": ["bob"]}, [("smokes", "bob")], {"SMOKES": ("bob",)})
    givens = ({"smokes": {"ann": True}}, {("smokes", "ann"): True}, [("smokes", "ann", True)], {"smokes": {("ann",): True}})
    for target, given in zip(targets, givens):
        inf = pdbq.infer(smokers, target, given=given, method="EXACT")
        assert inf["smokes"].keys == [("bob",)]
        assert inf["smokes"].prob()[0] == pytest.approx(expected, abs=1e-9)
    two = pdbq.infer(smokers, {"smokes": ["bob", "cat"]}, method="EXACT")["smokes"]
    assert two.keys == [("bob",), ("cat",)]
    with pytest.raises(CatalogError, match="smokes"):
        pdbq.infer(smokers, {"smoke": "bob"})


def test_event_probability_exact_matches_enumeration(smokers) -> None:
    a = pdbq.probability(smokers, "smokes('ann') AND NOT cancer('ann')", method="EXACT")
    assert a.p == pytest.approx(_brute(lambda s, c: s["ann"] and not c["ann"]), abs=1e-9) and a.stderr == 0.0
    b = pdbq.probability(smokers, "smokes('ann') OR smokes('cat')", given={"cancer": {"bob": True}}, method="EXACT")
    assert b.p == pytest.approx(_brute(lambda s, c: s["ann"] or s["cat"], lambda s, c: c["bob"]), abs=1e-9)
    table = pdbq.joint(smokers, [("smokes", "ann"), ("cancer", "ann")], method="EXACT").to_pylist()
    assert len(table) == 4 and sum(r["p"] for r in table) == pytest.approx(1.0)
    for r in table:
        want = _brute(lambda s, c, r=r: s["ann"] == r["smokes('ann')"] and c["ann"] == r["cancer('ann')"])
        assert r["p"] == pytest.approx(want, abs=1e-9)


def test_event_probability_by_sampling_within_its_standard_error(smokers) -> None:
    exact = _brute(lambda s, c: s["ann"] and s["cat"])
    got = pdbq.probability(smokers, "smokes('ann') AND smokes('cat')", method="GIBBS",
                           options={"seed": 5, "steps": 40000})
    assert 0 < got.stderr < 0.01
    assert abs(got.p - exact) < 4 * got.stderr  # both directions: too far off either way fails
    # a plainly wrong event must not pass the same tolerance
    assert abs(_brute(lambda s, c: s["ann"] or s["cat"]) - got.p) > 4 * got.stderr


def test_event_errors_are_clear(smokers) -> None:
    with pytest.raises(CatalogError, match="smokes"):
        pdbq.probability(smokers, "smoke('ann')")
    with pytest.raises(InferenceError, match="ANNEAL"):
        pdbq.probability(smokers, "smokes('ann')", method="ANNEAL")
    with pytest.raises(PdbqError, match="variable"):
        pdbq.probability(smokers, "1 = 1")


# ------------------------------------------------------------------------------ item 8: ProbLog/MLN


def test_probabilistic_facts_and_the_mln_arrow(smokers) -> None:
    db = smokers
    db.execute("CREATE TABLE rates AS SELECT * FROM (VALUES ('ann', 0.2), ('bob', 0.9)) t(name, rate); "
               "CREATE VARIABLE drinks(name TEXT) DOMAIN BOOLEAN FROM (SELECT name FROM rates); "
               "CREATE RULE drink_prior AS rate::drinks(p) :- rates(p, rate);")
    rows = dict(db.execute("SELECT d.name, PROB(d) FROM drinks d USING EXACT").fetchall())
    assert rows == pytest.approx({"ann": 0.2, "bob": 0.9}, abs=1e-12)  # a lone prior is its probability
    rule = db.catalog.rules()["causes"]
    assert rule.function.name == "IMPLY_MLN" and [a.relation for a in rule.body] == ["smokes"]
    assert rule.head.atoms[0].relation == "cancer"
    with pytest.raises(ParseError, match="strictly between 0 and 1"):
        db.execute("CREATE RULE bad AS 1.5::drinks(p) :- rates(p, _)")


# ------------------------------------------------------------------------------ item 9: UAI statements

TINY_UAI = "MARKOV\n2\n2 3\n2\n1 0\n2 0 1\n2 1.0 3.0\n6 1 2 3 4 5 6\n"


def test_import_and_export_uai_from_sql(tmp_path: Path) -> None:
    src, out = tmp_path / "tiny.uai", tmp_path / "back.uai"
    src.write_text(TINY_UAI)
    with pdbq.connect() as db:
        db.execute(f"IMPORT UAI '{src}' AS tiny")
        got = dict(db.execute("SELECT v.id, PROB(v = 1) FROM tiny v WHERE v.id = 0 USING EXACT").fetchall())
        # P(x0 = 1) ∝ 3 · (4 + 5 + 6) against 1 · (1 + 2 + 3)
        assert got[0] == pytest.approx(45 / 51, abs=1e-12)
        db.execute(f"EXPORT UAI tiny TO '{out}'")
        assert pdbq.io.read_uai_graph(out).cardinality.tolist() == [2, 3]
        with pytest.raises(ParseError, match="IMPORT UAI 'file.uai' AS name"):
            db.execute("IMPORT UAI tiny")
        with pytest.raises(PdbqError, match="cannot read"):
            db.execute(f"IMPORT UAI '{tmp_path / 'missing.uai'}' AS other")
        assert "other" not in db.catalog.variables()
