"""numba kernels of the MCMC engine: factor values, single-site Gibbs updates, chain loops.

Everything here reads the `FactorGraph` layout (pdbq/graph/layout.py) plus a `KernelGraph` of
derived arrays built once per graph by `prepare_kernel_graph` (the graph itself is never
changed). Kernels check nothing: the drivers (gibbs.py, anneal.py) validate inputs first.

Per variable v (non-evidence) the factors touching v are split into three paths:

- *unary*: a stand-alone factor whose other arguments are all evidence (or v itself) is a
  constant per value of v, folded into ``cbias`` (booleans: the log-odds ``bbias``).
- *pair*: a stand-alone factor with exactly one other non-evidence variable u is tabulated
  over (x_v, x_u). Boolean–boolean pairs keep one number b: log-odds += b · x_u (the part that
  does not depend on x_u is folded into ``bbias``). Other pairs keep a table in ``pt_tab``.
- *general*: everything else (head groups, larger factors) is evaluated from the graph with
  `factor_value`. Entries are sorted by (group, factor), so one group's change in Σφ is
  accumulated from consecutive entries and the group's running sum (kept per chain) is used:
  a body variable pays O(1) per group, not O(group size).

Booleans are updated from their log-odds with one sigmoid; categoricals by a log-sum-exp
normalised softmax. Log-potentials of −inf (zeros in UAI tables) are clamped to −`hard_penalty`
(HARD, or a million times the graph's largest finite weight) so an infeasible start moves towards
feasibility instead of producing NaN, and no soft weight can outweigh a hard constraint.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pdbq.graph.layout import FactorGraph
from pdbq.inference.mcmc.double_double import dd_above, dd_add
from pdbq.inference.mcmc.rng import bounded, next_state, uniform
from pdbq.memory import check_bytes

__all__ = [
    "NARROW_VALUES",
    "value_dtype",
    "KernelGraph",
    "ChainState",
    "Schedule",
    "Accum",
    "Best",
    "prepare_kernel_graph",
    "factor_value",
    "group_value",
    "group_sums_into",
    "log_score_kernel",
    "run_chain",
    "anneal_chain",
    "greedy_sweep",
    "HARD",
    "hard_penalty",
    "hard_tables",
    "MODE_SWEEP",
    "MODE_UNIFORM",
    "MODE_ALIAS",
]

NARROW_VALUES = 256  # the most values a variable may have for uint8 value arrays


def value_dtype(max_card: int) -> type:
    """The dtype of the chains' value arrays for variables of up to ``max_card`` values: uint8
    up to `NARROW_VALUES`, int32 beyond (each is its own signature of every sampling kernel)."""
    return np.uint8 if max_card <= NARROW_VALUES else np.int32

# Factor function codes (pdbq.language.nodes.FactorFunction) as compile-time constants.
IMPLY, OR, AND, EQUAL, ISTRUE = 0, 1, 2, 3, 4
LINEAR, RATIO, LOGICAL = 7, 8, 9
IMPLY_MLN, VOTE, TABLE = 13, 30, 31
SEM_LINEAR, SEM_LOGICAL, SEM_RATIO = 0, 1, 2

MODE_SWEEP, MODE_UNIFORM, MODE_ALIAS = 0, 1, 2

HARD = 1.0e6  # stand-in for an infinite log-potential inside the sampler
PAIR_TABLE_MAX = 1 << 12  # larger pairwise tables stay on the general path

_K_UNARY, _K_BB, _K_PT, _K_GEN = 0, 1, 2, 3


class KernelGraph(NamedTuple):
    """Derived arrays for the Gibbs kernels (per variable CSR rows; see the module docstring)."""

    tables: np.ndarray  # float64: graph.tables with ±inf as hard constraints (`hard_tables`)
    bbias: np.ndarray  # float64[n_vars]: boolean log-odds from unary factors and pair constants
    val_off: np.ndarray  # int32 (int64 past 2^31)[n_vars+1]: start of each variable's values in cbias
    cbias: np.ndarray  # float64[Σ card]: per-value unary log-potential
    bb_off: np.ndarray  # int32 (int64 past 2^31)[n_vars+1]; the same for every *_off below
    bb_other: np.ndarray  # int32[n_bb]: the other (boolean) variable
    bb_b: np.ndarray  # float64[n_bb]: log-odds slope in x_other
    pt_off: np.ndarray  # [n_vars+1]
    pt_other: np.ndarray  # int32[n_pt]
    pt_tab_off: np.ndarray  # [n_pt]: start in pt_tab
    pt_tab: np.ndarray  # float64: boolean v: Δlog-odds[x_u]; else logφ[x_u * card_v + x_v]
    gen_off: np.ndarray  # [n_vars+1]
    gen_factor: np.ndarray  # int32[n_gen]: factor ids sorted by (group, factor), one per factor
    gen_group: np.ndarray  # int32[n_gen]
    max_card: int
    max_groups: int  # most distinct groups on one variable's general path

    def visits(self, v: int) -> int:
        """Factor visits of one update of variable v (bench accounting)."""
        return int(
            self.bb_off[v + 1] - self.bb_off[v] + self.pt_off[v + 1] - self.pt_off[v] + self.gen_off[v + 1] - self.gen_off[v]
        )


class ChainState(NamedTuple):
    """One chain's mutable state (views into the driver's per-chain arrays)."""

    values: np.ndarray  # uint8 or int32[n_vars]
    group_sums: np.ndarray  # float64[n_groups]: Σ φ over each group's factors
    rng: np.ndarray  # uint64[1]
    pos: np.ndarray  # int64[1]: next index into sites for a systematic sweep


class Schedule(NamedTuple):
    """Which variable each step updates: sites[i] with i by sweep, uniform, or alias draw."""

    sites: np.ndarray  # int32[n_sites]
    mode: int  # MODE_SWEEP | MODE_UNIFORM | MODE_ALIAS
    prob: np.ndarray  # float64[n_sites] (alias table; empty otherwise)
    alias: np.ndarray  # int32[n_sites]


class Accum(NamedTuple):
    """Rao-Blackwellised sums: each update of a target adds its full conditional."""

    target_index: np.ndarray  # int32[n_vars]: row in sums, or -1
    sums: np.ndarray  # float64[n_targets, max_card]
    counts: np.ndarray  # int64[n_targets]


class Best(NamedTuple):
    """Annealing bookkeeping: running score, best score and best values of one chain."""

    # float64[2]: [current, best]; or float64[4]: [current, best, current low part, best low
    # part], scores as unevaluated sums hi + lo (double-double), so that a move worth 0.7 still
    # counts beside a running score of 1e20 (annealed MAP keeps its scores this way)
    score: np.ndarray
    values: np.ndarray  # like ChainState.values
    temp: np.ndarray  # float64[1]: current temperature


# ---------------------------------------------------------------------------------------------
# factor values (docs/factors.md)


@njit(cache=True)
def _arg_value(x, lit):
    if lit < 0:
        return np.int64(x)
    return np.int64(1) if x == lit else np.int64(0)


@njit(cache=True)
def _phi(code, start, end, toff, fvars, lits, card, tables, values, v, xv):
    """φ of one factor (function ``code``, edges start..end, table at ``toff``) with variable
    ``v`` taken at value ``xv`` in all its slots.

    Hot helpers take the few arrays they read, not the graph NamedTuple: a call that receives
    a NamedTuple of arrays costs hundreds of nanoseconds (every member is passed and
    reference-counted), several times the work of a typical factor."""
    if code == TABLE:
        idx = np.int64(0)
        for e in range(start, end):
            u = fvars[e]
            x = np.int64(xv) if u == v else np.int64(values[u])
            idx = idx * card[u] + x
        return tables[toff + idx]
    if code == EQUAL:
        first = np.int64(-1)
        for e in range(start, end):
            u = fvars[e]
            x = xv if u == v else values[u]
            a = _arg_value(x, lits[e])
            if e == start:
                first = a
            elif a != first:
                return -1.0
        return 1.0
    if code == OR:
        for e in range(start, end):
            u = fvars[e]
            x = xv if u == v else values[u]
            if _arg_value(x, lits[e]) != 0:
                return 1.0
        return -1.0
    if code == AND or code == ISTRUE:
        for e in range(start, end):
            u = fvars[e]
            x = xv if u == v else values[u]
            if _arg_value(x, lits[e]) == 0:
                return -1.0
        return 1.0
    if end == start:
        return 0.0
    h = end - 1
    hu = fvars[h]
    ht = _arg_value(xv if hu == v else values[hu], lits[h]) != 0
    if code == LINEAR or code == RATIO or code == LOGICAL:
        # DimmWitted's factor.h: n counts body arguments b with (not b) or head.
        n = 0
        for e in range(start, h):
            u = fvars[e]
            x = xv if u == v else values[u]
            if ht or _arg_value(x, lits[e]) == 0:
                n += 1
        if h == start:
            n = 1 if ht else 0
        if code == LINEAR:
            return float(n)
        if code == RATIO:
            return np.log2(1.0 + n)
        return 1.0 if n > 0 else 0.0
    body = True
    for e in range(start, h):
        u = fvars[e]
        x = xv if u == v else values[u]
        if _arg_value(x, lits[e]) == 0:
            body = False
            break
    if code == IMPLY:
        if not body:
            return 0.0
        return 1.0 if ht else -1.0
    if code == IMPLY_MLN:
        if not body:
            return 1.0
        return 1.0 if ht else 0.0
    if code == VOTE:
        if not body:
            return 0.0
        if card[hu] == 2:
            return 1.0 if ht else -1.0
        return 1.0 if ht else 0.0
    return 0.0


@njit(cache=True)
def factor_value(g, tables, values, f, v, xv):
    """φ_f of docs/factors.md with variable ``v`` taken at value ``xv`` (all its slots; pass
    v = -1 for the plain value). Convenience entry; loops use `_phi`."""
    fo = g.factor_offsets
    return _phi(g.function[f], fo[f], fo[f + 1], g.table_offset[f], g.factor_vars, g.factor_literals, g.cardinality, tables, values, v, xv)


@njit(cache=True)
def group_value(sem, s):
    """g(s) of a head group: s (LINEAR), sgn s (LOGICAL), sgn(s)·log(1+|s|) (RATIO)."""
    if sem == SEM_LINEAR:
        return s
    if s == 0.0:
        return 0.0
    if sem == SEM_LOGICAL:
        return 1.0 if s > 0.0 else -1.0
    a = np.log1p(abs(s))
    return a if s > 0.0 else -a


@njit(cache=True)
def group_sums_into(g, tables, values, out):
    """out[G] = Σ_{f ∈ G} φ_f(values) for every head group G."""
    out[:] = 0.0
    fn, fo, to = g.function, g.factor_offsets, g.table_offset
    fvars, lits, card = g.factor_vars, g.factor_literals, g.cardinality
    for f in range(fn.shape[0]):
        gr = g.group[f]
        if gr >= 0:
            out[gr] += _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, values, -1, 0)


@njit(cache=True)
def log_score_kernel(g, tables, values):
    """Unnormalised log-probability of ``values`` (docs/factors.md energy) with TABLE factors
    read from ``tables`` (``g.tables`` for the true score, where −inf stays −inf)."""
    total = 0.0
    sums = np.zeros(g.semantics.shape[0])
    fn, fo, to = g.function, g.factor_offsets, g.table_offset
    fvars, lits, card = g.factor_vars, g.factor_literals, g.cardinality
    for f in range(fn.shape[0]):
        phi = _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, values, -1, 0)
        gr = g.group[f]
        if gr >= 0:
            sums[gr] += phi
        else:
            w = g.weights[g.weight[f]]
            if w != 0.0:
                total += w * phi
    for gr in range(sums.shape[0]):
        w = g.weights[g.group_weight[gr]]
        if w != 0.0:
            total += w * group_value(g.semantics[gr], sums[gr])
    return total


# ---------------------------------------------------------------------------------------------
# preparation


@njit(cache=True)
def _classify(g, tables, vf_off, vf_factor, base):
    """Kind (unary/bb/pt/gen) and other variable of every (variable, factor) entry."""
    n = vf_factor.shape[0]
    kind = np.empty(n, dtype=np.int8)
    other = np.full(n, -1, dtype=np.int32)
    nv = g.cardinality.shape[0]
    for v in range(nv):
        kv = g.cardinality[v]
        for j in range(vf_off[v], vf_off[v + 1]):
            f = vf_factor[j]
            if g.evidence[v] >= 0:
                kind[j] = _K_UNARY  # never used: evidence is not sampled
                continue
            if g.group[f] >= 0:
                kind[j] = _K_GEN
                continue
            u_found = -1
            many = False
            for e in range(g.factor_offsets[f], g.factor_offsets[f + 1]):
                u = g.factor_vars[e]
                if u == v or g.evidence[u] >= 0 or u == u_found:
                    continue
                if u_found < 0:
                    u_found = u
                else:
                    many = True
                    break
            if many:
                kind[j] = _K_GEN
            elif u_found < 0:
                kind[j] = _K_UNARY
            elif kv * g.cardinality[u_found] > PAIR_TABLE_MAX:
                kind[j] = _K_GEN
            elif kv == 2 and g.cardinality[u_found] == 2:
                kind[j] = _K_BB
                other[j] = u_found
            else:
                kind[j] = _K_PT
                other[j] = u_found
    return kind, other


@njit(cache=True)
def _fill(g, tables, vf_off, vf_factor, kind, other, base, val_off, bb_off, pt_off, pt_tab_off, gen_off):
    nv = g.cardinality.shape[0]
    cbias = np.zeros(val_off[nv])
    bbias = np.zeros(nv)
    bb_other = np.empty(bb_off[nv], dtype=np.int32)
    bb_b = np.empty(bb_off[nv])
    pt_other = np.empty(pt_off[nv], dtype=np.int32)
    pt_tab = np.zeros(pt_tab_off[pt_off[nv]] if pt_off[nv] > 0 else 0)
    gen_factor = np.empty(gen_off[nv], dtype=np.int32)
    gen_group = np.empty(gen_off[nv], dtype=np.int32)
    tmp = base.copy()
    fn, fo, to = g.function, g.factor_offsets, g.table_offset
    fvars, lits, card = g.factor_vars, g.factor_literals, g.cardinality
    for v in range(nv):
        if g.evidence[v] >= 0:
            continue
        kv = g.cardinality[v]
        ib = bb_off[v]
        ip = pt_off[v]
        ig = gen_off[v]
        for j in range(vf_off[v], vf_off[v + 1]):
            f = vf_factor[j]
            k = kind[j]
            w = g.weights[g.weight[f]]
            if k == _K_GEN:
                gen_factor[ig] = f
                gen_group[ig] = g.group[f]
                ig += 1
            elif k == _K_UNARY:
                if w != 0.0:
                    for x in range(kv):
                        cbias[val_off[v] + x] += w * _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, tmp, v, x)
            elif k == _K_BB:
                u = other[j]
                tmp[u] = 0
                d0 = w * (_phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, tmp, v, 1) - _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, tmp, v, 0))
                tmp[u] = 1
                d1 = w * (_phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, tmp, v, 1) - _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, tmp, v, 0))
                tmp[u] = base[u]
                bbias[v] += d0
                bb_other[ib] = u
                bb_b[ib] = d1 - d0
                ib += 1
            else:
                u = other[j]
                ku = g.cardinality[u]
                off = pt_tab_off[ip]
                for y in range(ku):
                    tmp[u] = y
                    if kv == 2:
                        pt_tab[off + y] = w * (_phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, tmp, v, 1) - _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, tmp, v, 0))
                    else:
                        for x in range(kv):
                            pt_tab[off + y * kv + x] = w * _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, tmp, v, x)
                tmp[u] = base[u]
                pt_other[ip] = u
                ip += 1
        if kv == 2:
            bbias[v] += cbias[val_off[v] + 1] - cbias[val_off[v]]
    return cbias, bbias, bb_other, bb_b, pt_other, pt_tab, gen_factor, gen_group


def _offsets(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def _narrow(off: np.ndarray) -> np.ndarray:
    """int32 offsets when the last one fits (half the bytes of the per-variable rows the kernel
    keeps while it samples); int64 otherwise. The kernels take either."""
    if off.shape[0] and int(off[-1]) < 2**31 - 1:
        return off.astype(np.int32)
    return off


def _sorted_var_factor_pairs(g: FactorGraph) -> tuple[np.ndarray, np.ndarray]:
    """(variable, factor) of every edge as int32, sorted by (variable, group, factor)."""
    nv, nf = g.n_vars, g.n_factors
    sv = np.repeat(np.arange(nv, dtype=np.int32), np.diff(g.var_offsets))
    sf = np.asarray(g.var_factors, dtype=np.int32)
    if sf.shape[0] > 1:
        gk = g.group[sf]
        same = sv[1:] == sv[:-1]
        ok = ~same | (gk[1:] > gk[:-1]) | ((gk[1:] == gk[:-1]) & (sf[1:] >= sf[:-1]))
        del gk, same
        if not ok.all():
            edge_factor = np.repeat(np.arange(nf, dtype=np.int64), np.diff(g.factor_offsets))
            ev = g.factor_vars.astype(np.int64)
            order = np.lexsort((edge_factor, g.group[edge_factor], ev))
            return ev[order].astype(np.int32), edge_factor[order].astype(np.int32)
    return sv, sf  # callers index them (copies): the graph is never modified


def hard_penalty(g: FactorGraph) -> float:
    """The finite stand-in for an infinite log-potential in this graph: HARD, or a million times
    the largest finite weight or table entry when that is larger (a hard constraint must outweigh
    any soft weight, or a WEIGHT 1e16 rule could silently overrule it)."""
    top = 1.0
    if g.weights.size:
        top = max(top, float(np.max(np.abs(g.weights))))
    if g.tables.size:
        finite = g.tables[np.isfinite(g.tables)]
        if finite.size:
            top = max(top, float(np.max(np.abs(finite))))
    return float(min(1e300, max(HARD, HARD * top)))


def hard_tables(g: FactorGraph) -> np.ndarray:
    """``g.tables`` for the kernels: -inf entries at -hard_penalty; in a table holding +inf
    entries those become 0 and every other entry -hard_penalty (a +inf entry is a "must": the
    same limit exact inference takes)."""
    tables = g.tables.copy()
    if not tables.size:
        return tables
    hard = hard_penalty(g)
    if np.any(np.isposinf(tables)):
        for f in np.flatnonzero(g.table_offset >= 0).tolist():
            lo = int(g.table_offset[f])
            args = g.factor_vars[g.factor_offsets[f] : g.factor_offsets[f + 1]]
            hi = lo + int(np.prod(g.cardinality[args].astype(np.int64)))
            seg = tables[lo:hi]
            if np.any(np.isposinf(seg)):
                tables[lo:hi] = np.where(np.isposinf(seg), 0.0, -np.inf)
    np.clip(tables, -hard, hard, out=tables)
    return tables


def prepare_kernel_graph(g: FactorGraph) -> KernelGraph:
    """Derive the kernel's arrays from a validated graph (O(edges); the graph is not modified)."""
    nv, nf = g.n_vars, g.n_factors
    values = int(g.cardinality.astype(np.int64).sum())
    # a bias per value (float64) and the per-value estimate sums and their standard errors after it
    check_bytes(values * 8 * 4, f"the {values:,} values of {nv:,} variables (up to {int(g.cardinality.max()) if nv else 0:,} "
                "per variable; a smaller domain needs less)")
    tables = hard_tables(g)
    # (variable, factor) pairs, one per factor even when a variable fills several slots,
    # sorted by (variable, group, factor): the general path needs groups consecutive. The
    # graph's own variable -> factor CSR is in that order (docs of `FactorGraph.var_factors`):
    # use it as it is (4-byte temporaries, no sort) and sort only a graph that is not.
    # Memory: this runs on the query's graph while it is in memory, so temporaries are dropped
    # as soon as they are used and offsets are int32 where they fit (`_narrow`): the peak here
    # is the peak of a whole query (docs/benchmarks.md, query memory).
    sv, sf = _sorted_var_factor_pairs(g)
    if sv.shape[0] > 1:
        keep = np.ones(sv.shape[0], dtype=bool)
        keep[1:] = (sv[1:] != sv[:-1]) | (sf[1:] != sf[:-1])
        if not keep.all():  # a variable in several slots of one factor: once per factor
            sv, sf = sv[keep], sf[keep]
        del keep
    vf_off = _narrow(_offsets(np.bincount(sv, minlength=nv) if sv.size else np.zeros(nv, np.int64)))
    base = np.where(g.evidence >= 0, g.evidence, 0).astype(np.int32)
    kind, other = _classify(g, tables, vf_off, sf, base)
    var_of = sv
    live = g.evidence[var_of] < 0 if var_of.size else np.zeros(0, dtype=bool)

    def per_var(mask: np.ndarray) -> np.ndarray:
        return _narrow(_offsets(np.bincount(var_of[mask], minlength=nv) if var_of.size else np.zeros(nv, np.int64)))

    bb_off = per_var(live & (kind == _K_BB))
    pt_mask = live & (kind == _K_PT)
    pt_off = per_var(pt_mask)
    gen_mask = live & (kind == _K_GEN)
    gen_off = per_var(gen_mask)
    del live
    card = g.cardinality.astype(np.int64)
    pt_v, pt_u = var_of[pt_mask], other[pt_mask].astype(np.int64)
    pt_size = np.where(card[pt_v] == 2, card[pt_u], card[pt_u] * card[pt_v])
    del pt_mask, pt_v, pt_u
    pt_tab_off = _narrow(_offsets(pt_size))
    val_off = _narrow(_offsets(card))
    max_card = int(card.max()) if nv else 2
    gv = var_of[gen_mask]
    del pt_size, card, gen_mask, var_of, sv
    cbias, bbias, bb_other, bb_b, pt_other, pt_tab, gen_factor, gen_group = _fill(
        g, tables, vf_off, sf, kind, other, base, val_off, bb_off, pt_off, pt_tab_off, gen_off
    )
    del vf_off, sf, kind, other, base
    max_groups = 0
    if gen_factor.size:
        grouped = gen_group >= 0
        if grouped.any():
            first = np.ones(gen_group.shape[0], dtype=bool)
            first[1:] = (gv[1:] != gv[:-1]) | (gen_group[1:] != gen_group[:-1])
            max_groups = int(np.bincount(gv[first & grouped], minlength=nv).max())
    return KernelGraph(
        tables=tables,
        bbias=bbias,
        val_off=val_off,
        cbias=cbias,
        bb_off=bb_off,
        bb_other=bb_other,
        bb_b=bb_b,
        pt_off=pt_off,
        pt_other=pt_other,
        pt_tab_off=pt_tab_off[:-1].copy(),
        pt_tab=pt_tab,
        gen_off=gen_off,
        gen_factor=gen_factor,
        gen_group=gen_group,
        max_card=max_card,
        max_groups=int(max_groups),
    )


