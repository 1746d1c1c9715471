"""Hybrid exact/MCMC: sample a small cutset, answer the rest exactly (Rao-Blackwellisation).

*Choice of the cutset* (`choose_cutset`): conditioning on a variable deletes it from the
interaction graph. Starting from the free variables, the variable that lies in the most
cliques over ``max_table`` entries of the remainder's min-fill order (ties: the most remainder
neighbours) joins the cutset C, until the remainder's largest clique table fits ``max_table``.

*Sampling* (`run_cutset`): each chain's state is a whole world. One sweep redraws every cutset
variable v from its **collapsed** conditional p(x_v | x_{C∖v}) ∝ Σ_{x_R} p(x_C, x_R) — the
remainder summed out exactly, one upward pass of the remainder's clique trees per value of v
(only the connected components of the remainder that touch v) — then draws the remainder
exactly from p(x_R | x_C) (forward filtering, backward sampling). Collapsed Gibbs on C rather
than Gibbs on C given a sampled remainder: a strongly coupled or walled-in world moves only as
fast as its slowest site, and given the sampled remainder a cutset variable is pinned by its
neighbours exactly as in single-site Gibbs; with the remainder summed out, the chain lives on
the few cutset configurations and each update weighs whole modes of the remainder. The cost
is card(v) upward passes per update; `choose_cutset`'s table budget keeps each one to a few
thousand entries.

*Estimates*: a cutset variable's Rao-Blackwellised value is its collapsed conditional; every
remainder target's is its exact marginal given the cutset (a downward pass calibrates the
clique trees, `cutset_kernels.calibrate_block`) after each sweep. Both are unbiased at
stationarity; their variance comes from the cutset's distribution alone. The sweeps run as the
move step (`gibbs.Moves`) of `run_gibbs`'s round loop, so batch-means standard errors, split
R-hat across chains, ESS, deadlines and warnings are those of every other sampler.

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder(); x = b.add_variables(3); w = b.add_weight(1.0)
>>> for u, v in ((0, 1), (1, 2), (0, 2)):
...     _ = b.add_factor(FactorFunction.EQUAL, [x[u], x[v]], weight=w)
>>> cs = choose_cutset(b.build(), max_table=4)
>>> cs.vars.tolist(), cs.width
([0], 1)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from pdbq.errors import InferenceError, TimeLimitError
from pdbq.graph.layout import FactorGraph, validate
from pdbq.inference.moves.block_kernels import BlockArrays, block_fill, pack_blocks
from pdbq.inference.moves.blocks import Block, _make_block, block_edges
from pdbq.inference.mcmc.config import GibbsConfig
from pdbq.inference.moves.cutset_kernels import CutArrays, collapsed_conditional, cutset_sweep, draw_block
from pdbq.inference.exact.elimination_order import min_fill_order
from pdbq.inference.mcmc.gibbs import (
    ChainMoves,
    GibbsResult,
    GibbsTrace,
    MoveContext,
    Moves,
    RoundInfo,
    check_targets,
    run_gibbs,
)
from pdbq.inference.mcmc.kernels import (
    MODE_SWEEP,
    Best,
    KernelGraph,
    Schedule,
    group_sums_into,
    prepare_kernel_graph,
    run_chain,
)
from pdbq.inference.exact.potentials import Hyperedge
from pdbq.memory import check_fits
from pdbq.inference.mcmc.rng import group_states
from pdbq.inference.mcmc.transition import Kernel, state_table

__all__ = [
    "DEFAULT_CUTSET_TABLE",
    "MAX_CUTSET",
    "Cutset",
    "CutsetResult",
    "choose_cutset",
    "run_cutset",
    "cutset_for",
    "cutset_kernel",
    "describe_cutset",
    "CutsetPlan",
    "cutset_plan",
    "cutset_result",
]

DEFAULT_CUTSET_TABLE = 2**10  # the remainder's largest clique table (entries), as for blocks
MAX_CUTSET = 64  # `cutset = true`: more cutset variables than this is no small cutset
DEFAULT_GROUP_TABLE = 16  # joint configurations of a group of cutset variables updated together
_ROUND_COST = 500_000  # table-entry visits per chain and round (a few ms): enough batches for the errors


@dataclass(frozen=True, eq=False)
class Cutset:
    """A cutset and its remainder: ``vars`` (sampled), the remainder's blocks (one per connected
    component, each in its elimination order) and their packed arrays, the remainder's induced
    width and largest clique table, and the packed factors inside the cutset."""

    vars: np.ndarray  # int64[n_cut]
    blocks: tuple  # of blocks.Block
    packed: BlockArrays
    cut: CutArrays
    width: int
    max_table: int
    sweep_cost: int  # table-entry visits of one collapsed sweep (the round schedule's cost model)
    alternate_cost: int  # the same for a sweep of Gibbs on the cutset given the remainder
    n_groups: int = 0  # groups of cutset variables updated jointly

    @property
    def size(self) -> int:
        return int(self.vars.shape[0])

    @property
    def touched(self) -> np.ndarray:
        """Remainder blocks some cutset variable's factor reads (they change with the cutset)."""
        return np.unique(self.cut.cb_blk).astype(np.int64)

    @property
    def untouched(self) -> np.ndarray:
        return np.setdiff1d(np.arange(len(self.blocks)), self.touched).astype(np.int64)


