"""DuckDB errors met while running pdbq's own statements over a query, as `PdbqError`s that name
the relation, its columns and a suggestion instead of DuckDB's view of the rewritten SQL (where a
variable relation's alias is a values list with generated columns).

>>> from pdbq.language.nodes import Column
>>> e = RuntimeError('Binder Error: Values list "c" does not have a column named "name"')
>>> str(query_error(e, {"c": ("cancer", (Column("person", "TEXT"),))}))
"column 'name' of c does not exist: c is the variable relation 'cancer', whose columns are person."
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import duckdb

from pdbq.errors import CatalogError, InferenceError, PdbqError, suggest
from pdbq.language.nodes import Column

__all__ = ["query_error", "ListTypesRefused", "check_list_types"]


class ListTypesRefused(Exception):
    """DuckDB's binder refused a query that reads a long IN list from one bound constant (its
    members typed BIGINT or VARCHAR, where literals take the other side's type): the caller
    answers the query as written instead (`ProbQuery.as_written`)."""


def check_list_types(exc: Exception, stmt: Any) -> None:
    """Raise `ListTypesRefused` when ``exc`` may come from ``stmt``'s bound lists."""
    if getattr(stmt, "as_written", None) is not None and isinstance(exc, duckdb.BinderException):
        raise ListTypesRefused(str(exc)) from exc

_NO_COLUMN = (
    re.compile(r'Values list "(?P<alias>[^"]+)" does not have a column named "(?P<col>[^"]+)"'),
    re.compile(r'Table "(?P<alias>[^"]+)" does not have a column named "(?P<col>[^"]+)"'),
    re.compile(r'Referenced column "(?P<col>[^"]+)" not found'),
)


def query_error(exc: Exception, aliases: Mapping[str, tuple[str, Sequence[Column]]]) -> PdbqError:
    """``exc`` (a DuckDB error) as a PdbqError. ``aliases``: estimate alias -> (variable relation,
    its key columns)."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    for pattern in _NO_COLUMN:
        m = pattern.search(text)
        if not m:
            continue
        column = m.group("col")
        alias = m.groupdict().get("alias")
        if alias in aliases:
            relation, cols = aliases[alias]
            names = [c.name for c in cols]
            return CatalogError(
                f"column '{column}' of {alias} does not exist: {alias} is the variable relation '{relation}', "
                f"whose columns are {', '.join(names)}.{suggest(column, names)}"
            )
        known = {c.name for _, cols in aliases.values() for c in cols}
        return CatalogError(f"column '{column}' does not exist in the query's tables.{suggest(column, known)}")
    return InferenceError(f"the query's SELECT could not run over its estimates: {text}")
