"""Inference on a query's pruned graph: method choice, run lengths, and the answers for x_q.

`answer(graph, query, method, options, ...)` takes the graph the query-driven grounding built
(x_q ∪ x_l free, boundary evidence clamped) and the graph ids of the query variables, and
returns their marginals, standard errors and MAP values with everything the diagnostics need.
No DuckDB here.

Run lengths (docs/queries.md): with ``steps``/``sweeps`` and neither ``tolerance`` nor
``time_limit`` the chains do exactly that many updates after a burn-in of steps/10; otherwise
they stop at the first of ``tolerance`` (default `DEFAULT_TOLERANCE`), ``time_limit`` (default
`DEFAULT_TIME_LIMIT`, counted from the start of the query, planning included) and
``steps``/``sweeps`` when given (no other cap: a tolerance not yet met while time remains keeps
the chains going), and the leading quarter of what ran is dropped as burn-in (unless
``burn_in`` is given).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import os
import secrets
import time
import warnings as _warnings
from collections.abc import Callable
from typing import Any
from dataclasses import dataclass, field

import numpy as np

from pdbq.arrays import unique
from pdbq.answers.decide import decision_stop
from pdbq.answers.estimates import Marginals
from pdbq.answers.hedge import CALIBRATION, HedgeRecord, plan_exact
from pdbq.answers.option_scope import refuse_inert
from pdbq.answers.trust import contention_warning, cross_check_warning, lead_warning
from pdbq.answers.warmup import tiers_for, warm_up
from pdbq.errors import InferenceError, OptionError, TimeLimitError
from pdbq.graph.cache import Memo
from pdbq.graph.layout import FactorGraph, validate
from pdbq.inference.exact.auto import AutoConfig, Decision, choose_method, exact_hint
from pdbq.inference.mcmc.config import GibbsConfig, MixingConfig
from pdbq.inference.exact.elimination import exact_map, exact_marginals
from pdbq.inference.exact.local_forcing import forced_within
from pdbq.inference.exact.loopy_bp import loopy_marginals
from pdbq.inference.exact.hard import HARD_WEIGHT, HardSplit, split_hard
from pdbq.inference.exact.stopping import PRIOR_SECONDS_PER_ENTRY
from pdbq.inference.mcmc.gibbs import RoundInfo, run_gibbs
from pdbq.inference.query_aware.influence import edge_influence
from pdbq.inference.mcmc.kernels import prepare_kernel_graph
from pdbq.inference.moves.hard_ties import hard_tie_blocks
from pdbq.inference.moves.cutset import cutset_for, cutset_plan, cutset_result, describe_cutset, run_cutset
from pdbq.inference.moves.mixing import block_set, describe_moves, run_mixing
from pdbq.inference.moves.move_choice import choose_moves, run_auto
from pdbq.inference.query_aware.selection import SelectionConfig, selection_distribution
from pdbq.language.nodes import Method

__all__ = ["EngineAnswer", "answer", "auto_decision", "resolve_seed", "run_length_text", "DEFAULT_TOLERANCE",
           "DEFAULT_TIME_LIMIT"]

DEFAULT_TOLERANCE = 0.01  # 95% half-width of every query estimate
DEFAULT_TIME_LIMIT = 5.0  # seconds of sampling
# Selection tables kept per cached graph (one per query-variable set and selection config; about
# 32 bytes per site each): the most recently made ones, so many different questions on one large
# model do not evict the model's graph.
_KEEP_SELECTIONS = 4


@dataclass
class EngineAnswer:
    """What `answer` computed. ``result`` rows follow the ``query`` ids given."""

    result: Marginals
    method: str  # EXACT | QAM | GIBBS | ANNEAL | EVIDENCE
    reason: str
    decision: Decision | None = None
    steps: int = 0  # updates per chain after burn-in
    burn_in: int = 0
    chains: int = 0
    seed: int | None = None
    seconds: float = 0.0
    rhat_max: float | None = None
    ess_min: float | None = None
    max_stderr: float | None = None
    selection: str | None = None
    query_share: float | None = None  # selection probability mass on the query variables
    warnings: list[str] = field(default_factory=list)
    trace: object | None = None
    dask: dict | None = None  # where the chains ran when on Dask (`pdbq.distributed.chains.DaskRun`)
    hedge: dict | None = None  # AUTO's exact try and its budget split (`pdbq.answers.hedge.HedgeRecord`)
    cpu_seconds: float = 0.0  # process CPU seconds of this call (every thread)
    sampling_seconds: float | None = None  # wall seconds of the sampling run
    sampling_cpu_seconds: float | None = None  # process CPU seconds of the sampling run


def resolve_seed(seed: int | None) -> int:
    """The user's seed, or fresh entropy (reported in the diagnostics so a run can be repeated)."""
    return int(seed) if seed is not None else secrets.randbelow(2**31)


# Graphs up to this many free variables always get an elimination order (milliseconds), so a
# sampled answer can name the exact_budget that would give the exact one.
_ORDER_ALWAYS = 2_000


