"""Full grounding, staleness and the factor store's per-rule tables.

`prepare` brings the store up to date with the definitions and the data without grounding
anything new: vid maps are synced, rules whose definition, observed inputs or variable maps changed
lose their stored factors, moved vids are shifted in place. `ground_all` then grounds every rule
that is not complete. Both run in one DuckDB transaction: a failure leaves the store as it was.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import duckdb
import sqlglot.expressions as exp

from pdbq.catalog.store import transaction
from pdbq.errors import GroundingError
from pdbq.grounding.compile import CompiledRule, compile_cached, observed_columns
from pdbq.grounding.imported import ImportInfo, live_imports
from pdbq.grounding.fingerprint import combine, definition_hash, fingerprint_many, fingerprint_relation
from pdbq.grounding.limits import (
    GroundingConfig,
    check_actual,
    check_estimate,
    groundings_that_fit,
    too_large_for_memory,
)
from pdbq.grounding.registry import REGISTRY_ITEMS, registry_rows
from pdbq.grounding.store import ensure_schema, factor_table, ident, schema_known, sql_text, table_ref, table_sql
from pdbq.grounding.variables import VariableSync, sync_variables
from pdbq.language.nodes import CreateRule, CreateVariable, DomainKind, WeightKind

__all__ = [
    "GroundingStats", "Prepared", "prepare", "model_size_bound", "size_bound", "ground_all", "ground_rows", "transaction", "rule_order", "tie_json",
    "store_token",
]


@dataclass
class GroundingStats:
    """What a grounding call did. ``factors``: rule -> stored factor rows after the call."""

    grounded: list[str] = field(default_factory=list)  # rules (re)grounded in full by this call
    reused: list[str] = field(default_factory=list)  # rules whose stored factors were kept
    invalidated: list[str] = field(default_factory=list)  # rules whose stored factors were dropped as stale
    new_factors: int = 0  # factor rows written by this call
    factors: dict[str, int] = field(default_factory=dict)
    rounds: int = 0  # query-driven: frontier rounds run in SQL
    full_fallback: bool = False  # query-driven: region still growing after max rounds -> ground_all
    small_model: bool = False  # query-driven: the whole model was small enough to ground at once
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    # (rule, first weight index, end) of the graph built from this grounding (pdbq.graph.from_store)
    weight_rules: tuple[tuple[str, int, int], ...] = ()
    # query-driven: "graph" when the query's graph came from the query-graph cache, "model" when its
    # region was found in memory in the cached graph of the whole model; nothing grounded or loaded
    cached: str = ""


@dataclass
class Prepared:
    compiled: dict[str, CompiledRule]
    complete: dict[str, bool]
    sync: VariableSync
    stats: GroundingStats
    imports: list[ImportInfo] = field(default_factory=list)  # live imported models (pdbq.io)
    fresh: set[str] = field(default_factory=set)  # rules whose factor table this call created (empty)
    # with ``defer_fresh``: fresh rules whose table and registry row the grounding creates, with
    # (position, definition hash, inputs fingerprint) for the row
    pending: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    weightless: set[str] = field(default_factory=set)  # fresh rules that have no weight rows
    fingerprints: dict[str, str] = field(default_factory=dict)  # observed table -> fingerprint taken by this call


def model_size_bound(p: Prepared) -> int | None:
    """An upper bound on the whole model's factors (stored ones plus every incomplete rule's
    `size_bound`), or None when a rule's bound is unknown."""
    total = sum(i.n_factors for i in p.imports) + sum(n for r, n in p.stats.factors.items() if p.complete.get(r))
    for name, c in p.compiled.items():
        if p.complete[name]:
            continue
        b = size_bound(p, c)
        if b is None:
            return None
        total += b
    return total


def size_bound(p: Prepared, c: CompiledRule) -> int | None:
    """An upper bound on rule c's groundings from row counts this call has already read (the
    inputs' fingerprints, the vid maps' sizes), or None."""
    total = 1
    for kind, name in c.size_bound:
        if kind == "table":
            fp = p.fingerprints.get(name)
            n = int(fp.split(":", 1)[0]) if fp else None
        else:
            info = p.sync.info.get(name)
            n = info.n if info is not None else None
        if n is None:
            return None
        total *= n
    return total


def rule_order(compiled: Mapping[str, CompiledRule]) -> list[str]:
    """Order of rules' factors in a graph: rules without head groups first, then grouped ones, each
    by name (so sorting a variable's factors by factor id also sorts them by (group, factor))."""
    return sorted(compiled, key=lambda r: (compiled[r].grouped, r))


