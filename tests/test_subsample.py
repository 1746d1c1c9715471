"""Monte Carlo MCMC estimators (seed 000): unbiasedness, sequential stopping, fpc, chain identity."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import NAMES_CLUSTER_SQL

from pdbq.coref.layout import pair_graph
from pdbq.errors import OptionError
from pdbq.inference.coreference.resolve import CorefConfig, resolve_map
from pdbq.inference.coreference.entity_moves import new_scratch, new_state, partition_score, run_moves, state_from_labels
from pdbq.inference.mcmc.rng import chain_states
from pdbq.inference.coreference.subsample import (
    SubsampleConfig,
    estimate_delta,
    sequential_sum,
    subsample_seeds,
    subsample_state,
)

DRAWS = 20_000


def _factors(n=40, seed=0):
    r = np.random.default_rng(seed)
    score = r.normal(0.3, 1.0, n)
    score[-1] = 25.0  # one dominant factor: an estimator that misses it is visibly biased
    signs = np.where(r.random(n) < 0.7, 1.0, -1.0)
    return score, np.arange(n, dtype=np.int64), signs


def _z_of_mean(estimates, exact):
    est = np.asarray(estimates)
    return (est.mean() - exact) / (est.std(ddof=1) / math.sqrt(est.size))


def _uniform_draws(rate, biased=False):
    score, edges, signs = _factors()
    n = edges.size
    exact = float(np.sum(signs * score))
    st = subsample_state(SubsampleConfig("uniform", rate=rate), np.uint64(12345))
    out = np.empty(DRAWS)
    used = set()
    for t in range(DRAWS):
        if biased:
            # off-by-one: never draws the last factor, but scales as if it could
            e = edges[edges != n - 1]
            est, u = estimate_delta(score, e.copy(), signs[e].copy(), n - 1, st, np.uint64(1), 1.0, 0.0)
            est = est * n / (n - 1)
        else:
            est, u = estimate_delta(score, edges, signs, n, st, np.uint64(1), 1.0, 0.0)
        used.add(int(u))
        out[t] = est
    return out, exact, used


@pytest.mark.parametrize("rate", [0.1, 0.3])
def test_uniform_scaled_sum_is_unbiased(rate):
    est, exact, used = _uniform_draws(rate)
    assert used == {math.ceil(rate * 40)}
    assert abs(_z_of_mean(est, exact)) < 4.0
    assert est.std() > 0.5  # it really samples


def test_biased_variant_fails_the_same_test():
    est, exact, _ = _uniform_draws(0.1, biased=True)
    assert abs(_z_of_mean(est, exact)) > 4.0


def test_uniform_samples_without_replacement_and_at_least_one():
    score, edges, signs = _factors(n=7)
    st = subsample_state(SubsampleConfig("uniform", rate=0.01), np.uint64(3))
    est, used = estimate_delta(score, edges, signs, 7, st, np.uint64(1), 1.0, 0.0)
    assert used == 1  # the paper's implicit minimum of one factor
    assert est == pytest.approx(7 * signs[0] * score[edges[0]])
    assert sorted(edges.tolist()) == list(range(7))  # a permutation: no factor lost or repeated
    st = subsample_state(SubsampleConfig("uniform", rate=0.5), np.uint64(3))
    est, used = estimate_delta(score, edges, signs, 7, st, np.uint64(1), 1.0, 0.0)
    assert used == 4
    assert len(set(edges[:4].tolist())) == 4
    assert est == pytest.approx(7 / 4 * float(np.sum(signs[:4] * score[edges[:4]])))


def _sequential(values, interval, decide, mu0, seed=9):
    k = values.size
    rng, est, c = sequential_sum(values.copy(), np.arange(k, dtype=np.int64), np.ones(k), k,
                                 np.uint64(seed), interval, decide, mu0)
    return est, c


def test_confidence_stops_early_when_separated_late_when_close():
    r = np.random.default_rng(1)
    n = 200
    far = 2.0 + r.normal(0, 1.0, n)   # mean 2 against a threshold of 0: decided after a few
    close = 0.05 + r.normal(0, 1.0, n)  # mean 0.05: the interval keeps straddling 0
    stops_far = np.array([_sequential(far, 0.0, True, 0.0, seed=s)[1] for s in range(1, 101)])
    stops_close = np.array([_sequential(close, 0.0, True, 0.0, seed=s)[1] for s in range(1, 101)])
    # a two-factor variance is noisy, so even close calls sometimes stop early (the paper's z
    # interval): compare the mean stopping times and how often sampling runs long
    assert stops_far.mean() <= 4 and np.mean(stops_far >= 20) == 0
    assert stops_close.mean() >= 40 and np.mean(stops_close >= 20) >= 0.4
    # the paper's width rule (eq. 9): low-variance factors stop early, high-variance late
    calm = 1.0 + r.normal(0, 0.05, n)
    wild = 1.0 + r.normal(0, 3.0, n)
    assert _sequential(calm, 0.5, False, 0.0)[1] <= 3
    assert _sequential(wild, 0.5, False, 0.0)[1] >= 100


def test_fpc_makes_k_equal_n_exact():
    r = np.random.default_rng(2)
    v = r.normal(0, 5.0, 50)
    est, c = _sequential(v, 1e-300, False, 0.0)
    assert c == 50
    assert est == pytest.approx(float(v.sum()), rel=1e-12, abs=1e-12)
    # without the fpc the interval at k = n would still be about 2·1.96·5/√50 ≈ 2.8 wide
    est, c = _sequential(v, 2.0, False, 0.0)
    assert c < 50


def test_decide_threshold_matches_the_accept_test():
    """With decide, the estimator reads the uniform the MH test will draw: a proposal whose
    factors are all equal (so any sample is exact) must stop at two factors."""
    score = np.full(30, 0.4)
    st = subsample_state(SubsampleConfig("confidence", interval=0.0, decide=True), np.uint64(5))
    est, used = estimate_delta(score, np.arange(30, dtype=np.int64), np.ones(30), 30, st, np.uint64(77), 1.0, 0.0)
    assert used == 2 and est == pytest.approx(12.0)


def test_config_is_validated():
    for bad in (
        SubsampleConfig("sometimes"),
        SubsampleConfig("uniform", rate=0.0),
        SubsampleConfig("uniform", rate=1.5),
        SubsampleConfig("confidence"),
        SubsampleConfig("confidence", interval=-1.0),
        SubsampleConfig("uniform", rate=0.5, interval=2.0),
        SubsampleConfig("exact", rate=0.5),
    ):
        with pytest.raises(OptionError):
            bad.check()
    with pytest.raises(OptionError):
        CorefConfig(subsample=0.1).check()
    assert SubsampleConfig("uniform", rate=1.0).check().is_exact


def _planted(seed=0, groups=8, size=12):
    r = np.random.default_rng(seed)
    n = groups * size
    truth = np.repeat(np.arange(groups), size)
    a, b = np.triu_indices(n, 1)
    keep = r.random(a.size) < 0.5
    a, b = a[keep], b[keep]
    w = np.where(truth[a] == truth[b], r.normal(1.0, 0.8, a.size), r.normal(-1.0, 0.8, a.size))
    return pair_graph(n, a, b, w), truth


def _chain(g, sub, steps=30_000, temp=1.0, seed=4):
    n = g.n_mentions
    st = new_state(n)
    sc = new_scratch(g, sub)
    rng = chain_states(seed, 1)
    counters = np.zeros(4, np.int64)
    log = np.zeros(1)
    run_moves(g, st, sc, rng, steps, temp, 0.1, 0.1, counters, log)
    return st.label.copy(), counters, log[0]


def test_rate_one_chain_is_identical_to_full_scoring():
    g, _ = _planted()
    seed = subsample_seeds(0, 1)[0]
    lab0, cnt0, log0 = _chain(g, None)
    lab1, cnt1, log1 = _chain(g, subsample_state(SubsampleConfig("uniform", rate=1.0), seed))
    assert np.array_equal(lab0, lab1) and np.array_equal(cnt0, cnt1) and log0 == log1
    assert log0 == pytest.approx(partition_score(g, lab0))
    lab2, cnt2, _ = _chain(g, subsample_state(SubsampleConfig("uniform", rate=0.3), seed))
    assert not np.array_equal(lab0, lab2)  # the comparison can fail
    assert cnt2[0] < cnt0[0]
    m0 = resolve_map(g, CorefConfig(sweeps=10, seed=3))
    m1 = resolve_map(g, CorefConfig(sweeps=10, seed=3, subsample=SubsampleConfig("uniform", rate=1.0)))
    assert np.array_equal(m0.labels, m1.labels) and m0.factor_evaluations == m1.factor_evaluations


def _redundant(seed=1, groups=5, size=30):
    """Planted clusters whose pair scores are redundant (N(±1, 0.3)): the paper's regime."""
    r = np.random.default_rng(seed)
    n = groups * size
    truth = np.repeat(np.arange(groups), size)
    a, b = np.triu_indices(n, 1)
    keep = r.random(a.size) < 0.5
    a, b = a[keep], b[keep]
    w = np.where(truth[a] == truth[b], r.normal(1.0, 0.3, a.size), r.normal(-1.0, 0.3, a.size))
    return pair_graph(n, a, b, w), truth


