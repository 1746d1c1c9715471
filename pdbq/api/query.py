"""The query engine: a parsed `ProbQuery` → (x_q, x_e, x_l) → inference → a `Result`.

1. **x_q**: the variables of the relations inside PROB/DIST/MAP/STDERR that the query's FROM/WHERE
   selects, evaluated by DuckDB on a rewritten tree (`pdbq.answers.rewrite.xq_selects`).
2. **x_e**: stored evidence plus GIVEN (`pdbq.answers.evidence.resolve_evidence`).
3. **x_l**: what query-driven grounding reaches from x_q through non-evidence variables
   (`pdbq.graph.from_store.query_graph`); everything else is never grounded, loaded or sampled.
4. Inference on that graph (`pdbq.answers.engine.answer`), estimates as Arrow tables, and the
   user's SELECT evaluated by DuckDB with each estimate alias's table reference replaced by the
   key columns plus the estimate columns.

Python entry points: `execute_query` (what ``Database.execute`` calls), `infer` (one inference
for a batch of keys, used by the DuckDB UDFs), `query_graph` (the pruned graph, for analysis).
docs/queries.md is the user documentation.

>>> import pdbq
>>> db = pdbq.connect()
>>> db.execute("CREATE TABLE t AS SELECT * FROM range(3) r(i)")
>>> db.execute("CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t)")
>>> db.execute("CREATE RULE r WEIGHT 1.0 FUNCTION ISTRUE AS x(i) :- t(i)")
>>> round(db.execute("SELECT PROB(a) AS p FROM x a WHERE a.i = 1 USING EXACT").fetchall()[0][0], 4)
0.8808
>>> inf = infer(db, {"x": [(0,), (2,)]}, method=Method.EXACT)
>>> inf["x"].prob().round(4).tolist()
[0.8808, 0.8808]
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import sqlglot.expressions as exp

from pdbq.arrays import unique
from pdbq.answers.engine import EngineAnswer, answer
from pdbq.answers.estimates import Marginals, check_estimate, domain_labels, estimates_table, value_array
from pdbq.answers.evidence import EvidenceSet, python_literal, resolve_evidence
from pdbq.answers.rewrite import PLACEHOLDER_PREFIX, VID_COLUMN, check_aliases, xq_selects, substitute
from pdbq.api.options import QueryOptions
from pdbq.api.result import Result
from pdbq.errors import CatalogError, InferenceError, PdbqError, suggest
from pdbq.graph.cache import Memo
from pdbq.graph.from_store import factor_rules
from pdbq.graph.from_store import query_graph as _store_query_graph
from pdbq.graph.layout import FactorGraph
from pdbq.grounding.ground import GroundingStats, transaction
from pdbq.grounding.limits import GroundingConfig
from pdbq.grounding.store import col, ident, sql_text, table_ref, var_table
from pdbq.grounding.variables import keys_to_vids, relation_info, sync_variables, vids_to_keys
from pdbq.inference.gibbs import RoundInfo
from pdbq.language.nodes import CreateVariable, DomainKind, Estimate, EstimateKind, GivenAtom, GivenQuery, Method, ProbQuery

__all__ = ["execute_query", "infer", "query_graph", "query_plan", "semantics_warnings_of", "vid_labels", "Inference", "RelationAnswers", "Plan", "plan_query"]

ProgressFn = Callable[[Any], None]


# ---------------------------------------------------------------------------------------- planning


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


def _call_text(est: Estimate) -> str:
    return f"{est.kind.value}({est.alias}{' = ' + est.value if est.value is not None else ''})"


def _sync(con: duckdb.DuckDBPyConnection, variables: Mapping[str, CreateVariable]) -> list[str]:
    with transaction(con):
        return list(sync_variables(con, variables, GroundingConfig()).warnings)


def _map_select(v: CreateVariable, extra: Sequence[exp.Expression], source_alias: str = "__pdbq_m") -> exp.Select:
    keys = [col(c.name, source_alias).as_(ident(c.name)) for c in v.columns]
    return exp.select(*keys, *extra).from_(table_ref(var_table(v.name), source_alias))


def _xq_source(v: CreateVariable, placeholders: Sequence[str]) -> Callable[[Any], exp.Expression]:
    def make(alias: exp.TableAlias | str) -> exp.Expression:
        extra = [col("vid", "__pdbq_m").as_(ident(VID_COLUMN))]
        extra += [exp.Null().as_(ident(p)) for p in placeholders]
        a = alias.copy() if isinstance(alias, exp.TableAlias) else exp.TableAlias(this=exp.to_identifier(alias))
        return exp.Subquery(this=_map_select(v, extra), alias=a)

    return make


def _final_source(v: CreateVariable, placeholders: Sequence[str], arrow_name: str) -> Callable[[Any], exp.Expression]:
    def make(alias: exp.TableAlias | str) -> exp.Expression:
        extra = [col(p, "__pdbq_e").as_(ident(p)) for p in placeholders]
        sel = _map_select(v, extra).join(
            table_ref(arrow_name, "__pdbq_e"),
            on=exp.EQ(this=col("vid", "__pdbq_m"), expression=col(VID_COLUMN, "__pdbq_e")),
            join_type="LEFT",
        )
        a = alias.copy() if isinstance(alias, exp.TableAlias) else exp.TableAlias(this=exp.to_identifier(alias))
        return exp.Subquery(this=sel, alias=a)

    return make


def _all_vids(con: duckdb.DuckDBPyConnection, relation: str) -> np.ndarray:
    info = relation_info(con)[relation]
    return np.arange(info.base, info.base + info.n, dtype=np.int64)


def _select_xq(con, stmt: ProbQuery, variables, relations: Mapping[str, str], notes: list[str]) -> dict[str, np.ndarray]:
    by_alias: dict[str, list[str]] = {}
    for est in stmt.estimates:
        by_alias.setdefault(est.alias, []).append(est.placeholder)
    out: dict[str, np.ndarray] = {}
    for alias, placeholders in by_alias.items():
        v = variables[relations[alias]]
        parts = []
        for sel in xq_selects(stmt.tree, alias, _xq_source(v, placeholders)):
            try:
                d = con.execute(sql_text(sel)).fetchnumpy()
                parts.append(np.asarray(d[VID_COLUMN], dtype=np.int64))
            except duckdb.Error as e:
                # A scope that cannot run on its own (e.g. correlated with an outer query): every
                # variable of the relation is a query variable (a superset is always correct).
                notes.append(f"x_q for '{alias}' could not be narrowed by its WHERE ({type(e).__name__}); "
                             f"all {v.name} variables are query variables")
                parts.append(_all_vids(con, v.name))
        vids = unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
        out[alias] = vids[vids >= 0]
    return out


def _report(progress: ProgressFn | None, phase: str, done: int, total: int | None = None, **kw: Any) -> None:
    if progress is None:
        return
    from pdbq.api.progress import Progress  # noqa: PLC0415

    progress(Progress(phase, done, total, **kw))


def _check_cancel(cancel: Any) -> None:
    if cancel is not None:
        cancel.check()


def _build_graph(db, plan_args: dict, seeds: np.ndarray, evidence: EvidenceSet, progress, cancel):
    con = db.duckdb
    t0 = time.perf_counter()
    _report(progress, "grounding", 0)
    if not seeds.size:
        return None, np.zeros(0, np.int64), None, 0.0, None
    cache = getattr(db, "graph_cache", None)
    graph, vids, stats = _store_query_graph(
        con, plan_args["variables"], plan_args["rules"], seeds, evidence.as_tuple(), config=GroundingConfig(), cache=cache
    )
    secs = time.perf_counter() - t0
    _report(progress, "grounding", 1, 1, elapsed=secs)
    _check_cancel(cancel)
    memo = cache.memo(graph) if cache is not None else None
    return graph, np.asarray(vids, dtype=np.int64), stats, secs, memo


def plan_query(db, stmt: ProbQuery, *, progress: ProgressFn | None = None, cancel: Any = None) -> Plan:
    """x_q, x_e and the pruned graph of ``stmt`` (grounds what the query reaches)."""
    options = QueryOptions.from_pairs(stmt.options, getattr(db, "default_options", None))
    explicit = frozenset(name for name, _ in stmt.options)
    if stmt.tree is None:
        raise PdbqError("internal: a ProbQuery without its tree (parse it with pdbq.language)")
    if not stmt.estimates:
        raise PdbqError("a probabilistic query needs at least one PROB, DIST, MAP or STDERR call")
    catalog = db.catalog
    variables = catalog.variables()
    rules = catalog.rules()
    calls = {}
    for est in stmt.estimates:
        calls.setdefault(est.alias, _call_text(est))
    relations = check_aliases(stmt.tree, calls, set(variables))
    for est in stmt.estimates:
        check_estimate(est, variables[relations[est.alias]], _call_text(est))
    con = db.duckdb
    notes = _sync(con, variables)
    xq = _select_xq(con, stmt, variables, relations, notes)
    evidence = resolve_evidence(con, variables, stmt.given)
    seeds = unique(np.concatenate(list(xq.values()))) if xq else np.zeros(0, np.int64)
    _check_cancel(cancel)
    graph, gvids, stats, secs, memo = _build_graph(db, {"variables": variables, "rules": rules}, seeds, evidence, progress, cancel)
    n_total = sum(i.n for i in relation_info(con).values())
    if stats is not None:
        notes += list(stats.warnings)
    return Plan(stmt, options, explicit, variables, relations, xq, seeds, evidence, graph, gvids, n_total, stats, secs,
                notes, memo)


def query_plan(db, query: str | ProbQuery) -> Plan:
    """The `Plan` of a probabilistic query (its sets and pruned graph, with a graph always
    present); ``query`` is SQL text or a parsed `ProbQuery`. Grounds what the query reaches."""
    if isinstance(query, str):
        from pdbq.language.parser import parse_statement  # noqa: PLC0415

        query = parse_statement(query)
    if not isinstance(query, ProbQuery):
        raise PdbqError("query_graph() needs a probabilistic query (a SELECT with PROB/DIST/MAP/STDERR)")
    plan = plan_query(db, query)
    if plan.graph is None:
        raise PdbqError("the query selects no variables: there is no graph")
    return plan


def query_graph(db, query: str | ProbQuery) -> FactorGraph:
    """The pruned factor graph a probabilistic query runs on (x_q ∪ x_l free, boundary evidence
    clamped); ``query`` is SQL text or a parsed `ProbQuery`. Grounds what the query reaches."""
    return query_plan(db, query).graph


# ---------------------------------------------------------------------------------------- running


def _round_callback(progress: ProgressFn | None, cancel: Any):
    if progress is None and cancel is None:
        return None

    def on_round(info: RoundInfo, total: int | None, tolerance: float | None) -> None:
        if progress is not None:
            se = info.max_stderr if np.isfinite(info.max_stderr) else None
            _report(progress, "sampling", int(info.steps), total, max_stderr=se,
                    tolerance=None if tolerance is None else tolerance / 1.96, elapsed=info.elapsed)
        _check_cancel(cancel)

    return on_round


def vid_labels(con: duckdb.DuckDBPyConnection, vids: np.ndarray) -> dict[int, str]:
    """Global vid -> ``relation(key, ...)`` for messages."""
    out: dict[int, str] = {}
    if not vids.size:
        return out
    for relation, rel in vids_to_keys(con, vids).items():
        cols = [c for c in rel.columns if c not in ("pos", "vid", "cardinality")]
        for row in rel.select(", ".join(["vid"] + [f'"{c}"' for c in cols])).fetchall():
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
    return list(warnings)


def _run(plan: Plan, method: Method, *, need_marginals: bool, need_map: bool, progress, cancel) -> EngineAnswer | None:
    if plan.graph is None:
        return None
    return answer(
        plan.graph, plan.local, method, plan.options, need_marginals=need_marginals, need_map=need_map,
        explicit=plan.explicit, on_round=_round_callback(progress, cancel), memo=plan.memo,
    )


def _diagnostics(plan: Plan, ans: EngineAnswer | None, started: float, con: duckdb.DuckDBPyConnection | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {}
    d["method"] = ans.method if ans else "NONE"
    d["method_reason"] = ans.reason if ans else "the query selects no variables"
    d.update(plan.counts())
    d["selection"] = ans.selection if ans else None
    d["selection_query_share"] = ans.query_share if ans else None
    d["steps"] = ans.steps if ans else 0
    d["burn_in"] = ans.burn_in if ans else 0
    d["chains"] = ans.chains if ans else 0
    d["seed"] = ans.seed if ans else None
    d["rhat_max"] = ans.rhat_max if ans else None
    d["ess_min"] = ans.ess_min if ans else None
    d["max_stderr"] = ans.max_stderr if ans else None
    d["graph_cached"] = bool(plan.grounding is not None and plan.grounding.cached)
    d["grounding_seconds"] = plan.grounding_seconds
    d["inference_seconds"] = ans.seconds if ans else 0.0
    d["seconds"] = time.perf_counter() - started
    warnings = list(plan.notes)
    if ans is not None:
        warnings += ans.warnings
        if ans.method in ("QAM", "GIBBS"):
            warnings += semantics_warnings_of(plan, con)
    d["warnings"] = warnings
    if ans is not None and ans.trace is not None:
        d["trace"] = ans.trace
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


def execute_query(db, stmt: ProbQuery, *, progress: ProgressFn | None = None, cancel: Any = None) -> Result:
    """Answer a probabilistic query (or its EXPLAIN) on ``db``; what ``Database.execute`` calls.

    ``progress``: a callable taking `pdbq.api.progress.Progress` (called after grounding and each
    sampling round); ``cancel``: a `pdbq.api.progress.CancelToken` polled between rounds.
    """
    from pdbq.api.coref_query import execute_cluster_query, is_cluster_query  # noqa: PLC0415

    if is_cluster_query(db, stmt):  # DOMAIN CLUSTER relations: entity moves, not Gibbs
        return execute_cluster_query(db, stmt)
    if stmt.explain:
        from pdbq.api.explain import explain  # noqa: PLC0415

        return explain(db, stmt, progress=progress, cancel=cancel)
    started = time.perf_counter()
    plan = plan_query(db, stmt, progress=progress, cancel=cancel)
    kinds = {e.kind for e in stmt.estimates}
    need_map = EstimateKind.MAP in kinds
    need_marginals = bool(kinds - {EstimateKind.MAP})
    ans = _run(plan, stmt.method, need_marginals=need_marginals, need_map=need_map, progress=progress, cancel=cancel)
    con = db.duckdb
    sources = {}
    names = []
    try:
        for alias, relation in plan.relations.items():
            v = plan.variables[relation]
            ests = [e for e in stmt.estimates if e.alias == alias]
            m = _alias_answers(plan, ans, alias)
            table = estimates_table([(e, check_estimate(e, v, _call_text(e))) for e in ests], v.domain, m, VID_COLUMN)
            name = f"__pdbq_estimates_{uuid.uuid4().hex}"
            con.register(name, table)
            names.append(name)
            sources[alias] = _final_source(v, [e.placeholder for e in ests], name)
        final = substitute(stmt.tree, sources)
        out = con.sql(sql_text(final)).to_arrow_table()
    finally:
        for name in names:
            con.unregister(name)
    keep = [c for c in out.column_names if not (c.startswith(PLACEHOLDER_PREFIX) or c == VID_COLUMN)]
    if len(keep) != len(out.column_names):
        out = out.select(keep)
    return Result(out, _diagnostics(plan, ans, started, con), connection=con)


# ---------------------------------------------------------------------------------------- infer()


@dataclass(frozen=True, eq=False)
class RelationAnswers:
    """Answers for the keys asked of one relation, in the order given (``vids[i] == -1``: the key
    names no variable, asked with ``missing="null"``; its answers are NaN / None)."""

    relation: str
    variable: CreateVariable
    keys: list[tuple]
    vids: np.ndarray
    marginals: np.ndarray  # float64[n, max_card]
    stderrs: np.ndarray  # float64[n, max_card]
    map_values: np.ndarray | None  # int64[n] internal values, -1 where missing
    cardinality: np.ndarray  # int64[n], 0 where missing

    def _value_index(self, value: Any) -> int:
        from pdbq.grounding.variables import domain_index  # noqa: PLC0415

        try:
            return domain_index(self.variable.domain, python_literal(value), what=f"PROB({self.relation} = {value!r})")
        except PdbqError as e:
            raise InferenceError(str(e)) from None

    def prob(self, value: Any = None) -> np.ndarray:
        """P(true) for booleans (``value`` None), else P(variable = value); NaN for missing keys."""
        if value is None:
            est = Estimate(EstimateKind.PROB, self.relation)
            idx = check_estimate(est, self.variable, f"PROB({self.relation})")
        else:
            idx = self._value_index(value)
        out = self.marginals[:, idx].astype(np.float64) if idx < self.marginals.shape[1] else np.zeros(len(self.keys))
        return np.where(self.vids >= 0, out, np.nan)

    def stderr(self) -> np.ndarray:
        """Standard error of P(true) for booleans, the largest per-value one otherwise."""
        from pdbq.language.nodes import DomainKind  # noqa: PLC0415

        se = self.stderrs[:, 1] if self.variable.domain.kind is DomainKind.BOOLEAN else self.stderrs.max(axis=1)
        return np.where(self.vids >= 0, se, np.nan)

    def dist(self) -> list[dict | None]:
        """Per key: {value: probability} in domain order (None for missing keys)."""
        out: list[dict | None] = []
        labels = domain_labels(self.variable.domain, self.marginals.shape[1])
        for i, vid in enumerate(self.vids.tolist()):
            if vid < 0:
                out.append(None)
                continue
            k = int(self.cardinality[i])
            out.append({labels[j]: float(self.marginals[i, j]) for j in range(k)})
        return out

    def map(self) -> list:
        """Per key: the MAP value (joint MAP with EXACT/ANNEAL, the marginal's arg-max otherwise)."""
        if self.map_values is None:
            raise InferenceError("MAP values were not computed: call infer(..., map=True)")
        vals = value_array(self.variable.domain, np.maximum(self.map_values, 0)).to_pylist()
        return [v if vid >= 0 else None for v, vid in zip(vals, self.vids.tolist())]


@dataclass(frozen=True, eq=False)
class Inference:
    """One inference answering every key asked: ``inference[relation]`` → `RelationAnswers`;
    ``diagnostics`` as in `Result.diagnostics`."""

    answers: dict[str, RelationAnswers]
    diagnostics: dict[str, Any]

    def __getitem__(self, relation: str) -> RelationAnswers:
        try:
            return self.answers[relation.lower()]
        except KeyError:
            raise CatalogError(f"no answers for '{relation}'; asked: {', '.join(self.answers)}") from None


def _given_items(given: Iterable[Any]) -> list[GivenAtom | GivenQuery]:
    out: list[GivenAtom | GivenQuery] = []
    for g in given:
        if isinstance(g, (GivenAtom, GivenQuery)):
            out.append(g)
            continue
        try:
            relation, key, value = g
        except (TypeError, ValueError):
            raise PdbqError(f"given items are GivenAtom/GivenQuery or (relation, key tuple, value), got {g!r}") from None
        key = tuple(key) if isinstance(key, (tuple, list)) else (key,)
        out.append(GivenAtom(str(relation).lower(), tuple(python_literal(k) for k in key), python_literal(value)))
    return out


def infer(
    db,
    targets: Mapping[str, Sequence[Any]],
    *,
    given: Iterable[Any] = (),
    method: Method | str = Method.AUTO,
    options: QueryOptions | Mapping[str, Any] | None = None,
    map: bool = False,
    missing: str = "error",
    progress: ProgressFn | None = None,
    cancel: Any = None,
) -> Inference:
    """One query-aware inference for a batch of keys: ``targets`` maps a variable relation to its
    key tuples (a bare value for one-column keys). ``given``: GIVEN items or
    ``(relation, key, value)`` triples with Python values. ``options``: `QueryOptions` or a mapping
    of WITH options (over ``db.default_options``). ``map=True`` also computes MAP values.
    ``missing``: ``"error"`` (a key naming no variable raises `CatalogError`) or ``"null"``.

    >>> # inf = infer(db, {"is_popular": [("Up",), ("Heat",)]}, given=[("is_fan", ("bart",), True)])
    >>> # inf["is_popular"].prob()  -> array([...])
    """
    started = time.perf_counter()
    if isinstance(method, str):
        try:
            method = Method(method.upper())
        except ValueError:
            raise PdbqError(f"unknown method {method!r}; valid: {', '.join(m.value for m in Method)}") from None
    if missing not in ("error", "null"):
        raise PdbqError(f"missing must be 'error' or 'null', got {missing!r}")
    if isinstance(options, QueryOptions):
        opts, explicit = options, frozenset()
    else:
        pairs = tuple((str(k).lower(), v) for k, v in (options or {}).items())
        opts = QueryOptions.from_pairs(pairs, getattr(db, "default_options", None))
        explicit = frozenset(k for k, _ in pairs)
    catalog = db.catalog
    variables = catalog.variables()
    rules = catalog.rules()
    con = db.duckdb
    notes = _sync(con, variables)
    asked: dict[str, tuple[list[tuple], np.ndarray]] = {}
    for rel, keys in targets.items():
        name = str(rel).lower()
        if name not in variables:
            raise CatalogError(f"'{rel}' is not a variable relation.{suggest(name, variables)}")
        if variables[name].domain.kind is DomainKind.CLUSTER:
            raise InferenceError(f"'{name}' is a DOMAIN CLUSTER relation: ask it with a query (MAP / PROB(e = k) / DIST)")
        tuples = [tuple(k) if isinstance(k, (tuple, list)) else (k,) for k in keys]
        n = len(variables[name].columns)
        for k in tuples:
            if len(k) != n:
                raise CatalogError(f"{name} has {n} key column{'s' if n != 1 else ''}, got the key {k!r}")
        vids = keys_to_vids(con, name, tuples).astype(np.int64) if tuples else np.zeros(0, np.int64)
        if missing == "error" and (vids < 0).any():
            bad = tuples[int(np.flatnonzero(vids < 0)[0])]
            raise CatalogError(f"{name}{bad!r}: no variable of {name} has this key")
        asked[name] = (tuples, vids)
    evidence = resolve_evidence(con, variables, _given_items(given))
    every = [v[v >= 0] for _, v in asked.values()]
    seeds = unique(np.concatenate(every)) if every else np.zeros(0, np.int64)
    graph, gvids, stats, secs, memo = _build_graph(db, {"variables": variables, "rules": rules}, seeds, evidence, progress, cancel)
    n_total = sum(i.n for i in relation_info(con).values())
    plan = Plan(None, opts, explicit, variables, {}, {}, seeds, evidence, graph, gvids, n_total, stats, secs, notes, memo)
    ans = _run(plan, method, need_marginals=method is not Method.ANNEAL, need_map=map, progress=progress, cancel=cancel)
    out: dict[str, RelationAnswers] = {}
    for name, (tuples, vids) in asked.items():
        v = variables[name]
        kmax = ans.result.marginals.shape[1] if ans is not None else 2
        marg = np.full((len(tuples), kmax), np.nan)
        se = np.full((len(tuples), kmax), np.nan)
        mapv = np.full(len(tuples), -1, dtype=np.int64) if map else None
        card = np.zeros(len(tuples), dtype=np.int64)
        hit = vids >= 0
        if ans is not None and hit.any():
            rows = np.searchsorted(seeds, vids[hit])
            marg[hit] = ans.result.marginals[rows]
            se[hit] = ans.result.stderr[rows]
            card[hit] = ans.result.cardinality[rows]
            if map and ans.result.map_values is not None:
                mapv[hit] = ans.result.map_values[rows]
        out[name] = RelationAnswers(name, v, tuples, vids, marg, se, mapv, card)
    return Inference(out, _diagnostics(plan, ans, started, con))
