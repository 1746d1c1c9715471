"""Running a plan: inference on its graph, estimates as Arrow tables, and the user's SELECT
evaluated by DuckDB with each estimate alias's table reference replaced by the key columns plus
the estimate columns. `execute_query` is what ``Database.execute`` calls for PROB/DIST/MAP/STDERR.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import duckdb
import numpy as np
import sqlglot.expressions as exp

from pdbq.answers.engine import DEFAULT_TIME_LIMIT, EngineAnswer, answer
from pdbq.answers.plot import MAX_LINES as TRACE_MAX_LINES
from pdbq.answers.warmup import warm_up
from pdbq.answers.estimates import Marginals, check_estimate, clean_stderr, estimates_table
from pdbq.catalog.cluster import is_cluster
from pdbq.errors import InferenceError
from pdbq.grounding.store import col, ident, sql_text, table_ref
from pdbq.inference.mcmc.gibbs import RoundInfo
from pdbq.language.nodes import CreateVariable, EstimateKind, Method, ProbQuery
from pdbq.planning.duck_errors import ListTypesRefused, check_list_types, query_error
from pdbq.planning.explain import explain
from pdbq.planning.plan import (
    Plan,
    QueryAnswer,
    ProgressFn,
    Session,
    call_text,
    check_cancel,
    map_select,
    plan_query,
    report,
    evidence_notes_of,
    semantics_warnings_of,
    vid_labels,
)
from pdbq.planning.labels import label_warnings
from pdbq.planning.rewrite import PLACEHOLDER_PREFIX, VID_COLUMN, substitute
from pdbq.planning.sources import arrow_source
from pdbq.planning.store_state import kept_state, read_definitions
from pdbq.progress import current_watch, watch_compiles

__all__ = ["QueryAnswer", "execute_query", "run_plan", "diagnostics"]


def _final_source(v: CreateVariable, placeholders: Sequence[str], arrow_name: str) -> Callable[[Any], exp.Expression]:
    def make(alias: exp.TableAlias | str) -> exp.Expression:
        extra = [col(p, "__pdbq_e").as_(ident(p)) for p in placeholders]
        sel = map_select(v, extra).join(
            table_ref(arrow_name, "__pdbq_e"),
            on=exp.EQ(this=col("vid", "__pdbq_m"), expression=col(VID_COLUMN, "__pdbq_e")),
            join_type="LEFT",
        )
        a = alias.copy() if isinstance(alias, exp.TableAlias) else exp.TableAlias(this=exp.to_identifier(alias))
        return exp.Subquery(this=sel, alias=a)

    return make


def _final_tree(plan: Plan, stmt: ProbQuery) -> tuple[exp.Expression, dict[str, list[exp.Table]]]:
    """The user's SELECT with each estimate alias reading its estimates table, and the table
    nodes to point at each query's registered estimates (the tree depends on the statement and
    the definitions only, so a kept store check keeps it too)."""
    sources, names = {}, {}
    tag = uuid.uuid4().hex  # no table of the user's query can bear these names
    for k, (alias, relation) in enumerate(plan.relations.items()):
        v = plan.variables[relation]
        names[alias] = f"__pdbq_estimates_{tag}_{k}"
        sources[alias] = _final_source(v, [e.placeholder for e in stmt.estimates if e.alias == alias], names[alias])
    tree = substitute(stmt.tree, sources)
    tables = list(tree.find_all(exp.Table))
    return tree, {alias: [t for t in tables if t.name == name] for alias, name in names.items()}


def _round_callback(progress: ProgressFn | None, cancel: Any, options: Any = None):
    if progress is None and cancel is None:
        return None
    # the budget the sampler stops at (the engine's default unless a fixed-length run)
    limit = getattr(options, "time_limit", None)
    if limit is None and options is not None and not options.fixed_length:
        limit = DEFAULT_TIME_LIMIT

    def on_round(info: RoundInfo, total: int | None, tolerance: float | None) -> None:
        if progress is not None:
            se = info.max_stderr if np.isfinite(info.max_stderr) else None
            report(progress, "sampling", int(info.steps), total, max_stderr=se,
                    tolerance=None if tolerance is None else tolerance / 1.96, elapsed=info.elapsed,
                    time_limit=None if total is not None else limit)
        check_cancel(cancel)

    return on_round


def run_plan(plan: Plan, method: Method, *, need_marginals: bool, need_map: bool, progress, cancel,
             started: float | None = None) -> EngineAnswer | None:
    """Inference on the plan's graph; ``started`` (perf_counter) is when the query began: a
    ``time_limit`` bounds planning and sampling together."""
    if plan.graph is None:
        return None
    return answer(
        plan.graph, plan.local, method, plan.options, need_marginals=need_marginals, need_map=need_map,
        explicit=plan.explicit, on_round=_round_callback(progress, cancel, plan.options), memo=plan.memo,
        started=started, poll=None if cancel is None else (lambda: check_cancel(cancel)),
    )


def diagnostics(plan: Plan, ans: EngineAnswer | None, started: float, con: duckdb.DuckDBPyConnection | None = None,
                cpu_started: float | None = None) -> dict[str, Any]:
    """The query's diagnostics. ``cpu_started``: `time.process_time()` when ``started`` was taken
    (then ``cpu_share`` is the process CPU time ÷ wall time of the whole query)."""
    d: dict[str, Any] = {}
    d["method"] = ans.method if ans else "NONE"
    d["method_reason"] = ans.reason if ans else (
        f"time_limit ran out while {plan.timed_out}: nothing sampled" if plan.timed_out else "the query selects no variables")
    d.update(plan.counts())
    d["selection"] = ans.selection if ans else None
    d["selection_query_share"] = ans.query_share if ans else None
    d["steps"] = ans.steps if ans else 0
    d["burn_in"] = ans.burn_in if ans else 0
    d["chains"] = ans.chains if ans else 0
    d["seed"] = ans.seed if ans else None
    d["rhat_max"] = ans.rhat_max if ans else None
    d["ess_min"] = ans.ess_min if ans else None
    d["max_stderr"] = float(clean_stderr(ans.max_stderr)) if ans and ans.max_stderr is not None else None
    d["graph_cached"] = bool(plan.grounding is not None and plan.grounding.cached)
    # the kernels' one-time compilation: said, not a flaw of the answer (kept apart from warnings)
    watch = current_watch()
    if watch is not None:
        watch.settle(counted=True)
    d["notices"] = list(watch.notices) if watch is not None else []
    d["grounding_seconds"] = plan.grounding_seconds
    d["inference_seconds"] = ans.seconds if ans else 0.0
    d["dask"] = ans.dask if ans else None  # where the chains ran, when on Dask workers
    d["seconds"] = time.perf_counter() - started
    # the CPU the query got (other programs share the machine): process CPU seconds ÷ wall seconds
    # (every thread counted, so chains on several threads can exceed 1), and the sampling run's
    # wall and CPU seconds (its effective sampling time)
    d["cpu_share"] = ((time.process_time() - cpu_started) / d["seconds"]
                      if cpu_started is not None and d["seconds"] > 1e-3 else None)
    d["sampling_seconds"] = ans.sampling_seconds if ans else None
    d["effective_sampling_seconds"] = ans.sampling_cpu_seconds if ans else None
    d["hedge"] = ans.hedge if ans else None
    warnings = list(plan.notes)
    if ans is not None:
        if con is not None:
            warnings += label_warnings(ans.warnings, plan.graph_vids, lambda vids: vid_labels(con, vids))
        else:
            warnings += ans.warnings
        if ans.method in ("QAM", "GIBBS"):
            warnings += semantics_warnings_of(plan, con)
        else:
            warnings += evidence_notes_of(plan)
    d["warnings"] = warnings
    if ans is not None and ans.trace is not None:
        d["trace"] = ans.trace
        if con is not None:
            # legends of Result.plot(): only the first variables are drawn, so only they are named
            first = plan.seeds[:TRACE_MAX_LINES]
            names = vid_labels(con, first)
            d["trace_labels"] = [names.get(int(v), f"x_q[{i}]") for i, v in enumerate(first)]
    return d


def _alias_answers(plan: Plan, ans: EngineAnswer | None, alias: str) -> Marginals:
    vids = plan.xq[alias]
    if ans is None or not vids.size:
        z = np.zeros((vids.size, 2))
        return Marginals(vids, np.full(vids.size, 2), z, z, np.zeros(vids.size, np.int64))
    rows = np.searchsorted(plan.seeds, vids)
    r = ans.result
    return Marginals(vids, r.cardinality[rows], r.marginals[rows], r.stderr[rows],
                     None if r.map_values is None else r.map_values[rows])


def execute_query(db: Session, stmt: ProbQuery, *, progress: ProgressFn | None = None, cancel: Any = None) -> QueryAnswer:
    """Answer a probabilistic query (or its EXPLAIN) on ``db``; what ``Database.execute`` calls.

    ``progress``: a callable taking `pdbq.progress.Progress` (called after grounding and each
    sampling round, and while the kernels compile on their first use on a machine, announced
    before the wait); ``cancel``: a `pdbq.progress.CancelToken` polled between rounds.
    """
    with watch_compiles(progress):
        try:
            return _execute_query(db, stmt, progress=progress, cancel=cancel)
        except ListTypesRefused:  # a long IN list compared with another type: its literals as written
            return _execute_query(db, stmt.as_written, progress=progress, cancel=cancel)


def _execute_query(db: Session, stmt: ProbQuery, *, progress: ProgressFn | None, cancel: Any) -> QueryAnswer:
    # the catalog read once: a query's store check reuses it (or the check kept from the last one)
    kept = kept_state(db)
    definitions = None if kept is not None else read_definitions(db)
    variables = kept.variables if kept is not None else definitions[0][0]
    # the cluster machinery (coreference models, entity moves, Dask) is imported only for a
    # catalog that has a DOMAIN CLUSTER relation
    if any(is_cluster(v) for v in variables.values()):
        from pdbq.planning.coref_query import execute_cluster_query, is_cluster_query  # noqa: PLC0415

        if is_cluster_query(db, stmt, variables):  # DOMAIN CLUSTER relations: entity moves, not Gibbs
            return execute_cluster_query(db, stmt, cancel)
    for e in stmt.estimates:
        if e.other is not None:
            raise InferenceError(f"{e.kind.value}({e.alias} = {e.other}) compares two aliases of one DOMAIN CLUSTER "
                                 f"relation (P(the two rows are one entity)); '{e.alias}' and '{e.other}' are not: "
                                 f"for another variable relation write {e.kind.value}({e.alias}) or "
                                 f"{e.kind.value}({e.alias} = <value>)")
    if stmt.explain:
        return explain(db, stmt, progress=progress, cancel=cancel)
    # kernels compiled (first use on a machine) or loaded before the clock starts: not the query
    warm_up("plan")
    started, cpu_started = time.perf_counter(), time.process_time()
    plan = plan_query(db, stmt, progress=progress, cancel=cancel, definitions=definitions,
                      started=started)
    kinds = {e.kind for e in stmt.estimates}
    need_map = EstimateKind.MAP in kinds
    need_marginals = bool(kinds - {EstimateKind.MAP})
    ans = run_plan(plan, stmt.method, need_marginals=need_marginals, need_map=need_map, progress=progress, cancel=cancel,
                   started=started)
    con = db.duckdb
    tree, slots = _final_tree(plan, stmt) if plan.store is None else plan.store.remember("final", stmt, lambda: _final_tree(plan, stmt))
    with contextlib.ExitStack() as registered:
        for alias, relation in plan.relations.items():
            v = plan.variables[relation]
            ests = [e for e in stmt.estimates if e.alias == alias]
            m = _alias_answers(plan, ans, alias)
            table = estimates_table([(e, check_estimate(e, v, call_text(e))) for e in ests], v.domain, m, VID_COLUMN)
            name = registered.enter_context(arrow_source(con, table))
            for node in slots[alias]:  # the kept tree reads this query's estimates
                node.set("this", ident(name))
        try:
            out = con.sql(sql_text(tree)).to_arrow_table()
        except duckdb.Error as exc:
            check_list_types(exc, stmt)
            raise query_error(exc, {a: (r, plan.variables[r].columns) for a, r in plan.relations.items()}) from None
    keep = [c for c in out.column_names if not (c.startswith(PLACEHOLDER_PREFIX) or c == VID_COLUMN)]
    if len(keep) != len(out.column_names):
        out = out.select(keep)
    return QueryAnswer(out, diagnostics(plan, ans, started, con, cpu_started))
