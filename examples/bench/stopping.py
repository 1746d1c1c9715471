"""The QAM stopping rule on the 1M-variable chain: how soon a tolerance query stops, warm.

One process: builds the chain of `qam.py` (N booleans, EQUAL links U(0.3, 1.2), field N(0, 0.5);
exact marginal by forward-backward), then

1. ``SELECT PROB(v), STDERR(v) FROM c v WHERE v.i = N/2 USING QAM WITH (tolerance = T)``: first
   run (plans the graph), then warm latency, median of 5, with updates per chain, the answer's
   error and whether it carries a warning;
2. whole-graph GIBBS (uniform scan over the N sites) on the same pruned graph for ``--gibbs-seconds``:
   its standard error for the query variable, and the time it would need for the same 95%
   half-width T (the error falls as 1/sqrt(time)); the ratio to QAM's warm latency.

Usage: ``python examples/bench/stopping.py [--n 1000000] [--tolerance 0.01] [--gibbs-seconds 20]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

import pdbq
from pdbq.inference.mcmc.config import GibbsConfig
from pdbq.inference.mcmc.gibbs import run_gibbs
from pdbq.inference.mcmc.kernels import prepare_kernel_graph
from pdbq.language.parser import parse_statement
from pdbq.planning.plan import plan_query

sys.path.insert(0, str(Path(__file__).resolve().parent))
from qam import chain_model, forward_backward  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--tolerance", type=float, default=0.01)
    ap.add_argument("--gibbs-seconds", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    def out(k: str, v: str) -> None:
        print(f"{k:<58} {v}", flush=True)

    db = pdbq.connect()
    w, h = chain_model(db, args.n, args.seed)
    q = args.n // 2
    exact = forward_backward(w, h, q)
    out("chain variables / exact P(c_q)", f"{args.n:,} / {exact:.6f}")
    sql = (f"SELECT PROB(v) AS p, STDERR(v) AS se FROM c v WHERE v.i = {q} "
           f"USING QAM WITH (tolerance = {args.tolerance}, time_limit = 60, seed = 3)")
    t = time.perf_counter()
    r = db.execute(sql)
    out("QAM first run (plans the graph, selection, kernel arrays) (s)", f"{time.perf_counter() - t:.2f}")
    times, rows = [], []
    for i in range(5):
        t = time.perf_counter()
        r = db.execute(sql.replace("seed = 3", f"seed = {3 + i}"))
        times.append(time.perf_counter() - t)
        d = r.diagnostics
        p, se = r.fetchall()[0]
        rows.append((d["grounding_seconds"], d["inference_seconds"], d["steps"], p, se, len(d["warnings"])))
    mid = int(np.argsort(times)[2])
    g_s, i_s, steps, p, se, nw = rows[mid]
    out("QAM warm latency, median of 5 (s)", f"{times[mid]:.3f} (runs {', '.join(f'{x:.3f}' for x in times)})")
    out("... planning / inference (s)", f"{g_s:.3f} / {i_s:.3f}")
    out("... updates per chain kept / answer", f"{steps:,} / {p:.4f} ± {se:.4f} (error {abs(p - exact):.4f}, "
        f"{nw} warning(s))")
    out("... all 5 runs: largest |error| / largest half-width",
        f"{max(abs(x[3] - exact) for x in rows):.4f} / {max(1.96 * x[4] for x in rows):.4f}")

    plan = plan_query(db, parse_statement(sql))
    g = plan.graph
    local = int(plan.local[0])
    kernel = prepare_kernel_graph(g)
    run_gibbs(g, [local], GibbsConfig(steps=2000, chains=1, seed=1, scan="random"), kernel=kernel)  # warm
    cfg = GibbsConfig(time_limit=args.gibbs_seconds, tolerance=args.tolerance, chains=4, seed=4, scan="random")
    rg = run_gibbs(g, [local], cfg, kernel=kernel)
    se_g = float(rg.stderr[0, 1])
    out(f"GIBBS (uniform over {g.n_vars:,} sites), {args.gibbs_seconds:g} s",
        f"{rg.marginals[0, 1]:.4f} ± {se_g:.4f} ({rg.steps:,} updates/chain; R-hat {rg.rhat[0]:.3g})")
    if np.isfinite(se_g) and se_g > 0:
        need = rg.seconds * (1.96 * se_g / args.tolerance) ** 2
        out(f"GIBBS time to half-width {args.tolerance:g}, extrapolated (s)", f"{need:,.0f}")
        out("GIBBS / QAM warm latency", f"≈ {need / times[mid]:,.0f}×")
    else:
        out("GIBBS standard error", "not available (too few batches): GIBBS is further behind than measurable")
    out("machine", f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")
    db.close()


if __name__ == "__main__":
    main()