def _inputs_fp(con, c: CompiledRule, rule: CreateRule, versions: Mapping[str, int], mode: str,
               seen: dict[str, str] | None = None) -> str:
    """``seen``: fingerprints already taken in this call (rules over one table hash it once)."""
    seen = {} if seen is None else seen
    for t in c.observed:
        if t not in seen:
            seen[t] = fingerprint_relation(con, t, mode)
    parts = [definition_hash(rule)]
    parts += [f"{t}={seen[t]}" for t in c.observed]
    parts += [f"{r}@{versions[r]}" for r in sorted(set(c.relations))]
    return combine(parts)


def _inputs(variables: Mapping[str, CreateVariable], compiled: Iterable[CompiledRule]) -> list[tuple[str, str]]:
    """What `prepare` fingerprints (items of `fingerprint_many`): every variable relation's FROM
    and EVIDENCE query, every rule's observed tables. Left out, and taken where they were before:
    anything naming pdbq's own tables (``pdbq_``), which the sync itself writes."""
    items: list[tuple[str, str]] = []
    for name in sorted(variables):
        v = variables[name]
        if v.domain.kind is DomainKind.CLUSTER:
            continue
        items += [("query", q) for q in (v.source, v.evidence) if q]
    for c in compiled:
        items += [("relation", t) for t in c.observed]
    return [it for it in items if "pdbq_" not in it[1].lower()]


def _shift_vids(con, sync: VariableSync, old_ranges: Mapping[str, tuple[int, int]]) -> None:
    """Move vids of stored factors and expansions after relations' bases moved."""
    if sync.shifted:
        cases = " ".join(
            f"WHEN vid >= {ob} AND vid < {ob + n} THEN vid + ({nb - ob})" for ob, n, nb in sync.shifted.values()
        )
        con.execute(f"UPDATE pdbq_fs_expanded SET vid = CASE {cases} ELSE vid END")
    gone = [old_ranges[r] for r in sorted(sync.rebuilt | set(sync.dropped)) if r in old_ranges]
    if gone:
        cond = " OR ".join(f"(vid >= {b} AND vid < {b + n})" for b, n in gone)
        con.execute(f"DELETE FROM pdbq_fs_expanded WHERE {cond}")


def _drop_rule(con, rule: str, keep_weights: bool) -> None:
    con.execute(f"DROP TABLE IF EXISTS {table_sql(factor_table(rule))}")
    con.execute("DELETE FROM pdbq_fs_rules WHERE rule = ?", [rule])
    con.execute("DELETE FROM pdbq_fs_expanded WHERE rule = ?", [rule])
    if not keep_weights:
        con.execute("DELETE FROM pdbq_fs_weights WHERE rule = ?", [rule])


def _register(con, c: CompiledRule, position: int, def_hash: str, fp: str, complete: bool, n: int) -> None:
    """The rule's registry row (the caller has removed any earlier one: `_drop_rule`)."""
    con.execute(
        "INSERT INTO pdbq_fs_rules VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [c.name, position, def_hash, fp, complete, int(c.function), int(c.semantics), c.arity,
         list(c.relations), list(c.literals), c.weight_kind.value, n],
    )


def _learned(con, c: CompiledRule) -> tuple[str, list]:
    """SQL for the initial value of a new weight row of rule c with tying value ``tie``: the
    latest value LEARN WEIGHTS stored for this very definition (catalog table
    pdbq_learned_weights, docs/learning.md), else the rule's written initial value (parameter)."""
    has = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = current_schema() AND table_name = 'pdbq_learned_weights'"
    ).fetchall()[0][0]
    if not has:
        return "?", [c.weight_value]
    return (
        "coalesce((SELECT l.value FROM pdbq_learned_weights l WHERE l.rule = ? "
        "AND l.rule_hash = (SELECT def_hash FROM pdbq_fs_rules WHERE rule = l.rule) "
        "AND l.tie IS NOT DISTINCT FROM d.tie ORDER BY l.version DESC LIMIT 1), ?)",
        [c.name, c.weight_value],
    )


