"""Names: normalising identifiers and finding the tables and views DuckDB knows.

pdbq names (variables, rules) are case-insensitive and stored lower-cased, like DuckDB's own
unquoted identifiers. Names starting with ``pdbq_`` are reserved for pdbq's own tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import re

import duckdb
import sqlglot
import sqlglot.expressions as exp

from pdbq.errors import CatalogError, suggest
from pdbq.language.nodes import Column

__all__ = [
    "in_transaction",
    "transaction",
    "RESERVED_PREFIX",
    "normalize",
    "table_expr",
    "name_table",
    "duckdb_relations",
    "relation_columns",
    "first_line",
    "unknown",
    "fetch_one",
    "explain_duckdb_error",
]

RESERVED_PREFIX = "pdbq_"

# Two plain scans: a UNION with current_database() filters costs twice as much in DuckDB. Tables of
# attached databases with the same schema name are included, which only makes name checks stricter.
_LIST_TABLES = "SELECT lower(table_name) FROM duckdb_tables() WHERE NOT internal AND schema_name = current_schema()"
_LIST_VIEWS = "SELECT lower(view_name) FROM duckdb_views() WHERE NOT internal AND schema_name = current_schema()"


def normalize(name: str) -> str:
    """The stored form of a pdbq name: stripped and lower-cased."""
    return name.strip().lower()


def table_expr(name: str) -> exp.Table:
    """A sqlglot table reference for a (possibly schema-qualified) relation name."""
    if "." not in name:  # one name: a quoted identifier whatever it holds
        return name_table(name)
    try:
        return exp.to_table(name, dialect="duckdb")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError) as e:
        raise CatalogError(f"invalid relation name '{name}'") from e


def name_table(name: str) -> exp.Table:
    """A sqlglot table reference for one pdbq name (a variable relation's view, a store table):
    always one quoted identifier, so any name (quotes, dots, spaces) stays one name."""
    return exp.Table(this=exp.to_identifier(name, quoted=True))


def duckdb_relations(con: duckdb.DuckDBPyConnection) -> set[str]:
    """Lower-cased names of the tables and views in the current schema (temporary ones too)."""
    tables = con.execute(_LIST_TABLES).fetchall()
    views = con.execute(_LIST_VIEWS).fetchall()
    return {row[0] for row in tables + views}


def relation_columns(con: duckdb.DuckDBPyConnection, name: str) -> tuple[Column, ...] | None:
    """The columns (name, canonical DuckDB type) of table or view ``name``; None if none exists."""
    query = exp.select("*").from_(table_expr(name)).limit(0).sql(dialect="duckdb")
    try:
        rel = con.sql(query)
    except duckdb.CatalogException:
        return None
    return tuple(Column(c, str(t)) for c, t in zip(rel.columns, rel.types))


def first_line(e: BaseException) -> str:
    """The first line of an error's message (DuckDB's messages add hints on later lines)."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def unknown(kind: str, name: str, candidates: Iterable[str]) -> str:
    """``unknown table 'tweet'. Did you mean 'tweets'?`` (without the hint when nothing is near)."""
    hint = suggest(normalize(name), candidates)
    return f"unknown {kind} '{name}'" + (f".{hint}" if hint else "")


def fetch_one(con: duckdb.DuckDBPyConnection, sql: str, parameters: list | None = None) -> tuple | None:
    """The first row of a query expected to return at most a few rows, or None.

    Fetches every row: a result left half-read keeps the connection busy for ``con.sql``.
    """
    rows = con.execute(sql, parameters).fetchall() if parameters is not None else con.execute(sql).fetchall()
    return rows[0] if rows else None


_MISSING_TABLE = re.compile(r"Table with name (.+?) does not exist")
_MISSING_COLUMN = re.compile(r'(?:Referenced column "(.+?)" not found|does not have a column named "(.+?)")')
_CANDIDATES = re.compile(r'"([^"]+)"')


def explain_duckdb_error(e: duckdb.Error, relations: Iterable[str] = ()) -> str:
    """A one-line reading of a DuckDB error met while checking a definition.

    Unknown tables and columns are named with pdbq's own near-match hints (DuckDB's table hints
    include its system catalog); anything else is DuckDB's message on one line.
    """
    text = str(e).strip()
    table = _MISSING_TABLE.search(text)
    if table:
        return unknown("table", table.group(1), relations)
    column = _MISSING_COLUMN.search(text)
    if column:
        name = column.group(1) or column.group(2)
        _, _, rest = text.partition("Candidate bindings")
        candidates = [c.rsplit(".", 1)[-1] for c in _CANDIDATES.findall(rest)]
        return unknown("column", name, candidates)
    return " ".join(line.strip() for line in text.splitlines() if line.strip()) or type(e).__name__


def in_transaction(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the caller has opened a transaction on ``con`` (``BEGIN`` without COMMIT yet).

    In auto-commit mode every statement gets a new transaction id; inside a transaction two
    statements share one. (Probing with ``BEGIN`` would abort the caller's transaction.)
    """
    first = fetch_one(con, "SELECT txid_current()")
    second = fetch_one(con, "SELECT txid_current()")
    return first == second


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Run the block in a DuckDB transaction, rolled back if it raises.

    Inside a transaction the caller already opened, the block simply joins it (DuckDB has no
    savepoints): the caller's COMMIT or ROLLBACK decides.
    """
    if in_transaction(con):
        yield
        return
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass  # the transaction is already gone; the original error matters
        raise
    con.execute("COMMIT")
