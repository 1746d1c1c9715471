"""Pilot-driven domain blocks: exact block moves around the patch of variables that a plain
pilot shows mixing slowest.

On an ordered model with fields (a ferromagnetic grid whose unary terms pin most of it, e.g.
UAI 2014 Segmentation_11) plain chains pass their R-hat check yet err: a connected patch of
variables (a *domain*) flips as one with small probability, and single-site moves cross the
boundary barrier a handful of times per run. The pilot's effective sample sizes show it: the
domain's variables have an ESS hundreds of times below the median, all of them together.

`slow_variables` reads that from the pilot (targets whose ESS is below `SLOW_ESS_RATIO` × the
pilot's kept draws, i.e. sweeps times chains: under 1% of what independent draws would give;
slowest first; nothing when fewer than two). `domain_blocks`
grows exact blocks inside that set, slowest variable first and then the slowest neighbour
(`blocks.build_blocks` with ``within``/``priority``), each within the block table budget, so
a block holds the domain rather than a generic cut of the graph; each block is then drawn
exactly from its conditional given the rest (`block_kernels`), which crosses the barrier in one
move. The blocks are fixed once the pilot is over (its samples are burn-in and are not used),
so the chain that follows is a fixed cycle of Gibbs sweeps and exact block draws, each of which
leaves the target distribution invariant.

`whole_domain_blocks` instead looks for blocks that each hold one connected patch of the slow
set whole (the table budget doubled until they do, within `WHOLE_TABLE_CAP`): drawn with its exact marginals as the
estimator (`domain_chains`), nothing outside it carries the domain's state between draws.

A block draw costs many single-site sweeps, so `sweeps_per_cycle` balances them: from a work
model (table entries touched per draw against factor visits per sweep; `DRAW_COST` calibrated
on this repository's kernels) it picks the single-site sweeps per cycle that leave the block
draws about `BLOCK_TIME_SHARE` of the time. Measured on Segmentation_11 (92-variable block,
1024-entry tables, equal time): the domain's standard error was lowest with the draws at about
80% of the time (30 sweeps a draw); 10 sweeps (93%) and 100 sweeps (56%) were 1.4× worse,
300 sweeps 1.3×.

>>> import numpy as np
>>> slow_variables(np.arange(4), np.array([5.0, 9e4, 1e5, 4.0]), np.full(4, -1), draws=1e5).tolist()
[3, 0]
"""

from __future__ import annotations

import math
import time

import numpy as np

from pdbq.graph.layout import FactorGraph
from pdbq.inference.moves.block_kernels import pack_blocks
from pdbq.inference.moves.blocks import Block, block_edges, build_blocks, scope_components
from pdbq.inference.mcmc.kernels import KernelGraph

__all__ = ["SLOW_ESS_RATIO", "BLOCK_TIME_SHARE", "DRAW_COST", "slow_variables", "domain_blocks",
           "sweeps_per_cycle", "describe_domains", "whole_domain_blocks", "slow_patches", "exact_sweeps", "cycle_cost",
           "describe_whole_domain", "split_patches", "split_patch_warning"]

SLOW_ESS_RATIO = 0.01
BLOCK_TIME_SHARE = 0.75
# seconds of one block-table entry visit (per factor argument) over one single-site factor visit,
# measured on Segmentation_11 (blocks of 36–95 variables, 256–4096-entry tables: 0.35–0.53 on one
# thread; about 0.6 with 4 chains on 2 busy cores)
DRAW_COST = 0.5
MAX_SWEEPS = 10_000
MIN_FRESH = 0.5  # share of a further domain block's variables that no earlier one holds
# Blocks holding each patch of the slow set whole, estimated by their exact marginals (`domain_chains`): its
# table may grow to WHOLE_TABLE_CAP entries while the budget still affords MIN_CYCLES draws per
# chain. Measured on Segmentation_11 (the 100-variable slow set, 8,192-entry tables under its own
# order, 7.5 s, loaded machine): with the draws at ~98% of the time the largest 95% half-width
# was 0.005, at ~94% 0.006, at ~85% 0.010 (sweeps only refresh the fast rest of the graph).
WHOLE_TABLE_CAP = 2**16
EXACT_TIME_SHARE = 0.95
EXACT_DRAW_FACTOR = 2.0  # a draw plus its downward pass (exact marginals) against a draw alone
# kept draws per chain the budget must afford (AUTO times one draw): one per batch of the error
# estimates (32–64 batches per chain). Fewer than 100 kept (the ESS check) or a resolution floor
# 3.84 / draws over the tolerance warn; the measured errors at 50–110 kept draws were still a
# third to a half of plain domain blocks' (docs/benchmarks.md)
MIN_CYCLES = 32


