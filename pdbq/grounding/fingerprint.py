"""Cheap fingerprints of DuckDB inputs, so that changes made through plain SQL are noticed.

A fingerprint is ``"<row count>:<a>:<b>"`` over every row of the table, view or query (mode
"hash"), or only the row count (mode "count"). ``a`` and ``b`` are the sums of two 31-bit slices
of each row's 64-bit hash: together a 62-bit additive multiset hash (duplicate rows do not
cancel, as they would in an XOR), summed in 64-bit integers (``sum_no_overflow``: no sum can
overflow below 2^32 rows). That is about 35% cheaper than one ``sum(hash(row))``, which DuckDB
accumulates in 128 bits: it matters because the fingerprint reads every input row once more
than the grounding join does. Where DuckDB lacks ``sum_no_overflow``, ``sum`` is used.
"""

from __future__ import annotations

import functools
import hashlib

import duckdb
import sqlglot
import sqlglot.expressions as exp

from pdbq.catalog.names import table_expr

__all__ = [
    "fingerprint_query", "fingerprint_relation", "query_fingerprint_sql", "relation_fingerprint_sql", "definition_hash", "combine",
]


_SLICE = 2**31 - 1


@functools.lru_cache(maxsize=1)
def _sum_function() -> str:
    has = duckdb.connect().execute(
        "SELECT count(*) FROM duckdb_functions() WHERE function_name = 'sum_no_overflow'"
    ).fetchone()[0]
    return "sum_no_overflow" if has else "sum"


def _fp_sql(source: exp.Expression, mode: str) -> str:
    row = exp.to_identifier("pdbq_fp_row")
    agg = [exp.Count(this=exp.Star())]
    if mode == "hash":
        h = exp.func("hash", exp.column(row))
        for part in (exp.BitwiseRightShift(this=h.copy(), expression=exp.Literal.number(33)),
                     exp.BitwiseAnd(this=h.copy(), expression=exp.Literal.number(_SLICE))):
            agg.append(exp.func(_sum_function(), exp.Cast(this=exp.Paren(this=part), to=exp.DataType.build("BIGINT"))))
    q = exp.select(*agg).from_(exp.alias_(exp.Subquery(this=source) if not isinstance(source, exp.Table) else source, row, table=True))
    return q.sql(dialect="duckdb")


# The SQL of a fingerprint depends only on the definition's text: built once (parsing and
# generating it with sqlglot costs about a millisecond, the query itself a fraction of that on
# small inputs). Only the data is read again on every query.
@functools.lru_cache(maxsize=1024)
def query_fingerprint_sql(sql: str, mode: str = "hash") -> str:
    """The text of the query that fingerprints the rows of SELECT ``sql``."""
    return _fp_sql(sqlglot.parse_one(sql, read="duckdb"), mode)


@functools.lru_cache(maxsize=1024)
def relation_fingerprint_sql(name: str, mode: str = "hash") -> str:
    """The text of the query that fingerprints table or view ``name``."""
    return _fp_sql(table_expr(name), mode)


def _run(con: duckdb.DuckDBPyConnection, text: str) -> str:
    vals = con.execute(text).fetchone()
    return ":".join("" if v is None else str(v) for v in vals)


def fingerprint_query(con: duckdb.DuckDBPyConnection, sql: str, mode: str = "hash") -> str:
    """Fingerprint of the rows a SELECT returns."""
    return _run(con, query_fingerprint_sql(sql, mode))


def fingerprint_relation(con: duckdb.DuckDBPyConnection, name: str, mode: str = "hash") -> str:
    """Fingerprint of a table or view by name."""
    return _run(con, relation_fingerprint_sql(name, mode))


def definition_hash(obj: object) -> str:
    """Stable hash of a frozen definition node (its repr: dataclass fields in order)."""
    return hashlib.sha1(repr(obj).encode()).hexdigest()[:16]


def combine(parts: list[str]) -> str:
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]
