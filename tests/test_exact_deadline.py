"""Exact elimination stops at a deadline and honours a cancel poll: checked between cliques in
the numpy path and between short runs of cliques in the compiled one. Deadlines here are already
past or driven by a fake clock, so no assertion depends on the machine's speed."""

from __future__ import annotations

import time

import numpy as np
import pytest

from pdbq.answers.engine import answer
from pdbq.errors import PdbqError, TimeLimitError
from pdbq.graph.builder import GraphBuilder
from pdbq.graph.cache import GraphCache, Memo
from pdbq.inference.exact import elimination, stopping
from pdbq.inference.exact.elimination import exact_map, exact_marginals
from pdbq.language.nodes import FactorFunction as F
from pdbq.language.nodes import Method
from pdbq.planning.options import QueryOptions

N = 400  # cliques of the chain below


def _chain(n: int = N):
    rng = np.random.default_rng(5)
    b = GraphBuilder()
    xs = b.add_variables(n)
    for a, c in zip(xs, xs[1:]):
        b.add_factor(F.EQUAL, [a, c], weight=b.add_weight(float(rng.normal())))
    for x in xs[::7]:
        b.add_factor(F.ISTRUE, [x], weight=b.add_weight(float(rng.normal())))
    return b.build()


@pytest.fixture(params=["compiled", "numpy"])
def path(request, monkeypatch):
    """Runs a test on the compiled (small cliques) and on the numpy (large cliques) path."""
    if request.param == "numpy":
        monkeypatch.setattr(elimination, "SMALL_TABLE", 0)
    else:
        monkeypatch.setattr(stopping, "CHUNK_ENTRIES", 16)  # many runs of cliques on this small chain
    return request.param


class _FakeClock:
    """Each reading one second later than the last, from 0."""

    def __init__(self):
        self.t = -1.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


@pytest.mark.parametrize("variables", [None, [3]])
def test_answers_unchanged_with_a_deadline_and_a_poll(path, variables):
    g = _chain()
    polls = []
    plain = exact_marginals(g, variables=variables)
    timed = exact_marginals(g, variables=variables, deadline=time.perf_counter() + 3600, poll=lambda: polls.append(1))
    np.testing.assert_allclose(timed.marginals, plain.marginals, rtol=0, atol=1e-12)
    assert timed.log_z == pytest.approx(plain.log_z, abs=1e-9)
    assert polls  # called at least once
    assert np.array_equal(exact_map(g, deadline=time.perf_counter() + 3600).values, exact_map(g).values)


def test_a_past_deadline_stops_marginals_and_map(path):
    g = _chain()
    past = time.perf_counter() - 1.0
    with pytest.raises(TimeLimitError, match="exact marginals"):
        exact_marginals(g, deadline=past)
    with pytest.raises(TimeLimitError, match="exact MAP"):
        exact_map(g, deadline=past)


def test_the_deadline_is_checked_between_cliques(path, monkeypatch):
    # a deadline at the fake clock's 5th reading: the elimination stops after a few steps, neither at
    # the start (checked only once) nor at the end (never checked)
    monkeypatch.setattr(stopping, "_now", _FakeClock())
    with pytest.raises(TimeLimitError) as e:
        exact_marginals(_chain(), deadline=4.5)
    done = int(str(e.value).split("upward pass: ")[1].split(" of")[0])
    assert 0 < done < N and f"of {N:,} cliques" in str(e.value)
    # the downward pass is checked too: a deadline at the last few checks of a whole run
    clock = _FakeClock()
    monkeypatch.setattr(stopping, "_now", clock)
    exact_marginals(_chain(), deadline=1e18)
    checks = int(clock.t) + 1
    assert checks > 4
    monkeypatch.setattr(stopping, "_now", _FakeClock())
    with pytest.raises(TimeLimitError, match="downward pass"):
        exact_marginals(_chain(), deadline=checks - 1.75)


def test_a_clique_that_cannot_end_in_time_is_not_started(monkeypatch):
    # 1 s per clique of 1,000 entries so far: a clique of 10^7 entries would take hours
    monkeypatch.setattr(stopping, "_now", _FakeClock())
    clock = stopping.EliminationClock(deadline=2000.0)
    for i in range(1100):
        clock.check(i, 2000, work=1000)
    clock.check(1100, 2000, work=1000)  # one more like them ends in time
    with pytest.raises(TimeLimitError, match="would end about"):
        clock.check(1101, 2000, work=10**7)


