"""Issue 12, item 1: a query's time_limit bounds planning too (grounding, graph building).

A DuckDB statement still running at the deadline is interrupted (`PlanningDeadline`), the step's
transaction rolled back; the query then answers NULL with a warning naming the step (or, when not
even the vid maps could be made current, raises `TimeLimitError`). Nothing the user stored is
lost and the next query works and is right.
"""

from __future__ import annotations

import math
import time

import duckdb
import numpy as np
import pytest

import pdbq
from pdbq.catalog.store import transaction
from pdbq.errors import TimeLimitError
from pdbq.grounding.deadline import PlanningDeadline

def chain_marginal(n: int, i: int, link: float, prior: float) -> float:
    """Exact P(x_i = 1) on the chain below (energies ±w), by forward-backward."""
    psi = np.exp(np.array([[link, -link], [-link, link]]))
    phi = np.exp(np.array([-prior, prior]))
    f = phi / phi.sum()
    for _ in range(i):
        f = (f @ psi) * phi
        f /= f.sum()
    b = np.ones(2)
    for _ in range(n - 1 - i):
        b = psi @ (phi * b)
        b /= b.sum()
    p = f * b
    return float(p[1] / p.sum())


# ~10 s of DuckDB work (no memory): far longer than any deadline below
LONG = "SELECT sum(hash(range)) FROM range(3000000000)"


def test_a_long_statement_is_interrupted_and_its_step_rolled_back():
    con = duckdb.connect()
    con.execute("CREATE TABLE kept AS SELECT 1 AS a")
    t = time.perf_counter()
    with pytest.raises(TimeLimitError) as info:
        with PlanningDeadline(con, started=time.perf_counter(), limit=0.2) as guard:
            guard.enter_stage("grounding rule r")
            with transaction(con):
                con.execute("INSERT INTO kept VALUES (2)")
                con.execute("CREATE TABLE scratch AS SELECT 1 AS b")
                con.execute(LONG)
    assert time.perf_counter() - t < 5.0  # generous: the statement alone runs ~10 s
    assert info.value.stage == "grounding rule r" and "raise time_limit" in str(info.value)
    assert isinstance(info.value, pdbq.InferenceError)
    assert con.execute("SELECT a FROM kept").fetchall() == [(1,)]  # the step's writes are gone
    assert not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'scratch'").fetchone()[0]
    con.execute("INSERT INTO kept VALUES (3)")  # no aborted transaction is left open
    assert con.execute("SELECT count(*) FROM kept").fetchone()[0] == 2


def test_a_users_open_transaction_is_never_interrupted():
    con = duckdb.connect()
    con.execute("CREATE TABLE kept AS SELECT 1 AS a")
    con.execute("BEGIN TRANSACTION")
    con.execute("INSERT INTO kept VALUES (2)")
    with PlanningDeadline(con, started=time.perf_counter(), limit=0.0) as guard:
        con.execute("SELECT sum(hash(range)) FROM range(5000000)").fetchall()
        time.sleep(0.05)
    assert not guard.fired and guard.expired()
    con.execute("COMMIT")
    assert con.execute("SELECT count(*) FROM kept").fetchone()[0] == 2


def test_nothing_happens_before_the_deadline():
    con = duckdb.connect()
    with PlanningDeadline(con, started=time.perf_counter(), limit=60.0) as guard:
        assert con.execute("SELECT 42").fetchone()[0] == 42
    assert not guard.fired


CHAIN = """
CREATE TABLE nodes AS SELECT i FROM range({n}) r(i);
CREATE TABLE links AS SELECT i AS a, i + 1 AS b FROM range({n} - 1) r(i);
CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM nodes);
CREATE RULE link WEIGHT 0.3 FUNCTION EQUAL AS x(a) = x(b) :- links(a, b);
CREATE RULE prior WEIGHT 0.05 FUNCTION ISTRUE AS x(i) :- nodes(i);
CREATE TABLE few AS SELECT i FROM range(3) r(i);
CREATE VARIABLE y(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM few);
CREATE RULE few_prior WEIGHT 0.5 FUNCTION ISTRUE AS y(i) :- few(i);
"""


