"""Explanations of pair scores for the front door: `explain_pairs` (each field's comparison level
and its contribution to the match weight, one row per pair and term; the rows, their columns and
units are described in `pdbq.coref.explain`, which builds them and which SQL's EXPLAIN MATCH also
uses; re-exported here) and `waterfall`, which draws one pair's terms as a waterfall chart (PNG;
matplotlib, the optional extra `pdbq[plot]`). The rows are an Arrow table, so DuckDB queries them as
they are (``con.sql("SELECT ... FROM expl")``).
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from pdbq.coref.explain import CONSTANT, Terms, explain_pairs, terms_estimated, terms_linear
from pdbq.coref.layout import CorefInputError
from pdbq.errors import PdbqError
from pdbq.files import atomic_path

__all__ = ["CONSTANT", "Terms", "terms_linear", "terms_estimated", "explain_pairs", "waterfall"]

_MISSING = "the waterfall chart needs matplotlib, an optional dependency: pip install 'pdbq[plot]' (or pip install matplotlib)"


def waterfall(explanation: pa.Table, path: str | os.PathLike[str] | None = None, *, probability: float | None = None,
              title: str | None = None):
    """Waterfall chart of one pair's terms (rows of `explain_pairs` for one pair): each bar
    starts where the previous ended, the last bar is the match weight. Saved as a PNG at `path`
    when given; returns the matplotlib Figure. `PdbqError` when matplotlib is missing or the
    rows are not one pair's."""
    pairs = {(a, b) for a, b in zip(explanation.column("id_l").to_pylist(), explanation.column("id_r").to_pylist())}
    if len(pairs) != 1:
        raise CorefInputError(f"a waterfall chart shows one pair; the rows hold {len(pairs)} (filter them first)")
    try:
        import matplotlib

        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError:
        raise PdbqError(_MISSING) from None
    terms = explanation.column("term").to_pylist()
    contrib = np.asarray(explanation.column("contribution").to_numpy(zero_copy_only=False), dtype=np.float64)
    levels = explanation.column("level").to_pylist()
    # the constant first: it is where every pair starts
    order = [terms.index(CONSTANT)] + [i for i, t in enumerate(terms) if t != CONSTANT] if CONSTANT in terms else list(range(len(terms)))
    labels = [terms[i] if levels[i] is None else f"{terms[i]}\n{levels[i]}" for i in order]
    steps = contrib[order]
    ends = np.cumsum(steps)
    starts = ends - steps
    fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * (len(order) + 1)), 4))
    colors = ["tab:green" if s >= 0 else "tab:red" for s in steps]
    x = np.arange(len(order))
    ax.bar(x, steps, bottom=starts, color=colors)
    ax.bar(len(order), ends[-1], color="tab:blue")
    ax.axhline(0.0, color="0.5", linewidth=0.8)
    ax.set_xticks(list(x) + [len(order)], labels + ["match weight"], fontsize=7, rotation=30, ha="right")
    unit = (explanation.schema.metadata or {}).get(b"unit", b"score").decode()
    ax.set_ylabel(f"contribution to the match weight ({unit})")
    (a, b), = pairs
    head = title or f"pair ({a}, {b}): weight {ends[-1]:.2f}"
    if probability is not None:
        head += f", P(match) {probability:.3f}"
    ax.set_title(head, fontsize=9)
    fig.tight_layout()
    if path is not None:
        with atomic_path(path, "waterfall plot") as tmp:
            fig.savefig(tmp, format="png", dpi=100)
        plt.close(fig)
    return fig
