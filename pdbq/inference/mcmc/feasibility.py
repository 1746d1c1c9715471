"""Zero-probability evidence: constraint propagation over the hard factors of a model.

Only a log-potential of -inf can make evidence impossible (every finite weight leaves every
world some probability), and in pdbq such entries come from imported tables (a 0 in a UAI
table; a +inf entry makes the other entries of its table impossible). Given the evidence, each
variable starts with its observed value or its whole domain; each hard factor keeps only the
values that appear in some entry of non-zero probability compatible with the other variables'
values (generalised arc consistency), until nothing changes. A factor left with no such entry
proves that the evidence has probability zero, and names the culprit: a factor whose variables
are all observed and whose entry is impossible, an all-zero table, or a variable the evidence
leaves no possible value.

Propagation is sound (it never reports possible evidence as impossible) but not complete: a
contradiction that needs search to find passes it, and then exact inference (log Z = -inf) or
the samplers' final-state check report it.

>>> hf = HardFactors(np.array([0, 2]), np.array([0, 1]), np.array([0, 4]),
...                   np.log(np.array([1.0, 0.0, 0.0, 1.0])), np.array([2, 2]))
>>> propagate(hf, np.array([0, 1]), np.array([0, 1])) is not None   # x0 = 0, x1 = 1 violate x0 == x1
True
>>> propagate(hf, np.array([0]), np.array([1])) is None
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

__all__ = ["HardFactors", "Violation", "propagate", "forced_values", "hard_factors", "violated_table_factor", "MAX_PROPAGATION_ENTRIES"]

# Tables larger than this are skipped (their support is not computed): propagation stays a cheap
# check before inference; exact inference or the samplers still catch what it misses.
MAX_PROPAGATION_ENTRIES = 1 << 16


class HardFactors(NamedTuple):
    """Factors holding at least one infinite log-potential, over global variable ids.

    Factor ``i`` is over ``vids[offsets[i]:offsets[i+1]]`` (last variable fastest in its table)
    with log-table ``tables[table_offsets[i]:table_offsets[i+1]]``; ``cardinality[k]`` is the
    domain size of ``vids[k]``.
    """

    offsets: np.ndarray  # int64[n + 1]
    vids: np.ndarray  # int64[edges]
    table_offsets: np.ndarray  # int64[n + 1]
    tables: np.ndarray  # float64[entries]
    cardinality: np.ndarray  # int64[edges]

    @property
    def n_factors(self) -> int:
        return int(self.offsets.shape[0] - 1)


class Violation(NamedTuple):
    """The factor (index into the `HardFactors`) that no world allowed by the evidence satisfies;
    ``fixed``: its variables were all fixed (observed, or forced by other factors), else it left
    some variable without a possible value."""

    factor: int
    fixed: bool


def _allowed(table: np.ndarray) -> np.ndarray:
    """Entries of non-zero probability: finite ones, or only the +inf ones when there are any."""
    if np.any(np.isposinf(table)):
        return np.isposinf(table)
    return table > -np.inf


def _needs_a_look(hard: HardFactors, ev_vids: np.ndarray) -> np.ndarray:
    """bool[n_factors]: factors that touch an observed variable, are too large to propagate
    through, or leave some value of one of their variables without an allowed entry (computed
    for all factors at once: per-factor numpy calls cost more than these tiny tables)."""
    n = hard.n_factors
    arity = np.diff(hard.offsets)
    sizes = np.diff(hard.table_offsets)
    edge_factor = np.repeat(np.arange(n), arity)
    out = np.zeros(n, dtype=bool)
    out[edge_factor[np.isin(hard.vids, ev_vids)]] = True
    out |= sizes > MAX_PROPAGATION_ENTRIES
    if not hard.tables.size:
        return out | (sizes == 0)
    allowed = hard.tables > -np.inf
    has_pos = np.zeros(n, dtype=bool)
    entry_factor = np.repeat(np.arange(n), sizes)
    has_pos[entry_factor[np.isposinf(hard.tables)]] = True
    allowed = np.where(has_pos[entry_factor], np.isposinf(hard.tables), allowed)
    # per edge (factor, axis): stride of the axis in its factor's row-major table
    card = hard.cardinality.astype(np.int64)
    # stride = product of the cardinalities after the axis in its factor, from cumulative sums
    # of logs (exact after rounding for the tables propagated, at most 2**16 entries; a larger
    # table is looked at anyway, and a wrong stride only mislabels values within its own axes)
    logs = np.concatenate([[0.0], np.cumsum(np.log(np.maximum(card, 1)))])
    ends = np.repeat(hard.offsets[1:], arity)
    stride = np.rint(np.exp(logs[ends] - logs[np.arange(card.size) + 1])).astype(np.int64)
    stride = np.maximum(stride, 1)
    # every (edge, value) slot must see an allowed entry
    slot_base = np.concatenate([[0], np.cumsum(card)])
    supported = np.zeros(int(slot_base[-1]), dtype=bool)
    entry_edges_start = hard.offsets[entry_factor]
    local = np.arange(hard.tables.size) - hard.table_offsets[entry_factor]
    for k in range(int(arity.max()) if n else 0):
        has = arity[entry_factor] > k
        e = entry_edges_start[has] + k
        value = (local[has] // stride[e]) % card[e]
        supported[slot_base[e][allowed[has]] + value[allowed[has]]] = True
    missing = np.zeros(n, dtype=bool)
    slot_factor = np.repeat(edge_factor, card)
    missing[slot_factor[~supported]] = True
    some = np.zeros(n, dtype=bool)  # a factor with no allowed entry at all (any arity) fails
    some[entry_factor[allowed]] = True
    return out | missing | ~some | (sizes == 0)


def propagate(hard: HardFactors, ev_vids: np.ndarray, ev_values: np.ndarray) -> Violation | None:
    """The first factor that the evidence (``ev_vids`` sorted, with ``ev_values``) leaves without an
    entry of non-zero probability, after propagating every factor's constraints; None if none."""
    return _propagate(hard, ev_vids, ev_values)[0]