@pytest.mark.parametrize(
    "sub",
    [SubsampleConfig("uniform", rate=0.2), SubsampleConfig("confidence", interval=0.0, decide=True),
     SubsampleConfig("confidence", interval=1.0)],
)
def test_subsampled_chain_holds_the_planted_optimum_with_fewer_evaluations(sub):
    g, truth = _redundant()
    best = partition_score(g, truth)
    runs = {}
    for name, s in (("full", None), ("sub", subsample_state(sub, np.uint64(11)))):
        st = state_from_labels(truth)
        sc = new_scratch(g, s)
        counters = np.zeros(4, np.int64)
        log = np.zeros(1)
        run_moves(g, st, sc, chain_states(6, 1), 20 * g.n_mentions, 0.1, 0.1, 0.0, counters, log)
        runs[name] = (partition_score(g, st.label), counters[0])
    assert runs["full"][0] == pytest.approx(best)
    assert runs["sub"][0] >= best - 3.0  # at most a stray mention or two, not a collapse
    assert runs["sub"][1] < 0.6 * runs["full"][1]


def test_subsampled_map_on_a_small_model():
    g = pair_graph(4, np.array([0, 2, 0]), np.array([1, 3, 2]), np.array([3.0, 3.0, -3.0]))
    for sub in (SubsampleConfig("uniform", rate=0.5), SubsampleConfig("confidence", interval=0.5)):
        res = resolve_map(g, CorefConfig(sweeps=20, seed=1, subsample=sub))
        assert res.labels.tolist() == [0, 0, 2, 2]


