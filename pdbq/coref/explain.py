"""Explanations of pair scores: each field's comparison level and its contribution to the weight.

A pair's match weight is a sum: one term per field comparison plus a constant (the prior or the
bias), so it explains itself term by term. `explain_pairs` returns that sum as rows, one per
(pair, term):

    id_l, id_r, term, level, contribution, match_weight

`term` is the field (``field:method`` for linear comparisons) or ``(constant)``; `level` is
what the comparison found for the pair (the estimated model's level name, e.g. ``exact`` or
``jaro_winkler>=0.92``; the similarity for a linear comparison; NULL when either value is NULL: no
evidence); `contribution` the term's share of `match_weight`. Units (the table's schema
metadata ``unit``): bits, i.e. log2 Bayes factors, for the estimated model (the constant is
the prior's log2 odds, and P(match) of the pair alone is 1 / (1 + 2^−weight)); the score's own
units for linear comparisons. The front door (`pdbq.linkage.explain`, which adds waterfall
charts) and SQL's ``EXPLAIN MATCH`` both answer with these rows.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

from pdbq.coref.layout import CorefInputError
from pdbq.coref.model import CorefModel, PairFeatures
from pdbq.coref.pair_model import PairModel, PairScores

__all__ = ["CONSTANT", "Terms", "terms_linear", "terms_estimated", "explain_pairs"]

CONSTANT = "(constant)"


class Terms(NamedTuple):
    """A pair model's match weights as sums: candidate pairs (dense indices a, b), per term
    (field) its name, per pair and term the level found (str; None: NULL, no evidence) and the
    contribution, and the constant every pair starts from. `unit`: "bits" (log2 Bayes factors,
    the estimated model) or "score" (the linear model's own units)."""

    a: np.ndarray
    b: np.ndarray
    names: tuple[str, ...]
    levels: np.ndarray
    contributions: np.ndarray
    constant: float
    unit: str


def terms_linear(model: CorefModel, features: PairFeatures) -> Terms:
    """Terms of the linear model Σ weight·(sim − center) − bias: the level is the similarity."""
    x = features.x
    levels = np.char.mod("%.3f", np.nan_to_num(x)).astype(object)
    levels[np.isnan(x)] = None
    contrib = np.nan_to_num((x - model.centers()) * model.weights(), nan=0.0)
    return Terms(features.a, features.b, features.names, levels, contrib, 0.0 - float(model.bias), "score")


def terms_estimated(model: PairModel, scores: PairScores) -> Terms:
    """Terms of the estimated Fellegi–Sunter model: each field's level name and its log2 Bayes
    factor (term-frequency adjusted where it was), the constant the prior's log2 odds."""
    levels = np.empty(scores.levels.shape, dtype=object)
    for k, f in enumerate(model.fields):
        names = np.array([*f.levels.names, None], dtype=object)  # level -1 (NULL) -> None
        levels[:, k] = names[scores.levels[:, k].astype(np.int64)]
    return Terms(scores.a, scores.b, tuple(f.field for f in model.fields), levels, scores.contributions,
                 float(scores.prior_bits), "bits")


def explain_pairs(ids: np.ndarray, terms: Terms, *, id_l=None, id_r=None) -> pa.Table:
    """Rows (id_l, id_r, term, level, contribution, match_weight) for every candidate pair, or
    for the pairs given by the aligned id arrays `id_l`, `id_r` (either order; a pair that is not
    a candidate pair is a `CorefInputError` naming it). Module docstring."""
    ids = np.asarray(ids)
    names, levels, contrib, const = terms.names, terms.levels, terms.contributions, terms.constant
    rows = np.arange(terms.a.size)
    if id_l is not None or id_r is not None:
        rows = _rows_of(ids, terms, np.atleast_1d(np.asarray(id_l)), np.atleast_1d(np.asarray(id_r)))
    k = len(names)
    p = rows.size
    weight = contrib[rows].sum(axis=1) + const
    lv = np.concatenate([levels[rows], np.full((p, 1), None, dtype=object)], axis=1).reshape(-1)
    ct = np.concatenate([contrib[rows], np.full((p, 1), const)], axis=1).reshape(-1)
    table = pa.table({
        "id_l": pa.array(np.repeat(ids[terms.a[rows]], k + 1)),
        "id_r": pa.array(np.repeat(ids[terms.b[rows]], k + 1)),
        "term": pa.array(np.tile(np.array([*names, CONSTANT], dtype=object), p), pa.string()),
        "level": pa.array(lv, pa.string()),
        "contribution": pa.array(ct, pa.float64()),
        "match_weight": pa.array(np.repeat(weight, k + 1), pa.float64()),
    })
    return table.replace_schema_metadata({"unit": terms.unit})


def _rows_of(ids, terms, left, right):
    if left.shape != right.shape:
        raise CorefInputError("id_l and id_r must be aligned (equal length)")
    order = np.argsort(ids, kind="stable")
    sid = ids[order]

    def dense(x):
        pos = np.clip(np.searchsorted(sid, x), 0, max(sid.size - 1, 0))
        bad = sid[pos] != x if sid.size else np.ones(x.shape, bool)
        if np.any(bad):
            raise CorefInputError(f"id {x[np.flatnonzero(bad)[0]]!r} is not a record id")
        return order[pos].astype(np.int64)

    a, b = dense(left), dense(right)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    n = max(ids.size, 1)
    key = terms.a.astype(np.int64) * n + terms.b
    srt = np.argsort(key, kind="stable")
    want = lo * n + hi
    pos = np.clip(np.searchsorted(key[srt], want), 0, max(key.size - 1, 0))
    bad = key[srt][pos] != want if key.size else np.ones(want.shape, bool)
    if np.any(bad):
        j = int(np.flatnonzero(bad)[0])
        raise CorefInputError(f"({left[j]!r}, {right[j]!r}) is not a candidate pair (blocking never compared them)")
    return srt[pos]
