"""EXPLAIN <probabilistic query>: rows (property, value)."""

from __future__ import annotations

import pytest

import pdbq

MODEL = """
CREATE TABLE nodes AS SELECT * FROM range(8) r(i);
CREATE TABLE edges AS SELECT i AS a, i + 1 AS b FROM range(7) r(i);
CREATE TABLE obs AS SELECT * FROM (VALUES (5, TRUE)) t(i, v);
CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM nodes) EVIDENCE (SELECT i, v FROM obs);
CREATE RULE link WEIGHT 1.5 FUNCTION EQUAL AS x(a) = x(b) :- edges(a, b);
"""


def test_explain_rows():
    with pdbq.connect() as db:
        db.execute(MODEL)
        r = db.execute("EXPLAIN SELECT PROB(v) FROM x v WHERE v.i = 2 GIVEN x(0) = FALSE")
        assert r.columns == ["property", "value"]
        rows = dict(r.fetchall())
        assert rows["query variables |x_q|"] == "1"
        assert rows["evidence variables |x_e|"].startswith("2 (stored 1, GIVEN 1")
        assert rows["latent variables |x_l|"] == "3"  # x(1), x(3), x(4): x(0) and x(5) are evidence
        assert rows["pruned variables (never grounded or sampled)"] == "2 of 8"
        assert rows["method"] == "AUTO picks EXACT"
        assert "induced width 1" in rows["AUTO decision"]
        # an exact answer samples nothing: no selection, influence or mixing rows
        assert not [k for k in rows if k.startswith(("selection", "influence", "mixing", "hierarchy", "run length"))]
        assert r.diagnostics["method"] == "EXPLAIN"
        rows = dict(db.execute("EXPLAIN SELECT PROB(v) FROM x v WHERE v.i = 2 GIVEN x(0) = FALSE USING QAM").fetchall())
        # influence: the neighbours of x(2) come first, each named by relation and key
        assert rows["influence #1"].split(":")[0] in ("x(1)", "x(3)")
        assert rows["influence #3"].startswith("x(4)")
        share = float(rows["selection share of x_q"].split()[0])
        assert 0.25 < share < 1.0  # more than uniform's 1/4
        assert "hierarchy width" in rows and "max factor weight" in rows and "mixing bound" in " ".join(rows)


def test_explain_method_and_evidence_query():
    with pdbq.connect() as db:
        db.execute(MODEL)
        rows = dict(db.execute("EXPLAIN SELECT PROB(v) FROM x v WHERE v.i = 5 USING GIBBS").fetchall())
        assert rows["method"].startswith("EVIDENCE")
        rows = dict(db.execute("EXPLAIN SELECT PROB(v) FROM x v WHERE v.i = 1 USING GIBBS").fetchall())
        assert rows["method"] == "USING GIBBS" and rows["selection"].startswith("uniform")
        assert rows["selection share of x_q"].startswith("0.2000")  # 1 of 5 sites


@pytest.mark.parametrize("weight, steps", [(8.0, None), (8.0, 1000), (0.05, 10**15)])
def test_explain_says_when_the_mixing_bound_is_vacuous(weight, steps):
    """The worst-case mixing bound grows with the weights exponentially: above every update the
    run can make (its steps, or its time limit at a rate no kernel reaches) it is called vacuous,
    pointing to R-hat and the standard errors; below, it is shown plainly."""
    from pdbq.analysis import analyze_graph  # noqa: F401 - the analysis must be available

    with pdbq.connect() as db:
        db.execute(f"""
            CREATE TABLE t AS SELECT range AS i FROM range(17);
            CREATE TABLE e AS SELECT i, i + 1 AS j FROM t WHERE i < 16;
            CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t);
            CREATE RULE same WEIGHT {weight} FUNCTION EQUAL AS x(i) = x(j) :- e(i, j);""")
        opts = "WITH (seed = 1" + (f", steps = {steps})" if steps else ")")
        rows = dict(db.execute(f"EXPLAIN SELECT PROB(v) FROM x v WHERE v.i = 0 USING GIBBS {opts}").fetchall())
        text = rows["mixing bound (Gibbs steps, upper bound)"]
        bound = float(text.split()[0]) if not text.startswith("n/a") else float("inf")
        from pdbq.answers.engine import DEFAULT_TIME_LIMIT, UPDATES_PER_SECOND_CEILING

        horizon = (steps + steps // 10) if steps else DEFAULT_TIME_LIMIT * UPDATES_PER_SECOND_CEILING
        assert ("vacuous" in text) == (bound > horizon), (text, horizon)
        if "vacuous" in text:
            assert "R-hat" in text
