"""Block moves: a set of variables resampled jointly and exactly from its conditional given the
rest (forward filtering, backward sampling over the block's elimination order).

Single-site Gibbs cannot cross a zero-probability wall (a table entry of 0 between two values of
a pair) nor, in practice, flip a strongly coupled cluster. A block move draws the whole block
from ``p(x_B | x_rest)`` at once, so every configuration of the block with positive conditional
probability is reachable in one move and walls inside a block do not exist for it.

*Choice of blocks* (`build_blocks`): blocks are grown greedily, Prim-style, strongest coupling
first (a scope's strength is the spread of its log-table, a zero entry counting as infinite), so
variables tied by a wall land in one block. A variable joins only while the block's elimination
stays within ``max_table`` entries per clique. The test is cheap: for the global min-fill order,
eliminating the block's variables in the same relative order on the conditioned graph creates,
for each block variable v, a clique inside ``C_v ∩ B`` (the filled graph of an induced subgraph
is a subgraph of the filled graph), so Π card(C_v ∩ B) ≤ max_table for every v ∈ B is enough.
Rejections are final (those products only grow). Graphs too large for a global order use forest
blocks (induced width 1: union-find over the block's pairwise scopes). Seeds come from the query
targets first, so blocks around x_q exist. One-variable blocks and blocks adding almost no
variables not yet in a block are not kept: what no block takes (separators every block must
leave out) is left to the single-site moves. Forest blocks do not overlap (growth stays linear).

*Sampling* (`BlockSampler`): each move slices the block's factor tables at the current values of
the outside variables (zero entries clamped to −`HARD`, as in the Gibbs kernels, so an
infeasible start moves towards feasibility), passes messages up the block's clique tree (log
space), then samples the root and walks down: each variable from its clique potential sliced at
its already-sampled separator. Every variable's draw probabilities are ``p(x_v | x_S, x_rest)``
for a subset S of the new state, an unbiased Rao-Blackwellised estimate of its marginal.

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder(); x, y = b.add_variables(2)
>>> _ = b.add_factor(FactorFunction.TABLE, [x, y], table=[0.5, 0.0, 0.0, 0.5])  # a wall
>>> g = b.build()
>>> [blk.vars.tolist() for blk in build_blocks(g)]
[[0, 1]]
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from pdbq.errors import InferenceError
from pdbq.graph.layout import FactorGraph
from pdbq.inference.exact.elimination_order import min_fill_order
from pdbq.inference.mcmc.kernels import HARD
from pdbq.inference.exact.potentials import Hyperedge, condition, hyperedges
from pdbq.inference.mcmc.transition import Kernel, state_table
from pdbq.memory import check_fits, table_cap

__all__ = [
    "DEFAULT_BLOCK_TABLE",
    "GLOBAL_ORDER_LIMIT",
    "Block",
    "BlockSampler",
    "block_edges",
    "build_blocks",
    "BlockList",
    "block_kernel",
]

class BlockList(list):
    """The blocks `build_blocks` chose; ``cut`` is True when a deadline stopped the choice early
    (the blocks made so far are valid moves, just fewer of them: not to be kept for later runs)."""

    cut = False


DEFAULT_BLOCK_TABLE = 2**10  # entries of a block's largest clique table (width 9 for booleans)
GLOBAL_ORDER_LIMIT = 20_000  # free variables beyond which blocks are forests (no global order)


class _Factor(NamedTuple):
    table: np.ndarray  # clamped log-table over the factor's free scope
    index: tuple  # template: slice(None) on block axes, a placeholder on outside axes
    outside: tuple  # (axis, variable id) of each outside argument
    perm: tuple  # transposes the sliced table into block-position order
    shape: tuple  # broadcast shape inside its clique


@dataclass(frozen=True, eq=False)
class Block:
    """One block: ``vars`` in elimination order; clique i holds positions ``keys[i]`` (sorted,
    ``keys[i][0] == i``) and has parent ``parent[i]`` (= keys[i][1], or -1 for a root)."""

    vars: np.ndarray  # int64[m]
    keys: tuple  # of int64 arrays
    shapes: tuple  # clique table shapes
    parent: np.ndarray  # int64[m]
    children: tuple  # per clique: tuple of (child index, broadcast shape of its message)
    factors: tuple  # per clique: tuple of _Factor
    max_table: int

    @property
    def size(self) -> int:
        return int(self.vars.shape[0])


def block_edges(graph: FactorGraph) -> list[Hyperedge]:
    """The graph's log-tables with its evidence sliced in and zeros clamped to −HARD."""
    edges = condition(hyperedges(graph), graph.evidence.astype(np.int64))
    out = []
    for h in edges:
        if h.scope.size == 0:
            continue
        out.append(Hyperedge(h.scope, np.maximum(h.log_table, -HARD), h.source))
    return out


