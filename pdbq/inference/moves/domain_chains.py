"""The chains of AUTO's domain blocks: single-site sweeps, then an exact draw of every domain
block, with each block variable estimated from its block's exact conditional marginals.

A slow domain (`domains`) is a patch that flips as one: its variables are all in one state or
all in the other. Single-site conditionals of its variables then follow the patch's current
state (close to 0 or to 1), and so do the draw probabilities of a block draw for every variable
drawn after the first few; the Rao-Blackwellised sums of plain block moves (`mixing`) therefore
carry the whole Bernoulli variance of the patch's state at every update. Here a block variable's
sum gets, once per cycle, its exact marginal given everything outside the block (a downward
pass after the block's upward pass, `cutset_kernels.draw_block`): the patch's probability of
being in either state given its surroundings, which varies far less from draw to draw. Its
single-site updates between draws still move the chain (they let the fringe follow the block)
but add nothing to its sums. Variables outside every block keep their single-site conditionals.

Both estimators are unbiased at stationarity (each cycle's pieces leave the target invariant,
so the state before every block draw is a draw from it, and ``E[p(x_v | x_outside)] = p(x_v)``);
which has the smaller error is measured, not assumed (docs/benchmarks.md). A block variable is
*not* an exact target for the error estimates (`gibbs.Moves.exact`): its marginal given the
outside is exact, but the outside configurations the draws have not met can hold mass, so the
resolution floor (docs/inference.md, "Standard errors and coverage") applies with n its draws.
Measured on Segmentation_11 without the floor: 41 draws per chain all met the same, most
likely outside configuration, the batch means agreed to 1e-18 and the estimates were off by
1e-3 with a standard error of 0.

`domain_moves` builds the `gibbs.Moves` hook: ``run_gibbs(..., moves=domain_moves(...))``.
One cycle is ``sweeps`` passes over the sites plus one draw of every block; ``unit`` counts the
passes' updates plus one per block variable, as `mixing` does.
"""

from __future__ import annotations

import time

import numpy as np

from pdbq.errors import InferenceError
from pdbq.graph.layout import FactorGraph
from pdbq.inference.mcmc.gibbs import ChainMoves, MoveContext, Moves
from pdbq.inference.mcmc.kernels import Accum, Best, KernelGraph, group_sums_into, run_chain, value_dtype
from pdbq.inference.mcmc.rng import chain_states, group_states
from pdbq.inference.moves.block_kernels import pack_blocks
from pdbq.inference.moves.blocks import Block
from pdbq.inference.moves.cutset_kernels import draw_block
from pdbq.inference.moves.static_blocks import static_moves
from pdbq.memory import check_fits

__all__ = ["domain_moves", "draw_seconds"]

_RNG_OFFSET = 5_000_011  # the block draws' streams, apart from the chains' and the other moves'


