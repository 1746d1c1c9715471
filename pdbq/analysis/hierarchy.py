"""Hierarchy width (seed 004, Definition 3) of small hypergraphs: exact search and bounds.

Definition 3: a graph without factors has width 0; a disconnected graph has the largest width of
its connected components; a connected graph has width ``1 + min_φ hw(G − φ)``.

Hyperedges are given as collections of variable ids (the free variables of a factor or head group,
see `pdbq.analysis.hypergraph`); variables outside every hyperedge are irrelevant (width 0).

Hierarchy width is the treedepth of the line graph (one vertex per hyperedge, adjacent when two
share a variable). The exact search recurses over connected components with memoisation on the
bitmask of hyperedge ids of each connected sub-hypergraph, and prunes with three facts:

- a lower bound (`lower_bound`): Statement 3 (``hw ≥ d``, the largest number of hyperedges at one
  variable) strengthened to ``d + 1`` when every hyperedge at that variable ``v`` also touches a
  variable ``u`` that lies in some hyperedge without ``v`` (proof: follow the components that
  contain ``v``; all ``d`` hyperedges at ``v`` are removed there, and when the last one, ``e``, goes,
  a hyperedge at ``u ∈ e`` without ``v`` is either already removed inside ``v``'s component — one
  more removal on that path — or still present, costing one more removal in ``u``'s component);
- domination: when every hyperedge meeting ``u`` also meets ``v`` (N[u] ⊆ N[v] in the line
  graph), removing ``v`` first is never worse, so ``u`` is not tried; this covers hyperedges with
  the same variable set (one is tried) and a prior ``{x}`` beside any hyperedge containing ``x``
  (on the 13-variable movies demo the search visits 32 states instead of 2,366).

A candidate removal is skipped when one plus the lower bound of what it leaves cannot beat the
best found, and the search stops as soon as it meets the lower bound. Components of a path are
intervals, so a path of n variables takes O(n²) states (Lemma 1 checks run in milliseconds).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

__all__ = [
    "SearchBudgetExceeded",
    "HierarchySearch",
    "hierarchy_width",
    "lower_bound",
    "greedy_upper_bound",
    "DEFAULT_STATE_LIMIT",
]

DEFAULT_STATE_LIMIT = 200_000
_GREEDY_TRY_ALL = 60  # components up to this many hyperedges: the greedy tries every removal


class SearchBudgetExceeded(Exception):
    """Internal: the exact search visited more states than allowed (the caller falls back to bounds)."""


class HierarchySearch:
    """Exact hierarchy width and bounds over one fixed list of hyperedges.

    >>> path = [{0, 1}, {1, 2}, {2, 3}, {3, 4}]     # 5 variables: ceil(log2 5) = 3
    >>> HierarchySearch(path).width()
    3
    """

    def __init__(self, edges: Sequence[Iterable[int]], *, state_limit: int = DEFAULT_STATE_LIMIT):
        self.edges: tuple[frozenset[int], ...] = tuple(frozenset(int(v) for v in e) for e in edges)
        if any(not e for e in self.edges):
            raise ValueError("a hyperedge without variables is a constant; drop it before the analysis")
        self.var_edges: dict[int, list[int]] = {}
        for i, e in enumerate(self.edges):
            for v in e:
                self.var_edges.setdefault(v, []).append(i)
        self.state_limit = state_limit
        self.states = 0
        self._memo: dict[int, int] = {}  # connected states as bitmasks of hyperedge ids
        self._bounds: dict[int, int] = {}
        self._nb: list[int] | None = None  # per hyperedge: the hyperedges sharing a variable

    # ------------------------------------------------------------------ structure
    def components(self, ids: Iterable[int]) -> list[frozenset[int]]:
        """Connected components (as hyperedge-id sets) of the sub-hypergraph on ``ids``."""
        left = set(ids)
        out = []
        done: set[int] = set()  # variables whose hyperedges were scanned (keeps stars linear)
        while left:
            start = left.pop()
            comp = [start]
            stack = [start]
            while stack:
                e = stack.pop()
                for v in self.edges[e]:
                    if v in done:
                        continue
                    done.add(v)
                    for f in self.var_edges[v]:
                        if f in left:
                            left.discard(f)
                            comp.append(f)
                            stack.append(f)
            out.append(frozenset(comp))
        return out

    def lower_bound(self, ids: Iterable[int]) -> int:
        """Statement 3's degree bound, plus one where the module docstring's rule applies."""
        ids = list(ids)
        if not ids:
            return 0
        deg: Counter[int] = Counter()
        for e in ids:
            deg.update(self.edges[e])
        best = max(deg.values())
        idset = set(ids)
        for v, d in deg.items():
            if d < best:
                continue
            at_v = [e for e in self.var_edges[v] if e in idset]
            co: Counter[int] = Counter()
            for e in at_v:
                co.update(self.edges[e])
            if all(any(u != v and deg[u] > co[u] for u in self.edges[e]) for e in at_v):
                return d + 1
        return best

    # ------------------------------------------------------------------ exact
    def width(self, ids: Iterable[int] | None = None) -> int:
        """Exact hierarchy width of the sub-hypergraph on ``ids`` (default: all hyperedges).

        Raises `SearchBudgetExceeded` after ``state_limit`` connected states.
        """
        ids = range(len(self.edges)) if ids is None else ids
        self._prepare_masks()
        return max((self._connected(_mask(c)) for c in self.components(ids)), default=0)

    def _prepare_masks(self) -> None:
        if self._nb is not None:
            return
        nb = []
        for e in self.edges:
            m = 0
            for v in e:
                for f in self.var_edges[v]:
                    m |= 1 << f
            nb.append(m)
        self._nb = nb

    def _mask_components(self, c: int) -> list[int]:
        nb = self._nb
        out = []
        while c:
            comp = frontier = c & -c
            while frontier:
                grow = 0
                while frontier:
                    low = frontier & -frontier
                    grow |= nb[low.bit_length() - 1]
                    frontier ^= low
                frontier = grow & c & ~comp
                comp |= frontier
            out.append(comp)
            c &= ~comp
        return out

    def _mask_bound(self, c: int) -> int:
        hit = self._bounds.get(c)
        if hit is None:
            hit = self._bounds[c] = self.lower_bound(_ids(c))
        return hit

    def _candidates(self, c: int) -> list[int]:
        """Hyperedges of ``c`` worth removing first. In the line graph (hyperedges adjacent when
        they share a variable) the width is the treedepth; when N[u] ⊆ N[v] within ``c``,
        ``c − v`` maps into a subgraph of ``c − u`` (u ↦ v), whose width is no larger, so u
        need not be tried (of equal neighbourhoods, the lowest id stays)."""
        nb = self._nb
        ids = _ids(c)
        near = {e: nb[e] & c for e in ids}
        out = []
        for u in ids:
            nu = near[u]
            dominated = False
            m = nu & ~(1 << u)
            while m:
                low = m & -m
                v = low.bit_length() - 1
                m ^= low
                nv = near[v]
                if nu & ~nv == 0 and (nv != nu or v < u):
                    dominated = True
                    break
            if not dominated:
                out.append(u)
        return out

    def _connected(self, c: int) -> int:
        if c & (c - 1) == 0:
            return 1
        hit = self._memo.get(c)
        if hit is not None:
            return hit
        self.states += 1
        if self.states > self.state_limit:
            raise SearchBudgetExceeded
        lb = self._mask_bound(c)
        best = c.bit_count()  # removing every hyperedge one by one always works
        candidates = []
        for e in self._candidates(c):
            comps = self._mask_components(c & ~(1 << e))
            candidates.append((max((x.bit_count() for x in comps), default=0), e, comps))
        candidates.sort(key=lambda t: (t[0], t[1]))
        for _, _, comps in candidates:
            if best <= lb:
                break
            comps = sorted(comps, key=int.bit_count, reverse=True)
            if 1 + max((self._mask_bound(x) for x in comps), default=0) >= best:
                continue
            val = 1
            for comp in comps:
                val = max(val, 1 + self._connected(comp))
                if val >= best:
                    break
            best = min(best, val)
        self._memo[c] = best
        return best

    # ------------------------------------------------------------------ greedy
    def greedy_upper_bound(self, ids: Iterable[int] | None = None, *, work_limit: int = 2_000_000) -> int | None:
        """Width of one greedy elimination (a valid upper bound: each step is an allowed move of
        Definition 3), or None when it would take more than ``work_limit`` hyperedge visits.

        Each step removes, from a connected component, either one hyperedge or all hyperedges at
        one variable (a busiest one, or a centre of a longest shortest path), keeping the move
        that minimises cost + hyperedges of the largest component left. Components of at most
        60 hyperedges try every single removal; larger ones only those at the centre.
        """
        ids = range(len(self.edges)) if ids is None else ids
        work = 0
        ub = 0
        stack = [(c, 0) for c in self.components(ids)]
        while stack:
            comp, spent = stack.pop()
            if len(comp) == 1:
                ub = max(ub, spent + 1)
                continue
            deg: Counter[int] = Counter()
            for e in comp:
                deg.update(self.edges[e])
            work += len(comp)
            dmax = max(deg.values())
            busiest = [v for v, d in deg.items() if d == dmax][:4]
            centre = self._centre(comp)
            work += 2 * len(comp)
            moves: list[tuple[float, int, list[frozenset[int]]]] = []
            for v in dict.fromkeys(busiest + [centre]):
                removed = {e for e in self.var_edges[v] if e in comp}
                comps = self.components(comp - removed)
                work += len(comp)
                moves.append((len(removed) + max((len(x) for x in comps), default=0), len(removed), comps))
            if len(comp) > _GREEDY_TRY_ALL:
                for e in [e for e in self.var_edges[centre] if e in comp][:8]:
                    comps = self.components(comp - {e})
                    work += len(comp)
                    moves.append((1 + max((len(x) for x in comps), default=0), 1, comps))
            if len(comp) <= _GREEDY_TRY_ALL:
                seen: set[frozenset[int]] = set()
                for e in comp:
                    if self.edges[e] in seen:
                        continue
                    seen.add(self.edges[e])
                    comps = self.components(comp - {e})
                    work += len(comp)
                    moves.append((1 + max((len(x) for x in comps), default=0), 1, comps))
            if work > work_limit:
                return None
            _, cost, comps = min(moves, key=lambda t: (t[0], t[1]))
            if not comps:
                ub = max(ub, spent + cost)
            for x in comps:
                stack.append((x, spent + cost))
        return ub


    def _centre(self, comp: frozenset[int]) -> int:
        """A variable near the middle of a longest shortest path (two BFS sweeps): removing
        hyperedges there splits long chains in halves."""

        def sweep(start: int) -> tuple[int, dict[int, int | None]]:
            parent: dict[int, int | None] = {start: None}
            frontier, last = [start], start
            used: set[int] = set()
            while frontier:
                nxt = []
                for v in frontier:
                    for e in self.var_edges[v]:
                        if e not in comp or e in used:
                            continue
                        used.add(e)
                        for u in self.edges[e]:
                            if u not in parent:
                                parent[u] = v
                                nxt.append(u)
                if nxt:
                    last = nxt[0]
                frontier = nxt
            return last, parent

        a, _ = sweep(next(iter(self.edges[next(iter(comp))])))
        b, parent = sweep(a)
        chain = [b]
        while parent[chain[-1]] is not None:
            chain.append(parent[chain[-1]])  # type: ignore[arg-type]
        return chain[len(chain) // 2]


def _mask(ids: Iterable[int]) -> int:
    m = 0
    for e in ids:
        m |= 1 << e
    return m


def _ids(m: int) -> list[int]:
    out = []
    while m:
        low = m & -m
        out.append(low.bit_length() - 1)
        m ^= low
    return out


def hierarchy_width(edges: Sequence[Iterable[int]], *, state_limit: int = DEFAULT_STATE_LIMIT) -> int | None:
    """Exact hierarchy width of the hypergraph with these hyperedges, or None beyond ``state_limit``.

    >>> hierarchy_width([{0, 1}, {0, 2}, {0, 3}])        # a star: every edge must go
    3
    """
    search = HierarchySearch(edges, state_limit=state_limit)
    try:
        return search.width()
    except SearchBudgetExceeded:
        return None


def lower_bound(edges: Sequence[Iterable[int]]) -> int:
    """The degree lower bound (Statement 3, strengthened; see the module docstring)."""
    search = HierarchySearch(edges)
    return max((search.lower_bound(c) for c in search.components(range(len(search.edges)))), default=0)


def greedy_upper_bound(edges: Sequence[Iterable[int]], *, work_limit: int = 2_000_000) -> int | None:
    """An upper bound on hierarchy width from one greedy elimination (None past ``work_limit``)."""
    return HierarchySearch(edges).greedy_upper_bound(work_limit=work_limit)
