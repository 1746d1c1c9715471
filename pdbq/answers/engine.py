"""Inference on a query's pruned graph: method choice, run lengths, and the answers for x_q.

`answer(graph, query, method, options, ...)` takes the graph the query-driven grounding built
(x_q ∪ x_l free, boundary evidence clamped) and the graph ids of the query variables, and
returns their marginals, standard errors and MAP values with everything the diagnostics need.
No DuckDB here.

Run lengths (docs/queries.md): with ``steps``/``sweeps`` and neither ``tolerance`` nor
``time_limit`` the chains do exactly that many updates; otherwise they stop at the first of
``tolerance`` (default `DEFAULT_TOLERANCE`), ``time_limit`` (default `DEFAULT_TIME_LIMIT`) and the
step cap (``steps``/``sweeps`` when given, else `DEFAULT_SWEEP_CAP` passes over the sites, at
least `DEFAULT_MIN_STEPS`).
"""

from __future__ import annotations

import importlib
import math
import secrets
import time
from collections.abc import Callable
from typing import Any
from dataclasses import dataclass, field

import numpy as np

from pdbq.arrays import unique
from pdbq.answers.estimates import Marginals
from pdbq.errors import InferenceError, OptionError
from pdbq.graph.cache import Memo
from pdbq.graph.layout import FactorGraph, validate
from pdbq.inference.auto import AutoConfig, Decision, choose_method
from pdbq.inference.config import GibbsConfig, MixingConfig
from pdbq.inference.exact import exact_map, exact_marginals
from pdbq.inference.gibbs import RoundInfo, run_gibbs
from pdbq.inference.influence import edge_influence
from pdbq.inference.kernels import prepare_kernel_graph
from pdbq.inference.mixing import block_set, describe_moves, run_mixing
from pdbq.inference.move_choice import choose_moves, run_auto
from pdbq.inference.selection import SelectionConfig, selection_distribution
from pdbq.language.nodes import Method

__all__ = [
    "EngineAnswer",
    "answer",
    "auto_decision",
    "resolve_seed",
    "DEFAULT_TOLERANCE",
    "DEFAULT_TIME_LIMIT",
    "DEFAULT_SWEEP_CAP",
    "DEFAULT_MIN_STEPS",
]

DEFAULT_TOLERANCE = 0.01  # 95% half-width of every query estimate
DEFAULT_TIME_LIMIT = 5.0  # seconds of sampling
DEFAULT_SWEEP_CAP = 2000  # passes over x_q ∪ x_l at most
DEFAULT_MIN_STEPS = 1_000_000  # per chain: the cap is never below this
# Selection tables kept per cached graph (one per query-variable set and selection config; about
# 32 bytes per site each): the most recently made ones, so many different questions on one large
# model do not evict the model's graph.
_KEEP_SELECTIONS = 4
_QAM_BURN_VISITS = 20  # default QAM burn-in: ~this many expected updates of each query variable


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


def resolve_seed(seed: int | None) -> int:
    """The user's seed, or fresh entropy (reported in the diagnostics so a run can be repeated)."""
    return int(seed) if seed is not None else secrets.randbelow(2**31)


def auto_decision(graph: FactorGraph, max_table: int, config: AutoConfig = AutoConfig()) -> Decision:
    """`choose_method`, after a cheap bound: elimination costs at least ``us_per_clique`` per free
    variable, so a large graph is MCMC without computing an elimination order."""
    free = int(np.count_nonzero(graph.evidence < 0))
    floor = free * config.us_per_clique * 1e-6
    if floor > config.max_seconds:
        return Decision(
            "MCMC",
            f"MCMC: {free:,} free variables; exact elimination would take at least {floor:.1f} s "
            f"(limit {config.max_seconds:g} s)",
            -1,
            -1,
            None,
        )
    return choose_method(graph, max_table=max_table, config=config)


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
    if steps is None:
        steps = max(DEFAULT_MIN_STEPS, DEFAULT_SWEEP_CAP * n_sites)
    return steps, burn_in, tol, limit, False


def _memoised(memo: Memo | None, key: tuple, make: Callable[[], object], keep: int | None = None) -> Any:
    return make() if memo is None else memo.get_or_make(key, make, keep=keep)


