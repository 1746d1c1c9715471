"""Synthetic models sampled exactly from known weights, with the exact standard errors of the
maximum-likelihood weights: for tests and benchmarks of learning (docs/learning.md).

The *pair-unit* model: n independent units, each two booleans a, b with features
ISTRUE(a), ISTRUE(b), EQUAL(a, b) (±1 values, pdbq's factor functions) and weights
w = (w_a, w_b, w_eq). A unit has four states, so the data are drawn exactly and the Fisher
information per unit, Cov_w[φ], is computed by enumeration: the maximum-likelihood weights from n
units have standard errors sqrt(diag((n · Cov_w[φ])⁻¹)).

>>> d = pair_units(1000, (0.5, -0.2, 1.0), seed=1)
>>> d.a.shape, bool(np.all(d.stderr > 0))
((1000,), True)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

__all__ = ["PairUnits", "pair_units", "pair_features", "pair_mle"]

_STATES = np.array(list(itertools.product([0, 1], repeat=2)), dtype=np.int64)


def pair_features(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """float64[n, 3]: (ISTRUE(a), ISTRUE(b), EQUAL(a, b)) as ±1."""
    a = np.asarray(a)
    b = np.asarray(b)
    return np.stack([2.0 * a - 1.0, 2.0 * b - 1.0, np.where(a == b, 1.0, -1.0)], axis=1)


_FEATS = pair_features(_STATES[:, 0], _STATES[:, 1])


def _dist(w: np.ndarray) -> np.ndarray:
    z = _FEATS @ w
    p = np.exp(z - z.max())
    return p / p.sum()


def _cov(w: np.ndarray) -> np.ndarray:
    p = _dist(w)
    d = _FEATS - p @ _FEATS
    return (d * p[:, None]).T @ d


@dataclass(frozen=True, eq=False)
class PairUnits:
    a: np.ndarray  # int64[n]
    b: np.ndarray  # int64[n]
    weights: np.ndarray  # the true weights
    stderr: np.ndarray  # exact asymptotic standard errors of the MLE at the true weights


def pair_units(n: int, weights: tuple[float, float, float], seed: int) -> PairUnits:
    w = np.asarray(weights, dtype=np.float64)
    rng = np.random.default_rng(seed)
    s = rng.choice(4, size=n, p=_dist(w))
    se = np.sqrt(np.diag(np.linalg.inv(n * _cov(w))))
    return PairUnits(_STATES[s, 0].copy(), _STATES[s, 1].copy(), w, se)


def pair_mle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The exact maximum-likelihood weights of the pair-unit model (Newton's method)."""
    target = pair_features(a, b).mean(axis=0)
    w = np.zeros(3)
    for _ in range(100):
        p = _dist(w)
        step = np.linalg.solve(_cov(w), target - p @ _FEATS)
        w += step
        if np.max(np.abs(step)) < 1e-12:
            break
    return w
