"""Batch means, split R-hat and ESS against known answers."""

from __future__ import annotations

import numpy as np

from pdbq.inference.mcmc.estimates import BatchStore, batch_stderr, effective_sample_size, pooled_mean, split_rhat, t_factor


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
    from pdbq.inference.mcmc.estimates import batch_statistics

    mean, se, rhat = batch_statistics(sums, counts, constant, student=False, floor=False)
    np.testing.assert_allclose(mean, pooled_mean(sums, counts), rtol=1e-12, atol=1e-15)
    levels = [batch_stderr(sums, counts), batch_stderr(sums.reshape(C, B // 2, 2, T, K).sum(2), counts.reshape(C, B // 2, 2, T).sum(2)),
              batch_stderr(sums.reshape(C, B // 4, 4, T, K).sum(2), counts.reshape(C, B // 4, 4, T).sum(2))]
    gse, _ = _geyer_reference(sums, counts)
    want = np.fmax(np.max(levels, axis=0), gse)
    np.testing.assert_allclose(se, want, rtol=1e-9, atol=1e-15)
    assert np.nanmax(se - levels[0]) > 0  # the longer batches matter here
    assert np.nanmax(gse - np.max(levels, axis=0)) > 0  # and the chains' disagreement (target 2)
    # the Student-t widening: each estimate by t_{0.975, dof}/1.96, never narrower
    _, se_t, _ = batch_statistics(sums, counts, constant, floor=False)
    assert np.all(se_t[np.isfinite(se)] >= se[np.isfinite(se)])
    assert np.nanmax(se_t / np.where(se > 0, se, np.nan)) > 1.05
    # the resolution floor Z95 / updates: it lifts the frozen target's zero errors, leaves the
    # constant target exact (0) and every resolved value as it was
    _, se_f, _ = batch_statistics(sums, counts, constant)
    lo = 1.959963984540054 / counts.sum(axis=(0, 1))
    want_f = np.where(constant[:, None], se_t, np.fmax(se_t, lo[:, None]))
    np.testing.assert_allclose(se_f, want_f, rtol=1e-12)
    assert np.all(se_f[3] < 1e-15) and np.all(se_f[5] == lo[5])
    resolved = np.isfinite(se_t) & (se_t > 2 * lo[:, None])
    assert resolved.sum() >= 12 and np.array_equal(se_f[resolved], se_t[resolved])
    np.testing.assert_allclose(rhat, split_rhat(sums, counts, constant), rtol=1e-9)
    assert rhat[3] == 1.0 and np.isinf(rhat[5]) and rhat[2] > 1.1


def _geyer_reference(sums, counts):
    """Stan's multi-chain ESS (Vehtari et al. 2021) on split batch-mean sequences, in numpy."""
    C, B, T, K = sums.shape
    nh = B // 2
    se = np.full((T, K), np.nan)
    ess = np.full((T, K), np.nan)
    for t in range(T):
        c = counts[:, B - 2 * nh:, t]
        if (c <= 0).any():
            continue
        x = sums[:, B - 2 * nh:, t, :] / c[..., None]  # [C, 2nh, K]
        x = np.concatenate([x[:, :nh], x[:, nh:]], axis=0)  # [S, nh, K]
        S = x.shape[0]
        for k in range(K):
            seq = x[:, :, k]
            d = seq - seq.mean(axis=1, keepdims=True)
            acov = np.array([(d[:, : nh - h] * d[:, h:]).sum(axis=1) / nh for h in range(nh)]).T  # [S, nh]
            w = acov[:, 0].mean() * nh / (nh - 1)
            var_plus = acov[:, 0].mean() + seq.mean(axis=1).var(ddof=1)
            if var_plus <= 1e-24:
                continue
            rho = 1 - (w - acov.mean(axis=0)) / var_plus
            tau, prev, lag = 0.0, np.inf, 0
            while lag + 1 < nh:
                pair = rho[lag] + rho[lag + 1]
                if pair <= 0:
                    break
                pair = min(pair, prev)
                tau, prev, lag = tau + pair, pair, lag + 2
            tau = max(2 * tau - 1, 1 / np.log10(max(S * nh, 10)))
            ess[t, k] = S * nh / tau
            se[t, k] = np.sqrt(var_plus / ess[t, k])
    return se, ess


def test_t_factor_matches_student_t_quantiles():
    # t_{0.975, nu} from tables: the widening of a 95% interval with nu degrees of freedom
    for nu, t in [(5, 2.5706), (10, 2.2281), (15, 2.1314), (30, 2.0423), (100, 1.9840)]:
        assert abs(t_factor(nu) * 1.959964 - t) < 0.003
    assert t_factor(np.inf) == 1.0 and t_factor(1.0) == t_factor(3.0)


def test_ess_estimate_matches_ar1_theory_and_counts_autocorrelation():
    # batch means that are themselves AR(1): ESS = n (1 - rho) / (1 + rho), se from it
    from pdbq.inference.mcmc.estimates import _geyer_kernel

    rng = np.random.default_rng(11)
    C, B, rho = 4, 256, 0.8
    x = np.zeros((C, B))
    for c in range(C):
        e = rng.normal(0, 0.02, B)
        for b in range(B):
            x[c, b] = (rho * x[c, b - 1] if b else e[0] / np.sqrt(1 - rho**2)) + (e[b] if b else 0.0)
    p = 0.5 + x
    sums = np.stack([1 - p, p], axis=-1)[:, :, None, :] * 100
    counts = np.full((C, B, 1), 100)
    se = np.full((1, 2), np.nan)
    ess = np.full((1, 2), np.nan)
    _geyer_kernel(sums, counts, B // 2, se, ess)
    theory = C * B * (1 - rho) / (1 + rho)
    assert 0.6 * theory < ess[0, 1] < 1.5 * theory
    gse, gess = _geyer_reference(sums, counts)
    np.testing.assert_allclose(se, gse, rtol=1e-9)
    np.testing.assert_allclose(ess, gess, rtol=1e-9)
    # ignoring the autocorrelation (ESS = number of batch means) would be 1/sqrt(ESS ratio) too narrow
    naive = p.std(ddof=1) / np.sqrt(C * B)
    assert se[0, 1] > 2.0 * naive
