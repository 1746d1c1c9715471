"""Exact inference by variable elimination in log space: all marginals, log Z and MAP.

The energy is turned into log-tables (`potentials.hyperedges`), evidence is sliced in, and a
min-fill order (`elimination_order`) defines a clique tree: eliminating ``v`` creates the clique
``C_v = {v} ∪ N(v)``, whose parent is the clique of the first variable of ``C_v \\ {v}`` to be
eliminated next. One upward pass (sum-product in log space) gives log Z; one downward pass
(Hugin style: the parent's separator marginal minus the child's own upward message, with
``-inf - -inf = -inf``) calibrates every clique, so all marginals come from two passes.
MAP runs the upward pass with max instead of log-sum-exp and traces the argmax tables back.
Disconnected components are separate trees of the same forest; variables in no factor are
uniform.

Budget: the largest clique table must hold at most ``max_table`` entries (default 2**26, width
about 25 for booleans); beyond it `InferenceError` states the induced width and table size.

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder(); x, y = b.add_variables(2)
>>> _ = b.add_factor(FactorFunction.EQUAL, [x, y], weight=b.add_weight(1.0))
>>> r = exact_marginals(b.build())
>>> round(float(r.marginals[0, 1]), 6), round(r.log_z, 6)
(0.5, 1.820075)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pdbq.errors import EvidenceError, InferenceError, PdbqError
from pdbq.graph.layout import FactorGraph
from pdbq.inference.exact.elimination_order import EliminationOrder, min_fill_order, interaction_scopes
from pdbq.inference.exact.potentials import Hyperedge, condition, evidence_array, hyperedges, shift_edge, shift_edges
from pdbq.inference.exact.stopping import EliminationClock, chunks
from pdbq.inference.exact.upward_kernel import MAX_AXES, SMALL_TABLE, downward_kernel, upward_kernel, upward_tree
from pdbq.memory import check_fits, table_cap

__all__ = [
    "DEFAULT_MAX_TABLE",
    "ExactResult",
    "MapAnswer",
    "exact_marginals",
    "exact_map",
    "marginals_from_hyperedges",
    "map_from_hyperedges",
    "check_budget",
]

DEFAULT_MAX_TABLE = 2**26


@dataclass(frozen=True, eq=False)
class ExactResult:
    """Exact marginals ``float64[n_vars, max_card]`` (zero beyond a variable's domain; evidence
    variables are point masses) and the log partition function with the evidence applied."""

    marginals: np.ndarray
    log_z: float
    width: int
    max_table_size: int


@dataclass(frozen=True, eq=False)
class MapAnswer:
    """A most probable full assignment (evidence variables at their values) and its
    unnormalised log score (the energy of docs/factors.md)."""

    values: np.ndarray
    log_score: float
    width: int = 0
    max_table_size: int = 0


# ---------------------------------------------------------------- table helpers
#
# Every table below has its axes sorted by elimination position ("keys"), not by variable id:
# the variable eliminated from a clique is then its axis 0 (reductions over a leading axis are
# the fast ones in numpy), a clique's separator is its axes 1.., and a message laid out by keys
# broadcasts into its parent by a plain reshape.


def _expand(table: np.ndarray, keys: np.ndarray, target: np.ndarray) -> np.ndarray:
    """View ``table`` over sorted ``keys`` as broadcastable to sorted ``target`` ⊇ keys."""
    if keys.shape[0] == target.shape[0]:
        return table
    shape = [1] * target.shape[0]
    for ax, n in zip(np.searchsorted(target, keys), table.shape):
        shape[int(ax)] = n
    return table.reshape(shape)


def _sum_keep(e: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Sum ``e`` over the axes where ``keep`` is False (kept axes stay in order)."""
    out_shape = [n for n, k in zip(e.shape, keep) if k]
    runs: list[list] = []  # merge neighbouring axes of the same kind into one
    for n, k in zip(e.shape, keep):
        if runs and runs[-1][1] == bool(k):
            runs[-1][0] *= n
        else:
            runs.append([n, bool(k)])
    e = e.reshape([r[0] for r in runs])
    kinds = [r[1] for r in runs]
    if kinds and not kinds[-1]:
        # a trailing (innermost) reduction is slow in numpy; slices or a BLAS product are not
        n = e.shape[-1]
        flat = e.reshape(-1, n)
        if n <= 3:
            acc = flat[:, 0].copy()
            for k in range(1, n):
                acc += flat[:, k]
        else:
            acc = flat @ np.ones(n)
        e = acc.reshape(e.shape[:-1])
        kinds = kinds[:-1]
    red = tuple(a for a, k in enumerate(kinds) if not k)
    if red:
        e = e.sum(axis=red)
    return e.reshape(out_shape)


