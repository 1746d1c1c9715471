"""An Arrow table readable by name in statements on a connection, for the length of a block.

`DuckDBPyConnection.register` is a catalog change: it (and its ``unregister``) moves the count
that `pdbq.planning.store_state` keeps checks by, so a query that registered its estimates
would make the next one check the store in full. This DuckDB's source registry
(``_register_source``) names a Python object for as long as its handle lives without touching
the catalog; an older build falls back to ``register``/``unregister``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
import pyarrow as pa

__all__ = ["arrow_source"]


@contextmanager
def arrow_source(con: duckdb.DuckDBPyConnection, table: pa.Table) -> Iterator[str]:
    """The name ``table`` is readable under inside the block."""
    register = getattr(con, "_register_source", None)
    if register is not None:
        handle = register(table, None)
        try:
            yield handle.name
        finally:
            del handle
        return
    name = f"__pdbq_estimates_{uuid.uuid4().hex}"
    con.register(name, table)
    try:
        yield name
    finally:
        con.unregister(name)