# ---------------------------------------------------------------------------------------------
# choosing blocks


def scope_components(n_vars: int, scopes, order: np.ndarray) -> list[np.ndarray]:
    """Connected components (sorted ids, at least two each) of the variables in ``order`` when
    every scope joins its variables (union-find); components come in the order their first
    variable appears in ``order``."""
    parent = np.arange(n_vars)

    def find(u: int) -> int:
        while parent[u] != u:
            parent[u] = parent[parent[u]]
            u = parent[u]
        return u

    for scope in scopes:
        members = [int(v) for v in scope]
        for v in members[1:]:
            parent[find(v)] = find(members[0])
    parts: dict[int, list[int]] = {}
    for v in np.asarray(order, dtype=np.int64).tolist():
        parts.setdefault(find(v), []).append(v)
    return [np.array(sorted(m), dtype=np.int64) for m in parts.values() if len(m) >= 2]


def _strength(t: np.ndarray) -> float:
    lo, hi = float(t.min()), float(t.max())
    if lo <= -HARD / 2:
        return np.inf
    return hi - lo


def _neighbours(edges, n_vars):
    nb: list[dict[int, float]] = [dict() for _ in range(n_vars)]
    for h in edges:
        if h.scope.shape[0] < 2:
            continue
        s = _strength(h.log_table)
        members = h.scope.tolist()
        for u in members:
            d = nb[u]
            for w in members:
                if w != u and d.get(w, -1.0) < s:
                    d[w] = s
    return nb


def _cliques_in_order(scopes, order):
    """Cliques of eliminating ``order`` (all the scopes' variables) in that order."""
    adj: dict[int, set[int]] = {int(v): set() for v in order}
    for s in scopes:
        m = [int(v) for v in s]
        for v in m:
            adj[v].update(m)
    for v, a in adj.items():
        a.discard(v)
    cliques = []
    for v in order:
        v = int(v)
        nb = adj.pop(v)
        cliques.append(np.array(sorted(nb | {v}), dtype=np.int64))
        for u in nb:
            adj[u].discard(v)
            adj[u].update(nb - {u})
    return cliques


