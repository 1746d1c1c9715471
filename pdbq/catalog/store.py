"""The catalog: variable relations and rules, persisted in ``pdbq_*`` tables of the same database.

The tables' DDL is ``sql/catalog.sql`` (shipped as ``pdbq/sql/catalog.sql``), whose header line
``-- schema_version: N`` is the version this library writes. The tables are created by the first
CREATE VARIABLE/RULE, so opening a plain DuckDB file and only querying it never changes it.

Each definition is stored as the statement text as written (re-parsed with
``pdbq.language.parser.parse_statement`` to rebuild the node) plus normalised fields that SHOW
lists and that dependency checks read without parsing. Every variable relation is also a DuckDB
VIEW of the same name over its FROM query's key rows, with the declared key column names: plain
SQL can read it (``SELECT * FROM is_popular``), probabilistic queries select from it, and DuckDB
itself then refuses a table of that name.

Every change runs in one DuckDB transaction (validation, view, row, version): when anything
fails the catalog and the data are exactly as before. Inside a transaction the caller opened
(``BEGIN`` in a script), the change joins that transaction instead and the caller decides.

>>> import duckdb
>>> con = duckdb.connect()
>>> Catalog(con).version()
0
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from importlib import resources
from typing import Any, TypeVar

import duckdb
import pyarrow as pa
import sqlglot
import sqlglot.expressions as exp

from pdbq.catalog import validate
from pdbq.catalog.names import (
    RESERVED_PREFIX,
    duckdb_relations,
    fetch_one,
    in_transaction,
    name_table,
    normalize,
    relation_columns,
    transaction,
    unknown,
)
from pdbq.catalog.text import domain_sql, rule_sql, statement_sql, weight_sql
from pdbq.errors import CatalogError, PdbqError, SchemaVersionError, suggest
from pdbq.language.nodes import (
    AlterRelation,
    Column,
    CreateRule,
    CreateVariable,
    Drop,
    DropRelation,
)

__all__ = [
    "SCHEMA_VERSION",
    "Catalog",
    "check_schema_version",
    "in_transaction",
    "schema_sql",
    "stored_schema_version",
    "transaction",
]

_TABLES = ("pdbq_meta", "pdbq_variables", "pdbq_rules")
_UNKNOWN_OUTSIDE = object()  # _schema_flag outside a public call: always ask DuckDB
T = TypeVar("T")


@functools.cache
def schema_sql() -> str:
    """The text of ``sql/catalog.sql``."""
    return (resources.files("pdbq") / "sql" / "catalog.sql").read_text(encoding="utf-8")


def _library_schema_version() -> int:
    match = re.search(r"^--\s*schema_version:\s*(\d+)\s*$", schema_sql(), re.MULTILINE)
    if match is None:  # a packaging mistake, not a user error
        raise RuntimeError("sql/catalog.sql has no '-- schema_version: N' line")
    return int(match.group(1))


SCHEMA_VERSION: int = _library_schema_version()


def _catalog_tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute(
        "SELECT lower(table_name) FROM duckdb_tables() WHERE schema_name = current_schema() "
        "AND lower(table_name) IN ('pdbq_meta', 'pdbq_variables', 'pdbq_rules')"
    ).fetchall()
    return {r[0] for r in rows}


def _one_lookup(method: Callable[..., T]) -> Callable[..., T]:
    """Within one public call, ask DuckDB only once whether the catalog tables exist."""

    @functools.wraps(method)
    def wrapper(self: Catalog, *args: Any, **kwargs: Any) -> T:
        outer = self._schema_flag is _UNKNOWN_OUTSIDE
        if outer:
            self._schema_flag = None
        try:
            return method(self, *args, **kwargs)
        finally:
            if outer:
                self._schema_flag = _UNKNOWN_OUTSIDE

    return wrapper


def stored_schema_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """The catalog schema version stored in the database, or None when it has no catalog."""
    if "pdbq_meta" not in _catalog_tables(con):
        return None
    row = fetch_one(con, "SELECT value FROM pdbq_meta WHERE key = 'schema_version'")
    if row is None:
        return None
    try:
        return int(row[0])
    except ValueError as e:
        raise SchemaVersionError(f"the catalog's schema_version {row[0]!r} is not a number") from e


def check_schema_version(con: duckdb.DuckDBPyConnection) -> None:
    """SchemaVersionError when the database's catalog was written by a newer pdbq. Reads only."""
    stored = stored_schema_version(con)
    if stored is not None and stored > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"this database's pdbq catalog has schema version {stored}, newer than this library's "
            f"({SCHEMA_VERSION}); upgrade pdbq to open it"
        )


