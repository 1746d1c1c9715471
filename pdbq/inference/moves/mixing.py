"""Gibbs chains with moves that cross modes: replica exchange and exact block moves.

`run_mixing` takes the same inputs as `run_gibbs` plus a `MixingConfig` and returns the same
`GibbsResult` (a `MixingResult` with the ladder, swap rates and block sizes added), so answers,
estimates (Rao-Blackwellised marginals, batch-means standard errors, split R-hat, ESS) and
warnings are those of plain Gibbs.

Each chain repeats a *cycle*: for every copy (one per temperature; one copy without tempering)
whole passes of single-site updates (one pass, ``len(sites)`` updates; without blocks at least
`_MIN_CYCLE_UPDATES` updates; the numba kernels, tempered copies use the annealing kernel at a fixed temperature), then, with blocks, one exact move of every block plus
``query_passes`` more of every block that holds a target (`blocks.BlockSampler`, at the copy's
β), then, with clusters, one Swendsen–Wang pass (`cluster_kernels.cluster_pass`, at the copy's β;
its relabellings add nothing to the sums: the single-site conditionals are the estimator, so the
cluster pass only speeds mixing; with clusters and neither blocks nor tempering, a cycle is
``ceil(_MIN_CYCLE_UPDATES / (2·len(sites)))`` sweep+pass pairs made in one numba call,
`cluster_kernels.sweeps_and_passes`), then, with tempering, one swap attempt between each even (or, every other cycle, odd) pair
of neighbouring copies (`tempering`; the energy difference walked variable by variable,
`energy_paths.energy_gap`), then, with jumps, one mode-jump try per copy (`jumps`: local modes
quenched from every copy every `HARVEST_EVERY` burn-in cycles, fixed after burn-in). Every piece leaves its copy's (or the product's)
distribution invariant, so their composition does too. The β = 1 copy's single-site
conditionals and block draw probabilities are the Rao-Blackwellised sums.

The cycle is the move step (`gibbs.Moves`) of `run_gibbs`'s own round loop, so rounds,
deadlines, burn-in, Rao-Blackwellised estimates, batch-means errors, R-hat, ESS, the NaN rules
and the warnings are exactly those of plain Gibbs; a cycle is the indivisible unit of a round.
``steps`` counts updates of the β = 1 copy (a block move of m variables counts m). Single-site
passes and block moves (`block_kernels.block_pass`) are nogil numba calls: chains run on
``threads`` threads as in `run_gibbs`; each chain decides its own swaps between its cycles.
The ladder and the mode pool adapt during burn-in only; a run the budget ends keeps `ADAPT_CYCLES`
cycles of explicit burn-in for them (with jumps up to `HARVEST_CYCLES`), besides the share of the
run that `run_gibbs` drops.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from pdbq.errors import InferenceError
from pdbq.graph.layout import FactorGraph, validate
from pdbq.inference.moves.block_kernels import block_pass, pack_blocks
from pdbq.inference.moves.blocks import Block, block_edges, build_blocks
from pdbq.inference.moves.cluster_kernels import ClusterGraph, cluster_pass, make_scratch, sweeps_and_passes
from pdbq.inference.moves.clusters import check_cluster_inputs, prepare_clusters
from pdbq.inference.moves.energy_paths import energy_gap
from pdbq.inference.mcmc.config import GibbsConfig, MixingConfig
from pdbq.inference.mcmc.gibbs import (
    MIN_ESS,
    ChainMoves,
    GibbsResult,
    MoveContext,
    Moves,
    RoundInfo,
    SetupCut,
    check_targets,
    run_gibbs,
)
from pdbq.inference.mcmc.kernels import (
    Best,
    ChainState,
    KernelGraph,
    anneal_chain,
    group_sums_into,
    prepare_kernel_graph,
    run_chain,
)
from pdbq.inference.moves.adaptation import Adaptation, Adapted, BurnStats, MovesTally
from pdbq.inference.moves.jumps import JumpSet, empty_jumps, jump_moves, jump_set, quench
from pdbq.inference.mcmc.rng import group_generators, group_states
from pdbq.inference.moves.tempering import initial_ladder, swap_probability
from pdbq.memory import check_bytes, check_fits

__all__ = ["run_mixing", "MixingResult", "block_set", "describe_moves", "mixing_moves", "MixingSetup", "mixing_report",
           "MovesReport", "MovesFacts", "moves_report", "pooled_moves_report", "with_moves_report"]

_MIN_CYCLE_UPDATES = 256
ADAPT_CYCLES = 20  # cycles of burn-in for the ladder in a run the budget ends
# Mode jumps: burn-in long enough for the hot copies to meet the modes (at most HARVEST_CYCLES
# cycles, fewer on large graphs: HARVEST_UPDATES updates per chain over all copies), a quench of
# every copy every HARVEST_EVERY burn-in cycles, JUMP_TRIES jump attempts per copy and cycle.
HARVEST_CYCLES = 200
HARVEST_UPDATES = 2_000_000
HARVEST_EVERY = 4
JUMP_TRIES = 1
LOW_SWAP_RATE = 0.02
# Accepted mode jumps per chain in the kept samples below which the answer is warned: a mode's
# weight is estimated from the chain's visits to it, so k switches give about k independent looks
# at the weights; as for the ESS check, fewer than MIN_ESS per chain leave the standard error
# itself uncertain. UAI DBN_11 under load (2.5 s, ~50 accepted jumps per chain): one run in ten
# missed on every variable by ~2 half-widths with nothing else warning on most of them.
MIN_JUMPS = MIN_ESS


@dataclass(frozen=True, eq=False)
class MixingResult(GibbsResult):
    """`GibbsResult` plus what the extra moves did: the final ladder (β per copy), the swap
    acceptance rate per neighbouring pair after burn-in, the number of blocks and the largest
    block's size (variables) and clique table (entries)."""

    betas: np.ndarray | None = None
    swap_rates: np.ndarray | None = None
    n_blocks: int = 0
    largest_block: int = 0
    largest_block_table: int = 0
    cluster_bonds: int = -1  # -1: no cluster moves; else the factors carrying bonds
    jump_modes: int = 0  # local modes the jumps exchange (0: no mode jumps)
    jump_pairs: int = 0
    jump_rate: float = float("nan")  # accepted share of the β = 1 copy's jump attempts after burn-in