# ---------------------------------------------------------------------------------------------
# single-site updates


@njit(cache=True)
def _general_bool(fn, fo, to, fvars, lits, card, tables, weights, weight, semantics, group_weight,
                  gen_factor, gen_group, j, end, values, gsums, v, xcur, gid, gbuf):
    """Boolean v: log-odds from its general entries j..end; records each touched group's
    rest-of-sum and Σφ at v=0/1 in gbuf (stride 3) for the group-sum update after the draw."""
    d = 0.0
    ng = 0
    while j < end:
        gr = gen_group[j]
        if gr < 0:
            f = gen_factor[j]
            w = weights[weight[f]]
            d += w * (
                _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, values, v, 1)
                - _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, values, v, 0)
            )
            j += 1
        else:
            s0 = 0.0
            s1 = 0.0
            while j < end and gen_group[j] == gr:
                f = gen_factor[j]
                s0 += _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, values, v, 0)
                s1 += _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, values, v, 1)
                j += 1
            rest = gsums[gr] - (s1 if xcur == 1 else s0)
            sem = semantics[gr]
            d += weights[group_weight[gr]] * (group_value(sem, rest + s1) - group_value(sem, rest + s0))
            gid[ng] = gr
            gbuf[3 * ng] = rest
            gbuf[3 * ng + 1] = s0
            gbuf[3 * ng + 2] = s1
            ng += 1
    return d, ng


