"""Exact blocks whose boundary never changes, drawn by backward sampling alone (AUTO's static blocks).

A block's upward pass (`block_kernels`) conditions on the values of the variables outside it
that its factors read. When a block holds a whole connected component of the free variables
(after the evidence is sliced in, `blocks.block_edges`), no factor of it reads a sampled variable
outside it: its boundary is evidence, the same every cycle, and so are its upward messages. They
are computed once (`upward`), and every draw is then a backward sampling pass alone
(`block_kernels.sample_cached`): forward filtering once, backward sampling every draw, so the
draws are independent and exact. On a graph whose free part has a moderate induced width (the
generated pedigrees of 26 individuals and 3 loci: width 14–17, one upward pass 0.01–0.06 s, one
draw 0.02–0.07 ms) that is hundreds of thousands of independent draws in seconds, where blocks
capped at small tables leave variables that zero entries tie to them frozen outside.

It is still sampling: an estimate is the mean of its draws' Rao-Blackwellised values (each
variable's draw probabilities given its already drawn separator, as for every block move), its
standard error comes from the batch means of those draws, R-hat and ESS are computed as for any
chain, and the resolution floor stays. The roots of the elimination trees, whose draw
probabilities are their exact marginals at every draw, are marked exact (`gibbs.Moves.exact`):
identical batch means there are the answer, not a frozen chain.

How large: every free variable is in the one block (its connected parts are separate trees of
the block's elimination forest, a variable without free neighbours a clique of its own), or the
path is not taken. `static_blocks` orders the free graph (min-fill, stopping at the memory cap `memory.table_cap`), refuses what does not fit
in memory, and `upward` fills the cliques one at a time against a deadline, so AUTO
(`move_choice`) measures the pass within the share of the budget it grants instead of capping
the tables at a constant.

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder(); x, y = b.add_variables(2)
>>> _ = b.add_factor(FactorFunction.TABLE, [x, y], table=[0.0, float("-inf"), float("-inf"), 0.0])
>>> sb = static_blocks(b.build(), np.array([0, 1]))
>>> [blk.vars.size for blk in sb.blocks], int(sb.exact.sum())
([2], 1)
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from pdbq.errors import InferenceError
from pdbq.graph.layout import FactorGraph
from pdbq.inference.exact.elimination_order import min_fill_order
from pdbq.inference.mcmc.gibbs import ChainMoves, MoveContext, Moves
from pdbq.inference.mcmc.kernels import HARD, group_sums_into, value_dtype
from pdbq.inference.mcmc.rng import chain_states, group_states
from pdbq.inference.moves.block_kernels import BlockArrays, block_fill, pack_blocks, sample_cached
from pdbq.inference.moves.blocks import GLOBAL_ORDER_LIMIT, Block, _make_block, block_edges
from pdbq.memory import check_fits, table_cap

__all__ = ["StaticBlocks", "static_blocks", "arrange", "pass_work", "upward", "constant_draws", "draw_seconds", "static_moves",
           "describe_static"]

_RNG_OFFSET = 7_000_003  # the static draws' streams, apart from the chains' and the other moves'
_STOP_EVERY = 64  # draws between two looks at the round's deadline
PACE_SHARE = 0.05  # of the time granted to the upward pass, spent before its pace may end it


class StaticBlocks(NamedTuple):
    """Blocks over whole components of the free variables and what their draws need."""

    blocks: list  # list[Block]
    packed: BlockArrays
    psi_off: np.ndarray  # int64[n_blocks + 1]: block b's upward-pass buffer in one shared array
    exact: np.ndarray  # bool[n_vars]: block variables drawn from their exact marginal (tree roots)
    width: int  # induced width of the largest block under its own elimination order


def arrange(graph: FactorGraph, blocks: list[Block], sites: np.ndarray) -> StaticBlocks:
    """`StaticBlocks` of ``blocks`` over ``sites``; `InferenceError` when a factor of a block
    reads a variable outside it (its boundary could change), or when a free variable is in no
    block or not a sampled site (it would stay at its chain's start: a boundary that differs from
    chain to chain)."""
    if not blocks:
        raise InferenceError("static blocks need at least one block")
    sites = np.asarray(sites, dtype=np.int64)
    free = graph.evidence < 0
    held = np.zeros(graph.n_vars, dtype=bool)
    held[sites] = True
    in_block = np.zeros(graph.n_vars, dtype=bool)
    for b in blocks:
        in_block[b.vars] = True
    held &= in_block
    if (free & ~held).any():
        v = int(np.flatnonzero(free & ~held)[0])
        raise InferenceError(f"static blocks: free variable {v} is not a sampled block variable, so the blocks' "
                             "boundary is not fixed")
    pk = pack_blocks(blocks)
    outside = (pk.arg_axis < 0) & (pk.arg_var >= 0)
    if outside.any():
        raise InferenceError(f"static blocks: a block reads variable {int(pk.arg_var[outside][0])} outside it, "
                             "so its messages change from draw to draw")
    exact = np.zeros(graph.n_vars, dtype=bool)
    roots = np.diff(pk.ax_off) == 1  # a clique of its own variable alone: no separator to condition on
    exact[pk.c_var[roots]] = True
    psi_off = np.concatenate([[0], np.cumsum(pk.blk_psi)]).astype(np.int64)
    width = max(len(s) for b in blocks for s in b.shapes) - 1
    return StaticBlocks(list(blocks), pk, psi_off, exact, int(width))


def static_blocks(graph: FactorGraph, sites: np.ndarray, *, edges=None,
                  deadline: float | None = None) -> StaticBlocks | None:
    """One exact block holding every free variable (each must be a sampled site), under its own
    min-fill order, or None: when the free graph is too large for a global elimination order,
    when its elimination does not fit in memory (every clique table held at once, plus its
    messages), or when ``deadline`` comes first."""
    free = np.flatnonzero(graph.evidence < 0)
    if free.size == 0 or free.size > GLOBAL_ORDER_LIMIT:
        return None
    edges = block_edges(graph) if edges is None else edges
    card = graph.cardinality.astype(np.int64)
    stop = (lambda: time.perf_counter() >= deadline) if deadline is not None else None
    info = min_fill_order([h.scope for h in edges], card, stop_above=table_cap(2), should_stop=stop)
    if not info.complete:
        return None
    scopes_of: list[list[int]] = [[] for _ in range(graph.n_vars)]
    for k, h in enumerate(edges):
        for v in h.scope.tolist():
            scopes_of[v].append(k)
    try:
        # the cliques and their messages (each at most its clique) held for the whole run
        check_fits(2 * info.total_table_size, "static blocks (every clique table of the free graph)", copies=1)
        block = _make_block(free, edges, card, table_cap(2), None, scopes_of)
        return arrange(graph, [block], sites)
    except InferenceError:
        return None


def _work(pk: BlockArrays) -> np.ndarray:
    """Work of each clique's upward pass: its table entries × (factor arguments + factors + 1)."""
    nargs = np.diff(pk.arg_off)
    per = np.zeros(pk.c_size.shape[0])
    for c in range(pk.c_size.shape[0]):
        k0, k1 = int(pk.f_off[c]), int(pk.f_off[c + 1])
        per[c] = float(pk.c_size[c]) * (1 + (k1 - k0) + float(nargs[k0:k1].sum()))
    return per


