"""The voting experiment of seed 004 (§2.1, Figure 2): how semantics decides Gibbs mixing.

The model is written in pdbq SQL: a query variable q, n true-voters t(i) and n false-voters
f(i), one vote rule per side with LINEAR, LOGICAL or RATIO semantics, and a prior per voter:

    CREATE RULE t_votes WEIGHT 0.5 SEMANTICS RATIO AS q(^k) :- q_key(k), t(i);
    CREATE RULE f_votes WEIGHT -0.5 SEMANTICS RATIO AS q(^k) :- q_key(k), f(i);
    CREATE RULE t_prior WEIGHT = w / 2 AS t(^i) :- t_prior(i, w);

pdbq's vote is (2q − 1)·t, reading q ∈ {0, 1} as Q ∈ {−1, 1}, so these weights give the paper's
energies exactly: linear w·Q·Σt − w·Q·Σf, logical w·Q·max t − w·Q·max f, ratio
w·Q·log(1 + Σt) − w·Q·log(1 + Σf); a prior vote on t alone is 2t − 1, so weight w_t/2 gives
w_t·t up to a constant. w = 0.5 and prior weights uniform in (−1, 0), as in Figure 2.

The query engine grounds the model and hands out the pruned graph of ``PROB(q)``
(`pdbq.api.query_graph`); `pdbq.analysis` reports its hierarchy width and mixing bound;
then `pdbq.inference.mcmc.gibbs.run_gibbs` runs R independent single-chain runs (random start,
no burn-in) and the variance across runs of the running estimate of P(q) is recorded against
the number of single-variable updates — the quantity Figure 2 plots. (The SQL answer does not
expose running estimates, hence the direct call on the engine's graph.)

    python examples/voting.py              # n = 50 and 500, writes docs/voting.png and a table
    python examples/voting.py --quick      # smaller, for a smoke run
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import pdbq
from pdbq.analysis import analyze_graph
from pdbq.api import query_graph
from pdbq.inference.mcmc.config import GibbsConfig
from pdbq.inference.mcmc.gibbs import run_gibbs

SEMANTICS = ("LINEAR", "RATIO", "LOGICAL")


def model_sql(semantics: str, w: float) -> str:
    return f"""
CREATE VARIABLE q(k INTEGER) DOMAIN BOOLEAN FROM (SELECT k FROM q_key);
CREATE VARIABLE t(i INTEGER) DOMAIN BOOLEAN FROM (SELECT i FROM t_prior);
CREATE VARIABLE f(i INTEGER) DOMAIN BOOLEAN FROM (SELECT i FROM f_prior);
CREATE RULE t_votes WEIGHT {w} SEMANTICS {semantics} AS q(^k) :- q_key(k), t(i);
CREATE RULE f_votes WEIGHT {-w} SEMANTICS {semantics} AS q(^k) :- q_key(k), f(i);
CREATE RULE t_priors WEIGHT = w / 2 AS t(^i) :- t_prior(i, w);
CREATE RULE f_priors WEIGHT = w / 2 AS f(^i) :- f_prior(i, w);
"""


def build(n: int, semantics: str, *, w: float = 0.5, seed: int = 0):
    """The voting model in a fresh in-memory database; returns (graph, index of q in it)."""
    rng = np.random.default_rng(seed)  # the same prior weights for every semantics
    tw, fw = rng.uniform(-1.0, 0.0, n), rng.uniform(-1.0, 0.0, n)
    db = pdbq.connect()
    con = db.duckdb
    con.execute("CREATE TABLE q_key AS SELECT 1 AS k")
    con.execute("CREATE TABLE t_prior (i INTEGER, w DOUBLE)")
    con.execute("CREATE TABLE f_prior (i INTEGER, w DOUBLE)")
    con.executemany("INSERT INTO t_prior VALUES (?, ?)", [(i, float(x)) for i, x in enumerate(tw)])
    con.executemany("INSERT INTO f_prior VALUES (?, ?)", [(i, float(x)) for i, x in enumerate(fw)])
    db.execute(model_sql(semantics, w))
    graph = query_graph(db, "SELECT PROB(x) FROM q AS x")
    db.close()
    # q is the only variable without a prior: the head of the vote factors
    q = int(np.flatnonzero(np.diff(graph.var_offsets) == np.diff(graph.var_offsets).max())[0])
    return graph, q


def variance_curve(graph, q: int, steps: int, runs: int, points: int) -> tuple[np.ndarray, np.ndarray]:
    """Variance across ``runs`` independent runs of the running estimate of P(q = 1)."""
    est = []
    for r in range(runs):
        cfg = GibbsConfig(steps=steps, burn_in=0, chains=1, threads=1, seed=r, init="random",
                          scan="random", trace_points=points)
        res = run_gibbs(graph, [q], cfg)
        est.append(res.trace.estimates[:, 0, 1])
        at = res.trace.steps
    return at, np.var(np.array(est), axis=0, ddof=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "voting.png"))
    args = ap.parse_args()
    settings = [(50, 100_000), (500, 1_000_000)] if not args.quick else [(20, 20_000)]
    results = {}
    print("| n | semantics | hierarchy width | M | log10 Theorem-2 bound | variance after 10% | after 50% | after 100% of updates | seconds |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for n, steps in settings:
        for sem in SEMANTICS:
            graph, q = build(n, sem)
            a = analyze_graph(graph)
            t0 = time.perf_counter()
            at, var = variance_curve(graph, q, steps, args.runs, points=50)
            secs = time.perf_counter() - t0
            results[(n, sem)] = (at, var)
            pick = [var[max(0, int(len(var) * f) - 1)] for f in (0.1, 0.5, 1.0)]
            hw = a.hierarchy_width if a.hierarchy_width is not None else a.hierarchy_width_bounds
            print(f"| {n} | {sem} | {hw} | {a.max_factor_weight:.3f} | {a.mixing_bound_log10:.1f} | "
                  + " | ".join(f"{v:.2e}" for v in pick) + f" | {secs:.1f} |", flush=True)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install pdbq[plot]): no plot written")
        return
    fig, axes = plt.subplots(1, len(settings), figsize=(5.5 * len(settings), 4), squeeze=False)
    for ax, (n, steps) in zip(axes[0], settings):
        scale, unit = (1e3, "thousands") if steps <= 200_000 else (1e6, "millions")
        for sem in SEMANTICS:
            at, var = results[(n, sem)]
            # exact zeros (see docs/semantics.md: a Rao-Blackwellised estimate of a conditional
            # that is exactly 1/2) are drawn at the floor of the axis
            label = sem.lower() + (" (variance 0)" if not np.any(var > 0) else "")
            ax.semilogy(at / scale, np.maximum(var, 1e-9), label=label)
        ax.set_title(f"Convergence of voting model (n = {n})")
        ax.set_xlabel(f"iterations ({unit})")
        ax.set_ylabel("variance of marginal estimate for Q")
        ax.set_ylim(5e-10, 1)
        ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
