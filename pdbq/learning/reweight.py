"""Kernel graphs whose weights can be changed in place, for learning's persistent chains.

`pdbq.inference.mcmc.kernels.prepare_kernel_graph` folds weights into its fast paths (boolean
log-odds biases, pair slopes and tables) and costs O(edges) Gibbs-kernel work to rebuild; the
learner changes the weights every epoch. Every folded number is linear in the weights, so
`reweighable` prepares the kernel graph once with unit weights and records, per folded entry,
which weight scales it; `refresh` then rewrites the folded arrays for new weights in one linear
pass (milliseconds for a million factors). Factors on the general path read ``graph.weights``
at every update already. The per-entry bookkeeping follows prepare_kernel_graph's own entry order
(sorted (variable, group, factor) pairs, classified by its `_classify`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pdbq.graph.layout import FactorGraph
from pdbq.inference.mcmc.kernels import _K_BB, _K_PT, _K_UNARY, KernelGraph, _classify, _phi, prepare_kernel_graph

__all__ = ["Reweighable", "reweighable", "refresh"]


class Reweighable(NamedTuple):
    kg: KernelGraph  # its bbias, cbias, bb_b and pt_tab are rewritten by `refresh`
    term_var: np.ndarray  # int64[n_terms]: variable of a folded unary term
    term_w: np.ndarray  # int32[n_terms]: its weight index
    term_off: np.ndarray  # int64[n_terms + 1]: its per-value unit values in term_c
    term_c: np.ndarray  # float64: unit-weight log-potential per value
    bb_w: np.ndarray  # int32[n_bb]: weight of each boolean pair slope
    bb_unit: np.ndarray  # float64[n_bb]
    pt_w: np.ndarray  # int32[len(pt_tab)]: weight of each pair-table cell
    pt_unit: np.ndarray  # float64[len(pt_tab)]
    boolean: np.ndarray  # int64: non-evidence boolean variables (their bbias is rewritten)


@njit(cache=True)
def _unit_terms(fn, fo, to, fvars, lits, card, tables, sv, sf, kind, other, live, base):
    """Folded unary terms (kind UNARY, and the constant part of BB pairs) at unit weight."""
    n = sv.shape[0]
    count = 0
    size = 0
    for j in range(n):
        if live[j] and (kind[j] == _K_UNARY or kind[j] == _K_BB):
            count += 1
            size += card[sv[j]]
    tvar = np.empty(count, np.int64)
    tf = np.empty(count, np.int64)
    toff = np.zeros(count + 1, np.int64)
    tc = np.zeros(size)
    tmp = base.copy()
    t = 0
    for j in range(n):
        if not (live[j] and (kind[j] == _K_UNARY or kind[j] == _K_BB)):
            continue
        v = sv[j]
        f = sf[j]
        kv = card[v]
        o = toff[t]
        if kind[j] == _K_UNARY:
            for x in range(kv):
                tc[o + x] = _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, tmp, v, x)
        else:
            u = other[j]
            tmp[u] = 0
            tc[o + 1] = _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, tmp, v, 1) - _phi(
                fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, tmp, v, 0
            )
            tmp[u] = base[u]
        tvar[t] = v
        tf[t] = f
        toff[t + 1] = o + kv
        t += 1
    return tvar, tf, toff, tc


def reweighable(g: FactorGraph) -> Reweighable:
    """Prepare a kernel graph of validated ``g`` whose folded weights `refresh` can rewrite."""
    kg = prepare_kernel_graph(g._replace(weights=np.ones_like(g.weights)))
    nv, nf = g.n_vars, g.n_factors
    edge_factor = np.repeat(np.arange(nf, dtype=np.int64), np.diff(g.factor_offsets))
    ev = g.factor_vars.astype(np.int64)
    order = np.lexsort((edge_factor, g.group[edge_factor] if nf else edge_factor, ev))
    sv, sf = ev[order], edge_factor[order]
    keep = np.ones(sv.shape[0], dtype=bool)
    if sv.shape[0] > 1:
        keep[1:] = (sv[1:] != sv[:-1]) | (sf[1:] != sf[:-1])
    sv, sf = sv[keep], sf[keep].astype(np.int32)
    vf_off = np.zeros(nv + 1, np.int64)
    if sv.size:
        np.cumsum(np.bincount(sv, minlength=nv), out=vf_off[1:])
    base = np.where(g.evidence >= 0, g.evidence, 0).astype(np.int32)
    kind, other = _classify(g, kg.tables, vf_off, sf, base)
    live = g.evidence[sv] < 0 if sv.size else np.zeros(0, dtype=bool)
    tvar, tf, toff, tc = _unit_terms(
        g.function, g.factor_offsets, g.table_offset, g.factor_vars, g.factor_literals, g.cardinality, kg.tables,
        sv, sf, kind, other, live, base,
    )
    bb_f = sf[live & (kind == _K_BB)]
    pt_f = sf[live & (kind == _K_PT)]
    pt_sizes = np.diff(np.append(kg.pt_tab_off, kg.pt_tab.shape[0])) if pt_f.size else np.zeros(0, np.int64)
    boolean = np.flatnonzero((g.cardinality == 2) & (g.evidence < 0)).astype(np.int64)
    return Reweighable(
        kg=kg,
        term_var=tvar,
        term_w=g.weight[tf].astype(np.int32),
        term_off=toff,
        term_c=tc,
        bb_w=g.weight[bb_f].astype(np.int32),
        bb_unit=kg.bb_b.copy(),
        pt_w=np.repeat(g.weight[pt_f], pt_sizes).astype(np.int32),
        pt_unit=kg.pt_tab.copy(),
        boolean=boolean,
    )


@njit(cache=True, nogil=True)
def _refresh(weights, val_off, cbias, bbias, bb_b, pt_tab, term_var, term_w, term_off, term_c, bb_w, bb_unit,
             pt_w, pt_unit, boolean):
    cbias[:] = 0.0
    for t in range(term_var.shape[0]):
        v = term_var[t]
        w = weights[term_w[t]]
        o = val_off[v]
        for i in range(term_off[t], term_off[t + 1]):
            cbias[o + i - term_off[t]] += w * term_c[i]
    for i in range(boolean.shape[0]):
        v = boolean[i]
        bbias[v] = cbias[val_off[v] + 1] - cbias[val_off[v]]
    for j in range(bb_b.shape[0]):
        bb_b[j] = weights[bb_w[j]] * bb_unit[j]
    for j in range(pt_tab.shape[0]):
        pt_tab[j] = weights[pt_w[j]] * pt_unit[j]


def refresh(rw: Reweighable, weights: np.ndarray) -> None:
    """Rewrite the folded arrays of ``rw.kg`` for ``weights`` (in place)."""
    kg = rw.kg
    _refresh(weights, kg.val_off, kg.cbias, kg.bbias, kg.bb_b, kg.pt_tab, rw.term_var, rw.term_w, rw.term_off,
             rw.term_c, rw.bb_w, rw.bb_unit, rw.pt_w, rw.pt_unit, rw.boolean)