def _propagate(hard: HardFactors, ev_vids: np.ndarray,
               ev_values: np.ndarray) -> tuple[Violation | None, dict[int, np.ndarray]]:
    """(`propagate`'s answer, the domains propagation narrowed: bool[card] per variable it looked at)."""
    n = hard.n_factors
    domains: dict[int, np.ndarray] = {}
    if n == 0:
        return None, domains

    def domain(v: int, card: int) -> np.ndarray:
        d = domains.get(v)
        if d is None:
            d = np.ones(card, dtype=bool)
            i = int(np.searchsorted(ev_vids, v))
            if i < ev_vids.shape[0] and ev_vids[i] == v:
                d[:] = False
                x = int(ev_values[i])
                if 0 <= x < card:
                    d[x] = True
            domains[v] = d
        return d

    # A factor none of whose variables is observed, and whose allowed entries support every value
    # of every variable, changes no domain and cannot fail while its neighbours' domains are
    # full: it is looked at only once one of them shrinks (through ``touching``).
    start = _needs_a_look(hard, ev_vids)
    f = revise(hard, domain, domains, factors_touching(hard), np.flatnonzero(start).tolist(), start.copy())
    if f is None:
        return None, domains
    lo, hi = int(hard.offsets[f]), int(hard.offsets[f + 1])
    cards = [int(c) for c in hard.cardinality[lo:hi]]
    fixed = all(int(domain(v, c).sum()) == 1 for v, c in zip(hard.vids[lo:hi].tolist(), cards))
    return Violation(f, fixed), domains


def factors_touching(hard: HardFactors) -> dict[int, list[int]]:
    """The hard factors of each variable (by variable id)."""
    touching: dict[int, list[int]] = {}
    for f in range(hard.n_factors):
        for v in hard.vids[hard.offsets[f] : hard.offsets[f + 1]].tolist():
            touching.setdefault(v, []).append(f)
    return touching


def revise(hard: HardFactors, domain: Callable[[int, int], np.ndarray], domains: dict[int, np.ndarray],
           touching: dict[int, list[int]], queue: list[int], queued: np.ndarray,
           allowed: Callable[[int], np.ndarray] | None = None,
           narrowed: Callable[[int, np.ndarray], None] | None = None) -> int | None:
    """Generalised arc consistency from the factors in ``queue`` (``queued[f]``: f waits in it):
    each factor's allowed entries, restricted to its variables' domains (``domain(v, card)``,
    which keeps them in ``domains``), narrow those domains (``narrowed(v, domain)`` is told), and
    a narrowed variable queues its other factors (``touching``). ``allowed(f)``: factor f's
    allowed entries when the caller keeps them. Factors over `MAX_PROPAGATION_ENTRIES` entries
    are skipped. Returns the first factor left without an allowed entry, or None."""
    while queue:
        f = queue.pop()
        queued[f] = False
        lo, hi = int(hard.offsets[f]), int(hard.offsets[f + 1])
        t0, t1 = int(hard.table_offsets[f]), int(hard.table_offsets[f + 1])
        if t1 - t0 > MAX_PROPAGATION_ENTRIES:
            continue
        vids = hard.vids[lo:hi].tolist()
        cards = [int(c) for c in hard.cardinality[lo:hi]]
        table = _allowed(hard.tables[t0:t1]) if allowed is None else allowed(f)
        ok = table.reshape(cards) if cards else table
        for axis, (v, c) in enumerate(zip(vids, cards)):
            shape = [1] * len(cards)
            shape[axis] = c
            ok = ok & domain(v, c).reshape(shape)
        if not ok.any():
            return f
        for axis, (v, c) in enumerate(zip(vids, cards)):
            other = tuple(a for a in range(len(cards)) if a != axis)
            support = ok.any(axis=other) if other else ok
            d = domains[v]
            if np.array_equal(support, d):
                continue
            domains[v] = d & support
            if narrowed is not None:
                narrowed(v, domains[v])
            for g in touching.get(v, ()):
                if g != f and not queued[g]:
                    queued[g] = True
                    queue.append(g)
    return None


