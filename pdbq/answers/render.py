"""Text renderings of query results for the shell: boxed tables (like DuckDB's CLI), csv, json, markdown.

Rendering works on a `Frame`, a small snapshot of a result: column names, display types, and
the rows to show. `frame_from_arrow` takes only the first and last rows of a long result, so a
million-row answer costs no more to print than a forty-row one.

>>> import pyarrow as pa
>>> print(render_table(pa.table({"id": [1, 22], "name": ["a", None]})))
┌───────┬─────────┐
│  id   │  name   │
│ int64 │ varchar │
├───────┼─────────┤
│     1 │ a       │
│    22 │ NULL    │
└───────┴─────────┘
2 rows
"""

from __future__ import annotations

import csv
import datetime as _dt
import decimal
import html
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pdbq.errors import PdbqError

__all__ = [
    "MODES",
    "Frame",
    "frame_from_arrow",
    "frame_from_result",
    "render",
    "render_result",
    "render_table",
    "render_csv",
    "render_json",
    "render_markdown",
    "render_line",
    "render_list",
    "render_html",
    "arrow_type_name",
    "format_value",
    "display_width",
]

MODES = ("table", "line", "csv", "json", "markdown", "list", "tabs", "html")

# Narrowest a text column is squeezed to before whole columns are left out.
_MIN_TEXT_WIDTH = 8
_ELLIPSIS = "…"
_VDOTS = "·"


@dataclass(frozen=True)
class Frame:
    """What a rendering needs from a result.

    ``rows`` holds the first ``head`` rows of the result followed by its last rows; when
    ``len(rows) < total_rows`` the rows in between are left out (shown as ``·``).
    """

    columns: tuple[str, ...]
    types: tuple[str, ...]
    numeric: tuple[bool, ...]
    rows: tuple[tuple[Any, ...], ...]
    total_rows: int
    head: int

    @property
    def elided(self) -> bool:
        return len(self.rows) < self.total_rows


def display_width(text: str) -> int:
    """Terminal columns ``text`` occupies (wide East-Asian characters count 2)."""
    try:
        from wcwidth import wcswidth
    except ImportError:  # wcwidth comes with prompt_toolkit; stay usable without it
        return len(text)
    width = wcswidth(text)
    return len(text) if width < 0 else width


def _arrow():
    import pyarrow

    return pyarrow


def arrow_type_name(t: Any) -> str:
    """A DuckDB-CLI style lower-case name for an Arrow type (``int32``, ``varchar``, ``double``)."""
    pa = _arrow()
    types = pa.types
    if types.is_dictionary(t):
        return arrow_type_name(t.value_type)
    if types.is_boolean(t):
        return "boolean"
    if types.is_integer(t):
        return str(t)  # int8 .. int64, uint8 .. uint64: DuckDB's CLI spells them the same way
    if types.is_float16(t) or types.is_float32(t):
        return "float"
    if types.is_float64(t):
        return "double"
    if types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if types.is_string(t) or types.is_large_string(t) or getattr(types, "is_string_view", lambda _: False)(t):
        return "varchar"
    if types.is_binary(t) or types.is_large_binary(t) or types.is_fixed_size_binary(t):
        return "blob"
    if types.is_date(t):
        return "date"
    if types.is_timestamp(t):
        return "timestamp with time zone" if t.tz else "timestamp"
    if types.is_time(t):
        return "time"
    if types.is_interval(t) or types.is_duration(t):
        return "interval"
    if types.is_list(t) or types.is_large_list(t) or types.is_fixed_size_list(t):
        return f"{arrow_type_name(t.value_type)}[]"
    if types.is_struct(t):
        inner = ", ".join(f"{t.field(i).name} {arrow_type_name(t.field(i).type)}" for i in range(t.num_fields))
        return f"struct({inner})"
    if types.is_map(t):
        return f"map({arrow_type_name(t.key_type)}, {arrow_type_name(t.item_type)})"
    if types.is_null(t):
        return "null"
    return str(t)