def _sum_to(e: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """`_sum_keep` by ``np.einsum``: its reduction loops stay fast where numpy's ``sum`` over
    middle axes with short inner axes is slow (a 2**20 table onto two axes: 0.2 ms against
    20 ms), which made the downward pass of a clique with many children slow (issue 20)."""
    if e.ndim > 52:  # beyond einsum's subscripts
        return _sum_keep(e, keep)
    axes = list(range(e.ndim))
    return np.einsum(e, axes, [a for a in axes if keep[a]])


def _lse0(t: np.ndarray) -> np.ndarray:
    """log Σ exp over axis 0; all -inf slices give -inf (never NaN)."""
    m = np.max(t, axis=0)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(t - m), axis=0)) + m


@dataclass(frozen=True, eq=False)
class _Tree:
    order: EliminationOrder
    keys: list[np.ndarray]  # clique i's axes as elimination positions (keys[i][0] == i)
    shapes: list[tuple[int, ...]]
    parent: np.ndarray  # clique index or -1
    children: list[list[int]]
    assigned: list[list[tuple[np.ndarray, np.ndarray]]]  # (keys, table) per clique
    constant: float  # sum of 0-d tables


def _build_tree(edges: Sequence[Hyperedge], info: EliminationOrder, card: np.ndarray) -> _Tree:
    order = info.order
    n = order.shape[0]
    pos = np.full(card.shape[0], -1, dtype=np.int64)
    pos[order] = np.arange(n, dtype=np.int64)
    keys = [np.sort(pos[c]) for c in info.cliques]
    shapes = [tuple(int(c) for c in card[order[k]]) for k in keys]
    parent = np.array([int(k[1]) if k.shape[0] > 1 else -1 for k in keys], dtype=np.int64)
    children: list[list[int]] = [[] for _ in range(n)]
    for i, p in enumerate(parent):
        if p >= 0:
            children[int(p)].append(i)
    assigned: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(n)]
    constant = 0.0
    for h in edges:
        constant += h.offset
        if h.scope.size == 0:
            constant += float(h.log_table)
            continue
        hk = pos[h.scope]
        perm = np.argsort(hk)
        assigned[int(hk[perm[0]])].append((hk[perm], np.transpose(h.log_table, perm)))
    return _Tree(info, keys, shapes, parent, children, assigned, constant)


def _potential(tree: _Tree, i: int, up: list) -> np.ndarray:
    """Clique i's own tables plus its children's upward messages.

    Built axis by axis: a table joins the running sum once the sum covers the table's last
    axis, so a table over the first few axes costs the size of that prefix, not of the clique
    (a clique with many pairwise factors costs about twice its size instead of once per factor).
    """
    keys = tree.keys[i]
    shape = tree.shapes[i]
    parts = [(hk, t) for hk, t in tree.assigned[i]]
    parts += [(tree.keys[j][1:], up[j]) for j in tree.children[i]]
    last = [int(np.searchsorted(keys, hk[-1])) for hk, _ in parts]
    by_axis: dict[int, list[int]] = {}
    for k, a in enumerate(last):
        by_axis.setdefault(a, []).append(k)
    acc = np.zeros((), dtype=np.float64)
    for a in range(len(keys)):
        acc = acc[..., None]
        for k in by_axis.get(a, ()):
            hk, t = parts[k]
            acc = acc + _expand(t, hk, keys[: a + 1])
    if acc.shape != shape:
        acc = np.broadcast_to(acc, shape)
    return np.array(acc, dtype=np.float64) if not acc.flags.writeable or acc.base is not None else acc


