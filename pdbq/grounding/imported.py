"""Imported factors: models read from files (UAI) stored next to grounded rules.

An import belongs to one variable relation ``r(id INTEGER)`` with per-row cardinality whose FROM
query reads the import's variables table. Its factors are TABLE factors of varying arity with
weight 1, one row each in ``pdbq_fs_imported__<r>(fid INTEGER, vids INTEGER[], log_table
DOUBLE[])``: ``vids`` are the relation's keys (file ids), so a factor row never changes when other
relations' vids move; the global vid of key ``id`` is ``base_r + id`` (the map is dense and in key
order because the ids are exactly ``0 .. n-1``, checked on use). One row per factor with list
columns keeps the store to one Arrow insert and one Arrow read, whatever the arities.

The registry ``pdbq_fs_imports`` (sql/factors.sql) lists each import with the tables it owns;
``DROP VARIABLE r`` drops them (pdbq/catalog/store.py). An import is *live* while its relation
exists with the FROM query it was imported with; otherwise (``CREATE OR REPLACE VARIABLE r``) its
factors are ignored until the relation is dropped or re-imported.

>>> # create_import(con, "net", card, offsets, ids, tables, origin="net.uai"); then CREATE VARIABLE
>>> # net(id INTEGER) DOMAIN CATEGORICAL(k) FROM (variable_source('net')) with per-row cardinality
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa
import sqlglot
import sqlglot.expressions as exp

from pdbq.errors import GroundingError
from pdbq.grounding.store import col, ensure_schema, ident, schema_is_known, sql_text, table_exists, table_ref
from pdbq.grounding.variables import RelationInfo, relation_info
from pdbq.language.nodes import CreateVariable

__all__ = [
    "IMPORTS_TABLE",
    "ImportInfo",
    "ImportArrays",
    "imported_factor_table",
    "imported_vars_table",
    "imported_evidence_table",
    "variable_source",
    "evidence_source",
    "create_import",
    "drop_import",
    "live_imports",
    "import_arrays",
    "import_neighbours_select",
]

IMPORTS_TABLE = "pdbq_fs_imports"


def imported_factor_table(relation: str) -> str:
    return f"pdbq_fs_imported__{relation}"


def imported_vars_table(relation: str) -> str:
    return f"pdbq_fs_imported_vars__{relation}"


def imported_evidence_table(relation: str) -> str:
    return f"pdbq_fs_imported_evid__{relation}"


def variable_source(relation: str) -> str:
    """The FROM query of an imported relation: its keys then each key's cardinality."""
    return sql_text(exp.select(col("id"), col("cardinality")).from_(table_ref(imported_vars_table(relation))))


def evidence_source(relation: str) -> str:
    """The EVIDENCE query of an imported relation: (id, value)."""
    return sql_text(exp.select(col("id"), col("value")).from_(table_ref(imported_evidence_table(relation))))


@dataclass(frozen=True)
class ImportInfo:
    """A live import: ``relation``'s keys ``0 .. n-1`` are global vids ``base .. base+n-1``."""

    relation: str
    base: int
    n: int
    n_factors: int
    n_entries: int
    table: str  # the factor table
    fingerprint: str = ""  # row count and hash of the factor table (see `live_imports`)


@dataclass(frozen=True)
class ImportArrays:
    """Factors of one import as arrays: factor ``i`` is over ``vids[offsets[i]:offsets[i+1]]``
    (global vids) with log-table ``tables[table_offsets[i]:table_offsets[i+1]]``."""

    offsets: np.ndarray  # int64[n + 1]
    vids: np.ndarray  # int64[edges]
    table_offsets: np.ndarray  # int64[n + 1]
    tables: np.ndarray  # float64[entries]

    @property
    def n_factors(self) -> int:
        return int(self.offsets.shape[0] - 1)


def _insert_arrow(con: duckdb.DuckDBPyConnection, table: str, data: pa.Table) -> None:
    view = f"pdbq_fs_arrow_{uuid.uuid4().hex}"
    con.register(view, data)
    try:
        con.execute(sql_text(exp.insert(exp.select("*").from_(table_ref(view)), table_ref(table))))
    finally:
        con.unregister(view)


def _create(con: duckdb.DuckDBPyConnection, table: str, columns: list[tuple[str, str]]) -> None:
    # explicit column definitions (not CREATE TABLE AS): see docs/grounding.md's DuckDB pitfall
    schema = exp.Schema(
        this=table_ref(table),
        expressions=[exp.ColumnDef(this=ident(n), kind=exp.DataType.build(t, dialect="duckdb")) for n, t in columns],
    )
    con.execute(sql_text(exp.Create(this=schema, kind="TABLE")))


def _list_array(offsets: np.ndarray, values: pa.Array) -> pa.Array:
    if int(offsets[-1]) < 2**31 - 1:
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values)
    return pa.LargeListArray.from_arrays(pa.array(offsets.astype(np.int64)), values)


