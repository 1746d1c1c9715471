"""Monte Carlo estimates from per-chain batches: pooled means, calibrated standard errors
(batch means at several batch lengths and a multi-chain ESS estimate, each with its Student-t
quantile, never below the sampler's resolution: docs/inference.md, "Standard errors and coverage"), split R-hat and effective sample
size.

The sampler adds, at every update of a target variable, the target's full conditional
distribution (Rao-Blackwellisation). A *batch* is a run of consecutive rounds of one chain; it
holds those sums and the number of updates that produced them. `BatchStore` keeps between
``slots`` and ``2·slots`` batches per chain by merging neighbours (doubling the batch length), so
memory stays fixed however long the run and the batch length grows with it.

Shapes: sums ``[chains, batches, targets, max_card]``, counts ``[chains, batches, targets]``.

>>> import numpy as np
>>> sums = np.array([[[[3.0, 1.0]], [[2.0, 2.0]]]])  # 1 chain, 2 batches, 1 target, card 2
>>> counts = np.array([[[4], [4]]])
>>> pooled_mean(sums, counts)[0].tolist()
[0.625, 0.375]
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from numba import njit

_TINY = 1e-24  # variance of probabilities below this is rounding noise
_MIN_MERGED_BATCHES = 16  # batch-length levels with fewer batches than this are too noisy to use
_LEVELS = 5  # batch lengths 1, 2, 4, 8, 16 × the stored one
_FROZEN = 1e-6  # a conditional within this of a point mass, never changing: the chain does not move
Z95 = 1.959963984540054  # two-sided 95% normal quantile: a reported stderr is the half-width / Z95


@njit(cache=True)
def t_factor(nu: float) -> float:
    """t_{0.975, ν} / z_{0.975}: how much wider a 95% Student-t interval is than a normal one with
    the same standard error (Cornish-Fisher expansion in 1/ν, within 0.3% of the exact quantile
    for ν ≥ 5, 0.7% at ν = 3; ν < 3 is clamped to 3, where the factor is 1.63; 1 for ν = ∞)."""
    if not nu < np.inf:
        return 1.0
    v = max(nu, 3.0)
    z = Z95
    z3 = z * z * z
    z5 = z3 * z * z
    z7 = z5 * z * z
    t = z + (z3 + z) / (4.0 * v) + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * v * v)
    t += (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * v * v * v)
    return t / z

__all__ = ["BatchStore", "STORE_BYTES", "pooled_mean", "batch_stderr", "split_rhat", "effective_sample_size", "batch_statistics",
           "t_factor", "Z95", "expected_misses", "JOINT_MISS"]


STORE_BYTES = 1 << 26  # a batch store's memory cap (its slots shrink on many targets)


class BatchStore:
    """Per-chain batch sums with pairwise merging once ``2·slots`` batches are full."""

    def __init__(self, chains: int, n_targets: int, max_card: int, slots: int = 32, max_bytes: int = STORE_BYTES):
        per_slot = chains * max(n_targets, 1) * (max_card + 1) * 8
        slots = int(max(4, min(slots, max_bytes // max(2 * per_slot, 1))))
        self.slots = slots
        # empty: a slot is assigned when first used, so unused slots are never touched
        self.sums = np.empty((chains, 2 * slots, n_targets, max_card))
        self.counts = np.empty((chains, 2 * slots, n_targets), dtype=np.int64)
        self.filled = 0
        self.rounds_in_current = 0
        self.rounds_per_batch = 1

    def add_round(self, sums: np.ndarray, counts: np.ndarray) -> None:
        """Add one round's per-chain sums ``[chains, targets, card]`` and counts ``[chains, targets]``."""
        if self.filled == 2 * self.slots:
            # merged when the next round arrives, not when the last slot fills: a run of exactly
            # 2·slots rounds (a fixed run) never pays for a merge of the whole store
            s = self.slots
            np.add(self.sums[:, 0::2], self.sums[:, 1::2], out=self.sums[:, :s])
            np.add(self.counts[:, 0::2], self.counts[:, 1::2], out=self.counts[:, :s])
            self.filled = s
            self.rounds_per_batch *= 2
        if self.rounds_in_current == 0:  # a fresh slot: assign (slots are reused after a merge)
            self.sums[:, self.filled] = sums
            self.counts[:, self.filled] = counts
        else:
            self.sums[:, self.filled] += sums
            self.counts[:, self.filled] += counts
        self.rounds_in_current += 1
        if self.rounds_in_current == self.rounds_per_batch:
            self.filled += 1
            self.rounds_in_current = 0

    def batches(self) -> tuple[np.ndarray, np.ndarray]:
        """Sums and counts of the batches so far (a partly filled last batch included)."""
        n = self.filled + (1 if self.rounds_in_current else 0)
        return self.sums[:, :n], self.counts[:, :n]

    @property
    def rounds(self) -> int:
        """Rounds added so far."""
        return self.filled * self.rounds_per_batch + self.rounds_in_current

    def dropped(self, share: float) -> int:
        """Leading batches that cover at most ``share`` of the rounds so far (burn-in as a share
        of the run: whole batches, so the count depends on the number of rounds alone)."""
        if share <= 0.0:
            return 0
        return int(share * self.rounds) // self.rounds_per_batch

    def kept(self, share: float = 0.0) -> tuple[np.ndarray, np.ndarray, int]:
        """Sums and counts of the batches after dropping the leading ``share`` of the run, and
        the number of rounds dropped."""
        s, c = self.batches()
        k = self.dropped(share)
        return s[:, k:], c[:, k:], k * self.rounds_per_batch


