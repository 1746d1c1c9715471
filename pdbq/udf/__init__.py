"""pdbq inside plain DuckDB SQL: `register(con)` adds PROB/DIST/MAP scalar functions and macros to
a DuckDB connection (`pdbq.udf.bridge`); `unregister(con)` removes them. `connect` (pdbq's own door,
`pdbq.connect`) registers them on every database file it opens (`pdbq.udf.doors`)."""

from pdbq.udf.bridge import register, unregister
from pdbq.udf.doors import attach_functions, connect

__all__ = ["register", "unregister", "connect", "attach_functions"]
