"""Set operations on 1-d integer arrays, by sorting.

numpy 2.3+ computes ``np.unique`` (without ``return_*``) by hashing, which on large integer
arrays is 5-10x slower than a sort: 0.55 s against 0.05 s for one million already sorted ids on
the development machine. Query planning calls these on arrays of every variable of a model.
"""

from __future__ import annotations

import numpy as np

__all__ = ["unique", "union"]


def unique(a: np.ndarray) -> np.ndarray:
    """The sorted distinct values of a 1-d array (like ``np.unique(a)``).

    >>> unique(np.array([3, 1, 3, 2])).tolist()
    [1, 2, 3]
    """
    a = np.asarray(a)
    if a.ndim != 1:
        raise ValueError(f"unique() takes a 1-d array, got {a.ndim} dimensions")
    s = np.sort(a)
    if s.size < 2:
        return s
    keep = np.empty(s.shape[0], dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sorted distinct values of both arrays (like ``np.union1d``)."""
    return unique(np.concatenate([np.ravel(a), np.ravel(b)]))
