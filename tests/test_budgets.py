"""Issue 12, items 1, 2 and 5: budgets that hold, one chain still diagnosed, same seed same answer.

Every answer is right within its error, carries a warning, or is NULL/an error: a time limit
bounds the whole run (burn-in included), a target without enough updates is NULL with a warning
(never 0.0), a frozen single chain is "not mixing" (never R-hat 1), and the sample sequence is a
function of the seed (the clock only decides where a run stops).
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

import pdbq
from pdbq.answers.engine import answer
from pdbq.errors import TimeLimitError
from pdbq.graph.builder import GraphBuilder, csr_from_edges
from pdbq.graph.layout import NO_TABLE, FactorGraph, validate
from pdbq.inference.mcmc.config import GibbsConfig
from pdbq.inference.mcmc.gibbs import run_gibbs
from pdbq.language.nodes import FactorFunction as F
from pdbq.language.nodes import Method
from pdbq.planning.options import QueryOptions


def chain_graph(n: int, link: float = 0.3, prior: float = 0.05) -> FactorGraph:
    """x0 - x1 - ... - x(n-1): EQUAL(x_i, x_i+1) weight ``link``, ISTRUE(x_i) weight ``prior``."""
    pairs = np.stack([np.arange(n - 1), np.arange(1, n)], 1)
    n_pair = n - 1
    nf = n_pair + n
    weights = np.concatenate([np.full(n_pair, link), np.full(n, prior)])
    function = np.concatenate([np.full(n_pair, F.EQUAL, np.int8), np.full(n, F.ISTRUE, np.int8)])
    factor_offsets = np.zeros(nf + 1, dtype=np.int64)
    np.cumsum(np.concatenate([np.full(n_pair, 2), np.full(n, 1)]), out=factor_offsets[1:])
    factor_vars = np.concatenate([pairs.ravel(), np.arange(n)]).astype(np.int32)
    group = np.full(nf, -1, dtype=np.int32)
    var_offsets, var_factors = csr_from_edges(factor_offsets, factor_vars, group, n)
    return validate(FactorGraph(
        cardinality=np.full(n, 2, np.int32), evidence=np.full(n, -1, np.int32), var_offsets=var_offsets,
        var_factors=var_factors, function=function, weight=np.arange(nf, dtype=np.int32), group=group,
        factor_offsets=factor_offsets, factor_vars=factor_vars,
        factor_literals=np.concatenate([np.full(2 * n_pair, -1), np.full(n, 1)]).astype(np.int32),
        table_offset=np.full(nf, NO_TABLE, np.int64), tables=np.zeros(0), weights=weights,
        learnable=np.zeros(nf, dtype=bool), semantics=np.zeros(0, np.int8), group_weight=np.zeros(0, np.int32),
    ))


def chain_marginal(n: int, i: int, link: float, prior: float) -> float:
    """Exact P(x_i = 1) on `chain_graph` by forward-backward (energies ±w)."""
    psi = np.exp(np.array([[link, -link], [-link, link]]))
    phi = np.exp(np.array([-prior, prior]))
    fwd = [phi / phi.sum()]
    for _ in range(1, n):
        f = (fwd[-1] @ psi) * phi
        fwd.append(f / f.sum())
    bwd = [np.ones(2)]
    for _ in range(1, n):
        b = psi @ (phi * bwd[0])
        bwd.insert(0, b / b.sum())
    p = fwd[i] * bwd[i]
    return float(p[1] / p.sum())


@pytest.fixture(scope="module", autouse=True)
def _warm_kernels():
    """Load the compiled kernels once, so the time-limit tests time the run, not the JIT cache."""
    run_gibbs(chain_graph(5), [0], GibbsConfig(steps=2000, chains=2, threads=2, seed=0))
    run_gibbs(chain_graph(5), [0], GibbsConfig(time_limit=0.05, chains=1, seed=0))


# ---------------------------------------------------------------------------------------------
# item 1: time_limit bounds the whole run; too few updates -> NULL + warning


def test_time_limit_bounds_burn_in_of_a_huge_step_cap():
    # before: burn-in was steps/10 = 10^8 updates, run before the clock was ever looked at
    g = chain_graph(200_000)
    limit = 1.5
    # the kernels' one-time compilation (not counted against time_limit) happens here, not below
    answer(chain_graph(50), np.array([25]), Method.GIBBS, QueryOptions(sweeps=10, chains=2, threads=1, seed=3))
    t = time.perf_counter()
    ans = answer(g, np.array([100_000]), Method.GIBBS,
                 QueryOptions(sweeps=5000, time_limit=limit, chains=2, threads=1, seed=3))
    took = time.perf_counter() - t
    assert took < limit * 1.1 + 1.0, took
    assert 0 < ans.burn_in < ans.steps  # burn-in is a share of what ran, not a fixed count


def test_time_limit_counts_from_the_query_start():
    g = chain_graph(5_000)
    limit = 1.5
    started = time.perf_counter() - 0.5  # planning already took 0.5 s of the budget
    ans = answer(g, np.array([0, 2_500]), Method.GIBBS, QueryOptions(time_limit=limit, tolerance=1e-9, seed=1),
                 started=started)
    assert time.perf_counter() - started < limit * 1.1 + 1.0
    assert ans.steps > 0


def test_no_time_left_gives_nan_and_a_warning_never_zero():
    g = chain_graph(1000)
    ans = answer(g, np.array([0, 500]), Method.GIBBS, QueryOptions(time_limit=0.5, seed=1),
                 started=time.perf_counter() - 10.0)
    assert np.isnan(ans.result.marginals).all()
    assert any("NULL" in w for w in ans.warnings), ans.warnings
    assert any("time_limit" in w for w in ans.warnings), ans.warnings


def test_one_batch_is_not_an_estimate():
    # a target updated, but all its updates in one batch: no error estimate, so no estimate
    g = chain_graph(3)
    r = run_gibbs(g, [0, 1, 2], GibbsConfig(steps=1, burn_in=0, chains=1, seed=0))
    assert r.steps == 1
    assert np.isnan(r.marginals).all() and np.isnan(r.stderr).all()
    assert any("too few updates" in w and "NULL" in w for w in r.warnings), r.warnings


def test_sql_time_limit_bounds_the_query_and_explain_shows_burn_in(movies_model):
    db = movies_model
    db.execute("SELECT PROB(m) AS p FROM is_popular m USING GIBBS WITH (steps = 1000)")  # first query: imports
    limit = 2.0
    t = time.perf_counter()
    r = db.execute("SELECT PROB(m) AS p FROM is_popular m USING GIBBS WITH (steps = 100000000, time_limit = 2, "
                   "tolerance = 0.000001, seed = 2)")
    assert time.perf_counter() - t < limit * 1.1 + 1.0
    assert r.diagnostics["steps"] > 0 and r.diagnostics["burn_in"] > 0
    rows = dict(db.execute("EXPLAIN SELECT PROB(m) FROM is_popular m USING GIBBS WITH (time_limit = 3)").fetchall())
    assert "25%" in rows["burn-in"] and "time_limit 3 s" in rows["run length"]
    rows = dict(db.execute("EXPLAIN SELECT PROB(m) FROM is_popular m USING GIBBS WITH (steps = 5000)").fetchall())
    assert rows["burn-in"].startswith("500 updates")
    rows = dict(db.execute("EXPLAIN SELECT PROB(m) FROM is_popular m USING EXACT").fetchall())
    assert "burn-in" not in rows


def test_sql_answers_null_when_the_budget_is_gone(movies_model):
    try:
        r = movies_model.execute(
            "SELECT m.movie, PROB(m) AS p, STDERR(m) AS se, MAP(m) AS v FROM is_popular m "
            "USING GIBBS WITH (time_limit = 0.000001, seed = 1)"
        )
    except TimeLimitError as e:
        # on a busy machine the budget can run out while the query is still being planned: then
        # nothing is answered, and the error says so (never a number)
        assert "time_limit 1e-06 s ran out" in str(e) and "nothing was answered" in str(e), str(e)
        return
    rows = r.fetchall()
    assert rows and all(p is None and se is None and v is None for _, p, se, v in rows), rows
    assert any("NULL" in w for w in r.diagnostics["warnings"])


# ---------------------------------------------------------------------------------------------
# item 2: one chain is diagnosed


def _two_coupled(weight: float):
    """x == y with a strong EQUAL (free both, symmetric): truth P(x) = 0.5."""
    b = GraphBuilder()
    x, y = b.add_variable(), b.add_variable()
    b.add_factor(F.EQUAL, [x, y], weight=b.add_weight(weight))
    return b.build(), x, y


def test_frozen_single_chain_is_not_mixing():
    g, x, y = _two_coupled(25.0)  # from the all-zero start the pair practically never flips
    r = run_gibbs(g, [x, y], GibbsConfig(steps=20_000, chains=1, seed=4))
    assert abs(r.marginals[0, 1] - 0.5) > 0.4  # frozen: the estimate is far off ...
    assert np.isinf(r.rhat).all()  # ... and that is "not mixing", not "exact"
    assert r.ess.max() == 0.0
    assert any("not converged" in w and "never moved" in w for w in r.warnings), r.warnings


def test_single_chain_split_rhat_catches_slow_drift_and_passes_a_mixing_chain():
    # both directions: a weakly coupled pair mixes, one chain, no warning, covers the truth
    g, x, y = _two_coupled(0.3)
    r = run_gibbs(g, [x, y], GibbsConfig(steps=200_000, chains=1, seed=5))
    assert not r.warnings, r.warnings
    assert np.all(r.rhat < 1.1) and np.all(r.ess > 100)
    z = np.abs(r.marginals[:, 1] - 0.5) / r.stderr[:, 1]
    assert np.all(z < 4), z
    # a long chain of strong links started at all-0 with a prior towards 1 drifts: one chain sees it
    g = chain_graph(400, link=1.5, prior=0.2)
    r = run_gibbs(g, [0, 200, 399], GibbsConfig(steps=8000, burn_in=0, chains=1, seed=6))
    assert np.any(r.rhat > 1.1), r.rhat
    assert any("R-hat" in w for w in r.warnings)


def test_constant_conditional_is_exact_with_one_chain():
    b = GraphBuilder()
    x = b.add_variable()
    b.add_factor(F.ISTRUE, [x], weight=b.add_weight(1.0))
    r = run_gibbs(b.build(), [x], GibbsConfig(steps=5000, chains=1, seed=0))
    assert r.rhat[0] == 1.0 and not r.warnings
    assert abs(r.marginals[0, 1] - 1 / (1 + math.exp(-2.0))) < 1e-12


@pytest.mark.parametrize("given, exact", [("v('b') = TRUE", True), ("v('c') = TRUE", False)])
def test_a_head_group_of_observed_voters_is_exact(given: str, exact: bool):
    # Up's votes come from a and b: with both observed its conditional is fixed (standard error
    # exactly 0, not the sampler's resolution floor); with b free it is sampled
    with pdbq.connect() as db:
        db.execute("""
            CREATE TABLE votes AS SELECT * FROM (VALUES ('a', 'Up'), ('b', 'Up'), ('c', 'Heat')) t(p, m);
            CREATE VARIABLE v(p TEXT) DOMAIN BOOLEAN FROM (SELECT DISTINCT p FROM votes) EVIDENCE (SELECT 'a', TRUE);
            CREATE VARIABLE pop(m TEXT) DOMAIN BOOLEAN FROM (SELECT DISTINCT m FROM votes);
            CREATE RULE vote WEIGHT 0.9 SEMANTICS RATIO AS pop(^m) :- votes(p, m), v(p);
            CREATE RULE prior WEIGHT -0.4 AS v(p) :- votes(p, m);
        """)
        se, = db.execute(f"SELECT STDERR(x) FROM pop x WHERE x.m = 'Up' GIVEN {given} "
                         "USING QAM WITH (tolerance = 0.02, seed = 3)").fetchone()
        assert (se == 0.0) == exact, se


def test_sql_one_chain_frozen_answer_warns():
    with pdbq.connect() as db:
        db.execute("CREATE TABLE pts AS SELECT * FROM range(2) r(i)")
        db.execute("CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM pts)")
        db.execute("CREATE RULE tie WEIGHT 25 FUNCTION EQUAL AS x(a) = x(b) :- pts(a), pts(b), a < b")
        r = db.execute("SELECT PROB(v) FROM x v USING GIBBS WITH (steps = 20000, chains = 1, seed = 4)")
        assert any("not converged" in w for w in r.diagnostics["warnings"]), r.diagnostics["warnings"]
        assert r.diagnostics["rhat_max"] == math.inf


# ---------------------------------------------------------------------------------------------
# item 5: same seed, same answer


def test_tolerance_stop_is_reproducible():
    g = chain_graph(2000)
    cfg = GibbsConfig(tolerance=0.02, time_limit=60.0, chains=2, threads=2, seed=11)
    a = run_gibbs(g, [0, 1000, 1999], cfg)
    b = run_gibbs(g, [0, 1000, 1999], GibbsConfig(tolerance=0.02, time_limit=60.0, chains=2, threads=1, seed=11))
    assert a.steps == b.steps and a.burn_in == b.burn_in
    np.testing.assert_array_equal(a.marginals, b.marginals)
    np.testing.assert_array_equal(a.stderr, b.stderr)
    c = run_gibbs(g, [0, 1000, 1999], GibbsConfig(tolerance=0.02, time_limit=60.0, chains=2, seed=12))
    assert not np.array_equal(a.marginals, c.marginals)  # the seed matters


def test_the_budget_only_decides_where_the_run_stops():
    # two runs with the same seed and different step caps: the shorter run's trace is a prefix of
    # the longer one's (same rounds, same batches, same estimates at every common point)
    n = 20_000  # one round is one sweep here
    g = chain_graph(n)
    long = run_gibbs(g, [5, 1500], GibbsConfig(steps=60 * n, tolerance=1e-9, chains=2, seed=8))
    short = run_gibbs(g, [5, 1500], GibbsConfig(steps=37 * n, tolerance=1e-9, chains=2, seed=8))
    common, i_long, i_short = np.intersect1d(long.trace.steps, short.trace.steps, return_indices=True)
    assert common.size >= 10
    np.testing.assert_array_equal(long.trace.estimates[i_long], short.trace.estimates[i_short])
    # and a time-limited run is one of these prefixes too (its step count is a whole number of rounds)
    timed = run_gibbs(g, [5, 1500], GibbsConfig(time_limit=0.3, tolerance=1e-9, chains=2, seed=8))
    assert (timed.steps + timed.burn_in) % n == 0
    again = run_gibbs(g, [5, 1500], GibbsConfig(steps=timed.steps + timed.burn_in, time_limit=600.0, tolerance=1e-9,
                                                chains=2, seed=8))
    assert again.steps == timed.steps
    np.testing.assert_array_equal(again.marginals, timed.marginals)


def test_sql_same_seed_same_answer_under_the_default_budget(movies_model):
    q = "SELECT m.movie, PROB(m) AS p FROM is_popular m USING GIBBS WITH (seed = 9)"
    a = movies_model.execute(q)
    b = movies_model.execute(q)
    assert sorted(a.fetchall()) == sorted(b.fetchall())
    assert a.diagnostics["steps"] == b.diagnostics["steps"]


def test_exact_marginal_of_the_chain_helper():
    # the helper the statistical tests above lean on, against enumeration on a short chain
    import itertools

    n, w, h = 5, 0.7, 0.2
    tot = np.zeros(2)
    for bits in itertools.product((0, 1), repeat=n):
        e = sum(w * (1 if bits[i] == bits[i + 1] else -1) for i in range(n - 1)) + sum(h * (1 if b else -1) for b in bits)
        tot[bits[2]] += math.exp(e)
    assert abs(chain_marginal(n, 2, w, h) - tot[1] / tot.sum()) < 1e-12


# ---------------------------------------------------------------------------------------------
# item 4: the reported standard errors are calibrated (95% intervals cover)


def chain_marginals(n: int, link: float, prior: float) -> np.ndarray:
    """Exact P(x_i = 1) for every i of `chain_graph` in one forward-backward pass."""
    psi = np.exp(np.array([[link, -link], [-link, link]]))
    phi = np.exp(np.array([-prior, prior]))
    fwd, bwd = np.empty((n, 2)), np.empty((n, 2))
    f = phi / phi.sum()
    fwd[0] = f
    for i in range(1, n):
        f = (f @ psi) * phi
        fwd[i] = f = f / f.sum()
    b = np.ones(2)
    bwd[n - 1] = b
    for i in range(n - 2, -1, -1):
        b = psi @ (phi * b)
        bwd[i] = b = b / b.sum()
    p = fwd * bwd
    return p[:, 1] / p.sum(axis=1)


def test_intervals_cover_the_exact_marginals_both_ways():
    # 3 seeds x 400 variables of a mixing chain. The z-scores of neighbours are correlated, so
    # about 100 of the 1,200 are independent: coverage then has a standard error of ~2.5% and
    # mean z² (1 when the stderr is right) one of ~0.15; the bounds are ~2 of those away.
    # A stderr half the truth gives mean z² ≈ 4 and ~67% coverage; twice the truth gives
    # ≈ 0.25 and ~100%: both fail.
    n, link, prior = 400, 0.4, 0.1
    g = chain_graph(n, link, prior)
    exact = chain_marginals(n, link, prior)
    z = []
    for seed in range(3):
        r = run_gibbs(g, np.arange(n), GibbsConfig(steps=200 * n, chains=4, seed=seed))
        assert not r.warnings, r.warnings
        z.append(np.abs(r.marginals[:, 1] - exact) / r.stderr[:, 1])
    z = np.concatenate(z)
    assert (z <= 1.96).mean() >= 0.89, (z <= 1.96).mean()
    assert 0.55 <= (z**2).mean() <= 1.6, (z**2).mean()
    assert abs(chain_marginals(5, 0.7, 0.2)[2] - chain_marginal(5, 2, 0.7, 0.2)) < 1e-12
