"""Subgraph extraction by variable set (pure numpy).

>>> # g2, old_ids = subgraph(g, np.array([0, 3, 4]))   # g2's variable i is g's old_ids[i]
"""

from __future__ import annotations

import numpy as np

from pdbq.arrays import unique
from pdbq.graph.layout import NO_GROUP, FactorGraph, GraphError, validate

__all__ = ["subgraph", "var_csr"]


def var_csr(factor_offsets: np.ndarray, factor_vars: np.ndarray, n_vars: int) -> tuple[np.ndarray, np.ndarray]:
    """Variable → factor CSR by a stable sort of the edges on their variable.

    Sorted by (group, factor) per variable provided factor ids already follow (group, factor)
    order with ungrouped factors first, as every pdbq graph does.
    """
    n_factors = factor_offsets.shape[0] - 1
    edge_factor = np.repeat(np.arange(n_factors, dtype=np.int32), np.diff(factor_offsets))
    order = np.argsort(factor_vars, kind="stable")
    counts = np.bincount(factor_vars, minlength=n_vars) if factor_vars.size else np.zeros(n_vars, np.int64)
    var_offsets = np.zeros(n_vars + 1, dtype=np.int64)
    np.cumsum(counts, out=var_offsets[1:])
    return var_offsets, np.ascontiguousarray(edge_factor[order], dtype=np.int32)


def subgraph(graph: FactorGraph, vars: np.ndarray, *, factors: np.ndarray | None = None) -> tuple[FactorGraph, np.ndarray]:
    """The graph restricted to the variables ``vars`` (ids of ``graph``).

    Kept factors: by default every factor whose variables all lie in ``vars`` (the induced
    subgraph); or exactly ``factors`` (ids or a boolean mask), whose variables must lie in ``vars``.
    A head group is kept whole or not at all: a group cut by the selection raises `GraphError`
    (its g(Σ) would change meaning). ``weights``, ``learnable`` and ``tables`` are shared unchanged,
    so weight and table indices keep their meaning. Factor and group ids are renumbered in their
    old order, which keeps each variable's factors sorted by (group, factor).

    Returns ``(subgraph, old_ids)``: variable ``i`` of the subgraph is ``old_ids[i]`` of ``graph``.
    """
    vars = unique(np.asarray(vars, dtype=np.int64))
    if vars.size and (vars[0] < 0 or vars[-1] >= graph.n_vars):
        raise GraphError(f"subgraph: variable ids must lie in 0 .. {graph.n_vars - 1}")
    new_id = np.full(graph.n_vars, -1, dtype=np.int64)
    new_id[vars] = np.arange(vars.size)
    arity = np.diff(graph.factor_offsets)
    edge_factor = np.repeat(np.arange(graph.n_factors, dtype=np.int64), arity)
    outside = np.bincount(edge_factor, weights=(new_id[graph.factor_vars] < 0), minlength=graph.n_factors) > 0
    if factors is None:
        keep = ~outside
    else:
        f = np.asarray(factors)
        keep = f.astype(bool) if f.dtype == np.bool_ else np.isin(np.arange(graph.n_factors), f)
        if keep.shape[0] != graph.n_factors:
            raise GraphError("subgraph: a factor mask needs one entry per factor")
        if np.any(keep & outside):
            bad = int(np.flatnonzero(keep & outside)[0])
            raise GraphError(f"subgraph: factor {bad} has a variable outside the variable set")
    grouped = graph.group != NO_GROUP
    if graph.n_groups:
        total = np.bincount(graph.group[grouped], minlength=graph.n_groups)
        kept = np.bincount(graph.group[grouped & keep], minlength=graph.n_groups)
        cut = (kept > 0) & (kept < total)
        if np.any(cut):
            raise GraphError(f"subgraph: head group {int(np.flatnonzero(cut)[0])} is cut by the variable set")
        keep_group = kept > 0
    else:
        keep_group = np.zeros(0, dtype=bool)
    group_new = np.cumsum(keep_group) - 1
    kf = np.flatnonzero(keep)
    edge_keep = keep[edge_factor]
    factor_vars = new_id[graph.factor_vars[edge_keep]].astype(np.int32)
    factor_offsets = np.zeros(kf.size + 1, dtype=np.int64)
    np.cumsum(arity[kf], out=factor_offsets[1:])
    group = graph.group[kf]
    group = np.where(group >= 0, group_new[np.maximum(group, 0)] if graph.n_groups else -1, NO_GROUP).astype(np.int32)
    var_offsets, var_factors = var_csr(factor_offsets, factor_vars, vars.size)
    g = FactorGraph(
        cardinality=np.ascontiguousarray(graph.cardinality[vars]),
        evidence=np.ascontiguousarray(graph.evidence[vars]),
        var_offsets=var_offsets,
        var_factors=var_factors,
        function=np.ascontiguousarray(graph.function[kf]),
        weight=np.ascontiguousarray(graph.weight[kf]),
        group=group,
        factor_offsets=factor_offsets,
        factor_vars=factor_vars,
        factor_literals=np.ascontiguousarray(graph.factor_literals[edge_keep]),
        table_offset=np.ascontiguousarray(graph.table_offset[kf]),
        tables=graph.tables,
        weights=graph.weights,
        learnable=graph.learnable,
        semantics=np.ascontiguousarray(graph.semantics[keep_group]),
        group_weight=np.ascontiguousarray(graph.group_weight[keep_group]),
    )
    return validate(g), vars
