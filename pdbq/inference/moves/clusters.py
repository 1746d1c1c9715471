"""Cluster moves (Swendsen–Wang / Edwards–Sokal): which factors can carry bonds, the kernel
arrays, and the exact transition matrix of one pass for the checker.

A pairwise factor whose log-potential contains a term ``w · 1[x_u = x_v]`` (or, for two
booleans, ``w · 1[x_u ≠ x_v]``) with w > 0 can carry a *bond*: since
``e^{w·1[r]} = Σ_{b∈{0,1}} (1 − b) + b · (e^w − 1) · 1[r]``, the model is the marginal of a joint
over (x, bonds) in which a bond is on with probability ``1 − e^{−w}`` when its relation r holds
(never otherwise), and, given the bonds, bonded variables move together. The rest of every
factor's log-potential (its *residual*: fields, every other factor, what a table holds beyond
the bond term, head groups) stays in the update of a cluster, which is drawn exactly from its
conditional given the bonds and the other variables (`cluster_kernels`). Both steps are exact
Gibbs steps of that joint, so the model's distribution is kept whatever other factors exist.

Eligible factors (`bond_terms`), all stand-alone (not in a head group), over two distinct
variables of one cardinality:

- EQUAL (φ = +1 when its two arguments agree, −1 otherwise) with weight W: the term is
  ``2|W| · 1[...]``. Raw values of any cardinality with W > 0 (Potts); for booleans also W < 0
  and negated/positive literals (the relation becomes x_u ≠ x_v where the parities say so).
- TABLE over two booleans, log-potential t = W · table: ``w = (t00 + t11 − t01 − t10) / 2``
  (the whole interaction; the rest is unary), relation x_u ≠ x_v when negative.
- TABLE over two K-valued variables (K > 2): ``w = min_k t_kk − max_{i≠j} t_ij`` when positive
  (exactly the Potts coupling for a Potts table; any w ≥ 0 is correct, the residual keeps the rest).

Tables with infinite entries carry no bond (their walls stay in the residual).

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder(); x, y = b.add_variables(2)
>>> _ = b.add_factor(FactorFunction.EQUAL, [x, y], weight=b.add_weight(0.5))
>>> t = bond_terms(b.build())
>>> t.factor.tolist(), t.w.tolist(), t.anti.tolist()
([0], [1.0], [0])
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np

from pdbq.errors import InferenceError
from pdbq.graph.layout import FactorGraph
from pdbq.inference.moves.cluster_kernels import (
    ClusterGraph,
    pair_tables,
    bond_probability,
    cluster_energies,
    link_bonds,
    make_scratch,
)
from pdbq.inference.mcmc.kernels import group_sums_into, hard_tables, value_dtype
from pdbq.inference.mcmc.transition import Kernel, state_table
from pdbq.language.nodes import FactorFunction

__all__ = ["BondTerms", "bond_terms", "prepare_clusters", "check_cluster_inputs", "cluster_kernel",
           "cluster_coverage", "ClusterCoverage", "MAX_KERNEL_BONDS"]

MAX_KERNEL_BONDS = 12  # `cluster_kernel` enumerates every bond configuration
_EPS = 1e-12


class BondTerms(NamedTuple):
    """The factors that carry a bond: factor id, endpoints, relation (1: x_u ≠ x_v) and w > 0."""

    factor: np.ndarray  # int32[n_bonds]
    u: np.ndarray  # int32[n_bonds]
    v: np.ndarray  # int32[n_bonds]
    anti: np.ndarray  # int8[n_bonds]
    w: np.ndarray  # float64[n_bonds]


def _pairs(graph: FactorGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stand-alone two-argument factors over two distinct variables of one cardinality."""
    arity = np.diff(graph.factor_offsets)
    f = np.flatnonzero((arity == 2) & (graph.group < 0))
    starts = graph.factor_offsets[f]
    u = graph.factor_vars[starts]
    v = graph.factor_vars[starts + 1]
    ok = (u != v) & (graph.cardinality[u] == graph.cardinality[v])
    return f[ok], u[ok], v[ok]


