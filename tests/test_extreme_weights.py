"""Extreme weights (issue 12, item 6): exact inference max-shifts its log-tables so a huge weight
does not swallow a small one; +inf table entries are hard "must" constraints; hard constraints
outweigh any soft weight in the samplers too; NaN is refused."""

from __future__ import annotations

import math

import pytest

import pdbq
from pdbq.errors import GroundingError
from pdbq.io.uai import read_uai

TRUTH = 1 / (1 + math.exp(-1.4))  # v(1) given v(0) = TRUE through EQUAL 0.7: 0.8022


def _chain(*rules: str) -> pdbq.Database:
    db = pdbq.connect()
    db.execute("CREATE TABLE t AS SELECT * FROM range(2) r(i); CREATE TABLE z AS SELECT 0::BIGINT AS i; "
               "CREATE TABLE p AS SELECT 0::BIGINT AS a, 1::BIGINT AS b")
    db.execute("CREATE VARIABLE v(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t)")
    db.execute("CREATE RULE eq WEIGHT 0.7 FUNCTION EQUAL AS v(a) = v(b) :- p(a, b)")
    for r in rules:
        db.execute(r)
    return db


@pytest.mark.parametrize("weight", ["1e15", "1e16", "1e300", "1e308"])
@pytest.mark.parametrize("method", ["EXACT", "AUTO", "GIBBS"])
def test_huge_weight_keeps_the_small_one(weight, method):
    with _chain(f"CREATE RULE big WEIGHT {weight} FUNCTION ISTRUE AS v(i) :- z(i)") as db:
        (p0, s0), (p1, s1) = db.execute(
            f"SELECT PROB(x), STDERR(x) FROM v x ORDER BY x.i USING {method}{'' if method == 'EXACT' else ' WITH (seed = 2, steps = 4000)'}"
        ).fetchall()
        assert p0 == pytest.approx(1.0, abs=1e-12)
        assert abs(p1 - TRUTH) <= 1e-9 + 4 * s1, (p1, s1)


def test_two_largest_weights_add_up_without_nan():
    with _chain(*(f"CREATE RULE big{k} WEIGHT 1e308 FUNCTION ISTRUE AS v(i) :- z(i)" for k in range(2))) as db:
        (p0,), (p1,) = db.execute("SELECT PROB(x) FROM v x ORDER BY x.i USING EXACT").fetchall()
        assert p0 == 1.0 and p1 == pytest.approx(TRUTH, abs=1e-12)


def test_opposed_weights_beyond_a_double_cancel_exactly():
    # 1e308 and -1e308 on the same factor cancel: hard weights are rescaled before any table is
    # built (docs/factors.md, "Hard weights"), so their difference no longer overflows a double
    with _chain("CREATE RULE up WEIGHT 1e308 FUNCTION ISTRUE AS v(i) :- z(i)",
                "CREATE RULE down WEIGHT -1e308 FUNCTION ISTRUE AS v(i) :- z(i)") as db:
        r = db.execute("SELECT PROB(x) FROM v x ORDER BY x.i USING EXACT")
        assert [p for (p,) in r.fetchall()] == pytest.approx([0.5, 0.5], abs=1e-12)
        assert r.diagnostics["warnings"] == []


def _uai(tmp_path, text: str) -> pdbq.Database:
    path = tmp_path / "m.uai"
    path.write_text(text)
    db = pdbq.connect()
    read_uai(db, path, "m")
    return db


@pytest.mark.parametrize("method", ["EXACT", "GIBBS", "QAM"])
def test_infinite_entry_is_a_must(tmp_path, method):
    # x0 unary [1, inf]: x0 = 1 for sure; then x1 ~ [1, 2] through the pair table
    with _uai(tmp_path, "MARKOV 2  2 2  2  1 0  2 0 1  2 1 inf  4 2 1 1 2") as db:
        (p0, _), (p1, s1) = db.execute(
            f"SELECT PROB(x = 1), STDERR(x) FROM m x ORDER BY x.id USING {method}{'' if method == 'EXACT' else ' WITH (seed = 1, steps = 4000)'}"
        ).fetchall()
        assert p0 == 1.0
        assert abs(p1 - 2 / 3) <= 1e-9 + 4 * s1


