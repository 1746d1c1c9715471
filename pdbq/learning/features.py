"""Feature counts per weight and a kernel graph whose updates read the weights live.

Learning changes the weights every epoch. `prepare_kernel_graph` folds weights into its fast
paths (unary biases, pair slopes), so a kernel graph made from it would have to be rebuilt
after each update; `live_kernel_graph` instead puts every factor of every variable on the
Gibbs kernel's *general* path, which reads ``graph.weights`` at each update. The learner keeps
one weights array shared by the graph NamedTuples of both worlds and updates it in place
between epochs, so the persistent chains (`pdbq.inference.kernels.run_chain`) always sample
from the current model.

Feature of weight k in a state x (docs/learning.md): the sum over its groundings of φ_f(x) for
an ungrouped factor f, and of g(Σ_{f ∈ G} φ_f(x)) for a head group G (semantics g); the energy
is Σ_k w_k · F_k(x), so ∂ log P / ∂ w_k = F_k(x_data) − E[F_k].
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pdbq.graph.layout import FactorGraph
from pdbq.inference.kernels import HARD, KernelGraph, _phi, group_value

__all__ = ["live_kernel_graph", "feature_totals", "grounding_counts"]


def live_kernel_graph(g: FactorGraph) -> KernelGraph:
    """A `KernelGraph` with no precomputed fast paths: every (variable, factor) pair is a
    general entry, sorted by (group, factor) per variable (the order of ``g.var_factors``),
    one entry per factor even where a variable fills several slots."""
    nv = g.n_vars
    tables = g.tables.copy()
    if tables.size:
        np.clip(tables, -HARD, HARD, out=tables)
    edge_var = np.repeat(np.arange(nv, dtype=np.int64), np.diff(g.var_offsets))
    vf = g.var_factors
    keep = np.ones(vf.shape[0], dtype=bool)
    if vf.shape[0] > 1:
        keep[1:] = (edge_var[1:] != edge_var[:-1]) | (vf[1:] != vf[:-1])
    gen_factor = np.ascontiguousarray(vf[keep], dtype=np.int32)
    gen_var = edge_var[keep]
    gen_group = np.ascontiguousarray(g.group[gen_factor], dtype=np.int32) if gen_factor.size else np.zeros(0, np.int32)
    gen_off = np.zeros(nv + 1, dtype=np.int64)
    if gen_var.size:
        np.cumsum(np.bincount(gen_var, minlength=nv), out=gen_off[1:])
    max_groups = 0
    grouped = gen_group >= 0
    if grouped.any():
        first = np.ones(gen_group.shape[0], dtype=bool)
        first[1:] = (gen_var[1:] != gen_var[:-1]) | (gen_group[1:] != gen_group[:-1])
        max_groups = int(np.bincount(gen_var[first & grouped], minlength=nv).max())
    card = g.cardinality.astype(np.int64)
    val_off = np.zeros(nv + 1, dtype=np.int64)
    np.cumsum(card, out=val_off[1:])
    empty_off = np.zeros(nv + 1, dtype=np.int64)
    return KernelGraph(
        tables=tables,
        bbias=np.zeros(nv),
        val_off=val_off,
        cbias=np.zeros(int(val_off[-1])),
        bb_off=empty_off,
        bb_other=np.zeros(0, np.int32),
        bb_b=np.zeros(0),
        pt_off=empty_off,
        pt_other=np.zeros(0, np.int32),
        pt_tab_off=np.zeros(0, np.int64),
        pt_tab=np.zeros(0),
        gen_off=gen_off,
        gen_factor=gen_factor,
        gen_group=gen_group,
        max_card=int(card.max()) if nv else 2,
        max_groups=max_groups,
    )


@njit(cache=True, nogil=True)
def _feature_totals(fn, fo, to, fvars, lits, card, tables, weight, group, semantics, group_weight,
                    values, gbuf, out_sum, out_sq):
    for k in range(out_sum.shape[0]):
        out_sum[k] = 0.0
        out_sq[k] = 0.0
    for gr in range(gbuf.shape[0]):
        gbuf[gr] = 0.0
    for f in range(fn.shape[0]):
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


def feature_totals(g: FactorGraph, tables: np.ndarray, values: np.ndarray, out_sum: np.ndarray, out_sq: np.ndarray) -> None:
    """out_sum[k] = F_k(values) and out_sq[k] = the sum of the squared per-grounding features
    (float64[n_weights] each, overwritten). ``tables``: the kernel graph's clamped tables."""
    gbuf = np.zeros(g.n_groups)
    _feature_totals(
        g.function, g.factor_offsets, g.table_offset, g.factor_vars, g.factor_literals, g.cardinality, tables,
        g.weight, g.group, g.semantics, g.group_weight, values, gbuf, out_sum, out_sq,
    )


def grounding_counts(g: FactorGraph) -> np.ndarray:
    """n_w: groundings per weight (ungrouped factors plus head groups), int64[n_weights]."""
    nw = g.weights.shape[0]
    ungrouped = g.weight[g.group < 0]
    counts = np.bincount(ungrouped, minlength=nw).astype(np.int64) if ungrouped.size else np.zeros(nw, np.int64)
    if g.n_groups:
        counts += np.bincount(g.group_weight, minlength=nw).astype(np.int64)
    return counts
