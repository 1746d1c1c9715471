"""Entity moves: valid partitions, detailed balance against the exact distribution over all
partitions of <= 6 mentions, MAP recovery of planted clusters, pair posteriors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import njit

from pdbq.coref.layout import pair_graph
from pdbq.errors import OptionError
from pdbq.inference.coreference.resolve import CorefConfig, resolve_map, sample_pairs, stable_labels
from pdbq.inference.coreference.entity_moves import (
    C_ACCEPTED,
    C_EVALS,
    check_state,
    new_scratch,
    new_state,
    partition_score,
    run_moves,
    state_from_labels,
)
from pdbq.inference.mcmc.rng import chain_states


def _partitions(n):
    """All set partitions of range(n) as restricted growth strings."""
    out = []

    def rec(prefix, top):
        if len(prefix) == n:
            out.append(tuple(prefix))
            return
        for v in range(top + 2):
            rec(prefix + [v], max(top, v))

    rec([0], 0) if n else out.append(())
    return out


def _code(rgs, n):
    return sum(v * n**m for m, v in enumerate(rgs))


def _exact(n, a, b, w, temp=1.0):
    parts = _partitions(n)
    logp = np.array([sum(wk for ak, bk, wk in zip(a, b, w) if p[ak] == p[bk]) / temp for p in parts])
    p = np.exp(logp - logp.max())
    return {_code(pp, n): i for i, pp in enumerate(parts)}, p / p.sum()


@njit(cache=True)
def partition_code(label, canon):
    """The partition in ``label`` as one integer, invariant to how entities are numbered
    (first-seen order); ``canon`` is scratch of the same length."""
    n = label.shape[0]
    canon[:] = -1
    nxt = 0
    code = 0
    mult = 1
    for m in range(n):
        e = label[m]
        if canon[e] < 0:
            canon[e] = nxt
            nxt += 1
        code += canon[e] * mult
        mult *= n
    return code


@njit(cache=True)
def _trace(g, st, sc, rng, thin, p_new, psm, counters, log, codes):
    n = st.label.shape[0]
    canon = np.empty(n, np.int64)
    for t in range(codes.shape[0]):
        run_moves(g, st, sc, rng, thin, 1.0, p_new, psm, counters, log)
        codes[t] = partition_code(st.label, canon)


def _run_trace(n, a, b, w, psm, samples, thin, seed=3, p_new=0.2):
    g = pair_graph(n, np.array(a), np.array(b), np.array(w))
    st = new_state(n)
    sc = new_scratch(g)
    rng = chain_states(seed, 1)
    counters = np.zeros(4, np.int64)
    log = np.zeros(1)
    codes = np.empty(samples, np.int64)
    _trace(g, st, sc, rng, thin, p_new, psm, counters, log, codes)
    check_state(st)
    # the running score equals a recomputation from scratch
    assert log[0] == pytest.approx(partition_score(g, st.label), abs=1e-9)
    return codes, counters


def _freq_check(codes, index, p, batches=40):
    """Max over partitions of |empirical - exact| / (batch-means standard error)."""
    idx = np.array([index[c] for c in codes])
    per = np.array([np.bincount(chunk, minlength=p.size) / chunk.size for chunk in np.array_split(idx, batches)])
    mean = per.mean(axis=0)
    se = per.std(axis=0, ddof=1) / math.sqrt(batches)
    # a floor for states whose batches all agree (rare states never visited): the binomial se
    se = np.maximum(se, np.sqrt(p * (1 - p) / idx.size))
    # total variation and its expectation under pure noise (E|N(0, se²)| = se·sqrt(2/π))
    tv = 0.5 * np.abs(mean - p).sum()
    return float(np.max(np.abs(mean - p) / se)), float(tv), float(0.5 * se.sum() * math.sqrt(2 / math.pi))


def _scores(n, pairs, seed):
    r = np.random.default_rng(seed)
    a = [i for i, _ in pairs]
    b = [j for _, j in pairs]
    return a, b, list(r.uniform(-1.5, 1.5, len(pairs)))


COMPLETE5 = [(i, j) for i in range(5) for j in range(i + 1, 5)]
SPARSE6 = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (0, 2), (2, 4), (1, 5)]


@pytest.mark.parametrize(
    "n,pairs,psm",
    [(5, COMPLETE5, 0.0), (5, COMPLETE5, 1.0), (5, COMPLETE5, 0.3), (6, SPARSE6, 0.3)],
    ids=["complete5-mention", "complete5-splitmerge", "complete5-mixed", "sparse6-mixed"],
)
def test_stationary_distribution_matches_exact(n, pairs, psm):
    a, b, w = _scores(n, pairs, seed=11)
    index, p = _exact(n, a, b, w)
    codes, counters = _run_trace(n, a, b, w, psm, samples=200_000, thin=5)
    assert counters[C_ACCEPTED] > 0 and counters[C_EVALS] > 0
    assert set(codes.tolist()) <= set(index), "a visited state is not a partition code"
    z, tv, tv_noise = _freq_check(codes, index, p)
    assert z < 5.0, f"max z {z:.2f}, total variation {tv:.4f}"
    assert tv < 2.0 * tv_noise, (tv, tv_noise)
    # the same test rejects a wrong target (the exact distribution at another temperature)
    _, p_wrong = _exact(n, a, b, w, temp=1.4)
    z_wrong, _, _ = _freq_check(codes, index, p_wrong)
    assert z_wrong > 8.0


def test_detailed_balance_of_transition_counts():
    """In stationarity N(x→y) and N(y→x) estimate the same flow π(x)P(x,y): their differences
    are noise, so Σ (N_xy − N_yx)² / (N_xy + N_yx) is ~ χ² with one degree per pair."""
    n = 5
    a, b, w = _scores(n, COMPLETE5, seed=5)
    codes, _ = _run_trace(n, a, b, w, 0.3, samples=400_000, thin=1, seed=9)
    x, y = codes[:-1], codes[1:]
    moved = x != y
    flows: dict[tuple[int, int], int] = {}
    for u, v in zip(x[moved].tolist(), y[moved].tolist()):
        flows[(u, v)] = flows.get((u, v), 0) + 1
    stat, df = 0.0, 0
    for (u, v), nuv in flows.items():
        if u < v:
            nvu = flows.get((v, u), 0)
            stat += (nuv - nvu) ** 2 / (nuv + nvu)
            df += 1
    assert df > 100
    assert stat < df + 5 * math.sqrt(2 * df), (stat, df)


def test_moves_keep_a_valid_partition_on_a_random_graph():
    r = np.random.default_rng(0)
    n = 300
    pairs = {(int(i), int(j)) for i, j in r.integers(0, n, (3000, 2)) if i != j}
    pairs = {(min(p), max(p)) for p in pairs}
    a, b = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    g = pair_graph(n, a, b, r.normal(0.0, 2.0, a.size))
    st = state_from_labels(r.integers(0, 20, n))
    sc = new_scratch(g)
    rng = chain_states(1, 1)
    counters = np.zeros(4, np.int64)
    log = np.array([partition_score(g, st.label)])
    for temp in (5.0, 1.0, 0.2, 0.0):
        run_moves(g, st, sc, rng, 20_000, temp, 0.1, 0.3, counters, log)
        check_state(st)
        assert log[0] == pytest.approx(partition_score(g, st.label), abs=1e-6)
    assert counters[C_ACCEPTED] > 1000


def _planted(seed, n_entities=60):
    r = np.random.default_rng(seed)
    sizes = r.integers(1, 9, n_entities)
    truth = np.repeat(np.arange(n_entities), sizes)
    r.shuffle(truth)
    n = truth.size
    a, b = np.triu_indices(n, 1)
    # candidate pairs: all within-entity pairs plus random cross pairs (as blocking would give)
    keep = (truth[a] == truth[b]) | (r.random(a.size) < 0.05)
    a, b = a[keep], b[keep]
    same = truth[a] == truth[b]
    # scores clearly separated, so the planted clustering is the unique MAP
    w = np.where(same, r.uniform(0.5, 3.0, a.size), r.uniform(-3.0, -0.5, a.size))
    return truth, pair_graph(n, a, b, w)


def test_map_recovers_planted_clusters():
    truth, g = _planted(5)
    res = resolve_map(g, CorefConfig(sweeps=100, chains=2, seed=2, temperature=0.3, p_split_merge=0.3, greedy_sweeps=30))
    assert np.array_equal(res.labels, stable_labels(truth))
    assert res.factor_evaluations > 0 and res.proposals > 0
    assert res.log_score == pytest.approx(partition_score(g, res.labels))
    # a broken score (signs flipped) must not recover them
    bad = g._replace(score=-g.score)
    assert not np.array_equal(resolve_map(bad, CorefConfig(sweeps=20, seed=2)).labels, stable_labels(truth))


def test_map_is_deterministic_per_seed():
    _, g = _planted(7, 30)
    r1 = resolve_map(g, CorefConfig(sweeps=10, seed=5, temperature=5.0))
    r2 = resolve_map(g, CorefConfig(sweeps=10, seed=5, temperature=5.0))
    assert np.array_equal(r1.labels, r2.labels) and r1.factor_evaluations == r2.factor_evaluations


def test_pair_posterior_matches_exact():
    n = 4
    pairs = [(0, 1), (1, 2), (2, 3), (0, 3), (0, 2)]
    a, b, w = _scores(n, pairs, seed=2)
    index, p = _exact(n, a, b, w)
    parts = _partitions(n)
    qa, qb = np.array([0, 1, 0]), np.array([1, 3, 2])
    exact = [sum(pk for part, pk in zip(parts, p) if part[i] == part[j]) for i, j in zip(qa, qb)]
    g = pair_graph(n, np.array(a), np.array(b), np.array(w))
    post = sample_pairs(g, qa, qb, CorefConfig(sweeps=20_000, burn_in=100, chains=4, seed=1))
    for k in range(3):
        assert abs(post.prob[k] - exact[k]) < 5 * post.stderr[k] + 1e-3, (k, post.prob[k], exact[k], post.stderr[k])
        assert post.stderr[k] < 0.01


def test_config_errors():
    with pytest.raises(OptionError, match="p_new"):
        CorefConfig(p_new=0.0).check()
    with pytest.raises(OptionError, match="sweeps"):
        CorefConfig(sweeps=0).check()
    with pytest.raises(OptionError, match="min_temperature"):
        CorefConfig(temperature=0.1, min_temperature=1.0).check()
