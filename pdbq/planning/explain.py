"""EXPLAIN <probabilistic query>: what the engine would do, as rows (property, value).

It plans the query like `execute_query` (x_q by DuckDB, x_e, query-driven grounding of what
x_q reaches; grounding is cached for the query that follows) but samples nothing. Rows, in order:
the set sizes (|x_q|, |x_e|, |x_l|, pruned), the method and why (for AUTO: induced width,
largest table, estimated seconds), the selection distribution and the share of it the query
variables get, the run length and burn-in of a sampling method, the `TOP_K` variables by influence trail score with their relation and keys, the
mixing analysis of `pdbq.analysis` (hierarchy width bounds, max factor weight, mixing bound) and
warnings.

>>> # db.execute("EXPLAIN SELECT PROB(m) FROM is_popular m").fetchall()[:2]
>>> # [('query variables |x_q|', '4'), ('evidence variables |x_e|', '1 (stored 1, GIVEN 0)')]
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from pdbq.arrays import unique
from pdbq.answers.decide import decision_stop
from pdbq.answers.engine import DEFAULT_TIME_LIMIT, auto_decision, dask_plan, run_horizon, run_length_text
from pdbq.answers.option_scope import refuse_inert
from pdbq.planning.plan import Plan, QueryAnswer, Session, plan_query, semantics_warnings_of, vid_labels
from pdbq.errors import InferenceError, PdbqError, TimeLimitError
from pdbq.inference.query_aware.influence import trail_scores
from pdbq.inference.moves.cutset import cutset_for, describe_cutset
from pdbq.inference.moves.move_choice import choose_moves
from pdbq.inference.query_aware.selection import SelectionConfig, selection_distribution
from pdbq.language.nodes import Method, ProbQuery

__all__ = ["explain", "explain_rows", "TOP_K", "ANALYSIS_MAX_FACTORS"]

TOP_K = 10
ANALYSIS_MAX_FACTORS = 200_000  # larger graphs skip the hierarchy-width search (it can be slow)


def _fmt(x: float | None, digits: int = 4) -> str:
    if x is None:
        return "n/a"
    return f"{x:.{digits}g}"


def explain_rows(db, plan: Plan, method: Method, *, started: float | None = None,
                 poll: Callable[[], None] | None = None) -> list[tuple[str, str]]:
    """The (property, value) rows of EXPLAIN for a planned query. ``started``
    (`time.perf_counter`): when the statement began; with it, AUTO's order search, its moves and
    the cutset choice stop where the query's would (`pdbq.answers.decide`), and say so.
    ``poll``: a cancel check (raises)."""
    rows: list[tuple[str, str]] = []
    c = plan.counts()
    ev = plan.evidence
    rows.append(("query variables |x_q|", str(c["query_vars"])))
    rows.append(("evidence variables |x_e|", f"{c['evidence_vars']} (stored {ev.n_stored}, GIVEN {ev.given.size}, "
                                             f"GIVEN overriding stored {ev.overridden})"))
    rows.append(("evidence on the boundary", str(c["evidence_in_graph"])))
    rows.append(("latent variables |x_l|", str(c["latent_vars"])))
    rows.append(("pruned variables (never grounded or sampled)", f"{c['pruned']} of {plan.n_total}"))
    rows.append(("graph factors", str(c["graph_factors"])))
    if plan.grounding is not None:
        g = plan.grounding
        if g.cached:
            what = "cached graph" if g.cached == "graph" else "region found in the cached graph of the whole model"
            rows.append(("grounding", f"{what}: inputs unchanged since it was built, nothing grounded or loaded, "
                                      f"{plan.grounding_seconds:.3f} s"))
        elif g.small_model:
            rows.append(("grounding", f"{g.new_factors} new factors: the whole model at once (small enough), "
                                      f"{plan.grounding_seconds:.3f} s"))
        else:
            rows.append(("grounding", f"{g.new_factors} new factors in {g.rounds} frontier rounds, "
                                      f"{plan.grounding_seconds:.3f} s" + (" (full fallback)" if g.full_fallback else "")))
    graph = plan.graph
    opts = plan.options
    refuse_inert(method, plan.explicit)
    if graph is None:
        rows.append(("method", f"none: time_limit ran out while {plan.timed_out}" if plan.timed_out
                     else "none: the query selects no variables"))
        rows.extend(("note", note) for note in plan.notes)
        return rows
    decide_by, moves_by = _deadlines(opts, started)
    local = plan.local
    free_q = unique(local[graph.evidence[local] < 0])
    decision = auto_decision(graph, opts.max_table, max_seconds=opts.exact_budget,
                             should_stop=decision_stop(decide_by, poll)) if free_q.size else None
    if not free_q.size:
        rows.append(("method", "EVIDENCE: every query variable is evidence (point masses, nothing sampled)"))
    elif method is Method.AUTO:
        picked = "EXACT" if decision.method == "EXACT" else "QAM"
        rows.append(("method", f"AUTO picks {picked}"))
    else:
        rows.append(("method", f"USING {method.value}"))
    if decision is not None:
        rows.append(("AUTO decision", decision.reason))
        rows.append(("induced width", "unknown (too large to order)" if decision.width < 0 else str(decision.width)))
        rows.append(("largest exact table", "n/a" if decision.table_size < 0 else f"{decision.table_size:,} entries"))
        rows.append(("estimated exact seconds", _fmt(decision.estimated_seconds)))
    if free_q.size and method is not Method.EXACT and method is not Method.ANNEAL:
        rows.append(("moves", _moves_row(graph, method, opts, plan.explicit, decision,
                                         decision_stop(moves_by, poll))))
    sites = np.flatnonzero(graph.evidence < 0).astype(np.int32)
    samples = free_q.size and (method in (Method.GIBBS, Method.QAM) or (method is Method.AUTO and decision.method != "EXACT"))
    if samples:
        run, burn = run_length_text(opts, sites.size)
        rows.append(("run length", run))
        rows.append(("burn-in", burn))
    if opts.workers is not None or opts.scheduler is not None:
        rows.append(("runs on", dask_plan(opts, method, plan.explicit) if samples else
                     "this process: nothing to sample, so workers/scheduler are unused"))
    elif samples:
        rows.append(("runs on", "this process (chains on threads)"))
    # an exact answer samples nothing: selection, influence and mixing would describe a run that never happens
    exact = method is Method.EXACT or (method is Method.AUTO and decision is not None and decision.method == "EXACT")
    if free_q.size and not exact:
        selection = "uniform" if method is Method.GIBBS else opts.selection
        try:
            s = selection_distribution(graph, free_q, sites, SelectionConfig(selection=selection, epsilon=opts.epsilon,
                                                                             power=opts.power))
            share = float(s.p[np.isin(sites, free_q)].sum())
            rows.append(("selection", f"{selection} (epsilon {opts.epsilon:g}) over {sites.size} sites"))
            rows.append(("selection share of x_q", f"{share:.4f} (uniform would give {free_q.size / sites.size:.4f})"))
        except PdbqError as e:
            rows.append(("selection", f"{selection}: {e}"))
        scores = trail_scores(graph, free_q)
        mask = np.zeros(graph.n_vars, dtype=bool)
        mask[sites] = True
        mask[free_q] = False
        cand = np.flatnonzero(mask & (scores > 0))
        top = cand[np.argsort(-scores[cand], kind="stable")[:TOP_K]]
        labels = vid_labels(db.duckdb, plan.graph_vids[top])
        for i, v in enumerate(top.tolist(), 1):
            gv = int(plan.graph_vids[v])
            rows.append((f"influence #{i}", f"{labels.get(gv, f'vid {gv}')}: trail score {scores[v]:.4g}"))
        if not top.size:
            rows.append(("influence", "no latent variable influences the query (x_l is empty)"))
    rows.extend(_analysis_rows(db, plan, mixing=not exact, horizon=run_horizon(opts, sites.size)))
    for note in plan.notes:
        rows.append(("note", note))
    return rows


def _deadlines(opts, started: float | None) -> tuple[float | None, float | None]:
    """(the deadline of AUTO's order search, that of the moves' and the cutset's searches), as the
    query's engine sets them: the time limit; for the moves, the default limit of a run that
    its steps do not fix."""
    if started is None:
        return None, None
    if opts.time_limit is not None:
        return started + opts.time_limit, started + opts.time_limit
    return None, None if opts.fixed_length else started + DEFAULT_TIME_LIMIT


def _moves_row(graph, method: Method, opts, explicit, decision, should_stop=None) -> str:
    """Which MCMC moves the chains would use and why. ``should_stop``: read by the cutset searches."""
    if method is Method.AUTO and decision is not None and decision.method == "EXACT":
        return "none: exact elimination"
    if opts.cutset is not False and not (method is Method.AUTO and "cutset" not in explicit):
        try:
            return describe_cutset(cutset_for(graph, opts.cutset, opts.cutset_table, should_stop=should_stop))
        except TimeLimitError as e:
            return (f"cutset: {e}; the query would sample single-site Gibbs in the time left instead: raise "
                    "time_limit for cutset sampling")
        except InferenceError as e:
            return f"cutset sampling impossible: {e}"
    if method is Method.AUTO and not ({"tempering", "blocks", "clusters", "jumps"} & explicit):
        d = choose_moves(graph, block_table=opts.block_table, should_stop=should_stop)
        return "AUTO: " + (d.without_cutset() if "cutset" in explicit else d).reason
    parts = []
    if opts.blocks != "off":
        size = "as large as the table budget allows" if opts.blocks == "auto" else f"at most {opts.blocks} variables"
        parts.append(f"exact block moves (blocks {size}, clique tables <= {opts.block_table:,} entries)")
    if opts.clusters:
        parts.append("Swendsen–Wang cluster moves (bonds on the equality couplings)")
    if opts.tempering > 1:
        parts.append(f"replica exchange with {opts.tempering} copies per chain")
    if opts.jumps:
        parts.append(f"mode jumps between up to {opts.jumps} local modes found in burn-in")
    return "; ".join(parts) if parts else "single-site moves"


def _mixing_text(bound: float | None, horizon: tuple[float, str] | None) -> str:
    """The worst-case mixing bound, said to be vacuous when it exceeds the updates the run can make
    at all (it then says nothing about this run; R-hat and the standard errors do)."""
    if bound is None:
        return "n/a (too large for a float: a worst-case bound that says nothing about this run)"
    text = f"{bound:.4g} steps"
    if horizon is not None and bound > horizon[0]:
        text += (f" (vacuous: a worst-case bound from the weights and the structure, above {horizon[1]}; "
                 "whether the chains mixed is what R-hat and the standard errors measure)")
    return text


def _analysis_rows(db, plan: Plan, *, mixing: bool = True,
                   horizon: tuple[float, str] | None = None) -> list[tuple[str, str]]:
    """Hierarchy width, factor weights and the mixing bound (when ``mixing``: a sampled answer;
    ``horizon``: `run_horizon`), then the semantics warnings."""
    graph = plan.graph
    if not mixing:
        return [("warning", w) for w in semantics_warnings_of(plan, db.duckdb)]
    try:
        from pdbq.analysis import analyze_graph  # noqa: PLC0415
    except ImportError:
        return [("analysis", "not available in this build")]
    if graph.n_factors > ANALYSIS_MAX_FACTORS:
        rows = [("analysis", f"hierarchy width skipped: {graph.n_factors:,} factors (limit {ANALYSIS_MAX_FACTORS:,})")]
    else:
        a = analyze_graph(graph)
        lo, hi = a.hierarchy_width_bounds
        rows = [
            ("hierarchy width", str(a.hierarchy_width) if a.hierarchy_width is not None else f"between {lo} and {hi}"),
            ("max factor weight", f"{a.max_factor_weight:.4g}" + ("" if a.max_factor_weight_exact else " (upper bound)")),
            ("mixing bound (Gibbs steps, upper bound)", _mixing_text(a.mixing_bound, horizon)),
        ]
    rows += [("warning", w) for w in semantics_warnings_of(plan, db.duckdb)]
    return rows


def explain(db: Session, stmt: ProbQuery, *, progress: Any = None, cancel: Any = None) -> QueryAnswer:
    """EXPLAIN as a table with columns ``property`` and ``value`` (both VARCHAR)."""
    started = time.perf_counter()  # the plan and the searches after it keep the query's time limit
    plan = plan_query(db, stmt, progress=progress, cancel=cancel, started=started)
    rows = explain_rows(db, plan, stmt.method, started=started, poll=None if cancel is None else cancel.check)
    table = pa.table({"property": pa.array([r[0] for r in rows], pa.string()),
                      "value": pa.array([r[1] for r in rows], pa.string())})
    diag = {"method": "EXPLAIN", **plan.counts(), "grounding_seconds": plan.grounding_seconds}
    return QueryAnswer(table, diag)