def build_blocks(
    graph: FactorGraph,
    *,
    max_table: int = DEFAULT_BLOCK_TABLE,
    max_vars: int | None = None,
    targets: np.ndarray | None = None,
    edges: list[Hyperedge] | None = None,
    global_order_limit: int = GLOBAL_ORDER_LIMIT,
    min_new: float = 0.05,
    within: np.ndarray | None = None,
    priority: np.ndarray | None = None,
    deadline: float | None = None,
    poll: Callable[[], None] | None = None,
) -> BlockList:
    """Blocks over the free variables (see the module docstring). ``max_vars`` caps a block's
    size; ``targets`` are seeded first. ``within`` (bool per variable): blocks hold and seed only
    these variables (`domains` grows blocks around a slow-mixing patch); ``priority`` (float per
    variable): growth takes the highest-priority neighbour first instead of the strongest coupling.
    A block of 16 or more variables that would bring fewer than max(2, ``min_new`` × its size)
    variables not yet in a block is dropped (its seed is left to single-site moves), so a
    separator that every block must leave out does not breed near-identical blocks.
    ``deadline`` (a `time.perf_counter()` instant): growing blocks stops there, with the blocks
    made so far (`BlockList.cut`); growth is Python, seconds on a few thousand variables, and the
    global order minutes on ten thousand: a deadline that ends the order leaves no blocks (cut).
    ``poll()`` is called as often (a cancelled statement raises from it)."""
    if isinstance(max_table, bool) or not isinstance(max_table, (int, np.integer)) or max_table < 2:
        raise InferenceError(f"blocks: the largest clique table must be at least 2 entries, got {max_table!r}")
    # a table beyond the memory left is never built: the blocks stay within what can be held
    max_table = min(int(max_table), table_cap(2))
    if max_vars is not None and (isinstance(max_vars, bool) or not isinstance(max_vars, (int, np.integer)) or max_vars < 1):
        raise InferenceError(f"blocks: a block needs at least 1 variable, got {max_vars!r}")
    edges = block_edges(graph) if edges is None else edges
    n = graph.n_vars
    card = graph.cardinality.astype(np.int64)
    free = np.flatnonzero(graph.evidence < 0)
    if within is not None:
        free = free[np.asarray(within, dtype=bool)[free]]
    if free.size == 0:
        return BlockList()
    nb = _neighbours(edges, n)
    if within is not None:
        keep = np.asarray(within, dtype=bool)
        nb = [{w: s for w, s in d.items() if keep[w]} for d in nb]
    if priority is not None:
        prio = np.asarray(priority, dtype=np.float64)
        nb = [{w: float(prio[w]) for w in d} for d in nb]
    scopes_of: list[list[int]] = [[] for _ in range(n)]
    for k, h in enumerate(edges):
        for v in h.scope.tolist():
            scopes_of[v].append(k)
    scopes = [h.scope for h in edges if h.scope.size]
    if within is not None:
        # blocks inside ``within`` see the rest as conditioned: the order of the induced subgraph
        # bounds their cliques as well (and costs only that subgraph)
        scopes = [s[keep[s]] for s in scopes if keep[s].any()]
    use_order = free.size <= global_order_limit

    def should_stop() -> bool:
        if poll is not None:
            poll()
        return deadline is not None and time.perf_counter() >= deadline

    order_info, multi = None, None
    if use_order:
        info = min_fill_order(scopes, card, should_stop=should_stop)
        if not info.complete:  # the deadline came first: nothing to build blocks from
            out = BlockList()
            out.cut = True
            return out
        clique_of: dict[int, np.ndarray] = {int(v): c for v, c in zip(info.order.tolist(), info.cliques)}
        in_cliques: dict[int, list[int]] = {}
        for v, c in clique_of.items():
            for u in c.tolist():
                in_cliques.setdefault(u, []).append(v)
        order_info = (clique_of, in_cliques)
    else:
        big = [h.scope for h in edges if h.scope.shape[0] > 2]
        multi = np.zeros(n, dtype=bool)
        for s in big:
            multi[s] = True
    # seeds: targets, then the most strongly tied variables
    tie = np.array([max(d.values()) if d else 0.0 for d in nb])
    rest = free[np.argsort(-tie[free], kind="stable")]
    seeds = rest if targets is None else np.concatenate([np.asarray(targets, dtype=np.int64), rest])
    covered = np.zeros(n, dtype=bool)
    covered[graph.evidence >= 0] = True
    if within is not None:
        covered[~np.asarray(within, dtype=bool)] = True
    blocks: list[Block] = []
    cap = max_vars if max_vars is not None else n
    cut = False
    for seed in seeds.tolist():
        if covered[seed]:
            continue
        if should_stop():
            cut = True
            break
        members = _grow(seed, nb, card, max_table, cap, covered, order_info, multi)
        if len(members) == 1:
            covered[seed] = True  # a one-variable block is a single-site update: nothing to gain
            continue
        fresh = int(np.count_nonzero(~covered[members]))
        if blocks and min_new > 0 and len(members) >= 16 and fresh < max(2, min_new * len(members)):
            # the same separator keeps being left out: another near-copy of an earlier block
            # would cost a whole block move for a variable or two, which single-site moves serve
            covered[seed] = True
            continue
        covered[members] = True
        order = info.order if use_order else None
        blocks.append(_make_block(np.array(members, dtype=np.int64), edges, card, max_table, order, scopes_of))
    out = BlockList(blocks)
    out.cut = cut
    return out