def bond_terms(graph: FactorGraph) -> BondTerms:
    """Every eligible factor's bond term (module docstring), vectorised over the graph's arrays."""
    f, u, v = _pairs(graph)
    card = graph.cardinality[u].astype(np.int64)
    W = graph.weights[graph.weight[f]]
    fn = graph.function[f]
    out_f, out_anti, out_w = [], [], []

    eq = fn == int(FactorFunction.EQUAL)
    lu = graph.factor_literals[graph.factor_offsets[f]]
    lv = graph.factor_literals[graph.factor_offsets[f] + 1]
    raw = (lu < 0) & (lv < 0)
    binary = card == 2
    # booleans: an argument is x (raw or literal 1) or 1 − x (literal 0); parity of the negations
    neg = (lu == 0).astype(np.int8) ^ (lv == 0).astype(np.int8)
    ok_eq = eq & (W != 0.0) & ((binary) | (raw & (W > 0.0)))
    anti_eq = np.where(binary, neg ^ (W < 0.0).astype(np.int8), 0).astype(np.int8)
    out_f.append(f[ok_eq])
    out_anti.append(anti_eq[ok_eq])
    out_w.append(2.0 * np.abs(W[ok_eq]))

    tab = np.flatnonzero(fn == int(FactorFunction.TABLE))
    for i in tab.tolist():  # tables are few next to EQUAL factors in large graphs
        k = int(card[i])
        off = int(graph.table_offset[f[i]])
        t = graph.tables[off : off + k * k]
        if not np.all(np.isfinite(t)):
            continue
        t = W[i] * t.reshape(k, k)
        if k == 2:
            d = 0.5 * (t[0, 0] + t[1, 1] - t[0, 1] - t[1, 0])
            if abs(d) > _EPS:
                out_f.append(f[i : i + 1])
                out_anti.append(np.array([1 if d < 0 else 0], dtype=np.int8))
                out_w.append(np.array([abs(d)]))
        else:
            diag = np.diag(t)
            off_diag = t[~np.eye(k, dtype=bool)]
            d = float(diag.min() - off_diag.max())
            if d > _EPS:
                out_f.append(f[i : i + 1])
                out_anti.append(np.zeros(1, dtype=np.int8))
                out_w.append(np.array([d]))
    fs = np.concatenate(out_f).astype(np.int32)
    order = np.argsort(fs, kind="stable")
    fs = fs[order]
    starts = graph.factor_offsets[fs]
    return BondTerms(fs, graph.factor_vars[starts].astype(np.int32), graph.factor_vars[starts + 1].astype(np.int32),
                     np.concatenate(out_anti).astype(np.int8)[order], np.concatenate(out_w).astype(np.float64)[order])


class ClusterCoverage(NamedTuple):
    """What AUTO reads: ``share``, the share of free variables touched by a bond between two free
    variables; ``order``, the mean over those variables of ``Σ tanh(w/2) − max tanh(w/2)`` over
    their bonds (the Bethe-lattice estimate of long-range order, (degree − 1)·tanh J on a regular
    lattice: ≥ 1 in the ordered or critical phase of a ferromagnet); ``bonds``, the eligible
    factors; ``field``, the mean over those variables of the spread (max − min over values) of
    their one-variable factors' log-potentials: a field adds up over a cluster and pins large
    clusters, so cluster moves pay off on nearly field-free models."""

    share: float
    order: float
    bonds: int
    field: float = 0.0