def auto_decision(
    graph: FactorGraph, max_table: int, config: AutoConfig = AutoConfig(), max_seconds: float | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Decision:
    """`choose_method` with the budget ``max_seconds`` (the ``exact_budget`` option; default
    ``config.max_seconds``), after a cheap bound: elimination costs at least ``us_per_clique`` per
    free variable, so a large graph (over `_ORDER_ALWAYS` free variables) is MCMC without
    computing an elimination order. ``should_stop``: as in `choose_method`."""
    budget = config.max_seconds if max_seconds is None else float(max_seconds)
    free = int(np.count_nonzero(graph.evidence < 0))
    floor = free * config.us_per_clique * 1e-6
    if floor > budget and free > _ORDER_ALWAYS:
        return Decision("MCMC", f"MCMC: {free:,} free variables; exact elimination would take at least "
                        f"{floor:.1f} s (exact_budget {budget:g} s)", -1, -1, floor)
    return choose_method(graph, max_table=max_table, max_seconds=budget, config=config, should_stop=should_stop)


def _run_lengths(options, n_sites: int) -> tuple[int | None, int | None, float | None, float | None, bool]:
    """(steps, burn_in, tolerance, time_limit, fixed) for GibbsConfig."""
    unit = 1 if options.steps is not None else max(n_sites, 1)
    if options.steps is not None:
        steps = int(options.steps)
    elif options.sweeps is not None:
        steps = max(1, int(math.ceil(options.sweeps * n_sites)))
    else:
        steps = None
    burn_in = None if options.burn_in is None else int(round(options.burn_in * unit))
    if options.fixed_length:
        return steps, burn_in, None, None, True
    tol = options.tolerance if options.tolerance is not None else DEFAULT_TOLERANCE
    limit = options.time_limit if options.time_limit is not None else DEFAULT_TIME_LIMIT
    # No step cap of our own: while time remains and the tolerance is unmet, the chains go on
    # (an explicit steps/sweeps still caps the run, and the answer then says so)
    return steps, burn_in, tol, limit, False


#: Updates per second no chain here reaches (the fastest kernels measured make 20-45 million;
#: this is 20 times more): what bounds the updates a time-limited run can make.
UPDATES_PER_SECOND_CEILING = 1e9


def run_horizon(options, n_sites: int) -> tuple[float, str]:
    """The most updates per chain a run with ``options`` can make, and how that is known: its
    fixed length (burn-in included), its steps cap, or its time limit at a rate no kernel
    reaches. EXPLAIN compares the worst-case mixing bound with it."""
    steps, burn_in, _, limit, fixed = _run_lengths(options, n_sites)
    if steps is not None:
        burn = burn_in if burn_in is not None else (steps // 10 if fixed else 0)
        return float(steps + burn), f"the {steps + burn:,} updates per chain this run makes at most"
    return (float(limit) * UPDATES_PER_SECOND_CEILING,
            f"what {limit:g} s (time_limit) allows even at {UPDATES_PER_SECOND_CEILING:.0e} updates per second")


def run_length_text(options, n_sites: int) -> tuple[str, str]:
    """EXPLAIN's rows for a sampling method: (run length, burn-in)."""
    from pdbq.inference.mcmc.gibbs import BURN_IN_SHARE  # noqa: PLC0415

    steps, burn_in, tol, limit, fixed = _run_lengths(options, n_sites)
    if fixed:
        b = burn_in if burn_in is not None else steps // 10
        return (f"exactly {steps:,} updates per chain after burn-in, {options.chains} chain(s) (reproducible: same seed, "
                "same answer)",
                f"{b:,} updates per chain" + (" (steps/10)" if burn_in is None else " (burn_in)"))
    cap = f", {steps:,} updates per chain" if steps is not None else ""
    run = (f"stops at the first of: tolerance {tol:g} (every answer within it, 95% jointly, with R-hat ≤ 1.1), time_limit {limit:g} s "
           f"(whole query, planning included){cap}; {options.chains} chain(s)")
    if burn_in is None:
        b = (f"the first {BURN_IN_SHARE:.0%} of the updates the run makes (a share of the budget, dropped in whole "
             "batches)")
    else:
        b = f"{burn_in:,} updates per chain (burn_in; the time limit may end the run before it is over)"
    return run, b


def _memoised(memo: Memo | None, key: tuple, make: Callable[[], object], keep: int | None = None) -> Any:
    return make() if memo is None else memo.get_or_make(key, make, keep=keep)


def _exact_marginals(graph: FactorGraph, query: np.ndarray, free_q: np.ndarray, max_table: int, memo: Memo | None,
                     deadline: float | None = None, poll: Callable[[], None] | None = None):
    """Exact marginals of the query variables: every marginal of the graph when kept from an
    earlier query (or when the query asks for every free variable), else only the query's
    (one upward pass plus the paths to their cliques; kept for the few latest queries).
    ``deadline``/``poll``: as in `exact_marginals` (an interrupted elimination keeps nothing)."""
    whole = ("exact", max_table)
    if memo is not None and memo.get(whole) is not None:
        return memo.get(whole)
    if free_q.size >= int(np.count_nonzero(graph.evidence < 0)):
        return _memoised(memo, whole, lambda: exact_marginals(graph, max_table=max_table, deadline=deadline, poll=poll))
    wanted = unique(query)  # evidence variables among them get their point masses
    return _memoised(memo, ("exact_of", max_table, wanted.tobytes()),
                     lambda: exact_marginals(graph, max_table=max_table, variables=wanted, deadline=deadline,
                                             poll=poll), keep=8)


def _anneal(graph: FactorGraph, query: np.ndarray, options, seed: int, sites: np.ndarray, on_round=None,
            begun: float | None = None):
    try:
        module = importlib.import_module("pdbq.inference.mcmc.anneal")
    except ModuleNotFoundError:
        raise InferenceError("USING ANNEAL needs pdbq.inference.mcmc.anneal, which this build does not have; "
                             "use USING EXACT for an exact MAP on small graphs") from None
    from pdbq.inference.mcmc.config import AnnealConfig  # noqa: PLC0415

    limit = options.time_limit
    if limit is not None and begun is not None:
        # the query's limit counts from its start (planning included): annealing gets what is left
        limit = max(limit - (time.perf_counter() - begun), 1e-3)
    kw = {"temperature": options.temperature, "chains": options.chains, "threads": options.threads, "seed": seed,
          "time_limit": limit}
    if options.cooling is not None:
        kw["cooling"] = options.cooling
    if options.steps is not None:
        kw["steps"] = int(options.steps)
    elif options.sweeps is not None:
        kw["steps"] = max(1, int(math.ceil(options.sweeps * max(sites.size, 1))))
    config = AnnealConfig(**kw)
    return module.anneal_map(graph, config, sites=sites, on_round=on_round)


def dask_chains(options, explicit: frozenset[str]) -> int:
    """Chains of a run on Dask: as asked, else at least one per worker."""
    if "chains" in explicit or options.workers is None:
        return options.chains
    return max(options.chains, options.workers)


def dask_groups(options, chains: int) -> int:
    """Chain groups (Dask tasks) of a run on Dask: ``workers``, else (a ``scheduler`` alone) one
    per chain, so the cluster's workers share them whatever their number."""
    return options.workers if options.workers is not None else chains


def dask_plan(options, method: Method, explicit: frozenset[str]) -> str:
    """`OptionError` unless the query's chains can run on Dask (whole chains per worker, moves
    that run in chain groups); else one line on how they will run."""
    if method in (Method.EXACT, Method.ANNEAL):  # refuse_inert has said so already
        raise OptionError(f"USING {method.value} does not run on Dask workers")
    chains = dask_chains(options, explicit)
    workers = dask_groups(options, chains)
    if workers > chains:
        raise OptionError(f"workers = {workers} needs at least as many chains, got chains = {chains}: each worker "
                          "runs whole chains")
    where = f"the Dask scheduler at {options.scheduler}" if options.scheduler else "an in-process Dask cluster"
    if options.fixed_length and options.tempering == 1 and not options.jumps:
        how = "each group run to its end in one task"
    elif options.fixed_length:  # the ladder and mode pool adapt from all chains between burn-in rounds
        how = ("the groups kept on their workers, the ladder and mode pool adapted here from all chains after each "
               "burn-in round")
    else:
        how = ("the groups kept on their workers, their rounds booked here and the stopping rule (tolerance, "
               "time_limit) evaluated on all chains between segments")
    auto = ("; AUTO's pilot and its moves (cutset sampling included) run there too"
            if method is Method.AUTO and not ({"tempering", "blocks", "clusters", "jumps"} & explicit) else "")
    return (f"{chains} chains in {workers} group(s) on {where}, the graph shipped once per worker, {how}, estimates "
            f"pooled over all chains as in this process{auto}")


def dask_runner(options, deadline: float | None, on_round, poll: Callable[[], None] | None = None) -> Callable:
    """``run(graph, query, config, mixing=None, blocks=None, sweeps=1, cutset=None, domain=False, **kw)
    -> (result, what, dask record)``: chains on Dask (`pdbq.distributed.chains.run_chains`) with the query's workers or
    scheduler; ``kw``: ``sites``, ``selection``, ``kernel``, ``deadline`` (default the query's);
    ``poll()`` is called while the workers run (a cancelled statement raises from it)."""
    from pdbq.distributed.chains import run_chains  # noqa: PLC0415 - Dask only when asked
    from pdbq.inference.moves.mixing import MixingResult  # noqa: PLC0415

    def run(graph, query, config: GibbsConfig, mixing: MixingConfig | None = None, blocks=None, sweeps: int = 1,
            cutset=None, domain: bool = False, **kw):
        until = kw.pop("deadline", deadline)
        kw.pop("on_round", None)
        targets, sites, selection, plan = query, kw["sites"], kw.get("selection"), None
        if cutset is not None:  # the chains sample every free variable; targets the cutset answers exactly are merged here
            plan = cutset_plan(graph, query, cutset, kernel=kw.get("kernel"))
            targets, sites, selection = plan.sampled, np.flatnonzero(graph.evidence < 0).astype(np.int32), None
        r, parts, rec = run_chains(graph, targets, config, workers=dask_groups(options, config.chains),
                                   mixing=mixing if mixing is not None and mixing.active else None, blocks=blocks,
                                   sweeps=sweeps, scheduler=options.scheduler, deadline=until, on_round=on_round,
                                   sites=sites, selection=selection, kernel=kw.get("kernel"), cutset=cutset,
                                   poll=poll, domain=domain)
        if rec.rounds == 1 and on_round is not None:  # one task per group: the run's one report (and a pending cancel)
            se = r.stderr[np.isfinite(r.stderr)]
            on_round(RoundInfo(r.steps + r.burn_in, False, float(se.max()) if se.size else float("nan"), rec.wall))
        why = rec.describe()
        if plan is not None:
            r = cutset_result(graph, plan, r)
            why += "; " + describe_cutset(r)
        elif isinstance(r, MixingResult):  # what the moves did over all chains (`mixing.pooled_moves_report`)
            why += "; " + describe_moves(r)
        return r, why, rec.as_dict()

    return run


def _method_choice(graph: FactorGraph, method: Method, options, memo: Memo | None,
                   time_left: float | None = None, poll: Callable[[], None] | None = None
                   ) -> tuple[Method, Decision | None, str]:
    """(the method to run, AUTO's decision or None, the reason shown to the user).
    AUTO's order search may take `DECIDE_SHARE` of ``time_left`` (`pdbq.answers.decide`: seconds on
    tens of thousands of variables); cut short, AUTO samples in the rest (a decision not kept)."""
    if method is Method.AUTO:
        budget = options.exact_budget
        key = ("auto", options.max_table, budget)
        decision = memo.get(key) if memo is not None else None
        if decision is None:
            deadline = None if time_left is None else time.perf_counter() + time_left
            decision = auto_decision(graph, options.max_table, max_seconds=budget,
                                     should_stop=decision_stop(deadline, poll))
            if memo is not None and not decision.cut:
                memo.put(key, decision)
        chosen = Method.EXACT if decision.method == "EXACT" else Method.QAM
        # whether an EXACT decision fits the time left at the CPU this query gets is `answer`'s
        # hedge (`pdbq.answers.hedge`)
        return chosen, decision, "AUTO: " + decision.reason
    if method is Method.EXACT:
        return method, None, "USING EXACT"
    if method is Method.ANNEAL:
        return method, None, "USING ANNEAL"
    return method, None, f"USING {method.value}"


def _exact_answer(graph: FactorGraph, query: np.ndarray, free_q: np.ndarray, options, memo: Memo | None,
                  need_marginals: bool, need_map: bool, kmax: int, deadline: float | None = None,
                  poll: Callable[[], None] | None = None):
    """(marginals, stderr, MAP values) by exact elimination; `TimeLimitError` from the
    elimination once ``deadline`` passes."""
    marg = se = None
    if need_marginals:
        exact = _exact_marginals(graph, query, free_q, options.max_table, memo, deadline, poll)
        marg = exact.marginals[query]
        se = np.zeros_like(marg)
    mapv = None
    if need_map:
        best = _memoised(memo, ("exact_map", options.max_table),
                         lambda: exact_map(graph, max_table=options.max_table, deadline=deadline, poll=poll))
        mapv = best.values[query].astype(np.int64)
    if marg is None:
        marg = np.zeros((query.size, kmax))
        se = np.zeros_like(marg)
    return marg, se, mapv


def _exact_kept(graph: FactorGraph, query: np.ndarray, free_q: np.ndarray, options, memo: Memo | None,
                need_marginals: bool, need_map: bool) -> bool:
    """Whether the memo already holds what `_exact_answer` would compute (its time then says
    nothing about the machine's speed)."""
    if memo is None:
        return False
    mt = options.max_table
    have_marg = (memo.get(("exact", mt)) is not None
                 or memo.get(("exact_of", mt, unique(query).tobytes())) is not None)
    return (have_marg or not need_marginals) and (not need_map or memo.get(("exact_map", mt)) is not None)


def _seconds_per_entry(plan) -> float:
    """Seconds per clique-table entry the calibrated cost model expects at the plan's CPU share."""
    return AutoConfig().ns_per_entry * 1e-9 * plan.factor / (plan.share if plan.share else 1.0)


def _share_text(cpu: float, wall: float) -> str:
    return f"{cpu / wall:.0%} of a core" if wall > 1e-3 else "no measurable time"


def _exact_timeout(e: TimeLimitError, limit: float, elapsed: float) -> TimeLimitError:
    """USING EXACT's error when elimination was stopped at the query's deadline: what was cut and
    the options that give an answer (AUTO samples the rest of its budget instead)."""
    return TimeLimitError(f"time_limit {limit:g} s ran out during exact elimination ({elapsed:.2f} s into the query): "
                          f"{e}; nothing was answered and nothing stored changed; raise time_limit, or use USING QAM "
                          "(sampling stops at the deadline and flags what it could not settle)", stage=e.stage,
                          elapsed=elapsed)


def _qam_selection(graph: FactorGraph, free_q: np.ndarray, sites: np.ndarray, options, memo: Memo | None):
    """QAM's site-selection alias table ``(prob, alias)`` and its probability mass on the query."""
    sel_config = SelectionConfig(selection=options.selection, epsilon=options.epsilon, power=options.power)

    def make_selection():
        influence = None
        if memo is not None and sel_config.selection in ("trail", "distance"):
            # the edge influences depend on the graph only: every query variable shares them
            influence = memo.get_or_make(("edge_influence", sel_config.max_table),
                                         lambda: edge_influence(graph, max_table=sel_config.max_table))
        return selection_distribution(graph, free_q, sites, sel_config, influence=influence)

    s = _memoised(memo, ("selection", free_q.tobytes(), sel_config), make_selection, keep=_KEEP_SELECTIONS)
    is_q = np.isin(sites, free_q)
    return (s.prob, s.alias), float(s.p[is_q].sum())


def _sample(graph: FactorGraph, query: np.ndarray, free_q: np.ndarray, method: Method, options, config: GibbsConfig,
            explicit: frozenset[str], memo: Memo | None, deadline: float | None, run_kw: dict,
            on_dask: bool = False, hard_ties: bool = False) -> tuple[object, str, dict | None]:
    """The sampling run the options and AUTO ask for: chains on Dask, cutset conditioning, AUTO's
    moves, the mixing moves written in the query, exact blocks over what hard constraints tie
    (``hard_ties``), or plain chains. Returns the result, what it did and the Dask run's record
    (None in this process)."""
    graph_kernel = run_kw["kernel"]
    mixing = MixingConfig(tempering=options.tempering, blocks=options.blocks, block_table=options.block_table,
                          clusters=options.clusters, jumps=options.jumps).check()

    def blocks_for(m: MixingConfig):
        key = ("blocks", free_q.tobytes(), m.blocks, m.block_table)
        kept = memo.get(key) if memo is not None else None
        if kept is not None:
            return kept
        made = block_set(graph, m, free_q, deadline, run_kw["poll"])
        if memo is not None and not getattr(made, "cut", False):  # a choice the clock cut is not kept
            memo.put(key, made, keep=_KEEP_SELECTIONS)
        return made

    if on_dask:
        return _sample_on_dask(graph, query, method, options, config, explicit, memo, deadline, run_kw, mixing,
                               blocks_for)
    if options.cutset is not False and not (method is Method.AUTO and "cutset" not in explicit):
        # every free variable of the query's graph is sampled or answered exactly: no sites, no selection
        cs, cut = _cutset(graph, options, memo, deadline, run_kw["poll"])
        if cs is None:
            r = run_gibbs(graph, query, config, deadline=deadline, **run_kw)
            return dataclasses.replace(r, warnings=(*r.warnings, cut)), "single-site Gibbs (no cutset in time)", None
        r = run_cutset(graph, query, config, cutset=cs, on_round=run_kw["on_round"], kernel=graph_kernel,
                       deadline=deadline, poll=run_kw["poll"])
        return r, describe_cutset(r), None
    if method is Method.AUTO and not ({"tempering", "blocks", "clusters", "jumps"} & explicit):
        moves = _moves(graph, options, memo, deadline, run_kw["poll"])
        if "cutset" in explicit:  # cutset = false: AUTO may not pick it either
            moves = moves.without_cutset()
        r, why = run_auto(graph, query, config, moves, blocks=blocks_for, deadline=deadline, **run_kw)
        return r, why, None
    if mixing.active:
        r = run_mixing(graph, query, config, mixing, blocks=blocks_for(mixing) if mixing.uses_blocks else None,
                       deadline=deadline, **run_kw)
        return r, describe_moves(r), None
    if hard_ties:
        key = ("hard ties", options.block_table)
        made, left = (memo.get(key) if memo is not None else None) or hard_tie_blocks(
            graph, max_table=options.block_table, deadline=deadline)
        if memo is not None and not made.cut:  # a choice the clock cut is not kept
            memo.put(key, (made, left), keep=_KEEP_SELECTIONS)
        if len(made):
            r = run_mixing(graph, query, config, MixingConfig(blocks="auto", block_table=options.block_table).check(),
                           blocks=list(made), deadline=deadline, **run_kw)
            return r, HARD_TIES + describe_moves(r) + (f"; {left} tied variable(s) in no block" if left else ""), None
    return run_gibbs(graph, query, config, deadline=deadline, **run_kw), "", None


HARD_TIES = "exact blocks over what hard constraints tie: "


def _sample_on_dask(graph, query, method: Method, options, config: GibbsConfig, explicit: frozenset[str],
                    memo: Memo | None, deadline: float | None, run_kw: dict, mixing: MixingConfig, blocks_for):
    """`_sample` with the chains on Dask: cutset sampling, AUTO's pilot and chosen moves, or the
    query's own moves, run by chain groups on the workers."""
    run = dask_runner(options, deadline, run_kw["on_round"], run_kw["poll"])
    where = dict(sites=run_kw["sites"], selection=run_kw["selection"], kernel=run_kw["kernel"])
    if options.cutset is not False and not (method is Method.AUTO and "cutset" not in explicit):
        cs, cut = _cutset(graph, options, memo, deadline, run_kw["poll"])
        if cs is None:
            r, why, rec = run(graph, query, config, **where)
            return dataclasses.replace(r, warnings=(*r.warnings, cut)), why, rec
        return run(graph, query, config, cutset=cs, **where)
    if method is Method.AUTO and not ({"tempering", "blocks", "clusters", "jumps"} & explicit):
        moves = _moves(graph, options, memo, deadline, run_kw["poll"])
        if "cutset" in explicit:  # cutset = false: AUTO may not pick it either
            moves = moves.without_cutset()
        records: list[tuple[str, dict]] = []

        def chains(g, targets, cfg, **kw):
            r, why, rec = run(g, targets, cfg, **kw)
            records.append((why, rec))
            return r

        r, why = run_auto(graph, query, config, moves, blocks=blocks_for, deadline=deadline, chains=chains, **where)
        return r, why + "; " + "; then ".join(w for w, _ in records), merge_dask_records([rec for _, rec in records])
    return run(graph, query, config, mixing, blocks_for(mixing) if mixing.active and mixing.uses_blocks else None,
               **where)


def _moves(graph: FactorGraph, options, memo: Memo | None, deadline: float | None, poll: Callable[[], None] | None):
    """AUTO's moves (`choose_moves`), its search for a small cutset given `DECIDE_SHARE` of the time
    left (`pdbq.answers.decide`); a decision the clock cut is not kept."""
    key = ("moves", options.block_table)
    kept = memo.get(key) if memo is not None else None
    if kept is not None:
        return kept
    made = choose_moves(graph, block_table=options.block_table, should_stop=decision_stop(deadline, poll))
    if memo is not None and not made.cut:
        memo.put(key, made)
    return made


def _cutset(graph: FactorGraph, options, memo: Memo | None, deadline: float | None,
            poll: Callable[[], None] | None) -> tuple[object | None, str]:
    """(the ``cutset`` option's cutset, "") or, when the time limit stopped its choice (its
    order searches may take `DECIDE_SHARE` of the time left, `pdbq.answers.decide`: minutes on a
    large grid), (None, the warning: single-site Gibbs samples in the rest). A cut choice is not kept."""
    key = ("cutset", options.cutset, options.cutset_table)
    kept = memo.get(key) if memo is not None else None
    if kept is not None:
        return kept, ""
    try:
        cs = cutset_for(graph, options.cutset, options.cutset_table, should_stop=decision_stop(deadline, poll))
    except TimeLimitError as e:
        return None, (f"cutset: {e}; single-site Gibbs sampled in the time left instead, without the cutset's "
                      "exact remainder: raise time_limit for cutset sampling")
    if memo is not None:
        memo.put(key, cs, keep=_KEEP_SELECTIONS)
    return cs, ""


def merge_dask_records(records: list[dict]) -> dict:
    """One record of several Dask runs of one answer (AUTO's pilot, then its moves): counts and
    times summed, the last run's place."""
    out = dict(records[-1])
    for k in ("rounds", "wall", "compute_max", "compute_sum", "scatter", "reruns", "bytes_scattered",
              "bytes_gathered", "start", "replayed", "overhead"):
        out[k] = sum(r.get(k, 0) for r in records)
    out["late"] = any(r.get("late") for r in records)
    out["runs"] = len(records)
    return out


def _sampled_answer(out: EngineAnswer, r, live: np.ndarray) -> EngineAnswer:
    """Fill in the convergence summary (largest R-hat, smallest ESS, largest stderr) of a sampled answer."""
    rhat = r.rhat[live]
    ess = r.ess[live]
    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices: no estimate
        out.rhat_max = float(np.nanmax(rhat)) if rhat.size and not np.all(np.isnan(rhat)) else None
        out.ess_min = float(np.nanmin(ess)) if ess.size and not np.all(np.isnan(ess)) else None
        out.max_stderr = float(np.nanmax(r.stderr[live])) if live.any() else 0.0
    return out


def answer(
    graph: FactorGraph,
    query: np.ndarray,
    method: Method,
    options,
    *,
    need_marginals: bool = True,
    need_map: bool = False,
    explicit: frozenset[str] = frozenset(),
    on_round: Callable[[RoundInfo, int | None, float | None], None] | None = None,
    memo: Memo | None = None,
    started: float | None = None,
    poll: Callable[[], None] | None = None,
) -> EngineAnswer:
    """Answer the query variables ``query`` (graph ids) of ``graph`` with ``method``.

    ``options``: `pdbq.planning.options.QueryOptions`; ``explicit``: the option names the user wrote
    (a non-uniform ``selection`` with GIBBS is refused). ``on_round(info, total, tolerance)`` is
    called after each sampling round. ``memo``: the graph's entry in the query-graph cache
    (`pdbq.graph.cache.Memo`): AUTO's decision, exact results, the selection table and the kernel
    arrays are kept there, so the same query on the same graph again only samples. ``started``:
    the `time.perf_counter()` instant the query began (planning included); ``time_limit`` counts
    from it, so the limit bounds the whole query (default: from this call). ``poll()``: called
    about every 50 ms while sampling (a cancelled statement raises from it and ends the run).
    """
    t0 = time.perf_counter()
    begun = t0 if started is None else started  # the query's clock: its time limit counts from here
    refuse_inert(method, explicit)
    # hard constraints apart from soft weights: every method below reads the rescaled weights
    hard: HardSplit = _memoised(memo, ("hard",), lambda: split_hard(graph))
    graph = hard.graph
    on_dask = options.workers is not None or options.scheduler is not None
    if on_dask:
        dask_plan(options, method, explicit)
    query = np.asarray(query, dtype=np.int64)
    card = graph.cardinality[query].astype(np.int64)
    kmax = int(graph.cardinality.max()) if graph.n_vars else 2
    free_q = unique(query[graph.evidence[query] < 0])
    sites = np.flatnonzero(graph.evidence < 0).astype(np.int32)
    seed = resolve_seed(options.seed)
    _refuse_options(method, options, explicit, need_marginals)
    cpu0 = time.process_time()

    def done(marg, se, mapv, **kw) -> EngineAnswer:
        res = Marginals(query, card, marg, se, mapv)
        out = EngineAnswer(result=res, seed=seed if kw.get("method") in ("QAM", "GIBBS", "ANNEAL") else None, **kw)
        out.seconds = time.perf_counter() - t0
        out.cpu_seconds = time.process_time() - cpu0
        if kw.get("method") != "EVIDENCE":
            out.warnings.extend(hard_warnings(hard, "EXACT" if certified else kw.get("method"), crossed))
        return out

    certified = False  # an ANNEAL world checked against the exact MAP
    crossed = False  # exact blocks hold every variable hard constraints tie (chains cross them)
    if free_q.size == 0:
        marg = np.zeros((query.size, kmax))
        marg[np.arange(query.size), graph.evidence[query]] = 1.0
        mapv = graph.evidence[query].astype(np.int64) if need_map else None
        return done(marg, np.zeros_like(marg), mapv, method="EVIDENCE",
                    reason="every query variable is evidence: point masses, nothing sampled")

    time_left = None if options.time_limit is None else begun + options.time_limit - time.perf_counter()
    chosen, decision, reason = _method_choice(graph, method, options, memo, time_left, poll)
    chosen, reason, hedge, limit_sampling, exact = _try_exact(
        graph, query, free_q, sites, method, chosen, decision, reason, options, memo, begun, on_dask, need_marginals,
        need_map, kmax, poll)
    if exact is not None:
        return done(*exact, method="EXACT", reason=reason, decision=decision,
                    hedge=None if hedge is None else hedge.as_dict())
    if chosen is Method.ANNEAL:
        r, values, reason, certified = _anneal_answer(graph, query, options, seed, sites, on_round, begun, hard, memo,
                                                      poll, reason)
        marg = np.zeros((query.size, kmax))
        warnings = list(getattr(r, "warnings", ()) or ())
        return done(marg, np.zeros_like(marg), values[query], method="ANNEAL", reason=reason, decision=decision,
                    steps=int(getattr(r, "steps", 0) or 0), chains=options.chains, warnings=warnings)

    steps, burn_in, tol, limit, fixed = _run_lengths(options, sites.size)
    if limit_sampling is not None and not fixed:
        limit = limit_sampling
    # the sampling kernels, AUTO's and the options' mixing moves, and values past uint8, have
    # kernels (signatures) of their own: compiled (first use on a machine) or loaded now, before
    # the selection and the chains use them, and that time is added to the deadline
    warmed = [w for w in (warm_up(t) for t in ("sampling",) + tiers_for(graph, _uses_moves(method, options)))
              if w is not None]
    sel = share = None
    selection_name = "uniform"
    if chosen is Method.QAM:
        selection_name = options.selection
        sel, share = _qam_selection(graph, free_q, sites, options, memo)
    # A budget-governed run (time limit / tolerance) drops a share of itself as burn-in (gibbs.py);
    # GIBBS sweeps the sites systematically (a fixed order: no random draw per update, and the
    # sites' data are read in memory order).
    config = GibbsConfig(
        steps=steps, burn_in=burn_in, chains=dask_chains(options, explicit) if on_dask else options.chains,
        threads=options.threads, seed=seed, time_limit=None, tolerance=tol, scan="sweep",
    )
    total = steps if fixed else None
    deadline = None if limit is None else begun + limit
    if deadline is not None:
        deadline += sum(w.seconds for w in warmed)

    def round_cb(info: RoundInfo) -> None:
        if on_round is not None:
            on_round(info, total, tol)

    kernel = None
    if memo is not None and sites.size:
        kernel = memo.get_or_make("kernel", lambda: prepare_kernel_graph(validate(graph)))
    belief = _belief(graph, memo, deadline) if need_marginals and free_q.size else None
    t_sample, cpu_sample = time.perf_counter(), time.process_time()
    run_kw = dict(sites=sites, selection=sel, on_round=round_cb, kernel=kernel, poll=poll)
    r, what, dask_run = _sample(graph, query, free_q, method, options, config, explicit, memo, deadline, run_kw,
                                on_dask, hard.coupled > 0)
    crossed = what.startswith(HARD_TIES) and "in no block" not in what
    sampled_wall, sampled_cpu = time.perf_counter() - t_sample, time.process_time() - cpu_sample
    if what:
        reason += "; " + what
    mapv = None
    if need_map:
        unknown = np.isnan(r.marginals).any(axis=1)
        mapv = np.where(unknown, -1, np.argmax(np.nan_to_num(r.marginals, nan=-1.0), axis=1)).astype(np.int64)
    out = done(
        r.marginals, r.stderr, mapv, method=chosen.value, reason=reason, decision=decision, steps=r.steps,
        burn_in=r.burn_in, chains=r.chains, selection=selection_name, query_share=share, warnings=list(r.warnings),
        trace=r.trace, dask=dask_run, hedge=None if hedge is None else hedge.as_dict(),
        sampling_seconds=sampled_wall, sampling_cpu_seconds=sampled_cpu,
    )
    _sampled_warnings(out, graph, query, r, options, config, on_dask, deadline, limit, t_sample - begun, decision,
                      hedge, belief, tol)
    return out


def _refuse_options(method: Method, options, explicit: frozenset[str], need_marginals: bool) -> None:
    """`InferenceError`/`OptionError` for a method asked what it cannot answer or an option it ignores."""
    if method is Method.ANNEAL and need_marginals:
        raise InferenceError("USING ANNEAL finds the most probable world: it answers MAP(...) only; "
                             "use QAM, GIBBS or EXACT for PROB/DIST/STDERR")
    if method is Method.GIBBS and "selection" in explicit and options.selection != "uniform":
        raise OptionError(f"USING GIBBS updates uniformly at random: option selection = '{options.selection}' "
                          "applies to USING QAM (or write selection = 'uniform')")


def _try_exact(graph: FactorGraph, query: np.ndarray, free_q: np.ndarray, sites: np.ndarray, method: Method,
               chosen: Method, decision: Decision | None, reason: str, options, memo: Memo | None, begun: float,
               on_dask: bool, need_marginals: bool, need_map: bool, kmax: int, poll: Callable[[], None] | None):
    """Exact elimination when ``chosen`` is EXACT, AUTO's hedged (`pdbq.answers.hedge`): (the method
    left to run, the reason, AUTO's hedge record or None, the sampling run's limit when AUTO's exact
    try ran over or None, the exact (marginals, stderr, MAP values) or None when it did not run or end)."""
    hedge: HedgeRecord | None = None
    if chosen is not Method.EXACT:
        return chosen, reason, hedge, None, None
    if on_dask:  # only AUTO gets here with workers (dask_plan refuses them with EXACT)
        reason += "; workers/scheduler unused: nothing to sample"
    # Without a written time_limit, AUTO's exact elimination still ends: at the default time
    # limit, or at exact_budget when larger (the wait the user accepted for an exact answer).
    # USING EXACT has only the limit the user wrote.
    limit_exact = options.time_limit
    if limit_exact is None and method is Method.AUTO:
        limit_exact = max(DEFAULT_TIME_LIMIT, float(options.exact_budget))
    end = None if limit_exact is None else begun + limit_exact
    until = end
    cached = _exact_kept(graph, query, free_q, options, memo, need_marginals, need_map)
    if method is Method.AUTO and decision is not None and not cached:
        # AUTO hedges: exact only when it fits the CPU this query gets now, stopped at its share
        # of the budget, the rest kept to sample
        plan = plan_exact(decision.estimated_seconds, time.perf_counter(), end, limit_exact)
        hedge = HedgeRecord(plan)
        if plan.reason:
            reason += "; " + plan.reason
        if not plan.run_exact:
            return Method.QAM, reason, hedge, None, None
        until = plan.deadline
    # the elimination's kernels, compiled on a machine's first use: not the query's time
    w = warm_up("exact")
    compiled = 0.0 if w is None else w.seconds
    if until is not None:
        until += compiled
    w0, c0 = time.perf_counter(), time.thread_time()
    # a hedged elimination also refuses a first large clique that cannot end by its deadline
    # at the speed the calibrated cost model expects at the measured CPU share
    prior = None if hedge is None else _seconds_per_entry(hedge.plan)
    token = PRIOR_SECONDS_PER_ENTRY.set(prior)
    try:
        try:
            exact = _exact_answer(graph, query, free_q, options, memo, need_marginals, need_map, kmax, until, poll)
        finally:
            PRIOR_SECONDS_PER_ENTRY.reset(token)
    except TimeLimitError as e:
        if hedge is None:
            raise _exact_timeout(e, limit_exact, time.perf_counter() - begun) from None
        hedge.stopped = True
        hedge.exact_seconds, hedge.exact_cpu = time.perf_counter() - w0, time.thread_time() - c0
        CALIBRATION.record(decision.estimated_seconds, hedge.exact_cpu, finished=False)
        left = begun + limit_exact + compiled - time.perf_counter()
        reason += (f"; exact elimination ran over its share: stopped after {hedge.exact_seconds:.2g} s "
                   f"({hedge.exact_cpu:.2g} s of CPU: {_share_text(hedge.exact_cpu, hedge.exact_seconds)}), so "
                   f"the remaining {max(left, 0.0):.2g} s sampled ({e})")
        return Method.QAM, reason, hedge, limit_exact + compiled, None  # the compile was not the query's time
    if hedge is not None:
        hedge.exact_seconds, hedge.exact_cpu = time.perf_counter() - w0, time.thread_time() - c0
        if need_marginals and free_q.size >= sites.size:
            # the estimate is of every marginal (both passes): only such runs calibrate it
            CALIBRATION.record(decision.estimated_seconds, hedge.exact_cpu)
    return Method.EXACT, reason, hedge, None, exact


def _anneal_answer(graph: FactorGraph, query: np.ndarray, options, seed: int, sites: np.ndarray, on_round,
                   begun: float, hard: HardSplit, memo: Memo | None, poll: Callable[[], None] | None, reason: str):
    """USING ANNEAL's run: (its result, the world's values, the reason, whether the exact MAP certified it)."""
    w = warm_up("anneal")  # its kernels, compiled on a machine's first use, not the query's time
    r = _anneal(graph, query, options, seed, sites, on_round, begun + (w.seconds if w is not None else 0.0))
    values = np.asarray(r.values, dtype=np.int64)
    certified = False
    if hard.coupled:
        until = None if options.time_limit is None else begun + options.time_limit
        exact_best = _certify_map(graph, values, options, memo, poll, until)
        if exact_best is not None:
            certified = True
            if exact_best is not values:
                values = exact_best
                reason += ("; hard constraints tie free variables and the annealed world scored below the "
                           "exact MAP, which is the answer")
            else:
                reason += "; the annealed world scores as high as the exact MAP"
    return r, values, reason, certified


def _sampled_warnings(out: EngineAnswer, graph: FactorGraph, query: np.ndarray, r, options, config: GibbsConfig,
                      on_dask: bool, deadline: float | None, limit: float | None, before: float,
                      decision: Decision | None, hedge: HedgeRecord | None, belief: np.ndarray | None,
                      tol: float | None) -> None:
    """A sampled answer's convergence summary and warnings, in this order: what the chains said
    (less forced targets), no sample kept, CPU contention, the exact hint, the BP cross-check, and
    the lead line first. ``before``: seconds of the query before sampling began."""
    live = graph.evidence[query] < 0
    _sampled_answer(out, r, live)
    _excuse_forced(graph, query, r, live, out)
    if deadline is not None and r.steps == 0 and live.any():
        out.warnings.append(f"time_limit {limit:g} s ended the query before any sample was kept (planning took "
                            f"{before:.2f} s of it): raise time_limit")
    threads = options.threads if options.threads else min(config.chains, os.cpu_count() or 1)
    busy = None if on_dask else contention_warning(out.warnings, limit, out.sampling_seconds,
                                                   out.sampling_cpu_seconds, max(1, min(threads, config.chains)))
    if busy is not None:
        out.warnings.append(busy)
    if decision is not None and out.warnings:  # a flagged sampling answer: say how to get the exact one
        out.warnings.append(exact_hint(decision, options.exact_budget) if hedge is None else hedge.hint())
    if belief is not None:
        crossed = cross_check_warning(query, r.marginals, r.stderr, belief, tol if tol is not None else DEFAULT_TOLERANCE,
                                      exempt=lambda rows: forced_within(graph, query[rows])[1] <= FORCED_DELTA)
        if crossed is not None:
            out.warnings.append(crossed)
    lead = lead_warning(out.warnings)
    if lead is not None:
        out.warnings.insert(0, lead)


# The share of the time left that the cross-check (loopy belief propagation) may take before
# sampling; past it the check is dropped (the answer is not checked, and not delayed).
CROSS_CHECK_SHARE = 0.1
# Graphs with more factors get no cross-check: building BP's tables is a Python pass over the
# factors, and a query-aware run on a large graph (QAM on a long chain) must not pay for the
# whole graph. Runs without a deadline (fixed steps) check only smaller graphs.
CROSS_CHECK_FACTORS = 5_000
CROSS_CHECK_FACTORS_UNTIMED = 2_000
# Building BP's tables is not interrupted: it starts only when this many seconds per factor (a
# pessimistic cost, several times the idle one) fit its share of the time left.
_CROSS_CHECK_SECONDS_PER_FACTOR = 2e-4


def _belief(graph: FactorGraph, memo: Memo | None, deadline: float | None) -> np.ndarray | None:
    """Loopy BP marginals of the graph for the cross-check of sampled answers (kept with the
    graph), or None when it did not converge or did not fit its share of the time left."""
    kept = memo.get(("loopy_bp",)) if memo is not None else None
    if kept is not None:
        return kept.marginals if kept.converged else None
    if graph.n_factors > (CROSS_CHECK_FACTORS if deadline is not None else CROSS_CHECK_FACTORS_UNTIMED):
        return None
    share = None if deadline is None else CROSS_CHECK_SHARE * (deadline - time.perf_counter())
    if share is not None and graph.n_factors * _CROSS_CHECK_SECONDS_PER_FACTOR > share:
        return None
    until = None if share is None else time.perf_counter() + share
    r = loopy_marginals(graph, deadline=until)
    if r is None:
        return None
    if memo is not None:
        memo.put(("loopy_bp",), r)
    return r.marginals if r.converged else None


def _certify_map(graph: FactorGraph, values: np.ndarray, options, memo: Memo | None,
                 poll: Callable[[], None] | None, deadline: float | None) -> np.ndarray | None:
    """Under hard constraints that tie free variables annealing cannot vouch for its world; where
    exact elimination is cheap (AUTO's cost model, at most a second) the exact MAP decides:
    ``values`` itself when it scores as high, else the exact MAP's values; None when elimination
    does not fit or the query's ``deadline`` passes first (the answer then carries
    `hard_warnings`)."""
    from pdbq.inference.mcmc.anneal import score_difference  # noqa: PLC0415 - ANNEAL's own module

    budget = min(1.0, float(options.exact_budget))
    decision = _memoised(memo, ("auto", options.max_table, budget),
                         lambda: auto_decision(graph, options.max_table, max_seconds=budget))
    if decision.method != "EXACT":
        return None
    try:
        best = _memoised(memo, ("exact_map", options.max_table),
                         lambda: exact_map(graph, max_table=options.max_table, deadline=deadline, poll=poll))
    except (InferenceError, TimeLimitError):
        return None
    exact_values = np.asarray(best.values, dtype=np.int64)
    return values if score_difference(graph, values, exact_values) >= 0.0 else exact_values


def hard_warnings(hard: HardSplit, method: str | None, crossed: bool = False) -> list[str]:
    """What a method cannot vouch for under hard constraints: precision (every method), and for
    the samplers and annealing, hard factors over two or more free variables, which single-variable
    moves cannot cross (a chain, or an annealing run, stays among the worlds it started near),
    unless exact blocks held every variable they tie (``crossed``)."""
    out = list(hard.warnings)
    if hard.coupled and method in ("GIBBS", "QAM", "ANNEAL") and not (crossed and method != "ANNEAL"):
        what = ("its MAP is not certified: it may be a world that is not the most probable"
                if method == "ANNEAL" else "chains cannot move between the worlds they allow, so the estimates "
                "may miss some of them and be wrong beyond their standard errors")
        out.append(f"hard constraints (weights of magnitude ≥ {HARD_WEIGHT:g}) tie {hard.coupled} free variables "
                   f"together: {what}; USING EXACT answers exactly where the model is small enough")
    return out


# A target whose own factors keep every other value under this total probability in every state
# of its neighbours (`local_forcing.forced_within`) is answered within it whatever the chains did:
# a chain that never moved it is not a chain that failed to mix.
FORCED_DELTA = 1e-9
_RHAT_THRESHOLD = GibbsConfig.__dataclass_fields__["rhat_threshold"].default


def _excuse_forced(graph: FactorGraph, query: np.ndarray, r, live: np.ndarray, out: EngineAnswer) -> None:
    """Drop the not-converged warning when every target it counts is one the chains never moved
    because its own factors force its value (its answer is exact within `FORCED_DELTA`), and
    leave those targets out of ``rhat_max``."""
    rhat = np.asarray(r.rhat, dtype=np.float64)
    rows = np.flatnonzero(live & np.isinf(rhat))
    if rows.size == 0:
        return
    value, delta = forced_within(graph, query[rows])
    est = np.nan_to_num(np.asarray(r.marginals)[rows], nan=-1.0)
    ok = (value >= 0) & (delta <= FORCED_DELTA) & (np.argmax(est, axis=1) == value)
    if not ok.any():
        return
    rhat = rhat.copy()
    rhat[rows[ok]] = 1.0
    if np.any(live & (rhat > _RHAT_THRESHOLD)):
        return  # other targets did not converge: the warning stands
    out.warnings = [w for w in out.warnings if not w.startswith("not converged:")]
    finite = rhat[live][~np.isnan(rhat[live])]
    out.rhat_max = float(finite.max()) if finite.size else None


def _uses_moves(method: Method, options) -> bool:
    """Whether a sampling run may use the mixing moves' kernels (AUTO may pick them)."""
    return (method is Method.AUTO or options.cutset is not False or options.tempering > 1 or options.blocks != "off"
            or bool(options.clusters) or options.jumps > 0)
