"""DuckDB type names and the compatibility rules the catalog checks at CREATE time.

Declared types are canonicalised by DuckDB itself (``TEXT``, ``STRING`` -> ``VARCHAR``; ``INT`` ->
``INTEGER``; ``NUMERIC`` -> ``DECIMAL(18,3)``). Compatibility is judged by *family*:

==========  ==============================================================
family      canonical DuckDB types
==========  ==============================================================
integer     TINYINT SMALLINT INTEGER BIGINT HUGEINT and the unsigned ones
float       FLOAT DOUBLE DECIMAL(p,s)
string      VARCHAR
boolean     BOOLEAN
date        DATE
timestamp   TIMESTAMP, TIMESTAMP WITH TIME ZONE, TIMESTAMP_S/_MS/_NS
other       any other type is its own family (exact match)
==========  ==============================================================

* a declared key type accepts an actual column of the same family; a declared float/decimal
  key also accepts an integer column (``key_compatible``);
* two columns joined by a shared rule symbol must be of the same family, integers and
  floats counting as one numeric family (``comparable``).
"""

from __future__ import annotations

import duckdb
import sqlglot
import sqlglot.expressions as exp

from pdbq.catalog.names import fetch_one, first_line
from pdbq.errors import CatalogError

__all__ = ["canonical_type", "family", "key_compatible", "comparable"]

_INTEGER = {
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT",
    "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT",
}
_FLOAT = {"FLOAT", "DOUBLE"}


def canonical_type(con: duckdb.DuckDBPyConnection, type_text: str, *, what: str) -> str:
    """DuckDB's own name for ``type_text`` (``TEXT`` -> ``VARCHAR``); CatalogError if unknown.

    ``what`` names the thing declared with that type, for the message.
    """
    try:
        dtype = exp.DataType.build(type_text, dialect="duckdb")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError) as e:
        raise CatalogError(f"{what}: unknown type '{type_text}'") from e
    query = exp.select(exp.func("typeof", exp.cast(exp.null(), dtype))).sql(dialect="duckdb")
    try:
        row = fetch_one(con, query)
    except duckdb.Error as e:
        raise CatalogError(f"{what}: unknown type '{type_text}' ({first_line(e)})") from e
    return str(row[0]) if row else type_text.upper()


def family(duck_type: str) -> str:
    """The family of a canonical DuckDB type name (see the module docstring)."""
    t = duck_type.upper()
    if t in _INTEGER:
        return "integer"
    if t in _FLOAT or t.startswith("DECIMAL"):
        return "float"
    if t == "VARCHAR" or t.startswith("VARCHAR("):
        return "string"
    if t.startswith("TIMESTAMP"):
        return "timestamp"
    return t.lower()


def key_compatible(declared: str, actual: str) -> bool:
    """Whether a key declared ``declared`` can hold values of a column typed ``actual``."""
    fd, fa = family(declared), family(actual)
    return fd == fa or (fd == "float" and fa == "integer")


def comparable(a: str, b: str) -> bool:
    """Whether columns of types ``a`` and ``b`` may be joined on equality by a shared symbol."""
    fa, fb = family(a), family(b)
    numeric = {"integer", "float"}
    return fa == fb or (fa in numeric and fb in numeric)

