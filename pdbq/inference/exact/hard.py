"""Hard constraints apart from soft weights: weights of magnitude `HARD_WEIGHT` or more.

A weight of 1e20 next to one of 2 cannot be added in doubles (``-1e20 + 2 == -1e20``): every
method that sums a world's energy would lose the 2. Yet such a weight only decides *which*
worlds count: a world that gives up a hard factor's best value is ``e^-1e20`` times less
probable, i.e. impossible, whatever the soft weights say. So the exact answer depends on the hard
weights only through the ranking of the worlds' hard costs, and on the soft weights fully.

`split_hard` rewrites the hard weights (``|w| ≥ HARD_WEIGHT``) so that this is what a double
can hold: each hard weight is multiplied by a factor ``s < 1`` chosen so that

* any two hard costs that differ, differ after scaling by at least ``MARGIN`` plus everything
  the soft weights can add (their span): the ranking of worlds is the same, and a world that
  costs more than the best is still ``≤ e^-MARGIN`` times less probable (0 in doubles);
* the hard costs of the best worlds, which every method adds beside the soft weights, are small
  enough that the soft weights keep their digits.

Hard weights of very different sizes (1e10 and 1e20) are scaled in tiers: a tier whose smallest
cost outweighs everything below it (soft weights and lower tiers together) is scaled so it still
does, with ``MARGIN`` to spare; within a tier the costs keep their proportions. Where this cannot
be shown (hard costs closer than the soft span, or a head group too large to enumerate), the
weights are kept and a warning says that precision may be lost.

The rewritten graph is what exact elimination, the samplers and annealing read; the factor
store and the catalog keep the user's weights.

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder(); a, c = b.add_variables(2)
>>> _ = b.add_factor(FactorFunction.ISTRUE, [a], weight=b.add_weight(-1e20))
>>> _ = b.add_factor(FactorFunction.IMPLY_MLN, [a, c], weight=b.add_weight(-1e20))
>>> _ = b.add_factor(FactorFunction.ISTRUE, [c], weight=b.add_weight(2.0))
>>> h = split_hard(b.build())
>>> h.n_hard, [round(float(w), 1) for w in h.graph.weights]
(2, [-204.0, -204.0, 2.0])
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdbq.graph.layout import FactorGraph
from pdbq.language.nodes import FactorFunction, Semantics

__all__ = ["HARD_WEIGHT", "MARGIN", "HardSplit", "split_hard"]

HARD_WEIGHT = 1e6
"""A weight of this magnitude or more is a hard constraint (docs/factors.md)."""

MARGIN = 200.0
"""Log-probability by which a world that costs more hard weight than the best stays behind it
after scaling (``e^-200`` ≈ 1e-87: no double sum of fewer than 2^250 such worlds shows them)."""

# Beyond this cost of one hard factor after scaling, a soft weight added beside it keeps less
# than 1e-9 of absolute precision in a double (2^-52 · 4.5e6 ≈ 1e-9).
_PRECISION_SPAN = 4.5e6
# A head group's sums are enumerated to find its costs up to this many values.
_MAX_GROUP_SUMS = 10_000

_F = FactorFunction


@dataclass(frozen=True, eq=False)
class HardSplit:
    """``graph``: the graph with its hard weights rescaled (the input itself when there are none).
    ``n_hard``: hard factors and head groups; ``coupled``: free variables that share a hard
    factor or head group with another free variable (single-variable moves cannot cross between
    the worlds such a constraint allows); ``scales``: each hard weight's factor (weight id →
    s); ``warnings``: where precision is still lost."""

    graph: FactorGraph
    n_hard: int = 0
    coupled: int = 0
    scales: tuple[tuple[int, float], ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def has_hard(self) -> bool:
        return self.n_hard > 0


def _head_truths(graph: FactorGraph, f: int) -> list[int]:
    lo, hi = int(graph.factor_offsets[f]), int(graph.factor_offsets[f + 1])
    if hi == lo:
        return [0]
    v, lit = int(graph.factor_vars[hi - 1]), int(graph.factor_literals[hi - 1])
    return [0, 1] if lit >= 0 else list(range(int(graph.cardinality[v])))


def _phi_values(graph: FactorGraph, f: int) -> np.ndarray:
    """Every value φ_f can take (a superset: combinations the literals rule out may be in it)."""
    code = int(graph.function[f])
    arity = int(graph.factor_offsets[f + 1] - graph.factor_offsets[f])
    if code == _F.TABLE:
        off = int(graph.table_offset[f])
        size = math.prod(int(graph.cardinality[v]) for v in graph.factor_args(f))
        t = graph.tables[off : off + size]
        return np.unique(t[np.isfinite(t)])
    if code in (_F.OR, _F.AND, _F.ISTRUE, _F.EQUAL):
        return np.array([-1.0, 1.0])
    if arity == 0:
        return np.array([0.0])
    heads = _head_truths(graph, f)
    body = arity > 1
    if code == _F.IMPLY:
        vals = {2.0 * h - 1.0 for h in heads} | ({0.0} if body else set())
    elif code == _F.IMPLY_MLN:
        vals = {float(h) for h in heads} | ({1.0} if body else set())
    elif code == _F.VOTE:
        card = int(graph.cardinality[int(graph.factor_vars[int(graph.factor_offsets[f + 1]) - 1])])
        vals = {(2.0 * h - 1.0) if card == 2 else float(h) for h in heads} | ({0.0} if body else set())
    elif code in (_F.LINEAR, _F.RATIO, _F.LOGICAL):
        ns = range(arity) if body else heads  # n = Σ_i [¬b_i ∨ h] over the body, or the head
        if code == _F.LOGICAL:
            vals = {float(n > 0) if body else float(n) for n in ns}
        elif code == _F.RATIO:
            vals = {math.log2(1.0 + n) for n in ns}
        else:
            vals = {float(n) for n in ns}
    else:
        vals = {-1.0, 0.0, 1.0}
    return np.array(sorted(vals))


def _group_values(graph: FactorGraph, members: np.ndarray, semantics: int) -> np.ndarray | None:
    """Every value g(Σ φ) a head group can take, or None when its sums are too many to list."""
    sets = [_phi_values(graph, int(f)) for f in members]
    if not all(np.all(s == np.round(s)) for s in sets):
        return None
    lo = int(sum(s.min() for s in sets))
    hi = int(sum(s.max() for s in sets))
    if hi - lo > _MAX_GROUP_SUMS:
        return None
    s = np.arange(lo, hi + 1, dtype=np.float64)
    if semantics == Semantics.LOGICAL:
        return np.unique(np.sign(s))
    if semantics == Semantics.RATIO:
        return np.unique(np.sign(s) * np.log1p(np.abs(s)))
    return s


def _spread_bounds(graph: FactorGraph, arity: np.ndarray) -> np.ndarray:
    """An upper bound of max φ_f − min φ_f for every factor, from its function and arity (a
    TABLE's from its finite entries). Raw arguments over categorical variables occur only in
    EQUAL and TABLE (docs/factors.md), so every other function's truths are 0 or 1."""
    code = graph.function.astype(np.int64)
    n = np.maximum(arity - 1, 1).astype(np.float64)
    out = np.full(code.shape[0], 2.0)
    out[code == _F.IMPLY_MLN] = 1.0
    out[code == _F.LOGICAL] = 1.0
    out[code == _F.LINEAR] = n[code == _F.LINEAR]
    out[code == _F.RATIO] = np.log2(1.0 + n[code == _F.RATIO])
    for f in np.flatnonzero(code == _F.TABLE).tolist():
        v = _phi_values(graph, f)
        out[f] = float(v.max() - v.min()) if v.size else 0.0
    return out


def _kinds(graph: FactorGraph, factors: np.ndarray, arity: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What each factor's value set depends on (`_phi_values`): weight id, function, arity, head
    cardinality and whether the head is a raw value; TABLE factors are each their own kind.
    Returns (one representative factor per kind, its row in ``kinds``, how many share it)."""
    if factors.size == 0:
        return factors, factors, factors
    ar = arity[factors]
    last = np.maximum(graph.factor_offsets[factors + 1] - 1, 0)
    head = graph.factor_vars[last] if graph.n_edges else np.zeros(factors.size, dtype=np.int32)
    card = np.where(ar > 0, graph.cardinality[head], 0)
    raw = np.where(ar > 0, graph.factor_literals[last] < 0, False)
    code = graph.function[factors].astype(np.int64)
    own = np.where(code == _F.TABLE, factors, -1)  # a TABLE factor is a kind of its own
    rows = np.stack([graph.weight[factors].astype(np.int64), code, ar, card.astype(np.int64),
                     raw.astype(np.int64), own.astype(np.int64)], axis=1)
    _, first, counts = np.unique(rows, axis=0, return_index=True, return_counts=True)
    return factors[first], first, counts


def _mark_coupled(graph: FactorGraph, factors: np.ndarray, free: np.ndarray, out: np.ndarray,
                  together: bool = False) -> None:
    """Mark in ``out`` the free variables of every factor in ``factors`` (of all of them at once,
    a head group, when ``together``) that has two or more free arguments."""
    lo, hi = graph.factor_offsets[factors], graph.factor_offsets[factors + 1]
    if together:
        vs = np.unique(np.concatenate([graph.factor_vars[a:b] for a, b in zip(lo.tolist(), hi.tolist())]))
        vs = vs[free[vs]]
        if vs.size >= 2:
            out[vs] = True
        return
    edge_free = free[graph.factor_vars]
    cum = np.concatenate([[0], np.cumsum(edge_free, dtype=np.int64)])
    pick = np.zeros(graph.n_factors, dtype=bool)
    pick[factors[(cum[hi] - cum[lo]) >= 2]] = True
    edge_factor = np.repeat(np.arange(graph.n_factors), np.diff(graph.factor_offsets))
    out[graph.factor_vars[pick[edge_factor] & edge_free]] = True


def _min_gap(costs: np.ndarray) -> float:
    """The smallest positive difference between two of ``costs`` (0 counted as one of them)."""
    c = np.unique(np.concatenate([costs, [0.0]]))
    return float(np.diff(c).min()) if c.size > 1 else math.inf


def split_hard(graph: FactorGraph) -> HardSplit:
    """`graph` with its hard weights rescaled as the module says; see `HardSplit`."""
    w = graph.weights
    if w.size == 0 or not np.any(np.abs(w) >= HARD_WEIGHT):
        return HardSplit(graph)
    hard_wid = np.abs(w) >= HARD_WEIGHT
    # costs are formed in units of a power of two within a factor 2 of the largest hard weight
    # (exact, and 1e308 · 2 does not overflow); soft weights and the margin stay in plain units
    unit = math.ldexp(1.0, math.frexp(float(np.abs(w[hard_wid]).max()))[1] - 1)
    # terms: (weight id, its cost values ≥ 0 in units of `unit`, how many factors or groups
    # share them); soft terms only add to the soft span
    terms: list[tuple[int, np.ndarray, int]] = []
    unsure: list[str] = []
    free = graph.evidence < 0
    coupled = np.zeros(graph.n_vars, dtype=bool)
    arity = np.diff(graph.factor_offsets)
    fw = w[graph.weight]
    bounds = _spread_bounds(graph, arity)
    alone = graph.group < 0
    soft_span = float(np.sum(np.abs(fw[alone & ~hard_wid[graph.weight]]) * bounds[alone & ~hard_wid[graph.weight]]))
    hard_alone = np.flatnonzero(alone & hard_wid[graph.weight] & (fw != 0.0))
    reps, _, counts = _kinds(graph, hard_alone, arity)  # one value set per kind of factor
    for f, n in zip(reps.tolist(), counts.tolist()):
        wid = int(graph.weight[f])
        e = (float(w[wid]) / unit) * _phi_values(graph, f)
        terms.append((wid, e.max() - e if e.size else e, int(n)))
    if hard_alone.size:
        _mark_coupled(graph, hard_alone, free, coupled)
    if graph.n_groups:
        order = np.argsort(graph.group, kind="stable")
        grp = graph.group[order]
        starts = np.searchsorted(grp, np.arange(graph.n_groups))
        ends = np.searchsorted(grp, np.arange(graph.n_groups), side="right")
        member_bound = np.bincount(graph.group[~alone], weights=bounds[~alone], minlength=graph.n_groups)
        gw = w[graph.group_weight]
        for g in range(graph.n_groups):
            wg = float(gw[g])
            if wg == 0.0 or starts[g] == ends[g]:
                continue
            sem = int(graph.semantics[g])
            if not hard_wid[graph.group_weight[g]]:
                total = float(member_bound[g])
                span = 2.0 if sem == Semantics.LOGICAL else (2.0 * math.log1p(total) if sem == Semantics.RATIO else total)
                soft_span += abs(wg) * span
                continue
            members = order[starts[g] : ends[g]]
            vals = _group_values(graph, members, sem)
            if vals is None:
                unsure.append(f"head group {g} ({members.size} factors)")
                continue
            e = (wg / unit) * vals
            terms.append((int(graph.group_weight[g]), e.max() - e, 1))
            _mark_coupled(graph, members, free, coupled, together=True)
    if not terms and not unsure:
        return HardSplit(graph)
    coupled = set(np.flatnonzero(coupled).tolist())
    n_hard = sum(n for _, _, n in terms) + len(unsure)
    warnings: list[str] = []
    if unsure:
        warnings.append(f"{unsure[0]} has a weight of magnitude ≥ {HARD_WEIGHT:g} and more sums than pdbq lists: "
                        "its weight is kept as written, so soft weights beside it may lose precision")
        return HardSplit(graph, n_hard, len(coupled), (), tuple(warnings))

    # tiers by weight magnitude: a new tier starts where its smallest cost gap outweighs the
    # (true) span of everything below it twice over
    by_mag: dict[float, list[int]] = {}
    for k, (wid, _, _) in enumerate(terms):
        by_mag.setdefault(abs(float(w[wid])), []).append(k)
    tiers: list[list[int]] = []
    below = soft_span / unit  # in units of `unit`, like the costs
    for mag in sorted(by_mag):
        ks = by_mag[mag]
        gap = _min_gap(np.concatenate([terms[k][1] for k in ks]))
        if tiers and not gap > 2.0 * below + MARGIN / unit:
            tiers[-1].extend(ks)
        else:
            tiers.append(list(ks))
        below += sum(float(terms[k][1].max(initial=0.0)) * terms[k][2] for k in ks)

    factors: dict[int, float] = {}  # weight id → new weight / (old weight / unit)
    scaled_below = soft_span  # plain units from here on
    largest = 0.0  # the largest cost one hard factor adds, after scaling
    kept_big = False
    for tier in tiers:
        gap = _min_gap(np.concatenate([terms[k][1] for k in tier]))
        need = MARGIN + scaled_below
        spread = sum(float(terms[k][1].max(initial=0.0)) * terms[k][2] for k in tier)
        if gap > need / unit:
            factor = need / gap
        else:
            factor, kept_big = unit, True
        for k in tier:
            factors[terms[k][0]] = factor
        scaled_below += spread * factor
        largest = max(largest, max(float(terms[k][1].max(initial=0.0)) for k in tier) * factor)
    new_w = w.copy()
    for wid, factor in factors.items():
        new_w[wid] = (w[wid] / unit) * factor
    scales = {wid: factor / unit for wid, factor in factors.items()}
    if largest > _PRECISION_SPAN:
        why = ("hard costs lie closer together than the soft weights can move a world"
               if kept_big else "hard weights of very different sizes")
        warnings.append(f"weights of magnitude ≥ {HARD_WEIGHT:g} are treated as hard constraints, but {why}: "
                        f"one factor's cost (up to {largest:.3g} after rescaling) leaves soft weights beside it "
                        "with less than 1e-9 precision")
    return HardSplit(graph._replace(weights=new_w), n_hard, len(coupled),
                     tuple(sorted((int(k), float(v)) for k, v in scales.items())), tuple(warnings))
