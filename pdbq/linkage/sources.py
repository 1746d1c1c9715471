"""Records of several sources in one table: keep only the candidate pairs across sources.

`pdbq.link` stacks its sources with a source column; under link_only, `dedupe` drops the
within-source pairs with `cross_source` before clustering.
"""

from __future__ import annotations

import numpy as np
from sqlglot import exp

from pdbq.coref.model import MENTION, RECORDS, PairFeatures
from pdbq.coref.pair_model import PairScores

__all__ = ["cross_source", "source_groups"]


def _q(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def source_groups(con, column: str) -> np.ndarray:
    """Each loaded record's source as a dense int32 code (in mention order): the cannot-link
    groups of a one-to-one link (no entity holds two records of one source)."""
    q = exp.select(exp.column(_q(column))).from_(RECORDS).order_by(exp.column(_q(MENTION)))
    src = np.asarray(next(iter(con.execute(q.sql(dialect="duckdb")).fetchnumpy().values())))
    return np.unique(src, return_inverse=True)[1].reshape(-1).astype(np.int32)


def cross_source(con, column: str, pairs):
    """The candidate pairs of `pairs` (a `PairFeatures` or `PairScores`: dense indices a, b and
    per-pair rows) whose records differ in `column` of the loaded records."""
    q = exp.select(exp.column(_q(column))).from_(RECORDS).order_by(exp.column(_q(MENTION)))
    src = np.asarray(next(iter(con.execute(q.sql(dialect="duckdb")).fetchnumpy().values())))
    keep = src[pairs.a] != src[pairs.b]
    if isinstance(pairs, PairFeatures):
        return PairFeatures(pairs.a[keep], pairs.b[keep], pairs.x[keep], pairs.names)
    return PairScores(pairs.a[keep], pairs.b[keep], pairs.levels[keep], pairs.contributions[keep],
                      pairs.match_weight[keep], pairs.prior_bits)
