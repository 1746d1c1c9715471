"""The pair-score graph of a coreference model: a symmetric CSR over candidate pairs only.

A coreference model over n mentions scores a clustering y by
ψ(y) = Σ_e Σ_{i<j ∈ e, (i,j) candidate} w_ij   (seed 000 §4.2),
so pairs that blocking never proposed contribute 0 and are never stored. The layout:

    indptr  int64[n+1]   neighbours of mention m are nbr[indptr[m]:indptr[m+1]]
    nbr     int32[nnz]   neighbour mention indices, sorted within a row, no self pairs
    score   float64[nnz] the pair's score w_ij (affinity > 0, repulsion < 0)

Every unordered pair is stored twice (i→j and j→i) with the same score, so a move that changes
mention m's entity reads only row m, and a merge reads only the rows of the smaller entity.
Mentions are the dense indices 0..n-1; `ids` maps them back to the user's ids.

>>> g = pair_graph(3, np.array([0]), np.array([1]), np.array([2.0]))
>>> g.indptr.tolist(), g.nbr.tolist(), g.score.tolist()
([0, 1, 2, 2], [1, 0], [2.0, 2.0])
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pdbq.errors import CorefInputError, PdbqError  # noqa: F401 - CorefInputError is re-exported

__all__ = ["PairGraph", "pair_graph", "validate_pair_graph", "CorefInputError"]


class PairGraph(NamedTuple):
    """Symmetric CSR of candidate pairs with their scores (module docstring)."""

    indptr: np.ndarray
    nbr: np.ndarray
    score: np.ndarray

    @property
    def n_mentions(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def n_pairs(self) -> int:
        """Unordered candidate pairs (half the stored entries)."""
        return int(self.nbr.shape[0] // 2)

    def nbytes(self) -> int:
        return int(self.indptr.nbytes + self.nbr.nbytes + self.score.nbytes)


def pair_graph(n: int, a: np.ndarray, b: np.ndarray, w: np.ndarray) -> PairGraph:
    """Build the layout from unordered pairs (a[k], b[k]) with scores w[k] over mentions 0..n-1.

    Raises `CorefInputError` for out-of-range or self pairs, duplicates or non-finite scores.
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    w = np.asarray(w, dtype=np.float64)
    if not (a.shape == b.shape == w.shape) or a.ndim != 1:
        raise CorefInputError("pair arrays a, b, w must be one-dimensional and of equal length")
    if n < 0 or n >= 2**31 - 1:
        raise CorefInputError(f"number of mentions must be in [0, 2**31 - 1), got {n}")
    if a.size:
        if min(a.min(), b.min()) < 0 or max(a.max(), b.max()) >= n:
            raise CorefInputError(f"pair endpoints must be mention indices in [0, {n})")
        if np.any(a == b):
            raise CorefInputError("a mention cannot be paired with itself")
        if not np.all(np.isfinite(w)):
            k = int(np.flatnonzero(~np.isfinite(w))[0])
            raise CorefInputError(f"pair score of ({a[k]}, {b[k]}) is {w[k]}; scores must be finite")
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    key = lo * n + hi
    step = np.diff(key)
    if not np.all(step > 0):  # not already in (a, b) order (the front door's pairs are): sort once
        order = np.argsort(key, kind="stable")
        key, lo, hi, w = key[order], lo[order], hi[order], w[order]
        step = np.diff(key)
        if key.size and np.any(step == 0):
            k = int(np.flatnonzero(step == 0)[0])
            raise CorefInputError(f"pair ({lo[k]}, {hi[k]}) is listed more than once")
    del key, step
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(lo, minlength=n) + np.bincount(hi, minlength=n), out=indptr[1:])
    nbr = np.empty(2 * lo.size, np.int32)
    score = np.empty(2 * lo.size, np.float64)
    _fill_rows(indptr, np.bincount(hi, minlength=n), lo, hi, w, nbr, score)
    return PairGraph(indptr, nbr, score)


@njit(cache=True)
def _fill_rows(indptr, n_lower, lo, hi, w, nbr, score):
    """Place the pairs, sorted by (lo, hi), in both rows: row r holds its lower neighbours
    (from the pairs (i, r)) before its higher ones (from (r, j)), each run ascending because
    the pairs arrive in that order, so every row comes out sorted with no further sort."""
    n = indptr.shape[0] - 1
    below = indptr[:n].copy()
    above = indptr[:n] + n_lower
    for p in range(lo.shape[0]):
        i = lo[p]
        j = hi[p]
        nbr[above[i]] = j
        score[above[i]] = w[p]
        above[i] += 1
        nbr[below[j]] = i
        score[below[j]] = w[p]
        below[j] += 1


def validate_pair_graph(g: PairGraph) -> PairGraph:
    """Check dtypes and shapes before a kernel runs (kernels never check)."""
    if g.indptr.dtype != np.int64 or g.nbr.dtype != np.int32 or g.score.dtype != np.float64:
        raise CorefInputError("PairGraph arrays must be int64 indptr, int32 nbr, float64 score")
    n = g.indptr.shape[0] - 1
    if n < 0 or g.indptr[0] != 0 or g.indptr[-1] != g.nbr.shape[0] or g.nbr.shape != g.score.shape:
        raise CorefInputError("PairGraph indptr does not match nbr/score")
    if np.any(np.diff(g.indptr) < 0):
        raise CorefInputError("PairGraph indptr must be non-decreasing")
    if g.nbr.size and (g.nbr.min() < 0 or g.nbr.max() >= n):
        raise CorefInputError("PairGraph neighbour index out of range")
    return g
