"""pdbq's own doors to a database file: `connect` opens it with the SQL functions registered, so
that a saved view over ``pdbq_prob(...)`` works again after the file is reopened."""

from __future__ import annotations

import os

from pdbq.api.database import Database
from pdbq.api.database import connect as _open
from pdbq.graph.cache import DEFAULT_CACHE_BYTES
from pdbq.udf.bridge import add_macros, register, registered_elsewhere, unregister

__all__ = ["connect", "attach_functions"]

_IN_MEMORY = ("", ":memory:")


def connect(
    path: str | os.PathLike[str] = ":memory:", *, read_only: bool = False, cache_bytes: int = DEFAULT_CACHE_BYTES,
    allow_external: bool = False,
) -> Database:
    """Open (or create) a DuckDB database and its pdbq catalog (`pdbq.api.connect`).

    For a database file, pdbq's SQL functions (``pdbq_prob``, ``pdbq_dist``, ... of docs/udf.md)
    are registered on the connection, as `register` does, so views that call them can be queried
    after the file is reopened; closing the database unregisters them. An in-memory database keeps
    no views across sessions and is opened without them (call ``pdbq.register(db.duckdb,
    database=db)`` to use them there).

    ``allow_external``: let ``pdbq_set`` set options that reach outside this process (the Dask
    ``scheduler``). Off by default: a view stored in the file runs for whoever opens it, and must
    not make them connect to an address the file's author chose (docs/udf.md).

    >>> db = connect()
    >>> db.execute("SELECT 42 AS answer").fetchall()
    [(42,)]
    >>> db.close()
    """
    if not isinstance(allow_external, bool):
        raise TypeError(f"allow_external= takes True or False, not {type(allow_external).__name__}")
    db = _open(path, read_only=read_only, cache_bytes=cache_bytes)
    try:
        attach_functions(db, allow_external=allow_external)
    except BaseException:
        db.close()
        raise
    return db


def attach_functions(db: Database, *, allow_external: bool = False) -> None:
    """Register pdbq's SQL functions on ``db`` when it is a file, answering from ``db`` (its
    ``default_options`` at this moment are their starting options), until ``db`` is closed.

    DuckDB shares Python functions between the connections of one database in a process: when
    another connection to the same file already registered them, ``db`` gets their SQL names over
    them (they answer from that connection's database, and stop working when it is closed)."""
    if db.path in _IN_MEMORY:
        return
    con = db.duckdb
    if registered_elsewhere(con):
        # another connection of this process to the same file registered them: they answer from
        # that connection's database; this one only needs its own (per-connection) SQL names
        add_macros(con)
        return
    register(con, database=db, allow_external=allow_external)
    db.on_close(lambda: unregister(con))