def create_import(
    con: duckdb.DuckDBPyConnection,
    relation: str,
    cardinality: np.ndarray,
    factor_offsets: np.ndarray,
    factor_ids: np.ndarray,
    table_offsets: np.ndarray,
    tables: np.ndarray,
    *,
    evidence: tuple[np.ndarray, np.ndarray] | None = None,
    origin: str = "",
    kind: str = "uai",
) -> list[str]:
    """Store an import's variables, factors and evidence (call inside a transaction).

    ``factor_ids`` are keys ``0 .. len(cardinality)-1``; factor ``f``'s log-table is
    ``tables[table_offsets[f]:table_offsets[f+1]]``. Returns the tables created, in registry order.
    The caller then creates the variable relation (`variable_source`, `evidence_source`).
    """
    ensure_schema(con)
    drop_import(con, relation)
    n = int(cardinality.shape[0])
    m = int(factor_offsets.shape[0] - 1)
    ft, vt, et = imported_factor_table(relation), imported_vars_table(relation), imported_evidence_table(relation)
    for t in (ft, vt, et):
        if table_exists(con, t):
            raise GroundingError(f"cannot import '{relation}': table '{t}' already exists")
    _create(con, vt, [("id", "INTEGER"), ("cardinality", "INTEGER")])
    _insert_arrow(con, vt, pa.table({"id": np.arange(n, dtype=np.int32), "cardinality": cardinality.astype(np.int32)}))
    _create(con, ft, [("fid", "INTEGER"), ("vids", "INTEGER[]"), ("log_table", "DOUBLE[]")])
    data = pa.table({
        "fid": np.arange(m, dtype=np.int32),
        "vids": _list_array(np.asarray(factor_offsets, dtype=np.int64), pa.array(np.asarray(factor_ids, dtype=np.int32))),
        "log_table": _list_array(np.asarray(table_offsets, dtype=np.int64), pa.array(np.asarray(tables, dtype=np.float64))),
    })
    _insert_arrow(con, ft, data)
    _create(con, et, [("id", "INTEGER"), ("value", "INTEGER")])
    if evidence is not None and len(evidence[0]):
        _insert_arrow(con, et, pa.table({
            "id": np.asarray(evidence[0], dtype=np.int32), "value": np.asarray(evidence[1], dtype=np.int32)
        }))
    owned = [ft, vt, et]
    con.execute(
        f"INSERT INTO {IMPORTS_TABLE} VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [relation, variable_source(relation), n, m, int(table_offsets[-1]) if m else 0, kind, origin, owned],
    )
    return owned


def drop_import(con: duckdb.DuckDBPyConnection, relation: str) -> bool:
    """Drop an import's tables and registry row (the relation itself is the catalog's)."""
    if not table_exists(con, IMPORTS_TABLE):
        return False
    rows = con.execute(f"SELECT tables FROM {IMPORTS_TABLE} WHERE relation = ?", [relation]).fetchall()
    for (owned,) in rows:
        for t in owned:
            con.execute(sql_text(exp.Drop(kind="TABLE", tables=[table_ref(t)], exists=True)))
    con.execute(f"DELETE FROM {IMPORTS_TABLE} WHERE relation = ?", [relation])
    return bool(rows)


@functools.lru_cache(maxsize=256)
def _normal_sql(text: str) -> str:
    try:
        return sqlglot.parse_one(text, read="duckdb").sql(dialect="duckdb")
    except sqlglot.errors.ParseError:
        return text


def live_imports(
    con: duckdb.DuckDBPyConnection,
    variables: Mapping[str, CreateVariable] | None = None,
    relations: Mapping[str, RelationInfo] | None = None,
) -> list[ImportInfo]:
    """Imports whose relation has a vid map built from the import's FROM query, by relation name.

    With ``variables`` (the catalog's), a relation replaced since the import is left out.
    ``relations``: the vid maps as `relation_info` returns them (read when not given).
    A variables table edited by hand (ids no longer ``0 .. n-1``) raises `GroundingError`.
    """
    if relations is not None and not any(i.per_row for i in relations.values()):
        return []  # an import's relation always has a per-row cardinality: none can be live
    if not schema_is_known(con) and not table_exists(con, IMPORTS_TABLE):
        return []
    # plain scans joined in Python: a join in DuckDB costs several times more on tables this small
    rows = con.execute(f"SELECT relation, n_vars, n_factors, n_entries, source, tables[1] FROM {IMPORTS_TABLE}").fetchall()
    if not rows:
        return []
    rows.sort(key=lambda r: r[0])  # in Python: an ORDER BY doubles the cost of this read
    maps = relation_info(con) if relations is None else relations
    out = []
    for rel, n_vars, n_factors, n_entries, source, table in rows:
        info = maps.get(rel)
        if info is None or not info.per_row:
            continue
        if variables is not None:
            v = variables.get(rel)
            if v is None or not v.per_row_cardinality or _normal_sql(v.source) != _normal_sql(source):
                continue
        ids_sql, fp_sql = _check_sql(rel, table)
        lo, hi, count = con.execute(ids_sql).fetchall()[0]
        # the map holds the distinct ids: n distinct ids in 0 .. n-1 and n rows = exactly 0 .. n-1
        if info.n != n_vars or count != n_vars or (n_vars and (lo != 0 or hi != n_vars - 1)):
            raise GroundingError(
                f"imported relation '{rel}': its variables table {imported_vars_table(rel)} no longer holds the ids "
                f"0 .. {n_vars - 1} it was imported with; drop the variable and import it again"
            )
        n_rows, digest = con.execute(fp_sql).fetchall()[0]
        out.append(ImportInfo(rel, info.base, info.n, int(n_factors), int(n_entries), table, f"{n_rows}:{digest}"))
    return out