def _sync_weights(con, c: CompiledRule, empty: bool = False) -> None:
    """Weight rows: one for constant/learnable rules, one per new tying value for tied rules.
    ``empty``: the rule is known to have no weight rows yet (no lookup)."""
    if c.weight_kind is WeightKind.CONSTANT:
        if empty or not con.execute("SELECT count(*) FROM pdbq_fs_weights WHERE rule = ?", [c.name]).fetchall()[0][0]:
            con.execute("INSERT INTO pdbq_fs_weights VALUES (?, 0, ?, FALSE, NULL)", [c.name, c.weight_value])
    elif c.weight_kind is WeightKind.LEARNABLE:
        if empty or not con.execute("SELECT count(*) FROM pdbq_fs_weights WHERE rule = ?", [c.name]).fetchall()[0][0]:
            value, params = _learned(con, c)
            con.execute(
                f"INSERT INTO pdbq_fs_weights SELECT ?, 0, {value}, TRUE, NULL FROM (SELECT NULL::VARCHAR AS tie) AS d",
                [c.name, *params],
            )
    elif c.weight_kind is WeightKind.TIED:
        # Bound parameters for the rule name; the tie expression is a tree over quoted identifiers.
        value, params = _learned(con, c)
        d = exp.Subquery(
            this=exp.select(exp.alias_(tie_json(c.tie_columns), "tie")).distinct().from_(table_ref(factor_table(c.name))),
            alias=exp.TableAlias(this=ident("d")),
        )
        con.execute(
            f"""INSERT INTO pdbq_fs_weights
            SELECT ?, (SELECT coalesce(max(wid) + 1, 0) FROM pdbq_fs_weights WHERE rule = ?) + row_number() OVER (ORDER BY tie) - 1,
                   {value}, TRUE, tie
            FROM {sql_text(d)}
            WHERE tie NOT IN (SELECT tie FROM pdbq_fs_weights WHERE rule = ? AND tie IS NOT NULL)""",
            [c.name, c.name, *params, c.name],
        )


def tie_json(tie_columns: tuple[str, ...] | list[str], table: str | None = None) -> exp.Expression:
    """A tied rule's tying value as JSON text, ``{"sym": value, ...}`` (columns ``t_<sym>``), as a
    sqlglot tree: symbol names are string literals and quoted identifiers, never pasted text."""
    fields = [
        exp.PropertyEQ(this=exp.Literal.string(t[2:]), expression=exp.Column(this=ident(t), table=ident(table) if table else None))
        for t in tie_columns
    ]
    return exp.Cast(this=exp.func("to_json", exp.Struct(expressions=fields)), to=exp.DataType.build("VARCHAR"))


def _check_rows(con, c: CompiledRule, where: str = "") -> None:
    if c.has_w:
        t = table_sql(factor_table(c.name))
        bad = con.execute(f"SELECT count(*) FROM {t} WHERE (w IS NULL OR NOT isfinite(w)) {where}").fetchall()[0][0]
        if bad:
            raise GroundingError(f"rule '{c.name}': the weight expression is NULL or not finite for {bad} groundings")


def _create_factor_table(con, c: CompiledRule) -> None:
    """An empty factor table with the grounding SELECT's column types.

    Explicit column definitions, not ``CREATE TABLE AS ... LIMIT 0``: in DuckDB 2.0 an empty CTAS
    followed in the same transaction by an INSERT of more than a row group loses the inserted rows
    (count(*) reports them, scans return none); see docs/grounding.md.
    """
    described = con.execute("DESCRIBE " + c.select_text).fetchall()
    schema = exp.Schema(
        this=table_ref(factor_table(c.name)),
        expressions=[exp.ColumnDef(this=ident(r[0]), kind=exp.DataType.build(r[1], dialect="duckdb")) for r in described],
    )
    # OR REPLACE: a table left by an older pdbq (the registry row was the only record) goes
    con.execute(sql_text(exp.Create(this=schema, kind="TABLE", replace=True)))


