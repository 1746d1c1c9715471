"""Trace plots: the running estimates of the query variables with ±2 standard-error bands.

``plot_trace`` reads what sampling recorded (`pdbq.inference.mcmc.gibbs.GibbsTrace`: ``steps[i]``
updates per chain and the estimates after them) — either the trace itself or a result's
``diagnostics`` dict holding it under ``"trace"``. matplotlib is optional (``pip install
pdbq[plot]``); it is imported only here, when a plot is asked for.

Bands: the standard error after ``s`` updates is taken as ``se_final * sqrt(s_final / s)`` (the
Monte-Carlo error shrinks as 1/sqrt(samples)); ``se_final`` is each variable's final standard error
when the diagnostics carry it (``"trace_stderr"``, rows as in the trace) and otherwise the largest
one (``"max_stderr"``), which gives bands at least as wide as the true ones.

>>> import numpy as np
>>> from pdbq.inference.mcmc.gibbs import GibbsTrace
>>> tr = GibbsTrace(np.array([100, 200, 400]), np.array([[[0.4, 0.6]], [[0.45, 0.55]], [[0.5, 0.5]]]))
>>> fig = plot_trace({"trace": tr, "max_stderr": 0.01})   # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pdbq.errors import PdbqError
from pdbq.files import atomic_path

__all__ = ["plot_trace", "trace_lines", "TraceLine"]

MAX_LINES = 12  # more lines than this are unreadable; the first ones are drawn

_MISSING = "plotting needs matplotlib, an optional dependency: pip install 'pdbq[plot]' (or pip install matplotlib)"


class TraceLine:
    """One drawn line: ``label``, ``steps``, running ``estimate`` and its ``stderr`` per point."""

    __slots__ = ("label", "steps", "estimate", "stderr")

    def __init__(self, label: str, steps: np.ndarray, estimate: np.ndarray, stderr: np.ndarray):
        self.label = label
        self.steps = steps
        self.estimate = estimate
        self.stderr = stderr


def _unpack(source: Any) -> tuple[Any, np.ndarray | None, float | None, Sequence[str] | None, str | None]:
    if isinstance(source, Mapping):
        trace = source.get("trace")
        se = source.get("trace_stderr")
        max_se = source.get("max_stderr")
        labels = source.get("trace_labels")
        method = source.get("method")
        if trace is None:
            why = f" (the query was answered by {method} inference, which does not sample)" if method else ""
            raise PdbqError(f"there are no running estimates to plot{why}; only sampled answers (QAM, GIBBS) have a trace")
        return trace, None if se is None else np.asarray(se, dtype=np.float64), max_se, labels, method
    return source, None, None, None, None


def trace_lines(source: Any, *, max_lines: int = MAX_LINES) -> list[TraceLine]:
    """The lines `plot_trace` draws (for tests and other plotting libraries): P(TRUE) for boolean
    variables (two columns), else one line per value with any probability mass."""
    trace, se_final, max_se, labels, _ = _unpack(source)
    steps = getattr(trace, "steps", None)
    est = getattr(trace, "estimates", None)
    if steps is None or est is None:
        raise PdbqError(f"plot_trace() takes a result's diagnostics or a GibbsTrace, not {type(source).__name__}")
    steps = np.asarray(steps, dtype=np.float64)
    est = np.asarray(est, dtype=np.float64)
    if est.ndim != 3 or est.shape[0] != steps.shape[0]:
        raise PdbqError(f"a trace needs estimates[points, variables, values], got shape {est.shape}")
    if steps.size == 0:
        raise PdbqError("the trace is empty: sampling stopped before its first round")
    n_points, n_vars, k = est.shape
    if se_final is None:
        se_final = np.full((n_vars, k), float(max_se) if max_se is not None else np.nan)
    elif se_final.shape != (n_vars, k):
        raise PdbqError(f"trace_stderr has shape {se_final.shape}, the trace {(n_vars, k)}")
    scale = np.sqrt(steps[-1] / np.maximum(steps, 1.0))
    lines: list[TraceLine] = []
    for v in range(n_vars):
        name = str(labels[v]) if labels is not None and v < len(labels) else f"x_q[{v}]"
        columns = [1] if k == 2 else [j for j in range(k) if np.any(est[:, v, j] > 0)]
        for j in columns:
            label = name if k == 2 else f"{name} = {j}"
            lines.append(TraceLine(label, steps, est[:, v, j], se_final[v, j] * scale))
            if len(lines) >= max_lines:
                return lines
    return lines


def plot_trace(source: Any, ax: Any = None, path: str | os.PathLike[str] | None = None, *,
               max_lines: int = MAX_LINES) -> Any:
    """Draw the running estimates with ±2 SE bands on ``ax`` (a new figure when None); save a
    PNG (or any format matplotlib knows from the suffix) to ``path`` when given.

    ``source``: a result's ``diagnostics`` dict or a `GibbsTrace`. Returns the matplotlib Figure.
    Raises `PdbqError` when there is nothing to plot (exact answers have no trace) or matplotlib
    is not installed.
    """
    lines = trace_lines(source, max_lines=max_lines)
    try:
        from matplotlib.figure import Figure  # noqa: PLC0415 - optional dependency
    except ImportError:
        raise PdbqError(_MISSING) from None
    if ax is None:
        fig = Figure(figsize=(7, 4), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    for line in lines:
        (drawn,) = ax.plot(line.steps, line.estimate, label=line.label, linewidth=1.2)
        if np.all(np.isfinite(line.stderr)):
            lo = np.clip(line.estimate - 2 * line.stderr, 0.0, 1.0)
            hi = np.clip(line.estimate + 2 * line.stderr, 0.0, 1.0)
            ax.fill_between(line.steps, lo, hi, color=drawn.get_color(), alpha=0.2, linewidth=0)
    ax.set_xlabel("updates per chain (after burn-in)")
    ax.set_ylabel("estimate (±2 SE)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("running estimates of the query variables")
    if lines:
        ax.legend(loc="best", fontsize="small")
    if path is not None:
        with atomic_path(path, "plot") as tmp:
            fig.savefig(tmp, dpi=120)
    return fig
