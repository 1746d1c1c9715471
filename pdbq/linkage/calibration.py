"""Calibration of pairwise match probabilities against labelled data.

A pair's outcome is 1 when the gold table puts both records in one entity. Predictions are
bucketed into ten equal-width bins of probability [b/10, (b+1)/10); per bin the reliability
table gives the number of pairs, of true matches, the mean predicted probability and the
observed match rate, and the expected calibration error is

    ECE = Σ_b (n_b / N) · |mean predicted_b − observed rate_b|

(the same definition and bins as `LEARN WEIGHTS`'s holdout report, `pdbq.learning.holdout`).
A well-calibrated model has ECE near 0: among pairs given probability 0.8, about 80% match.

>>> import pyarrow as pa
>>> pairs = pa.table({"id_l": [1, 1, 2], "id_r": [2, 3, 3], "match_probability": [0.95, 0.05, 0.05]})
>>> cal = calibrate(pairs, gold_ids=[1, 2, 3], gold_entity=[7, 7, 8])
>>> round(cal.ece, 3), cal.table.column("pairs").to_pylist()[0]
(0.05, 2)
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pdbq.coref.layout import CorefInputError
from pdbq.files import atomic_path
from pdbq.learning.holdout import HoldoutReport, calibration_report, plot_calibration

__all__ = ["Calibration", "calibrate", "pair_outcomes"]


@dataclass(frozen=True, eq=False)
class Calibration:
    """The reliability table (Arrow: bin, lower, upper, pairs, matches, mean_probability,
    observed_rate), the ECE, and the report it came from (accuracy, log-loss)."""

    table: pa.Table
    ece: float
    report: HoldoutReport

    def plot(self, path: str | os.PathLike[str] | None = None, *, title: str | None = None):
        """The reliability diagram (PNG at `path` when given); matplotlib is the optional extra
        `pdbq[plot]` (a `PdbqError` names it when missing). Returns the Figure."""
        fig = plot_calibration(self.report, None, title=title or f"pairwise match probabilities: {self.report.n:,} "
                               f"pairs, ECE {self.ece:.4f}")
        ax = fig.axes[0]
        ax.lines[-1].set_label("pairs")
        ax.set_ylabel("observed match rate")
        ax.legend(loc="upper left")
        fig.axes[1].set_yscale("log")  # most pairs are certain: the middle bins would not show
        fig.axes[1].set_ylabel("pairs")
        if path is not None:  # a bare Figure (no pyplot): saving needs no backend switch
            with atomic_path(path, "reliability diagram") as tmp:
                fig.savefig(tmp, format="png", dpi=100)
        return fig


def pair_outcomes(id_l, id_r, gold_ids, gold_entity) -> np.ndarray:
    """bool per pair: both ids have the same gold entity. An id missing from the gold table is a
    `CorefInputError` naming it."""
    gold_ids = np.asarray(gold_ids)
    gold_entity = np.asarray(gold_entity)
    if gold_ids.shape != gold_entity.shape or gold_ids.ndim != 1:
        raise CorefInputError("gold ids and entities must be one-dimensional and of equal length")
    order = np.argsort(gold_ids, kind="stable")
    sid = gold_ids[order]
    if sid.size > 1 and np.any(sid[1:] == sid[:-1]):
        k = int(np.flatnonzero(sid[1:] == sid[:-1])[0])
        raise CorefInputError(f"gold id {sid[k]!r} is listed more than once")

    def entity(x):
        x = np.asarray(x)
        pos = np.clip(np.searchsorted(sid, x), 0, max(sid.size - 1, 0))
        bad = (sid.size == 0) | (sid[pos] != x) if sid.size else np.ones(x.shape, bool)
        if np.any(bad):
            raise CorefInputError(f"id {x[np.flatnonzero(bad)[0]]!r} of a pair has no gold entity")
        return gold_entity[order][pos]

    return entity(id_l) == entity(id_r)


def calibrate(pairs: pa.Table, gold_ids, gold_entity, *, probability: str = "match_probability") -> Calibration:
    """Reliability table and ECE of the `probability` column of `pairs` (columns id_l, id_r)
    against a gold clustering (aligned arrays of ids and entity labels). Module docstring."""
    for c in ("id_l", "id_r", probability):
        if c not in pairs.column_names:
            raise CorefInputError(f"the pairs table has no column {c!r} (columns: {', '.join(pairs.column_names)})")
    p = np.asarray(pairs.column(probability).to_numpy(zero_copy_only=False), dtype=np.float64)
    if p.size and (not np.all(np.isfinite(p)) or p.min() < 0 or p.max() > 1):
        raise CorefInputError(f"column {probability!r} must hold probabilities in [0, 1]")
    y = pair_outcomes(pairs.column("id_l").to_numpy(zero_copy_only=False),
                      pairs.column("id_r").to_numpy(zero_copy_only=False), gold_ids, gold_entity)
    rep = calibration_report(np.column_stack([1.0 - p, p]), y.astype(np.int64), np.full(p.size, 2, np.int64))
    rows = rep.rows()
    table = pa.table({
        "bin": pa.array([r[0] for r in rows], pa.int64()),
        "lower": pa.array([r[1] for r in rows], pa.float64()),
        "upper": pa.array([r[2] for r in rows], pa.float64()),
        "pairs": pa.array([r[3] for r in rows], pa.int64()),
        "matches": pa.array([r[4] for r in rows], pa.int64()),
        "mean_probability": pa.array([r[6] for r in rows], pa.float64()),
        "observed_rate": pa.array([r[7] for r in rows], pa.float64()),
    })
    return Calibration(table, rep.ece, rep)
