"""A probabilistic query's plan: x_q, x_e and the pruned graph it runs on.

1. **x_q**: the variables of the relations inside PROB/DIST/MAP/STDERR that the query's FROM/WHERE
   selects, evaluated by DuckDB on a rewritten tree (`pdbq.planning.rewrite.xq_selects`).
2. **x_e**: stored evidence plus GIVEN (`pdbq.planning.evidence.resolve_evidence`).
3. **x_l**: what query-driven grounding reaches from x_q through non-evidence variables
   (`pdbq.graph.from_store.query_graph`); everything else is never grounded, loaded or sampled.

Planning takes a `Session` (what `pdbq.Database` is) and never imports the interfaces above it;
`pdbq.planning.execute` runs a plan, `pdbq.planning.infer` answers batches of keys.
docs/queries.md is the user documentation.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import duckdb
import numpy as np
import pyarrow as pa
import sqlglot.expressions as exp

from pdbq.arrays import unique
from pdbq.answers.estimates import check_estimate
from pdbq.answers.feasibility import check_evidence_possible
from pdbq.catalog.store import Catalog
from pdbq.errors import PdbqError
from pdbq.graph.cache import GraphCache, Memo
from pdbq.graph.from_store import factor_rules
from pdbq.graph.from_store import query_graph as _store_query_graph
from pdbq.graph.layout import FactorGraph
from pdbq.grounding.ground import GroundingStats, Prepared, prepare, transaction
from pdbq.grounding.limits import GroundingConfig
from pdbq.grounding.store import col, ident, schema_known, sql_text, table_ref, var_table
from pdbq.grounding.variables import relation_info, stored_evidence, sync_variables, vids_to_keys
from pdbq.language.nodes import CreateVariable, Estimate, ProbQuery
from pdbq.grounding.deadline import PREPARE_GRACE, PlanningDeadline
from pdbq.planning.duck_errors import check_list_types
from pdbq.planning.evidence import EvidenceSet, resolve_evidence
from pdbq.planning.options import QueryOptions
from pdbq.planning.rewrite import VID_COLUMN, check_aliases, xq_selects
from pdbq.planning.store_state import StoreState, checked_store, kept_state
from pdbq.progress import Progress

__all__ = ["Session", "Plan", "QueryAnswer", "plan_query", "query_plan", "query_graph", "semantics_warnings_of", "vid_labels"]

ProgressFn = Callable[[Any], None]


@dataclass(frozen=True)
class QueryAnswer:
    """A statement's answer as an Arrow table plus its diagnostics (the interfaces wrap it, e.g.
    in `pdbq.Result`)."""

    table: pa.Table
    diagnostics: dict[str, Any] = field(default_factory=dict)


class Session(Protocol):
    """What planning needs of a database (`pdbq.Database` is one): its catalog, its DuckDB
    connection, its query-graph cache and its default WITH options."""

    @property
    def catalog(self) -> Catalog: ...

    @property
    def duckdb(self) -> duckdb.DuckDBPyConnection: ...

    graph_cache: GraphCache | None
    default_options: Mapping[str, Any] | None


@dataclass
class Plan:
    """x_q, x_e and the pruned graph of one query (what EXPLAIN shows and inference runs on)."""

    stmt: ProbQuery | None
    options: QueryOptions
    explicit: frozenset[str]
    variables: dict[str, CreateVariable]
    relations: dict[str, str]  # estimate alias -> variable relation
    xq: dict[str, np.ndarray]  # alias -> sorted global vids
    seeds: np.ndarray  # union of x_q (sorted global vids)
    evidence: EvidenceSet
    graph: FactorGraph | None
    graph_vids: np.ndarray  # global vid of each graph variable
    n_total: int  # variables in the database
    grounding: GroundingStats | None
    grounding_seconds: float
    notes: list[str] = field(default_factory=list)
    memo: Memo | None = None  # the graph's entry in the database's query-graph cache
    store: StoreState | None = None  # the store check planned with (pdbq.planning.store_state)
    timed_out: str = ""  # the planning step the time limit interrupted (then no graph: NULL answers)

    @property
    def local(self) -> np.ndarray:
        """Graph ids of the seeds (x_q)."""
        return np.searchsorted(self.graph_vids, self.seeds)

    def counts(self) -> dict[str, int]:
        g = self.graph
        n_graph = 0 if g is None else g.n_vars
        free = 0 if g is None else int(np.count_nonzero(g.evidence < 0))
        q_free = 0 if g is None or not self.seeds.size else int(np.count_nonzero(g.evidence[self.local] < 0))
        return {
            "query_vars": int(self.seeds.size),
            "evidence_vars": int(self.evidence.vids.size),
            "evidence_in_graph": 0 if g is None else int(np.count_nonzero(g.evidence >= 0)),
            "latent_vars": free - q_free,
            "pruned": int(self.n_total - n_graph),
            "graph_factors": 0 if g is None else int(g.n_factors),
        }


def call_text(est: Estimate) -> str:
    return f"{est.kind.value}({est.alias}{' = ' + est.value if est.value is not None else ''})"


def sync(con: duckdb.DuckDBPyConnection, variables: Mapping[str, CreateVariable]) -> list[str]:
    with transaction(con):
        return list(sync_variables(con, variables, GroundingConfig()).warnings)


def prepare_store(con: duckdb.DuckDBPyConnection, variables: Mapping[str, CreateVariable], rules: Mapping[str, Any]) -> Prepared:
    """Bring the factor store up to date for one query (vid maps, evidence, stale groundings):
    done once per query, and handed to the graph builder so that it does not fingerprint the
    data again."""
    with transaction(con):
        return prepare(con, variables, rules, GroundingConfig())


def query_notes(prepared: Prepared, stats: GroundingStats | None) -> list[str]:
    notes = list(prepared.sync.warnings)
    if stats is not None:
        notes += [w for w in stats.warnings if w not in notes]
    return notes


def map_select(v: CreateVariable, extra: Sequence[exp.Expression], source_alias: str = "__pdbq_m") -> exp.Select:
    keys = [col(c.name, source_alias).as_(ident(c.name)) for c in v.columns]
    return exp.select(*keys, *extra).from_(table_ref(var_table(v.name), source_alias))


def _xq_source(v: CreateVariable, placeholders: Sequence[str]) -> Callable[[Any], exp.Expression]:
    def make(alias: exp.TableAlias | str) -> exp.Expression:
        extra = [col("vid", "__pdbq_m").as_(ident(VID_COLUMN))]
        extra += [exp.Null().as_(ident(p)) for p in placeholders]
        a = alias.copy() if isinstance(alias, exp.TableAlias) else exp.TableAlias(this=exp.to_identifier(alias))
        return exp.Subquery(this=map_select(v, extra), alias=a)

    return make



def _all_vids(con: duckdb.DuckDBPyConnection, relation: str) -> np.ndarray:
    info = relation_info(con)[relation]
    return np.arange(info.base, info.base + info.n, dtype=np.int64)


def _select_xq(con, stmt: ProbQuery, variables, relations: Mapping[str, str], notes: list[str],
               state: StoreState | None = None) -> dict[str, np.ndarray]:
    by_alias: dict[str, list[str]] = {}
    for est in stmt.estimates:
        by_alias.setdefault(est.alias, []).append(est.placeholder)
    out: dict[str, np.ndarray] = {}
    for alias, placeholders in by_alias.items():
        v = variables[relations[alias]]
        parts = []

        def texts(v=v, alias=alias, placeholders=placeholders) -> list[str]:
            return [sql_text(sel) for sel in xq_selects(stmt.tree, alias, _xq_source(v, placeholders))]

        # the rewritten SELECTs depend on the statement and the definitions only: generated once
        for text in (texts() if state is None else state.remember(("xq", alias), stmt, texts)):
            try:
                d = con.execute(text).fetchnumpy()
                parts.append(np.asarray(d[VID_COLUMN], dtype=np.int64))
            except duckdb.Error as e:
                check_list_types(e, stmt)
                # A scope that cannot run on its own (e.g. correlated with an outer query): every
                # variable of the relation is a query variable (a superset is always correct).
                notes.append(f"x_q for '{alias}' could not be narrowed by its WHERE ({type(e).__name__}); "
                             f"all {v.name} variables are query variables")
                parts.append(_all_vids(con, v.name))
        vids = unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
        out[alias] = vids[vids >= 0]
    return out


def report(progress: ProgressFn | None, phase: str, done: int, total: int | None = None, **kw: Any) -> None:
    if progress is None:
        return
    progress(Progress(phase, done, total, **kw))


def check_cancel(cancel: Any) -> None:
    if cancel is not None:
        cancel.check()


def build_graph(db, plan_args: dict, seeds: np.ndarray, evidence: EvidenceSet, progress, cancel):
    con = db.duckdb
    t0 = time.perf_counter()
    report(progress, "grounding", 0)
    if not seeds.size:
        return None, np.zeros(0, np.int64), None, 0.0, None
    cache = getattr(db, "graph_cache", None)
    graph, vids, stats = _store_query_graph(
        con, plan_args["variables"], plan_args["rules"], seeds, evidence.as_tuple(), config=GroundingConfig(), cache=cache,
        prepared=plan_args.get("prepared"), token=plan_args.get("token"),
    )
    secs = time.perf_counter() - t0
    report(progress, "grounding", 1, 1, elapsed=secs)
    check_cancel(cancel)
    memo = cache.memo(graph) if cache is not None else None
    return graph, np.asarray(vids, dtype=np.int64), stats, secs, memo


def plan_query(db: Session, stmt: ProbQuery, *, progress: ProgressFn | None = None, cancel: Any = None,
               definitions: tuple[dict, dict] | None = None, started: float | None = None) -> Plan:
    """x_q, x_e and the pruned graph of ``stmt`` (grounds what the query reaches).

    ``definitions``: the catalog's ``(variables, rules)`` when the caller just read them.
    ``started`` (`time.perf_counter`): when the query began. With it, a ``time_limit`` the user set
    bounds planning too: a step still running at the deadline is interrupted and rolled back, and
    `pdbq.errors.TimeLimitError` names it (`pdbq.grounding.deadline`)."""
    options = QueryOptions.from_pairs(stmt.options, getattr(db, "default_options", None))
    explicit = frozenset(name for name, _ in stmt.options)
    if stmt.tree is None:
        raise PdbqError("internal: a ProbQuery without its tree (parse it with pdbq.language)")
    if not stmt.estimates:
        raise PdbqError("a probabilistic query needs at least one PROB, DIST, MAP or STDERR call")
    guard = None
    if started is not None and (options.time_limit is not None or cancel is not None):
        guard = PlanningDeadline(db.duckdb, started=started,
                                 limit=options.time_limit if options.time_limit is not None else math.inf,
                                 stage="reading the catalog, syncing the variables' vid maps and fingerprinting the data",
                                 grace=PREPARE_GRACE, cancel=cancel)
    kept = kept_state(db)
    with guard if guard is not None else contextlib.nullcontext():
        # a kept check means no statement ran since the store's tables were last seen: no lookup
        with schema_known(db.duckdb, assume=kept is not None):
            if kept is None:  # interrupted here: TimeLimitError (no keys to answer NULL for)
                state, _ = checked_store(db, with_token=getattr(db, "graph_cache", None) is not None,
                                         definitions=definitions)
            else:
                state = kept
            return _plan_query(db, stmt, options, explicit, progress, cancel, state, kept is not None, guard)


def _timed_out(stmt: ProbQuery, options: QueryOptions, explicit: frozenset[str], variables, relations,
               prepared: Prepared, guard: PlanningDeadline) -> Plan:
    """The plan of a query whose time limit ran out after the vid maps were current: no graph,
    no query variables; every estimate is NULL (the final SELECT's join finds no estimate)."""
    guard.handled = True
    none = np.zeros(0, np.int64)
    evidence = EvidenceSet(none, np.zeros(0, np.int32), 0, none, 0)
    n_total = sum(i.n for i in prepared.sync.info.values())
    notes = [*prepared.sync.warnings, f"{guard.message()}: every estimate is NULL; {guard.advice()}"]
    return Plan(stmt, options, explicit, variables, relations, {a: none for a in relations}, none, evidence, None,
                none, n_total, None, 0.0, notes, None, timed_out=guard.stage)


def _plan_query(db: Session, stmt: ProbQuery, options: QueryOptions, explicit: frozenset[str], progress, cancel,
                state: StoreState, kept: bool, guard: PlanningDeadline | None = None) -> Plan:
    variables, rules = state.variables, state.rules
    calls = {}
    for est in stmt.estimates:
        calls.setdefault(est.alias, call_text(est))
    relations = check_aliases(stmt.tree, calls, set(variables))
    for est in stmt.estimates:
        check_estimate(est, variables[relations[est.alias]], call_text(est))
    con = db.duckdb
    prepared = state.for_query()
    xq_notes: list[str] = []
    try:
        if guard is not None:
            guard.enter_stage("selecting the query variables")
            if guard.expired():
                return _timed_out(stmt, options, explicit, variables, relations, prepared, guard)
        xq = _select_xq(con, stmt, variables, relations, xq_notes, state)
        if guard is not None:
            guard.enter_stage("reading and checking the evidence")
        stored = state.remember("stored_evidence", state, lambda: stored_evidence(con))
        evidence = resolve_evidence(con, variables, stmt.given, stored,
                                    check=None if cancel is None else cancel.check)
        ev_key = evidence.vids.tobytes() + b"|" + evidence.values.tobytes()
        if not (kept and ev_key in state.possible):
            check_evidence_possible(con, variables, evidence.as_tuple(), prepared.imports)
            state.possible.add(ev_key)
        seeds = unique(np.concatenate(list(xq.values()))) if xq else np.zeros(0, np.int64)
        check_cancel(cancel)
        plan_args = {"variables": variables, "rules": rules, "prepared": prepared, "token": state.token}
        if guard is not None:
            guard.enter_stage("grounding the query's region and building its graph")
            if guard.expired():
                return _timed_out(stmt, options, explicit, variables, relations, prepared, guard)
        graph, gvids, stats, secs, memo = build_graph(db, plan_args, seeds, evidence, progress, cancel)
    except Exception:
        if guard is None or not guard.fired or guard.cancelled:
            raise  # a cancel's interrupt: the guard raises Cancelled
        return _timed_out(stmt, options, explicit, variables, relations, prepared, guard)
    if guard is not None and guard.cancelled:
        raise guard.error()
    if guard is not None and guard.fired:
        # an interrupt was issued as the last step ended: it may have been swallowed below, and
        # sampling has no time left anyway
        return _timed_out(stmt, options, explicit, variables, relations, prepared, guard)
    n_total = sum(i.n for i in prepared.sync.info.values())
    notes = query_notes(prepared, stats)
    notes[len(prepared.sync.warnings):len(prepared.sync.warnings)] = xq_notes
    return Plan(stmt, options, explicit, variables, relations, xq, seeds, evidence, graph, gvids, n_total, stats, secs,
                notes, memo, state)


def scratch(db: Session) -> Any:
    """The database's scratch context (its factor store in memory when it is read-only;
    `pdbq.Database.scratch`), or a no-op for a session without one."""
    make = getattr(db, "scratch", None)
    return make() if make is not None else contextlib.nullcontext()


def query_plan(db: Session, query: str | ProbQuery) -> Plan:
    """The `Plan` of a probabilistic query (its sets and pruned graph, with a graph always
    present); ``query`` is SQL text or a parsed `ProbQuery`. Grounds what the query reaches."""
    if isinstance(query, str):
        from pdbq.language.parser import parse_statement  # noqa: PLC0415

        query = parse_statement(query)
    if not isinstance(query, ProbQuery):
        raise PdbqError("query_graph() needs a probabilistic query (a SELECT with PROB/DIST/MAP/STDERR)")
    with scratch(db):
        plan = plan_query(db, query)
    if plan.graph is None:
        raise PdbqError("the query selects no variables: there is no graph")
    return plan


def query_graph(db: Session, query: str | ProbQuery) -> FactorGraph:
    """The pruned factor graph a probabilistic query runs on (x_q ∪ x_l free, boundary evidence
    clamped); ``query`` is SQL text or a parsed `ProbQuery`. Grounds what the query reaches."""
    return query_plan(db, query).graph


def vid_labels(con: duckdb.DuckDBPyConnection, vids: np.ndarray) -> dict[int, str]:
    """Global vid -> ``relation(key, ...)`` for messages."""
    out: dict[int, str] = {}
    if not vids.size:
        return out
    for relation, rel in vids_to_keys(con, vids).items():
        cols = [c for c in rel.columns if c not in ("pos", "vid", "cardinality")]
        for row in rel.select(", ".join(sql_text(ident(c)) for c in ["vid", *cols])).fetchall():
            out[int(row[0])] = f"{relation}({', '.join(repr(k) for k in row[1:])})"
    return out


def semantics_warnings_of(plan: Plan, con: duckdb.DuckDBPyConnection | None = None) -> list[str]:
    """Seed 004 Theorem 1 warnings for the plan's graph, each naming its rule (and, given the
    connection, the head variable by relation and key)."""
    graph = plan.graph
    if graph is None or graph.n_factors == 0:
        return []
    try:
        from pdbq.analysis import semantics_warnings  # noqa: PLC0415
    except ImportError:
        return []
    def make() -> tuple[str, ...]:
        from pdbq.analysis.advice import candidate_factors  # noqa: PLC0415

        if candidate_factors(graph).size == 0:  # no vote to count: skip the per-factor rule array
            return ()
        spans = plan.grounding.weight_rules if plan.grounding is not None else ()
        factor_rule, names = factor_rules(graph, spans)
        label = None
        if con is not None:
            def label(v: int) -> str:
                gv = int(plan.graph_vids[v])
                return vid_labels(con, np.array([gv], dtype=np.int64)).get(gv, f"vid {gv}")
        return tuple(semantics_warnings(graph, names, factor_rule=factor_rule, var_label=label))

    # the graph (hence its vids and keys) is fixed for a cached entry: compute once
    warnings = make() if plan.memo is None or con is None else plan.memo.get_or_make("semantics_warnings", make)
    return list(warnings) + evidence_notes_of(plan)


def evidence_notes_of(plan: Plan) -> list[str]:
    """A note per rule the evidence satisfies in every grounding the query reaches
    (`pdbq.analysis.evidence`): whatever the method, its answer is right, and the rule is inert."""
    graph = plan.graph
    if graph is None or graph.n_factors == 0:
        return []

    def make() -> tuple[str, ...]:
        from pdbq.analysis.evidence import rules_satisfied_by_evidence  # noqa: PLC0415

        spans = plan.grounding.weight_rules if plan.grounding is not None else ()
        factor_rule, names = factor_rules(graph, spans)
        return tuple(f"rule {names[r]} is satisfied by the evidence for every grounding this query reaches (its "
                     "observed true head makes each grounding true whatever its body): it adds nothing, and evidence "
                     "on its body has no effect through it" for r in rules_satisfied_by_evidence(graph, factor_rule))

    return list(make() if plan.memo is None else plan.memo.get_or_make("satisfied_rules", make))

