"""Scores as unevaluated sums hi + lo (double-double): annealing's running score, so that a move
worth 0.7 still counts beside a running score of 1e20 (a plain float64 sum would drop it).

>>> hi, lo = dd_add(1e20, 0.0, 0.7)
>>> hi, lo = dd_add(hi, lo, -1e20)
>>> round(hi + lo, 12)
0.7
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["dd_add", "dd_above"]


@njit(cache=True)
def dd_add(hi, lo, x):
    """(hi + lo) + x as a new unevaluated pair (TwoSum, then a renormalising FastTwoSum)."""
    s = hi + x
    bp = s - hi
    e = (hi - (s - bp)) + (x - bp)
    lo = lo + e
    h = s + lo
    return h, lo - (h - s)


@njit(cache=True)
def dd_above(hi, lo, bscore, dd):
    """Whether the running score hi (+ lo) exceeds the saved best (bscore[1] (+ bscore[3]))."""
    if not dd:
        return hi > bscore[1]
    if hi == np.inf or bscore[1] == -np.inf:
        return hi > bscore[1]
    return (hi - bscore[1]) + (lo - bscore[3]) > 0.0