@dataclass(frozen=True, eq=False)
class CutsetResult(GibbsResult):
    """`GibbsResult` plus the cutset: its size, the remainder's width and largest clique table,
    and the sweeps per chain kept (``steps`` counts each sweep as ``unit`` updates)."""

    cutset_size: int = 0
    cutset_groups: int = 0
    remainder_width: int = 0
    remainder_table: int = 0
    sweeps: int = 0


def _remainder_order(scopes: list[np.ndarray], in_c: np.ndarray, card: np.ndarray, should_stop=None):
    sc = [s[~in_c[s]] for s in scopes]
    return min_fill_order([s for s in sc if s.size], card, should_stop=should_stop)


def choose_cutset(
    graph: FactorGraph,
    *,
    max_table: int = DEFAULT_CUTSET_TABLE,
    max_vars: int | None = None,
    edges: list[Hyperedge] | None = None,
    group_table: int = DEFAULT_GROUP_TABLE,
    should_stop: Callable[[], bool] | None = None,
) -> Cutset:
    """The cutset of the module docstring: at most ``max_vars`` variables (default
    `MAX_CUTSET`) whose removal leaves a remainder with clique tables of at most ``max_table``
    entries; `InferenceError` when no such cutset is found within ``max_vars``.
    ``should_stop()`` (a deadline or a cancel; `min_fill_order`): read during every order search
    (each added variable costs one over the whole remainder: minutes on a 60 × 60 grid); True
    ends the choice with `TimeLimitError`."""
    if isinstance(max_table, bool) or not isinstance(max_table, (int, np.integer)) or max_table < 2:
        raise InferenceError(f"cutset: the remainder's largest clique table must be at least 2 entries, got {max_table!r}")
    cap = MAX_CUTSET if max_vars is None else max_vars
    if isinstance(cap, bool) or not isinstance(cap, (int, np.integer)) or cap < 1:
        raise InferenceError(f"cutset: a cutset needs at least 1 variable, got {max_vars!r}")
    edges = block_edges(graph) if edges is None else edges
    card = graph.cardinality.astype(np.int64)
    scopes = [h.scope for h in edges if h.scope.shape[0] > 1]
    in_c = np.zeros(graph.n_vars, dtype=bool)
    chosen: list[int] = []
    def order() -> object:
        info = _remainder_order(scopes, in_c, card, should_stop)
        if info.stopped:
            raise TimeLimitError(f"the time limit stopped choosing the cutset ({len(chosen)} variables chosen, the "
                                 f"remainder's order {info.describe()} so far)", stage="choosing the cutset")
        return info

    info = order()
    while info.max_table_size > max_table:
        if len(chosen) >= cap:
            raise InferenceError(
                f"cutset: {cap} variables leave a remainder whose largest clique table has "
                f"{info.max_table_size:,} entries (induced width {info.width}), over the {max_table:,} allowed: "
                "allow a larger cutset (cutset = N) or block moves / replica exchange instead"
            )
        over = np.zeros(graph.n_vars)
        deg = np.zeros(graph.n_vars)
        for c in info.cliques:
            if int(np.prod(card[c])) > max_table:
                over[c] += 1
            deg[c[0]] = c.shape[0] - 1
        over[in_c] = -1
        best = np.flatnonzero(over == over.max())
        v = int(best[np.argmax(deg[best])])
        chosen.append(v)
        in_c[v] = True
        info = order()
    if should_stop is not None and should_stop():
        # building the remainder's blocks is not interrupted (a second at a few per cent of a core
        # on Promedus_26's 614 variables): not begun once the time is up
        raise TimeLimitError(f"the time limit stopped choosing the cutset ({len(chosen)} variables chosen, its "
                             "remainder's blocks not built)", stage="choosing the cutset")
    return _build(graph, edges, np.array(chosen, dtype=np.int64), card, max_table, info.width, group_table)