class _Scratch:
    """Per-chain buffers of the block draws."""

    def __init__(self, graph: FactorGraph, blocks: list[Block], chains: int):
        self.packed = pk = pack_blocks(blocks)
        widest_table = max(int(pk.blk_psi.max()), 1)
        check_fits(widest_table, f"domain blocks for {chains} chains (one largest block table each)", copies=chains,
                   option="block_table")
        self.psi = np.zeros((chains, widest_table))
        widest = int(np.diff(pk.ax_off).max()) if pk.ax_off.shape[0] > 1 else 1
        self.coords = np.zeros((chains, max(widest, 1)), dtype=np.int64)
        msg = max((int(pk.c_size[c] // pk.ax_card[pk.ax_off[c]]) for c in range(pk.c_var.shape[0])), default=1)
        self.tmp = np.zeros((chains, 2 * max(msg, 1)))
        self.probs = np.zeros((chains, max(int(graph.cardinality.max()), 1)))


def draw_seconds(graph: FactorGraph, blocks: list[Block], kernel: KernelGraph) -> float:
    """Wall seconds of one draw of every block of ``blocks`` with their exact marginals on this
    machine now (one thread; the second of two passes, so a first call's dispatch is not counted)."""
    sc = _Scratch(graph, blocks, 1)
    values = np.zeros(graph.n_vars, dtype=value_dtype(kernel.max_card))
    tix = np.full(graph.n_vars, -1, dtype=np.int32)
    for b in blocks:
        tix[b.vars] = 0  # every marginal computed as in the run (into one scratch row)
    sums = np.zeros((1, sc.probs.shape[1]))
    counts = np.zeros(1, dtype=np.int64)
    rng = chain_states(0, 1)
    spent = 0.0
    for _ in range(2):
        t = time.perf_counter()
        for b in range(len(blocks)):
            draw_block(sc.packed, b, values, sc.psi[0], sc.coords[0], sc.tmp[0], sc.probs[0], rng[0:1], True, tix,
                       sums, counts)
        spent = time.perf_counter() - t
    return spent


class _DomainCycle:
    """Per-chain scratch and the cycle of `domain_moves` (each chain touches only its row)."""

    def __init__(self, ctx: MoveContext, blocks: list[Block], site_updates: int, per_cycle: int):
        g = ctx.graph
        chains = len(ctx.states)
        self.ctx, self.site_updates, self.per_cycle = ctx, site_updates, per_cycle
        self.sc = _Scratch(g, blocks, chains)
        self.n_blocks = len(blocks)
        # chain c's draws come from stream c of the whole run (`MoveContext.first`): a chain group
        # on a Dask worker draws what those chains draw in one process
        self.rng = group_states(ctx.seed + _RNG_OFFSET, ctx.first, chains)
        self.unused = Best(np.zeros(2), np.zeros(0, dtype=ctx.states[0].values.dtype), np.ones(1))
        in_block = np.zeros(g.n_vars, dtype=bool)
        for b in blocks:
            in_block[b.vars] = True
        # the sweeps add the conditionals of the variables outside every block only
        self.sweep_accs = []
        for acc in ctx.accs:
            tix = acc.target_index.copy()
            tix[in_block] = -1
            self.sweep_accs.append(Accum(tix, acc.sums, acc.counts))

    def advance(self, c: int, n: int, collect: bool) -> None:
        ctx = self.ctx
        g, kg = ctx.graph, ctx.kernel
        st, acc = ctx.states[c], ctx.accs[c]
        for _ in range(n // self.per_cycle):
            if ctx.stop is not None and ctx.stop():
                return
            if g.n_groups:  # the block draws change values, not the running group sums
                group_sums_into(g, kg.tables, st.values, st.group_sums)
            run_chain(g, kg, st, ctx.sched, self.sweep_accs[c], self.unused, self.site_updates, collect)
            sc = self.sc
            for b in range(self.n_blocks):
                draw_block(sc.packed, b, st.values, sc.psi[c], sc.coords[c], sc.tmp[c], sc.probs[c], self.rng[c : c + 1],
                           collect, acc.target_index, acc.sums, acc.counts)


def domain_moves(graph: FactorGraph, blocks: list[Block], sites: np.ndarray, sweeps: int) -> Moves:
    """The move step of the module docstring for `run_gibbs` over ``sites`` (which must hold
    every block variable); ``sweeps`` single-site passes per cycle. ``sweeps = 0``: AUTO's static
    blocks (`static_blocks`: each holds a whole connected part of the free variables, drawn by
    backward sampling from messages computed once), the same call on chain groups elsewhere."""
    if not blocks:
        raise InferenceError("domain moves need at least one block")
    if isinstance(sweeps, bool) or not isinstance(sweeps, (int, np.integer)) or sweeps < 0:
        raise InferenceError(f"domain moves: sweeps per cycle must be a non-negative integer, got {sweeps!r}")
    if sweeps == 0:
        return static_moves(graph, blocks, sites)
    sites = np.asarray(sites, dtype=np.int64)
    in_sites = np.zeros(graph.n_vars, dtype=bool)
    in_sites[sites] = True
    for b in blocks:
        if not in_sites[b.vars].all():
            raise InferenceError(f"block variable {int(b.vars[~in_sites[b.vars]][0])} is not among the sampled sites")
    site_updates = int(sites.shape[0]) * int(sweeps)
    per_cycle = site_updates + int(sum(b.size for b in blocks))

    def start(ctx: MoveContext) -> ChainMoves:
        return ChainMoves(_DomainCycle(ctx, blocks, site_updates, per_cycle).advance)

    return Moves(unit=per_cycle, start=start)