def cluster_coverage(graph: FactorGraph) -> ClusterCoverage:
    """Coverage and order indicator (`ClusterCoverage`) of the graph's bonds; no tables built."""
    free = graph.evidence < 0
    n_free = int(free.sum())
    t = bond_terms(graph)
    if n_free == 0 or t.factor.shape[0] == 0:
        return ClusterCoverage(0.0, 0.0, int(t.factor.shape[0]))
    both = free[t.u] & free[t.v]
    th = np.tanh(0.5 * t.w[both])
    ends = np.concatenate([t.u[both], t.v[both]])
    s = np.bincount(ends, weights=np.concatenate([th, th]), minlength=graph.n_vars)
    top = np.zeros(graph.n_vars)
    np.maximum.at(top, ends, np.concatenate([th, th]))
    touched = np.zeros(graph.n_vars, dtype=bool)
    touched[ends] = True
    share = float(touched[free].sum()) / n_free
    order = float(np.mean((s - top)[touched])) if touched.any() else 0.0
    field = float(np.mean(_unary_spread(graph)[touched])) if touched.any() else 0.0
    return ClusterCoverage(share, order, int(t.factor.shape[0]), field)


def _unary_spread(graph: FactorGraph) -> np.ndarray:
    """Per variable: Σ over its stand-alone one-variable factors of max − min of w·φ over its
    values (a TABLE's finite entries; 2|w| for a ±1-valued or 0/1-valued function, an upper bound)."""
    arity = np.diff(graph.factor_offsets)
    f = np.flatnonzero((arity == 1) & (graph.group < 0))
    v = graph.factor_vars[graph.factor_offsets[f]]
    w = np.abs(graph.weights[graph.weight[f]])
    spread = 2.0 * w
    for i in np.flatnonzero(graph.function[f] == int(FactorFunction.TABLE)).tolist():
        off = int(graph.table_offset[f[i]])
        t = graph.tables[off : off + int(graph.cardinality[v[i]])]
        t = t[np.isfinite(t)]
        spread[i] = w[i] * float(t.max() - t.min()) if t.size else 0.0
    return np.bincount(v, weights=spread, minlength=graph.n_vars)


def prepare_clusters(graph: FactorGraph, sites: np.ndarray, tables: np.ndarray | None = None,
                     terms: BondTerms | None = None) -> ClusterGraph:
    """The `ClusterGraph` of a validated graph: bonds from `bond_terms`, variables outside
    ``sites`` (and evidence) pinned. ``tables``: the kernels' clamped tables if already made."""
    t = terms if terms is not None else bond_terms(graph)
    nf = graph.n_factors
    res_w = np.zeros(nf)
    res_anti = np.zeros(nf, dtype=np.int8)
    res_w[t.factor] = t.w
    res_anti[t.factor] = t.anti
    pinned = np.ones(graph.n_vars, dtype=np.uint8)
    pinned[np.asarray(sites, dtype=np.int64)] = 0
    pinned[graph.evidence >= 0] = 1
    tables = hard_tables(graph) if tables is None else tables
    fweight = graph.weights[graph.weight].astype(np.float64)
    pair_off, pair_tab, shift_inv = pair_tables(graph.function, graph.factor_offsets, graph.table_offset,
                                                graph.factor_vars, graph.factor_literals, graph.cardinality, tables,
                                                fweight, graph.group, res_w, res_anti)
    return ClusterGraph(
        t.u, t.v, t.anti, t.w, res_w, res_anti, fweight, pinned,
        graph.cardinality, graph.var_offsets, graph.var_factors, graph.function, graph.factor_offsets,
        graph.factor_vars, graph.factor_literals, graph.table_offset, tables, graph.group, graph.semantics,
        graph.weights[graph.group_weight].astype(np.float64), pair_off, pair_tab, shift_inv,
    )