@functools.lru_cache(maxsize=256)
def _check_sql(relation: str, factor_table: str) -> tuple[str, str]:
    """The ids check of an import's variables table and the fingerprint of its factor table (a
    factor edited through plain SQL changes the store token, so no graph built before the edit
    is served after it). Two plain scans: cheaper in DuckDB than one statement joining them."""
    ids = exp.select(exp.func("min", col("id")), exp.func("max", col("id")), exp.Count(this=exp.Star())).from_(
        table_ref(imported_vars_table(relation))
    )
    fp = exp.select(
        exp.Count(this=exp.Star()), exp.func("sum", exp.func("hash", col("fid"), col("vids"), col("log_table")))
    ).from_(table_ref(factor_table))
    return sql_text(ids), sql_text(fp)


def _unnested(table: str) -> exp.Subquery:
    """(SELECT fid, unnest(vids) AS v FROM table) AS u"""
    sel = exp.select(col("fid"), exp.Unnest(expressions=[col("vids")]).as_("v")).from_(table_ref(table))
    return exp.Subquery(this=sel, alias=exp.TableAlias(this=ident("u")))


def _touching_fids(info: ImportInfo, vid_table: str) -> exp.Select:
    """fids of the import's factors with an argument among the global vids of ``vid_table``."""
    keys = (
        exp.select(exp.Sub(this=col("vid"), expression=exp.Literal.number(info.base)))
        .from_(table_ref(vid_table))
        .where(exp.Between(this=col("vid"), low=exp.Literal.number(info.base), high=exp.Literal.number(info.base + info.n - 1)))
    )
    return exp.select(col("fid", "u")).distinct().from_(_unnested(info.table)).where(
        exp.In(this=col("v", "u"), query=exp.Subquery(this=keys))
    )


def import_neighbours_select(info: ImportInfo, vid_table: str) -> exp.Select:
    """Global vids of every argument of the import's factors touching ``vid_table``'s vids."""
    touching = _touching_fids(info, vid_table)
    return exp.select(exp.Add(this=col("v", "u"), expression=exp.Literal.number(info.base)).as_("vid")).distinct().from_(
        _unnested(info.table)
    ).where(exp.In(this=col("fid", "u"), query=exp.Subquery(this=touching)))


def _numpy_list(column: pa.ChunkedArray, dtype) -> tuple[np.ndarray, np.ndarray]:
    arr = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if len(arr) == 0:
        return np.zeros(1, np.int64), np.zeros(0, dtype)
    offsets = arr.offsets.to_numpy().astype(np.int64)
    values = arr.flatten().to_numpy(zero_copy_only=False)
    return offsets - offsets[0], np.ascontiguousarray(values, dtype=dtype)


def import_arrays(con: duckdb.DuckDBPyConnection, info: ImportInfo, region: str | None = None) -> ImportArrays:
    """The import's factors in fid order (only those touching ``region``'s vids when given)."""
    sel = exp.select(col("vids"), col("log_table")).from_(table_ref(info.table))
    if region is not None:
        sel = sel.where(exp.In(this=col("fid"), query=exp.Subquery(this=_touching_fids(info, region))))
    t = con.sql(sql_text(sel.order_by(col("fid")))).to_arrow_table()
    offsets, ids = _numpy_list(t.column("vids"), np.int64)
    table_offsets, tables = _numpy_list(t.column("log_table"), np.float64)
    return ImportArrays(offsets, ids + info.base, table_offsets, tables)


@functools.lru_cache(maxsize=256)
def _hard_sql(table: str) -> str:
    # depends on the table name only: built once (sqlglot costs about a millisecond per query)
    has_inf = sqlglot.parse_one("len(list_filter(log_table, x -> isinf(x))) > 0", read="duckdb")
    sel = exp.select(col("fid"), col("vids"), col("log_table")).from_(table_ref(table)).where(has_inf)
    return sql_text(sel.order_by(col("fid")))


def hard_import_arrays(con: duckdb.DuckDBPyConnection, info: ImportInfo) -> tuple[ImportArrays, np.ndarray]:
    """The import's factors holding an infinite log-potential (a 0 or an infinity in the source
    table), with their fids: the only factors that can make evidence impossible."""
    t = con.sql(_hard_sql(info.table)).to_arrow_table()
    offsets, ids = _numpy_list(t.column("vids"), np.int64)
    table_offsets, tables = _numpy_list(t.column("log_table"), np.float64)
    fids = np.asarray(t.column("fid").to_numpy(), dtype=np.int64)
    return ImportArrays(offsets, ids + info.base, table_offsets, tables), fids
