"""Reproduce the experiment of Query-Aware MCMC (Wick & McCallum; seed 003, §5, Figures 1–2).

Six model families over binary variables — independent, linear chain, hoop, 3×3 grid,
fully-connected pairwise, fully connected through one factor. Every non-unary factor copies one
template whose log-potentials are drawn from log(Beta(2,2)); every variable has its own
observation factor with log-potentials log(Beta(2,2))/2. Each model is built as a pdbq
`FactorGraph` (TABLE factors, `GraphBuilder`), so the selection distributions are pdbq's own
(`pdbq.inference.query_aware.selection`). For each model, each variable in turn is the query (the paper
measures "the single-variable marginal query π(x_q) for each variable in each of the sixty
realized models"), and for each selection distribution the exact random-scan Gibbs transition
matrix over all 2^n states is built (`pdbq.inference.mcmc.transition`; Gibbs = Metropolis–Hastings
with the full conditional as proposal) and checked (rows sum to 1, detailed balance with the
exact π). Time t counts single-variable updates: π_t = π_0 K^t from the uniform π_0 = 2^−n.
Reported: ‖π_t(x_q) − π(x_q)‖_TV averaged over the query variables and the ten models.

Selections, as in the paper: uniform, query_only (p = 1 on x_q), distance (d^−1, QAM-Poly),
mi (exact mutual information), tv (exact TV influence), trail (influence trail score, eq. 9),
all with ε = 0 like the paper, plus ``trail+eps`` = trail with pdbq's default ε = 0.05.

Usage:
    python examples/qam_paper.py            # full run (≈ 1–2 min), writes docs/img/qam_*.png
    python examples/qam_paper.py --quick    # 3 models per family, short horizon, no plots
    python examples/qam_paper.py --out DIR  # where the PNGs go

Plots need matplotlib (the optional ``plot`` extra: ``pip install 'pdbq[plot]'``); without it
the script says so and prints the tables only.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pdbq.graph.builder import GraphBuilder
from pdbq.graph.layout import FactorGraph
from pdbq.inference.query_aware.selection import SelectionConfig, selection_distribution
from pdbq.inference.mcmc.transition import check_kernel, gibbs_kernel, log_joint, marginal
from pdbq.language.nodes import FactorFunction

FAMILIES = ("independent", "chain", "hoop", "grid", "fc_pairwise", "fc_single")
METHODS = ("uniform", "query_only", "distance", "mi", "tv", "trail", "trail+eps")
HOOP_SIZES = (3, 4, 6, 8, 10, 12)
SEED = 2012


@dataclass(frozen=True)
class RunConfig:
    """One experiment: models per family, horizon (single-variable updates), variables."""

    n_vars: int = 9
    models: int = 10
    steps: int = 120
    hoop_steps: int = 120
    hoop_sizes: tuple[int, ...] = HOOP_SIZES
    families: tuple[str, ...] = FAMILIES
    methods: tuple[str, ...] = METHODS
    seed: int = SEED


def family_scopes(family: str, n: int) -> list[list[int]]:
    """The non-unary factor scopes of a family over variables 0..n-1."""
    if family == "independent":
        return []
    if family == "chain":
        return [[i, i + 1] for i in range(n - 1)]
    if family == "hoop":
        return [[i, i + 1] for i in range(n - 1)] + ([[n - 1, 0]] if n > 2 else [])
    if family == "grid":
        side = int(round(np.sqrt(n)))
        if side * side != n:
            raise ValueError(f"a grid needs a square number of variables, got {n}")
        out = []
        for r in range(side):
            for c in range(side):
                v = r * side + c
                if c + 1 < side:
                    out.append([v, v + 1])
                if r + 1 < side:
                    out.append([v, v + side])
        return out
    if family == "fc_pairwise":
        return [[i, j] for i in range(n) for j in range(i + 1, n)]
    if family == "fc_single":
        return [list(range(n))]
    raise ValueError(f"unknown family {family!r}; valid: {', '.join(FAMILIES)}")


def build_model(family: str, n: int, rng: np.random.Generator) -> FactorGraph:
    """One random model: a shared template for the non-unary factors (log Beta(2,2) entries) and
    one observation factor per variable (log Beta(2,2) / 2)."""
    scopes = family_scopes(family, n)
    b = GraphBuilder()
    b.add_variables(n)
    templates: dict[int, np.ndarray] = {}
    for scope in scopes:
        k = len(scope)
        if k not in templates:
            templates[k] = np.log(rng.beta(2.0, 2.0, size=2**k))
        b.add_factor(FactorFunction.TABLE, scope, table=templates[k])
    for v in range(n):
        b.add_factor(FactorFunction.TABLE, [v], table=np.log(rng.beta(2.0, 2.0, size=2)) / 2.0)
    return b.build()


def selection_p(graph: FactorGraph, query: int, method: str) -> np.ndarray:
    """The selection distribution over all variables for one query variable."""
    if method == "trail+eps":
        cfg = SelectionConfig(selection="trail", epsilon=0.05)
    else:
        cfg = SelectionConfig(selection=method, epsilon=0.0, power=1.0, max_exact_vars=16)
    sites = np.arange(graph.n_vars)
    return selection_distribution(graph, [query], sites, cfg).p


def model_curves(graph: FactorGraph, steps: int, methods) -> dict[str, np.ndarray]:
    """TV of the query marginal over time, per method: float64[n_vars (query), steps + 1]."""
    logp = log_joint(graph)
    pi = np.exp(logp)
    cards = graph.cardinality
    start = np.full(pi.shape[0], 1.0 / pi.shape[0])
    out = {m: np.empty((graph.n_vars, steps + 1)) for m in methods}
    for q in range(graph.n_vars):
        pi_q = marginal(pi, cards, q)
        for m in methods:
            kernel = gibbs_kernel(graph, logp, selection_p(graph, q, m))
            check_kernel(kernel, pi, atol=1e-9)
            dists = kernel.run(start, steps)
            out[m][q] = 0.5 * np.abs(marginal(dists, cards, q) - pi_q).sum(axis=-1)
    return out


def family_curves(family: str, n: int, models: int, steps: int, methods, seed: int) -> dict[str, np.ndarray]:
    """Mean TV curve per method over `models` random models and every query variable."""
    fam_id = FAMILIES.index(family)
    acc = {m: np.zeros(steps + 1) for m in methods}
    for k in range(models):
        # common random numbers: model k of a family draws the same template at every size
        rng = np.random.default_rng([seed, fam_id, k])
        curves = model_curves(build_model(family, n, rng), steps, methods)
        for m in methods:
            acc[m] += curves[m].mean(axis=0)
    return {m: acc[m] / models for m in methods}


def run_figure1(cfg: RunConfig) -> dict[str, dict[str, np.ndarray]]:
    return {f: family_curves(f, cfg.n_vars, cfg.models, cfg.steps, cfg.methods, cfg.seed) for f in cfg.families}


def run_figure2(cfg: RunConfig) -> dict[int, dict[str, np.ndarray]]:
    """Advantage over uniform, ‖π − π_0 K_unif^t‖ − ‖π − π_0 K_QAM^t‖, on hoops of several sizes."""
    out = {}
    for n in cfg.hoop_sizes:
        curves = family_curves("hoop", n, cfg.models, cfg.hoop_steps, cfg.methods, cfg.seed)
        out[n] = {m: curves["uniform"] - curves[m] for m in cfg.methods if m != "uniform"}
    return out


# ---------------------------------------------------------------- reporting

CHECKPOINTS = (1, 5, 10, 20, 40, 80)


def first_below(curve: np.ndarray, level: float) -> int | None:
    hit = np.flatnonzero(curve <= level)
    return int(hit[0]) if hit.shape[0] else None


def figure1_table(res: dict[str, dict[str, np.ndarray]], checkpoints=CHECKPOINTS) -> str:
    cps = [t for t in checkpoints if t < next(iter(next(iter(res.values())).values())).shape[0]]
    lines = ["| family | selection | " + " | ".join(f"t={t}" for t in cps) + " | t(TV≤0.01) |",
             "|---|---|" + "---:|" * (len(cps) + 1)]
    for fam, curves in res.items():
        for m, c in curves.items():
            hit = first_below(c, 0.01)
            lines.append(f"| {fam} | {m} | " + " | ".join(f"{c[t]:.4f}" for t in cps)
                         + f" | {hit if hit is not None else '>' + str(c.shape[0] - 1)} |")
    return "\n".join(lines)


def figure2_table(res: dict[int, dict[str, np.ndarray]]) -> str:
    """Per hoop size and method: the advantage at t = n (one sweep), its maximum over time, and
    how long the method stays ahead of uniform (first t ≥ 1 where the advantage is ≤ 0)."""
    methods = list(next(iter(res.values())))
    lines = ["| hoop size | " + " | ".join(f"{m}: t=n / max / ahead until" for m in methods) + " |",
             "|---:|" + "---:|" * len(methods)]
    for n, adv in res.items():
        cells = []
        for m in methods:
            a = adv[m]
            behind = np.flatnonzero(a[1:] <= 0.0)
            until = str(int(behind[0]) + 1) if behind.shape[0] else f">{a.shape[0] - 1}"
            cells.append(f"{a[min(n, a.shape[0] - 1)]:+.4f} / {a.max():+.4f} / {until}")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(fig1, fig2, out_dir: Path) -> list[Path]:
    """Write qam_fig1.png and qam_fig2.png; raise ImportError when matplotlib is missing."""
    import matplotlib  # noqa: PLC0415 - optional 'plot' extra

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    if fig1:
        fams = list(fig1)
        fig, axes = plt.subplots(2, 3, figsize=(13, 7.5), squeeze=False)
        for ax, fam in zip(axes.ravel(), fams):
            for m, c in fig1[fam].items():
                ax.plot(np.arange(c.shape[0]), c, label=m, lw=1.4, ls="--" if m in ("uniform", "query_only") else "-")
            ax.set_yscale("log")
            ax.set_ylim(bottom=1e-5)  # exact chains reach 1e-16 on independent models
            ax.set_title(fam)
            ax.set_xlabel("t (single-variable updates)")
            ax.set_ylabel("TV of query marginal")
        for ax in axes.ravel()[len(fams):]:
            ax.axis("off")
        axes.ravel()[0].legend(fontsize=8)
        fig.suptitle("Convergence to the query marginal from a uniform start (mean over 10 models × all queries)")
        fig.tight_layout()
        p = out_dir / "qam_fig1.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    if fig2:
        sizes = list(fig2)
        fig, axes = plt.subplots(2, 3, figsize=(13, 7.5), squeeze=False)
        for ax, n in zip(axes.ravel(), sizes):
            for m, c in fig2[n].items():
                ax.plot(np.arange(c.shape[0]), c, label=m, lw=1.4)
            ax.axhline(0.0, color="k", lw=0.8)
            ax.set_title(f"hoop, {n} variables")
            ax.set_xlabel("t (single-variable updates)")
            ax.set_ylabel("TV(uniform) − TV(QAM)")
        axes.ravel()[0].legend(fontsize=8)
        fig.suptitle("Advantage over uniform selection as the hoop grows")
        fig.tight_layout()
        p = out_dir / "qam_fig2.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 models per family, 40 steps, no plots")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "img")
    ap.add_argument("--no-plots", action="store_true")
    args = ap.parse_args(argv)
    cfg = RunConfig(models=3, steps=40, hoop_steps=40, hoop_sizes=(3, 6, 9)) if args.quick else RunConfig()
    fig1 = run_figure1(cfg)
    print("## Figure 1: mean TV of the query marginal\n")
    print(figure1_table(fig1))
    fig2 = run_figure2(cfg)
    print("\n## Figure 2: advantage over uniform on hoops (TV(uniform) − TV(method))\n")
    print(figure2_table(fig2))
    if args.quick or args.no_plots:
        return 0
    try:
        paths = plot(fig1, fig2, args.out)
    except ImportError:
        print("\nmatplotlib is not installed: no PNGs written. Install the optional 'plot' extra "
              "(pip install 'pdbq[plot]' or pip install matplotlib) to draw the figures.", file=sys.stderr)
        return 0
    print("\nwrote " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