def slow_variables(targets: np.ndarray, ess: np.ndarray, evidence: np.ndarray, draws: float) -> np.ndarray:
    """Free targets whose pilot ESS is below `SLOW_ESS_RATIO` × ``draws`` (the pilot's kept
    sweeps summed over its chains: what a target's ESS would be were its draws independent),
    slowest first; empty when fewer than two are that slow (a domain is a patch)."""
    targets = np.asarray(targets, dtype=np.int64)
    ess = np.asarray(ess, dtype=np.float64)
    free = evidence[targets] < 0
    # an ESS of 0 is an estimate that never varied (a conditional pinned near 0 or 1): no signal
    ok = free & ~np.isnan(ess) & (ess > 0)
    cut = SLOW_ESS_RATIO * float(draws)
    slow = np.flatnonzero(ok & (ess < cut))
    if slow.size < 2:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(ess[slow], kind="stable")
    out = targets[slow[order]]
    _, first = np.unique(out, return_index=True)  # a target listed twice is one variable
    out = out[np.sort(first)]
    return out if out.size >= 2 else np.zeros(0, dtype=np.int64)


def domain_blocks(graph: FactorGraph, slow: np.ndarray, ess_of: np.ndarray, *, max_table: int,
                  edges=None, deadline: float | None = None) -> list[Block]:
    """Exact blocks inside the ``slow`` variables (slowest first), grown slowest neighbour first;
    ``ess_of``: pilot ESS per graph variable (only entries of ``slow`` are read). ``deadline``:
    as in `blocks.build_blocks` (the blocks grown by then)."""
    slow = np.asarray(slow, dtype=np.int64)
    if slow.size < 2:
        return []
    within = np.zeros(graph.n_vars, dtype=bool)
    within[slow] = True
    prio = np.zeros(graph.n_vars)
    prio[slow] = -np.asarray(ess_of, dtype=np.float64)[slow]
    grown = build_blocks(graph, max_table=max_table, targets=slow, edges=edges, within=within, priority=prio,
                         deadline=deadline)
    # a further block must bring mostly new variables: overlapping near-copies of the first
    # would double the draw cost for the same domain
    kept, seen = [], np.zeros(graph.n_vars, dtype=bool)
    for b in grown:
        if not kept or np.count_nonzero(~seen[b.vars]) >= MIN_FRESH * b.size:
            kept.append(b)
            seen[b.vars] = True
    return kept


def block_work(blocks: list[Block]) -> float:
    """Work units of one draw of every block: per clique, its table entries × (factor arguments
    + factors + 1 for the message)."""
    if not blocks:
        return 0.0
    ba = pack_blocks(blocks)
    nargs = np.diff(ba.arg_off)
    per_clique = np.zeros(ba.c_size.shape[0])
    for c in range(ba.c_size.shape[0]):
        k0, k1 = int(ba.f_off[c]), int(ba.f_off[c + 1])
        per_clique[c] = float(ba.c_size[c]) * (1 + (k1 - k0) + float(nargs[k0:k1].sum()))
    return float(per_clique.sum())


def sweep_work(kernel: KernelGraph, sites: np.ndarray) -> float:
    """Work units of one single-site sweep over ``sites`` (factor visits plus one per update)."""
    sites = np.asarray(sites, dtype=np.int64)
    visits = (np.diff(kernel.bb_off)[sites] + np.diff(kernel.pt_off)[sites] + np.diff(kernel.gen_off)[sites])
    return float(visits.sum() + sites.shape[0])


def sweeps_per_cycle(blocks: list[Block], kernel: KernelGraph, sites: np.ndarray, draws_per_cycle: float = 1.0) -> int:
    """Single-site sweeps per cycle of ``draws_per_cycle`` draws of every block such that the
    draws take about `BLOCK_TIME_SHARE` of the time (at least 1)."""
    sw = sweep_work(kernel, sites)
    if sw <= 0 or not blocks:
        return 1
    ratio = DRAW_COST * draws_per_cycle * block_work(blocks) / sw
    return int(min(MAX_SWEEPS, max(1, math.ceil(ratio * (1 - BLOCK_TIME_SHARE) / BLOCK_TIME_SHARE))))


def describe_domains(blocks: list[Block], n_slow: int, cut: float, sweeps: int) -> str:
    sizes = ", ".join(str(b.size) for b in blocks)
    return (f"{n_slow} variable(s) mix slowly (pilot ESS under {cut:.3g}, {SLOW_ESS_RATIO:g} × its kept draws): "
            f"exact domain block(s) of {sizes} variables around them, drawn once per {sweeps} single-site sweep(s)")


def slow_patches(graph: FactorGraph, slow: np.ndarray, edges=None) -> list[np.ndarray]:
    """The connected parts (two or more variables each) of the ``slow`` variables under the
    factors among them; a lone slow variable has no patch to draw with it."""
    slow = np.asarray(slow, dtype=np.int64)
    edges = block_edges(graph) if edges is None else edges
    in_slow = np.zeros(graph.n_vars, dtype=bool)
    in_slow[slow] = True
    return scope_components(graph.n_vars, (h.scope[in_slow[h.scope]] for h in edges), slow)