# Graphs with more hard factors than this are not propagated for `forced_values` (a Python loop
# over the factors): their forced variables keep being sampled like any other.
MAX_FORCED_FACTORS = 50_000


def hard_factors(graph) -> HardFactors | None:
    """The TABLE factors of ``graph`` (a `FactorGraph`) holding an infinite log-potential, as
    `HardFactors`; None when there is none or more than `MAX_FORCED_FACTORS`."""
    tables = graph.tables
    if not tables.size or np.all(np.isfinite(tables)):
        return None
    tf = np.flatnonzero(graph.table_offset >= 0)
    lo = graph.factor_offsets[tf]
    hi = graph.factor_offsets[tf + 1]
    card = graph.cardinality.astype(np.int64)
    sizes = np.ones(tf.size, dtype=np.int64)
    for k in range(int((hi - lo).max()) if tf.size else 0):
        m = hi - lo > k
        sizes[m] *= card[graph.factor_vars[lo[m] + k]]
    start = graph.table_offset[tf]
    ends = np.cumsum(sizes)
    entry_factor = np.repeat(np.arange(tf.size), sizes)
    entries = tables[np.repeat(start, sizes) + np.arange(int(sizes.sum())) - np.repeat(ends - sizes, sizes)]
    infinite = np.zeros(tf.size, dtype=bool)
    infinite[entry_factor[~np.isfinite(entries)]] = True
    keep = np.flatnonzero(infinite & (hi > lo))
    if keep.size == 0 or keep.size > MAX_FORCED_FACTORS:
        return None
    arity = (hi - lo)[keep]
    vids = np.concatenate([graph.factor_vars[lo[f] : hi[f]] for f in keep.tolist()]).astype(np.int64)
    tabs = np.concatenate([tables[start[f] : start[f] + sizes[f]] for f in keep.tolist()])
    hard = HardFactors(np.concatenate([[0], np.cumsum(arity)]), vids, np.concatenate([[0], np.cumsum(sizes[keep])]),
                       tabs, card[vids])
    return hard


def forced_values(graph) -> tuple[np.ndarray, np.ndarray]:
    """(variables, values): the free variables of ``graph`` (a `FactorGraph`) that the evidence and
    the hard factors leave exactly one possible value (generalised arc consistency, `propagate`).
    Sound: every world of non-zero probability gives such a variable that value, so its marginal
    is that point mass. Empty when the evidence is impossible as far as propagation tells (the
    samplers report that) or the graph has more than `MAX_FORCED_FACTORS` hard factors."""
    none = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    hard = hard_factors(graph)
    if hard is None:
        return none
    ev = np.flatnonzero(graph.evidence >= 0).astype(np.int64)
    found, domains = _propagate(hard, ev, graph.evidence[ev].astype(np.int64))
    if found is not None:
        return none
    out = [(v, int(np.flatnonzero(d)[0])) for v, d in domains.items() if graph.evidence[v] < 0 and int(d.sum()) == 1]
    if not out:
        return none
    arr = np.array(sorted(out), dtype=np.int64)
    return arr[:, 0], arr[:, 1]


def violated_table_factor(graph, values: np.ndarray) -> int:
    """A TABLE factor of ``graph`` (a `FactorGraph`) whose entry at the full assignment ``values``
    has probability zero (-inf, or finite in a table holding +inf), or -1 when there is none: the
    check that a sampler's final state satisfies every hard constraint."""
    tables = graph.tables
    if not tables.size or np.all(np.isfinite(tables)):
        return -1
    tf = np.flatnonzero(graph.table_offset >= 0)
    if not tf.size:
        return -1
    lo = graph.factor_offsets[tf]
    arity = graph.factor_offsets[tf + 1] - lo
    idx = np.zeros(tf.size, dtype=np.int64)
    for k in range(int(arity.max())):
        m = arity > k
        v = graph.factor_vars[lo[m] + k]
        idx[m] = idx[m] * graph.cardinality[v] + np.asarray(values, dtype=np.int64)[v]
    start = graph.table_offset[tf]
    entry = tables[start + idx]
    bad = entry == -np.inf
    if np.any(np.isposinf(tables)):
        size = np.ones(tf.size, dtype=np.int64)
        for k in range(int(arity.max())):
            m = arity > k
            size[m] *= graph.cardinality[graph.factor_vars[lo[m] + k]]
        must = np.array([np.any(np.isposinf(tables[s : s + n])) for s, n in zip(start.tolist(), size.tolist())])
        bad |= must & ~np.isposinf(entry)
    hit = np.flatnonzero(bad)
    return int(tf[hit[0]]) if hit.size else -1