def pooled_mean(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Estimate per target and value: all sums over all updates ``[targets, card]`` (0 if none)."""
    tot = sums.sum(axis=(0, 1))
    n = counts.sum(axis=(0, 1)).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = tot / n[:, None]
    return np.where(n[:, None] > 0, out, 0.0)


def batch_stderr(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Standard error by batch means, all chains' batches pooled ``[targets, card]``.

    With unequal batch sizes the ratio-estimator form is used:
    se² = n/(n−1) · Σ_b c_b² (m_b − m)² / (Σ_b c_b)², over the n batches with c_b > 0.
    NaN where a target has fewer than two non-empty batches.
    """
    c = counts.reshape(-1, counts.shape[-1]).astype(np.float64)  # [B, T]
    s = sums.reshape(-1, *sums.shape[-2:])  # [B, T, K]
    m = pooled_mean(sums, counts)
    n = (c > 0).sum(axis=0).astype(np.float64)  # [T]
    ctot = c.sum(axis=0)
    # c_b (m_b − m) = s_b − c_b m (an empty batch adds 0): no division, few temporaries
    dev = s - c[..., None] * m[None]
    np.square(dev, out=dev)
    with np.errstate(invalid="ignore", divide="ignore"):
        var = dev.sum(axis=0) / (ctot[:, None] ** 2) * (n / (n - 1.0))[:, None]
    var = np.where((n >= 2)[:, None], var, np.nan)
    return np.sqrt(var)


def split_rhat(sums: np.ndarray, counts: np.ndarray, constant: np.ndarray | None = None) -> np.ndarray:
    """Split R-hat per target (max over its values), computed on batch means.

    Each chain's batches are cut in two halves, giving 2·chains sequences of n batch means;
    W = mean within-sequence variance, B = n · variance of sequence means,
    R = sqrt(((n−1)/n · W + B/n) / W). NaN with fewer than two batches per half. With one chain
    this is the within-chain split R-hat (the two halves must agree).

    ``constant``: bool[targets], True where a target's full conditional cannot change (it has
    no non-evidence neighbour), so identical batch means are exact. Elsewhere identical batch
    means of a near point-mass conditional mean the chains never moved the target: R-hat is
    +inf ("not mixing"), never 1. ``None``: no target is known to be constant.
    """
    chains, nb = counts.shape[:2]
    n = nb // 2
    if n < 2:
        return np.full(counts.shape[2], np.nan)
    c = counts.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mb = sums / c[..., None]  # NaN for empty batches
    halves = np.concatenate([mb[:, nb - 2 * n : nb - n], mb[:, nb - n :]], axis=0)  # [2C, n, T, K]
    # numpy's nan-aware reductions copy and are several times slower: only when a batch is empty
    mean, var = (np.nanmean, np.nanvar) if (counts[:, nb - 2 * n :] == 0).any() else (np.mean, np.var)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        seq_mean = mean(halves, axis=1)  # [2C, T, K]
        seq_var = var(halves, axis=1, ddof=1)
        w = np.nanmean(seq_var, axis=0)  # [T, K]
        b = n * np.nanvar(seq_mean, axis=0, ddof=1)
        var_plus = (n - 1.0) / n * w + b / n
        r = np.sqrt(var_plus / w)
    # A value whose batch means agree to rounding level carries no signal (padding beyond a
    # target's cardinality, or a value of probability zero). When that holds for every value,
    # the target's conditional never changed: exact for a target whose conditional cannot change,
    # and for any other target a frozen chain, the worst case rather than the best.
    negligible = (w <= _TINY) & (b <= _TINY)
    r = np.where(negligible, 1.0, np.where(w > 0, r, np.inf))
    r = np.where(np.isnan(w) | np.isnan(b), np.nan, r)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = np.nanmax(r, axis=1)
    const = np.zeros(w.shape[0], dtype=bool) if constant is None else np.asarray(constant, dtype=bool)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        top = np.nanmax(np.nanmean(seq_mean, axis=0), axis=1)
    # A chain is frozen when the conditional it keeps adding is (nearly) a point mass: the value
    # never flips. A constant conditional away from the extremes flips the value and is the
    # target's exact conditional (e.g. factors that do not depend on their other arguments).
    frozen = negligible.all(axis=1) & ~const & (top > 1.0 - _FROZEN)
    return np.where(frozen, np.inf, out)


def effective_sample_size(
    estimate: np.ndarray, stderr: np.ndarray, n_draws: np.ndarray, card: np.ndarray, constant: np.ndarray | None = None
) -> np.ndarray:
    """Independent exact draws that would give the same standard error: min over a target's
    values of p(1−p)/se² (Rao-Blackwellised runs can exceed their update count). Where every
    se is 0: the update count for a ``constant`` target (see `split_rhat`), else 0 (a frozen
    chain has no information). A value whose se is the resolution floor Z95 / n_draws
    (`batch_statistics`' ``floor``) says nothing about autocorrelation and is left out; a target
    whose every value is at the floor counts its updates."""
    const = np.zeros(estimate.shape[0], dtype=bool) if constant is None else np.asarray(constant, dtype=bool)
    kmax = estimate.shape[1] if estimate.ndim == 2 else 0
    inside = np.arange(kmax)[None, :] < np.asarray(card)[:, None]
    draws = np.asarray(n_draws, dtype=np.float64)
    ok = inside & np.isfinite(stderr) & (stderr > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        at_floor = ok & (stderr <= (Z95 / np.maximum(draws, 1.0))[:, None] * (1.0 + 1e-9))
    use = ok & ~at_floor
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(use, estimate * (1.0 - estimate) / np.where(use, stderr, 1.0) ** 2, np.inf)
    out = ratio.min(axis=1) if kmax else np.zeros(estimate.shape[0])
    out = np.where(~use.any(axis=1) & at_floor.any(axis=1), draws, out)
    none = ~ok.any(axis=1)
    finite = np.isfinite(np.where(inside, stderr, 0.0)).all(axis=1)
    fallback = np.where(finite, np.where(const, draws, 0.0), np.nan)
    return np.where(none, fallback, out)


# The batch stores reach the kernels below as slices of a larger store (layout 'A') or, with one
# chain or a full store, as contiguous arrays (layout 'C'): two numba signatures, the second
# compiled inside whichever query first met it (seconds on a loaded machine, past its deadline;
# Grids_12's default query). One explicit signature of 'A' arrays takes both.
_STORE = "float64[:, :, :, :], int64[:, :, :], int64"
_OUT = "float64[:, ::1]"


def _batch_stats(sums, counts, nh, mean, se, rhat_v, top, student):
    """Streaming passes over a [chains, batches, targets, card] store (memory order, no
    temporaries the size of the store, which can be hundreds of MB): the pooled mean, the
    widest batch-means se over batch lengths (each as `batch_stderr`), the split R-hat per value (as `split_rhat` before the
    frozen rule; -1 where the spread is negligible, NaN where unknown) and the mean of the
    half-sequence means per value."""
    C, B, T, K = sums.shape
    ctot = np.zeros(T)
    nb = np.zeros(T)
    stot = np.zeros((T, K))
    for c in range(C):
        for b in range(B):
            for t in range(T):
                cb = counts[c, b, t]
                if cb > 0:
                    ctot[t] += cb
                    nb[t] += 1.0
                    for k in range(K):
                        stot[t, k] += sums[c, b, t, k]
    for t in range(T):
        for k in range(K):
            mean[t, k] = stot[t, k] / ctot[t] if ctot[t] > 0 else 0.0
    for t in range(T):
        for k in range(K):
            se[t, k] = np.nan if nb[t] < 2 else 0.0
    # Batch means at the stored batch length and at 2×, 4×, 8×, 16× it (consecutive batches of a
    # chain merged), the largest wins: batches shorter than the chain's memory understate the
    # error, longer ones show it (levels with fewer than 16 batches are skipped). ``student``:
    # each level's se widened by t_{0.975, batches−1} / 1.96 before the comparison.
    gs = np.zeros((T, K))
    gc = np.zeros(T)
    for level in range(_LEVELS):
        width = 1 << level
        groups = (B + width - 1) // width
        if level > 0 and C * groups < _MIN_MERGED_BATCHES:
            break
        dev = np.zeros((T, K))
        ng = np.zeros(T)
        for c in range(C):
            for g0 in range(groups):
                gs[:, :] = 0.0
                gc[:] = 0.0
                for b in range(g0 * width, min(B, (g0 + 1) * width)):
                    for t in range(T):
                        cb = counts[c, b, t]
                        if cb > 0:
                            gc[t] += cb
                            for k in range(K):
                                gs[t, k] += sums[c, b, t, k]
                for t in range(T):
                    if gc[t] > 0:
                        ng[t] += 1.0
                        for k in range(K):
                            d = gs[t, k] - gc[t] * mean[t, k]
                            dev[t, k] += d * d
        for t in range(T):
            if ng[t] >= 2 and nb[t] >= 2:
                for k in range(K):
                    v = np.sqrt(dev[t, k] / (ctot[t] * ctot[t]) * (ng[t] / (ng[t] - 1.0)))
                    if student:
                        v *= t_factor(ng[t] - 1.0)  # a variance from ng batch means: ng − 1 dof
                    if v > se[t, k]:
                        se[t, k] = v
    if nh < 2:
        return
    # half-sequences (chain c, half h): nan-aware over empty batches like nanmean / nanvar(ddof=1)
    s0 = B - 2 * nh
    S = 2 * C
    seqm = np.zeros((S, T, K))
    seqn = np.zeros((S, T))
    for c in range(C):
        for h in range(2):
            q = 2 * c + h
            for b in range(s0 + h * nh, s0 + (h + 1) * nh):
                for t in range(T):
                    cb = counts[c, b, t]
                    if cb > 0:
                        seqn[q, t] += 1.0
                        for k in range(K):
                            seqm[q, t, k] += sums[c, b, t, k] / cb
    for q in range(S):
        for t in range(T):
            for k in range(K):
                seqm[q, t, k] = seqm[q, t, k] / seqn[q, t] if seqn[q, t] > 0 else np.nan
    seqv = np.zeros((S, T, K))
    for c in range(C):
        for h in range(2):
            q = 2 * c + h
            for b in range(s0 + h * nh, s0 + (h + 1) * nh):
                for t in range(T):
                    cb = counts[c, b, t]
                    if cb > 0:
                        for k in range(K):
                            d = sums[c, b, t, k] / cb - seqm[q, t, k]
                            seqv[q, t, k] += d * d
    for t in range(T):
        for k in range(K):
            wsum = 0.0
            wn = 0
            msum = 0.0
            mn = 0
            for q in range(S):
                if seqn[q, t] >= 2:
                    wsum += seqv[q, t, k] / (seqn[q, t] - 1.0)
                    wn += 1
                if seqn[q, t] > 0:
                    msum += seqm[q, t, k]
                    mn += 1
            w = wsum / wn if wn > 0 else np.nan
            mm = msum / mn if mn > 0 else np.nan
            top[t, k] = mm
            bb = np.nan
            if mn >= 2:
                bacc = 0.0
                for q in range(S):
                    if seqn[q, t] > 0:
                        d = seqm[q, t, k] - mm
                        bacc += d * d
                bb = nh * bacc / (mn - 1)
            if np.isnan(w) or np.isnan(bb):
                rhat_v[t, k] = np.nan
            elif w <= _TINY and bb <= _TINY:
                rhat_v[t, k] = -1.0  # negligible: decided per target by the caller
            elif w > 0:
                rhat_v[t, k] = np.sqrt(((nh - 1.0) / nh * w + bb / nh) / w)
            else:
                rhat_v[t, k] = np.inf


def _geyer(sums, counts, nh, se, ess):
    """Multi-chain effective sample size of the batch-mean series and the standard error it
    implies, per target and value (Vehtari et al. 2021, as Stan computes it): the last ``2·nh``
    batches of each chain are cut into two sequences of ``nh`` batch means; autocorrelations
    combine the sequences' autocovariances with their between-sequence variance,
    ρ_t = 1 − (W − mean_q acov_q(t)) / var⁺; Geyer's initial positive and monotone sequence of
    pair sums Γ_k = ρ_2k + ρ_2k+1 gives τ = −1 + 2·Σ Γ_k and ESS = S·nh / τ (S sequences, in
    batch units); se = sqrt(var⁺ / ESS). Left unchanged where a sequence has an empty batch or
    the spread is negligible."""
    C, B, T, K = sums.shape
    S = 2 * C
    s0 = B - 2 * nh
    xs = np.empty((K, S, nh))
    m = np.empty(S)
    for t in range(T):
        full = True
        for c in range(C):
            for b in range(s0, B):
                if counts[c, b, t] <= 0:
                    full = False
        if not full:
            continue
        # one gather per target (its values are contiguous in the store)
        for c in range(C):
            for h in range(2):
                for i in range(nh):
                    b = s0 + h * nh + i
                    inv = 1.0 / counts[c, b, t]
                    for k in range(K):
                        xs[k, 2 * c + h, i] = sums[c, b, t, k] * inv
        for k in range(K):
            x = xs[k]
            for q in range(S):
                acc = 0.0
                for i in range(nh):
                    acc += x[q, i]
                m[q] = acc / nh
            mm = 0.0
            for q in range(S):
                mm += m[q]
            mm /= S
            bvar = 0.0
            for q in range(S):
                bvar += (m[q] - mm) ** 2
            bvar /= S - 1  # B / n
            acov0 = 0.0
            for q in range(S):
                for i in range(nh):
                    d = x[q, i] - m[q]
                    acov0 += d * d
            acov0 /= S * nh  # mean over sequences of the biased lag-0 autocovariance
            w = acov0 * nh / (nh - 1.0)
            var_plus = acov0 + bvar
            if var_plus <= _TINY:
                continue
            # Geyer: pairs (ρ_0 + ρ_1), (ρ_2 + ρ_3), ... while positive, made monotone
            tau = 0.0
            prev = np.inf
            lag = 0
            while lag + 1 < nh:
                pair = 0.0
                for j in range(2):
                    t_ = lag + j
                    ac = 0.0
                    for q in range(S):
                        for i in range(nh - t_):
                            ac += (x[q, i] - m[q]) * (x[q, i + t_] - m[q])
                    ac /= S * nh
                    pair += 1.0 - (w - ac) / var_plus
                if pair <= 0.0:
                    break
                if pair > prev:
                    pair = prev
                tau += pair
                prev = pair
                lag += 2
            tau = max(2.0 * tau - 1.0, 1.0 / np.log10(max(S * nh, 10.0)))
            e = S * nh / tau
            ess[t, k] = e
            se[t, k] = np.sqrt(var_plus / e)


# An explicit signature compiles (or loads from the cache) when the decorator runs: applied at the
# first use, so importing this module (an EXACT query does) loads no sampling kernel.
_LAZY = {"_batch_stats_kernel": (_batch_stats, f"void({_STORE}, {_OUT}, {_OUT}, {_OUT}, {_OUT}, boolean)"),
         "_geyer_kernel": (_geyer, f"void({_STORE}, {_OUT}, {_OUT})")}


def _kernel(name: str):
    k = globals().get(name)
    if k is None:
        fn, sig = _LAZY[name]
        k = globals()[name] = njit(sig, cache=True)(fn)
    return k


def __getattr__(name: str):
    if name in _LAZY:
        return _kernel(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def batch_statistics(
    sums: np.ndarray, counts: np.ndarray, constant: np.ndarray | None = None, *, student: bool = True,
    floor: bool = True, frozen: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(`pooled_mean`, standard errors, `split_rhat`) of a batch store in compiled streaming passes.

    The standard error is calibrated so that ``estimate ± 1.96·stderr`` is a 95% interval
    (docs/inference.md, "Standard errors and coverage"); per target and value it is the widest of

    - batch means (`batch_stderr`) at the stored batch length and with 2, 4, 8 and 16 consecutive
      batches of a chain merged (each level used while it has at least 16 batches): batches
      shorter than the chain's memory understate the error, longer ones show it;
    - the multi-chain effective-sample-size estimate on the batch-mean series (`_geyer_kernel`:
      Geyer's initial monotone sequence over split chains, as Stan), which also counts the
      chains' disagreement;

    each widened by ``t_{0.975,ν}/1.96`` (``student``), ν the estimate's degrees of freedom
    (batches − 1 at a batch-means level, ESS − 1 in batch units for the ESS estimate): a
    variance estimated from a few dozen batch means is itself uncertain, and a normal quantile
    on it under-covers. ``student=False`` gives the plain (normal) widest estimate.

    ``floor``: no standard error below the sampler's resolution, Z95 / n for a target updated n
    times in all (`_resolution_floor`), except for ``constant`` targets, whose conditional is
    exact.

    ``frozen``: a target (not ``constant``) whose every batch mean sits within 1e-6 of one value
    gets R-hat inf (a chain that never moved it); False for independent draws, where that is a
    near-certain value."""
    C, B, T, K = sums.shape
    mean = np.empty((T, K))
    se = np.empty((T, K))
    rv = np.empty((T, K))
    top = np.empty((T, K))
    nh = B // 2
    _kernel("_batch_stats_kernel")(sums, counts, nh, mean, se, rv, top, student)
    if nh >= 4:  # the ESS estimate needs a few lags per sequence
        gse = np.full((T, K), np.nan)
        gess = np.full((T, K), np.nan)
        _kernel("_geyer_kernel")(sums, counts, nh, gse, gess)
        if student:
            gse = gse * _t_factors(gess - 1.0)
        se = np.where(gse > se, gse, se)  # NaN (not estimable) keeps the batch-means value
    if floor:
        se = _resolution_floor(se, counts, constant)
    if nh < 2:
        return mean, se, np.full(T, np.nan)
    negligible = rv == -1.0
    r = np.where(negligible, 1.0, rv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = np.nanmax(r, axis=1) if K else np.full(T, np.nan)
        topv = np.nanmax(top, axis=1) if K else np.zeros(T)
    const = np.zeros(T, dtype=bool) if constant is None else np.asarray(constant, dtype=bool)
    stuck = negligible.all(axis=1) & ~const & (topv > 1.0 - _FROZEN) & frozen
    return mean, se, np.where(stuck, np.inf, out)


def _resolution_floor(se: np.ndarray, counts: np.ndarray, constant: np.ndarray | None) -> np.ndarray:
    """se raised to at least Z95 / n per target, n its updates over all chains and batches.

    A Rao-Blackwellised estimate averages a target's conditional P(v | its context) over the
    contexts the chains visited. Where the marginal of a value comes from contexts too rare to
    have been visited (a value of probability 1e-5 that only a rare configuration of the
    neighbours makes likely), every visited conditional is about the same, the batch means agree
    to 1e-10, and the batch-means and ESS errors claim a precision the run does not have: the
    unvisited contexts can carry any mass that n draws would plausibly not have met. That mass is
    bounded as a zero count is by Wilson's score interval: with n draws and no hit, the 95%
    upper limit is z²/(n + z²) ≈ z²/n, a half-width of z²/n, i.e. a standard error of z/n.
    This only binds on near-deterministic values (an error of at most ~4/n), never on a value
    the run resolves (docs/inference.md, "Standard errors and coverage")."""
    n = counts.sum(axis=(0, 1)).astype(np.float64)  # [T]
    with np.errstate(divide="ignore"):
        lo = np.where(n > 0, Z95 / np.maximum(n, 1.0), np.nan)
    if constant is not None:
        lo = np.where(np.asarray(constant, dtype=bool), 0.0, lo)
    lo = np.nan_to_num(lo, nan=0.0)
    # NaN (not estimable) stays NaN
    return np.where(se < lo[:, None], lo[:, None], se)


def _t_factors(nu: np.ndarray) -> np.ndarray:
    """`t_factor` elementwise (NaN stays NaN, +inf gives 1)."""
    v = np.maximum(np.asarray(nu, dtype=np.float64), 3.0)
    z = Z95
    with np.errstate(divide="ignore", invalid="ignore"):
        t = z + (z**3 + z) / (4.0 * v) + (5.0 * z**5 + 16.0 * z**3 + 3.0 * z) / (96.0 * v * v)
        t = t + (3.0 * z**7 + 19.0 * z**5 + 17.0 * z**3 - 15.0 * z) / (384.0 * v**3)
    return t / z


# The tolerance is met when the expected number of answers off by more than it is at most this:
# every answer within the tolerance with at least 95% confidence jointly (union bound).
JOINT_MISS = 0.05


def expected_misses(se: np.ndarray, cardinality: np.ndarray, tolerance: float) -> float:
    """Expected number of targets (rows of ``se``, ``[targets, max_card]``) with a value off by
    more than ``tolerance``, for errors normal with these standard errors, summed over targets
    (a union bound: at most `JOINT_MISS` means every answer is within ``tolerance`` with
    probability at least 1 − `JOINT_MISS`).

    Per target the values' probabilities are summed too, except for a binary target, whose two
    values are off by the same amount (counted once). NaN (an error not known yet) gives NaN.
    With one target this is the per-answer rule 1.96·stderr ≤ tolerance exactly; with many it
    asks more of the targets whose errors are near the tolerance (a query over 600 variables
    whose 95% half-widths are all just under 0.01 would have ~30 answers off by more).

    >>> import numpy as np
    >>> round(expected_misses(np.array([[0.01 / 1.96, 0.01 / 1.96]]), np.array([2]), 0.01), 3)
    0.05
    """
    se = np.asarray(se, dtype=np.float64)
    if se.size == 0:
        return 0.0
    if np.isnan(se).any():
        return float("nan")
    card = np.asarray(cardinality)
    cols = np.arange(se.shape[1])[None, :]
    valid = cols < card[:, None]
    valid &= ~((card[:, None] == 2) & (cols == 1))  # a binary target's second value repeats its first
    valid &= se > 0.0  # exact (constant) or never-varying: no miss
    return _two_sided_tail_sum(tolerance / se[valid])


def _two_sided_tail_sum(z: np.ndarray) -> float:
    """Σ P(|Z| > z_i) = Σ erfc(z_i/√2) for a standard normal Z and z_i ≥ 0, in numpy (no kernel
    to compile at query time): Abramowitz & Stegun 7.1.26, absolute error under 1.5e-7 per term."""
    x = np.asarray(z, dtype=np.float64) / math.sqrt(2.0)
    x = x[x < 6.0]  # erfc(6) < 3e-17
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return float(np.sum(poly * np.exp(-x * x)))
