"""Batch means, split R-hat and ESS against known answers."""

from __future__ import annotations

import numpy as np

from pdbq.inference.estimates import BatchStore, batch_stderr, effective_sample_size, pooled_mean, split_rhat


def _ar1_batches(rho, chains, n_batches, batch_len, seed, shift=None):
    """AR(1) draws in [0, 1]-ish around 0.5, summed per batch as a 2-value 'distribution'."""
    rng = np.random.default_rng(seed)
    sums = np.zeros((chains, n_batches, 1, 2))
    for c in range(chains):
        x = 0.0
        eps = rng.normal(0, 0.05, size=n_batches * batch_len)
        xs = np.empty_like(eps)
        for i, e in enumerate(eps):
            x = rho * x + e
            xs[i] = x
        p = 0.5 + xs + (shift[c] if shift is not None else 0.0)
        sums[c, :, 0, 1] = p.reshape(n_batches, batch_len).sum(axis=1)
        sums[c, :, 0, 0] = batch_len - sums[c, :, 0, 1]
    counts = np.full((chains, n_batches, 1), batch_len, dtype=np.int64)
    return sums, counts


def test_batch_means_stderr_matches_ar1_theory():
    rho, sd = 0.9, 0.05
    sums, counts = _ar1_batches(rho, chains=4, n_batches=50, batch_len=2000, seed=1)
    se = batch_stderr(sums, counts)[0, 1]
    n = 4 * 50 * 2000
    var_x = sd**2 / (1 - rho**2)
    theory = np.sqrt(var_x * (1 + rho) / (1 - rho) / n)
    assert 0.75 * theory < se < 1.3 * theory
    # an estimate that ignored autocorrelation would be far too small: the check has teeth
    naive = np.sqrt(var_x / n)
    assert se > 3 * naive


def test_split_rhat_near_one_for_agreeing_chains_and_large_for_shifted():
    sums, counts = _ar1_batches(0.5, chains=4, n_batches=32, batch_len=500, seed=2)
    assert split_rhat(sums, counts)[0] < 1.05
    sums, counts = _ar1_batches(0.5, chains=4, n_batches=32, batch_len=500, seed=2, shift=[0, 0, 0.2, 0.2])
    assert split_rhat(sums, counts)[0] > 1.5
    # a chain that drifts within itself is caught by the split
    sums, counts = _ar1_batches(0.5, chains=1, n_batches=32, batch_len=500, seed=3)
    sums[0, 16:, 0, 1] += 0.2 * 500
    sums[0, 16:, 0, 0] -= 0.2 * 500
    assert split_rhat(sums, counts)[0] > 1.5
    assert np.isnan(split_rhat(sums[:, :3], counts[:, :3])[0])


def test_constant_conditionals_give_rhat_one():
    sums = np.zeros((2, 8, 1, 2))
    sums[..., 1] = 0.3 * 10
    sums[..., 0] = 0.7 * 10
    counts = np.full((2, 8, 1), 10)
    assert split_rhat(sums, counts)[0] == 1.0
    assert batch_stderr(sums, counts)[0, 1] < 1e-12


def test_batch_store_merges_and_keeps_totals():
    store = BatchStore(chains=2, n_targets=1, max_card=2, slots=4)
    rng = np.random.default_rng(0)
    total = np.zeros((1, 2))
    for _ in range(37):
        s = rng.random((2, 1, 2))
        store.add_round(s, np.ones((2, 1), dtype=np.int64))
        total += s.sum(axis=0)
    bs, bc = store.batches()
    assert 4 <= bs.shape[1] <= 9
    np.testing.assert_allclose(bs.sum(axis=(0, 1)), total)
    assert bc.sum() == 74
    np.testing.assert_allclose(pooled_mean(bs, bc), total / 74)


def test_ess_of_iid_draws_is_about_n():
    rng = np.random.default_rng(5)
    draws = (rng.random((4, 40, 250)) < 0.3).astype(float)  # iid Bernoulli(0.3)
    sums = np.stack([1 - draws, draws], axis=-1).sum(axis=2)[:, :, None, :]
    counts = np.full((4, 40, 1), 250)
    est = pooled_mean(sums, counts)
    se = batch_stderr(sums, counts)
    ess = effective_sample_size(est, se, counts.sum(axis=(0, 1)), np.array([2]))
    assert 0.7 * 40_000 < ess[0] < 1.4 * 40_000


def test_batch_statistics_matches_the_numpy_reference():
    # shifted chains, a drifting chain, empty batches, a constant target, a frozen one
    rng = np.random.default_rng(7)
    C, B, T, K = 3, 24, 6, 3  # merged levels used: 1x, 2x, 4x (8x would leave 9 < 16 batches)
    counts = rng.integers(5, 50, size=(C, B, T))
    counts[0, 2, 1] = 0
    counts[1, :, 4] = 0  # a target one chain never updated
    p = rng.dirichlet(np.ones(K), size=(C, B, T))
    p[:, :, 2] = [0.3, 0.3, 0.4] + rng.normal(0, 0.01, size=(C, B, 1)) * [1, -1, 0]
    p[2, :, 2] += [0.3, -0.1, -0.2]  # one chain elsewhere
    p[:, :, 3] = [0.3, 0.7, 0.0]  # constant conditional (value 2 impossible)
    p[:, :, 5] = [1.0, 0.0, 0.0]  # frozen at a point mass
    sums = p * counts[..., None]
    constant = np.array([False, False, False, True, False, False])
    from pdbq.inference.estimates import batch_statistics

    mean, se, rhat = batch_statistics(sums, counts, constant)
    np.testing.assert_allclose(mean, pooled_mean(sums, counts), rtol=1e-12, atol=1e-15)
    levels = [batch_stderr(sums, counts), batch_stderr(sums.reshape(C, B // 2, 2, T, K).sum(2), counts.reshape(C, B // 2, 2, T).sum(2)),
              batch_stderr(sums.reshape(C, B // 4, 4, T, K).sum(2), counts.reshape(C, B // 4, 4, T).sum(2))]
    np.testing.assert_allclose(se, np.max(levels, axis=0), rtol=1e-9, atol=1e-15)
    assert np.nanmax(se - levels[0]) > 0  # the longer batches matter here
    np.testing.assert_allclose(rhat, split_rhat(sums, counts, constant), rtol=1e-9)
    assert rhat[3] == 1.0 and np.isinf(rhat[5]) and rhat[2] > 1.1
