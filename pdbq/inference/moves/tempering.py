"""Replica exchange (parallel tempering): the ladder of inverse temperatures and the swap move.

Each chain runs K copies; copy k targets p_k(x) ∝ exp(β_k · E(x)) with 1 = β_0 > β_1 > … > β_{K−1}
(E the energy of docs/factors.md, zero entries clamped to −HARD as in the kernels). Hot copies
cross barriers; a swap of neighbours k, k+1 exchanges their states with probability

    min(1, exp((β_k − β_{k+1}) · (E(x_{k+1}) − E(x_k))))

which leaves the product ∏ p_k invariant (Metropolis on the product space), so the β = 1 copy
is a valid chain for p and the only one the estimates read.

The ladder adapts during burn-in only (after it the kernel is fixed, so the chain is a
time-homogeneous Markov chain again): gaps in log β follow the per-pair swap rates towards
`SWAP_TARGET` (a rate above it widens the gap, below narrows it).

>>> b = initial_ladder(4, 0.125)
>>> [round(float(x), 3) for x in b]
[1.0, 0.5, 0.25, 0.125]
>>> swap_probability(1.0, 0.5, -3.0, -1.0)
1.0
"""

from __future__ import annotations

import math

import numpy as np

from pdbq.errors import InferenceError
from pdbq.inference.mcmc.transition import Kernel

__all__ = ["SWAP_TARGET", "MIN_BETA", "initial_ladder", "adapt_ladder", "swap_probability", "swap_kernel"]

SWAP_TARGET = 0.3
MIN_BETA = 1e-3


def initial_ladder(k: int, beta_min: float) -> np.ndarray:
    """K inverse temperatures, geometric from 1 down to ``beta_min``."""
    if k < 1:
        raise InferenceError(f"tempering needs at least one copy, got {k}")
    if k == 1:
        return np.ones(1)
    if not 0 < beta_min < 1:
        raise InferenceError(f"tempering: the lowest inverse temperature must lie in (0, 1), got {beta_min!r}")
    return np.exp(np.linspace(0.0, math.log(beta_min), k))


def adapt_ladder(betas: np.ndarray, rates: np.ndarray, target: float = SWAP_TARGET, step: float = 0.5,
                 floor: float = MIN_BETA) -> np.ndarray:
    """A new ladder: each gap in log β scaled by exp(step · (rate − target)); β_0 stays 1 and no β
    goes below ``floor`` (easy swaps at the hot end would otherwise push it towards 0, where
    copies only cost time)."""
    if betas.shape[0] < 2:
        return betas.copy()
    gaps = -np.diff(np.log(betas))
    gaps = gaps * np.exp(step * (np.asarray(rates, dtype=np.float64) - target))
    low = math.log(max(floor, MIN_BETA))
    if gaps.sum() > -low:
        gaps = gaps * (-low / gaps.sum())  # same proportions, hottest copy at the floor
    logb = np.concatenate([[0.0], -np.cumsum(gaps)])
    return np.exp(logb)


def swap_probability(beta_a: float, beta_b: float, energy_a: float, energy_b: float) -> float:
    """Acceptance probability of exchanging the states of copies at β_a and β_b."""
    d = (beta_a - beta_b) * (energy_b - energy_a)
    return 1.0 if d >= 0 else math.exp(d)


def swap_kernel(log_energy: np.ndarray, betas: np.ndarray, pair: int) -> Kernel:
    """The swap move of copies ``pair`` and ``pair + 1`` as an explicit matrix over the product
    space of K copies (state index = row-major over copies, copy 0 most significant), given
    E over every single-copy state. For `transition.check_kernel` (tests)."""
    n = log_energy.shape[0]
    k = betas.shape[0]
    total = n**k
    idx = np.indices((n,) * k).reshape(k, -1).T
    cols = np.empty((total, 2), dtype=np.int64)
    vals = np.empty((total, 2))
    strides = n ** np.arange(k - 1, -1, -1)
    for s in range(total):
        x = idx[s]
        a = swap_probability(float(betas[pair]), float(betas[pair + 1]), float(log_energy[x[pair]]), float(log_energy[x[pair + 1]]))
        y = x.copy()
        y[pair], y[pair + 1] = x[pair + 1], x[pair]
        cols[s] = (int((y * strides).sum()), s)
        vals[s] = (a, 1.0 - a)
    return Kernel(cols, vals)
