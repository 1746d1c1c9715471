"""AUTO's hedge between exact elimination and sampling (`pdbq.answers.hedge`) and the words of a
flagged answer (`pdbq.answers.trust`).

Load is simulated, never timed: the CPU-share probe and the calibration are replaced by fixed
values (a scaled cost model), and a stopped elimination by a clock past its deadline, so no
assertion depends on this machine's speed or on what else runs on it."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdbq.answers import hedge
from pdbq.answers.engine import answer, auto_decision
from pdbq.answers.hedge import Calibration, plan_exact
from pdbq.answers.trust import contention_warning, cross_check_warning, lead_warning, untrusted_checks
from pdbq.graph.builder import GraphBuilder
from pdbq.graph.cache import GraphCache, Memo
from pdbq.inference.exact import stopping
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.language.nodes import FactorFunction as F
from pdbq.language.nodes import Method
from pdbq.planning.options import QueryOptions


def _chain(n: int = 300, seed: int = 5):
    rng = np.random.default_rng(seed)
    b = GraphBuilder()
    xs = b.add_variables(n)
    for a, c in zip(xs, xs[1:]):
        b.add_factor(F.EQUAL, [a, c], weight=b.add_weight(float(rng.normal())))
    for x in xs[::7]:
        b.add_factor(F.ISTRUE, [x], weight=b.add_weight(float(rng.normal())))
    return b.build()


@pytest.fixture
def calibration(monkeypatch):
    """A fresh calibration for the test (the process-wide one is left as it was)."""
    cal = Calibration()
    monkeypatch.setattr(hedge, "CALIBRATION", cal)
    import pdbq.answers.engine as engine  # noqa: PLC0415

    monkeypatch.setattr(engine, "CALIBRATION", cal)
    return cal


@settings(max_examples=200, deadline=None)
@given(est=st.floats(1e-4, 100.0), factor=st.floats(0.1, 20.0), share=st.floats(0.02, 1.0),
       budget=st.floats(0.1, 60.0), spent=st.floats(0.0, 1.0))
def test_the_plan_never_gives_exact_more_than_its_share(est, factor, share, budget, spent):
    """Whatever the estimate, calibration, CPU share and time already spent: exact is tried only
    when predicted to end before the sampling reserve, its deadline leaves that reserve, and a
    smaller CPU share never turns exact on."""
    cal = Calibration()
    cal.record(1.0, factor)
    end = 1000.0 + budget
    now = 1000.0 + spent * budget
    p = _plan_at(est, now, end, budget, cal, share)
    reserve = hedge.SAMPLE_SHARE * budget
    assert p.deadline == pytest.approx(end - reserve)
    if p.run_exact:
        assert p.predicted <= p.deadline - now + 1e-9
    worse = _plan_at(est, now, end, budget, cal, share / 2)
    assert not (worse.run_exact and not p.run_exact)
    assert p.predicted >= est * cal.factor - 1e-12  # a share of a core never speeds the work up


def _plan_at(est, now, end, budget, cal, share):
    clock = iter([now] * 4)
    old_now, old_probe = hedge._now, hedge.probe_share
    hedge._now = lambda: next(clock, now)
    hedge.probe_share = lambda seconds=0.0: share
    try:
        return plan_exact(est, now, end, budget, cal)
    finally:
        hedge._now, hedge.probe_share = old_now, old_probe


def test_calibration_takes_the_median_and_a_stopped_run_only_raises_it():
    cal = Calibration()
    assert cal.factor == 1.0
    for r in (1.0, 3.0, 2.0):
        cal.record(1.0, r)
    assert cal.factor == 2.0
    cal.record(1.0, 0.5, finished=False)  # a stopped run used at least this: says nothing below
    assert cal.runs == 3
    cal.record(1.0, 10.0, finished=False)
    assert cal.runs == 4 and cal.factor == 2.5
    cal.record(0.001, 100.0)  # too small an estimate to say anything about the speed
    assert cal.runs == 4


@pytest.mark.parametrize("share, expect", [(1.0, "EXACT"), (0.002, "QAM")])
def test_auto_runs_exact_only_where_it_fits_the_cpu_it_gets(share, expect, monkeypatch, calibration):
    """A scaled cost model (the machine measured slower than the model: 20 s of CPU) and an
    injected CPU share: at a full core the elimination fits the time limit (45 s of the 60 s are
    exact's share); at 1/500 of a core it does not,
    and AUTO samples at once, saying why."""
    g = _chain()
    est = auto_decision(g, QueryOptions().max_table).estimated_seconds
    calibration.record(1.0, 20.0 / est)  # this "machine" does the elimination in 20 s of CPU
    monkeypatch.setattr(hedge, "probe_share", lambda seconds=0.0: share)
    r = answer(g, np.array([3]), Method.AUTO, QueryOptions(time_limit=60.0, tolerance=0.05), memo=None)
    assert r.method == expect
    assert not r.hedge["exact_stopped"]
    assert r.hedge["cpu_share_probe"] == share
    if expect == "QAM":
        assert "0% of a CPU core now (other programs are busy)" in r.reason and "so MCMC" in r.reason
        assert r.hedge["exact_seconds"] == 0.0
    else:
        np.testing.assert_allclose(r.result.marginals[0], exact_marginals(g).marginals[3], atol=1e-12)


def test_a_whole_exact_run_calibrates_and_a_kept_or_partial_one_does_not(monkeypatch, calibration):
    g = _chain(3000)
    memo = Memo(GraphCache(), {})
    monkeypatch.setattr(hedge, "_RECORD_ABOVE", 0.0)
    r = answer(g, np.arange(5), Method.AUTO, QueryOptions(time_limit=60.0), memo=memo)
    assert r.method == "EXACT" and calibration.runs == 0  # a few marginals: less work than the estimate's
    everything = np.arange(g.n_vars)
    r = answer(g, everything, Method.AUTO, QueryOptions(time_limit=60.0), memo=memo)
    assert r.method == "EXACT" and calibration.runs == 1
    r = answer(g, everything, Method.AUTO, QueryOptions(time_limit=60.0), memo=memo)
    assert r.method == "EXACT" and calibration.runs == 1 and r.hedge is None  # kept: no try, nothing measured


@pytest.mark.parametrize("seed", [1, 2])
def test_a_default_query_whose_exact_runs_over_answers_within_its_error_or_warned(seed, monkeypatch, calibration):
    """The elimination is stopped at its deadline (a clock past it); the sampled rest answers,
    and every answer is within its reported error or carries a warning."""
    g = _chain(60, seed=seed)
    monkeypatch.setattr(stopping, "_now", lambda: 1e18)
    q = np.arange(0, 60, 6)
    r = answer(g, q, Method.AUTO, QueryOptions(seed=seed), memo=None)
    assert r.method == "QAM" and r.hedge["exact_stopped"] and r.hedge["exact_tried"]
    assert calibration.runs == 0  # a run stopped at once says nothing above the current factor
    monkeypatch.setattr(stopping, "_now", time.perf_counter)
    exact = exact_marginals(g).marginals[q]
    off = np.abs(r.result.marginals - exact) > 5 * r.result.stderr + 1e-3
    assert not off.any() or r.warnings, f"seed {seed}: unwarned answer outside its error"
    assert r.sampling_seconds is not None and r.sampling_cpu_seconds is not None


def test_the_lead_warning_says_the_error_bars_are_unreliable():
    ws = ["not converged: 3 of 10 target(s) have split R-hat > 1.1 (worst inf for variable 4: a chain never moved it)",
          "jumps: 20 accepted mode jump(s) per chain in the kept samples (under 100): ..."]
    lead = lead_warning(ws)
    assert lead.startswith("error bars unreliable") and "R-hat" in lead and "switches between modes" in lead
    assert lead_warning(["tolerance 0.01 not reached: largest 95% half-width 0.02"]) is None
    assert untrusted_checks([]) == []


@given(share=st.floats(0.01, 1.0), threads=st.integers(1, 4), flagged=st.booleans())
def test_the_machine_is_named_busy_exactly_when_a_flagged_run_got_too_little_cpu(share, threads, flagged):
    ws = ["tolerance 0.01 not reached: largest 95% half-width 0.02 after 10 updates per chain"] if flagged else []
    wall = 5.0
    text = contention_warning(ws, 5.0, wall, share * wall * threads, threads)
    assert (text is not None) == (flagged and share < 0.75)
    if text is not None:
        assert "machine was busy" in text and f"{share:.0%}" in text


def test_the_note_on_a_hedged_answer_names_the_time_limit_that_gives_the_exact_one():
    plan = hedge.ExactPlan(False, 10.0, 44.0, 0.07, 1.0, "")
    text = hedge.HedgeRecord(plan).hint()
    assert "predicted at 44 s at the 7% of a CPU core" in text and "time_limit = 60" in text
    stopped = hedge.HedgeRecord(hedge.ExactPlan(True, 10.0, 2.0, None, 1.0, ""), 3.0, 1.0, True).hint()
    assert "ran over its share" in stopped and "time_limit = 9" in stopped


# ---------------------------------------------------------------- the cross-check


def _random_tree(rng, n: int):
    b = GraphBuilder()
    card = rng.integers(2, 4, size=n)
    xs = [b.add_variable(int(c)) for c in card]
    for i in range(1, n):
        j = int(rng.integers(i))
        t = rng.normal(scale=1.5, size=(card[min(i, j)], card[max(i, j)]))
        b.add_factor(F.TABLE, [xs[min(i, j)], xs[max(i, j)]], table=t.ravel())
    for i in range(n):
        if rng.random() < 0.3:
            b.set_evidence(xs[i], int(rng.integers(card[i])))
    return b.build()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(2, 12))
def test_belief_propagation_is_exact_on_trees(seed, n):
    """Differential: on a tree (random tables, random evidence) loopy BP equals elimination."""
    from pdbq.inference.exact.loopy_bp import loopy_marginals  # noqa: PLC0415

    g = _random_tree(np.random.default_rng(seed), n)
    r = loopy_marginals(g)
    assert r.converged, f"seed {seed}"
    ex = exact_marginals(g).marginals
    np.testing.assert_allclose(r.marginals, ex, atol=1e-5, err_msg=f"seed {seed}")


def _two_modes():
    """6 strongly tied variables; a field favours 0, so all-1 is a rare mode (exact P(x = 1) about 0.05)."""
    b = GraphBuilder()
    xs = b.add_variables(6)
    tie = b.add_weight(4.0)
    for a, c in zip(xs, xs[1:]):
        b.add_factor(F.EQUAL, [a, c], weight=tie)
    field = b.add_weight(-0.25)
    for x in xs:
        b.add_factor(F.ISTRUE, [x], weight=field)
    return b.build()


def test_a_mode_no_chain_visited_is_warned_and_the_right_answer_is_not():
    from pdbq.inference.exact.loopy_bp import loopy_marginals  # noqa: PLC0415

    g = _two_modes()
    q = np.arange(6)
    ex = exact_marginals(g).marginals[q]
    assert 0.02 < ex[0, 1] < 0.2  # the premise: a rare mode that matters
    bp = loopy_marginals(g)
    missed = np.column_stack([np.full(6, 0.9995), np.full(6, 0.0005)])  # chains that never left the 0 mode
    se = np.full_like(missed, 0.0002)
    text = cross_check_warning(q, missed, se, bp.marginals, 0.01)
    assert text is not None and "states no chain visited" in text
    assert lead_warning([text]).startswith("error bars unreliable")
    assert cross_check_warning(q, ex, np.full_like(ex, 0.003), bp.marginals, 0.01) is None


def test_the_engine_warns_a_sampled_answer_that_missed_a_mode(monkeypatch):
    """Chains forced to miss the rare mode (the sampler returns the 0-mode answer) are warned by
    the cross-check; switched off (the check returns nothing), the same answer is silent."""
    import pdbq.answers.engine as engine  # noqa: PLC0415
    from pdbq.inference.mcmc.gibbs import run_gibbs  # noqa: PLC0415

    g = _two_modes()
    q = np.arange(6)

    def stuck(graph, query, config, deadline=None, **kw):
        r = run_gibbs(graph, query, config, deadline=deadline, **kw)
        r.marginals[:, 0], r.marginals[:, 1] = 0.9995, 0.0005
        r.stderr[:] = 0.0002
        return dataclasses.replace(r, warnings=())

    monkeypatch.setattr(engine, "run_gibbs", stuck)
    monkeypatch.setattr(engine, "CROSS_CHECK_SHARE", 0.9)  # the check's share of the time: ample, even under load
    opts = QueryOptions(time_limit=2.0, tolerance=0.02, seed=1)
    r = answer(g, q, Method.GIBBS, opts, memo=Memo(GraphCache(), {}))
    assert any("cross-check" in w for w in r.warnings) and r.warnings[0].startswith("error bars unreliable")
    monkeypatch.setattr(engine, "cross_check_warning", lambda *a, **k: None)
    r = answer(g, q, Method.GIBBS, opts, memo=Memo(GraphCache(), {}))
    assert not r.warnings  # the detector off: the wrong answer would pass silently


def test_the_probe_measures_the_share_of_a_slow_clock(monkeypatch):
    """A fake machine where the thread gets a third of the wall time: the probe reads a third."""
    wall = [0.0]

    def now():
        wall[0] += 0.003
        return wall[0]

    monkeypatch.setattr(hedge, "_now", now)
    monkeypatch.setattr(hedge, "_cpu", lambda: wall[0] / 3.0)
    assert hedge.measure_share(0.04) == pytest.approx(1 / 3, rel=0.1)
    monkeypatch.setattr(hedge, "_cpu", lambda: 0.0)  # no CPU at all: the floor, after at most 4x the time
    assert hedge.measure_share(0.04) == hedge._MIN_SHARE and wall[0] < 1.0


@pytest.mark.parametrize("name", ["Alchemy_11", "CSP_12", "DBN_11", "Grids_12", "ObjectDetection_11", "Promedus_24",
                                  "Promedus_26", "Segmentation_11"])
def test_the_cross_check_is_quiet_about_exact_answers_on_real_networks(name):
    """Exact marginals given as the sampled answers (stderr 0.002) are never warned where belief
    propagation converges: BP collapsed onto one mode (DBN_11) is not a witness."""
    from conftest import UAI_DATA  # noqa: PLC0415

    from pdbq.inference.exact.loopy_bp import loopy_marginals  # noqa: PLC0415
    from pdbq.io.uai import read_mar, read_uai_graph  # noqa: PLC0415

    uai = UAI_DATA / f"{name}.uai"
    if not uai.exists():
        pytest.skip(f"{uai} not found")
    g = read_uai_graph(uai, uai.with_suffix(".uai.evid")).graph
    r = loopy_marginals(g)
    if not r.converged:
        return  # the engine does not use it
    ex = read_mar(uai.with_suffix(".uai.MAR"))
    est = np.zeros_like(r.marginals)
    for v, p in enumerate(ex):
        est[v, : len(p)] = p
    q = np.arange(g.n_vars)
    assert cross_check_warning(q, est, np.full_like(est, 0.002), r.marginals, 0.01) is None


# ---------------------------------------------------------------- through SQL


def _default_query(db):
    return db.execute("SELECT m.movie, PROB(m) AS p FROM is_popular m")


def test_a_default_query_on_a_starved_machine_samples_and_says_why(movies_model, monkeypatch, calibration):
    """The machine measured 1e6 times slower than the model and a probe reading 1% of a core:
    the default query samples at once, and the diagnostics report the CPU it got and why."""
    calibration.record(1.0, 1e6)
    monkeypatch.setattr(hedge, "probe_share", lambda seconds=0.0: 0.01)
    r = _default_query(movies_model)
    d = r.diagnostics
    assert d["method"] == "QAM" and "1% of a CPU core now" in d["method_reason"]
    assert d["hedge"]["exact_tried"] is False and d["hedge"]["cpu_share_probe"] == 0.01
    assert d["cpu_share"] is not None and d["cpu_share"] > 0
    assert d["sampling_seconds"] > 0 and d["effective_sampling_seconds"] is not None
    calibration.reset()  # the machine back to the cost model's speed, a full core
    monkeypatch.setattr(hedge, "probe_share", lambda seconds=0.0: 1.0)
    d = _default_query(movies_model).diagnostics
    assert d["method"] == "EXACT" and d["sampling_seconds"] is None


def test_a_default_query_whose_elimination_is_cut_still_answers(movies_model, monkeypatch, calibration):
    monkeypatch.setattr(stopping, "_now", lambda: 1e18)
    d = _default_query(movies_model).diagnostics
    assert d["method"] == "QAM" and d["hedge"]["exact_stopped"] and "ran over its share" in d["method_reason"]
