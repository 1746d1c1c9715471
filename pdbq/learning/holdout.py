"""Holdout evaluation and calibration, as DeepDive reports them.

A held-out fraction of the evidence is hidden while learning (its variables are neither clamped
nor counted as labels). After learning, their marginals are estimated by Gibbs sampling with the
learned weights and the remaining evidence clamped, and compared with the hidden values:

- calibration table: 10 buckets of predicted probability [b/10, (b+1)/10); per bucket the number
  of predictions, how many were true / false, the mean predicted probability and the observed
  fraction. A boolean variable contributes one prediction (P(x = true)); a categorical one, one
  per value (P(x = k) against [x = k]).
- accuracy: the most probable value equals the hidden one; log-loss: −mean log P(hidden value);
- expected calibration error: Σ_b (n_b / N) · |mean predicted_b − observed fraction_b|.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from pdbq.errors import PdbqError
from pdbq.files import atomic_path
from pdbq.graph.from_store import reachable
from pdbq.graph.layout import FactorGraph
from pdbq.inference.mcmc.config import MAX_COUNT, GibbsConfig
from pdbq.inference.mcmc.gibbs import run_gibbs

__all__ = ["BUCKETS", "HoldoutReport", "choose_holdout", "evaluate_holdout", "calibration_report", "plot_calibration"]

BUCKETS = 10
_EPS = 1.0e-15
_MISSING = "the calibration plot needs matplotlib, an optional dependency: pip install 'pdbq[plot]' (or pip install matplotlib)"


@dataclass(frozen=True, eq=False)
class HoldoutReport:
    """Calibration buckets (arrays of length `BUCKETS`) and holdout metrics."""

    n: int  # held-out variables
    accuracy: float
    log_loss: float
    ece: float
    predicted: np.ndarray  # int64: predictions per bucket
    true_count: np.ndarray  # int64
    mean_probability: np.ndarray  # float64 (NaN where empty)
    max_stderr: float  # largest Monte-Carlo standard error of the predicted marginals
    warnings: tuple[str, ...] = ()

    @property
    def false_count(self) -> np.ndarray:
        return self.predicted - self.true_count

    @property
    def observed_fraction(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.predicted > 0, self.true_count / np.maximum(self.predicted, 1), np.nan)

    def rows(self) -> list[tuple]:
        """(bucket, lower, upper, predicted, true, false, mean probability, observed fraction)."""
        obs = self.observed_fraction
        out = []
        for b in range(BUCKETS):
            mp = None if self.predicted[b] == 0 else float(self.mean_probability[b])
            of = None if self.predicted[b] == 0 else float(obs[b])
            out.append((b, b / BUCKETS, (b + 1) / BUCKETS, int(self.predicted[b]), int(self.true_count[b]),
                        int(self.predicted[b] - self.true_count[b]), mp, of))
        return out


def choose_holdout(evidence: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """bool[n_vars]: a random ``fraction`` (rounded, at least one when fraction > 0) of the
    evidence variables, drawn from its own stream of ``seed``."""
    ev = np.flatnonzero(evidence >= 0)
    mask = np.zeros(evidence.shape[0], dtype=bool)
    if fraction <= 0 or ev.size == 0:
        return mask
    k = max(1, int(round(fraction * ev.size)))
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[1])
    mask[rng.choice(ev, size=k, replace=False)] = True
    return mask


def calibration_report(probs: np.ndarray, truth: np.ndarray, card: np.ndarray, max_stderr: float = 0.0,
                       warnings: tuple[str, ...] = ()) -> HoldoutReport:
    """Report from predicted marginals (float64[n, kmax]), hidden values and cardinalities."""
    n = truth.shape[0]
    rows = np.arange(n)
    p_truth = probs[rows, truth]
    accuracy = float(np.mean(np.argmax(probs, axis=1) == truth)) if n else float("nan")
    log_loss = float(-np.mean(np.log(np.clip(p_truth, _EPS, 1.0)))) if n else float("nan")
    boolean = card == 2
    # predictions: P(x = 1) for booleans, every value for categoricals
    p_list = [probs[boolean, 1]]
    y_list = [(truth[boolean] == 1).astype(np.int64)]
    for i in np.flatnonzero(~boolean):
        k = int(card[i])
        p_list.append(probs[i, :k])
        y_list.append((np.arange(k) == truth[i]).astype(np.int64))
    p = np.concatenate(p_list) if p_list else np.zeros(0)
    y = np.concatenate(y_list) if y_list else np.zeros(0, np.int64)
    b = np.minimum((p * BUCKETS).astype(np.int64), BUCKETS - 1)
    predicted = np.bincount(b, minlength=BUCKETS).astype(np.int64)
    true_count = np.bincount(b, weights=y, minlength=BUCKETS).astype(np.int64)
    psum = np.bincount(b, weights=p, minlength=BUCKETS)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_p = np.where(predicted > 0, psum / np.maximum(predicted, 1), np.nan)
        obs = np.where(predicted > 0, true_count / np.maximum(predicted, 1), 0.0)
    total = predicted.sum()
    ece = float(np.sum(predicted * np.abs(np.nan_to_num(mean_p) - obs)) / total) if total else float("nan")
    return HoldoutReport(n, accuracy, log_loss, ece, predicted, true_count, mean_p, max_stderr, warnings)


def evaluate_holdout(graph: FactorGraph, holdout: np.ndarray, truth: np.ndarray, *, sweeps: int, seed: int,
                     threads: int | None = None, time_limit: float | None = None) -> HoldoutReport:
    """Predict the held-out variables (``holdout``: their ids, unclamped in ``graph``, which
    carries the learned weights and the training evidence) and compare with ``truth``.
    Only the region the held-out variables reach is sampled, for at most ``time_limit`` seconds
    (the report then carries the sampler's warning)."""
    vmask, _ = reachable(graph, holdout)
    sites = np.flatnonzero(vmask & (graph.evidence < 0))
    steps = min(max(int(sweeps) * int(sites.shape[0]), 1000), MAX_COUNT)
    res = run_gibbs(graph, holdout, GibbsConfig(steps=steps, chains=2, seed=seed, threads=threads, time_limit=time_limit),
                    sites=sites)
    card = graph.cardinality[holdout].astype(np.int64)
    se = float(np.nanmax(res.stderr)) if res.stderr.size else 0.0
    warnings = tuple(res.warnings)
    if res.batches is not None and res.batches.stopped_by == "time":
        warnings = (f"the holdout evaluation was cut short by time_limit: it kept {res.steps:,} of the {steps:,} updates per "
                    "chain eval_steps asks for, so its accuracy, log loss and calibration rest on fewer samples "
                    "(largest standard error of a prediction "
                    f"{se:.3g}); raise time_limit or lower eval_steps",) + warnings
    return calibration_report(res.marginals, truth.astype(np.int64), card, se, warnings)


def plot_calibration(report: HoldoutReport, path: str | os.PathLike[str] | None = None, *, title: str | None = None):
    """The calibration plot (observed fraction against mean predicted probability per bucket,
    with the diagonal and the number of predictions per bucket); saved as a PNG at ``path`` when
    given. Returns the matplotlib Figure. PdbqError when matplotlib is not installed."""
    try:
        # A bare Figure, not pyplot: no global figure state and no backend switch, so a notebook
        # shows the returned figure inline exactly once and a script needs no display.
        from matplotlib.figure import Figure
    except ImportError:
        raise PdbqError(_MISSING) from None
    fig = Figure(figsize=(5, 6), layout="tight")
    ax, axn = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    ok = report.predicted > 0
    centers = (np.arange(BUCKETS) + 0.5) / BUCKETS
    ax.plot([0, 1], [0, 1], color="0.6", linestyle="--", linewidth=1, label="perfect calibration")
    ax.plot(report.mean_probability[ok], report.observed_fraction[ok], marker="o", label="holdout")
    ax.set_ylabel("observed fraction true")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left")
    ax.set_title(title or f"calibration: accuracy {report.accuracy:.3f}, log-loss {report.log_loss:.3f}, ECE {report.ece:.3f}",
                 fontsize=9)
    axn.bar(centers, report.predicted, width=1.0 / BUCKETS * 0.9, color="0.5")
    axn.set_xlabel("predicted probability")
    axn.set_ylabel("predictions")
    if path is not None:
        with atomic_path(path, "calibration plot") as tmp:
            fig.savefig(tmp, format="png", dpi=100)
    return fig
