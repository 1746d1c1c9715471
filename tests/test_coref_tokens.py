"""Pair factors computed on demand from token sets (pdbq.coref.tokens) under witness moves:
the score against a Python reference, the chain against the exact distribution over all
partitions of 5 mentions (every within-entity pair scores), the exact path unchanged by p = 1,
the subsampled estimate unbiased, and the option's errors."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from test_coref_moves import COMPLETE5, _code, _freq_check, _partitions
from test_member_moves import _trace

from pdbq.coref.layout import CorefInputError, pair_graph
from pdbq.coref.tokens import pair_score, token_model, token_partition_score
from pdbq.errors import OptionError
from pdbq.inference.coreference.resolve import CorefConfig, resolve_map, sample_pairs
from pdbq.inference.coreference.entity_moves import (
    C_ACCEPTED,
    new_scratch,
    new_state,
    state_from_labels,
)
from pdbq.inference.coreference.member_moves import _estimate, check_members, members_of
from pdbq.inference.mcmc.rng import chain_states
from pdbq.inference.coreference.subsample import SubsampleConfig, subsample_state

VOCAB = list("abcdefgh")


def _fields(n, seed):
    r = np.random.default_rng(seed)
    return [[list(r.choice(VOCAB, r.integers(0, 5))) for _ in range(n)] for _ in range(2)]


def _ref_score(fields, weights, bias, i, j):
    total = -bias
    for f, wt in zip(fields, weights):
        a, b = set(f[i]), set(f[j])
        if a or b:
            total += wt * len(a & b) / len(a | b)
    return total


def test_pair_score_and_partition_score_match_a_reference():
    fields = _fields(12, 1)
    tm = token_model(fields, [3.0, -1.5], 0.7)
    for i, j in itertools.combinations(range(12), 2):
        assert pair_score(tm, i, j) == pytest.approx(_ref_score(fields, [3.0, -1.5], 0.7, i, j), abs=1e-12)
    label = np.random.default_rng(2).integers(0, 4, 12)
    ref = sum(_ref_score(fields, [3.0, -1.5], 0.7, i, j) for i, j in itertools.combinations(range(12), 2)
              if label[i] == label[j])
    assert token_partition_score(tm, label) == pytest.approx(ref, abs=1e-9)
    with pytest.raises(CorefInputError):
        token_model(fields, [1.0], 0.0)
    with pytest.raises(CorefInputError):
        token_model([fields[0], fields[1][:5]], [1.0, 1.0], 0.0)


def _model5(seed=4):
    fields = _fields(5, seed)
    weights, bias = [2.5, 1.5], 1.2
    return fields, weights, bias, token_model(fields, weights, bias)


def _exact_tokens(fields, weights, bias, n, temp=1.0):
    parts = _partitions(n)
    logp = np.array([sum(_ref_score(fields, weights, bias, i, j) for i, j in itertools.combinations(range(n), 2)
                         if p[i] == p[j]) / temp for p in parts])
    p = np.exp(logp - logp.max())
    return {_code(pp, n): k for k, pp in enumerate(parts)}, p / p.sum()


def test_witness_moves_with_on_demand_factors_sample_the_exact_distribution():
    n = 5
    fields, weights, bias, tm = _model5()
    # the candidate graph only proposes; its stored scores are deliberately unrelated
    g = pair_graph(n, np.array([a for a, _ in COMPLETE5]), np.array([b for _, b in COMPLETE5]), np.full(10, 9.0))
    index, p = _exact_tokens(fields, weights, bias, n)
    assert p.max() < 0.5  # a spread-out target, so the check has power
    st = new_state(n)
    mb = members_of(st)
    sc = new_scratch(g)
    rng = chain_states(3, 1)
    counters = np.zeros(4, np.int64)
    log = np.zeros(1)
    codes = np.empty(200_000, np.int64)
    _trace(g, tm, st, mb, sc, rng, 5, 0.2, 0.0, counters, log, codes)
    check_members(st, mb)
    assert counters[C_ACCEPTED] > 0
    assert log[0] == pytest.approx(token_partition_score(tm, st.label), abs=1e-9)
    z, tv, tv_noise = _freq_check(codes, index, p)
    assert z < 5.0, f"max z {z:.2f}, total variation {tv:.4f}"
    assert tv < 2.0 * tv_noise, (tv, tv_noise)
    # the stored-score model (what the chain would sample if it read g.score) is rejected
    parts = _partitions(n)
    stored = np.array([9.0 * sum(1 for i, j in COMPLETE5 if pp[i] == pp[j]) for pp in parts])
    q = np.exp(stored - stored.max())
    z_wrong, _, _ = _freq_check(codes, index, q / q.sum())
    assert z_wrong > 8.0
    _, p_hot = _exact_tokens(fields, weights, bias, n, temp=1.4)
    assert _freq_check(codes, index, p_hot)[0] > 8.0


def _cora_like(seed=0, entities=15):
    """Planted entities whose mentions share most of an entity's tokens, blocked by one token."""
    r = np.random.default_rng(seed)
    fields, gold = [[], []], []
    for e in range(entities):
        core = [f"e{e}w{k}" for k in range(6)]
        for _ in range(int(r.integers(3, 14))):
            fields[0].append(list(r.choice(core, 4, replace=False)) + [f"n{int(r.integers(0, 40))}"])
            fields[1].append([f"b{e // 3}"])
            gold.append(e)
    n = len(gold)
    a, b = zip(*[(i, j) for i in range(n) for j in range(i + 1, n) if fields[1][i] == fields[1][j]])
    g = pair_graph(n, np.array(a), np.array(b), np.zeros(len(a)))
    return g, token_model(fields, [8.0, 0.0], 2.0), np.array(gold)


