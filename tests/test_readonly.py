"""A database opened read-only answers probabilistic queries, EXPLAIN, infer() and the UDFs, with
its factor store in an in-memory scratch database; the file is never written and a user's own
CREATE still fails (issue 12, item 9)."""

from __future__ import annotations

import hashlib
import math

import duckdb
import pytest

import pdbq
from pdbq.udf import bridge as udf
from pdbq.api import infer
from pdbq.shell import main
from pdbq.errors import PdbqError

P = 1 / (1 + math.exp(-2.0))  # ISTRUE with weight 1


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(params=["fresh", "queried"])
def model_file(tmp_path, request):
    """A model file; "queried": a query ran on it while writable, so it holds a factor store."""
    path = tmp_path / "model.duckdb"
    with pdbq.connect(path) as db:
        db.execute("CREATE TABLE t AS SELECT * FROM range(3) r(i)")
        db.execute("CREATE VARIABLE v(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t)")
        db.execute("CREATE RULE r WEIGHT 1.0 FUNCTION ISTRUE AS v(i) :- t(i)")
        db.execute("CREATE RULE tied WEIGHT ?(i) AS v(i) :- t(i)")
        if request.param == "queried":
            db.execute("SELECT PROB(x) FROM v x USING EXACT").fetchall()
            # a learned value the read-only session must keep (weights are copied, not rebuilt)
            db.duckdb.execute("UPDATE pdbq_fs_weights SET value = 0.5 WHERE rule = 'tied' AND wid = 0")
    return path, request.param


def test_queries_on_a_read_only_file(model_file):
    path, kind = model_file
    before = _digest(path)
    with pdbq.connect(path, read_only=True) as db:
        rows = db.execute("SELECT x.i, PROB(x) AS p FROM v x ORDER BY x.i USING EXACT").fetchall()
        expect = [P] * 3
        if kind == "queried":  # tie value {"i": 0} got the learned 0.5
            expect[0] = 1 / (1 + math.exp(-3.0))
        assert [p for _, p in rows] == pytest.approx(expect, abs=1e-12)
        gibbs = db.execute("SELECT PROB(x), STDERR(x) FROM v x WHERE x.i = 2 GIVEN v(0) = FALSE "
                           "USING GIBBS WITH (seed = 1, steps = 3000)").fetchall()
        (p, se), = gibbs
        assert abs(p - P) <= 1e-9 + 4 * se
        assert dict(db.execute("EXPLAIN SELECT PROB(x) FROM v x").fetchall())
        assert infer(db, {"v": [1]}, method="EXACT")["v"].prob() == pytest.approx([P], abs=1e-12)
        udf.register(db.duckdb, database=db)
        got = db.duckdb.sql("SELECT pdbq_prob('v', i) FROM t WHERE i = 2").fetchall()
        assert got[0][0] == pytest.approx(P, abs=1e-12)
        with pytest.raises(duckdb.Error, match="read-only"):
            db.execute("CREATE TABLE mine AS SELECT 1")
        with pytest.raises(PdbqError, match="read-only"):
            db.execute("CREATE RULE more WEIGHT 1 AS v(i) :- t(i)")
        # the scratch database is pdbq's only while it answers: the file is the default again
        assert db.duckdb.execute("SELECT current_database()").fetchall() == [("model",)]
    assert _digest(path) == before


def test_shell_readonly_answers(model_file, capsys):
    path, _ = model_file
    before = _digest(path)
    assert main([str(path), "--readonly", "-c", "SELECT x.i, PROB(x) AS p FROM v x WHERE x.i = 1 USING EXACT;"]) == 0
    assert f"{P:.4f}"[:5] in capsys.readouterr().out
    assert _digest(path) == before
