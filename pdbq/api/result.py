"""`Result`: the materialised answer of one statement (a SELECT, SHOW or probabilistic query).

>>> import pyarrow as pa
>>> r = Result(pa.table({"movie": ["Up", "Twilight"], "p": [0.75, 0.25]}))
>>> r.columns, len(r), r.fetchall()
(['movie', 'p'], 2, [('Up', 0.75), ('Twilight', 0.25)])
"""

from __future__ import annotations

import html
from typing import Any

import duckdb
import pyarrow as pa

__all__ = ["Result"]

_REPR_ROWS = 20


class Result:
    """A materialised Arrow table plus ``diagnostics`` (empty for plain SQL; for probabilistic
    queries: method, samples, chains, standard errors, R-hat, ... as the query engine reports).

    ``connection`` is the database's DuckDB connection, used by ``relation()`` when none is given.
    """

    __slots__ = ("_table", "diagnostics", "_con")

    def __init__(self, table: pa.Table, diagnostics: dict[str, Any] | None = None, *,
                 connection: duckdb.DuckDBPyConnection | None = None):
        if not isinstance(table, pa.Table):
            raise TypeError(f"Result wraps a pyarrow.Table, not {type(table).__name__}")
        self._table = table
        self.diagnostics: dict[str, Any] = dict(diagnostics or {})
        self._con = connection

    # ---------------------------------------------------------------- data

    def arrow(self) -> pa.Table:
        """The result as a pyarrow Table (no copy)."""
        return self._table

    def df(self) -> Any:
        """The result as a pandas DataFrame (needs pandas installed)."""
        return self._table.to_pandas()

    def fetchall(self) -> list[tuple[Any, ...]]:
        """Every row as a tuple, like DuckDB's ``fetchall()``."""
        cols = [c.to_pylist() for c in self._table.columns]
        return list(zip(*cols)) if cols else [() for _ in range(self._table.num_rows)]

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
        t = self._table
        n = t.num_rows
        shown = t.slice(0, _REPR_ROWS)
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in t.column_names)
        body = []
        for row in Result(shown).fetchall():
            cells = "".join(f"<td>{'NULL' if v is None else html.escape(str(v))}</td>" for v in row)
            body.append(f"<tr>{cells}</tr>")
        foot = f"<p>{n} row{'' if n == 1 else 's'}" + (f" ({_REPR_ROWS} shown)" if n > _REPR_ROWS else "") + "</p>"
        return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{foot}"