@njit(cache=True)
def _general_cat(fn, fo, to, fvars, lits, card, tables, weights, weight, semantics, group_weight,
                 gen_factor, gen_group, j, end, values, gsums, v, kv, xcur, logits, gid, gbuf, stride):
    """Categorical v: adds its general entries j..end to logits[:kv]; gbuf as in _general_bool
    with stride ``stride`` (rest, then Σφ per value)."""
    ng = 0
    while j < end:
        gr = gen_group[j]
        if gr < 0:
            f = gen_factor[j]
            w = weights[weight[f]]
            for x in range(kv):
                logits[x] += w * _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, values, v, x)
            j += 1
        else:
            b = ng * stride
            for x in range(kv):
                gbuf[b + 1 + x] = 0.0
            while j < end and gen_group[j] == gr:
                f = gen_factor[j]
                for x in range(kv):
                    gbuf[b + 1 + x] += _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, values, v, x)
                j += 1
            rest = gsums[gr] - gbuf[b + 1 + xcur]
            gbuf[b] = rest
            sem = semantics[gr]
            w = weights[group_weight[gr]]
            for x in range(kv):
                logits[x] += w * group_value(sem, rest + gbuf[b + 1 + x])
            gid[ng] = gr
            ng += 1
    return ng


@njit(cache=True)
def _cat_pairs(cbias, o, pt_other, pt_tab_off, pt_tab, j, end, values, kv, logits):
    """Categorical v: unary and pair-table terms into logits[:kv]."""
    for x in range(kv):
        logits[x] = cbias[o + x]
    while j < end:
        b = pt_tab_off[j] + np.int64(values[pt_other[j]]) * kv
        for x in range(kv):
            logits[x] += pt_tab[b + x]
        j += 1


