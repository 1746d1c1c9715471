"""Walker/Vose alias tables: O(1) draws from a fixed discrete distribution.

A table over ``n`` outcomes is two arrays, ``prob`` (float64[n]) and ``alias`` (int32[n]).
A draw takes two uniforms: column ``i = floor(u1 * n)``; keep ``i`` when ``u2 < prob[i]``,
else take ``alias[i]``. Outcome ``k`` is therefore drawn with probability
``(prob[k] + Σ_{i: alias[i] == k} (1 - prob[i])) / n``.

>>> import numpy as np
>>> prob, alias = alias_table(np.array([0.5, 0.25, 0.25]))
>>> int(alias_draw(prob, alias, 0.1, 0.2))
0
"""

from __future__ import annotations

import numba
import numpy as np

from pdbq.errors import InferenceError

__all__ = ["alias_table", "alias_draw", "alias_probabilities"]


@numba.njit(cache=True)
def _vose(p: np.ndarray, prob: np.ndarray, alias: np.ndarray) -> None:
    n = p.shape[0]
    scaled = p * n
    small = np.empty(n, dtype=np.int64)
    large = np.empty(n, dtype=np.int64)
    ns = 0
    nl = 0
    for i in range(n):
        if scaled[i] < 1.0:
            small[ns] = i
            ns += 1
        else:
            large[nl] = i
            nl += 1
    while ns > 0 and nl > 0:
        ns -= 1
        s = small[ns]
        l = large[nl - 1]
        prob[s] = scaled[s]
        alias[s] = l
        # the large column donates what the small one lacks
        scaled[l] = (scaled[l] + scaled[s]) - 1.0
        if scaled[l] < 1.0:
            nl -= 1
            small[ns] = l
            ns += 1
    # leftovers are 1 up to rounding
    for k in range(nl):
        prob[large[k]] = 1.0
        alias[large[k]] = large[k]
    for k in range(ns):
        prob[small[k]] = 1.0
        alias[small[k]] = small[k]


def alias_table(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vose's alias table for the distribution ``p`` (non-negative, summing to 1 within 1e-9).

    Returns ``(prob float64[n], alias int32[n])`` for `alias_draw`. Raises `InferenceError` on an
    empty, negative, non-finite or unnormalised ``p``.
    """
    p = np.ascontiguousarray(p, dtype=np.float64)
    if p.ndim != 1 or p.shape[0] == 0:
        raise InferenceError("an alias table needs a non-empty 1-d probability vector")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise InferenceError("an alias table needs finite, non-negative probabilities")
    total = float(p.sum())
    if abs(total - 1.0) > 1e-9:
        raise InferenceError(f"alias table probabilities sum to {total!r}, not 1")
    prob = np.empty(p.shape[0], dtype=np.float64)
    alias = np.empty(p.shape[0], dtype=np.int32)
    _vose(p / total, prob, alias)
    return prob, alias


@numba.njit(cache=True, inline="always")
def alias_draw(prob: np.ndarray, alias: np.ndarray, u1: float, u2: float) -> int:
    """One draw (an index into the table) from two independent uniforms in [0, 1)."""
    n = prob.shape[0]
    i = int(u1 * n)
    if i >= n:  # u1 rounding to 1.0 in float32 callers
        i = n - 1
    if u2 < prob[i]:
        return i
    return alias[i]


def alias_probabilities(prob: np.ndarray, alias: np.ndarray) -> np.ndarray:
    """The exact distribution a table draws from (for checks): see the module docstring."""
    n = prob.shape[0]
    out = prob.astype(np.float64).copy()
    np.add.at(out, alias.astype(np.int64), 1.0 - prob)
    return out / n