def prepare(
    con: duckdb.DuckDBPyConnection,
    variables: Mapping[str, CreateVariable],
    rules: Mapping[str, CreateRule],
    config: GroundingConfig = GroundingConfig(),
    *,
    defer_fresh: bool = False,
) -> Prepared:
    """Sync vid maps and drop stale groundings (call inside a transaction). Grounds nothing.

    A rule with no current groundings gets an empty factor table and a registry row, unless
    ``defer_fresh`` (`ground_all`, which grounds it next): then both are left to the grounding
    (one CREATE TABLE AS), and the rule is listed in ``Prepared.pending``."""
    t0 = time.perf_counter()
    ensure_schema(con)
    # rules over cluster relations ground into pdbq.coref's pair graph, not the factor store
    clusters = {k for k, v in variables.items() if v.domain.kind is DomainKind.CLUSTER}
    rules = {k: r for k, r in rules.items() if not any(a.relation.lower() in clusters for a in r.head.atoms)}
    # compiled first (no statement runs): the fingerprints of every input, the variables' FROM and
    # EVIDENCE queries and the rules' observed tables, are then taken in one statement
    lookup = observed_columns(con)
    compiled = {name: compile_cached(rules[name], variables, lookup) for name in sorted(rules)}
    inputs = _inputs(variables, compiled.values())
    # with hashes, the registries' contents too: their rows then come from `registry_rows`' cache
    registries = list(REGISTRY_ITEMS.values()) if config.fingerprint == "hash" else []
    taken = fingerprint_many(con, inputs + registries, config.fingerprint)
    sync = sync_variables(con, variables, config, fingerprints=taken)
    stats = GroundingStats(warnings=list(sync.warnings))
    _shift_vids(con, sync, sync.previous)
    versions = {r: i.map_version for r, i in sync.info.items()}
    # nothing above writes pdbq_fs_rules: its fingerprint still describes it
    stored = {r[0]: r for r in registry_rows(con, "rules", taken.get(REGISTRY_ITEMS["rules"]))}
    for name in sorted(set(stored) - set(rules)):
        _drop_rule(con, name, keep_weights=False)
    order = rule_order(compiled)
    complete: dict[str, bool] = {}
    fresh: set[str] = set()
    pending: dict[str, tuple[int, str, str]] = {}
    weightless: set[str] = set()
    seen = {text: taken[kind, text] for kind, text in inputs if kind == "relation"}
    for pos, name in enumerate(order):
        c = compiled[name]
        dh = definition_hash(rules[name])
        fp = _inputs_fp(con, c, rules[name], versions, config.fingerprint, seen)
        prev = stored.get(name)
        if prev is not None and prev[1] == dh and prev[2] == fp:
            shifts = {i: sync.shifted[r] for i, r in enumerate(c.relations) if r in sync.shifted}
            if shifts:
                sets = ", ".join(f'"v{i}" = "v{i}" + ({nb - ob})' for i, (ob, _n, nb) in shifts.items())
                con.execute(f"UPDATE {table_sql(factor_table(name))} SET {sets}")
            if prev[6] != pos:  # no write when nothing moved (pdbq.planning.store_state counts writes)
                con.execute("UPDATE pdbq_fs_rules SET position = ? WHERE rule = ?", [pos, name])
            complete[name] = bool(prev[3])
            stats.factors[name] = int(prev[5])
            continue
        if prev is not None:  # a rule with no registry row has no table, weights or expansions
            stats.invalidated.append(name)
            _drop_rule(con, name, keep_weights=prev[1] == dh)
        if prev is None or prev[1] != dh:
            weightless.add(name)
        if defer_fresh:
            pending[name] = (pos, dh, fp)
        else:
            _create_factor_table(con, c)
            _register(con, c, pos, dh, fp, False, 0)
        fresh.add(name)
        complete[name] = False
        stats.factors[name] = 0
    imports = live_imports(con, variables, sync.info)
    stats.seconds = time.perf_counter() - t0
    return Prepared(compiled, complete, sync, stats, imports, fresh, pending, weightless, seen)


def store_token(con: duckdb.DuckDBPyConnection, imports: list[ImportInfo]) -> str:
    """A digest of everything graphs are built from, as the store is now: call it in the
    transaction of a `prepare` (which refreshed the fingerprints) and after any grounding.

    Each variable relation's definition hash, FROM and EVIDENCE fingerprints, base, size and map
    version; each rule's definition hash, inputs fingerprint and position; every stored weight
    (rule, wid, value: learning changes values); the live imported models (``imports``).
    `prepare` recomputes the fingerprints from the data, so a change made through plain SQL gives
    a new token. Query graphs built under equal tokens from equal seeds and evidence are equal:
    the query-graph cache (`pdbq.graph.cache`) keys on it. Grounding more of the store (new
    factors, new tied weights) changes the token, so a graph is filed under the token of the
    state it was built from.
    """
    # three plain scans: one statement with list aggregates or subqueries costs DuckDB more
    relations = con.execute(
        "SELECT relation, base, n, def_hash, source_fp, evidence_fp, map_version FROM pdbq_fs_relations ORDER BY relation"
    ).fetchall()
    rules = con.execute("SELECT rule, position, def_hash, inputs_fp FROM pdbq_fs_rules ORDER BY rule").fetchall()
    weights = con.execute("SELECT count(*), sum(hash(rule, wid, value, learnable)) FROM pdbq_fs_weights").fetchall()
    return combine([repr(relations), repr(rules), repr(weights), repr(imports)])


