"""Feature counts per weight: the sufficient statistics whose clamped − free difference is the
gradient of the log-likelihood.

Feature of weight k in a state x (docs/learning.md): the sum over its groundings of φ_f(x) for
an ungrouped factor f, and of g(Σ_{f ∈ G} φ_f(x)) for a head group G (semantics g); the energy
is Σ_k w_k · F_k(x), so ∂ log P / ∂ w_k = F_k(x_data) − E[F_k].
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pdbq.graph.layout import FactorGraph
from pdbq.inference.mcmc.kernels import _phi, group_value

__all__ = ["feature_totals", "grounding_counts"]


@njit(cache=True, nogil=True)
def _feature_totals(fn, fo, to, fvars, lits, card, tables, weight, group, semantics, group_weight,
                    values, gbuf, out_sum, out_sq, start, end):
    for k in range(out_sum.shape[0]):
        out_sum[k] = 0.0
        out_sq[k] = 0.0
    for gr in range(gbuf.shape[0]):
        gbuf[gr] = 0.0
    for f in range(start, end):
        phi = _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, values, -1, 0)
        gr = group[f]
        if gr >= 0:
            gbuf[gr] += phi
        else:
            k = weight[f]
            out_sum[k] += phi
            out_sq[k] += phi * phi
    for gr in range(gbuf.shape[0]):
        val = group_value(semantics[gr], gbuf[gr])
        k = group_weight[gr]
        out_sum[k] += val
        out_sq[k] += val * val


def feature_totals(g: FactorGraph, tables: np.ndarray, values: np.ndarray, out_sum: np.ndarray, out_sq: np.ndarray,
                   start: int = 0, end: int | None = None) -> None:
    """out_sum[k] = F_k(values) and out_sq[k] = the sum of the squared per-grounding features
    (float64[n_weights] each, overwritten), over factors ``start .. end`` (a range is for graphs
    without head groups: the parts of a split are summed). ``tables``: the kernel graph's
    clamped tables."""
    gbuf = np.zeros(g.n_groups)
    _feature_totals(
        g.function, g.factor_offsets, g.table_offset, g.factor_vars, g.factor_literals, g.cardinality, tables,
        g.weight, g.group, g.semantics, g.group_weight, values, gbuf, out_sum, out_sq,
        start, g.n_factors if end is None else end,
    )


def grounding_counts(g: FactorGraph) -> np.ndarray:
    """n_w: groundings per weight (ungrouped factors plus head groups), int64[n_weights]."""
    nw = g.weights.shape[0]
    ungrouped = g.weight[g.group < 0]
    counts = np.bincount(ungrouped, minlength=nw).astype(np.int64) if ungrouped.size else np.zeros(nw, np.int64)
    if g.n_groups:
        counts += np.bincount(g.group_weight, minlength=nw).astype(np.int64)
    return counts