def _kernel_ranges(t, clock: EliminationClock, sizes: np.ndarray | None = None) -> list[tuple[int, int]]:
    """The clique ranges the kernels run over between two clock checks: all cliques at once
    without a deadline or poll, else chunks of about `stopping.CHUNK_ENTRIES` entry reads."""
    n = t.parent.shape[0]
    if not clock.active:
        return [(0, n)]
    if sizes is None:
        sizes = _kernel_work(t)
    return chunks(sizes)


def _kernel_work(t) -> np.ndarray:
    """Per clique: its table's entries times the parts read at each (the kernels' inner loop)."""
    if t.parent.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    entries = np.multiply.reduceat(t.ax_card, t.ax_off[:-1])  # every clique has at least its own axis
    return entries * np.maximum(np.diff(t.part_off), 1)


def _downward_small(t, info: EliminationOrder, visit: np.ndarray, wanted: np.ndarray, card: np.ndarray,
                    marg: np.ndarray, clock: EliminationClock) -> None:
    """The downward pass by `downward_kernel` over the visited cliques; wanted variables'
    marginals written into ``marg``."""
    n = info.order.shape[0]
    want_c = wanted[info.order] & visit
    out = np.zeros((n, marg.shape[1]), dtype=np.float64)
    down = np.zeros(t.vals.shape[0], dtype=np.float64)
    vis, want = visit.astype(np.uint8), want_c.astype(np.uint8)
    ranges = _kernel_ranges(t, clock, np.where(visit, _kernel_work(t), 0) if clock.active else None)
    for lo, hi in reversed(ranges):
        clock.check(n - hi, n, "downward pass")
        downward_kernel(t.ax_off, t.ax_card, t.parent, t.part_off, t.part_base, t.part_sax, t.part_stride,
                        t.msg_base, t.vals, t.part_child, vis, want, out, down, lo, hi)
    rows = np.flatnonzero(want_c)
    marg[info.order[rows]] = out[rows]


def _upward_small(tree: _Tree, layout: list | None = None,
                  clock: EliminationClock | None = None) -> tuple[list, float]:
    """The upward pass by `upward_kernel` (small cliques): every non-root clique's message (over
    its axes 1..) and the sum of the roots' messages; ``layout`` (a list) receives the kernel's
    `UpwardTree` for the downward pass. ``clock`` is checked between ranges of cliques."""
    clock = clock if clock is not None else EliminationClock()
    t = upward_tree(tree.keys, tree.shapes, tree.parent, tree.children, tree.assigned)
    n = t.parent.shape[0]
    roots = 0.0
    for lo, hi in _kernel_ranges(t, clock):
        clock.check(lo, n)
        roots += float(upward_kernel(t.ax_off, t.ax_card, t.parent, t.part_off, t.part_base, t.part_sax,
                                     t.part_stride, t.msg_base, t.vals, lo, hi))
    if layout is not None:
        layout.append(t)
    up: list = [None] * len(tree.keys)
    for i, b in enumerate(t.msg_base.tolist()):
        if b >= 0:
            shape = tree.shapes[i][1:]
            up[i] = t.vals[b : b + math.prod(shape)].reshape(shape)
    return up, roots


_MERGE_SCAN = 256  # candidate tables looked at per table by _merge_into_supersets