def _reparse(definition: str, expected: type) -> CreateVariable | CreateRule:
    from pdbq.language.parser import (
        parse_statement,  # the language layer; imported when needed
    )

    node = parse_statement(definition)
    if not isinstance(node, expected):
        raise CatalogError(f"a stored definition no longer parses as {expected.__name__}: {definition!r}")
    return node


class Catalog:
    """Variable relations and rules of one DuckDB database (see the module docstring).

    ``Catalog(con)`` raises SchemaVersionError for a catalog written by a newer pdbq.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self._con = con
        check_schema_version(con)
        # definition text -> node: re-parsing is needed once per definition, not per lookup
        self._nodes: dict[str, CreateVariable | CreateRule] = {}
        self._schema_flag: object = _UNKNOWN_OUTSIDE

    @property
    def connection(self) -> duckdb.DuckDBPyConnection:
        return self._con

    # ------------------------------------------------------------------ reading

    def _has_schema(self) -> bool:
        if isinstance(self._schema_flag, bool):
            return self._schema_flag
        found = len(_catalog_tables(self._con)) == len(_TABLES)
        if self._schema_flag is None:  # inside a public call: remember for its duration
            self._schema_flag = found
        return found

    def _definitions(self, table: str, expected: type) -> dict[str, CreateVariable | CreateRule]:
        if not self._has_schema():
            return {}
        flag = "per_row_cardinality" if table == "pdbq_variables" else "false"
        rows = self._con.execute(f"SELECT name, definition, {flag} FROM {table} ORDER BY name").fetchall()
        out = {}
        for name, definition, per_row in rows:
            node = self._nodes.get(definition)
            if node is None:
                node = _reparse(definition, expected)
                if per_row:  # set by importers; the statement text has no syntax for it
                    node = dataclasses.replace(node, per_row_cardinality=True)
                self._nodes[definition] = node
            out[name] = node
        return out

    @_one_lookup
    def variables(self) -> dict[str, CreateVariable]:
        """Every variable relation, by lower-cased name, in name order."""
        return self._definitions("pdbq_variables", CreateVariable)  # type: ignore[return-value]

    @_one_lookup
    def rules(self) -> dict[str, CreateRule]:
        """Every rule, by lower-cased name, in name order."""
        return self._definitions("pdbq_rules", CreateRule)  # type: ignore[return-value]

    @_one_lookup
    def definitions(self) -> tuple[dict[str, CreateVariable], dict[str, CreateRule]]:
        """``(variables(), rules())`` with one lookup of the catalog tables (what a query plans with)."""
        return self.variables(), self.rules()

    @_one_lookup
    def variable(self, name: str) -> CreateVariable:
        """The variable relation ``name``; CatalogError (with suggestions) if there is none."""
        found = self.variables()
        key = normalize(name)
        if key not in found:
            raise CatalogError(unknown("variable", name, found))
        return found[key]

    @_one_lookup
    def rule(self, name: str) -> CreateRule:
        """The rule ``name``; CatalogError (with suggestions) if there is none."""
        found = self.rules()
        key = normalize(name)
        if key not in found:
            raise CatalogError(unknown("rule", name, found))
        return found[key]

    @_one_lookup
    def version(self) -> int:
        """A counter raised by every successful CREATE/DROP of a variable or rule (persisted)."""
        if not self._has_schema():
            return 0
        row = fetch_one(self._con, "SELECT value FROM pdbq_meta WHERE key = 'catalog_version'")
        return int(row[0]) if row else 0

    @_one_lookup
    def key_types(self, name: str) -> tuple[Column, ...]:
        """The key columns of variable relation ``name`` with canonical DuckDB types (TEXT -> VARCHAR)."""
        key = normalize(name)
        if self._has_schema():
            row = fetch_one(self._con, "SELECT key_names, key_types FROM pdbq_variables WHERE name = ?", [key])
            if row is not None:
                return tuple(Column(n, t) for n, t in zip(row[0], row[1]))
        raise CatalogError(unknown("variable", name, self._variable_names()))

    @_one_lookup
    def relation_columns(self, name: str) -> tuple[Column, ...]:
        """Columns of a variable relation (its keys) or of a table/view; CatalogError if unknown."""
        key = normalize(name)
        if key in self._variable_names():
            return self.key_types(key)
        cols = relation_columns(self._con, key) if not key.startswith(RESERVED_PREFIX) else None
        if cols is None:
            known = duckdb_relations(self._con) | self._variable_names()
            raise CatalogError(unknown("relation", name, known))
        return cols

    def is_read_only(self) -> bool:
        row = fetch_one(self._con, "SELECT readonly FROM duckdb_databases() WHERE database_name = current_database()")
        return bool(row and row[0])

    def _variable_names(self) -> set[str]:
        if not self._has_schema():
            return set()
        return {r[0] for r in self._con.execute("SELECT name FROM pdbq_variables").fetchall()}

    def _rule_relations(self) -> dict[str, tuple[str, ...]]:
        if not self._has_schema():
            return {}
        return {r[0]: tuple(r[1]) for r in self._con.execute("SELECT name, relations FROM pdbq_rules").fetchall()}

    def _scope(self) -> validate.Scope:
        variables = self.variables()
        keys: dict[str, tuple[Column, ...]] = {}
        if variables:
            for name, knames, ktypes in self._con.execute(
                "SELECT name, key_names, key_types FROM pdbq_variables"
            ).fetchall():
                keys[name] = tuple(Column(n, t) for n, t in zip(knames, ktypes))
        rules = set(self._rule_relations())
        relations = {r for r in duckdb_relations(self._con) if r not in variables and r not in _TABLES}
        return validate.Scope(self._con, dict(variables), keys, rules, relations)

    # ------------------------------------------------------------------ SHOW

    @_one_lookup
    def show(self, kind: str) -> pa.Table:
        """SHOW VARIABLES | SHOW RULES as an Arrow table, one row per definition in name order."""
        kind = kind.strip().upper()
        if kind == "VARIABLES":
            fields = [("name", pa.string()), ("keys", pa.string()), ("domain", pa.string()),
                      ("cardinality", pa.int32()), ("source", pa.string()), ("evidence", pa.string())]
            rows: list[tuple] = []
            if self._has_schema():
                for name, knames, ktypes, domain, card, source, evidence, per_row in self._con.execute(
                    "SELECT name, key_names, key_types, domain, cardinality, source, evidence, per_row_cardinality "
                    "FROM pdbq_variables ORDER BY name"
                ).fetchall():
                    keys = ", ".join(f"{n} {t}" for n, t in zip(knames, ktypes))
                    if per_row:
                        domain = _per_row_domain(self._con, list(knames), source, card)
                    rows.append((name, keys, domain, card, source, evidence))
        elif kind == "RULES":
            # `definition`: the statement as the user wrote it, beside the weight and function it
            # compiles to (`0.05::faulty(x) :- ...` is weight logit(0.05) under FUNCTION ISTRUE)
            fields = [("name", pa.string()), ("rule", pa.string()), ("weight", pa.string()),
                      ("semantics", pa.string()), ("function", pa.string()), ("definition", pa.string())]
            rows = []
            if self._has_schema():
                rows = self._con.execute(
                    "SELECT name, rule, weight, semantics, function, definition FROM pdbq_rules ORDER BY name"
                ).fetchall()
        else:
            hint = suggest(kind, ["VARIABLES", "RULES"])
            raise CatalogError(f"cannot SHOW {kind}: SHOW VARIABLES or SHOW RULES.{hint}")
        columns = list(zip(*rows)) if rows else [[] for _ in fields]
        return pa.table({f: pa.array(list(col), t) for (f, t), col in zip(fields, columns)})

    # ------------------------------------------------------------------ writing

    def _writable(self, action: str) -> None:
        if self.is_read_only():
            raise PdbqError(f"cannot {action}: the database is open read-only")

    def _ensure_schema(self) -> None:
        if self._has_schema():
            return
        self._con.execute(schema_sql())
        if self._schema_flag is not _UNKNOWN_OUTSIDE:
            self._schema_flag = True
        self._con.execute("DELETE FROM pdbq_meta WHERE key IN ('schema_version', 'catalog_version')")
        self._con.execute(
            "INSERT INTO pdbq_meta VALUES ('schema_version', ?), ('catalog_version', '0')", [str(SCHEMA_VERSION)]
        )

    def _bump_version(self) -> None:
        self._con.execute(
            "UPDATE pdbq_meta SET value = CAST(CAST(value AS BIGINT) + 1 AS VARCHAR) WHERE key = 'catalog_version'"
        )

    @_one_lookup
    def create_variable(self, node: CreateVariable) -> None:
        """CREATE [OR REPLACE] VARIABLE: validate, then store the definition and its key VIEW."""
        name = normalize(node.name)
        self._writable(f"CREATE VARIABLE {name}")
        with transaction(self._con):
            scope = self._scope()
            keys = validate.check_variable(scope, node)
            replacing = name in scope.variables
            if replacing:
                self._recheck_dependents(scope, name, node, keys)
            definition = node.text or statement_sql(node)
            self._ensure_schema()
            view = exp.Create(
                kind="VIEW",
                this=name_table(name),
                replace=replacing,
                expression=exp.select(*[exp.column(exp.to_identifier(k.name, quoted=True)) for k in keys]).from_(
                    validate.renamed_source(node, keys)
                ),
            )
            self._con.execute(view.sql(dialect="duckdb"))
            self._con.execute("DELETE FROM pdbq_variables WHERE name = ?", [name])
            version = self.version() + 1
            self._con.execute(
                "INSERT INTO pdbq_variables VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [name, [k.name for k in keys], [k.type for k in keys], domain_sql(node.domain),
                 node.domain.size, node.per_row_cardinality, node.source, node.evidence, definition, version],
            )
            self._bump_version()
            self._nodes[definition] = dataclasses.replace(node, text=definition)

    def _recheck_dependents(self, scope: validate.Scope, name: str, node: CreateVariable,
                            keys: tuple[Column, ...]) -> None:
        users = sorted(r for r, rels in self._rule_relations().items() if name in rels)
        if not users:
            return
        scope.variables[name] = node
        scope.keys[name] = keys
        rules = self.rules()
        for rule_name in users:
            try:
                validate.check_rule(scope, rules[rule_name], check_name=False)
            except CatalogError as e:
                raise CatalogError(
                    f"cannot replace variable '{name}': rule '{rule_name}' would no longer be valid: {e}"
                ) from e

    @_one_lookup
    def create_rule(self, node: CreateRule) -> None:
        """CREATE [OR REPLACE] RULE: validate, then store the definition."""
        name = normalize(node.name)
        self._writable(f"CREATE RULE {name}")
        with transaction(self._con):
            scope = self._scope()
            relations = validate.check_rule(scope, node)
            definition = node.text or statement_sql(node)
            self._ensure_schema()
            self._con.execute("DELETE FROM pdbq_rules WHERE name = ?", [name])
            version = self.version() + 1
            self._con.execute(
                "INSERT INTO pdbq_rules VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [name, rule_sql(node), weight_sql(node.weight), node.semantics.name, node.function.name,
                 list(relations), definition, version],
            )
            self._bump_version()
            self._nodes[definition] = dataclasses.replace(node, text=definition)

    @_one_lookup
    def drop(self, node: Drop) -> None:
        """DROP VARIABLE|RULE [IF EXISTS] name. A variable some rule uses cannot be dropped."""
        kind = node.kind.strip().upper()
        name = normalize(node.name)
        if kind not in ("VARIABLE", "RULE"):
            raise CatalogError(f"cannot DROP {kind}: DROP VARIABLE or DROP RULE")
        self._writable(f"DROP {kind} {name}")
        with transaction(self._con):
            variables = self._variable_names()
            rules = self._rule_relations()
            if kind == "VARIABLE":
                mine, other, other_kind = variables, set(rules), "RULE"
            else:
                mine, other, other_kind = set(rules), variables, "VARIABLE"
            if name not in mine:
                if node.if_exists:
                    return
                if name in other:
                    raise CatalogError(
                        f"'{name}' is a {other_kind.lower()}, not a {kind.lower()}: use DROP {other_kind} {name}"
                    )
                raise CatalogError(unknown(kind.lower(), name, mine))
            if kind == "VARIABLE":
                users = sorted(r for r, rels in rules.items() if name in rels)
                if users:
                    raise CatalogError(
                        f"cannot drop variable '{name}': rule(s) {', '.join(users)} use it; drop or replace them first"
                    )
                self._con.execute(exp.Drop(kind="VIEW", tables=[name_table(name)], exists=True).sql(dialect="duckdb"))
                self._con.execute("DELETE FROM pdbq_variables WHERE name = ?", [name])
                self._drop_imported(name)
            else:
                self._con.execute("DELETE FROM pdbq_rules WHERE name = ?", [name])
            self._bump_version()

    def _reading(self, names: set[str]) -> tuple[list[str], list[str]]:
        """The rules and variable relations that read any of the tables/views ``names``, directly or
        through user views over them (a variable relation's own view is not such a view)."""
        if not self._has_schema():
            return [], []
        variables = self.variables()
        reached = set(names)
        views = {v: _tables_read(sql) for v, sql in self._con.execute(
            "SELECT lower(view_name), sql FROM duckdb_views() WHERE NOT internal AND schema_name = current_schema()"
        ).fetchall() if v not in variables}
        grown = True
        while grown:  # views over views: the closure of "reads one of the reached names"
            more = {v for v, read in views.items() if read & reached} - reached
            reached |= more
            grown = bool(more)
        rules = sorted(r for r, rels in self._rule_relations().items() if reached & set(rels))
        readers = sorted(name for name, v in variables.items()
                         if reached & (_tables_read(v.source) | _tables_read(v.evidence or "")))
        return rules, readers

    @_one_lookup
    def check_relation_drop(self, node: DropRelation) -> None:
        """Before DuckDB's ``DROP TABLE|VIEW``: a CatalogError when a rule or variable relation reads
        the relation (directly or through views), naming them; with CASCADE they are dropped first
        (and the rules using the dropped variables), in the caller's transaction."""
        variables = self._variable_names()
        own = [n for n in node.names if n in variables]
        if own:
            raise CatalogError(f"'{own[0]}' is a variable relation, not a {node.kind.lower()}: use DROP VARIABLE {own[0]}")
        rules, readers = self._reading(set(node.names))
        if not rules and not readers:
            return
        what = " and ".join(part for part in (
            f"rule{'s' if len(rules) > 1 else ''} {', '.join(rules)}" if rules else "",
            f"variable relation{'s' if len(readers) > 1 else ''} {', '.join(readers)}" if readers else "") if part)
        target = ", ".join(node.names)
        if not node.cascade:
            raise CatalogError(
                f"cannot drop {node.kind.lower()} {target}: {what} read{'s' if len(rules) + len(readers) == 1 else ''} "
                f"it; drop or replace them first, or DROP {node.kind} {target} CASCADE to drop them with it")
        self._writable(f"DROP {node.kind} {target} CASCADE")
        users = self._rule_relations()
        rules = sorted(set(rules) | {r for r, rels in users.items() if set(rels) & set(readers)})
        for rule in rules:
            self.drop(Drop("RULE", rule))
        for name in readers:
            self.drop(Drop("VARIABLE", name))

    @_one_lookup
    def check_relation_change(self, node: AlterRelation, before: set[str]) -> None:
        """After DuckDB ran an ``ALTER`` / ``CREATE OR REPLACE`` of a relation (in the caller's
        transaction): a CatalogError, naming the rule or variable relation, when one that read the
        relation (``before``: what read it, found before the change) no longer validates."""
        variables, rules = self.definitions()
        scope = self._scope()
        for name in sorted(before):
            try:
                if name in variables:
                    validate.check_variable(scope, dataclasses.replace(variables[name], or_replace=True))
                else:
                    validate.check_rule(scope, rules[name], check_name=False)
            except CatalogError as e:
                what = "variable relation" if name in variables else "rule"
                raise CatalogError(
                    f"cannot {node.sql.split(None, 1)[0].upper()} {node.kind.lower()} {node.name}: {what} '{name}' "
                    f"reads it and would no longer be valid ({e}); drop or replace it first") from e

    def readers(self, name: str) -> set[str]:
        """The rules and variable relations that read ``name`` (directly or through views)."""
        rules, readers = self._reading({name})
        return set(rules) | set(readers)

    def _drop_imported(self, name: str) -> None:
        """A relation imported from a file (pdbq.io) owns the tables its registry row lists
        (``pdbq_fs_imports``, sql/factors.sql): they go with the relation, in the same transaction."""
        if not fetch_one(self._con, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'pdbq_fs_imports' "
                                    "AND schema_name = current_schema()")[0]:
            return
        for (owned,) in self._con.execute("SELECT tables FROM pdbq_fs_imports WHERE relation = ?", [name]).fetchall():
            for table in owned:
                self._con.execute(exp.Drop(kind="TABLE", tables=[name_table(table)], exists=True).sql(dialect="duckdb"))
        self._con.execute("DELETE FROM pdbq_fs_imports WHERE relation = ?", [name])


def _tables_read(sql: str) -> set[str]:
    """Lower-cased names of the tables and views a query reads (its CTEs' names excluded); an empty
    set for text sqlglot cannot read."""
    if not sql.strip():
        return set()
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except sqlglot.errors.SqlglotError:
        return set()
    ctes = {c.alias.lower() for c in tree.find_all(exp.CTE)}
    return {t.name.lower() for t in tree.find_all(exp.Table) if t.name and t.name.lower() not in ctes}


def _per_row_domain(con: duckdb.DuckDBPyConnection, keys: list[str], source: str, largest: int) -> str:
    """The domain of a relation whose FROM query gives each variable its own number of states (an
    imported network): how many variables have each number, e.g. ``CATEGORICAL per variable: 2 (2
    variables), 3 (1 variable)``."""
    try:
        alias = exp.TableAlias(this=exp.to_identifier("s"),
                               columns=[exp.to_identifier(n) for n in [*keys, "cardinality"]])
        counts = (exp.select(exp.column("cardinality"), exp.Count(this=exp.Star()))
                  .from_(exp.Subquery(this=sqlglot.parse_one(source, read="duckdb"), alias=alias))
                  .group_by(exp.column("cardinality")).order_by(exp.column("cardinality")))
        found = con.execute(counts.sql(dialect="duckdb")).fetchall()
    except (duckdb.Error, sqlglot.errors.SqlglotError):  # a source that no longer reads: say what is known
        return f"CATEGORICAL per variable, at most {largest}"
    parts = [f"{k} ({n} variable{'' if n == 1 else 's'})" for k, n in found]
    return "CATEGORICAL per variable: " + ", ".join(parts)