def test_resolve_map_with_tokens_exact_p1_identical_and_subsampled():
    g, tm, gold = _cora_like()
    base = CorefConfig(sweeps=40, chains=2, seed=2, p_split_merge=0.0, proposal="witness")
    exact = resolve_map(g, base, tokens=tm)
    one = resolve_map(g, CorefConfig(**{**base.__dict__, "subsample": SubsampleConfig("uniform", rate=1.0)}), tokens=tm)
    assert np.array_equal(exact.labels, one.labels) and exact.factor_evaluations == one.factor_evaluations
    truth = token_partition_score(tm, gold)
    assert exact.log_score == pytest.approx(token_partition_score(tm, exact.labels))
    assert exact.log_score >= truth - 0.02 * abs(truth)
    sub = resolve_map(g, CorefConfig(**{**base.__dict__, "subsample": SubsampleConfig("confidence", interval=0.0, decide=True)}),
                      tokens=tm)
    assert sub.log_score == pytest.approx(token_partition_score(tm, sub.labels))
    assert sub.log_score >= truth - 0.05 * abs(truth)  # noisier, as every subsampled chain (docs/mcmcmc.md)
    assert sub.factor_evaluations < 0.5 * exact.factor_evaluations


def test_token_estimate_is_unbiased():
    g, tm, gold = _cora_like(1)
    st = state_from_labels(gold)
    mb = members_of(st)
    m = 0
    s = st.label[m]
    t = st.label[int(np.flatnonzero(gold != gold[0])[0])]
    ns, nt = st.size[s] - 1, st.size[t]
    moved = gold.copy()
    moved[0] = gold[np.flatnonzero(gold != gold[0])[0]]
    exact = token_partition_score(tm, moved) - token_partition_score(tm, gold)
    full = _estimate(g, tm, st, mb, subsample_state(), m, s, t, ns, ns + nt, np.uint64(1), 1.0, 0.0)[0]
    assert full == pytest.approx(exact, abs=1e-9)
    sub = subsample_state(SubsampleConfig("uniform", rate=0.2), 5)
    draws = np.array([_estimate(g, tm, st, mb, sub, m, s, t, ns, ns + nt, np.uint64(1), 1.0, 0.0)[0] for _ in range(20_000)])
    se = draws.std(ddof=1) / math.sqrt(draws.size)
    assert se > 0 and abs(draws.mean() - exact) < 4 * se, (draws.mean(), exact, se)
    # the same test rejects an estimate that leaves out the last member pair
    short = np.array([_estimate(g, tm, st, mb, sub, m, s, t, ns, ns + nt - 1, np.uint64(1), 1.0, 0.0)[0]
                      for _ in range(20_000)]) * (ns + nt) / (ns + nt - 1)
    assert abs(short.mean() - exact) > 4 * short.std(ddof=1) / math.sqrt(short.size)


def test_token_option_errors():
    g, tm, _ = _cora_like()
    with pytest.raises(OptionError, match="witness"):
        resolve_map(g, CorefConfig(p_split_merge=0.0), tokens=tm)
    with pytest.raises(OptionError, match="p_split_merge"):
        resolve_map(g, CorefConfig(proposal="witness"), tokens=tm)
    small = token_model([[["a"]] * 3], [1.0], 0.0)
    with pytest.raises(CorefInputError, match="mentions"):
        resolve_map(g, CorefConfig(proposal="witness", p_split_merge=0.0), tokens=small)
    with pytest.raises(OptionError, match="TokenModel"):
        sample_pairs(g, np.array([0]), np.array([1]), CorefConfig(proposal="witness", p_split_merge=0.0), tokens="x")


def test_sample_pairs_with_tokens_matches_exact():
    n = 5
    fields, weights, bias, tm = _model5()
    g = pair_graph(n, np.array([a for a, _ in COMPLETE5]), np.array([b for _, b in COMPLETE5]), np.full(10, 9.0))
    index, p = _exact_tokens(fields, weights, bias, n)
    parts = _partitions(n)
    qa, qb = np.array([0, 1, 2]), np.array([1, 3, 4])
    truth = np.array([sum(p[index[_code(pp, n)]] for pp in parts if pp[i] == pp[j]) for i, j in zip(qa, qb)])
    post = sample_pairs(g, qa, qb, CorefConfig(sweeps=4000, burn_in=50, chains=4, seed=1, proposal="witness",
                                               p_split_merge=0.0), tokens=tm)
    assert np.all(np.abs(post.prob - truth) < 5 * np.maximum(post.stderr, 0.005)), (post.prob, truth, post.stderr)
    # the stored scores (9 per pair) would put every pair together almost surely
    assert np.all(truth < 0.9)