def _merge_into_supersets(edges: list[Hyperedge]) -> list[Hyperedge]:
    """Add each table into a table whose scope contains its own (the smallest such), so a huge and
    a small log-potential on the same values are summed before max-shifting rather than after:
    ``[-1e7, 1e7] + [0, -inf]`` becomes ``[-inf, 0]``-shifted exactly, and a neighbouring 0.693
    is not added to -2e7 (which would round it)."""
    n = len(edges)
    by_var: dict[int, list[int]] = {}
    scopes = [frozenset(h.scope.tolist()) for h in edges]  # scopes never change below
    for i, sc in enumerate(scopes):
        for v in sc:
            by_var.setdefault(v, []).append(i)
    alive = [True] * n
    grown = [False] * n  # something was added into it since it was shifted
    out = list(edges)
    for i in sorted(range(n), key=lambda k: len(scopes[k])):
        mine = scopes[i]
        if not mine:
            continue
        best = -1
        pool = min((by_var[v] for v in mine), key=len)
        for j in pool[:_MERGE_SCAN]:  # bounded: a hub variable must not make this quadratic
            if j == i or not alive[j] or len(scopes[j]) < len(mine):
                continue
            if (best < 0 or out[j].log_table.size < out[best].log_table.size) and mine <= scopes[j]:
                best = j
        if best < 0:
            continue
        g = out[best]
        h = shift_edge(out[i]) if grown[i] else out[i]  # what it gathered so far, shifted before meeting g's small entries
        table = g.log_table + _expand(h.log_table, h.scope, g.scope)
        out[best] = Hyperedge(g.scope, table, g.source, g.offset + h.offset, g.saturated or h.saturated)
        grown[best] = True
        alive[i] = False
    return [h for h, keep in zip(out, alive) if keep]


def _zero_error(saturated: bool) -> PdbqError:
    if saturated:
        return InferenceError(
            "weights too large to compare: differences between log-potentials overflow a double "
            "(beyond ±1.8e308) and leave no assignment possible; scale the weights down"
        )
    return EvidenceError("the evidence has probability zero: every assignment has a -inf log score")


def check_budget(info: EliminationOrder, max_table: int) -> None:
    """Raise `InferenceError` when the order's largest clique table exceeds ``max_table`` or,
    with its working copies, the memory left (`pdbq.memory.check_fits`)."""
    if not info.complete and info.max_table_size <= max_table:
        # the order search stopped at the memory cap (`_search_cap`), below max_table
        check_fits(info.max_table_size, f"exact inference (induced width at least {info.width})", option="max_table")
    if not info.complete or info.max_table_size > max_table:
        pre = "" if info.complete else "at least "
        raise InferenceError(
            f"exact inference does not fit its budget: the min-fill elimination order has induced "
            f"width {pre}{info.width} and needs a table of {pre}{info.max_table_size:,} entries "
            f"(max_table = {max_table:,}); use MCMC or raise max_table"
        )
    check_fits(info.max_table_size, f"exact inference (induced width {info.width})", option="max_table")


def _search_cap(max_table: int) -> int:
    """Where an order search stops: ``max_table``, or lower where memory cannot hold that."""
    return min(max_table, table_cap())


def _order_for(edges: Sequence[Hyperedge], card: np.ndarray, max_table: int,
               clock: EliminationClock | None = None) -> EliminationOrder:
    stop = None if clock is None else clock.order_search()
    info = min_fill_order([h.scope for h in edges if h.scope.size], card, stop_above=_search_cap(max_table),
                          should_stop=stop)
    if info.stopped:
        raise clock.stopped_error(f"the elimination-order search: {info.order.shape[0]:,} variables ordered")
    check_budget(info, max_table)
    return info


# ---------------------------------------------------------------- marginals