def _grow(seed: int, nb: list[dict], card: np.ndarray, max_table: int, cap: int, covered: np.ndarray,
          order_info: tuple[dict, dict] | None, multi: np.ndarray | None) -> list[int]:
    """One block grown from ``seed`` (Prim-style, strongest tie first) while its cliques fit
    ``max_table`` and it has fewer than ``cap`` variables. ``order_info`` = (clique of each
    variable, variables whose clique holds it) of the global min-fill order; None: beyond the
    global-order limit, where a block stays a forest of pairwise factors (``multi``: variables in
    a larger factor) that does not overlap ``covered`` ones."""
    use_order = order_info is not None
    if use_order:
        clique_of, in_cliques = order_info
    members = [seed]
    in_b = {seed}
    if use_order:
        size = {seed: int(card[seed])}
    else:
        parent = {seed: seed}

        def find(u):
            while parent[u] != u:
                parent[u] = parent[parent[u]]
                u = parent[u]
            return u

    heap = [(-s, k, u) for k, (u, s) in enumerate(nb[seed].items()) if use_order or not covered[u]]
    heapq.heapify(heap)
    tick = len(heap)
    rejected: set[int] = set()
    while heap and len(members) < cap:
        _, _, u = heapq.heappop(heap)
        if u in in_b or u in rejected:
            continue
        if use_order:
            ok = True
            cu = int(card[u])
            su = cu
            for w in clique_of.get(u, np.array([u])).tolist():
                if w in in_b:
                    su *= int(card[w])
            if su > max_table:
                ok = False
            else:
                for v in in_cliques.get(u, ()):
                    if v in in_b and size[v] * cu > max_table:
                        ok = False
                        break
            if not ok:
                rejected.add(u)
                continue
            for v in in_cliques.get(u, ()):
                if v in in_b:
                    size[v] *= cu
            size[u] = su
        else:
            if multi[u] or card[u] * max(int(card[w]) for w in nb[u]) > max_table:
                rejected.add(u)
                continue
            roots = [find(w) for w in nb[u] if w in in_b]
            if len(set(roots)) != len(roots):
                rejected.add(u)
                continue
            parent[u] = u
            for r in roots:
                parent[r] = u
        members.append(u)
        in_b.add(u)
        for w, s in nb[u].items():
            # beyond the global-order limit blocks do not overlap: growth stays linear
            if w not in in_b and w not in rejected and (use_order or not covered[w]):
                heapq.heappush(heap, (-s, tick, w))
                tick += 1
    return members


def _make_block(members: np.ndarray, edges, card, max_table: int, global_order, scopes_of,
                option: str = "block_table") -> Block:
    in_b = np.zeros(card.shape[0], dtype=bool)
    in_b[members] = True
    touching = [edges[k] for k in sorted({k for v in members.tolist() for k in scopes_of[v]})]
    scopes = [h.scope[in_b[h.scope]] for h in touching]
    info = min_fill_order(scopes, card)
    order, cliques = info.order, info.cliques
    if info.max_table_size > max_table and global_order is not None:
        # the global order restricted to the block is within budget by construction
        order = global_order[in_b[global_order]]
        cliques = _cliques_in_order(scopes, order)
    # every clique's table is kept for the chains' whole run: refuse before allocating them
    check_fits(sum(math.prod(int(card[v]) for v in c) for c in cliques), "an exact block", copies=2, option=option)
    # variables in no scope (isolated in the block): their own one-variable cliques
    seen = np.zeros(card.shape[0], dtype=bool)
    seen[order] = True
    lonely = members[~seen[members]]
    order = np.concatenate([order, lonely]).astype(np.int64)
    cliques = list(cliques) + [np.array([v], dtype=np.int64) for v in lonely.tolist()]
    m = order.shape[0]
    pos = np.full(card.shape[0], -1, dtype=np.int64)
    pos[order] = np.arange(m)
    keys = tuple(np.sort(pos[c]) for c in cliques)
    shapes = tuple(tuple(int(card[order[k]]) for k in ks) for ks in keys)
    biggest = max(int(np.prod(s)) for s in shapes)
    parent = np.array([int(k[1]) if k.shape[0] > 1 else -1 for k in keys], dtype=np.int64)
    children: list[list] = [[] for _ in range(m)]
    for i, p in enumerate(parent.tolist()):
        if p >= 0:
            children[p].append((i, _bshape(keys[i][1:], keys[p], shapes[p])))
    factors: list[list] = [[] for _ in range(m)]
    for h in touching:
        inside = in_b[h.scope]
        hk = pos[h.scope[inside]]
        perm = tuple(int(a) for a in np.argsort(hk))
        hk_sorted = np.sort(hk)
        home = int(hk_sorted[0])
        index = tuple(slice(None) if b else 0 for b in inside.tolist())
        outside = tuple((a, int(v)) for a, (v, b) in enumerate(zip(h.scope.tolist(), inside.tolist())) if not b)
        factors[home].append(_Factor(h.log_table, index, outside, perm, _bshape(hk_sorted, keys[home], shapes[home])))
    return Block(
        vars=order,
        keys=keys,
        shapes=shapes,
        parent=parent,
        children=tuple(tuple(c) for c in children),
        factors=tuple(tuple(f) for f in factors),
        max_table=biggest,
    )


