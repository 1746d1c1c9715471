"""The notebook view of a pdbq ``Result`` (`result_html`): an HTML table with probabilities drawn as
bars, standard errors beside them and how the answer was computed underneath. The plain table of
the shell's ``.mode html`` is `pdbq.answers.render.render_html`."""

from __future__ import annotations

import html
import math
import re
from typing import Any

from pdbq.answers.render import Frame, format_value, frame_from_arrow

__all__ = ["result_html", "probability_columns", "stderr_columns"]

_STDERR_NAME = re.compile(r"^(stderr\b|se$|.*_se$|.*stderr)", re.IGNORECASE)


#: Significant digits of the numbers a notebook shows: estimates and their errors (a standard
#: error says how many digits of an estimate mean anything; four are more than any shown here),
#: and other floats (pandas' and DuckDB's displays show about six). The full values stay in
#: ``Result.arrow()`` / ``.df()``.
ESTIMATE_DIGITS = 4
FLOAT_DIGITS = 6


def short_float(x: float, digits: int = FLOAT_DIGITS) -> str:
    """``x`` with at most ``digits`` significant digits (whole numbers as DuckDB shows them: ``2.0``)."""
    # the ``.0`` counts as a digit shown: 99999.0 is six, 100000 is shown as such
    if not math.isfinite(x) or (x == int(x) and abs(x) < 10 ** (digits - 1)):
        return format_value(x)
    return f"{x:.{digits}g}"


def _cell_html(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return short_float(value)
    return html.escape(value if isinstance(value, str) else format_value(value))


def _floats(frame: Frame, i: int) -> list[float] | None:
    values = [row[i] for row in frame.rows if row[i] is not None]
    if not values or not all(isinstance(v, float) for v in values):
        return None
    return values


def stderr_columns(frame: Frame) -> list[int]:
    """Positions of float columns named as standard errors (``STDERR(v)``, ``se``, ``p_se``)."""
    return [i for i, c in enumerate(frame.columns) if _STDERR_NAME.match(c) and _floats(frame, i) is not None]


def probability_columns(frame: Frame) -> list[int]:
    """Positions of float columns, not standard errors, whose values all lie in [0, 1]."""
    se = set(stderr_columns(frame))
    found = []
    for i in range(len(frame.columns)):
        values = _floats(frame, i)
        if i not in se and values is not None and all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in values):
            found.append(i)
    return found


def _bar(p: float) -> str:
    pct = 100.0 * p
    return (
        '<div style="display:flex;align-items:center;gap:6px">'
        '<div style="width:80px;height:10px;background:#e5e7eb;border-radius:2px">'
        f'<div style="width:{pct:.1f}%;height:100%;background:#3b82f6;border-radius:2px"></div></div>'
        f"<span>{short_float(p, ESTIMATE_DIGITS)}</span></div>"
    )


def _summary(diagnostics: dict[str, Any]) -> str:
    parts = []
    if diagnostics.get("method"):
        parts.append(f"method {diagnostics['method']}")
    if diagnostics.get("steps"):
        parts.append(f"{int(diagnostics['steps']):,} steps × {diagnostics.get('chains') or 1} chains")
    if diagnostics.get("max_stderr") is not None:
        parts.append(f"largest standard error {short_float(float(diagnostics['max_stderr']), ESTIMATE_DIGITS)}")
    if diagnostics.get("rhat_max") is not None:
        parts.append(f"R-hat {short_float(float(diagnostics['rhat_max']), ESTIMATE_DIGITS)}")
    if diagnostics.get("seconds") is not None:
        parts.append(f"{float(diagnostics['seconds']):.2f} s")
    return html.escape(", ".join(parts))


def result_html(table: Any, diagnostics: dict[str, Any] | None = None, *, max_rows: int = 20) -> str:
    """The notebook view of a result: the first ``max_rows`` rows as an HTML table.

    For a probabilistic query (``diagnostics`` name a method) columns of probabilities are drawn
    as bars, each standard-error column is shown as ``± se`` beside the probability column before
    it, and a line under the table says how the answer was computed, with its warnings.
    """
    diagnostics = diagnostics or {}
    total = table.num_rows
    frame = frame_from_arrow(table.slice(0, max_rows), None)
    probabilistic = bool(diagnostics.get("method"))
    probs = set(probability_columns(frame)) if probabilistic else set()
    ses = set(stderr_columns(frame)) if probabilistic else set()
    head = "".join(f"<th>{html.escape(c)}</th>" for c in frame.columns)
    body = []
    for row in frame.rows:
        cells = []
        for i, v in enumerate(row):
            if i in probs and v is not None:
                cells.append(f"<td>{_bar(v)}</td>")
            elif i in ses and v is not None:
                cells.append(f'<td style="color:#6b7280">± {short_float(v, ESTIMATE_DIGITS)}</td>')
            else:
                cells.append(f"<td>{_cell_html(v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    rows_note = f"{total} row{'' if total == 1 else 's'}" + (f" ({max_rows} shown)" if total > max_rows else "")
    notes = [rows_note]
    if probabilistic:
        notes.append(_summary(diagnostics))
    foot = f"<p>{'; '.join(notes)}</p>"
    for w in diagnostics.get("warnings") or ():
        foot += f'<p style="color:#b45309">Warning: {html.escape(str(w))}</p>'
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{foot}"
