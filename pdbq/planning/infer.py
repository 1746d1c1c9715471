"""`infer`: one query-aware inference for a batch of keys (the Python inference API, and what the
DuckDB UDFs call once per batch).

>>> import pdbq
>>> db = pdbq.connect()
>>> _ = db.execute("CREATE TABLE t AS SELECT * FROM range(3) r(i)")
>>> _ = db.execute("CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t)")
>>> _ = db.execute("CREATE RULE r WEIGHT 1.0 FUNCTION ISTRUE AS x(i) :- t(i)")
>>> inf = infer(db, {"x": [(0,), (2,)]}, method="EXACT")
>>> inf["x"].prob().round(4).tolist()
[0.8808, 0.8808]
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from pdbq.arrays import unique
from pdbq.answers.warmup import warm_up
from pdbq.answers.feasibility import check_evidence_possible
from pdbq.answers.estimates import check_estimate, clean_stderr, domain_labels, value_array
from pdbq.errors import CatalogError, InferenceError, PdbqError, TimeLimitError
from pdbq.grounding.variables import domain_index, keys_to_vids
from pdbq.language.nodes import CreateVariable, DomainKind, Estimate, EstimateKind, GivenAtom, GivenQuery, Method
from pdbq.grounding.deadline import PREPARE_GRACE, PlanningDeadline
from pdbq.planning.evidence import EvidenceSet, python_literal, resolve_evidence
from pdbq.planning.execute import diagnostics, run_plan
from pdbq.planning.options import QueryOptions
from pdbq.planning.plan import Plan, ProgressFn, Session, build_graph, prepare_store, query_notes, scratch
from pdbq.planning.shapes import normalize_given, normalize_targets
from pdbq.progress import watch_compiles

__all__ = ["infer", "Inference", "RelationAnswers"]


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

    def stderr(self, value: Any = None) -> np.ndarray:
        """Standard error of ``prob(value)``; with no value: of P(true) for booleans, the largest
        per-value one otherwise."""
        if value is not None:
            idx = self._value_index(value)
            se = self.stderrs[:, idx] if idx < self.stderrs.shape[1] else np.zeros(len(self.keys))
        elif self.variable.domain.kind is DomainKind.BOOLEAN:
            se = self.stderrs[:, 1]
        else:
            se = self.stderrs.max(axis=1)
        return np.where(self.vids >= 0, clean_stderr(se), np.nan)

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


def infer(db: Session, *args: Any, **kwargs: Any) -> Inference:
    with scratch(db):  # a read-only database answers through its in-memory scratch store
        return _infer(db, *args, **kwargs)


def _infer(
    db: Session,
    targets: Mapping[str, Any] | Iterable[tuple[str, Any]],
    *,
    given: Any = (),
    method: Method | str = Method.AUTO,
    options: QueryOptions | Mapping[str, Any] | None = None,
    map: bool = False,
    missing: str = "error",
    progress: ProgressFn | None = None,
    cancel: Any = None,
) -> Inference:
    """One query-aware inference for a batch of keys: ``targets`` maps a variable relation to its
    keys — ``{"smokes": "bob"}``, ``{"smokes": ["bob", "ann"]}``, ``{"knows": ("ann", "bob")}``
    — or is a list of ``(relation, key)`` pairs (`pdbq.planning.shapes`). ``given``: evidence as
    ``{"smokes": {"ann": True}}``, ``{("smokes", "ann"): True}``, GIVEN items or
    ``(relation, key, value)`` triples with Python values. ``options``: `QueryOptions` or a mapping
    of WITH options (over ``db.default_options``). ``map=True`` also computes MAP values.
    ``missing``: ``"error"`` (a key naming no variable raises `CatalogError`) or ``"null"``.

    >>> # inf = infer(db, {"is_popular": [("Up",), ("Heat",)]}, given=[("is_fan", ("bart",), True)])
    >>> # inf["is_popular"].prob()  -> array([...])
    """
    with watch_compiles(progress):
        return _infer_watched(db, targets, given, method, options, map, missing, progress, cancel)


def _infer_watched(db, targets, given, method, options, map, missing, progress, cancel) -> Inference:
    # kernels compiled (first use on a machine) or loaded before the clock starts: not the query
    warm_up("plan")
    started, cpu_started = time.perf_counter(), time.process_time()
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
    # a time_limit the caller set bounds planning too, as for SQL queries (pdbq.grounding.deadline)
    guard = None
    if opts.time_limit is not None:
        guard = PlanningDeadline(con, started=started, limit=opts.time_limit,
                                 stage="syncing the variables' vid maps and fingerprinting the data", grace=PREPARE_GRACE)
    with guard if guard is not None else contextlib.nullcontext():
        asked, graph, gvids, stats, secs, memo, prepared, evidence, seeds, late = _plan(
            db, con, variables, rules, targets, given, missing, progress, cancel, guard)
    n_total = sum(i.n for i in prepared.sync.info.values())
    notes = query_notes(prepared, stats) + late
    plan = Plan(None, opts, explicit, variables, {}, {}, seeds, evidence, graph, gvids, n_total, stats, secs, notes, memo)
    return _answer(db, con, plan, method, map, asked, variables, progress, cancel, started, cpu_started)


def _plan(db, con, variables, rules, targets, given, missing, progress, cancel, guard):
    prepared = prepare_store(con, variables, rules)  # interrupted here: TimeLimitError
    if guard is not None:
        guard.enter_stage("finding the asked variables and the evidence")
    try:
        if guard is not None and guard.expired():
            raise guard.error()
        return (*_plan_rest(db, con, variables, rules, targets, given, missing, progress, cancel, guard, prepared), [])
    except Exception as e:
        if guard is None or not (guard.fired or isinstance(e, TimeLimitError)):
            raise
    # the time limit ran out after the vid maps were current: every answer is NULL, with a warning
    guard.handled = True
    guard.stop()  # no more interrupts: the keys are looked up once more below
    asked = _asked(con, variables, targets, missing)
    none = np.zeros(0, np.int64)
    evidence = EvidenceSet(none, np.zeros(0, np.int32), 0, none, 0)
    late = [f"{guard.message()}: every estimate is NULL; {guard.advice()}"]
    return asked, None, none, None, 0.0, None, prepared, evidence, none, late


def _asked(con, variables, targets, missing) -> dict[str, tuple[list[tuple], np.ndarray]]:
    asked: dict[str, tuple[list[tuple], np.ndarray]] = {}
    wanted = normalize_targets(targets, {name: len(v.columns) for name, v in variables.items()})
    for name, tuples in wanted.items():
        if variables[name].domain.kind is DomainKind.CLUSTER:
            raise InferenceError(f"'{name}' is a DOMAIN CLUSTER relation: ask it with a query (MAP / PROB(e = k) / DIST)")
        vids = keys_to_vids(con, name, tuples).astype(np.int64) if tuples else np.zeros(0, np.int64)
        if missing == "error" and (vids < 0).any():
            bad = tuples[int(np.flatnonzero(vids < 0)[0])]
            raise CatalogError(f"{name}{bad!r}: no variable of {name} has this key")
        asked[name] = (tuples, vids)
    return asked


def _plan_rest(db, con, variables, rules, targets, given, missing, progress, cancel, guard, prepared):
    asked = _asked(con, variables, targets, missing)
    evidence = resolve_evidence(con, variables, _given_items(normalize_given(given)))
    check_evidence_possible(con, variables, evidence.as_tuple())
    every = [v[v >= 0] for _, v in asked.values()]
    seeds = unique(np.concatenate(every)) if every else np.zeros(0, np.int64)
    plan_args = {"variables": variables, "rules": rules, "prepared": prepared}
    if guard is not None:
        guard.enter_stage("grounding the asked variables' region and building its graph")
        if guard.expired():
            raise guard.error()
    graph, gvids, stats, secs, memo = build_graph(db, plan_args, seeds, evidence, progress, cancel)
    if guard is not None and guard.fired:
        raise guard.error()
    return asked, graph, gvids, stats, secs, memo, prepared, evidence, seeds


def _answer(db, con, plan, method, map, asked, variables, progress, cancel, started, cpu_started=None):
    ans = run_plan(plan, method, need_marginals=method is not Method.ANNEAL, need_map=map, progress=progress, cancel=cancel,
                   started=started)
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
            rows = np.searchsorted(plan.seeds, vids[hit])
            marg[hit] = ans.result.marginals[rows]
            se[hit] = ans.result.stderr[rows]
            card[hit] = ans.result.cardinality[rows]
            if map and ans.result.map_values is not None:
                mapv[hit] = ans.result.map_values[rows]
        out[name] = RelationAnswers(name, v, tuples, vids, marg, se, mapv, card)
    return Inference(out, diagnostics(plan, ans, started, con, cpu_started))


functools.update_wrapper(infer, _infer)  # infer's signature and documentation are _infer's
