"""Python data frames referenced by name in SQL, as ``duckdb.sql`` does (replacement scans).

DuckDB's own replacement scan looks only at the frame that calls into DuckDB, which for pdbq is
pdbq's code, not the user's. So `Database.execute` captures its caller's frame and, for every word
of the statement that names no table or view but a pandas/polars DataFrame, a pyarrow Table /
RecordBatch / Dataset or a DuckDB relation there (locals first, then globals, like DuckDB), registers
the object under that name for the duration of the call. A table or view of that name always wins.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import duckdb

__all__ = ["scannable", "python_tables"]

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KINDS = {
    ("pandas", "DataFrame"), ("polars", "DataFrame"), ("polars", "LazyFrame"),
    ("pyarrow", "Table"), ("pyarrow", "RecordBatch"), ("pyarrow", "RecordBatchReader"),
    ("pyarrow", "Dataset"), ("pyarrow", "FileSystemDataset"), ("duckdb", "DuckDBPyRelation"),
}


def scannable(obj: Any) -> bool:
    """True for the Python objects DuckDB can scan as a table."""
    for cls in type(obj).__mro__:
        root = (cls.__module__ or "").split(".", 1)[0].lstrip("_")
        if (root, cls.__name__) in _KINDS:
            return True
    return False


def _existing(con: duckdb.DuckDBPyConnection, names: list[str]) -> set[str]:
    rows = con.execute(
        "SELECT lower(table_name) FROM duckdb_tables() WHERE lower(table_name) IN (SELECT lower(unnest(?))) "
        "UNION SELECT lower(view_name) FROM duckdb_views() WHERE lower(view_name) IN (SELECT lower(unnest(?)))",
        [names, names],
    ).fetchall()
    return {r[0] for r in rows}


@contextmanager
def python_tables(con: duckdb.DuckDBPyConnection, text: str, frame: FrameType | None) -> Iterator[list[str]]:
    """Register the caller's data frames that ``text`` names (and no table or view already has)
    on ``con`` while the block runs; yields the names registered."""
    found: dict[str, Any] = {}
    if frame is not None:
        scopes = (frame.f_locals, frame.f_globals)
        for word in dict.fromkeys(_WORD.findall(text)):
            for scope in scopes:
                obj = scope.get(word)
                if obj is not None and scannable(obj):
                    found[word] = obj
                    break
    if found:
        taken = _existing(con, list(found))
        found = {k: v for k, v in found.items() if k.lower() not in taken}
    registered: list[str] = []
    try:
        for name, obj in found.items():
            if type(obj).__name__ == "LazyFrame":
                obj = obj.collect()
            con.register(name, obj)
            registered.append(name)
        yield registered
    finally:
        for name in registered:
            try:
                con.unregister(name)
            except duckdb.Error:
                pass  # the connection closed meanwhile