def test_first_query_grounding_past_the_limit_answers_null_then_the_next_query_is_right():
    n = 20_000  # grounding the middle variable's region takes well over the 0.05 s limit here
    with pdbq.connect() as db:
        db.execute(CHAIN.format(n=n))
        db.execute("CREATE TABLE mine AS SELECT 7 AS v")
        # a query on y syncs every vid map (x's too): the x query below only fingerprints before
        # it grounds, so the deadline falls after the vid maps are current (an answer, not an error)
        db.execute("SELECT PROB(v) FROM y AS v USING EXACT").fetchall()
        q = f"SELECT v.i, PROB(v) AS p, STDERR(v) AS se FROM x AS v WHERE v.i = {n // 2} USING GIBBS WITH ({{}})"
        t = time.perf_counter()
        r = db.execute(q.format("time_limit = 0.05, sweeps = 1e9, seed = 1"))
        wall = time.perf_counter() - t
        rows = r.fetchall()
        assert rows == [(n // 2, None, None)], rows
        d = r.diagnostics
        assert d["steps"] == 0 and d["graph_factors"] == 0
        # (the grounding step on any machine; under extreme load the deadline may already pass
        # while the query variables are selected: the answer is the same NULL)
        w = [x for x in d["warnings"] if "time_limit 0.05 s ran out while" in x]
        assert w and "every estimate is NULL" in w[0] and "raise time_limit" in w[0], d["warnings"]
        assert "time_limit ran out" in d["method_reason"]
        assert wall < 10.0  # generous (shared machine); the limit is 0.05 s
        assert db.execute("SELECT v FROM mine").fetchall() == [(7,)]
        # the Python API obeys the limit the same way: NULL (NaN) answers and the warning
        inf = pdbq.infer(db, {"x": [(n // 2 + 1,)]}, options={"time_limit": 0.05, "sweeps": 1e9, "seed": 1})
        assert np.isnan(inf["x"].prob()).all()
        assert any("time_limit 0.05 s ran out while" in x for x in inf.diagnostics["warnings"])
        # the store is consistent: the next query grounds and answers right (exact 4-sigma band)
        r = db.execute(q.format("sweeps = 400, chains = 4, seed = 3"))
        (_, p, se), = r.fetchall()
        exact = chain_marginal(n, n // 2, 0.3, 0.05)
        assert se is not None and se < 0.05 and abs(p - exact) < 4 * se + 1e-3, (p, se, exact)


def test_a_vid_map_sync_past_the_limit_raises_time_limit_error_and_changes_nothing():
    with pdbq.connect() as db:
        db.execute("CREATE TABLE mine AS SELECT 7 AS v")
        db.execute("CREATE VIEW src AS SELECT i FROM range(3) r(i)")
        db.execute("CREATE VARIABLE z(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM src)")
        db.execute("CREATE RULE zp WEIGHT 0.5 FUNCTION ISTRUE AS z(i) :- src(i)")
        assert len(db.execute("SELECT PROB(v) FROM z AS v USING EXACT").fetchall()) == 3
        # the data change makes the next query rebuild z's vid map: ~10 s of DuckDB work
        db.execute(f"CREATE OR REPLACE VIEW src AS SELECT i FROM range(4) r(i) WHERE ({LONG}) IS NOT NULL")
        t = time.perf_counter()
        with pytest.raises(TimeLimitError) as info:
            db.execute("SELECT PROB(v) FROM z AS v USING GIBBS WITH (time_limit = 0.05)")
        assert time.perf_counter() - t < 5.0
        assert "vid maps" in info.value.stage and "nothing was answered" in str(info.value)
        assert db.execute("SELECT v FROM mine").fetchall() == [(7,)]
        db.execute("CREATE OR REPLACE VIEW src AS SELECT i FROM range(4) r(i)")
        rows = db.execute("SELECT v.i, PROB(v) FROM z AS v USING EXACT").fetchall()
        assert [i for i, _ in rows] == [0, 1, 2, 3]
        assert all(abs(p - 1 / (1 + math.exp(-1.0))) < 1e-9 for _, p in rows)