def test_query_options_map_to_configs():
    f = SubsampleConfig.from_options
    assert f() == SubsampleConfig()
    assert f(0.1) == SubsampleConfig("uniform", rate=0.1)
    assert f(1).is_exact
    assert f("confidence", interval=20) == SubsampleConfig("confidence", interval=20)
    assert f(interval=2) == SubsampleConfig("confidence", interval=2)
    assert f("confidence", decide=True) == SubsampleConfig("confidence", interval=0.0, decide=True)
    assert f("EXACT") == SubsampleConfig()
    for bad in (dict(subsample=0.0), dict(subsample=2), dict(subsample="often"), dict(subsample=True),
                dict(subsample=0.5, interval=3), dict(subsample="confidence"), dict(subsample="uniform")):
        with pytest.raises(OptionError):
            f(**bad)


def test_subsampled_pair_posteriors_carry_a_warning():
    from pdbq.inference.coreference.resolve import sample_pairs

    g = pair_graph(4, np.array([0, 2, 0]), np.array([1, 3, 2]), np.array([3.0, 3.0, -3.0]))
    qa, qb = np.array([0, 0]), np.array([1, 2])
    exact = sample_pairs(g, qa, qb, CorefConfig(sweeps=20, burn_in=2, seed=1))
    sub = sample_pairs(g, qa, qb, CorefConfig(sweeps=20, burn_in=2, seed=1, subsample=SubsampleConfig("uniform", rate=0.5)))
    assert not any("subsample" in w for w in exact.warnings)
    assert any("approximately" in w for w in sub.warnings)


def test_sql_cluster_query_takes_the_subsample_options():
    import pdbq
    from pdbq.errors import OptionError as _OptionError

    db = pdbq.connect()
    db.execute(NAMES_CLUSTER_SQL)
    exact = db.execute("SELECT e.id, MAP(e) AS c FROM e ORDER BY e.id")
    for opts, label in [("subsample = 0.5", "p=0.5"), ("subsample = 'confidence', interval = 2", "i=2")]:
        r = db.execute(f"SELECT e.id, MAP(e) AS c FROM e ORDER BY e.id USING ANNEAL WITH ({opts})")
        assert r.diagnostics["e.subsample"] == label
        assert r.fetchall() == exact.fetchall() == [(1, 1), (2, 1), (3, 3), (4, 3), (5, 5)]
        assert r.diagnostics["e.factor_evaluations"] < exact.diagnostics["e.factor_evaluations"]
    assert exact.diagnostics["e.subsample"] == "exact"
    with pytest.raises(_OptionError):
        db.execute("SELECT MAP(e) FROM e USING ANNEAL WITH (subsample = 1.5)")
