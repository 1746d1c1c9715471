"""Cluster moves against single-site Gibbs on the critical Ising grid (issue 18), same process.

    python examples/bench/ising_critical.py [--n 300] [--seconds 45] [--seeds 0 1 2]

Model: an n×n grid of booleans, one EQUAL factor per grid edge with weight J = ln(1 + √2)/2. EQUAL
is ±1-valued (+1 when the two agree), so its log-potential J·φ is exactly J·s_i·s_j for ±1 spins:
the critical coupling of the square-lattice Ising model (a bond carries 2J·1[x_i = x_j], bond
probability 1 − e^(−2J) = 2 − √2). No field, so every marginal is exactly 1/2.

Methods, 4 chains on 2 threads, dispersed starts (all 0, all 1, two random), no burn-in (the
error is read along the run), `time_limit` seconds each:
- GIBBS: `run_gibbs` (systematic sweeps, the engine's GIBBS);
- CLUSTERS: `run_mixing` with `MixingConfig(clusters=True)`: per cycle one sweep plus one
  Swendsen–Wang pass. The estimator is the same as GIBBS's (the sweeps' Rao-Blackwellised
  conditionals); the cluster pass adds nothing to the sums, it only moves the chains.

Error = max |p̂ − 1/2| over 100 target spins (fixed random choice), read from the running
estimate after every round and placed in time by the rounds' wall clock (`on_round`). "Time to
e" = the time from which the error stays ≤ e until the end of the run. Reported per seed and as
medians; e* is the largest final GIBBS error over the seeds (an error GIBBS does reach in every
run), so the ratio of the times to e* is measured, not a bound.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from pdbq.inference.mcmc.config import GibbsConfig, MixingConfig
from pdbq.inference.mcmc.gibbs import run_gibbs
from pdbq.inference.moves.mixing import run_mixing

from mixing import ising_graph  # examples/bench/mixing.py: the same grid

J_C = 0.5 * np.log1p(np.sqrt(2.0))


def run(method: str, g, targets, seconds: float, seed: int) -> dict:
    clock: list[tuple[int, float]] = []
    cfg = GibbsConfig(time_limit=seconds, seed=seed, burn_in=0, chains=4, threads=2)
    t0 = time.perf_counter()

    def on_round(info) -> None:
        clock.append((info.steps, time.perf_counter() - t0))

    if method == "GIBBS":
        r = run_gibbs(g, targets, cfg, on_round=on_round)
    else:
        r = run_mixing(g, targets, cfg, MixingConfig(clusters=True), on_round=on_round)
    steps = np.array([s for s, _ in clock], dtype=np.float64)
    wall = np.array([t for _, t in clock])
    t_points = np.interp(r.trace.steps.astype(np.float64), steps, wall)
    err = np.abs(r.trace.estimates[:, :, 1] - 0.5).max(axis=1)
    return {"method": method, "seed": seed, "seconds": round(time.perf_counter() - t0, 2), "updates_per_chain": r.steps,
            "final_err": float(err[-1]), "t": t_points.tolist(), "err": err.tolist(), "warnings": len(r.warnings)}


def time_to(row: dict, e: float) -> float | None:
    """The time from which the error stays ≤ e (None: not at the end of the run)."""
    err = np.asarray(row["err"])
    above = np.flatnonzero(err > e)
    if above.size == 0:
        return row["t"][0]
    if above[-1] == err.size - 1:
        return None
    return row["t"][above[-1] + 1]


def _med(xs):
    xs = [x for x in xs if x is not None]
    return float(np.median(xs)) if xs else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=45.0)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    a = ap.parse_args()
    g = ising_graph(a.n, J_C)
    targets = np.sort(np.random.default_rng(0).choice(g.n_vars, 100, replace=False))
    run_gibbs(g, targets, GibbsConfig(steps=1000, seed=0))  # compile / load the kernels outside the race
    run_mixing(g, targets, GibbsConfig(steps=1000, seed=0), MixingConfig(clusters=True))
    rows = []
    for i, seed in enumerate(a.seeds):
        for method in (("GIBBS", "CLUSTERS") if i % 2 == 0 else ("CLUSTERS", "GIBBS")):
            row = run(method, g, targets, a.seconds, seed)
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k not in ("t", "err")}), flush=True)
    gibbs = [r for r in rows if r["method"] == "GIBBS"]
    clus = [r for r in rows if r["method"] == "CLUSTERS"]
    e_star = max(r["final_err"] for r in gibbs)
    print(f"\nIsing {a.n}x{a.n}, J = {J_C:.6f}, {a.seconds:g} s per run, seeds {a.seeds}; e* = {e_star:.4f}")
    print("| method | updates/chain (median) | final error (median) | time to e* (median) | time to 0.05 (median) | per seed: time to e* / to 0.05 |")
    print("|---|---:|---:|---:|---:|---|")
    for name, rs in (("GIBBS", gibbs), ("CLUSTERS", clus)):
        te = [time_to(r, e_star) for r in rs]
        t5 = [time_to(r, 0.05) for r in rs]
        per = ", ".join(f"{x if x is None else round(x, 2)} / {y if y is None else round(y, 2)}" for x, y in zip(te, t5))
        fmt = lambda v: "not reached" if v is None else f"{v:.2f} s"  # noqa: E731
        print(f"| {name} | {_med([r['updates_per_chain'] for r in rs]):,.0f} | {_med([r['final_err'] for r in rs]):.4f} | "
              f"{fmt(_med(te))} | {fmt(_med(t5) if all(x is not None for x in t5) else None)} | {per} |")
    tg = _med([time_to(r, e_star) for r in gibbs])
    tc = _med([time_to(r, e_star) for r in clus])
    if tg is not None and tc:
        print(f"\nratio of median times to e* = {e_star:.4f}: GIBBS / CLUSTERS = {tg / tc:.1f}x")


if __name__ == "__main__":
    main()