def _anneal(graph: FactorGraph, query: np.ndarray, options, seed: int, sites: np.ndarray):
    try:
        module = importlib.import_module("pdbq.inference.anneal")
    except ModuleNotFoundError:
        raise InferenceError("USING ANNEAL needs pdbq.inference.anneal, which this build does not have; "
                             "use USING EXACT for an exact MAP on small graphs") from None
    from pdbq.inference.config import AnnealConfig  # noqa: PLC0415

    kw = {"temperature": options.temperature, "chains": options.chains, "threads": options.threads, "seed": seed,
          "time_limit": options.time_limit}
    if options.cooling is not None:
        kw["cooling"] = options.cooling
    if options.steps is not None:
        kw["steps"] = int(options.steps)
    elif options.sweeps is not None:
        kw["steps"] = max(1, int(math.ceil(options.sweeps * max(sites.size, 1))))
    config = AnnealConfig(**kw)
    return module.anneal_map(graph, config, sites=sites)


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
) -> EngineAnswer:
    """Answer the query variables ``query`` (graph ids) of ``graph`` with ``method``.

    ``options``: `pdbq.api.options.QueryOptions`; ``explicit``: the option names the user wrote
    (a non-uniform ``selection`` with GIBBS is refused). ``on_round(info, total, tolerance)`` is
    called after each sampling round. ``memo``: the graph's entry in the query-graph cache
    (`pdbq.graph.cache.Memo`): AUTO's decision, exact results, the selection table and the kernel
    arrays are kept there, so the same query on the same graph again only samples.
    """
    t0 = time.perf_counter()
    query = np.asarray(query, dtype=np.int64)
    card = graph.cardinality[query].astype(np.int64)
    kmax = int(graph.cardinality.max()) if graph.n_vars else 2
    free_q = unique(query[graph.evidence[query] < 0])
    sites = np.flatnonzero(graph.evidence < 0).astype(np.int32)
    seed = resolve_seed(options.seed)

    if method is Method.ANNEAL and need_marginals:
        raise InferenceError("USING ANNEAL finds the most probable world: it answers MAP(...) only; "
                             "use QAM, GIBBS or EXACT for PROB/DIST/STDERR")
    if method is Method.GIBBS and "selection" in explicit and options.selection != "uniform":
        raise OptionError(f"USING GIBBS updates uniformly at random: option selection = '{options.selection}' "
                          "applies to USING QAM (or write selection = 'uniform')")

    def done(marg, se, mapv, **kw) -> EngineAnswer:
        res = Marginals(query, card, marg, se, mapv)
        out = EngineAnswer(result=res, seed=seed if kw.get("method") in ("QAM", "GIBBS", "ANNEAL") else None, **kw)
        out.seconds = time.perf_counter() - t0
        return out

    if free_q.size == 0:
        marg = np.zeros((query.size, kmax))
        marg[np.arange(query.size), graph.evidence[query]] = 1.0
        mapv = graph.evidence[query].astype(np.int64) if need_map else None
        return done(marg, np.zeros_like(marg), mapv, method="EVIDENCE",
                    reason="every query variable is evidence: point masses, nothing sampled")

    decision = None
    chosen = method
    reason = ""
    if method is Method.AUTO:
        decision = _memoised(memo, ("auto", options.max_table), lambda: auto_decision(graph, options.max_table))
        chosen = Method.EXACT if decision.method == "EXACT" else Method.QAM
        reason = "AUTO: " + decision.reason
    elif method is Method.EXACT:
        reason = "USING EXACT"
    elif method is Method.ANNEAL:
        reason = "USING ANNEAL"
    else:
        reason = f"USING {method.value}"

    if chosen is Method.EXACT:
        marg = se = None
        if need_marginals:
            exact = _memoised(memo, ("exact", options.max_table), lambda: exact_marginals(graph, max_table=options.max_table))
            marg = exact.marginals[query]
            se = np.zeros_like(marg)
        mapv = None
        if need_map:
            best = _memoised(memo, ("exact_map", options.max_table), lambda: exact_map(graph, max_table=options.max_table))
            mapv = best.values[query].astype(np.int64)
        if marg is None:
            marg = np.zeros((query.size, kmax))
            se = np.zeros_like(marg)
        return done(marg, se, mapv, method="EXACT", reason=reason, decision=decision)

    if chosen is Method.ANNEAL:
        r = _anneal(graph, query, options, seed, sites)
        values = np.asarray(r.values, dtype=np.int64)
        marg = np.zeros((query.size, kmax))
        warnings = list(getattr(r, "warnings", ()) or ())
        return done(marg, np.zeros_like(marg), values[query], method="ANNEAL", reason=reason, decision=decision,
                    steps=int(getattr(r, "steps", 0) or 0), chains=options.chains, warnings=warnings)

    steps, burn_in, tol, limit, fixed = _run_lengths(options, sites.size)
    sel = None
    share = None
    selection_name = "uniform"
    if chosen is Method.QAM:
        selection_name = options.selection
        sel_config = SelectionConfig(selection=options.selection, epsilon=options.epsilon, power=options.power)

        def make_selection():
            influence = None
            if memo is not None and sel_config.selection in ("trail", "distance"):
                # the edge influences depend on the graph only: every query variable shares them
                influence = memo.get_or_make(("edge_influence", sel_config.max_table),
                                             lambda: edge_influence(graph, max_table=sel_config.max_table))
            return selection_distribution(graph, free_q, sites, sel_config, influence=influence)

        s = _memoised(memo, ("selection", free_q.tobytes(), sel_config), make_selection, keep=_KEEP_SELECTIONS)
        sel = (s.prob, s.alias)
        is_q = np.isin(sites, free_q)
        share = float(s.p[is_q].sum())
        if burn_in is None and not fixed:
            p_min = float(s.p[is_q].min()) if is_q.any() else 1.0 / max(sites.size, 1)
            burn_in = int(min(max(1000, math.ceil(_QAM_BURN_VISITS / p_min)), 20 * sites.size, steps or 2**62))
    config = GibbsConfig(
        steps=steps, burn_in=burn_in, chains=options.chains, threads=options.threads, seed=seed,
        time_limit=limit, tolerance=tol, scan="random",
    )
    total = steps if fixed else None

    def round_cb(info: RoundInfo) -> None:
        if on_round is not None:
            on_round(info, total, tol)

    kernel = None
    if memo is not None and sites.size:
        kernel = memo.get_or_make("kernel", lambda: prepare_kernel_graph(validate(graph)))
    mixing = MixingConfig(tempering=options.tempering, blocks=options.blocks, block_table=options.block_table).check()

    def blocks_for(m: MixingConfig):
        return _memoised(memo, ("blocks", free_q.tobytes(), m.blocks, m.block_table),
                         lambda: block_set(graph, m, free_q), keep=_KEEP_SELECTIONS)

    run_kw = dict(sites=sites, selection=sel, on_round=round_cb, kernel=kernel)
    if method is Method.AUTO and not ({"tempering", "blocks"} & explicit):
        moves = _memoised(memo, ("moves", options.block_table), lambda: choose_moves(graph, block_table=options.block_table))
        r, why = run_auto(graph, query, config, moves, blocks=blocks_for, **run_kw)
        reason += "; " + why
    elif mixing.active:
        r = run_mixing(graph, query, config, mixing, blocks=blocks_for(mixing) if mixing.uses_blocks else None, **run_kw)
        reason += "; " + describe_moves(r)
    else:
        r = run_gibbs(graph, query, config, **run_kw)
    live = graph.evidence[query] < 0
    rhat = r.rhat[live]
    ess = r.ess[live]
    mapv = np.argmax(r.marginals, axis=1).astype(np.int64) if need_map else None
    out = done(
        r.marginals, r.stderr, mapv, method=chosen.value, reason=reason, decision=decision, steps=r.steps,
        burn_in=r.burn_in, chains=r.chains, selection=selection_name, query_share=share, warnings=list(r.warnings),
        trace=r.trace,
    )
    out.rhat_max = float(np.nanmax(rhat)) if rhat.size and not np.all(np.isnan(rhat)) else None
    out.ess_min = float(np.min(ess)) if ess.size else None
    out.max_stderr = float(np.max(r.stderr[live])) if live.any() else 0.0
    if live.any() and r.steps == 0:
        # No sample was kept (e.g. the time limit ran out during burn-in or the first compile):
        # say so and answer NaN rather than a made-up number.
        out.result.marginals[live] = np.nan
        out.result.stderr[live] = np.nan
        out.max_stderr = float("nan")
        out.warnings.append("no samples were collected before the run stopped (time limit reached during "
                            "burn-in); the estimates are NaN: raise time_limit or set steps")
    return out
