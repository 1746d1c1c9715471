"""A database as SQL text: the CREATE statements ``.schema`` shows, and the script ``.dump`` writes
to rebuild it (tables with their rows, views, variable relations and rules), like the ``.dump`` of
sqlite3 and the duckdb CLI.

Row values are written as SQL literals by sqlglot, each cast to its column's type. pdbq's own
storage (``pdbq_*`` tables) is not written: it is rebuilt from the CREATE VARIABLE and CREATE RULE
statements when the script runs, except learned weights, which the script's header then says.
"""

from __future__ import annotations

import datetime
import decimal
import math
import re
from collections.abc import Iterator
from typing import Any

import sqlglot.expressions as exp

__all__ = ["dump_lines", "schema_texts", "definition_text"]

_INSERT_BATCH = 500  # rows per INSERT statement


def _literal(value: Any) -> exp.Expression:
    try:
        return exp.convert(value)
    except ValueError:
        return exp.Literal.string(str(value))


def _struct(value: Any) -> exp.Expression:
    """A struct value as DuckDB's ``{'key': value, ...}`` (nested structs too)."""
    if isinstance(value, dict):
        return exp.Struct(expressions=[exp.PropertyEQ(this=exp.Literal.string(str(k)), expression=_struct(v))
                                       for k, v in value.items()])
    return exp.Null() if value is None else _literal(value)


def _value(value: Any, column_type: str) -> exp.Expression:
    """A row value as the literal a reader would write: plain where INSERT's own conversion to the
    column's type gives it back exactly ('north' into VARCHAR, 3 into BIGINT, 1.5 into DOUBLE or
    DECIMAL, true), otherwise cast to the column's type once (dates, lists, blobs, ...)."""
    if value is None:
        return exp.Null()
    base = column_type.upper().split("(")[0]
    plain = (isinstance(value, str) and base == "VARCHAR") or isinstance(value, (bool, int, decimal.Decimal)) \
        or (isinstance(value, float) and math.isfinite(value))
    if plain:
        return _literal(value)
    target = exp.DataType.build(column_type, dialect="duckdb")
    if isinstance(value, float):  # nan, inf, -inf: DuckDB reads them from text
        return exp.cast(exp.Literal.string(str(value)), target)
    if isinstance(value, datetime.timedelta):  # Python's '1 day, 0:00:00' is not DuckDB's interval text
        micros = value.seconds * 1_000_000 + value.microseconds
        return exp.cast(exp.Literal.string(f"{value.days} days {micros} microseconds"), target)
    if isinstance(value, (datetime.date, datetime.time)):  # ISO text, cast once to the column's type
        return exp.cast(exp.Literal.string(value.isoformat()), target)
    if isinstance(value, dict) and base == "STRUCT":  # sqlglot would write a MAP
        return exp.cast(_struct(value), target)
    return exp.cast(_literal(value), target)


def _insert_lines(con: Any, table: str) -> Iterator[str]:
    target = exp.table_(exp.to_identifier(table))  # any name, quotes inside it too (quoted where needed)
    types = [r[0] for r in con.execute(
        "SELECT data_type FROM duckdb_columns() WHERE table_name = ? AND NOT internal ORDER BY column_index",
        [table]).fetchall()]
    cursor = con.execute(exp.select("*").from_(target).sql(dialect="duckdb"))
    while True:
        rows = cursor.fetchmany(_INSERT_BATCH)
        if not rows:
            return
        values = exp.Values(expressions=[
            exp.Tuple(expressions=[_value(v, t) for v, t in zip(row, types)])
            for row in rows
        ])
        yield exp.Insert(this=target, expression=values).sql(dialect="duckdb") + ";"


def _references(sql: str, names: set[str]) -> bool:
    words = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", sql)}
    return bool(words & names)


def _name(text: str) -> str:
    return exp.to_identifier(text, quoted=True).sql(dialect="duckdb")


def _types_and_sequences(con: Any, wanted: str | None) -> Iterator[str]:
    """Named ENUM types and sequences (at their current value): tables' columns and defaults use them."""
    for type_name, labels in con.execute(
            "SELECT type_name, labels FROM duckdb_types() WHERE NOT internal AND logical_type = 'ENUM' "
            "AND schema_name = current_schema() ORDER BY type_name").fetchall():
        if wanted is None or type_name.lower() == wanted:
            values = ", ".join(exp.Literal.string(v).sql(dialect="duckdb") for v in labels)
            yield f"CREATE TYPE {_name(type_name)} AS ENUM ({values});"
    for seq, sql in con.execute("SELECT sequence_name, sql FROM duckdb_sequences() WHERE NOT temporary "
                                "AND schema_name = current_schema() ORDER BY sequence_name").fetchall():
        if wanted is None or seq.lower() == wanted:
            yield sql.strip()