def _prepared_tree(edges, cardinality, evidence, max_table: int, order: EliminationOrder | None,
                   clock: EliminationClock | None = None):
    """(cardinalities, evidence array, elimination order, clique tree) for the hyperedges with the
    evidence sliced in; `InferenceError` when the order's largest table is over ``max_table``."""
    card = np.asarray(cardinality, dtype=np.int64)
    ev = evidence_array(card.shape[0], evidence)
    edges = condition(edges, ev) if np.any(ev >= 0) else list(edges)
    # Max-shift every table (largest entry 0, the shift into log Z): sums of a huge and a small
    # log-potential then keep the small one wherever it matters (issue 12: WEIGHT 1e16 + 0.7).
    shifted = shift_edges(edges)
    first = {id(h) for h in shifted}
    # an edge nothing was merged into is the same object, already shifted (shifting is idempotent)
    merged = _merge_into_supersets(shifted)
    grown = [k for k, h in enumerate(merged) if id(h) not in first]
    for k, h in zip(grown, shift_edges([merged[k] for k in grown])):
        merged[k] = h
    edges = merged
    info = order if order is not None else _order_for(edges, card, max_table, clock)
    check_budget(info, max_table)
    return card, ev, info, _build_tree(edges, info, card), any(h.saturated for h in edges)


def marginals_from_hyperedges(
    edges: Sequence[Hyperedge],
    cardinality: np.ndarray,
    evidence: np.ndarray | None = None,
    *,
    max_table: int = DEFAULT_MAX_TABLE,
    order: EliminationOrder | None = None,
    variables: np.ndarray | Sequence[int] | None = None,
    clock: EliminationClock | None = None,
) -> ExactResult:
    """All marginals and log Z of the distribution ∝ exp(Σ tables), with ``evidence`` (int per
    variable, -1 unobserved) sliced in. ``edges`` may already be conditioned. ``variables``:
    only these variables' marginals (the other rows are zero), at the cost of the upward pass
    and the paths from the roots to their cliques. ``clock``: checked between cliques (its
    deadline passed: `TimeLimitError`)."""
    clock = clock if clock is not None else EliminationClock()
    card, ev, info, tree, saturated = _prepared_tree(edges, cardinality, evidence, max_table, order, clock)
    n_vars = card.shape[0]
    n = info.order.shape[0]
    log_z = tree.constant
    zero = log_z == -np.inf
    layout: list = []
    if info.max_table_size <= SMALL_TABLE and info.width < MAX_AXES:
        up, roots = _upward_small(tree, layout, clock)
        log_z += roots
        zero = zero or roots == -np.inf
    else:
        up = [None] * n
        for i in range(n):
            clock.check(i, n, work=math.prod(tree.shapes[i]))
            msg = _lse0(_potential(tree, i, up))
            if tree.parent[i] < 0:
                log_z += float(msg)
                zero = zero or float(msg) == -np.inf
            else:
                up[i] = msg
    if zero:
        raise _zero_error(saturated)
    max_card = int(card.max()) if n_vars else 1
    marg = np.zeros((n_vars, max_card), dtype=np.float64)
    covered = np.zeros(n_vars, dtype=bool)
    covered[info.order] = True
    # The downward pass visits only the cliques on the way from a root to a wanted variable's
    # clique (all of them when every marginal is wanted): one variable's marginal costs the
    # upward pass and one path, not a full calibration.
    if variables is None:
        visit = np.ones(n, dtype=bool)
        wanted = np.ones(n_vars, dtype=bool)
    else:
        wanted = np.zeros(n_vars, dtype=bool)
        wanted[np.asarray(variables, dtype=np.int64)] = True
        visit = np.zeros(n, dtype=bool)
        pos = np.full(n_vars, -1, dtype=np.int64)
        pos[info.order] = np.arange(n, dtype=np.int64)
        for v in np.flatnonzero(wanted & covered & (ev < 0)).tolist():
            i = int(pos[v])
            while i >= 0 and not visit[i]:
                visit[i] = True
                i = int(tree.parent[i])
    if layout:
        _downward_small(layout[0], info, visit, wanted, card, marg, clock)
        visit = np.zeros(n, dtype=bool)  # done
    down: list = [None] * n
    for i in range(n - 1, -1, -1):
        if not visit[i]:
            continue
        clock.check(n - 1 - i, n, "downward pass", math.prod(tree.shapes[i]))
        keys = tree.keys[i]
        belief = _potential(tree, i, up)
        if tree.parent[i] >= 0:
            belief += down[i]  # over keys[1:]: broadcasts along axis 0
            down[i] = None
        # A calibrated belief is the joint marginal times Z: one shared shift is safe here
        # (entries far below the maximum are negligible in every marginal taken from it).
        top = float(np.max(belief))
        e = np.exp(belief - top)
        v = int(info.order[i])
        if wanted[v]:
            lv = e.reshape(e.shape[0], -1).sum(axis=1)
            marg[v, : card[v]] = lv / lv.sum()
        for j in tree.children[i]:
            if not visit[j]:
                continue
            sep = tree.keys[j][1:]
            with np.errstate(divide="ignore", invalid="ignore"):
                d = np.log(_sum_to(e, np.isin(keys, sep))) + top - up[j]
            d[np.isneginf(up[j])] = -np.inf  # Hugin's 0/0 = 0
            down[j] = d
            up[j] = None
    for v in range(n_vars):
        if ev[v] >= 0:
            if wanted[v]:
                marg[v, :] = 0.0
                marg[v, ev[v]] = 1.0
        elif not covered[v]:
            if wanted[v]:
                marg[v, : card[v]] = 1.0 / card[v]
            log_z += float(np.log(card[v]))
    return ExactResult(marg, float(log_z), info.width, info.max_table_size)


