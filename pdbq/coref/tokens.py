"""A pair model scored on demand from per-mention token sets (seed 000's setting: factors are
computed when a move looks at them, for every pair inside an entity, not read from a table).

    w(i, j) = Σ_f weight[f] · |T_f(i) ∩ T_f(j)| / |T_f(i) ∪ T_f(j)|  −  bias

over fields f (e.g. title words, citation words, author names, year), with 0 for a field where
both sets are empty. Unlike a `PairGraph`, whose non-candidate pairs score 0, *every* pair of
mentions in one entity contributes: ψ(y) = Σ_e Σ_{i<j ∈ e} w(i, j). Blocking then only shapes
the proposals (the candidate graph's neighbours), as in the paper's Cora model.

Layout (`TokenModel`, F fields, n mentions):
    indptr  int64[F, n+1]  tokens of mention m in field f are tok[indptr[f, m]:indptr[f, m+1]]
    tok     int32[nnz]     token ids, strictly increasing within a (field, mention)
    weight  float64[F]
    bias    float64[1]
`pair_score` is one sorted-merge intersection per field: O(|T(i)| + |T(j)|).

>>> tm = token_model([[["a", "b"], ["b"], []]], [2.0], 1.0)
>>> round(float(pair_score(tm, 0, 1)), 3), float(pair_score(tm, 2, 2))
(0.0, -1.0)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np
from numba import njit

from pdbq.coref.layout import CorefInputError

__all__ = ["TokenModel", "empty_token_model", "pair_score", "token_model", "token_partition_score"]


class TokenModel(NamedTuple):
    indptr: np.ndarray
    tok: np.ndarray
    weight: np.ndarray
    bias: np.ndarray

    @property
    def n_fields(self) -> int:
        return int(self.weight.shape[0])

    @property
    def n_mentions(self) -> int:
        return int(self.indptr.shape[1] - 1)


def empty_token_model() -> TokenModel:
    """No fields: kernels that take a `TokenModel` read stored pair scores instead."""
    return TokenModel(np.zeros((0, 1), np.int64), np.zeros(0, np.int32), np.zeros(0), np.zeros(1))


def token_model(fields: Sequence[Sequence[Iterable[str]]], weights: Sequence[float], bias: float) -> TokenModel:
    """Build the layout from fields[f][m] (the tokens of mention m in field f; duplicates are
    dropped), one weight per field and the bias. Raises `CorefInputError` on ragged input or
    non-finite numbers."""
    if len(fields) != len(weights) or not fields:
        raise CorefInputError("token_model needs one weight per field and at least one field")
    n = len(fields[0])
    if any(len(f) != n for f in fields):
        raise CorefInputError("every field must list the tokens of the same mentions")
    w = np.asarray(weights, dtype=np.float64)
    if not np.all(np.isfinite(w)) or not np.isfinite(bias):
        raise CorefInputError("token model weights and bias must be finite")
    vocab: dict[str, int] = {}
    indptr = np.zeros((len(fields), n + 1), np.int64)
    chunks = []
    pos = 0
    for f, field in enumerate(fields):
        for m, toks in enumerate(field):
            ids = np.unique(np.array([vocab.setdefault(str(t), len(vocab)) for t in toks], np.int64))
            chunks.append(ids.astype(np.int32))
            indptr[f, m] = pos
            pos += ids.size
        indptr[f, n] = pos
    tok = np.concatenate(chunks) if chunks else np.zeros(0, np.int32)
    return TokenModel(indptr, tok.astype(np.int32), w, np.array([float(bias)]))


@njit(cache=True, inline="always")
def pair_score(tm, i, j):
    """w(i, j) of the module docstring, computed now (the factor evaluation)."""
    total = -tm.bias[0]
    for f in range(tm.weight.shape[0]):
        a = tm.indptr[f, i]
        a1 = tm.indptr[f, i + 1]
        b = tm.indptr[f, j]
        b1 = tm.indptr[f, j + 1]
        na = a1 - a
        nb = b1 - b
        if na + nb == 0:
            continue
        inter = 0
        while a < a1 and b < b1:
            x = tm.tok[a]
            y = tm.tok[b]
            if x == y:
                inter += 1
                a += 1
                b += 1
            elif x < y:
                a += 1
            else:
                b += 1
        total += tm.weight[f] * inter / (na + nb - inter)
    return total


@njit(cache=True)
def token_partition_score(tm, label):
    """ψ(y) = Σ over all within-entity pairs of w(i, j): O(Σ_e |e|²)."""
    n = label.shape[0]
    order = np.argsort(label, kind="mergesort")
    total = 0.0
    a = 0
    while a < n:
        b = a
        while b < n and label[order[b]] == label[order[a]]:
            b += 1
        for p in range(a, b):
            for q in range(p + 1, b):
                total += pair_score(tm, order[p], order[q])
        a = b
    return total