def _build(graph: FactorGraph, edges, cut: np.ndarray, card: np.ndarray, max_table: int, width: int,
           group_table: int) -> Cutset:
    n = graph.n_vars
    in_c = np.zeros(n, dtype=bool)
    in_c[cut] = True
    free = graph.evidence < 0
    rem = free & ~in_c
    # connected components of the remainder (union-find over its restricted scopes)
    parent = np.arange(n)

    def find(u: int) -> int:
        while parent[u] != u:
            parent[u] = parent[parent[u]]
            u = int(parent[u])
        return u

    for h in edges:
        r = h.scope[rem[h.scope]].tolist()
        for u in r[1:]:
            a, b = find(r[0]), find(u)
            if a != b:
                parent[b] = a
    roots = np.array([find(v) for v in range(n)])
    comps: dict[int, list[int]] = {}
    for v in np.flatnonzero(rem).tolist():
        comps.setdefault(int(roots[v]), []).append(v)
    scopes_of: list[list[int]] = [[] for _ in range(n)]
    for k, h in enumerate(edges):
        for v in h.scope.tolist():
            scopes_of[v].append(k)
    blocks: list[Block] = [
        _make_block(np.array(m, dtype=np.int64), edges, card, max_table, None, scopes_of, option="cutset_table")
        for m in comps.values()
    ]
    comp_block = {root: i for i, root in enumerate(comps)}
    packed = pack_blocks(blocks) if blocks else _empty_blocks()
    # per cutset variable: its internal factors and its remainder blocks, and how strongly it is
    # tied to the other cutset variables (shared factors, shared remainder neighbours)
    pos = np.full(n, -1, dtype=np.int64)
    pos[cut] = np.arange(cut.shape[0])
    per_var: list[set[int]] = [set() for _ in range(cut.shape[0])]
    adj_blocks: list[set[int]] = [set() for _ in range(cut.shape[0])]
    tie = np.zeros((cut.shape[0], cut.shape[0]))
    rem_nb: list[set[int]] = [set() for _ in range(cut.shape[0])]
    for k, h in enumerate(edges):
        inside = in_c[h.scope]
        cv = pos[h.scope[inside]]
        if inside.all():
            for j in cv.tolist():
                per_var[j].add(k)
            tie[np.ix_(cv, cv)] += 1.0
        elif inside.any():
            b = comp_block[int(roots[int(h.scope[~inside][0])])]
            for j in cv.tolist():
                adj_blocks[j].add(b)
                rem_nb[j].update(h.scope[~inside].tolist())
    for i in range(cut.shape[0]):
        for j in range(i + 1, cut.shape[0]):
            shared = len(rem_nb[i] & rem_nb[j])
            tie[i, j] += 0.5 * shared
            tie[j, i] += 0.5 * shared
    groups = _groups(tie, card[cut], group_table)
    tables: list[np.ndarray] = []
    t_at: dict[int, int] = {}
    t_len = 0
    order = [j for g in groups for j in g]
    g_off, cf_off, cf_table, ca_off, ca_var, ca_stride = [0], [0], [], [0], [], []
    cb_off, cb_blk = [0], []
    for g in groups:
        g_off.append(g_off[-1] + len(g))
        for k in sorted(set().union(*(per_var[j] for j in g))):
            h = edges[k]
            if k not in t_at:
                t_at[k] = t_len
                tables.append(np.ascontiguousarray(h.log_table, dtype=np.float64).ravel())
                t_len += h.log_table.size
            cf_table.append(t_at[k])
            shape = h.log_table.shape
            for a, v in enumerate(h.scope.tolist()):
                ca_var.append(v)
                ca_stride.append(int(np.prod(shape[a + 1 :])))
            ca_off.append(len(ca_var))
        cf_off.append(len(cf_table))
        cb_blk.extend(sorted(set().union(*(adj_blocks[j] for j in g))))
        cb_off.append(len(cb_blk))
    cut = cut[np.array(order, dtype=np.int64)] if order else cut
    dirty = _dirty(blocks, packed, groups, cut, g_off)
    i64 = lambda x: np.asarray(x, dtype=np.int64)  # noqa: E731
    ca = CutArrays(i64(cut), i64(g_off), i64(cf_off), i64(cf_table), i64(ca_off), i64(ca_var), i64(ca_stride),
                   i64(cb_off), i64(cb_blk), np.concatenate(tables) if tables else np.zeros(0), dirty)
    # cost model: one upward pass per configuration of a group over its blocks, then an upward
    # pass, a backward draw and a downward pass (about 3 passes) of every block
    bcost = [sum(int(np.prod(s)) * (1 + len(f)) for s, f in zip(b.shapes, b.factors)) for b in blocks]
    sweep = 3 * sum(bcost) + 1
    for j, g in enumerate(groups):
        conf = int(np.prod(card[cut[g_off[j] : g_off[j + 1]]]))
        sweep += conf * (sum(bcost[b] for b in cb_blk[cb_off[j] : cb_off[j + 1]]) + 1)
    biggest = max((b.max_table for b in blocks), default=1)
    return Cutset(cut, tuple(blocks), packed, ca, width, int(biggest), int(sweep),
                  int(3 * sum(bcost) + 1 + cut.shape[0]), len(groups))