def _order_for_graph(graph: FactorGraph, ev: np.ndarray, max_table: int, variables,
                     clock: EliminationClock | None = None) -> EliminationOrder:
    """The min-fill order; for one wanted variable, the order that eliminates it last (its clique
    is then a root: its marginal needs no downward pass, which on a deep tree such as
    Promedus_26's is hundreds of cliques) unless that order is costlier: over the budget, or,
    beyond small tables, over 1.25 times the plain order's total table size. ``clock``: its
    deadline and cancel poll are read during the search (`TimeLimitError` at the deadline)."""
    scopes = interaction_scopes(graph, ev)
    stop = _search_cap(max_table)
    clock = clock if clock is not None else EliminationClock()

    def search(**kw) -> EliminationOrder:
        info = min_fill_order(scopes, graph.cardinality, stop_above=stop, should_stop=clock.order_search(), **kw)
        if info.stopped:
            raise clock.stopped_error(f"the elimination-order search: {info.order.shape[0]:,} variables ordered, "
                                      f"{info.describe()} so far")
        return info

    if variables is not None:
        wanted = np.unique(np.asarray(variables, dtype=np.int64).ravel())
        if wanted.size == 1:
            held = search(last=wanted)
            if held.complete and held.max_table_size <= min(max_table, SMALL_TABLE):
                return held
            plain = search()
            if held.complete and held.max_table_size <= max_table and held.total_table_size <= 1.25 * plain.total_table_size:
                return held
            return plain
    return search()


def _graph_edges(graph: FactorGraph, evidence, max_table: int, variables=None,
                 clock: EliminationClock | None = None) -> tuple[list[Hyperedge], np.ndarray, EliminationOrder]:
    ev = evidence_array(graph.n_vars, graph.evidence if evidence is None else evidence)
    bad = (ev >= graph.cardinality) | (ev < -1)
    if np.any(bad):
        v = int(np.flatnonzero(bad)[0])
        raise InferenceError(f"evidence {int(ev[v])} for variable {v} lies outside its domain")
    # The order comes from the scopes alone, so an oversized request fails before any table is built.
    info = _order_for_graph(graph, ev, max_table, variables, clock)
    check_budget(info, max_table)
    edges = hyperedges(graph, max_entries=max(max_table, 1))
    return condition(edges, ev), ev, info