class _Stop(PdbqError):
    pass


def test_a_cancel_poll_ends_the_elimination(path):
    calls = []

    def poll():
        calls.append(1)
        raise _Stop("cancelled")

    with pytest.raises(_Stop):
        exact_marginals(_chain(), poll=poll)
    with pytest.raises(_Stop):
        exact_map(_chain(), poll=poll)
    assert len(calls) == 2


def test_the_query_error_says_what_to_do_and_keeps_nothing(monkeypatch):
    g = _chain()
    memo = Memo(GraphCache(), {})
    # the elimination reads a clock past its deadline
    monkeypatch.setattr(stopping, "_now", lambda: 1e18)
    with pytest.raises(TimeLimitError) as e:
        answer(g, np.array([3]), Method.EXACT, QueryOptions(time_limit=60.0), memo=memo, need_map=True)
    msg = str(e.value)
    assert "time_limit 60 s ran out during exact elimination" in msg and "nothing was answered" in msg
    assert "USING QAM" in msg
    assert not [k for k in memo.derived if str(k[0]).startswith("exact")]
    monkeypatch.setattr(stopping, "_now", time.perf_counter)
    r = answer(g, np.array([3]), Method.EXACT, QueryOptions(time_limit=60.0), memo=memo)
    assert r.method == "EXACT"
    np.testing.assert_allclose(r.result.marginals[0], exact_marginals(g).marginals[3], atol=1e-12)


# time_limit 10 s: on a busy machine 2 s left the sampling after the stopped exact try no kept
# sample (0.12 s of CPU in 1.6 s); the default tolerance ends it early on a quiet one
@pytest.mark.parametrize("options", [QueryOptions(time_limit=10.0), QueryOptions(exact_budget=3.0)])
def test_auto_samples_the_rest_when_exact_runs_over_and_keeps_nothing(options, monkeypatch):
    """AUTO's exact try stopped at its deadline (a clock past it): the rest of the budget samples,
    and the stopped elimination leaves nothing in the cache (the next query runs it again)."""
    g = _chain()
    memo = Memo(GraphCache(), {})
    monkeypatch.setattr(stopping, "_now", lambda: 1e18)
    r = answer(g, np.array([3]), Method.AUTO, options, memo=memo, need_map=True)
    assert r.method == "QAM" and r.hedge["exact_stopped"] and "ran over its share" in r.reason
    assert r.steps > 0 and r.result.map_values is not None
    assert not [k for k in memo.derived if str(k[0]).startswith("exact")]
    monkeypatch.setattr(stopping, "_now", time.perf_counter)
    r = answer(g, np.array([3]), Method.AUTO, options, memo=memo)
    assert r.method == "EXACT"
    np.testing.assert_allclose(r.result.marginals[0], exact_marginals(g).marginals[3], atol=1e-12)


def test_using_exact_has_only_the_written_time_limit(monkeypatch):
    g = _chain()
    monkeypatch.setattr(stopping, "_now", lambda: 1e18)
    r = answer(g, np.array([3]), Method.EXACT, QueryOptions())  # no time_limit written: no deadline
    assert r.method == "EXACT"


def test_an_expected_speed_refuses_a_first_clique_that_cannot_end_in_time(monkeypatch):
    """Before any clique was timed, the speed the caller expects (seconds per table entry)
    predicts the first large clique; one that would end past the deadline is not started."""
    g = _chain(40)
    monkeypatch.setattr(elimination, "SMALL_TABLE", 0)  # every clique on the checked numpy path
    token = stopping.PRIOR_SECONDS_PER_ENTRY.set(1e6)  # a machine that needs 1e6 s per entry
    try:
        with pytest.raises(TimeLimitError, match="expected on this machine now"):
            exact_marginals(g, deadline=time.perf_counter() + 3600.0)
    finally:
        stopping.PRIOR_SECONDS_PER_ENTRY.reset(token)
    r = exact_marginals(g, deadline=time.perf_counter() + 3600.0)  # no expectation: runs to the end
    np.testing.assert_allclose(r.marginals, exact_marginals(g).marginals, atol=1e-12)