def ground_rows(con, c: CompiledRule, select: exp.Select | None, config: GroundingConfig, *, create: bool = False,
                bound: int | None = None) -> int:
    """Insert the rows of ``select`` (None: the rule's full grounding SELECT) into the rule's
    factor table after the size checks; returns how many were inserted. ``create``: the table
    does not exist yet and is made from the rows (CREATE TABLE AS: the bare join's cost, no
    DESCRIBE and CREATE before it). ``bound``: a known upper bound on the rows; within
    max_groundings, neither the optimizer's estimate nor the LIMIT guard is needed (the count
    of rows written is still checked). Call inside a transaction."""
    fit = groundings_that_fit(c.select if select is None else select, c.arity + 2)
    # the rows written are bounded by what the memory left holds as well as by max_groundings
    cap = min(config.max_groundings, fit)
    if select is None:
        if bound is None or bound > cap:
            check_estimate(con, c.name, c.select, config, c.select_text, c.arity + 2)
            body = c.guarded_text(cap)
        else:
            # the row counts bound the join within max_groundings: the LIMIT could cut nothing,
            # and it costs the CTAS ~3% at 1M rows (docs/benchmarks.md, fourth pass)
            body = c.select_text
    else:
        check_estimate(con, c.name, select, config, columns=c.arity + 2)
        # LIMIT cap + 1 bounds the work of a join the optimizer underestimated.
        body = sql_text(select.copy().limit(cap + 1) if cap < 2**62 else select)
    t = table_sql(factor_table(c.name))
    try:
        # both answer with the number of rows written: no count(*) before and after
        if create:
            n = int(con.execute(f"CREATE OR REPLACE TABLE {t} AS {body}").fetchall()[0][0])
        else:
            n = int(con.execute(f"INSERT INTO {t} {body}").fetchall()[0][0])
    except (duckdb.ConversionException, duckdb.BinderException, duckdb.InvalidInputException,
            duckdb.OutOfRangeException) as e:
        # The data broke the rule's body (a failed implicit cast, ...): name the rule, not the
        # internal tables DuckDB's message is about.
        reason = " ".join(str(e).split("\n")[0].split())
        raise GroundingError(f"rule '{c.name}' cannot be grounded on the current data: {reason}") from None
    check_actual(c.name, n, config)
    if n > fit:
        raise GroundingError(too_large_for_memory(c.name, n - 1, c.select if select is None else select, c.arity + 2))
    return n


def ground_all(
    con: duckdb.DuckDBPyConnection,
    variables: Mapping[str, CreateVariable],
    rules: Mapping[str, CreateRule],
    config: GroundingConfig = GroundingConfig(),
) -> GroundingStats:
    """Ground every rule in full into the factor store; reuse what is still current.

    One transaction: a `GroundingError` (e.g. over ``config.max_groundings``) leaves the store as
    it was. ``Database.ground()`` exposes this.
    """
    t0 = time.perf_counter()
    with transaction(con), schema_known(con):  # the store's fixed tables are looked up once
        p = prepare(con, variables, rules, config, defer_fresh=True)
        stats = p.stats
        for name in rule_order(p.compiled):
            c = p.compiled[name]
            if p.complete[name]:
                stats.reused.append(name)
                continue
            if name in p.pending:
                n = ground_rows(con, c, None, config, create=True, bound=size_bound(p, c))
                _check_rows(con, c)
                _register(con, c, *p.pending[name], True, n)
            else:  # a partly grounded rule (query-driven): ground it again in full
                con.execute(f"DELETE FROM {table_sql(factor_table(name))}")
                con.execute("DELETE FROM pdbq_fs_expanded WHERE rule = ?", [name])
                n = ground_rows(con, c, None, config, bound=size_bound(p, c))
                _check_rows(con, c)
                con.execute("UPDATE pdbq_fs_rules SET complete = TRUE, n_factors = ? WHERE rule = ?", [n, name])
            _sync_weights(con, c, empty=name in p.weightless)
            stats.grounded.append(name)
            stats.new_factors += n
            stats.factors[name] = n
    stats.seconds = time.perf_counter() - t0
    return stats