def pass_work(sb: StaticBlocks) -> float:
    """Work units of the upward pass over every block (as `domains.block_work` counts them)."""
    return float(_work(sb.packed).sum())


def upward(sb: StaticBlocks, n_vars: int, until: float | None = None) -> np.ndarray | None:
    """The upward passes of every block into one buffer (block b at ``psi_off[b]``), clique by
    clique; None as soon as the pace so far (seconds per unit of `_work`) says the pass would end
    after ``until``, or the clock passes it. The whole pass is judged once `PACE_SHARE` of the
    time to ``until`` is spent (earlier, one preemption of the thread on a loaded machine,
    milliseconds, would make a pass of a few milliseconds look hopeless); the next clique always
    (a wide model's last clique can be most of the pass, seconds that no clock check interrupts)."""
    pk = sb.packed
    total = int(sb.psi_off[-1])
    check_fits(total, "the static blocks' upward passes", copies=1)
    psi = np.zeros(max(total, 1))
    coords = np.zeros(max(int(np.diff(pk.ax_off).max()), 1), dtype=np.int64)
    values = np.zeros(n_vars, dtype=np.uint8)  # read by no factor (every argument is inside its block)
    work = _work(pk)
    left, done = float(work.sum()), 0.0
    t0 = time.perf_counter()
    settle = None if until is None else PACE_SHARE * max(until - t0, 0.0)
    if until is not None:
        # the pace before the first clique (a complete graph's first clique is the whole pass):
        # the smallest cliques filled out of order, a millisecond's worth (each is refilled in
        # order below, which overwrites its potential and message)
        for c in np.argsort(work, kind="stable").tolist():
            b = int(np.searchsorted(pk.blk_clique, c, side="right")) - 1
            block_fill(pk, c, c + 1, values, psi[sb.psi_off[b]:sb.psi_off[b + 1]], coords, 1.0)
            done += work[c]
            if time.perf_counter() - t0 >= 1e-3 or done >= PACE_SHARE * left:
                break  # its time and work both count in the pace below
    for b in range(len(sb.blocks)):
        part = psi[sb.psi_off[b]:sb.psi_off[b + 1]]
        for c in range(int(pk.blk_clique[b]), int(pk.blk_clique[b + 1])):
            if until is not None and done > 0:
                # one clique is filled without a look at the clock: not one that the pace says ends after until
                now = time.perf_counter()
                if now + (now - t0) / done * work[c] > until:
                    return None
            block_fill(pk, c, c + 1, values, part, coords, 1.0)  # children first: the order is an elimination order
            done += work[c]
            left -= work[c]
            if until is not None:
                now = time.perf_counter()
                spent = now - t0
                if now >= until or (spent >= settle and now + spent / done * left > until):
                    return None
    return psi