def _dirty(blocks, packed: BlockArrays, groups, cut: np.ndarray, g_off) -> np.ndarray:
    """uint8[n_groups, n_cliques]: 1 where a clique reads a variable of the group or is an
    ancestor of one that does (its message changes with the group's values)."""
    n_cliques = int(packed.c_var.shape[0])
    out = np.zeros((len(groups), max(n_cliques, 1)), dtype=np.uint8)
    for j in range(len(groups)):
        members = set(cut[g_off[j] : g_off[j + 1]].tolist())
        for b, blk in enumerate(blocks):
            base = int(packed.blk_clique[b])
            for i, fs in enumerate(blk.factors):
                if any(v in members for f in fs for _, v in f.outside):
                    c = i
                    while c >= 0 and not out[j, base + c]:
                        out[j, base + c] = 1
                        c = int(blk.parent[c])
    return out


def _groups(tie: np.ndarray, card: np.ndarray, group_table: int) -> list[list[int]]:
    """Cutset variables (indices) in groups of at most ``group_table`` joint configurations,
    each grown from the most tied free variable by the one most tied to the group."""
    n = tie.shape[0]
    left = np.ones(n, dtype=bool)
    out = []
    total = tie.sum(axis=1)
    while left.any():
        seed = int(np.flatnonzero(left)[np.argmax(total[left])])
        g, size = [seed], int(card[seed])
        left[seed] = False
        while True:
            cand = np.flatnonzero(left & (size * card <= group_table))
            if cand.size == 0:
                break
            w = tie[np.ix_(cand, g)].sum(axis=1)
            j = int(cand[np.argmax(w)])
            g.append(j)
            size *= int(card[j])
            left[j] = False
        out.append(sorted(g))
    return out


def _empty_blocks() -> BlockArrays:
    z = np.zeros(0, dtype=np.int64)
    zero = np.zeros(1, dtype=np.int64)
    return BlockArrays(zero, z, z, z, z, z, zero, z, z, z, z, zero, z, z, zero, z, z, z, np.zeros(0))