def _bshape(sub: np.ndarray, keys: np.ndarray, shape: tuple) -> tuple:
    """Shape that broadcasts a table over sorted positions ``sub`` ⊆ ``keys`` into ``shape``."""
    out = [1] * len(keys)
    for a in np.searchsorted(keys, sub).tolist():
        out[a] = shape[a]
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# sampling


def _lse0(t: np.ndarray) -> np.ndarray:
    m = t.max(axis=0)
    return np.log(np.exp(t - m).sum(axis=0)) + m


class BlockSampler:
    """Forward filtering, backward sampling of one block at inverse temperature ``beta``."""

    def __init__(self, block: Block):
        self.block = block

    def potentials(self, values: np.ndarray, beta: float = 1.0) -> list[np.ndarray]:
        """Clique potentials of the upward pass (each includes its children's messages)."""
        b = self.block
        m = b.size
        psi: list[np.ndarray] = [None] * m  # type: ignore[list-item]
        up: list[np.ndarray] = [None] * m  # type: ignore[list-item]
        for i in range(m):
            acc = np.zeros(b.shapes[i])
            for f in b.factors[i]:
                if f.outside:
                    idx = list(f.index)
                    for a, v in f.outside:
                        idx[a] = values[v]
                    t = f.table[tuple(idx)]
                else:
                    t = f.table
                if f.perm != tuple(range(len(f.perm))):
                    t = t.transpose(f.perm)
                acc += beta * t.reshape(f.shape)
            for j, shape in b.children[i]:
                acc += up[j].reshape(shape)
                up[j] = None  # type: ignore[call-overload]
            psi[i] = acc
            if b.parent[i] >= 0:
                up[i] = _lse0(acc)
        return psi

    def conditionals(self, psi: list[np.ndarray], x: np.ndarray, i: int) -> np.ndarray:
        """p(x_{v_i} | separator of clique i at ``x`` (block positions), rest)."""
        sep = self.block.keys[i][1:]
        col = psi[i][(slice(None),) + tuple(int(x[k]) for k in sep.tolist())]
        e = np.exp(col - col.max())
        return e / e.sum()

    def sample(self, values: np.ndarray, rng: np.random.Generator, beta: float = 1.0,
               record: np.ndarray | None = None) -> None:
        """Replace the block's values in ``values`` by a draw from p_β(x_B | rest). With
        ``record`` (float64[m, max_card]) row i receives variable i's draw probabilities."""
        b = self.block
        psi = self.potentials(values, beta)
        m = b.size
        x = np.zeros(m, dtype=np.int64)
        u = rng.random(m)
        for i in range(m - 1, -1, -1):
            p = self.conditionals(psi, x, i)
            k = int(np.searchsorted(np.cumsum(p), u[i] * p.sum(), side="right"))
            x[i] = min(k, p.shape[0] - 1)
            if record is not None:
                record[i] = 0.0
                record[i, : p.shape[0]] = p
        values[b.vars] = x


# ---------------------------------------------------------------------------------------------
# exact transition matrix (tests)


def block_kernel(graph: FactorGraph, blocks: list[Block], p, beta: float = 1.0) -> Kernel:
    """Random-block kernel ``Σ_b p_b K_b`` of this module's sampler as an explicit matrix over
    every state (`transition.state_table` order): K_b(s, s') is the probability that
    `BlockSampler.sample` draws s'_B from state s, computed from the sampler's own potentials and
    conditionals. For `transition.check_kernel`."""
    cards = graph.cardinality.astype(np.int64)
    states = state_table(cards)
    n_states = states.shape[0]
    strides = np.array([int(np.prod(cards[i + 1 :])) for i in range(cards.shape[0])], dtype=np.int64)
    cols, vals = [], []
    for blk, pb in zip(blocks, p):
        sampler = BlockSampler(blk)
        outs = state_table(cards[blk.vars])
        c = np.empty((n_states, outs.shape[0]), dtype=np.int64)
        w = np.empty((n_states, outs.shape[0]))
        for s in range(n_states):
            vals_s = states[s].copy()
            psi = sampler.potentials(vals_s, beta)
            base = s - int((states[s, blk.vars] * strides[blk.vars]).sum())
            for o, x in enumerate(outs):
                prob = 1.0
                for i in range(blk.size - 1, -1, -1):
                    prob *= float(sampler.conditionals(psi, x, i)[x[i]])
                c[s, o] = base + int((x * strides[blk.vars]).sum())
                w[s, o] = pb * prob
        cols.append(c)
        vals.append(w)
    return Kernel(np.concatenate(cols, axis=1), np.concatenate(vals, axis=1))
