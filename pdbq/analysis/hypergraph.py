"""The hypergraph seed 004 reasons about, built from a `FactorGraph`.

One hyperedge per standalone factor and one per head group (LOGICAL/RATIO, or any group the
layout stores): its vertices are the *free* variables it touches. Evidence variables are clamped
(Gibbs never samples them), so they are left out, and a hyperedge over evidence only is a constant
that shapes nothing and is dropped. This is the graph whose hierarchy width bounds the mixing of
the sampler that pdbq actually runs.

Everything here is numpy (plus one small numba union-find), so it runs on grounded models with
millions of factors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from pdbq.graph.layout import FactorGraph

__all__ = ["Hypergraph", "build_hypergraph", "component_labels"]


@dataclass(frozen=True, eq=False)
class Hypergraph:
    """Hyperedges over free variables, as CSR.

    ``edge_vars[edge_offsets[h]:edge_offsets[h+1]]``: the sorted, distinct free variables of
    hyperedge ``h``. ``source[h]``: the factor id (``is_group[h]`` false) or head-group id it
    stands for. ``degree[v]``: hyperedges containing variable ``v`` (0 for evidence variables).
    ``free``: bool per variable of the original graph.
    """

    n_vars: int
    free: np.ndarray
    edge_offsets: np.ndarray
    edge_vars: np.ndarray
    source: np.ndarray
    is_group: np.ndarray
    degree: np.ndarray

    @property
    def n_edges(self) -> int:
        return int(self.source.shape[0])

    def edge(self, h: int) -> np.ndarray:
        return self.edge_vars[self.edge_offsets[h] : self.edge_offsets[h + 1]]


def build_hypergraph(graph: FactorGraph) -> Hypergraph:
    """Collapse each head group into one hyperedge and clamp evidence (see the module docstring)."""
    nf, ng, nv = graph.n_factors, graph.n_groups, graph.n_vars
    free = graph.evidence < 0
    # hyperedge key: the group id for grouped factors, ng + f for standalone ones.
    key_of_factor = np.where(graph.group >= 0, graph.group.astype(np.int64), ng + np.arange(nf, dtype=np.int64))
    edge_factor = np.repeat(np.arange(nf, dtype=np.int64), np.diff(graph.factor_offsets))
    evars = graph.factor_vars.astype(np.int64)
    keep = free[evars] if evars.size else np.zeros(0, dtype=bool)
    keys = key_of_factor[edge_factor[keep]]
    pair = np.unique(keys * max(nv, 1) + evars[keep])  # sorted by key, then variable
    pair_key = pair // max(nv, 1)
    pair_var = (pair % max(nv, 1)).astype(np.int64)
    ukeys, starts = np.unique(pair_key, return_index=True)
    offsets = np.append(starts, pair.shape[0]).astype(np.int64)
    is_group = ukeys < ng
    source = np.where(is_group, ukeys, ukeys - ng).astype(np.int64)
    degree = np.bincount(pair_var, minlength=nv).astype(np.int64)
    return Hypergraph(nv, free, offsets, pair_var, source, is_group, degree)


@numba.njit(cache=True)
def _find(parent, x):
    root = x
    while parent[root] != root:
        root = parent[root]
    while parent[x] != root:  # path compression
        nxt = parent[x]
        parent[x] = root
        x = nxt
    return root


@numba.njit(cache=True)
def _union_edges(n_vars, edge_offsets, edge_vars):
    """Union-find over variables, joining every hyperedge's variables; returns each variable's root."""
    parent = np.arange(n_vars)
    for h in range(edge_offsets.shape[0] - 1):
        lo, hi = edge_offsets[h], edge_offsets[h + 1]
        if hi - lo < 2:
            continue
        r0 = _find(parent, edge_vars[lo])
        for e in range(lo + 1, hi):
            r = _find(parent, edge_vars[e])
            if r != r0:
                parent[r] = r0
    for v in range(n_vars):
        parent[v] = _find(parent, v)
    return parent


def component_labels(hg: Hypergraph) -> tuple[np.ndarray, int]:
    """Dense connected-component label per hyperedge, and the number of components with a hyperedge.

    Variables that no hyperedge touches form components without factors (hierarchy width 0)
    and get no label.
    """
    if hg.n_edges == 0:
        return np.zeros(0, dtype=np.int64), 0
    roots = _union_edges(hg.n_vars, hg.edge_offsets, hg.edge_vars)
    first = hg.edge_vars[hg.edge_offsets[:-1]]
    _, labels = np.unique(roots[first], return_inverse=True)
    return labels.astype(np.int64), int(labels.max()) + 1
