"""The factor store: DDL (sql/factors.sql), table names and small registry helpers.

Per relation: ``pdbq_fs_vars__<relation>(vid, key columns..., [cardinality])``.
Per rule: ``pdbq_fs_factors__<rule>(v0 .. v{k-1}, [w], [t_<sym>...], [h_<sym>...])``; a factor's id
within its rule is its row's ``rowid`` (insertion order).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import sqlglot.expressions as exp

__all__ = [
    "ensure_schema",
    "var_table",
    "factor_table",
    "ident",
    "col",
    "table_exists",
    "sql_text",
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


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create the store's fixed tables if absent (idempotent, cheap)."""
    for stmt in _statements():
        con.execute(stmt)


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
        ).fetchone()[0]
    )


def sql_text(e: exp.Expression) -> str:
    return e.sql(dialect="duckdb")