def _is_numeric_arrow(t: Any) -> bool:
    types = _arrow().types
    if types.is_dictionary(t):
        t = t.value_type
    return bool(types.is_integer(t) or types.is_floating(t) or types.is_decimal(t))


def _as_table(data: Any) -> Any:
    """A pyarrow Table from a Table, a RecordBatchReader, a pdbq Result or a DuckDB relation."""
    pa = _arrow()
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if hasattr(data, "arrow"):
        return _as_table(data.arrow())
    raise TypeError(f"cannot render an object of type {type(data).__name__}")


def frame_from_arrow(table: Any, max_rows: int | None = 40) -> Frame:
    """Snapshot an Arrow table; with ``max_rows`` only the first and last ``max_rows // 2`` rows."""
    table = _as_table(table)
    n = table.num_rows
    if max_rows is not None and n > max_rows:
        head_n = (max_rows + 1) // 2
        tail_n = max_rows - head_n
        parts = [table.slice(0, head_n)]
        if tail_n:
            parts.append(table.slice(n - tail_n, tail_n))
        rows: list[tuple[Any, ...]] = []
        for part in parts:
            rows.extend(_rows(part))
        head = head_n
    else:
        rows = _rows(table)
        head = len(rows)
    schema = table.schema
    return Frame(
        columns=tuple(schema.names),
        types=tuple(arrow_type_name(f.type) for f in schema),
        numeric=tuple(_is_numeric_arrow(f.type) for f in schema),
        rows=tuple(rows),
        total_rows=n,
        head=head,
    )


def _rows(table: Any) -> list[tuple[Any, ...]]:
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return list(zip(*cols)) if cols else [() for _ in range(table.num_rows)]


def frame_from_result(result: Any, max_rows: int | None = 40) -> Frame:
    """Snapshot a pdbq ``Result`` (or anything with ``.arrow()``)."""
    return frame_from_arrow(_as_table(result), max_rows)


# ---------------------------------------------------------------------------------------------
# values


def _escape_text(text: str) -> str:
    # A newline or tab inside a cell would break the box; show it the way it was typed.
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif not ch.isprintable() and ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


