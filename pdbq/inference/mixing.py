"""Gibbs chains with moves that cross modes: replica exchange and exact block moves.

`run_mixing` takes the same inputs as `run_gibbs` plus a `MixingConfig` and returns the same
`GibbsResult` (a `MixingResult` with the ladder, swap rates and block sizes added), so answers,
estimates (Rao-Blackwellised marginals, batch-means standard errors, split R-hat, ESS) and
warnings are those of plain Gibbs.

Each chain repeats a *cycle*: for every copy (one per temperature; one copy without tempering)
whole passes of single-site updates (one pass, ``len(sites)`` updates; without blocks at least
`_MIN_CYCLE_UPDATES` updates; the numba kernels, tempered copies use the annealing kernel at a fixed temperature), then, with blocks, one exact move of every block plus
``query_passes`` more of every block that holds a target (`blocks.BlockSampler`, at the copy's
β), then, with tempering, one swap attempt between each even (or, every other cycle, odd) pair
of neighbouring copies (`tempering`). Every piece leaves its copy's (or the product's)
distribution invariant, so their composition does too. The β = 1 copy's single-site
conditionals and block draw probabilities are the Rao-Blackwellised sums.

Cycles are grouped into rounds of about `_ROUND_SECONDS`, the unit of the batch-means
estimates. ``steps`` counts updates of the β = 1 copy (a block move of m variables counts m).
Single-site passes and block moves (`block_kernels.block_pass`) are nogil numba calls: chains
run on ``threads`` threads as in `run_gibbs`; swaps are decided in Python between cycles.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pdbq.errors import InferenceError
from pdbq.graph.layout import FactorGraph, validate
from pdbq.inference.block_kernels import block_pass, pack_blocks
from pdbq.inference.blocks import Block, block_edges, build_blocks
from pdbq.inference.config import GibbsConfig, MixingConfig
from pdbq.inference.estimates import BatchStore, batch_stderr, effective_sample_size, split_rhat
from pdbq.inference.gibbs import (
    GibbsResult,
    GibbsTrace,
    RoundInfo,
    _diagnose,
    _int_array,
    _Pool,
    _safe_div,
    _threads,
    check_sites,
    initial_states,
    make_schedule,
)
from pdbq.inference.kernels import (
    Accum,
    Best,
    ChainState,
    KernelGraph,
    anneal_chain,
    group_sums_into,
    log_score_kernel,
    prepare_kernel_graph,
    run_chain,
)
from pdbq.inference.rng import chain_generators, chain_states
from pdbq.inference.tempering import adapt_ladder, initial_ladder, swap_probability

__all__ = ["run_mixing", "MixingResult", "block_set", "describe_moves"]

_ROUND_SECONDS = 0.05
_MIN_ROUNDS_FOR_TOLERANCE = 16
_FIXED_ROUNDS = 64
_MIN_CYCLE_UPDATES = 256


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


def _copy_state(src: ChainState, values: np.ndarray, gsums: np.ndarray, rng: np.ndarray) -> ChainState:
    values[:] = src.values
    return ChainState(values, gsums, rng, np.zeros(1, dtype=np.int64))


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
) -> MixingResult:
    """Estimate the marginals of ``targets`` with Gibbs chains plus the moves of ``mixing``.

    Arguments as in `run_gibbs`; ``blocks``: blocks built earlier for this graph
    (`blocks.build_blocks`), else built here when ``mixing.blocks`` asks for them. Block moves
    need every factor as a table (`potentials.hyperedges`); a graph whose factors are too large
    raises `InferenceError` naming the factor.
    """
    config = config.check()
    mixing = mixing.check()
    if kernel is None:
        validate(graph)
    t0 = time.perf_counter()
    tg = _int_array("targets", targets)
    bad = (tg < 0) | (tg >= graph.n_vars)
    if bad.any():
        raise InferenceError(f"targets: variable id {int(tg[bad][0])} is out of range (graph has {graph.n_vars})")
    sites_arr = check_sites(graph, sites)
    uniq, inverse = np.unique(tg, return_inverse=True)
    is_ev = graph.evidence[uniq] >= 0
    live = uniq[~is_ev]
    in_sites = np.zeros(graph.n_vars, dtype=bool)
    in_sites[sites_arr] = True
    missing = live[~in_sites[live]]
    if missing.size:
        raise InferenceError(f"target variable {int(missing[0])} is neither evidence nor among the sampled sites")
    sched = make_schedule(sites_arr, config.scan, selection)
    card_u = graph.cardinality[uniq].astype(np.int64)
    kmax_t = int(card_u.max()) if uniq.size else 2
    n_live = live.shape[0]
    n_sites = sites_arr.shape[0]

    if mixing.uses_blocks and blocks is None and n_sites and n_live:
        max_vars = None if mixing.blocks == "auto" else int(mixing.blocks)
        blocks = build_blocks(graph, max_table=mixing.block_table, max_vars=max_vars, targets=live,
                              edges=block_edges(graph))
    blocks = list(blocks or [])
    if blocks:
        # only variables among the sampled sites may move
        for b in blocks:
            if not in_sites[b.vars].all():
                raise InferenceError(f"block variable {int(b.vars[~in_sites[b.vars]][0])} is not among the sampled sites")
    packed = pack_blocks(blocks) if blocks else None
    tix_all = np.full(graph.n_vars, -1, dtype=np.int32)
    tix_all[live] = np.arange(n_live, dtype=np.int32)
    holds_target = [bool((tix_all[b.vars] >= 0).any()) for b in blocks]
    block_updates = sum(b.size for b in blocks) + mixing.query_passes * sum(
        b.size for b, h in zip(blocks, holds_target) if h)
    # single-site updates per copy and cycle: without blocks at least _MIN_CYCLE_UPDATES, so the
    # per-cycle overhead (a thread hand-off, the swap scores) stays small on small graphs
    site_updates = n_sites if blocks else n_sites * max(1, math.ceil(_MIN_CYCLE_UPDATES / max(n_sites, 1)))
    per_cycle = site_updates + block_updates

    fixed = config.steps is not None and config.tolerance is None and config.time_limit is None
    steps_target = config.steps
    if steps_target is None and config.tolerance is None and config.time_limit is None:
        steps_target = max(config.default_sweeps * per_cycle, 10_000)
        fixed = True
    if config.burn_in is not None:
        burn_in = config.burn_in
    elif steps_target is not None:
        burn_in = steps_target // 10
    else:
        burn_in = 20 * per_cycle
    if n_sites == 0 or n_live == 0:
        steps_target, burn_in, fixed = 0, 0, True

    chains = config.chains
    K = mixing.tempering
    betas = initial_ladder(K, mixing.beta_min)
    kg = (kernel if kernel is not None else prepare_kernel_graph(graph)) if n_sites else None
    warnings: list[str] = []
    est_live = np.zeros((n_live, kmax_t))
    se_live = np.zeros((n_live, kmax_t))
    rhat_live = np.ones(n_live)
    ess_live = np.zeros(n_live)
    trace_steps: list[int] = []
    trace_est: list[np.ndarray] = []
    trace_se: list[np.ndarray] = []
    done = 0
    burned = 0
    swap_acc = np.zeros(max(K - 1, 0))
    swap_att = np.zeros(max(K - 1, 0))

    if n_sites and n_live:
        states, _, gsums = initial_states(graph, kg, chains, config.seed, config.init == "dispersed")
        # copy k > 0 of chain c starts from chain c's state with its own random stream
        copies: list[list[ChainState]] = []
        extra_vals = np.empty((chains, max(K - 1, 0), graph.n_vars), dtype=states[0].values.dtype)
        extra_gs = np.zeros((chains, max(K - 1, 0), graph.n_groups))
        extra_rng = chain_states(config.seed + 1_000_003, max(chains * (K - 1), 1))
        for c in range(chains):
            row = [states[c]]
            for k in range(1, K):
                j = c * (K - 1) + k - 1
                row.append(_copy_state(states[c], extra_vals[c, k - 1], extra_gs[c, k - 1], extra_rng[j : j + 1]))
            copies.append(row)
        bests = [[Best(np.array([0.0, np.inf]), np.zeros(graph.n_vars, dtype=states[0].values.dtype),
                       np.array([1.0 / betas[k]])) for k in range(K)] for _ in range(chains)]
        gens = chain_generators(config.seed, chains, stream=2)
        tix = tix_all
        rsums = np.zeros((chains, n_live, kmax_t))
        rcounts = np.zeros((chains, n_live), dtype=np.int64)
        accs = [Accum(tix, rsums[c], rcounts[c]) for c in range(chains)]
        unused = Best(np.zeros(2), np.zeros(0, dtype=states[0].values.dtype), np.ones(1))
        seq = np.array(list(range(len(blocks))) + [i for i, h in enumerate(holds_target) if h] * mixing.query_passes,
                       dtype=np.int64)
        if packed is not None:
            psi_buf = np.zeros((chains, max(int(packed.blk_psi.max()), 1)))
            widest = int(np.diff(packed.ax_off).max()) if packed.ax_off.shape[0] > 1 else 1
            coords = np.zeros((chains, widest), dtype=np.int64)
            probs = np.zeros((chains, int(graph.cardinality.max())))
            block_rng = chain_states(config.seed + 2_000_029, chains)
        store = BatchStore(chains, n_live, kmax_t)
        tot_sums = np.zeros((n_live, kmax_t))
        tot_counts = np.zeros(n_live, dtype=np.int64)
        trace_every = 1
        rounds_done = 0
        cycle_no = 0
        pool = _Pool(_threads(config.threads, chains))
        if fixed:
            round_cycles = max(1, math.ceil(steps_target / _FIXED_ROUNDS / max(per_cycle, 1)))
        else:
            round_cycles = 1
        warm_up = True
        excluded = 0.0

        def chain_cycle(c: int, collect: bool) -> None:
            for k in range(K):
                st = copies[c][k]
                if graph.n_groups:
                    group_sums_into(graph, kg.tables, st.values, st.group_sums)
                if k == 0:
                    run_chain(graph, kg, st, sched, accs[c], unused, site_updates, collect)
                else:
                    bests[c][k].temp[0] = 1.0 / betas[k]
                    anneal_chain(graph, kg, st, sched, accs[c], bests[c][k], site_updates, 1.0, 1.0 / betas[k])
                if packed is not None:
                    block_pass(packed, seq, st.values, psi_buf[c], coords[c], probs[c], block_rng[c : c + 1],
                               float(betas[k]), collect and k == 0, tix, rsums[c], rcounts[c])

        def cycle(collect: bool, odd: bool, rate_acc: np.ndarray, rate_att: np.ndarray) -> None:
            pool.map(chain_cycle, [(c, collect) for c in range(chains)])
            for c in range(chains):
                rng = gens[c]
                if K > 1:
                    energies = [log_score_kernel(graph, kg.tables, copies[c][k].values) for k in range(K)]
                    for k in range(1 if odd else 0, K - 1, 2):
                        a = swap_probability(float(betas[k]), float(betas[k + 1]), energies[k], energies[k + 1])
                        rate_att[k] += 1
                        rate_acc[k] += a  # the expected acceptance: a lower-variance rate estimate
                        if rng.random() < a:
                            vk, vk1 = copies[c][k].values, copies[c][k + 1].values
                            tmp = vk.copy()
                            vk[:] = vk1
                            vk1[:] = tmp
                            energies[k], energies[k + 1] = energies[k + 1], energies[k]

        try:
            while True:
                in_burn = burned < burn_in
                unit = per_cycle
                if in_burn:
                    budget = burn_in - burned
                else:
                    budget = None if steps_target is None else steps_target - done
                    if budget is not None and budget <= 0:
                        break
                n_cyc = round_cycles
                if budget is not None:
                    n_cyc = max(1, min(n_cyc, math.ceil(budget / unit)))
                if warm_up and not fixed:
                    n_cyc = 1
                rsums[:] = 0.0
                rcounts[:] = 0
                r_acc = np.zeros(max(K - 1, 0))
                r_att = np.zeros(max(K - 1, 0))
                tr = time.perf_counter()
                for _ in range(n_cyc):
                    cycle(not in_burn, bool(cycle_no % 2), r_acc, r_att)
                    cycle_no += 1
                dt = time.perf_counter() - tr
                n = n_cyc * unit
                if warm_up:
                    warm_up = False
                    excluded = dt
                elif not fixed and dt > 0:
                    round_cycles = int(max(1, min(n_cyc * _ROUND_SECONDS / dt, 1 << 20)))
                if K > 1:
                    if in_burn:
                        with np.errstate(invalid="ignore"):
                            rates = np.where(r_att > 0, r_acc / np.maximum(r_att, 1), 0.3)
                        betas = adapt_ladder(betas, rates, floor=0.5 * mixing.beta_min)
                    else:
                        swap_acc += r_acc
                        swap_att += r_att
                elapsed = time.perf_counter() - t0 - excluded
                max_se = float("nan")
                if in_burn:
                    burned += n
                    if config.time_limit is not None and steps_target is None and elapsed > 0.2 * config.time_limit:
                        burn_in = burned
                else:
                    done += n
                    rounds_done += 1
                    store.add_round(rsums, rcounts)
                    tot_sums += rsums.sum(axis=0)
                    tot_counts += rcounts.sum(axis=0)
                    if rounds_done % trace_every == 0:
                        trace_steps.append(done)
                        trace_est.append(_safe_div(tot_sums, tot_counts))
                        trace_se.append(batch_stderr(*store.batches()))
                        if len(trace_steps) > config.trace_points:
                            trace_steps, trace_est, trace_se = trace_steps[1::2], trace_est[1::2], trace_se[1::2]
                            trace_every *= 2
                    if config.tolerance is not None or on_round is not None:
                        se = batch_stderr(*store.batches())
                        max_se = float(np.max(se)) if se.size else 0.0
                reached = (
                    not in_burn
                    and config.tolerance is not None
                    and rounds_done >= _MIN_ROUNDS_FOR_TOLERANCE
                    and 1.96 * max_se <= config.tolerance
                )
                if on_round is not None:
                    on_round(RoundInfo(steps=burned + done, burn_in=in_burn, max_stderr=max_se, elapsed=elapsed))
                if reached or (config.time_limit is not None and elapsed >= config.time_limit and done > 0):
                    break
        finally:
            pool.close()

        bs, bc = store.batches()
        if done:
            est_live = _safe_div(tot_sums, tot_counts)
            se_live = batch_stderr(bs, bc)
            rhat_live = split_rhat(bs, bc)
            ess_live = effective_sample_size(est_live, se_live, tot_counts, graph.cardinality[live])
            mask = np.arange(kmax_t)[None, :] >= graph.cardinality[live][:, None]
            se_live = np.where(mask, 0.0, se_live)
        warnings += _diagnose(live, est_live, se_live, rhat_live, tot_counts, done, config)
        if burned < (config.burn_in if config.burn_in is not None else 0):
            warnings.append(f"stopped during burn-in after {burned} of {config.burn_in} updates per chain")
        if K > 1 and swap_att.size and done:
            low = np.flatnonzero(swap_acc / np.maximum(swap_att, 1) < 0.02)
            if low.size:
                warnings.append(
                    f"tempering: swaps between copies {int(low[0])} and {int(low[0]) + 1} were accepted in under 2% "
                    "of attempts; the hot copies barely reach the β = 1 copy: add copies (tempering = K)"
                )

    T = uniq.shape[0]
    marg = np.zeros((T, kmax_t))
    se = np.zeros((T, kmax_t))
    rhat = np.ones(T)
    ess = np.full(T, np.inf)
    ev_rows = np.flatnonzero(is_ev)
    marg[ev_rows, graph.evidence[uniq[ev_rows]]] = 1.0
    live_rows = np.flatnonzero(~is_ev)
    marg[live_rows] = est_live
    se[live_rows] = se_live
    rhat[live_rows] = rhat_live
    ess[live_rows] = ess_live
    if trace_steps:
        tr_live = np.stack(trace_est)
        trc = np.broadcast_to(marg, (len(trace_steps), T, kmax_t)).copy()
        trc[:, live_rows] = tr_live
        tse = np.zeros_like(trc)
        beyond = np.arange(kmax_t)[None, :] >= graph.cardinality[live][:, None]
        tse[:, live_rows] = np.where(beyond[None], 0.0, np.stack(trace_se))
    else:
        trc = np.zeros((0, T, kmax_t))
        tse = np.zeros_like(trc)
    trace = GibbsTrace(np.asarray(trace_steps, dtype=np.int64), trc[:, inverse], tse[:, inverse])
    return MixingResult(
        targets=tg,
        cardinality=graph.cardinality[tg].astype(np.int64),
        marginals=marg[inverse],
        stderr=se[inverse],
        rhat=rhat[inverse],
        ess=ess[inverse],
        steps=int(done),
        burn_in=int(burned),
        chains=chains,
        seconds=time.perf_counter() - t0,
        warnings=tuple(warnings),
        trace=trace,
        betas=np.asarray(betas, dtype=np.float64),
        swap_rates=swap_acc / np.maximum(swap_att, 1),
        n_blocks=len(blocks),
        largest_block=max((b.size for b in blocks), default=0),
        largest_block_table=max((b.max_table for b in blocks), default=0),
    )


def block_set(graph: FactorGraph, mixing: MixingConfig, targets: np.ndarray | None = None) -> list[Block]:
    """The blocks `run_mixing` would build for ``mixing`` (a query engine keeps them with a
    cached graph)."""
    max_vars = None if mixing.blocks == "auto" else int(mixing.blocks)
    return build_blocks(graph, max_table=mixing.block_table, max_vars=max_vars, targets=targets)


def describe_moves(r: MixingResult) -> str:
    """One line on what the extra moves did, for answers and EXPLAIN."""
    parts = []
    if r.n_blocks:
        parts.append(f"{r.n_blocks} exact block(s), largest {r.largest_block} variables / "
                     f"{r.largest_block_table:,}-entry clique table")
    if r.betas is not None and r.betas.shape[0] > 1:
        ladder = ", ".join(f"{b:.3g}" for b in r.betas)
        rates = ", ".join(f"{x:.2f}" for x in r.swap_rates) if r.swap_rates is not None else ""
        parts.append(f"replica exchange over β = [{ladder}], swap rates [{rates}]")
    return "; ".join(parts) if parts else "single-site moves only"