def constant_draws(sb: StaticBlocks, psi: np.ndarray, n_vars: int) -> np.ndarray:
    """bool[n_vars]: block variables whose draw probabilities are the same at every draw: their
    clique potential, sliced at any separator value it allows, is one distribution (to 1e-12).
    What such a variable adds at each draw is then its exact marginal, so identical batch means
    are its answer (`gibbs.Moves.exact`), not a chain that never moved it."""
    pk = sb.packed
    out = np.zeros(n_vars, dtype=bool)
    for b in range(len(sb.blocks)):
        base = int(sb.psi_off[b])
        for c in range(int(pk.blk_clique[b]), int(pk.blk_clique[b + 1])):
            kv = int(pk.ax_card[pk.ax_off[c]])
            size = int(pk.c_size[c])
            t = psi[base + int(pk.c_psi[c]): base + int(pk.c_psi[c]) + size].reshape(kv, size // kv)
            top = t.max(axis=0)
            allowed = top > -HARD / 2  # a separator value the clique's zero entries forbid is never drawn
            if not allowed.any():
                continue
            p = np.exp(t[:, allowed] - top[allowed])
            p /= p.sum(axis=0)
            out[int(pk.c_var[c])] = bool(np.all(np.abs(p - p[:, :1]) <= 1e-12))
    return out


def _values(graph: FactorGraph) -> np.ndarray:
    """A values row of the chains' dtype (`kernels.value_dtype`), so the timed kernel is the run's."""
    return np.zeros(graph.n_vars, dtype=value_dtype(int(graph.cardinality.max())))


def draw_seconds(graph: FactorGraph, sb: StaticBlocks, psi: np.ndarray) -> float:
    """Wall seconds of one backward pass over every block on this machine now (one thread;
    enough passes timed to fill a millisecond, after one untimed call)."""
    values, probs = _values(graph), np.zeros(max(int(graph.cardinality.max()), 1))
    tix = np.full(graph.n_vars, -1, dtype=np.int32)
    sums, counts = np.zeros((1, probs.shape[0])), np.zeros(1, dtype=np.int64)
    rng = chain_states(0, 1)
    blks = np.arange(len(sb.blocks), dtype=np.int64)
    sample_cached(sb.packed, blks, psi, sb.psi_off, values, probs, rng, 1, False, tix, sums, counts)
    n = 1
    while True:
        t = time.perf_counter()
        sample_cached(sb.packed, blks, psi, sb.psi_off, values, probs, rng, n, False, tix, sums, counts)
        spent = time.perf_counter() - t
        if spent >= 1e-3 or n >= 1 << 16:
            return spent / n
        n *= 4


def static_moves(graph: FactorGraph, blocks: list[Block] | StaticBlocks, sites: np.ndarray,
                 psi: np.ndarray | None = None) -> Moves:
    """The move step for `run_gibbs` over ``sites``: every cycle one backward pass over every
    block, from upward passes made once (``psi`` from `upward`, else made here), shared by the
    chains."""
    sb = blocks if isinstance(blocks, StaticBlocks) else arrange(graph, blocks, sites)
    per_cycle = int(sum(b.size for b in sb.blocks))
    blks = np.arange(len(sb.blocks), dtype=np.int64)
    shared = psi if psi is not None else upward(sb, graph.n_vars)

    def start(ctx: MoveContext) -> ChainMoves:
        chains = len(ctx.states)
        # chain c's draws come from stream c of the whole run (`MoveContext.first`): a chain group
        # on a Dask worker draws what those chains draw in one process
        rng = group_states(ctx.seed + _RNG_OFFSET, ctx.first, chains)
        probs = np.zeros((chains, max(int(graph.cardinality.max()), 1)))

        def advance(c: int, n: int, collect: bool) -> None:
            st, acc = ctx.states[c], ctx.accs[c]
            cycles = n // per_cycle
            done = 0
            while done < cycles:
                if ctx.stop is not None and ctx.stop():
                    return
                k = min(_STOP_EVERY, cycles - done)
                sample_cached(sb.packed, blks, shared, sb.psi_off, st.values, probs[c], rng[c:c + 1], k, collect,
                              acc.target_index, acc.sums, acc.counts)
                done += k
            if graph.n_groups:  # the draws change values, not the running group sums
                group_sums_into(graph, ctx.kernel.tables, st.values, st.group_sums)

        return ChainMoves(advance)

    return Moves(unit=per_cycle, start=start, exact=sb.exact | constant_draws(sb, shared, graph.n_vars), independent=True)


def describe_static(sb: StaticBlocks, fill_seconds: float, draw: float) -> str:
    """What AUTO did with static blocks, for the answer's notes."""
    sizes = ", ".join(str(b.size) for b in sb.blocks)
    table = max(b.max_table for b in sb.blocks)
    return (f"exact block(s) of {sizes} variables hold every free variable "
            f"(induced width {sb.width}, clique tables up to {table:,} entries), so nothing they condition on is "
            f"ever sampled: their upward messages were computed once ({fill_seconds:.2g} s) and each draw is a "
            f"backward sampling pass alone ({draw * 1e3:.2g} ms): independent exact draws, estimated from the draws "
            "with batch-means errors (sampling, not exact elimination)")