@njit(cache=True)
def _sample_cat(logits, probs, kv, inv_temp, s):
    """Draw from softmax(inv_temp · logits[:kv]) (probs filled); returns (rng state, value)."""
    m = logits[0]
    for x in range(1, kv):
        if logits[x] > m:
            m = logits[x]
    tot = 0.0
    for x in range(kv):
        p = np.exp(inv_temp * (logits[x] - m))
        probs[x] = p
        tot += p
    for x in range(kv):
        probs[x] /= tot
    s = next_state(s)
    r = uniform(s)
    xn = np.int64(kv - 1)
    c = 0.0
    for x in range(kv):
        c += probs[x]
        if r < c:
            xn = np.int64(x)
            break
    return s, xn


@njit(cache=True)
def _chain_loop(g, kg, st, sch, acc, best, n_steps, collect, anneal, cooling, min_temp):
    """The hot loop shared by Gibbs and annealing.

    The boolean fast paths are written out here rather than in helpers on purpose: a call that
    receives the graph NamedTuples passes every array field, which costs far more than the
    update itself; only the rarely needed general paths are separate calls.
    """
    values = st.values
    gsums = st.group_sums
    s = st.rng[0]
    pos = st.pos[0]
    n_sites = sch.sites.shape[0]
    kmax = kg.max_card
    logits = np.empty(kmax)
    probs = np.empty(kmax)
    gid = np.empty(max(kg.max_groups, 1), dtype=np.int32)
    gbuf = np.empty(max(kg.max_groups, 1) * (kmax + 1))
    stride = kmax + 1
    tix = acc.target_index
    sums = acc.sums
    counts = acc.counts
    card = g.cardinality
    fn, fo, to = g.function, g.factor_offsets, g.table_offset
    fvars, lits = g.factor_vars, g.factor_literals
    weights, weight, semantics, group_weight = g.weights, g.weight, g.semantics, g.group_weight
    tables, gen_factor, gen_group = kg.tables, kg.gen_factor, kg.gen_group
    bbias = kg.bbias
    bb_off = kg.bb_off
    bb_other = kg.bb_other
    bb_b = kg.bb_b
    pt_off = kg.pt_off
    pt_other = kg.pt_other
    pt_tab_off = kg.pt_tab_off
    pt_tab = kg.pt_tab
    gen_off = kg.gen_off
    mode = sch.mode
    sites = sch.sites
    prob = sch.prob
    alias = sch.alias
    inv_temp = 1.0
    temp = 1.0
    score = 0.0
    slo = 0.0
    since = 0
    dd = best.score.shape[0] >= 4
    if anneal:
        temp = best.temp[0]
        inv_temp = 1.0 / temp
        score = best.score[0]
        if dd:
            slo = best.score[2]
    for _ in range(n_steps):
        # site choice written out: as a call it cost as much as a boolean update
        if mode == MODE_SWEEP:
            i = pos
            pos += 1
            if pos == n_sites:
                pos = 0
        elif mode == MODE_UNIFORM:
            s = next_state(s)
            i = bounded(s, n_sites)
        else:
            s = next_state(s)
            i = bounded(s, n_sites)
            s = next_state(s)
            if uniform(s) >= prob[i]:
                i = np.int64(alias[i])
        v = sites[i]
        xcur = np.int64(values[v])
        if card[v] == 2:
            d = bbias[v]
            for j in range(bb_off[v], bb_off[v + 1]):
                d += bb_b[j] * values[bb_other[j]]
            for j in range(pt_off[v], pt_off[v + 1]):
                d += pt_tab[pt_tab_off[j] + values[pt_other[j]]]
            ng = 0
            if gen_off[v] < gen_off[v + 1]:
                dg, ng = _general_bool(
                    fn, fo, to, fvars, lits, card, tables, weights, weight, semantics, group_weight,
                    gen_factor, gen_group, gen_off[v], gen_off[v + 1], values, gsums, v, xcur, gid, gbuf,
                )
                d += dg
            p1 = 1.0 / (1.0 + np.exp(-inv_temp * d))
            s = next_state(s)
            xn = np.int64(1) if uniform(s) < p1 else np.int64(0)
            values[v] = xn  # unconditional: a branch on "changed" mispredicts half the time
            if ng > 0 and xn != xcur:
                for k in range(ng):
                    gsums[gid[k]] = gbuf[3 * k] + gbuf[3 * k + 1 + xn]
            if anneal and xn != xcur:
                if dd:
                    score, slo = dd_add(score, slo, (xn - xcur) * d)
                else:
                    score += (xn - xcur) * d
            if collect:
                t = tix[v]
                if t >= 0:
                    sums[t, 0] += 1.0 - p1
                    sums[t, 1] += p1
                    counts[t] += 1
        else:
            kv = card[v]
            _cat_pairs(kg.cbias, kg.val_off[v], pt_other, pt_tab_off, pt_tab, pt_off[v], pt_off[v + 1], values, kv, logits)
            ng = 0
            if gen_off[v] < gen_off[v + 1]:
                ng = _general_cat(
                    fn, fo, to, fvars, lits, card, tables, weights, weight, semantics, group_weight,
                    gen_factor, gen_group, gen_off[v], gen_off[v + 1], values, gsums, v, kv, xcur, logits, gid, gbuf, stride,
                )
            s, xn = _sample_cat(logits, probs, kv, inv_temp, s)
            if xn != xcur:
                values[v] = xn
                for k in range(ng):
                    gsums[gid[k]] = gbuf[k * stride] + gbuf[k * stride + 1 + xn]
                if anneal:
                    if dd:
                        score, slo = dd_add(score, slo, logits[xn] - logits[xcur])
                    else:
                        score += logits[xn] - logits[xcur]
            if collect:
                t = tix[v]
                if t >= 0:
                    for x in range(kv):
                        sums[t, x] += probs[x]
                    counts[t] += 1
        if anneal:
            since += 1
            if since == n_sites:
                since = 0
                temp = max(temp * cooling, min_temp)
                inv_temp = 1.0 / temp
                if dd_above(score, slo, best.score, dd):
                    best.score[1] = score
                    if dd:
                        best.score[3] = slo
                    best.values[:] = values
    if anneal:
        if dd_above(score, slo, best.score, dd):
            best.score[1] = score
            if dd:
                best.score[3] = slo
            best.values[:] = values
        best.score[0] = score
        if dd:
            best.score[2] = slo
        best.temp[0] = temp
    st.rng[0] = s
    st.pos[0] = pos


