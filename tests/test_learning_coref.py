"""SampleRank for coreference and the CEM split/merge proposer (issue 16 items 3 and 5)."""

from __future__ import annotations

import numpy as np
import pytest

from pdbq.coref.layout import pair_graph
from pdbq.coref.metrics import b_cubed, pairwise
from pdbq.errors import LearningError, OptionError
from pdbq.learning.cem import CEMConfig, cem_decode
from pdbq.learning.coref_rank import CorefRanking, PairTable, learn_coref_weights
from pdbq.learning.samplerank import SampleRankConfig


def planted_pairs(seed, n_ent=60, block=4):
    """Entities of 1-5 mentions, candidate pairs within blocks of `block` entities; feature 0
    is high for coreferent pairs, feature 1 low, feature 2 is noise."""
    rng = np.random.default_rng(seed)
    gold = np.repeat(np.arange(n_ent), rng.integers(1, 6, n_ent))
    n = gold.size
    mb = (np.arange(n_ent) // block)[gold]
    a, b = np.triu_indices(n, 1)
    keep = mb[a] == mb[b]
    a, b = a[keep], b[keep]
    same = gold[a] == gold[b]
    x = np.column_stack([
        np.where(same, rng.normal(0.8, 0.25, a.size), rng.normal(0.2, 0.25, a.size)),
        np.where(same, rng.normal(0.2, 0.3, a.size), rng.normal(0.6, 0.3, a.size)),
        rng.normal(0.5, 0.3, a.size),
    ])
    return n, PairTable(a, b, x), gold


def recovered(theta):
    return theta[0] > 0 and theta[1] < 0 and theta[0] > 3 * abs(theta[2])


@pytest.mark.parametrize("objective", ["b3", "pairwise"])
def test_move_deltas_match_brute_force(objective):
    n, pairs, gold = planted_pairs(1, n_ent=20)
    prob = CorefRanking(n, pairs, gold, objective=objective, p_split_merge=0.3)
    x1 = np.column_stack([pairs.x, np.ones(pairs.a.size)])
    metric = b_cubed if objective == "b3" else pairwise

    def phi(lab):
        return x1[lab[pairs.a] == lab[pairs.b]].sum(axis=0)

    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(1500):
        lab0 = prob.labels()
        move = prob.propose(rng)
        k, s, t = move
        if k == 0:
            continue
        lab1 = lab0.copy()
        lab1[prob.moved[:k]] = t if t >= 0 else n + 1
        np.testing.assert_allclose(prob.feature_delta(move)[1], phi(lab1) - phi(lab0), atol=1e-9)
        assert prob.objective_delta(move) == pytest.approx(metric(lab1, gold).f1 - metric(lab0, gold).f1, abs=1e-9)
        checked += 1
        if rng.random() < 0.5:
            prob.accept(move)
    assert checked > 500
    assert prob.objective_value() == pytest.approx(metric(prob.labels(), gold).f1, abs=1e-9)


def test_samplerank_coref_recovers_weight_signs():
    n, pairs, gold = planted_pairs(0)
    res = learn_coref_weights(n, pairs, gold, SampleRankConfig(steps=20_000, seed=1))
    assert recovered(res.weights), res.weights
    assert res.train_objective > 0.9
    # the same walk against a shuffled gold clustering learns nothing of the kind
    shuffled = np.random.default_rng(5).permutation(gold)
    bad = learn_coref_weights(n, pairs, shuffled, SampleRankConfig(steps=20_000, seed=1))
    assert not recovered(bad.weights), bad.weights


def test_samplerank_coref_bad_input():
    n, pairs, gold = planted_pairs(0, n_ent=8)
    with pytest.raises(LearningError, match="every gold entity is a singleton"):
        CorefRanking(n, pairs, np.arange(n))
    with pytest.raises(LearningError, match="one label per mention"):
        CorefRanking(n, pairs, gold[:-1])
    with pytest.raises(OptionError, match="objective"):
        CorefRanking(n, pairs, gold, objective="f2")
    with pytest.raises(LearningError, match="no candidate pairs"):
        CorefRanking(n, PairTable(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, 3))), gold)


def planted_graph(seed, n_ent=40, block=5):
    """Pair scores ~ N(+1.5, 1) within an entity, N(-1.5, 1) across, pairs within blocks; the
    start merges each block's mentions into random clusters."""
    rng = np.random.default_rng(seed)
    gold = np.repeat(np.arange(n_ent), rng.integers(2, 9, n_ent))
    n = gold.size
    mb = (np.arange(n_ent) // block)[gold]
    a, b = np.triu_indices(n, 1)
    keep = mb[a] == mb[b]
    a, b = a[keep], b[keep]
    w = np.where(gold[a] == gold[b], rng.normal(1.5, 1.0, a.size), rng.normal(-1.5, 1.0, a.size))
    return pair_graph(n, a, b, w), gold, mb * 100 + rng.integers(0, block, n)


def test_cem_proposer_beats_uniform():
    g, gold, init = planted_graph(0)
    cfg = CEMConfig(seed=0, target=0.95)
    cem = cem_decode(g, gold, cfg, adaptive=True, initial=init)
    uni = cem_decode(g, gold, cfg, adaptive=False, initial=init)
    assert cem.reached and uni.reached
    assert cem.b3 >= 0.95 and b_cubed(cem.labels, gold).f1 == pytest.approx(cem.b3)
    # one proposed jump per step (seed 002's count): at least 25% fewer with the learned proposer
    assert cem.steps <= 0.75 * uni.steps, (cem.steps, uni.steps)
    assert cem.jumps < uni.jumps
    # it learned to split entities with repulsive pairs and to merge entities with attractive ones
    assert cem.lam_split[0] < 0 and cem.lam_merge[1] > 0


def test_cem_config_errors():
    with pytest.raises(OptionError, match="rho"):
        CEMConfig(rho=2.0).check()
    with pytest.raises(OptionError, match="performance"):
        CEMConfig(performance="x").check()
