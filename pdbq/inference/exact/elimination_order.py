"""Greedy elimination orders (min-fill, min-weight tie-break) and their induced width.

The interaction graph joins two variables when some standalone factor or head group mentions
both; evidence variables are left out (they are sliced into the tables before elimination).
Eliminating ``v`` creates the clique ``{v} ∪ N(v)``; its table has ``Π card`` entries. The
order is greedy: fewest fill edges first, then the smallest clique table.

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder(); xs = b.add_variables(4); w = b.add_weight(1.0)
>>> for a, c in zip(xs, xs[1:]):
...     _ = b.add_factor(FactorFunction.EQUAL, [a, c], weight=w)
>>> info = elimination_order(b.build())
>>> info.width, info.max_table_size
(1, 4)
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pdbq.errors import InferenceError
from pdbq.graph.layout import FactorGraph
from pdbq.inference.exact.min_fill_kernel import (
    MAX_DENSE,
    MinFillState,
    min_fill_graph,
    min_fill_kernel,
    min_fill_start,
    min_fill_steps,
)
from pdbq.inference.exact.potentials import Hyperedge

__all__ = ["EliminationOrder", "elimination_order", "interaction_scopes", "min_fill_order"]


@dataclass(frozen=True, eq=False)
class EliminationOrder:
    """An elimination order over the variables that appear in some scope.

    ``cliques[i]`` (sorted int64 ids) is the clique created when ``order[i]`` is eliminated.
    ``width`` is the induced width (largest clique size − 1), ``max_table_size`` the largest
    clique table, ``total_table_size`` the sum over cliques (the cost of one pass).
    ``complete`` is False when the search stopped at the first clique larger than ``stop_above``:
    then width and sizes are those of that clique (lower bounds for the full order).
    ``stopped`` is True when ``should_stop()`` ended it (a deadline or a cancel; then it is also
    incomplete, and width and sizes are those of the cliques made so far).
    """

    order: np.ndarray
    cliques: list[np.ndarray]
    width: int
    max_table_size: int
    total_table_size: int
    complete: bool = True
    stopped: bool = False

    def describe(self) -> str:
        """'induced width 11, largest table 4,096 entries' (with 'at least' when incomplete)."""
        pre = "" if self.complete else "at least "
        return f"induced width {pre}{self.width}, largest table {pre}{self.max_table_size:,} entries"


def interaction_scopes(graph: FactorGraph, evidence: np.ndarray | None = None) -> list[np.ndarray]:
    """The free variables of each standalone factor and each head group (sorted unique int64 ids).

    ``evidence`` (int per variable, -1 unobserved) defaults to ``graph.evidence``.
    """
    ev = graph.evidence if evidence is None else evidence
    free = np.asarray(ev) < 0
    n_f = graph.n_factors
    edge_factor = np.repeat(np.arange(n_f, dtype=np.int64), np.diff(graph.factor_offsets))
    grp = graph.group.astype(np.int64)[edge_factor] if n_f else edge_factor
    node = np.where(grp >= 0, n_f + grp, edge_factor)
    var = graph.factor_vars.astype(np.int64)
    keep = free[var] if var.size else np.zeros(0, dtype=bool)
    node, var = node[keep], var[keep]
    if node.size == 0:
        return []
    pairs = np.unique(np.stack([node, var], axis=1), axis=0)
    cuts = np.flatnonzero(np.diff(pairs[:, 0])) + 1
    return [s.copy() for s in np.split(pairs[:, 1], cuts)]


def min_fill_order(
    scopes: Sequence[np.ndarray], cardinality: np.ndarray, *, stop_above: int | None = None,
    last: Sequence[int] | np.ndarray | None = None, should_stop: Callable[[], bool] | None = None,
) -> EliminationOrder:
    """Greedy min-fill order (ties: smallest clique table) over the variables in ``scopes``.

    ``stop_above``: stop at the first clique whose table exceeds this many entries (the result
    is then marked incomplete) so hopeless graphs are rejected without finishing the order.
    ``last``: variables eliminated only once every other one is (the same greedy rule among
    them): a single query variable then has a root clique of its own, and its marginal needs
    the upward pass alone.
    Up to `MAX_DENSE` variables the numba kernel of `pdbq.inference.exact.min_fill_kernel` runs it.
    ``should_stop()``: asked between bounded pieces of the search (a few ms each: the set-based
    order takes minutes on ten thousand variables, the kernel seconds on a thousand densely tied
    ones); True stops the order, marked incomplete and `EliminationOrder.stopped`. It must be
    cheap (a clock read; `pdbq.inference.exact.stopping.EliminationClock.should_stop`).
    """
    scopes = [s for s in scopes if len(s)]
    held = frozenset() if last is None else frozenset(int(v) for v in np.asarray(last, dtype=np.int64).ravel().tolist())
    if scopes and _n_vars(scopes) <= MAX_DENSE:
        return _min_fill_dense(scopes, cardinality, stop_above, held, should_stop)
    return _min_fill_sets(scopes, cardinality, stop_above=stop_above, held=held, should_stop=should_stop)


def _n_vars(scopes: Sequence[np.ndarray]) -> int:
    return int(np.unique(np.concatenate([np.asarray(s, dtype=np.int64) for s in scopes])).size)


# elementary operations of the min-fill kernel between two calls of ``should_stop`` (a few ms)
_KERNEL_PIECE = 1 << 22


def _min_fill_dense(scopes: Sequence[np.ndarray], cardinality: np.ndarray, stop_above: int | None,
                    held: frozenset = frozenset(), should_stop: Callable[[], bool] | None = None) -> EliminationOrder:
    g = min_fill_graph(scopes, cardinality)
    stop = -1.0 if stop_above is None else float(stop_above)
    hold = np.isin(g.ids, np.fromiter(held, dtype=np.int64, count=len(held))).astype(np.uint8)
    stopped = False
    if should_stop is None:
        order, members, offsets, complete = min_fill_kernel(g.adj, g.card, hold, stop)
    else:
        st = MinFillState(*min_fill_start(g.adj, g.card))
        n, done, above = g.ids.shape[0], 0, False
        while done < n and not above:
            if should_stop():
                stopped = True
                break
            done, above = min_fill_steps(g.adj, g.card, hold, stop, *st, done, _KERNEL_PIECE)
        order, offsets = st.order[:done], st.offsets[: done + 1]
        members = st.members[: offsets[-1]]
        complete = not (above or stopped)
    ids = g.ids
    card = [int(c) for c in np.asarray(cardinality)[ids].tolist()]
    parts = np.split(members, offsets[1:-1])
    cliques = [ids[c] for c in parts]
    # exact integer sizes (Python ints: a hopeless clique's product overflows int64)
    sizes = [math.prod([card[i] for i in c.tolist()]) for c in parts]
    return EliminationOrder(
        order=ids[order],
        cliques=cliques,
        width=int(max(np.diff(offsets).max() - 1, 0)) if order.shape[0] else 0,
        max_table_size=max(sizes, default=1),
        total_table_size=sum(sizes),
        complete=bool(complete),
        stopped=stopped,
    )


def _min_fill_sets(
    scopes: Sequence[np.ndarray], cardinality: np.ndarray, *, stop_above: int | None = None,
    held: frozenset = frozenset(), should_stop: Callable[[], bool] | None = None,
) -> EliminationOrder:
    """`min_fill_order` with Python sets and a heap (any number of variables)."""
    adj: dict[int, set[int]] = {}
    for s in scopes:
        members = [int(v) for v in s]
        for v in members:
            nb = adj.setdefault(v, set())
            nb.update(members)
    for v, nb in adj.items():
        nb.discard(v)
    # table sizes as floats: exact products below 2**53 (beyond, far over any budget), so equal
    # sizes tie exactly (log sums did not: log 2 + log 2 and log 4 may differ in the last bit)
    logc = {v: float(int(cardinality[v])) for v in adj}

    def fill(v: int) -> int:
        nb = adj[v]
        d = len(nb)
        linked = sum(len(adj[u] & nb) for u in nb) // 2
        return d * (d - 1) // 2 - linked

    def weight(v: int) -> float:
        return logc[v] * math.prod(logc[u] for u in adj[v])

    stamp = dict.fromkeys(adj, 0)
    heap = [(v in held, fill(v), weight(v), v, 0) for v in adj]
    heapq.heapify(heap)
    order: list[int] = []
    cliques: list[np.ndarray] = []
    width, max_size, total = 0, 1, 0
    complete, stopped = True, False
    eliminated: set[int] = set()
    while heap:
        _, _, _, v, st = heapq.heappop(heap)
        if v in eliminated or st != stamp[v]:
            continue
        nb = adj.pop(v)
        clique = np.array(sorted(nb | {v}), dtype=np.int64)
        size = int(np.prod(cardinality[clique].astype(object)))
        width, max_size = max(width, len(nb)), max(max_size, size)
        total += size
        order.append(v)
        cliques.append(clique)
        eliminated.add(v)
        if stop_above is not None and size > stop_above:
            complete = False
            break
        if should_stop is not None and should_stop():
            complete, stopped = False, True
            break
        touched = set(nb)
        nbl = list(nb)
        for u in nbl:
            adj[u].discard(v)
        for a in nbl:
            missing = nb - adj[a]
            missing.discard(a)
            for c in missing:
                # new fill edge a–c: common neighbours of a and c see one pair fewer unlinked
                touched |= adj[a] & adj[c]
                adj[a].add(c)
                adj[c].add(a)
        for u in touched:
            stamp[u] += 1
            heapq.heappush(heap, (u in held, fill(u), weight(u), u, stamp[u]))
    return EliminationOrder(
        order=np.array(order, dtype=np.int64),
        cliques=cliques,
        width=width,
        max_table_size=max_size,
        total_table_size=total,
        complete=complete,
        stopped=stopped,
    )


def elimination_order(
    source: FactorGraph | Sequence[Hyperedge],
    *,
    cardinality: np.ndarray | None = None,
    evidence: np.ndarray | None = None,
    stop_above: int | None = None,
) -> EliminationOrder:
    """Min-fill order for a graph (its free variables, evidence left out) or for hyperedges
    (then pass ``cardinality``). No tables are built: this is cheap enough to decide whether
    exact inference fits a budget.
    """
    if isinstance(source, FactorGraph):
        scopes = interaction_scopes(source, evidence)
        card = source.cardinality
    else:
        if cardinality is None:
            raise InferenceError("elimination_order over hyperedges needs the cardinalities")
        scopes = [h.scope for h in source if h.scope.size]
        card = np.asarray(cardinality)
    return min_fill_order(scopes, card, stop_above=stop_above)
