"""The factor store: DDL (sql/factors.sql), table names and small registry helpers.

Per relation: ``pdbq_fs_vars__<relation>(vid, key columns..., [cardinality])``.
Per rule: ``pdbq_fs_factors__<rule>(v0 .. v{k-1}, [w], [t_<sym>...], [h_<sym>...])``; a factor's id
within its rule is its row's ``rowid`` (insertion order).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import duckdb
import sqlglot.expressions as exp

__all__ = [
    "ensure_schema",
    "schema_known",
    "schema_is_known",
    "var_table",
    "factor_table",
    "ident",
    "col",
    "table_exists",
    "sql_text",
    "table_sql",
]

_DDL_CACHE: dict[str, list[str]] = {}


def _ddl_path() -> Path:
    here = Path(__file__).resolve().parent.parent  # pdbq/
    for cand in (here / "sql" / "factors.sql", here.parent / "sql" / "factors.sql"):
        if cand.is_file():
            return cand
    raise FileNotFoundError("sql/factors.sql (the factor store schema) is missing from the installation")


def _statements() -> list[str]:
    if "ddl" not in _DDL_CACHE:
        text = _ddl_path().read_text()
        lines = [ln.split("--", 1)[0] for ln in text.splitlines()]
        _DDL_CACHE["ddl"] = [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
    return _DDL_CACHE["ddl"]


def _fixed_tables() -> tuple[str, ...]:
    if "tables" not in _DDL_CACHE:
        names = [re.search(r"CREATE TABLE IF NOT EXISTS\s+(\w+)", s, re.IGNORECASE) for s in _statements()]
        _DDL_CACHE["tables"] = [m.group(1).lower() for m in names if m is not None]
    return tuple(_DDL_CACHE["tables"])


# id of the connection whose store tables the current call stack has already checked (one
# planning call checks once; see `schema_known`)
_KNOWN: ContextVar[int | None] = ContextVar("pdbq_store_schema_known", default=None)


@contextmanager
def schema_known(con: duckdb.DuckDBPyConnection, *, assume: bool = False) -> Iterator[None]:
    """Check the store's fixed tables once, then let every `ensure_schema` on ``con`` inside the
    block skip its lookup (a query's planning calls it from many places). ``assume``: the caller
    knows they exist (nothing ran since they were seen), no lookup at all."""
    if _KNOWN.get() == id(con):
        yield
        return
    if not assume:
        ensure_schema(con)
    token = _KNOWN.set(id(con))
    try:
        yield
    finally:
        _KNOWN.reset(token)


def schema_is_known(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the caller is inside `schema_known` for ``con`` (the fixed tables exist)."""
    return _KNOWN.get() == id(con)


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create the store's fixed tables if absent (idempotent, cheap).

    Every query calls this, so the usual case is one catalog lookup and no DDL: DDL takes
    catalog locks and costs milliseconds per statement, a lookup a fraction of one. The lookup
    is not remembered between calls, because a rolled-back transaction can take the tables away.
    """
    if _KNOWN.get() == id(con):
        return
    tables = _fixed_tables()
    kind = getattr(con, "_table_kind", None)
    if kind is not None:
        # read from the catalog without a statement, resolved as the store's unqualified
        # statements resolve the names
        try:
            if all(kind(t) == "table" for t in tables):
                return
        except duckdb.Error:
            pass
    else:
        rows = con.execute(_TABLES_SQL).fetchall()
        if {r[0].lower() for r in rows}.issuperset(tables):
            return
    for stmt in _statements():
        con.execute(stmt)


# names compared in Python: filtering duckdb_tables() in SQL (lower, IN, count DISTINCT) costs
# several times more than reading the names
_TABLES_SQL = "SELECT table_name FROM duckdb_tables() WHERE schema_name = current_schema()"


def ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def col(name: str, table: str | None = None) -> exp.Column:
    return exp.Column(this=ident(name), table=ident(table) if table else None)


def var_table(relation: str) -> str:
    return f"pdbq_fs_vars__{relation}"


def factor_table(rule: str) -> str:
    return f"pdbq_fs_factors__{rule}"


def table_ref(name: str, alias: str | None = None) -> exp.Table:
    t = exp.Table(this=ident(name))
    if alias:
        t.set("alias", exp.TableAlias(this=ident(alias)))
    return t


def table_exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return bool(
        con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = ? AND schema_name = current_schema() "
            "AND database_name = current_database()", [name]
        ).fetchall()[0][0]
    )


def sql_text(e: exp.Expression) -> str:
    return e.sql(dialect="duckdb")


@functools.lru_cache(maxsize=4096)
def table_sql(name: str) -> str:
    """``name`` as a quoted DuckDB identifier (generated once per name: every grounding call
    names its factor and vid map tables)."""
    return sql_text(table_ref(name))