def check_cluster_inputs(cg: ClusterGraph, values: np.ndarray, group_sums: np.ndarray, rng: np.ndarray,
                         beta: float) -> None:
    """`InferenceError` unless the arrays fit ``cg`` (the kernels check nothing)."""
    nv = cg.cardinality.shape[0]
    if values.ndim != 1 or values.shape[0] != nv:
        raise InferenceError(f"cluster moves: values must hold one entry per variable ({nv})")
    if group_sums.shape != (cg.semantics.shape[0],):
        raise InferenceError("cluster moves: group_sums must hold one entry per head group")
    if rng.dtype != np.uint64 or rng.shape != (1,) or rng[0] == 0:
        raise InferenceError("cluster moves: rng must be one non-zero uint64 xorshift state")
    if not 0.0 < beta <= 1.0:
        raise InferenceError(f"cluster moves: beta must lie in (0, 1], got {beta!r}")
    if nv and (values.min() < 0 or np.any(values.astype(np.int64) >= cg.cardinality)):
        raise InferenceError("cluster moves: a value lies outside its variable's domain")
    if np.any(cg.bond_w < 0) or not np.all(np.isfinite(cg.bond_w)):
        raise InferenceError("cluster moves: bond weights must be finite and non-negative")


def cluster_kernel(graph: FactorGraph, cg: ClusterGraph, beta: float = 1.0) -> Kernel:
    """The exact transition matrix of one `cluster_kernels.cluster_pass` over every state
    (`transition.state_table` order), for `transition.check_kernel`: every bond configuration
    with its probability, the kernel's own union-find and cluster energies, both visiting
    directions with probability 1/2. At most `MAX_KERNEL_BONDS` bonds."""
    nb = cg.bond_u.shape[0]
    if nb > MAX_KERNEL_BONDS:
        raise InferenceError(f"cluster_kernel enumerates bond configurations: {nb} bonds, limit {MAX_KERNEL_BONDS}")
    cards = graph.cardinality.astype(np.int64)
    states = state_table(cards)
    n = states.shape[0]
    strides = np.array([int(np.prod(cards[i + 1 :])) for i in range(cards.shape[0])], dtype=np.int64)
    dtype = value_dtype(int(cards.max()))
    sc = make_scratch(cg)
    gsums = np.zeros((n, graph.n_groups))
    if graph.n_groups:
        for s in range(n):
            group_sums_into(graph, cg.tables, states[s].astype(dtype), gsums[s])
    same = states[:, cg.bond_u] == states[:, cg.bond_v]
    holds = same != (cg.bond_anti == 1)[None, :]
    p_on = np.array([bond_probability(float(w), beta) for w in cg.bond_w])
    K = np.zeros((n, n))
    for on in itertools.product((0, 1), repeat=nb):
        on_arr = np.array(on, dtype=np.uint8)
        # P(bonds | state): a bond can be on only where its relation holds
        pb = np.where(on_arr[None, :] == 1, np.where(holds, p_on[None, :], 0.0), np.where(holds, 1.0 - p_on[None, :], 1.0))
        weight = pb.prod(axis=1)
        if not weight.any():
            continue
        link_bonds(cg.bond_u, cg.bond_v, on_arr, sc.parent, sc.start, sc.members)
        mats = []
        for r in range(graph.n_vars):
            a, z = int(sc.start[r]), int(sc.start[r + 1])
            if z == a:
                continue
            mem = sc.members[a:z].copy()
            if cg.pinned[mem].any():
                continue
            M = np.zeros((n, n))
            for s in range(n):
                vals = states[s].astype(dtype)
                k = cluster_energies(cg, vals, gsums[s], mem, beta, sc)
                e = sc.energy[:k] - sc.energy[:k].max()
                p = np.exp(e) / np.exp(e).sum()
                for shift in range(k):
                    new = (states[s, mem] + shift) % k
                    M[s, s + int(((new - states[s, mem]) * strides[mem]).sum())] += p[shift]
            mats.append(M)
        fwd = np.eye(n)
        for M in mats:
            fwd = fwd @ M
        bwd = np.eye(n)
        for M in reversed(mats):
            bwd = bwd @ M
        K += weight[:, None] * 0.5 * (fwd + bwd)
    return Kernel(np.broadcast_to(np.arange(n), (n, n)).copy(), K)