def whole_domain_blocks(graph: FactorGraph, slow: np.ndarray, ess_of: np.ndarray, *, base_table: int,
                        affordable, edges=None, deadline: float | None = None) -> list[Block] | None:
    """Exact blocks each holding one connected patch of the ``slow`` variables whole
    (`slow_patches`), grown as `domain_blocks` does with the table budget doubled from
    ``base_table`` until every patch is inside one block (at most `WHOLE_TABLE_CAP` entries), or
    None: when no such blocks fit, or when ``affordable(blocks)`` says the budget cannot pay for
    enough draws of the smallest ones."""
    slow = np.asarray(slow, dtype=np.int64)
    edges = block_edges(graph) if edges is None else edges
    patches = slow_patches(graph, slow, edges)
    if not patches:
        return None
    table = max(int(base_table), 2)
    while table <= WHOLE_TABLE_CAP:
        if deadline is not None and time.perf_counter() >= deadline:
            return None
        grown = domain_blocks(graph, slow, ess_of, max_table=table, edges=edges, deadline=deadline)
        holders = [next((b for b in grown if b.size >= p.size and np.isin(p, b.vars).all()), None) for p in patches]
        if all(h is not None for h in holders):
            kept = list({id(h): h for h in holders}.values())
            return kept if affordable(kept) else None
        table *= 2
    return None


def split_patches(graph: FactorGraph, slow: np.ndarray, blocks: list[Block], edges=None) -> tuple[int, int]:
    """(patches of the ``slow`` variables no single block of ``blocks`` holds whole, the slow
    variables of those patches outside every block)."""
    held = np.zeros(graph.n_vars, dtype=bool)
    for b in blocks:
        held[b.vars] = True
    split, outside = 0, 0
    for p in slow_patches(graph, slow, block_edges(graph) if edges is None else edges):
        if not any(b.size >= p.size and np.isin(p, b.vars).all() for b in blocks):
            split += 1
            outside += int(np.count_nonzero(~held[p]))
    return split, outside


def split_patch_warning(n_split: int, n_outside: int) -> str | None:
    """The warning for an ordered model's domain blocks that do not hold a slow patch whole.

    Such a patch flips as one (its pilot ESS is low because its variables move together), so a
    block over part of it is drawn given the rest of the patch, which holds the patch's state:
    the chains can keep one state of it for the whole run. They then agree with each other, their
    batch means are steady, and split R-hat and ESS pass while the other state's probability is
    missing (a 10×10 ferromagnetic grid, a 96-variable block of its 100: off by 0.058 with a
    standard error of 0.0002)."""
    if n_split == 0:
        return None
    return (f"partial domain blocks: {n_split} slowly mixing patch(es) that flip as one were too large to draw as "
            f"one exact block ({n_outside} of their variables lie outside every block and hold the patch's state), so "
            "a state of the patch the chains never reached may carry probability these answers miss, which the chains' "
            "agreement cannot show")


def exact_sweeps(blocks: list[Block], kernel: KernelGraph, sites: np.ndarray) -> int:
    """Single-site sweeps per draw of every block of ``blocks`` with their exact marginals such
    that the draws take about `EXACT_TIME_SHARE` of the time (at least 1)."""
    sw = sweep_work(kernel, sites)
    if sw <= 0:
        return 1
    ratio = DRAW_COST * EXACT_DRAW_FACTOR * block_work(blocks) / sw
    return int(min(MAX_SWEEPS, max(1, math.ceil(ratio * (1 - EXACT_TIME_SHARE) / EXACT_TIME_SHARE))))


def cycle_cost(blocks: list[Block], kernel: KernelGraph, sites: np.ndarray, sweeps: int) -> float:
    """One cycle (``sweeps`` sweeps and one exact draw of every block with its marginals), in sweeps."""
    sw = sweep_work(kernel, sites)
    return float(sweeps) + (DRAW_COST * EXACT_DRAW_FACTOR * block_work(blocks) / sw if sw > 0 else 0.0)


def describe_whole_domain(blocks: list[Block], n_slow: int, cut: float, sweeps: int) -> str:
    sizes = ", ".join(str(b.size) for b in blocks)
    table = max(b.max_table for b in blocks)
    return (f"{n_slow} variable(s) mix slowly (pilot ESS under {cut:.3g}, {SLOW_ESS_RATIO:g} × its kept draws): "
            f"exact block(s) of {sizes} variables (clique tables up to {table:,} entries) hold each slow patch whole, "
            f"drawn once per {sweeps} single-site sweep(s), their variables estimated by their exact marginals given "
            "the rest")