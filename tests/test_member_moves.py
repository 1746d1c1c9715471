"""Witness mention moves (pdbq.inference.coreference.member_moves): detailed balance against the exact
distribution over all partitions of <= 6 mentions (the checker of test_coref_moves), member
blocks kept consistent, p = 1 the identical chain, the subsampled estimate unbiased, and the
option through CorefConfig."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import njit
from test_coref_moves import (
    partition_code,
    COMPLETE5,
    SPARSE6,
    _exact,
    _freq_check,
    _partitions,
    _scores,
)

from pdbq.coref.layout import CorefInputError, PairGraph, pair_graph
from pdbq.coref.tokens import empty_token_model
from pdbq.errors import OptionError
from pdbq.inference.coreference.resolve import CorefConfig, resolve_map, sample_pairs
from pdbq.inference.coreference.entity_moves import (
    C_ACCEPTED,
    C_EVALS,
    _accept,
    _link,
    _pop_free,
    _unlink,
    check_state,
    new_scratch,
    new_state,
    partition_score,
    state_from_labels,
)
from pdbq.inference.coreference.member_moves import (
    _estimate,
    _mb_add,
    _mb_remove,
    check_members,
    check_sorted_rows,
    members_of,
    run_witness_moves,
)
from pdbq.inference.mcmc.rng import bounded, chain_states, next_state, uniform
from pdbq.inference.coreference.subsample import SubsampleConfig, subsample_state

TM0 = empty_token_model()  # no fields: the graph's stored pair scores


@njit(cache=True)
def _trace(g, tm, st, mb, sc, rng, thin, p_new, psm, counters, log, codes):
    n = st.label.shape[0]
    canon = np.empty(n, np.int64)
    for t in range(codes.shape[0]):
        run_witness_moves(g, tm, st, mb, sc, rng, thin, 1.0, p_new, psm, counters, log)
        codes[t] = partition_code(st.label, canon)


def _run(n, a, b, w, psm, samples, thin, seed=3, p_new=0.2, ratio_bug=False):
    g = pair_graph(n, np.array(a), np.array(b), np.array(w))
    st = new_state(n)
    mb = members_of(st)
    sc = new_scratch(g)
    rng = chain_states(seed, 1)
    counters = np.zeros(4, np.int64)
    log = np.zeros(1)
    codes = np.empty(samples, np.int64)
    _trace(g, TM0, st, mb, sc, rng, thin, p_new, psm, counters, log, codes)
    check_state(st)
    check_members(st, mb)
    assert log[0] == pytest.approx(partition_score(g, st.label), abs=1e-9)
    return codes, counters


@pytest.mark.parametrize(
    "n,pairs,psm",
    [(5, COMPLETE5, 0.0), (5, COMPLETE5, 0.3), (6, SPARSE6, 0.3)],
    ids=["complete5-witness", "complete5-witness-splitmerge", "sparse6-witness-splitmerge"],
)
def test_witness_moves_sample_the_exact_distribution(n, pairs, psm):
    # sparse6 without split/merge is reducible for mention moves of either proposal (a mention
    # whose entity-mates are all non-neighbours cannot leave; docs/mcmcmc.md), as in
    # test_coref_moves, so it is checked with split/merge steps only
    a, b, w = _scores(n, pairs, seed=11)
    index, p = _exact(n, a, b, w)
    codes, counters = _run(n, a, b, w, psm, samples=200_000, thin=5)
    assert counters[C_ACCEPTED] > 0 and counters[C_EVALS] > 0
    assert set(codes.tolist()) <= set(index)
    z, tv, tv_noise = _freq_check(codes, index, p)
    assert z < 5.0, f"max z {z:.2f}, total variation {tv:.4f}"
    assert tv < 2.0 * tv_noise, (tv, tv_noise)
    _, p_wrong = _exact(n, a, b, w, temp=1.4)
    z_wrong, _, _ = _freq_check(codes, index, p_wrong)
    assert z_wrong > 8.0


def _no_witness_run(n, a, b, w, samples, thin, seed=3):
    """The same chain with the witness factor of the ratio left out (ratio c_s/c_t-free but
    uncorrected): the checker must reject it, or it could not see a wrong witness ratio."""
    g = pair_graph(n, np.array(a), np.array(b), np.array(w))
    st = new_state(n)
    mb = members_of(st)
    sc = new_scratch(g)
    rng = chain_states(seed, 1)
    counters = np.zeros(4, np.int64)
    log = np.zeros(1)
    codes = np.empty(samples, np.int64)
    _broken_trace(g, st, mb, sc, rng, thin, 0.2, counters, log, codes)
    return codes


@njit
def _broken_move(g, st, mb, sc, rng, temp, p_new, counters, log_score):
    """witness_move with log q-ratio 0 (the proposal asymmetry ignored)."""
    n = st.label.shape[0]
    rng = next_state(rng)
    m = bounded(rng, n)
    s = st.label[m]
    lo = g.indptr[m]
    deg = g.indptr[m + 1] - lo
    pn = p_new if deg > 0 else 1.0
    rng = next_state(rng)
    to_new = uniform(rng) < pn
    t = -1
    if not to_new:
        rng = next_state(rng)
        t = st.label[g.nbr[lo + bounded(rng, deg)]]
        if t == s:
            return rng
    elif st.size[s] == 1:
        return rng
    ns = st.size[s] - 1
    nt = 0 if to_new else st.size[t]
    delta, _ = _estimate(g, TM0, st, mb, sc.sub, m, s, t, ns, ns + nt, rng, temp, 0.0)
    rng, ok = _accept(rng, delta, 0.0, temp, to_new)
    if ok:
        _mb_remove(st, mb, m)
        _unlink(st, m)
        if to_new:
            t = _pop_free(st)
        _mb_add(st, mb, m, t)
        _link(st, m, t)
        log_score[0] += delta
    return rng


@njit
def _broken_trace(g, st, mb, sc, rng_state, thin, p_new, counters, log, codes):
    n = st.label.shape[0]
    canon = np.empty(n, np.int64)
    rng = rng_state[0]
    for t in range(codes.shape[0]):
        for _ in range(thin):
            rng = _broken_move(g, st, mb, sc, rng, 1.0, p_new, counters, log)
        codes[t] = partition_code(st.label, canon)


def test_checker_rejects_a_witness_chain_without_its_proposal_ratio():
    n = 5
    a, b, w = _scores(n, COMPLETE5, seed=11)
    index, p = _exact(n, a, b, w)
    codes = _no_witness_run(n, a, b, w, samples=100_000, thin=5)
    z, _, _ = _freq_check(codes, index, p)
    assert z > 8.0


def test_member_blocks_stay_consistent_through_growth_and_compaction():
    r = np.random.default_rng(0)
    n = 300
    pairs = {(int(i), int(j)) for i, j in r.integers(0, n, (4000, 2)) if i != j}
    pairs = sorted({(min(p), max(p)) for p in pairs})
    a, b = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    g = pair_graph(n, a, b, r.normal(1.0, 2.0, a.size))
    st = new_state(n)
    mb = members_of(st)
    sc = new_scratch(g)
    rng = chain_states(1, 1)
    counters = np.zeros(4, np.int64)
    log = np.array([partition_score(g, st.label)])
    compactions = 0
    for k in range(60):
        top = mb.meta[0]
        run_witness_moves(g, TM0, st, mb, sc, rng, n, 0.3 if k < 40 else 2.0, 0.1, 0.2, counters, log)
        compactions += int(mb.meta[0] < top)
        check_state(st)
        check_members(st, mb)
        assert log[0] == pytest.approx(partition_score(g, st.label), abs=1e-6)
    assert compactions > 0 and counters[C_ACCEPTED] > 200
    # a large entity grows through the pool too
    st = state_from_labels(np.zeros(n, np.int64))
    mb = members_of(st)
    check_members(st, mb)


def _planted(seed, n_entities=40):
    r = np.random.default_rng(seed)
    sizes = r.integers(2, 12, n_entities)
    gold = np.repeat(np.arange(n_entities), sizes)
    n = gold.size
    a, b, w = [], [], []
    for i in range(n):
        for j in range(i + 1, n):
            same = gold[i] == gold[j]
            if same and r.random() < 0.8 or (not same and r.random() < 0.02):
                a.append(i)
                b.append(j)
                w.append(r.normal(2.0, 0.7) if same else r.normal(-2.0, 0.7))
    return pair_graph(n, np.array(a), np.array(b), np.array(w)), gold


def test_witness_p1_is_the_identical_chain_and_subsampling_changes_only_the_score():
    g, _ = _planted(2)
    base = CorefConfig(sweeps=15, chains=2, seed=4, p_split_merge=0.0, greedy_sweeps=0, proposal="witness")
    exact = resolve_map(g, base)
    one = resolve_map(g, CorefConfig(**{**base.__dict__, "subsample": SubsampleConfig("uniform", rate=1.0)}))
    assert np.array_equal(exact.labels, one.labels)
    assert (exact.factor_evaluations, exact.proposals, exact.accepted) == (one.factor_evaluations, one.proposals, one.accepted)
    sub = resolve_map(g, CorefConfig(**{**base.__dict__, "subsample": SubsampleConfig("confidence", interval=0.0, decide=True)}))
    assert sub.proposals == exact.proposals
    assert sub.factor_evaluations < 0.5 * exact.factor_evaluations


def test_witness_map_recovers_planted_clusters():
    g, gold = _planted(3)
    truth = partition_score(g, gold)
    res = resolve_map(g, CorefConfig(sweeps=100, chains=2, seed=1, temperature=0.5, p_split_merge=0.1, proposal="witness"))
    assert res.log_score == pytest.approx(partition_score(g, res.labels))
    assert res.log_score >= truth - 1e-6, (res.log_score, truth)
    # a broken score (signs flipped) cannot get there
    bad = resolve_map(g._replace(score=-g.score), CorefConfig(sweeps=20, seed=1, proposal="witness"))
    assert partition_score(g, bad.labels) < truth - 100


def _members_case(seed=5):
    """A fixed state and a fixed move of mention 0 from s (8 members) to t (12 members)."""
    r = np.random.default_rng(seed)
    n = 30
    label = np.array([0] * 9 + [1] * 12 + list(range(2, 11)))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if r.random() < 0.7]
    a, b = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    g = pair_graph(n, a, b, r.normal(0.3, 1.5, a.size))
    st = state_from_labels(label)
    mb = members_of(st)
    m = 0
    s, t = st.label[0], st.label[9]
    ns, nt = st.size[s] - 1, st.size[t]
    cur = partition_score(g, st.label)
    moved = label.copy()
    moved[0] = 1
    exact = partition_score(g, moved) - cur
    return g, st, mb, m, s, t, ns, nt, exact


@pytest.mark.parametrize("rate", [0.1, 0.3])
def test_witness_uniform_estimate_is_unbiased_and_a_biased_draw_fails(rate):
    g, st, mb, m, s, t, ns, nt, exact = _members_case()
    k = ns + nt
    sub = subsample_state(SubsampleConfig("uniform", rate=rate), 9)
    full, used = _estimate(g, TM0, st, mb, subsample_state(), m, s, t, ns, k, np.uint64(1), 1.0, 0.0)
    assert used == k and full == pytest.approx(exact, abs=1e-9)
    draws = np.array([_estimate(g, TM0, st, mb, sub, m, s, t, ns, k, np.uint64(1), 1.0, 0.0)[0] for _ in range(20_000)])
    se = draws.std(ddof=1) / math.sqrt(draws.size)
    assert abs(draws.mean() - exact) < 4 * se, (draws.mean(), exact, se)
    # a draw that never reaches the last member pair (an off-by-one) is biased: the test sees it
    last = _estimate(g, TM0, st, mb, subsample_state(), m, s, t, ns, k, np.uint64(1), 1.0, 0.0)[0] - \
        _estimate(g, TM0, st, mb, subsample_state(), m, s, t, ns, k - 1, np.uint64(1), 1.0, 0.0)[0]
    biased = np.array([_estimate(g, TM0, st, mb, sub, m, s, t, ns, k - 1, np.uint64(1), 1.0, 0.0)[0] for _ in range(20_000)])
    biased = biased * k / (k - 1)
    assert abs(biased.mean() - exact) > 4 * biased.std(ddof=1) / math.sqrt(biased.size), last


def test_witness_draws_without_replacement():
    g, st, mb, m, s, t, ns, nt, exact = _members_case()
    k = ns + nt
    sub = subsample_state(SubsampleConfig("uniform", rate=(k - 1) / k), 3)
    # rate (k−1)/k: k − 1 distinct pairs, so the estimate is the exact sum minus one
    # pair scaled by k/(k−1); with replacement some pair would repeat and others be missed
    from pdbq.inference.coreference.member_moves import _factor

    vals = np.array([_factor(g, TM0, st, mb, m, s, t, ns, r) for r in range(k)])
    for _ in range(200):
        est, used = _estimate(g, TM0, st, mb, sub, m, s, t, ns, k, np.uint64(1), 1.0, 0.0)
        left_out = exact - est * (k - 1) / k
        assert used == k - 1
        assert np.min(np.abs(vals - left_out)) < 1e-9


def test_confidence_rule_on_members_stops_early_and_late():
    g, st, mb, m, s, t, ns, nt, exact = _members_case()
    k = ns + nt
    wide = subsample_state(SubsampleConfig("confidence", interval=50.0), 3)
    narrow = subsample_state(SubsampleConfig("confidence", interval=1e-6), 3)
    assert _estimate(g, TM0, st, mb, wide, m, s, t, ns, k, np.uint64(1), 1.0, 0.0)[1] == 2
    est, used = _estimate(g, TM0, st, mb, narrow, m, s, t, ns, k, np.uint64(1), 1.0, 0.0)
    assert used == k and est == pytest.approx(exact, abs=1e-9)


def test_witness_option_checks():
    with pytest.raises(OptionError, match="proposal"):
        CorefConfig(proposal="random").check()
    g = PairGraph(np.array([0, 2, 3, 4], np.int64), np.array([2, 1, 0, 0], np.int32), np.ones(4))
    with pytest.raises(CorefInputError, match="sorted"):
        check_sorted_rows(g)
    with pytest.raises(CorefInputError, match="sorted"):
        resolve_map(g, CorefConfig(proposal="witness"))
    check_sorted_rows(pair_graph(3, np.array([0, 0]), np.array([1, 2]), np.ones(2)))


def test_witness_pair_posterior_matches_exact():
    n = 5
    a, b, w = _scores(n, COMPLETE5, seed=2)
    g = pair_graph(n, np.array(a), np.array(b), np.array(w))
    parts = _partitions(n)
    logp = np.array([sum(wk for ak, bk, wk in zip(a, b, w) if p[ak] == p[bk]) for p in parts])
    p = np.exp(logp - logp.max())
    p /= p.sum()
    qa, qb = np.array([0, 1, 2]), np.array([1, 3, 4])
    truth = np.array([sum(pp for pp, part in zip(p, parts) if part[i] == part[j]) for i, j in zip(qa, qb)])
    post = sample_pairs(g, qa, qb, CorefConfig(sweeps=4000, burn_in=50, chains=4, seed=1, proposal="witness"))
    assert np.all(np.abs(post.prob - truth) < 5 * np.maximum(post.stderr, 0.005)), (post.prob, truth, post.stderr)


def test_witness_through_the_cluster_query():
    from test_coref_sql import NAMES, _exact_same

    import pdbq

    d = pdbq.connect()
    try:
        rows = ", ".join(f"({i}, '{n}')" for i, n in NAMES)
        d.execute(f"CREATE TABLE records AS SELECT * FROM (VALUES {rows}) t(id, name)")
        d.execute("CREATE TABLE pairs AS SELECT l.id AS a, r.id AS b, jaro_winkler_similarity(l.name, r.name) AS sim "
                  "FROM records l JOIN records r ON l.id < r.id")
        d.execute("CREATE VARIABLE entity(id BIGINT) DOMAIN CLUSTER FROM (SELECT id FROM records)")
        d.execute("CREATE RULE affinity WEIGHT = 10 * (sim - 0.9) FUNCTION EQUAL AS entity(a) = entity(b) :- pairs(a, b, sim)")
        r = d.execute("SELECT e.id, MAP(e) AS cluster FROM entity AS e ORDER BY e.id WITH (proposal = 'witness')")
        assert r.arrow().column("cluster").to_pylist() == [1, 1, 3, 3, 5]
        r = d.execute("SELECT e.id, PROB(e = 1) AS p, STDERR(e) AS se FROM entity AS e WHERE e.id = 2 "
                      "WITH (sweeps = 3000, chains = 4, seed = 3, proposal = 'witness')")
        got, se = r.arrow().column("p").to_pylist()[0], r.arrow().column("se").to_pylist()[0]
        assert abs(got - _exact_same(d, 1, 2)) <= 5 * se + 2e-3
        with pytest.raises(OptionError, match="proposal"):
            d.execute("SELECT e.id, MAP(e) FROM entity AS e WITH (proposal = 'witness', workers = 2)")
        with pytest.raises(OptionError, match="proposal"):
            d.execute("SELECT e.id, MAP(e) FROM entity AS e WITH (proposal = 'nearest')")
    finally:
        d.close()
