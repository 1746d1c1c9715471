"""pdbq inside plain DuckDB SQL: `register(con)` adds PROB/DIST/MAP scalar functions and macros to
a DuckDB connection (`pdbq.udf.bridge`); `unregister(con)` removes them."""

from pdbq.udf.bridge import register, unregister

__all__ = ["register", "unregister"]