def _format_float(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == int(x) and abs(x) < 1e16:
        return f"{x:.1f}"
    return repr(x)


def format_value(value: Any, *, nested: bool = False) -> str:
    """The text a table cell shows for one Python value (``None`` is ``NULL``)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _format_float(value)
    if isinstance(value, (int, decimal.Decimal)):
        return str(value)
    if isinstance(value, str):
        return f"'{value}'" if nested else value
    if isinstance(value, _dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (_dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "".join(chr(b) if 0x20 <= b < 0x7F and b != 0x5C else f"\\x{b:02X}" for b in bytes(value))
    if isinstance(value, dict):
        return "{" + ", ".join(f"'{k}': {format_value(v, nested=True)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        # Arrow gives a MAP as a list of (key, value) tuples.
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
            return "{" + ", ".join(f"{format_value(k, nested=True)}={format_value(v, nested=True)}" for k, v in value) + "}"
        return "[" + ", ".join(format_value(v, nested=True) for v in value) + "]"
    return str(value)


def _cell(value: Any, null: str = "NULL") -> str:
    return null if value is None else _escape_text(format_value(value))


def _fit(text: str, width: int) -> str:
    """Cut ``text`` to ``width`` display columns, ending in an ellipsis when cut."""
    if display_width(text) <= width:
        return text
    out, used = [], 0
    for ch in text:
        w = display_width(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + _ELLIPSIS


def _pad(text: str, width: int, align: str) -> str:
    gap = max(0, width - display_width(text))
    if align == "right":
        return " " * gap + text
    if align == "center":
        left = gap // 2
        return " " * left + text + " " * (gap - left)
    return text + " " * gap


# ---------------------------------------------------------------------------------------------
# boxed tables


def _plan_columns(natural: list[int], floors: list[int], shrinkable: list[bool], width: int | None) -> tuple[list[int], list[int]]:
    """Choose which columns to show (indices, with -1 for the '…' column) and their widths."""
    n = len(natural)
    every = list(range(n))

    def total(idx: list[int], widths: list[int]) -> int:
        return sum(w + 3 for w in widths) + 1

    if width is None or total(every, natural) <= width:
        return every, list(natural)

    def squeeze(idx: list[int], budget: int) -> list[int] | None:
        """Widths for ``idx`` that fit ``budget``: shrink the widest text columns first."""
        nat = [natural[i] if i >= 0 else 1 for i in idx]
        low = [(floors[i] if shrinkable[i] else natural[i]) if i >= 0 else 1 for i in idx]
        if total(idx, low) > budget:
            return None
        # The largest cap c such that min(natural, max(c, floor)) fits: a water level over the widest.
        lo, hi = 1, max(nat)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            trial = [n_ if not (j >= 0 and shrinkable[j]) else max(min(n_, mid), f) for j, n_, f in zip(idx, nat, low)]
            if total(idx, trial) <= budget:
                lo = mid
            else:
                hi = mid - 1
        return [n_ if not (j >= 0 and shrinkable[j]) else max(min(n_, lo), f) for j, n_, f in zip(idx, nat, low)]

    widths = squeeze(every, width)
    if widths is not None:
        return every, widths
    # Leave out middle columns, keeping the outer ones (key columns usually come first).
    n_left, n_right = 0, 0
    while n_left + n_right < n:
        if n_left <= n_right:
            trial = (n_left + 1, n_right)
        else:
            trial = (n_left, n_right + 1)
        idx = list(range(trial[0])) + [-1] + list(range(n - trial[1], n))
        if squeeze(idx, width) is None:
            break
        n_left, n_right = trial
    if n_left == 0:
        # A terminal too narrow for even one column at its floor: cut the first column to fit.
        return [0, -1], [max(1, min(natural[0], width - 8)), 1]
    idx = list(range(n_left)) + [-1] + list(range(n - n_right, n))
    return idx, squeeze(idx, width)


def render_table(data: Any, *, width: int | None = None, max_rows: int | None = 40, header: bool = True,
                 null: str = "NULL") -> str:
    """A boxed table with a header of names and types, then a row-count line.

    ``width`` (terminal columns) cuts long text cells with ``…`` and, if that is not enough,
    leaves out middle columns; numbers are never cut. ``max_rows`` keeps the first and last rows
    of a longer result. ``header=False`` leaves out the names and types; ``null`` is the text of
    a NULL.
    """
    frame = data if isinstance(data, Frame) else frame_from_arrow(data, max_rows)
    ncol = len(frame.columns)
    if ncol == 0:
        return _count_line(frame, None)
    cells = [[_cell(v, null) for v in row] for row in frame.rows]
    names = [_escape_text(c) for c in frame.columns]
    natural = []
    floors = []
    for j in range(ncol):
        head_w = max(display_width(names[j]), display_width(frame.types[j])) if header else 0
        body_w = max((display_width(r[j]) for r in cells), default=0)
        natural.append(max(head_w, body_w, 1))
        floors.append(min(natural[-1], _MIN_TEXT_WIDTH))
    shrinkable = [not frame.numeric[j] for j in range(ncol)]
    idx, widths = _plan_columns(natural, floors, shrinkable, width)

    def line(left: str, mid: str, right: str) -> str:
        return left + mid.join("─" * (w + 2) for w in widths) + right

    def row_text(values: Sequence[str], aligns: Sequence[str]) -> str:
        parts = [f" {_pad(_fit(v, w), w, a)} " for v, w, a in zip(values, widths, aligns)]
        return "│" + "│".join(parts) + "│"

    def pick(values: Sequence[str], filler: str) -> list[str]:
        return [values[i] if i >= 0 else filler for i in idx]

    body_align = ["right" if i >= 0 and frame.numeric[i] else ("center" if i < 0 else "left") for i in idx]
    center = ["center"] * len(idx)
    out = [line("┌", "┬", "┐")]
    if header:
        out.append(row_text(pick(names, _ELLIPSIS), center))
        out.append(row_text(pick(list(frame.types), ""), center))
        out.append(line("├", "┼", "┤"))
    for r, row in enumerate(cells):
        if frame.elided and r == frame.head:
            for _ in range(3):
                out.append(row_text([_VDOTS] * len(idx), ["right" if a == "right" else "center" for a in body_align]))
        out.append(row_text(pick(row, _ELLIPSIS), body_align))
    out.append(line("└", "┴", "┘"))
    shown_cols = sum(1 for i in idx if i >= 0)
    out.append(_count_line(frame, shown_cols if shown_cols < ncol else None))
    return "\n".join(out)


def _count_line(frame: Frame, shown_cols: int | None) -> str:
    n = frame.total_rows
    text = f"{n} row" + ("" if n == 1 else "s")
    if frame.elided:
        text += f" ({len(frame.rows)} shown)"
    if shown_cols is not None:
        text += f", {len(frame.columns)} columns ({shown_cols} shown)"
    return text


# ---------------------------------------------------------------------------------------------
# machine-readable modes


def _plain(value: Any) -> Any:
    """A JSON-ready value: numbers stay numbers, dates become ISO strings, NaN/inf become null."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, decimal.Decimal):
        return float(value) if value.is_finite() else None
    if isinstance(value, (_dt.date, _dt.datetime, _dt.time)):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return format_value(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def _full(data: Any) -> Frame:
    return data if isinstance(data, Frame) else frame_from_arrow(data, None)


def render_csv(data: Any, *, header: bool = True, null: str = "", separator: str = ",") -> str:
    """RFC-4180 CSV with a header line (unless ``header=False``); NULL is ``null`` (empty);
    fields are separated by ``separator`` (one character)."""
    if len(separator) != 1:
        raise PdbqError(f"csv output needs a one-character field separator, not {separator!r} "
                        "(the shell's .separator; .mode list takes longer ones)")
    frame = _full(data)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n", delimiter=separator)
    if header:
        writer.writerow(frame.columns)
    for row in frame.rows:
        writer.writerow([null if v is None else (format_value(v) if not isinstance(v, str) else v) for v in row])
    return buf.getvalue().rstrip("\n")


def render_list(data: Any, *, header: bool = True, null: str = "", separator: str = "|") -> str:
    """Values joined by ``separator``, one row a line, nothing quoted (sqlite's and DuckDB's list
    mode; ``separator="\\t"`` is their tabs mode).

    >>> import pyarrow as pa
    >>> print(render_list(pa.table({"movie": ["Up", None], "p": [0.5, 0.25]})))
    movie|p
    Up|0.5
    |0.25
    """
    frame = _full(data)
    lines = [separator.join(frame.columns)] if header else []
    for row in frame.rows:
        lines.append(separator.join(null if v is None else (v if isinstance(v, str) else format_value(v)) for v in row))
    return "\n".join(lines)


def render_line(data: Any, *, null: str = "NULL") -> str:
    """One ``name = value`` line per column, rows separated by a blank line (sqlite's line mode).

    >>> import pyarrow as pa
    >>> print(render_line(pa.table({"movie": ["Up"], "p": [0.5]})))
    movie = Up
        p = 0.5
    """
    frame = _full(data)
    names = [_escape_text(c) for c in frame.columns]
    w = max((display_width(n) for n in names), default=0)
    blocks = []
    for row in frame.rows:
        blocks.append("\n".join(f"{' ' * (w - display_width(n))}{n} = {_cell(v, null)}" for n, v in zip(names, row)))
    return "\n\n".join(blocks)


def render_json(data: Any) -> str:
    """A JSON array with one object per row, one row per line."""
    frame = _full(data)
    if not frame.rows:
        return "[]"
    lines = [
        json.dumps({c: _plain(v) for c, v in zip(frame.columns, row)}, ensure_ascii=False, separators=(",", ":"))
        for row in frame.rows
    ]
    return "[" + ",\n".join(lines) + "]"


def render_markdown(data: Any, *, null: str = "NULL") -> str:
    """A GitHub-flavoured Markdown table; numeric columns are right-aligned."""
    frame = _full(data)

    def esc(text: str) -> str:
        return _escape_text(text).replace("|", "\\|")

    names = [esc(c) for c in frame.columns]
    cells = [[esc(null if v is None else format_value(v)) for v in row] for row in frame.rows]
    widths = [max([display_width(names[j]), 3] + [display_width(r[j]) for r in cells]) for j in range(len(names))]
    aligns = ["right" if num else "left" for num in frame.numeric]

    def row_text(values: Sequence[str], align: Sequence[str]) -> str:
        return "| " + " | ".join(_pad(v, w, a) for v, w, a in zip(values, widths, align)) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if a == "right" else "-" * (w + 2) for w, a in zip(widths, aligns)) + "|"
    out = [row_text(names, ["left"] * len(names)), rule]
    out.extend(row_text(r, aligns) for r in cells)
    return "\n".join(out)


def _html_text(value: Any, null: str) -> str:
    if value is None:
        return html.escape(null)
    return html.escape(value if isinstance(value, str) else format_value(value))


def render_html(frame: Frame, *, header: bool = True, null: str = "NULL") -> str:
    """An HTML ``<table>`` of every row of ``frame``, cells escaped (the shell's html mode).

    >>> import pyarrow as pa
    >>> print(render_html(frame_from_arrow(pa.table({"movie": ["Up", "<b>"], "p": [0.5, None]}))))
    <table>
    <tr><th>movie</th><th>p</th></tr>
    <tr><td>Up</td><td>0.5</td></tr>
    <tr><td>&lt;b&gt;</td><td>NULL</td></tr>
    </table>
    """
    lines = ["<table>"]
    if header:
        lines.append("<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in frame.columns) + "</tr>")
    for row in frame.rows:
        lines.append("<tr>" + "".join(f"<td>{_html_text(v, null)}</td>" for v in row) + "</tr>")
    lines.append("</table>")
    return "\n".join(lines)


def render(data: Any, mode: str = "table", *, width: int | None = None, max_rows: int | None = 40,
           header: bool = True, null: str | None = None, separator: str | None = None) -> str:
    """Render a result (pdbq ``Result``, Arrow table, DuckDB relation or `Frame`) in ``mode``.

    ``width`` and ``max_rows`` apply to ``table`` mode only; the other modes print every row.
    ``header`` applies to ``table``, ``csv``, ``list``, ``tabs`` and ``html``; ``null`` is the text
    of a NULL (default: ``NULL``, an empty field in csv, list and tabs, ``null`` in json).
    ``separator`` is the field separator of ``csv`` (default ``,``) and ``list`` (default ``|``).
    """
    if mode == "table":
        return render_table(data, width=width, max_rows=max_rows, header=header, null="NULL" if null is None else null)
    if mode == "line":
        return render_line(data, null="NULL" if null is None else null)
    if mode == "csv":
        return render_csv(data, header=header, null="" if null is None else null, separator=separator or ",")
    if mode in ("list", "tabs"):
        sep = "\t" if mode == "tabs" else (separator if separator is not None else "|")
        return render_list(data, header=header, null="" if null is None else null, separator=sep)
    if mode == "html":
        return render_html(_full(data), header=header, null="NULL" if null is None else null)
    if mode == "json":
        return render_json(data)
    if mode == "markdown":
        return render_markdown(data, null="NULL" if null is None else null)
    raise ValueError(f"unknown output mode {mode!r}; modes: {', '.join(MODES)}")


def render_result(result: Any, mode: str = "table", *, width: int | None = None, max_rows: int | None = 40,
                  header: bool = True, null: str | None = None, separator: str | None = None) -> str:
    """Like `render`, fetching only the rows ``table`` mode shows."""
    frame = frame_from_result(result, max_rows if mode == "table" else None)
    return render(frame, mode, width=width, max_rows=max_rows, header=header, null=null, separator=separator)