def exact_marginals(
    graph: FactorGraph,
    *,
    max_table: int = DEFAULT_MAX_TABLE,
    evidence: Mapping[int, int] | np.ndarray | None = None,
    variables: np.ndarray | Sequence[int] | None = None,
    deadline: float | None = None,
    poll: Callable[[], None] | None = None,
) -> ExactResult:
    """Exact marginals of every variable and log Z (natural log), evidence applied.

    ``evidence`` replaces ``graph.evidence`` when given (mapping var → value or int array).
    ``variables``: compute only these variables' marginals (the rows of the others are zero;
    log Z is always computed): one upward pass plus the clique-tree paths to them, instead of
    a full calibration. Raises `InferenceError` beyond ``max_table`` (naming width and table
    size) or when the evidence has probability zero. ``deadline`` (a `time.perf_counter()`
    instant): checked between cliques (between short runs of them in the compiled passes), so the
    call ends within a few ms of it with `pdbq.errors.TimeLimitError`; ``poll()`` is called
    about every 50 ms of elimination (a cancelled statement raises from it).
    """
    clock = EliminationClock(deadline, poll, "exact marginals")
    edges, ev, info = _graph_edges(graph, evidence, max_table, variables, clock)
    return marginals_from_hyperedges(edges, graph.cardinality, ev, max_table=max_table, order=info, variables=variables,
                                     clock=clock)


# ---------------------------------------------------------------- MAP


def map_from_hyperedges(
    edges: Sequence[Hyperedge],
    cardinality: np.ndarray,
    evidence: np.ndarray | None = None,
    *,
    max_table: int = DEFAULT_MAX_TABLE,
    order: EliminationOrder | None = None,
    clock: EliminationClock | None = None,
) -> MapAnswer:
    """A maximiser of Σ tables (max-product in log space with argmax traceback); ``clock``
    checked between cliques."""
    clock = clock if clock is not None else EliminationClock()
    card, ev, info, tree, saturated = _prepared_tree(edges, cardinality, evidence, max_table, order, clock)
    n = info.order.shape[0]
    up: list = [None] * n
    arg: list = [None] * n
    score = tree.constant
    zero = score == -np.inf
    idx_dtype = np.uint8 if card.size and card.max() <= 255 else np.int64
    for i in range(n):
        clock.check(i, n, work=math.prod(tree.shapes[i]))
        psi = _potential(tree, i, up)
        for j in tree.children[i]:
            up[j] = None
        arg[i] = np.argmax(psi, axis=0).astype(idx_dtype)
        msg = np.max(psi, axis=0)
        if tree.parent[i] < 0:
            score += float(msg)
            zero = zero or float(msg) == -np.inf
        else:
            up[i] = msg
    if zero:
        raise _zero_error(saturated)
    values = np.where(ev >= 0, ev, 0).astype(np.int64)
    for i in range(n - 1, -1, -1):
        sep_vars = info.order[tree.keys[i][1:]]
        values[int(info.order[i])] = int(arg[i][tuple(int(values[u]) for u in sep_vars)])
        arg[i] = None
    return MapAnswer(values, float(score), info.width, info.max_table_size)


def exact_map(
    graph: FactorGraph,
    *,
    max_table: int = DEFAULT_MAX_TABLE,
    evidence: Mapping[int, int] | np.ndarray | None = None,
    deadline: float | None = None,
    poll: Callable[[], None] | None = None,
) -> MapAnswer:
    """An exact MAP assignment (evidence kept) and its log score, by max-product elimination.

    Ties between equally probable assignments are broken towards the smallest value.
    ``deadline``/``poll``: as in `exact_marginals` (`pdbq.errors.TimeLimitError` at the deadline).
    """
    clock = EliminationClock(deadline, poll, "exact MAP")
    edges, ev, info = _graph_edges(graph, evidence, max_table, clock=clock)
    return map_from_hyperedges(edges, graph.cardinality, ev, max_table=max_table, order=info, clock=clock)