def _macros(con: Any, wanted: str | None) -> Iterator[str]:
    """User macros (scalar and table), after the tables a table macro may read."""
    for fname, kind, body, params in con.execute(
            "SELECT function_name, function_type, macro_definition, parameters FROM duckdb_functions() "
            "WHERE NOT internal AND function_type IN ('macro', 'table_macro') AND schema_name = current_schema() "
            "ORDER BY function_name").fetchall():
        if wanted is None or fname.lower() == wanted:
            args = ", ".join(_name(p) for p in params)
            yield f"CREATE MACRO {_name(fname)}({args}) AS {'TABLE ' if kind == 'table_macro' else ''}{body};"


def dump_lines(db: Any, name: str | None = None) -> Iterator[str]:
    """The statements that rebuild ``db`` (or only the table, view, variable relation, rule, type,
    sequence or macro ``name``): ENUM types and sequences, tables and their rows, macros, views,
    variable relations, rules, then views that read variable relations."""
    catalog = db.catalog
    variables = catalog.variables()
    rules = catalog.rules()
    pdbq_names = {str(n).lower() for n in (*variables, *rules)}
    wanted = None if name is None else name.lower()
    con = db.duckdb.cursor()
    try:
        learned = con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'pdbq_learned_weights'").fetchall()[0][0]
        if learned and wanted is None and con.execute("SELECT count(*) FROM pdbq_learned_weights").fetchall()[0][0]:
            yield "-- Learned weights (LEARN WEIGHTS) are not part of this script: copy the database file to keep them."
        yield "BEGIN TRANSACTION;"
        yield from _types_and_sequences(con, wanted)
        tables = con.execute(
            "SELECT table_name, sql FROM duckdb_tables() WHERE NOT internal AND NOT starts_with(table_name, 'pdbq_') "
            "ORDER BY table_name").fetchall()
        for table, sql in tables:
            if wanted is None or table.lower() == wanted:
                yield sql.strip()
                yield from _insert_lines(con, table)
        yield from _macros(con, wanted)
        views = [(v, sql) for v, sql in con.execute(
            "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal AND NOT starts_with(view_name, 'pdbq_') "
            "ORDER BY view_name").fetchall() if v.lower() not in pdbq_names]
        late = [(v, sql) for v, sql in views if _references(sql, {str(n).lower() for n in variables})]
        for v, sql in views:
            if (v, sql) not in late and (wanted is None or v.lower() == wanted):
                yield sql.strip()
        for key, definition in (*variables.items(), *rules.items()):
            if wanted is None or str(key).lower() == wanted:
                yield definition_text(definition)
        for v, sql in late:
            if wanted is None or v.lower() == wanted:
                yield sql.strip()
        yield "COMMIT;"
    finally:
        con.close()


def schema_texts(db: Any, name: str | None) -> list[str]:
    """CREATE statements of tables and views, then of variable relations and rules.

    A variable relation is also a DuckDB view; it is shown once, as its CREATE VARIABLE.
    """
    definitions: list[tuple[str, Any]] = []
    catalog = getattr(db, "catalog", None)
    if catalog is not None:
        for attr in ("variables", "rules"):
            try:
                definitions.extend(getattr(catalog, attr)().items())
            except Exception:  # noqa: BLE001 - an unreadable catalog shows no definitions
                continue
    pdbq_names = {str(key).lower() for key, _ in definitions}
    texts: list[str] = []
    con = db.duckdb.cursor()
    try:
        query = (
            "SELECT name, sql FROM (SELECT table_name AS name, sql, 0 AS o FROM duckdb_tables() WHERE NOT internal "
            "UNION ALL SELECT view_name, sql, 1 FROM duckdb_views() WHERE NOT internal) "
            "WHERE (? IS NULL OR lower(name) = lower(?)) AND (? IS NOT NULL OR NOT starts_with(name, 'pdbq_')) "
            "ORDER BY o, name"
        )
        for table, sql in con.execute(query, [name, name, name]).fetchall():
            if sql and table.lower() not in pdbq_names:
                texts.append(sql.strip())
    finally:
        con.close()
    for key, definition in definitions:
        if name is None or str(key).lower() == name.lower():
            texts.append(definition_text(definition))
    return texts


def definition_text(definition: Any) -> str:
    text = (getattr(definition, "text", "") or "").strip()
    if not text:
        from pdbq.catalog.text import statement_sql

        text = statement_sql(definition)
    return text if text.endswith(";") else text + ";"

