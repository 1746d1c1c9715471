"""Energy differences along paths of single-variable changes.

Replica-exchange swaps and mode jumps need E(y) − E(x) for two states x, y (E the energy of
docs/factors.md over the kernel's tables, zero entries clamped as in the Gibbs kernels). Scoring
both states costs a pass over every factor (`kernels.log_score_kernel`: ≈ 60 ns a factor, 27 µs
for UAI DBN_11's 440 tables, several times a whole Gibbs sweep there). Changing x into y one
differing variable at a time instead telescopes:

    E(y) − E(x) = Σ_i [E(x⁽ⁱ⁾) − E(x⁽ⁱ⁻¹⁾)],

and each step is a difference of one variable's conditional log-potentials, which the Gibbs
kernel's arrays (`kernels.KernelGraph`: boolean log-odds, pair tables, general factors with
their head-group sums) give in the time of one update. The cost is the differing variables'
degrees, not the graph's size.

`move_values` makes a list of such changes and returns their sum (group sums kept current).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pdbq.inference.mcmc.kernels import _cat_pairs, _general_bool, _general_cat, group_sums_into

__all__ = ["move_values", "energy_gap"]


@njit(cache=True)
def move_values(g, kg, values, gsums, vars_, news, n):
    """Set ``values[vars_[i]] = news[i]`` for i < n, in order, and return E(after) − E(before);
    ``gsums`` (head-group sums of ``values``) are kept current. The arrays are unpacked once
    here: reading them through the NamedTuples inside the loop costs a reference count each."""
    card = g.cardinality
    fn, fo, to = g.function, g.factor_offsets, g.table_offset
    fvars, lits = g.factor_vars, g.factor_literals
    weights, weight, semantics, group_weight = g.weights, g.weight, g.semantics, g.group_weight
    tables, gen_factor, gen_group, gen_off = kg.tables, kg.gen_factor, kg.gen_group, kg.gen_off
    bbias, bb_off, bb_other, bb_b = kg.bbias, kg.bb_off, kg.bb_other, kg.bb_b
    pt_off, pt_other, pt_tab_off, pt_tab = kg.pt_off, kg.pt_other, kg.pt_tab_off, kg.pt_tab
    cbias, val_off = kg.cbias, kg.val_off
    kmax = kg.max_card
    mg = max(kg.max_groups, 1)
    stride = kmax + 1
    logits = np.empty(kmax)
    gid = np.empty(mg, dtype=np.int32)
    gbuf = np.empty(mg * stride)
    total = 0.0
    for i in range(n):
        v = vars_[i]
        xn = np.int64(news[i])
        xcur = np.int64(values[v])
        if xn == xcur:
            continue
        ng = 0
        if card[v] == 2:
            d = bbias[v]
            for j in range(bb_off[v], bb_off[v + 1]):
                d += bb_b[j] * values[bb_other[j]]
            for j in range(pt_off[v], pt_off[v + 1]):
                d += pt_tab[pt_tab_off[j] + values[pt_other[j]]]
            if gen_off[v] < gen_off[v + 1]:
                dg, ng = _general_bool(
                    fn, fo, to, fvars, lits, card, tables, weights, weight, semantics, group_weight,
                    gen_factor, gen_group, gen_off[v], gen_off[v + 1], values, gsums, v, xcur, gid, gbuf,
                )
                d += dg
            total += d if xn == 1 else -d
            k3 = 3
        else:
            kv = card[v]
            _cat_pairs(cbias, val_off[v], pt_other, pt_tab_off, pt_tab, pt_off[v], pt_off[v + 1], values, kv, logits)
            if gen_off[v] < gen_off[v + 1]:
                ng = _general_cat(
                    fn, fo, to, fvars, lits, card, tables, weights, weight, semantics, group_weight,
                    gen_factor, gen_group, gen_off[v], gen_off[v + 1], values, gsums, v, kv, xcur, logits, gid, gbuf,
                    stride,
                )
            total += logits[xn] - logits[xcur]
            k3 = stride
        values[v] = xn
        for k in range(ng):
            gsums[gid[k]] = gbuf[k * k3] + gbuf[k * k3 + 1 + xn]
    return total


@njit(cache=True, nogil=True)
def energy_gap(g, kg, x, y, work, work_gs, path):
    """E(y) − E(x), walking a copy of ``x`` (in ``work``, like x; ``work_gs`` float64[n_groups];
    ``path`` int64[n_vars]: scratch) to ``y`` one differing variable at a time."""
    work[:] = x
    if work_gs.shape[0] > 0:
        group_sums_into(g, kg.tables, work, work_gs)
    n = 0
    for v in range(x.shape[0]):
        if y[v] != x[v]:
            path[n] = v
            n += 1
    return move_values(g, kg, work, work_gs, path, y[path[:n]], n)