class _Sweeps:
    """The move step of `run_cutset`: ``unit`` updates of a chain are one sweep."""

    def __init__(self, ctx: MoveContext, cs: Cutset, unit: int, naive: bool, collapsed: bool):
        g = ctx.graph
        chains = len(ctx.states)
        self.ctx, self.cs, self.unit, self.naive, self.collapsed = ctx, cs, unit, naive, collapsed
        self.csched = Schedule(cs.vars.astype(np.int32), MODE_SWEEP, np.zeros(0), np.zeros(0, dtype=np.int32))
        self.unused = Best(np.zeros(2), np.zeros(0, dtype=ctx.states[0].values.dtype), np.ones(1))
        self.no_order = np.zeros(0, dtype=np.int64)
        pk = cs.packed
        widest_table = max(int(pk.blk_psi.max()) if pk.blk_psi.size else 1, 1)
        # each chain fills its own copy of the remainder's largest table: one that fits once may
        # not fit once per chain
        check_fits(widest_table, f"cutset sampling for {chains} chains (one largest remainder table each)",
                   copies=chains, option="cutset_table")
        self.psi = np.zeros((chains, widest_table))
        widest = int(np.diff(pk.ax_off).max()) if pk.ax_off.shape[0] > 1 else 1
        self.coords = np.zeros((chains, max(widest, 1)), dtype=np.int64)
        msg = max((int(pk.c_size[c] // pk.ax_card[pk.ax_off[c]]) for c in range(pk.c_var.shape[0])), default=1)
        self.tmp = np.zeros((chains, 2 * max(msg, 1)))
        kmax = int(g.cardinality.max()) if g.n_vars else 2
        ca = cs.cut
        confs = [int(np.prod(g.cardinality[ca.cut_var[ca.g_off[j] : ca.g_off[j + 1]]].astype(np.int64)))
                 for j in range(cs.n_groups)]
        kmax = max([kmax] + confs)
        self.logp = np.zeros((chains, kmax))
        self.probs = np.zeros((chains, kmax))
        self.card = g.cardinality.astype(np.int64)
        self.order = np.arange(cs.n_groups, dtype=np.int64)
        self.rng = group_states(ctx.seed + 3_000_017, ctx.first, chains)
        self.sweeps = np.zeros(chains, dtype=np.int64)
        self.blks = cs.touched
        # the components no cutset variable touches never change: one exact draw makes each
        # chain's state a whole world (their marginals are answered exactly, outside the chains)
        nt = np.full(g.n_vars, -1, dtype=np.int32)
        for c in range(chains):
            for b in cs.untouched.tolist():
                draw_block(pk, b, ctx.states[c].values, self.psi[c], self.coords[c], self.tmp[c], self.probs[c],
                           self.rng[c : c + 1], False, nt, np.zeros((1, 1)), np.zeros(1, dtype=np.int64))

    def advance(self, c: int, n: int, collect: bool) -> None:
        acc = self.ctx.accs[c]
        st = self.ctx.states[c]
        values = st.values
        g, kg = self.ctx.graph, self.ctx.kernel
        for _ in range(n // self.unit):
            if not self.collapsed:
                # Gibbs on the cutset given the sampled remainder (the single-site kernel)
                if g.n_groups:
                    group_sums_into(g, kg.tables, values, st.group_sums)
                run_chain(g, kg, st, self.csched, acc, self.unused, self.cs.size, collect)
            order = self.order if self.collapsed else self.no_order
            cutset_sweep(self.cs.packed, self.cs.cut, order, self.blks, values, self.psi[c], self.coords[c],
                         self.tmp[c], self.logp[c], self.probs[c], self.card, self.rng[c : c + 1], collect,
                         acc.target_index, acc.sums, acc.counts, self.naive)
            if collect:
                self.sweeps[c] += 1


def run_cutset(
    graph: FactorGraph,
    targets: Sequence[int] | np.ndarray,
    config: GibbsConfig = GibbsConfig(),
    *,
    cutset: Cutset | None = None,
    max_table: int = DEFAULT_CUTSET_TABLE,
    max_vars: int | None = None,
    group_table: int = DEFAULT_GROUP_TABLE,
    on_round: Callable[[RoundInfo], None] | None = None,
    kernel: KernelGraph | None = None,
    deadline: float | None = None,
    collapsed: bool = True,
    naive: bool = False,
    poll: Callable[[], None] | None = None,
) -> CutsetResult:
    """Estimate the marginals of ``targets`` by collapsed Gibbs on a cutset with the remainder
    answered exactly (module docstring). ``cutset``: one chosen earlier for this graph
    (`choose_cutset`, e.g. cached by a query engine), else chosen here with ``max_table`` and
    ``max_vars``. Other arguments as in `run_gibbs`; every free variable is sampled (a cutset
    sweep redraws the whole world). ``naive`` (tests only) is the broken sampler that ignores the
    remainder in the cutset's conditionals. ``poll``: as in `run_gibbs`."""
    config = config.check()
    if kernel is None:
        validate(graph)
    if cutset is None:
        check_targets(graph, targets, None)
        cutset = choose_cutset(graph, max_table=max_table, max_vars=max_vars, group_table=group_table)
    plan = cutset_plan(graph, targets, cutset, kernel=kernel, collapsed=collapsed, naive=naive)
    if plan.sampled.size:
        r = run_gibbs(graph, plan.sampled, config, on_round=on_round, kernel=plan.kernel, deadline=deadline,
                      moves=plan.moves, poll=poll)
    else:
        r = run_gibbs(graph, np.zeros(0, dtype=np.int64), config, kernel=plan.kernel)
    return cutset_result(graph, plan, r)


class CutsetPlan(NamedTuple):
    """A cutset run's move step and its split of the targets (`cutset_plan`)."""

    moves: Moves  # for run_gibbs over every free variable
    targets: np.ndarray  # int64, as asked
    sampled: np.ndarray  # the targets the chains estimate (the rest are answered exactly)
    exact_rows: np.ndarray  # bool per target: answered exactly (a remainder no cutset variable touches)
    exact_marginals: np.ndarray  # their marginals, rows by variable id
    unit: int  # updates per sweep
    cutset: Cutset
    kernel: KernelGraph | None


def cutset_plan(graph: FactorGraph, targets, cutset: Cutset, *, kernel: KernelGraph | None = None,
                collapsed: bool = True, naive: bool = False) -> CutsetPlan:
    """The move step of `run_cutset` (arguments as there) and which targets it samples; chain
    groups on Dask workers build theirs from the same cutset."""
    _, sites_arr, _, _, _, live = check_targets(graph, targets, None)
    if kernel is None and sites_arr.shape[0]:
        kernel = prepare_kernel_graph(graph)
    # a round is about _ROUND_COST table visits: `unit` updates per sweep so that run_gibbs's
    # round length (as for single-site Gibbs) holds that many sweeps; a function of the graph only
    base = int(min(max(sites_arr.shape[0], 8 * live.shape[0], 1 << 14), 1 << 20))
    cost = cutset.sweep_cost if collapsed else cutset.alternate_cost
    per_round = max(1, _ROUND_COST // max(cost, 1))
    unit = max(1, math.ceil(base / per_round))

    def start(ctx: MoveContext) -> ChainMoves:
        return ChainMoves(_Sweeps(ctx, cutset, unit, naive, collapsed).advance)

    tg = np.asarray(targets, dtype=np.int64)
    fixed = _exact_part(graph, cutset)  # bool[n_vars], and marginals of those variables
    exact_rows = fixed[0][tg] if tg.size else np.zeros(0, dtype=bool)
    in_rem = graph.evidence < 0
    in_rem[cutset.vars] = False  # the remainder's RB values are exact conditionals given the cutset
    return CutsetPlan(Moves(unit=unit, start=start, exact=in_rem), tg, tg[~exact_rows], exact_rows, fixed[1], unit,
                      cutset, kernel)


def cutset_result(graph: FactorGraph, plan: CutsetPlan, r: GibbsResult) -> CutsetResult:
    """The `CutsetResult` of ``plan``'s targets from the run ``r`` over its sampled targets."""
    fields = {f.name: getattr(r, f.name) for f in dataclasses.fields(GibbsResult)}
    if plan.exact_rows.any():
        fields.update(_merge(graph, plan.targets, plan.exact_rows, r, plan.exact_marginals))
    cs = plan.cutset
    return CutsetResult(
        **fields,
        cutset_size=cs.size,
        cutset_groups=cs.n_groups,
        remainder_width=cs.width,
        remainder_table=cs.max_table,
        sweeps=int(r.steps // plan.unit),
    )


def _exact_part(graph: FactorGraph, cs: Cutset) -> tuple[np.ndarray, np.ndarray]:
    """Variables of the remainder components no cutset variable touches (their conditional
    never changes) and their exact marginals (rows by variable id)."""
    pk = cs.packed
    n = graph.n_vars
    kmax = int(graph.cardinality.max()) if n else 2
    mask = np.zeros(n, dtype=bool)
    marg = np.zeros((n, kmax))
    un = cs.untouched
    if un.size == 0:
        return mask, marg
    tix = np.arange(n, dtype=np.int32)
    counts = np.zeros(n, dtype=np.int64)
    values = np.where(graph.evidence >= 0, graph.evidence, 0).astype(np.int64)
    psi = np.zeros(max(int(pk.blk_psi.max()), 1))
    widest = int(np.diff(pk.ax_off).max()) if pk.ax_off.shape[0] > 1 else 1
    coords = np.zeros(max(widest, 1), dtype=np.int64)
    msg = max((int(pk.c_size[c] // pk.ax_card[pk.ax_off[c]]) for c in range(pk.c_var.shape[0])), default=1)
    tmp = np.zeros(2 * max(msg, 1))
    probs = np.zeros(kmax)
    rng = np.ones(1, dtype=np.uint64)
    for b in un.tolist():
        draw_block(pk, b, values, psi, coords, tmp, probs, rng, True, tix, marg, counts)
        mask[cs.blocks[b].vars] = True
    return mask, marg


def _merge(graph: FactorGraph, tg: np.ndarray, exact_rows: np.ndarray, r: GibbsResult, marg: np.ndarray) -> dict:
    """The sampled rows of ``r`` and the exact rows, in the order of ``tg``."""
    T = tg.shape[0]
    k = max(r.marginals.shape[1] if r.marginals.ndim == 2 else 0, int(graph.cardinality[tg].max()))
    m = np.zeros((T, k))
    se = np.zeros((T, k))
    rhat = np.ones(T)
    ess = np.full(T, np.inf)
    live = ~exact_rows
    card = graph.cardinality[tg].astype(np.int64)
    m[exact_rows] = marg[tg[exact_rows], :k]
    if live.any():
        kk = r.marginals.shape[1]
        m[live, :kk] = r.marginals
        se[live, :kk] = r.stderr
        rhat[live] = r.rhat
        ess[live] = r.ess
    tr = r.trace
    pts = tr.steps.shape[0]
    est = np.broadcast_to(m, (pts, T, k)).copy()
    tse = np.zeros((pts, T, k))
    if live.any() and pts:
        kk = tr.estimates.shape[2]
        est[:, live, :kk] = tr.estimates
        if tr.stderr is not None:
            tse[:, live, :kk] = tr.stderr
    return {"targets": tg, "cardinality": card, "marginals": m, "stderr": se, "rhat": rhat, "ess": ess,
            "trace": GibbsTrace(tr.steps, est, tse)}


def cutset_for(graph: FactorGraph, cutset: bool | int, max_table: int,
               should_stop: Callable[[], bool] | None = None) -> Cutset:
    """The cutset of the `cutset` query option: ``True`` (as many variables as needed, up to
    `MAX_CUTSET`) or at most N variables; ``should_stop`` as in `choose_cutset`."""
    return choose_cutset(graph, max_table=max_table, max_vars=None if cutset is True else int(cutset),
                         should_stop=should_stop)


def describe_cutset(cs: Cutset | CutsetResult) -> str:
    """One line for answers and EXPLAIN."""
    if isinstance(cs, CutsetResult):
        size, width, table = cs.cutset_size, cs.remainder_width, cs.remainder_table
    else:
        size, width, table = cs.size, cs.width, cs.max_table
    groups = cs.n_groups if isinstance(cs, Cutset) else cs.cutset_groups
    return (f"cutset sampling: collapsed Gibbs on {size} cutset variable(s) in {groups} joint group(s), "
            f"the remainder (induced width "
            f"{width}, largest clique table {table:,} entries) summed out and answered exactly (Rao-Blackwellised)")


# ---------------------------------------------------------------------------------------------
# exact transition matrix (tests)


def cutset_kernel(graph: FactorGraph, cs: Cutset, p, *, naive: bool = False) -> Kernel:
    """Random-scan kernel ``Σ_j p_j K_j`` of the sampler as an explicit matrix over every state
    (`transition.state_table` order): K_j redraws group j of the cutset from the kernel's
    collapsed conditional (`cutset_kernels.collapsed_conditional`; with ``naive`` the broken one)
    and then the remainder by the sampler's backward draw, whose probabilities are read from the
    same clique potentials (`block_kernels.block_fill`). For `transition.check_kernel`."""
    card = graph.cardinality.astype(np.int64)
    states = state_table(card)
    n_states = states.shape[0]
    strides = np.array([int(np.prod(card[i + 1 :])) for i in range(card.shape[0])], dtype=np.int64)
    pk, ca = cs.packed, cs.cut
    psi = np.zeros(max(int(pk.blk_psi.max()) if pk.blk_psi.size else 1, 1))
    widest = int(np.diff(pk.ax_off).max()) if pk.ax_off.shape[0] > 1 else 1
    coords = np.zeros(max(widest, 1), dtype=np.int64)
    kmax = int(np.prod(card[cs.vars])) if cs.size else 1
    logp, probs = np.zeros(kmax), np.zeros(kmax)
    rem_vars = np.concatenate([b.vars for b in cs.blocks]) if cs.blocks else np.zeros(0, dtype=np.int64)
    rem_states = state_table(card[rem_vars]) if rem_vars.size else np.zeros((1, 0), dtype=np.int64)
    n_rem = rem_states.shape[0]
    rem_codes = (rem_states * strides[rem_vars]).sum(axis=1)
    # the backward draw reads only the cutset's values (the remainder is what it draws): one
    # draw per cutset state instead of one per (state, conditional entry), which made this
    # quadratic in the state count
    draws: dict[bytes, np.ndarray] = {}
    cols, vals = [], []
    for j in range(cs.n_groups):
        gv = ca.cut_var[ca.g_off[j] : ca.g_off[j + 1]]
        confs = state_table(card[gv])
        c_j = np.zeros((n_states, confs.shape[0] * n_rem), dtype=np.int64)
        w_j = np.zeros_like(c_j, dtype=np.float64)
        for s in range(n_states):
            x = states[s].copy()
            n = collapsed_conditional(pk, ca, j, x, psi, coords, card, logp, probs, naive)
            cond = probs[:n].copy()
            for a in range(n):
                x[gv] = confs[a]
                x[rem_vars] = 0
                key = x.tobytes()
                if key not in draws:
                    draws[key] = _draw_probabilities(pk, x, rem_vars, rem_states, psi, coords)
                span = slice(a * n_rem, (a + 1) * n_rem)
                c_j[s, span] = int((x * strides).sum()) + rem_codes
                w_j[s, span] = p[j] * cond[a] * draws[key]
        cols.append(c_j)
        vals.append(w_j)
    return Kernel(np.concatenate(cols, axis=1), np.concatenate(vals, axis=1))


def _draw_probabilities(pk: BlockArrays, x, rem_vars, rem_states, psi, coords) -> np.ndarray:
    """Probability of each remainder configuration under the backward draw given ``x``'s cutset."""
    out = np.ones(rem_states.shape[0])
    for b in range(pk.blk_clique.shape[0] - 1):
        c0, c1 = int(pk.blk_clique[b]), int(pk.blk_clique[b + 1])
        block_fill(pk, c0, c1, x, psi, coords, 1.0)
        pot = psi.copy()
        for r_i, rs in enumerate(rem_states):
            y = x.copy()
            y[rem_vars] = rs
            for c in range(c1 - 1, c0 - 1, -1):
                off, a0 = int(pk.c_psi[c]), int(pk.ax_off[c])
                kv = int(pk.ax_card[a0])
                rest = int(pk.c_size[c]) // kv
                r = 0
                for a in range(1, int(pk.ax_off[c + 1]) - a0):
                    r += int(y[pk.c_var[pk.ax_clique[a0 + a]]]) * int(pk.ax_stride[a0 + a])
                col = pot[off + np.arange(kv) * rest + r]
                e = np.exp(col - col.max())
                out[r_i] *= e[int(y[pk.c_var[c]])] / e.sum()
    return out