def _copy_state(src: ChainState, values: np.ndarray, gsums: np.ndarray, rng: np.ndarray) -> ChainState:
    values[:] = src.values
    return ChainState(values, gsums, rng, np.zeros(1, dtype=np.int64))


class _Cycle:
    """The move step of `run_mixing`: per chain, K copies (copy 0 is `run_gibbs`'s chain), one
    cycle = single-site passes and block moves of every copy, then neighbour swaps."""

    def __init__(self, ctx: MoveContext, mixing: MixingConfig, packed, seq: np.ndarray, site_updates: int,
                 per_cycle: int, cg: ClusterGraph | None = None, fused: int = 0, sites: np.ndarray | None = None,
                 movable: np.ndarray | None = None):
        g, kg, states = ctx.graph, ctx.kernel, ctx.states
        chains = len(states)
        K = mixing.tempering
        self.ctx, self.mixing, self.packed, self.seq = ctx, mixing, packed, seq
        self.site_updates, self.per_cycle, self.K = site_updates, per_cycle, K
        self.cg = cg
        self.fused = fused  # > 0: plain chains with clusters, that many sweep+pass pairs in one numba call
        # the ladder and the mode pool, adapted from all chains after each burn-in round; a chain
        # group on Dask leaves that to the client (``deferred``: `pending` holds the round's rows)
        self.adaptation = Adaptation(mixing)
        self.betas = self.adaptation.betas
        self.deferred = False
        self.pending: BurnStats | None = None
        dtype = states[0].values.dtype
        # per chain: K - 1 more states, the best state of each copy, and with K > 1 the swap scratch
        vb = np.dtype(dtype).itemsize
        per_chain = ((K - 1) * (g.n_vars * vb + g.n_groups * 8) + K * g.n_vars * vb
                     + (g.n_vars * (vb + 8) + g.n_groups * 8 if K > 1 else 0))
        check_bytes(chains * per_chain, f"{chains:,} chains × {K:,} tempered copies of {g.n_vars:,} variables",
                    option="chains or tempering")
        # copy k > 0 of chain c starts from chain c's state with its own random stream
        extra_vals = np.empty((chains, max(K - 1, 0), g.n_vars), dtype=dtype)
        extra_gs = np.zeros((chains, max(K - 1, 0), g.n_groups))
        extra_rng = group_states(ctx.seed + 1_000_003, ctx.first, chains, K - 1)
        self.copies: list[list[ChainState]] = []
        for c in range(chains):
            if K > 1 and ctx.stop is not None and ctx.stop():  # the run's deadline (or a cancel) during the copies' set-up
                raise SetupCut(f"tempered copies made for {c:,} of {chains:,} chains")
            row = [states[c]]
            for k in range(1, K):
                j = c * (K - 1) + k - 1
                row.append(_copy_state(states[c], extra_vals[c, k - 1], extra_gs[c, k - 1], extra_rng[j : j + 1]))
            self.copies.append(row)
        self.bests = [[Best(np.array([0.0, np.inf]), np.zeros(g.n_vars, dtype=dtype), np.array([1.0 / self.betas[k]]))
                       for k in range(K)] for _ in range(chains)]
        self.unused = Best(np.zeros(2), np.zeros(0, dtype=dtype), np.ones(1))
        self.gens = group_generators(ctx.seed, ctx.first, chains, stream=2)
        self.cycle_no = np.zeros(chains, dtype=np.int64)  # per chain: each chain on its own thread
        if packed is not None:
            self._block_scratch(chains, packed, g)
        if cg is not None:
            self._cluster_scratch(chains, cg, states)
        if K > 1:  # scratch of `energy_gap`, per chain
            self.work = np.empty((chains, g.n_vars), dtype=dtype)
            self.work_gs = np.zeros((chains, g.n_groups))
            self.path = np.empty((chains, g.n_vars), dtype=np.int64)
        # swap statistics of the current round and of all kept rounds (row per chain)
        self.r_acc = np.zeros((chains, max(K - 1, 0)))
        self.r_att = np.zeros((chains, max(K - 1, 0)))
        self.swap_acc = np.zeros((chains, max(K - 1, 0)))
        self.swap_att = np.zeros((chains, max(K - 1, 0)))
        self._jump_state(chains, g, sites, movable)

    def _block_scratch(self, chains: int, packed, g: FactorGraph) -> None:
        widest_table = max(int(packed.blk_psi.max()), 1)
        # each chain (and tempered copy) fills its own copy of the largest block's table: a block that
        # fit on its own may not fit once per chain
        check_fits(widest_table, f"block moves for {chains} chains (one largest block table each)", copies=chains,
                   option="block_table")
        self.psi_buf = np.zeros((chains, widest_table))
        widest = int(np.diff(packed.ax_off).max()) if packed.ax_off.shape[0] > 1 else 1
        self.coords = np.zeros((chains, widest), dtype=np.int64)
        self.probs = np.zeros((chains, int(g.cardinality.max())))
        self.block_rng = group_states(self.ctx.seed + 2_000_029, self.ctx.first, chains)

    def _cluster_scratch(self, chains: int, cg: ClusterGraph, states: list) -> None:
        nv, nf, ng = cg.cardinality.shape[0], cg.function.shape[0], cg.semantics.shape[0]
        # per chain: the scratch of one cluster pass (`make_scratch`) and a flag per bond
        check_bytes(chains * (16 * nv + 24 * nf + 32 * ng + max(cg.bond_u.shape[0], 1)),
                    f"cluster moves for {chains:,} chains over {nv:,} variables and {nf:,} factors", option="chains")
        self.cl_scratch = [make_scratch(cg) for _ in range(chains)]
        self.cl_on = np.zeros((chains, max(cg.bond_u.shape[0], 1)), dtype=np.uint8)
        self.cl_rng = group_states(self.ctx.seed + 3_000_017, self.ctx.first, chains)
        check_cluster_inputs(cg, states[0].values, states[0].group_sums, self.cl_rng[0:1], 1.0)

    def _jump_state(self, chains: int, g: FactorGraph, sites, movable) -> None:
        # mode jumps: the pool fills in burn-in (per chain candidates, merged between rounds)
        self.pool = self.adaptation.pool
        self.js: JumpSet = empty_jumps(g.n_vars)
        self.sites, self.movable = sites, movable
        self.candidates: list[list[tuple[np.ndarray, float]]] = [[] for _ in range(chains)]
        if self.pool is not None:
            self.jump_rng = group_states(self.ctx.seed + 4_000_037, self.ctx.first, chains, self.K)
        self.r_jacc = np.zeros(chains)
        self.r_jatt = np.zeros(chains)
        self.jump_acc = 0.0
        self.jump_att = 0.0

    def moves(self) -> ChainMoves:
        return ChainMoves(self.advance, self.end_round)

    def advance(self, c: int, n: int, collect: bool) -> None:
        for _ in range(n // self.per_cycle):
            if not self._cycle(c, collect):
                return

    def _stop(self) -> bool:
        # a cycle is K copies' sweeps plus quenches: on a large graph with many copies it is long
        # enough that the deadline and a cancel must be checked inside it (the round is then dropped)
        return self.ctx.stop is not None and self.ctx.stop()

    def _cycle(self, c: int, collect: bool) -> bool:
        """One cycle of chain ``c``; False when it stopped early at the round's deadline."""
        g, kg, ctx = self.ctx.graph, self.ctx.kernel, self.ctx
        acc = ctx.accs[c]
        if self._stop():
            return False
        if self.fused:
            st = self.copies[c][0]
            if g.n_groups:
                group_sums_into(g, kg.tables, st.values, st.group_sums)
            sweeps_and_passes(g, kg, st, ctx.sched, acc, self.unused, self.site_updates, collect, self.cg,
                              self.cl_rng[c : c + 1], self.cl_on[c], self.cl_scratch[c], self.fused)
            self.cycle_no[c] += 1
            return True
        for k in range(self.K):
            if k and self._stop():
                return False
            st = self.copies[c][k]
            if g.n_groups:  # swaps exchange values, not group sums
                group_sums_into(g, kg.tables, st.values, st.group_sums)
            if k == 0:
                run_chain(g, kg, st, ctx.sched, acc, self.unused, self.site_updates, collect)
            else:
                self.bests[c][k].temp[0] = 1.0 / self.betas[k]
                anneal_chain(g, kg, st, ctx.sched, acc, self.bests[c][k], self.site_updates, 1.0, 1.0 / self.betas[k])
            if self.packed is not None:
                block_pass(self.packed, self.seq, st.values, self.psi_buf[c], self.coords[c], self.probs[c],
                           self.block_rng[c : c + 1], float(self.betas[k]), collect and k == 0, acc.target_index,
                           acc.sums, acc.counts)
            if self.cg is not None:
                cluster_pass(self.cg, st.values, st.group_sums, float(self.betas[k]), self.cl_rng[c : c + 1],
                             self.cl_on[c], self.cl_scratch[c])
        if self.K > 1:
            self._swaps(c)
        if self.pool is not None and not self._jumps(c, collect):
            return False
        self.cycle_no[c] += 1
        return True

    def _jumps(self, c: int, collect: bool) -> bool:
        """Harvest local modes (burn-in) and try jumps; False when stopped at the deadline."""
        g, kg = self.ctx.graph, self.ctx.kernel
        row = self.copies[c]
        if not collect and self.cycle_no[c] % HARVEST_EVERY == 0:
            for k in range(self.K):
                if self._stop():
                    return False
                self.candidates[c].append(quench(g, kg, row[k].values, self.sites))
        js = self.js
        if js.n_modes < 2:
            return True
        for k in range(self.K):
            j = c * self.K + k
            acc = jump_moves(g, kg, row[k].values, row[k].group_sums, float(self.betas[k]), js, self.jump_rng[j : j + 1],
                             JUMP_TRIES)
            if k == 0:
                self.r_jacc[c] += acc
                self.r_jatt[c] += JUMP_TRIES
        return True

    def _swaps(self, c: int) -> None:
        g, kg = self.ctx.graph, self.ctx.kernel
        row = self.copies[c]
        betas = self.betas
        rng = self.gens[c]
        for k in range(int(self.cycle_no[c] % 2), self.K - 1, 2):
            # the pairs are disjoint: each gap is read from the current states
            gap = energy_gap(g, kg, row[k].values, row[k + 1].values, self.work[c], self.work_gs[c], self.path[c])
            a = swap_probability(float(betas[k]), float(betas[k + 1]), 0.0, gap)
            self.r_att[c, k] += 1
            self.r_acc[c, k] += a  # the expected acceptance: a lower-variance rate estimate
            if rng.random() < a:
                vk, vk1 = row[k].values, row[k + 1].values
                tmp = vk.copy()
                vk[:] = vk1
                vk1[:] = tmp

    def end_round(self, phase: str) -> None:
        if phase == "burn_in":
            stats = BurnStats(self.r_acc.copy(), self.r_att.copy(), tuple(tuple(c) for c in self.candidates))
            if self.deferred:
                self.pending = stats
            else:
                self.adopt(self.adaptation.after_round(stats))
        elif phase == "kept":
            self.swap_acc += self.r_acc
            self.swap_att += self.r_att
            self.jump_acc += float(self.r_jacc.sum())
            self.jump_att += float(self.r_jatt.sum())
        self.r_acc[:] = 0.0
        self.r_att[:] = 0.0
        for cands in self.candidates:
            cands.clear()
        self.r_jacc[:] = 0.0
        self.r_jatt[:] = 0.0

    def adopt(self, adapted: Adapted) -> None:
        """Move on with an adapted ladder and mode pool (`adaptation`)."""
        self.betas = np.array(adapted.betas, dtype=np.float64)
        if self.pool is not None:
            self.pool = adapted.pool
            self.js = jump_set(self.pool.modes(), self.movable)

    def tally(self) -> MovesTally:
        return MovesTally(self.swap_acc.copy(), self.swap_att.copy(), self.jump_acc, self.jump_att)


def run_mixing(
    graph: FactorGraph,
    targets: Sequence[int] | np.ndarray,
    config: GibbsConfig = GibbsConfig(),
    mixing: MixingConfig = MixingConfig(blocks="auto"),
    *,
    sites: Sequence[int] | np.ndarray | None = None,
    selection: tuple[np.ndarray, np.ndarray] | None = None,
    on_round: Callable[[RoundInfo], None] | None = None,
    kernel: KernelGraph | None = None,
    blocks: list[Block] | None = None,
    deadline: float | None = None,
    sweeps: int = 1,
    poll: Callable[[], None] | None = None,
) -> MixingResult:
    """Estimate the marginals of ``targets`` with Gibbs chains plus the moves of ``mixing``.

    Arguments as in `run_gibbs` (``deadline`` included); ``blocks``: blocks built earlier for
    this graph (`blocks.build_blocks`), else built here when ``mixing.blocks`` asks for them.
    Block moves need every factor as a table (`potentials.hyperedges`); a graph whose factors
    are too large raises `InferenceError` naming the factor. ``sweeps``: single-site passes per
    cycle with blocks or clusters (AUTO's domain blocks set it: `domains.sweeps_per_cycle`).
    ``poll``: as in `run_gibbs`, also called inside long cycles and while choosing blocks.
    """
    setup = mixing_moves(graph, targets, config, mixing, sites=sites, kernel=kernel, blocks=blocks, deadline=deadline,
                         sweeps=sweeps, poll=poll)
    r = run_gibbs(graph, targets, config, sites=sites, selection=selection, on_round=on_round, kernel=setup.kernel,
                  deadline=deadline, moves=setup.moves, poll=poll)
    return with_moves_report(r, mixing_report(setup, r.steps))


class MixingSetup(NamedTuple):
    """The move step of a mixing run (`mixing_moves`), before any chain exists; ``made``
    collects the cycle of each chain group started with it (one per `run_gibbs` call)."""

    moves: Moves
    made: list
    mixing: MixingConfig
    n_blocks: int
    largest_block: int
    largest_block_table: int
    blocks_cut: bool
    cluster_bonds: int  # -1: no cluster moves
    kernel: KernelGraph | None


def mixing_moves(graph: FactorGraph, targets, config: GibbsConfig, mixing: MixingConfig, *, sites=None,
                 kernel: KernelGraph | None = None, blocks: list[Block] | None = None, deadline: float | None = None,
                 sweeps: int = 1, poll: Callable[[], None] | None = None) -> MixingSetup:
    """The checks of `run_mixing` and its move step (blocks built here unless given), for
    `run_gibbs(..., moves=setup.moves, kernel=setup.kernel)`."""
    config = config.check()
    mixing = mixing.check()
    if kernel is None:
        validate(graph)
    _, sites_arr, _, _, _, live = check_targets(graph, targets, sites)
    n_live = live.shape[0]
    n_sites = sites_arr.shape[0]
    if kernel is None and n_sites:
        kernel = prepare_kernel_graph(graph)  # validated above: run_gibbs need not validate again
    in_sites = np.zeros(graph.n_vars, dtype=bool)
    in_sites[sites_arr] = True

    if mixing.uses_blocks and blocks is None and n_sites and n_live:
        max_vars = None if mixing.blocks == "auto" else int(mixing.blocks)
        # choosing blocks is part of the run: its time limit ends that too (leaving the rest of
        # the time to the chains is `run_gibbs`'s, from its own start)
        until = deadline
        if config.time_limit is not None:
            mine = time.perf_counter() + config.time_limit
            until = mine if until is None else min(until, mine)
        blocks = build_blocks(graph, max_table=mixing.block_table, max_vars=max_vars, targets=live,
                              edges=block_edges(graph), deadline=until, poll=poll)
    blocks_cut = bool(getattr(blocks, "cut", False))
    blocks = list(blocks or [])
    for b in blocks:  # only variables among the sampled sites may move
        if not in_sites[b.vars].all():
            raise InferenceError(f"block variable {int(b.vars[~in_sites[b.vars]][0])} is not among the sampled sites")
    packed = pack_blocks(blocks) if blocks else None
    cg = None
    if mixing.clusters and n_sites and n_live:
        cg = prepare_clusters(graph, sites_arr, tables=kernel.tables)
    tix = np.full(graph.n_vars, -1, dtype=np.int32)
    tix[live] = np.arange(n_live, dtype=np.int32)
    holds_target = [bool((tix[b.vars] >= 0).any()) for b in blocks]
    block_updates = sum(b.size for b in blocks) + mixing.query_passes * sum(
        b.size for b, h in zip(blocks, holds_target) if h)
    # single-site updates per copy and cycle: without blocks at least _MIN_CYCLE_UPDATES, so the
    # per-cycle overhead (a thread hand-off, the swap scores) stays small on small graphs
    # (a cluster pass counts one update per sampled site)
    if isinstance(sweeps, bool) or not isinstance(sweeps, (int, np.integer)) or sweeps < 1:
        raise InferenceError(f"mixing: sweeps per cycle must be a positive integer, got {sweeps!r}")
    site_updates = n_sites * int(sweeps) if blocks or cg is not None else n_sites * max(1, math.ceil(_MIN_CYCLE_UPDATES / max(n_sites, 1)))
    per_cycle = max(site_updates + block_updates + (n_sites if cg is not None else 0), 1)
    fused = 0
    if cg is not None and not blocks and mixing.tempering == 1 and not mixing.jumps:
        # clusters alone: several sweep+pass pairs per cycle on small graphs (one numba call)
        fused = max(1, math.ceil(_MIN_CYCLE_UPDATES / max(2 * n_sites, 1)))
        per_cycle = fused * 2 * n_sites
    seq = np.array(list(range(len(blocks))) + [i for i, h in enumerate(holds_target) if h] * mixing.query_passes,
                   dtype=np.int64)
    made: list[_Cycle] = []

    def start(ctx: MoveContext) -> ChainMoves:
        cyc = _Cycle(ctx, mixing, packed, seq, site_updates, per_cycle, cg, fused, sites_arr, in_sites)
        made.append(cyc)
        return cyc.moves()

    adapt = ADAPT_CYCLES if mixing.tempering > 1 else 0
    if mixing.jumps:
        work = per_cycle * mixing.tempering  # updates per chain of one cycle, all copies
        adapt = max(adapt, min(HARVEST_CYCLES, max(HARVEST_UPDATES // work, HARVEST_EVERY)))
    hook = Moves(unit=per_cycle, burn_in=adapt * per_cycle, start=start)
    return MixingSetup(hook, made, mixing, len(blocks), max((b.size for b in blocks), default=0),
                       max((b.max_table for b in blocks), default=0), blocks_cut,
                       int(cg.bond_u.shape[0]) if cg is not None else -1, kernel)


class MovesReport(NamedTuple):
    """What a mixing run's moves did (the `MixingResult` fields beyond `GibbsResult`'s) and the
    warnings they call for. ``facts`` and ``tally``: what they were computed from (chain groups'
    reports pool into the whole run's, `pooled_moves_report`)."""

    warnings: tuple[str, ...]
    fields: dict
    facts: MovesFacts | None = None
    tally: MovesTally | None = None


class MovesFacts(NamedTuple):
    """What a report says besides the tallies: the same in every chain group of a run."""

    tempering: int
    jumps: bool
    betas: np.ndarray
    n_blocks: int
    largest_block: int
    largest_block_table: int
    blocks_cut: bool
    cluster_bonds: int
    jump_modes: int  # modes in the pool
    jump_set_modes: int  # modes the jumps exchange (< 2: no jump was tried)
    jump_pairs: int


def mixing_report(setup: MixingSetup, steps: int) -> MovesReport:
    """The report of ``setup``'s moves after a run that kept ``steps`` updates per chain."""
    mixing, made = setup.mixing, setup.made
    K = mixing.tempering
    cyc = made[0] if made else None
    facts = MovesFacts(K, bool(mixing.jumps), cyc.betas if cyc else initial_ladder(K, mixing.beta_min), setup.n_blocks,
                       setup.largest_block, setup.largest_block_table, setup.blocks_cut, setup.cluster_bonds,
                       len(cyc.pool) if cyc and cyc.pool is not None else 0, cyc.js.n_modes if cyc else 0,
                       cyc.js.n_pairs if cyc else 0)
    tally = cyc.tally() if cyc else MovesTally(np.zeros((0, max(K - 1, 0))), np.zeros((0, max(K - 1, 0))), 0.0, 0.0)
    return moves_report(facts, tally, steps)


def pooled_moves_report(reports: list[MovesReport], steps: int) -> MovesReport:
    """The whole run's report from its chain groups' (in chain order): their tallies together."""
    return moves_report(reports[0].facts, MovesTally.concat([r.tally for r in reports]), steps)


def moves_report(facts: MovesFacts, tally: MovesTally, steps: int) -> MovesReport:
    """The report of moves described by ``facts`` that did ``tally`` in ``steps`` kept updates per chain."""
    K = facts.tempering
    rates = tally.swap_rates()
    warnings = []
    if K > 1 and rates.size and steps > 0:
        low = np.flatnonzero(rates < LOW_SWAP_RATE)
        if low.size:
            warnings.append(
                f"tempering: swaps between copies {int(low[0])} and {int(low[0]) + 1} were accepted in under "
                f"{LOW_SWAP_RATE:.0%} of attempts; the hot copies barely reach the β = 1 copy: add copies (tempering = K)"
            )
    if facts.jumps and facts.jump_set_modes < 2 and steps > 0:
        warnings.append(f"jumps: burn-in met {facts.jump_modes} distinct local mode(s), fewer than the 2 a jump needs, "
                        "so no jump was tried (the jumps are chosen in burn-in only: give burn_in > 0)")
    if facts.jumps and facts.jump_set_modes >= 2 and steps > 0:
        # jumps need tempering, so the tally has a swap row per chain
        per_chain = tally.jump_acc / max(tally.swap_acc.shape[0], 1)
        if per_chain < MIN_JUMPS:
            warnings.append(f"jumps: {per_chain:,.0f} accepted mode jump(s) per chain in the kept samples (under "
                            f"{MIN_JUMPS:g}): the weights of the modes, and their standard errors, rest on too few "
                            "switches between modes; run longer (time_limit)")
    if facts.blocks_cut:
        warnings.append(f"blocks: the time limit stopped choosing blocks after {facts.n_blocks}: fewer block moves "
                        "than the graph allows; raise time_limit")
    if facts.cluster_bonds == 0:
        warnings.append("clusters: no factor can carry a bond (docs/inference.md, \"Cluster moves\"), so the "
                        "cluster pass only relabels single variables")
    fields = dict(
        betas=np.asarray(facts.betas, dtype=np.float64),
        swap_rates=rates,
        n_blocks=facts.n_blocks,
        largest_block=facts.largest_block,
        largest_block_table=facts.largest_block_table,
        cluster_bonds=facts.cluster_bonds,
        jump_modes=facts.jump_modes,
        jump_pairs=facts.jump_pairs,
        jump_rate=tally.jump_rate(),
    )
    return MovesReport(tuple(warnings), fields, facts, tally)


def with_moves_report(r: GibbsResult, report: MovesReport) -> MixingResult:
    """``r`` as a `MixingResult` carrying ``report`` (its warnings after ``r``'s, once each)."""
    base = {f.name: getattr(r, f.name) for f in dataclasses.fields(GibbsResult)}
    base["warnings"] = tuple(r.warnings) + tuple(w for w in report.warnings if w not in r.warnings)
    return MixingResult(**base, **report.fields)


def block_set(graph: FactorGraph, mixing: MixingConfig, targets: np.ndarray | None = None,
              deadline: float | None = None, poll: Callable[[], None] | None = None) -> list[Block]:
    """The blocks `run_mixing` would build for ``mixing`` (a query engine keeps them with a
    cached graph, unless the ``deadline`` cut the choice short: `blocks.BlockList.cut`);
    ``poll`` as in `run_gibbs`."""
    max_vars = None if mixing.blocks == "auto" else int(mixing.blocks)
    return build_blocks(graph, max_table=mixing.block_table, max_vars=max_vars, targets=targets, deadline=deadline,
                        poll=poll)


def describe_moves(r: MixingResult) -> str:
    """One line on what the extra moves did, for answers and EXPLAIN."""
    parts = []
    if r.n_blocks:
        parts.append(f"{r.n_blocks} exact block(s), largest {r.largest_block} variables / "
                     f"{r.largest_block_table:,}-entry clique table")
    if r.cluster_bonds >= 0:
        parts.append(f"Swendsen–Wang cluster moves over {r.cluster_bonds:,} bond(s)")
    if r.jump_modes:
        rate = f", accepted in {r.jump_rate:.1%} of tries" if np.isfinite(r.jump_rate) else ""
        parts.append(f"mode jumps between {r.jump_modes} local modes ({r.jump_pairs} pairs){rate}")
    if r.betas is not None and r.betas.shape[0] > 1:
        ladder = ", ".join(f"{b:.3g}" for b in r.betas)
        rates = ", ".join(f"{x:.2f}" for x in r.swap_rates) if r.swap_rates is not None else ""
        parts.append(f"replica exchange over β = [{ladder}], swap rates [{rates}]")
    return "; ".join(parts) if parts else "single-site moves only"