@pytest.mark.parametrize("method", ["EXACT", "GIBBS", "QAM"])
def test_hard_zero_outweighs_any_soft_weight(tmp_path, method):
    # x0 = 1 impossible (a 0 in the table); a soft rule pushes x0 = 1 with weight 1e7, more than
    # the samplers' old fixed 1e6 stand-in for -inf
    with _uai(tmp_path, "MARKOV 2  2 2  2  1 0  2 0 1  2 1 0  4 2 1 1 2") as db:
        db.execute("CREATE TABLE z AS SELECT 0::BIGINT AS i")
        db.execute("CREATE RULE push WEIGHT 1e7 AS m(i) = 1 :- z(i)")
        (p0, _), (p1, s1) = db.execute(
            f"SELECT PROB(x = 1), STDERR(x) FROM m x ORDER BY x.id USING {method}{'' if method == 'EXACT' else ' WITH (seed = 1, steps = 4000)'}"
        ).fetchall()
        assert p0 == 0.0
        assert abs(p1 - 1 / 3) <= 1e-9 + 4 * s1


def test_nan_weight_is_refused():
    with _chain("CREATE RULE bad WEIGHT = CAST('nan' AS DOUBLE) FUNCTION ISTRUE AS v(i) :- z(i)") as db:
        with pytest.raises(GroundingError, match="rule 'bad'.*not finite"):
            db.execute("SELECT PROB(x) FROM v x USING EXACT")


def _four_chain(weight: str) -> pdbq.Database:
    db = pdbq.connect()
    db.execute("CREATE TABLE n AS SELECT * FROM range(4) r(i); "
               "CREATE TABLE e AS SELECT i AS a, i + 1 AS b FROM range(3) r(i)")
    db.execute("CREATE VARIABLE v(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM n)")
    db.execute(f"CREATE RULE eq WEIGHT 0.7 FUNCTION EQUAL AS v(a) = v(b) :- e(a, b); "
               f"CREATE RULE big WEIGHT {weight} FUNCTION ISTRUE AS v(i) :- n(i), i = 0")
    return db


@pytest.mark.parametrize("weight", ["0.5", "1e16", "1e20", "1e300"])
def test_anneal_map_resolves_small_weights_beside_huge_ones(weight):
    # ANNEAL once kept one running total per chain: beside 1e20 the 0.7 of an agreeing pair was
    # lost, its best-state bookkeeping froze at the first pass and it answered [T, F, F, F]
    with _four_chain(weight) as db:
        exact = db.execute("SELECT x.i, MAP(x) FROM v x ORDER BY x.i USING EXACT").fetchall()
        for seed in (1, 2, 3):
            got = db.execute(f"SELECT x.i, MAP(x) FROM v x ORDER BY x.i USING ANNEAL WITH (seed = {seed}, steps = 400, chains = 1)")
            assert got.fetchall() == exact == [(0, True), (1, True), (2, True), (3, True)]


def test_score_difference_is_exact_term_by_term():
    import numpy as np

    from pdbq.graph.builder import GraphBuilder
    from pdbq.inference.mcmc.anneal import best_chain, log_score, score_difference
    from pdbq.language.nodes import FactorFunction

    b = GraphBuilder()
    x, y = b.add_variables(2)
    b.add_factor(FactorFunction.ISTRUE, [x], weight=b.add_weight(1e300))
    b.add_factor(FactorFunction.EQUAL, [x, y], weight=b.add_weight(0.7))
    g = b.build()
    tt, tf = np.array([1, 1]), np.array([1, 0])
    assert log_score(g, tt) == log_score(g, tf)  # the totals tie ...
    assert score_difference(g, tt, tf) == pytest.approx(1.4)  # ... the difference (±0.7) does not
    assert best_chain(g, [tf, tt], np.array([log_score(g, tf), log_score(g, tt)])) == 1
