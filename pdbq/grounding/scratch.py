"""A writable scratch database for the factor store of a read-only database (issue 12, item 9).

Answering a query writes: vid maps, groundings, weights (the ``pdbq_fs_*`` tables). On a
database opened read-only, `use_scratch(con)` attaches an in-memory database ``pdbq_scratch``,
makes it the connection's default (unqualified CREATE/INSERT/DROP land there) and puts it first on
the search path before the file, so the file's tables, views and pdbq catalog stay readable
under their plain names. The file's own factor-store tables are shadowed: each gets an empty
namesake in the scratch database (so a DROP or a lookup never reaches the file), except the
weights, copied with their values (learned weights are kept), the rules' registry, copied with
every rule marked as having no stored factors (so their weights are not dropped as orphans), and
imported models
(``pdbq_fs_imports``, ``pdbq_fs_imported*``), read from the file as they are. Everything in the
scratch database is lost at close; the file is never written.

The switch lasts for one pdbq operation (`scratch_session`): a user's own CREATE on a
read-only database still fails as it would in DuckDB.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
import sqlglot
import sqlglot.expressions as exp

from pdbq.grounding.store import sql_text

__all__ = ["SCRATCH", "use_scratch", "scratch_session"]

SCRATCH = "pdbq_scratch"

# Read from the file as they are: an import is data, not derived state.
_READ_FROM_FILE = ("pdbq_fs_imports", "pdbq_fs_imported")
# Copied with their rows: learned weight values cannot be recomputed.
_COPIED = ("pdbq_fs_weights",)


def _qualified(database: str, table: str) -> exp.Table:
    return exp.Table(
        this=exp.to_identifier(table, quoted=True),
        db=exp.to_identifier("main", quoted=True),
        catalog=exp.to_identifier(database, quoted=True),
    )


def use_scratch(con: duckdb.DuckDBPyConnection, database: str | None = None) -> str:
    """Route this connection's writes to ``pdbq_scratch`` (attached and seeded on first use);
    returns the name of the read-only database. ``database``: its name when already known (a
    cursor's default database is the file's)."""
    file_db = database or con.execute("SELECT current_database()").fetchall()[0][0]
    attached = {r[0] for r in con.execute("SELECT database_name FROM duckdb_databases()").fetchall()}
    if SCRATCH not in attached:
        con.execute(f"ATTACH ':memory:' AS {SCRATCH} (READ_WRITE)")
        tables = con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main' "
            "AND starts_with(table_name, 'pdbq_fs_')",
            [file_db],
        ).fetchall()
        for (name,) in tables:
            if name.startswith(_READ_FROM_FILE):
                continue
            source = exp.select("*").from_(_qualified(file_db, name))
            if name == "pdbq_fs_rules":
                # kept so each rule's weights are kept, but marked empty: its factors are rebuilt
                source = sqlglot.parse_one(
                    "SELECT * REPLACE (FALSE AS complete, CAST(0 AS BIGINT) AS n_factors) FROM x", read="duckdb"
                )
                source.find(exp.Table).replace(_qualified(file_db, name))
            elif name not in _COPIED:
                source = source.limit(0)
            con.execute(sql_text(exp.Create(this=_qualified(SCRATCH, name), kind="TABLE", expression=source)))
    con.execute(f"USE {SCRATCH}")
    path = ",".join(sql_text(exp.Dot(this=exp.to_identifier(d, quoted=True), expression=exp.to_identifier("main")))
                    for d in (SCRATCH, file_db))
    con.execute(f"SET search_path = {exp.Literal.string(path).sql(dialect='duckdb')}")
    return file_db


@contextmanager
def scratch_session(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Within the block, unqualified writes of ``con`` go to ``pdbq_scratch`` (`use_scratch`);
    afterwards the file is the default database again, with the search path it had before."""
    file_db = con.execute("SELECT current_database()").fetchall()[0][0]
    if file_db == SCRATCH:  # nested: already switched
        yield
        return
    previous = con.execute("SELECT current_setting('search_path')").fetchall()[0][0]
    use_scratch(con, file_db)
    try:
        yield
    finally:
        con.execute(f"USE {exp.to_identifier(file_db, quoted=True).sql(dialect='duckdb')}")
        con.execute(f"SET search_path = {exp.Literal.string(previous or '').sql(dialect='duckdb')}")