@njit(cache=True, nogil=True)
def run_chain(g, kg, st, sch, acc, best, n_steps, collect):
    """``n_steps`` Gibbs updates of one chain; with ``collect`` each update of a target adds
    its full conditional to ``acc`` (Rao-Blackwellisation). State is updated in place;
    ``best`` is unused here (any `Best`; it keeps one compiled loop for both uses)."""
    _chain_loop(g, kg, st, sch, acc, best, n_steps, collect, False, 1.0, 1.0)


@njit(cache=True, nogil=True)
def anneal_chain(g, kg, st, sch, acc, best, n_steps, cooling, min_temp):
    """``n_steps`` tempered Gibbs updates (conditional^(1/τ)); τ = best.temp[0] is multiplied by
    ``cooling`` after every len(sites) updates, floored at ``min_temp``. The running log score
    best.score[0] follows every move exactly; the best state is saved at every pass boundary
    and at the end."""
    _chain_loop(g, kg, st, sch, acc, best, n_steps, False, True, cooling, min_temp)


@njit(cache=True, nogil=True)
def greedy_sweep(g, kg, st, sites):
    """One pass of iterated conditional modes over ``sites`` (ties keep the current value);
    returns (number of changed variables, summed Δ log score)."""
    values = st.values
    gsums = st.group_sums
    kmax = kg.max_card
    logits = np.empty(kmax)
    gid = np.empty(max(kg.max_groups, 1), dtype=np.int32)
    gbuf = np.empty(max(kg.max_groups, 1) * (kmax + 1))
    stride = kmax + 1
    card = g.cardinality
    fn, fo, to = g.function, g.factor_offsets, g.table_offset
    fvars, lits = g.factor_vars, g.factor_literals
    weights, weight, semantics, group_weight = g.weights, g.weight, g.semantics, g.group_weight
    tables, gen_factor, gen_group = kg.tables, kg.gen_factor, kg.gen_group
    bbias, bb_off, bb_other, bb_b = kg.bbias, kg.bb_off, kg.bb_other, kg.bb_b
    pt_off, pt_other, pt_tab_off, pt_tab, gen_off = kg.pt_off, kg.pt_other, kg.pt_tab_off, kg.pt_tab, kg.gen_off
    changed = 0
    total = 0.0
    for i in range(sites.shape[0]):
        v = sites[i]
        xcur = np.int64(values[v])
        if card[v] == 2:
            d = bbias[v]
            for j in range(bb_off[v], bb_off[v + 1]):
                d += bb_b[j] * values[bb_other[j]]
            for j in range(pt_off[v], pt_off[v + 1]):
                d += pt_tab[pt_tab_off[j] + values[pt_other[j]]]
            ng = 0
            if gen_off[v] < gen_off[v + 1]:
                dg, ng = _general_bool(
                    fn, fo, to, fvars, lits, card, tables, weights, weight, semantics, group_weight,
                    gen_factor, gen_group, gen_off[v], gen_off[v + 1], values, gsums, v, xcur, gid, gbuf,
                )
                d += dg
            xn = np.int64(1) if d > 0.0 else (np.int64(0) if d < 0.0 else xcur)
            gain = abs(d)
            k3 = 3
        else:
            kv = card[v]
            _cat_pairs(kg.cbias, kg.val_off[v], pt_other, pt_tab_off, pt_tab, pt_off[v], pt_off[v + 1], values, kv, logits)
            ng = 0
            if gen_off[v] < gen_off[v + 1]:
                ng = _general_cat(
                    fn, fo, to, fvars, lits, card, tables, weights, weight, semantics, group_weight,
                    gen_factor, gen_group, gen_off[v], gen_off[v + 1], values, gsums, v, kv, xcur, logits, gid, gbuf, stride,
                )
            xn = xcur
            for x in range(kv):
                if logits[x] > logits[xn]:
                    xn = np.int64(x)
            gain = logits[xn] - logits[xcur]
            k3 = stride
        if xn != xcur:
            values[v] = xn
            for k in range(ng):
                gsums[gid[k]] = gbuf[k * k3] + gbuf[k * k3 + 1 + xn]
            changed += 1
            total += gain
    return changed, total
