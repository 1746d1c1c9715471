"""`Result`: the materialised answer of one statement (a SELECT, SHOW or probabilistic query).

>>> import pyarrow as pa
>>> r = Result(pa.table({"movie": ["Up", "Twilight"], "p": [0.75, 0.25]}))
>>> r.columns, len(r), r.fetchall()
(['movie', 'p'], 2, [('Up', 0.75), ('Twilight', 0.25)])
>>> r.fetchone()
('Up', 0.75)

Values come back as DuckDB's Python client gives them: a MAP (``DIST(v)``) is a ``dict``.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa

from pdbq.errors import PdbqError

__all__ = ["Result"]

_NO_PANDAS = "Result.df() needs pandas, an optional dependency: pip install 'pdbq[pandas]' (or pip install pandas)"
_NO_POLARS = "Result.pl() needs polars, an optional dependency: pip install 'pdbq[polars]' (or pip install polars)"


def _pylist(column: pa.ChunkedArray) -> list[Any]:
    # MAP columns as dicts, the shape DuckDB's fetchall() gives (pyarrow's default is pairs)
    return column.to_pylist(maps_as_pydicts="lossy")

_REPR_ROWS = 20


class Result:
    """A materialised Arrow table plus ``diagnostics`` (empty for plain SQL; for probabilistic
    queries: method, samples, chains, standard errors, R-hat, ... as the query engine reports).

    ``connection`` is the database's DuckDB connection, used by ``relation()`` when none is given.
    """

    __slots__ = ("_table", "diagnostics", "_con", "_db", "_cursor")

    def __init__(self, table: pa.Table, diagnostics: dict[str, Any] | None = None, *,
                 connection: duckdb.DuckDBPyConnection | None = None, database: Any = None):
        if not isinstance(table, pa.Table):
            raise TypeError(f"Result wraps a pyarrow.Table, not {type(table).__name__}")
        self._table = table
        self.diagnostics: dict[str, Any] = dict(diagnostics or {})
        self._con = connection
        self._db = database
        self._cursor = 0  # rows fetchone/fetchmany have handed out

    @classmethod
    def empty(cls, database: Any = None) -> "Result":
        """The result of a statement that returns no rows (CREATE, DROP, INSERT, ...): no columns,
        no rows, and ``execute``/``sql`` to chain the next statement on ``database``."""
        con = getattr(database, "_con", None)
        return cls(pa.table({}), connection=con, database=database)

    # ---------------------------------------------------------------- chaining

    def execute(self, script: str, parameters: Any = None, **kwargs: Any) -> "Result":
        """Run the next statement on the database this result came from (as DuckDB's
        ``con.execute(...).execute(...)``)."""
        import sys  # noqa: PLC0415

        if self._db is None:
            raise PdbqError("this Result is not attached to a database; call db.execute(...)")
        return self._db.execute(script, parameters, _frame=sys._getframe(1), **kwargs)

    # ---------------------------------------------------------------- data

    def arrow(self) -> pa.Table:
        """The result as a pyarrow Table (no copy)."""
        return self._table

    def df(self) -> Any:
        """The result as a pandas DataFrame (pandas is optional: ``pip install 'pdbq[pandas]'``)."""
        try:
            import pandas  # noqa: F401, PLC0415
        except ImportError:
            raise PdbqError(_NO_PANDAS) from None
        return self._table.to_pandas()

    fetchdf = df

    def pl(self) -> Any:
        """The result as a polars DataFrame (polars is optional: ``pip install 'pdbq[polars]'``)."""
        try:
            import polars  # noqa: PLC0415
        except ImportError:
            raise PdbqError(_NO_POLARS) from None
        return polars.from_arrow(self._table)

    def fetchall(self) -> list[tuple[Any, ...]]:
        """Every row as a tuple, like DuckDB's ``fetchall()`` (MAP values as dicts)."""
        cols = [_pylist(c) for c in self._table.columns]
        return list(zip(*cols)) if cols else [() for _ in range(self._table.num_rows)]

    def fetchmany(self, size: int = 1) -> list[tuple[Any, ...]]:
        """The next ``size`` rows not yet fetched by ``fetchone``/``fetchmany``."""
        start = self._cursor
        part = self._table.slice(start, max(0, int(size)))
        self._cursor = start + part.num_rows
        cols = [_pylist(c) for c in part.columns]
        return list(zip(*cols)) if cols else [() for _ in range(part.num_rows)]

    def fetchone(self) -> tuple[Any, ...] | None:
        """The next row as a tuple, or None after the last one (like DuckDB's ``fetchone()``)."""
        rows = self.fetchmany(1)
        return rows[0] if rows else None

    def show(self, max_rows: int | None = 40) -> None:
        """Print the result as a boxed table, like DuckDB's ``relation.show()``."""
        from pdbq.answers.render import render_table  # noqa: PLC0415

        print(render_table(self._table, max_rows=max_rows))  # noqa: T201 - printing is what show() is for

    @property
    def columns(self) -> list[str]:
        return list(self._table.column_names)

    def relation(self, con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyRelation:
        """A DuckDB relation over the rows, on ``con`` or else the database's connection."""
        con = con if con is not None else self._con
        if con is None:
            raise ValueError("this Result has no connection; pass one: result.relation(con)")
        return con.from_arrow(self._table)

    def plot(self, path: Any = None, ax: Any = None) -> Any:
        """Running estimates of the query variables with ±2 SE bands (matplotlib, the optional
        extra ``plot``); saves to ``path`` (PNG by suffix) when given; returns the Figure.
        See `pdbq.answers.plot.plot_trace`."""
        from pdbq.answers.plot import plot_trace  # noqa: PLC0415 - matplotlib only when plotting

        return plot_trace(self.diagnostics, ax=ax, path=path)

    def __len__(self) -> int:
        return self._table.num_rows

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Result):
            return NotImplemented
        return self._table.equals(other._table) and self.diagnostics == other.diagnostics

    __hash__ = None  # type: ignore[assignment]  # mutable diagnostics

    # ---------------------------------------------------------------- display

    def __repr__(self) -> str:
        from pdbq.answers.render import render_table

        return render_table(self._table, max_rows=_REPR_ROWS)

    def _repr_html_(self) -> str:
        """Jupyter's view: an HTML table; for probabilistic queries probabilities as bars, standard
        errors beside them and how the answer was computed (`pdbq.answers.notebook.result_html`)."""
        from pdbq.answers.notebook import result_html  # noqa: PLC0415

        return result_html(self._table, self.diagnostics, max_rows=_REPR_ROWS)
