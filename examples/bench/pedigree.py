"""Forced sampling on generated Mendelian pedigrees: AUTO with ``exact_budget = 0`` against the
exact marginals (the pedigree generator is tests/pedigree_graphs.py).

For each pedigree and seed: ``answer(graph, every free variable, AUTO, exact_budget = 0,
time_limit = T, seed = s)`` (the engine a SQL query reaches), after the kernels are warmed.
Reported: the pedigree's size and induced width, the exact elimination's time, the wall time,
the largest |error|, the coverage of the 95% intervals over every (variable, value)
(|estimate − exact| ≤ 1.96·stderr + 1e-6), the largest |z|, whether the answer is warned and by
which checks, and what AUTO did. ``--compare``: each seed also with AUTO's static blocks ruled
out (the moves AUTO took before them), one after the other in this process.

Usage: ``python examples/bench/pedigree.py [--limit 10] [--seeds 2] [--loci 3] [--pedigrees 0 1 2] [--compare]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from pedigree_graphs import pedigree  # noqa: E402

from pdbq.answers.engine import answer  # noqa: E402
from pdbq.answers.warmup import warm_up  # noqa: E402
from pdbq.inference.moves import move_choice  # noqa: E402
from pdbq.inference.exact.elimination import exact_marginals  # noqa: E402
from pdbq.inference.exact.elimination_order import elimination_order  # noqa: E402
from pdbq.language.nodes import Method  # noqa: E402
from pdbq.planning.options import QueryOptions  # noqa: E402


def _checks(warnings: tuple[str, ...]) -> str:
    names = []
    for w in warnings:
        for key, name in (("R-hat", "R-hat"), ("effective sample size", "ESS"), ("tolerance", "tolerance"),
                          ("too few updates", "NULL"), ("AUTO sampled", None)):
            if key in w:
                if name:
                    names.append(name)
                break
        else:
            names.append(w[:30])
    return ", ".join(names) or "no"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=float, default=10.0)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--founders", type=int, default=8)
    ap.add_argument("--generations", type=int, default=3)
    ap.add_argument("--loci", type=int, default=3)
    ap.add_argument("--pedigrees", type=int, nargs="*", default=[0])
    ap.add_argument("--compare", action="store_true", help="each seed also without static blocks")
    args = ap.parse_args()
    with_static = move_choice._static_run
    warm_up("core")
    warm_up("moves")
    print("| pedigree | free vars | width | exact s | seed | static | wall s | max err | coverage | max z | warned | AUTO did |")
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---|")
    for pid in args.pedigrees:
        g = pedigree(founders=args.founders, generations=args.generations, loci=args.loci, seed=pid).graph
        width = elimination_order(g).width
        t = time.perf_counter()
        exact = exact_marginals(g, max_table=2**26).marginals
        t_exact = time.perf_counter() - t
        q = np.flatnonzero(g.evidence < 0)
        runs = [(seed, static) for seed in range(1, args.seeds + 1) for static in ((True, False) if args.compare else (True,))]
        for seed, static in runs:
            move_choice._static_run = with_static if static else (lambda *a, **k: None)
            t = time.perf_counter()
            a = answer(g, q, Method.AUTO, QueryOptions(exact_budget=0.0, time_limit=args.limit, seed=seed), started=t)
            wall = time.perf_counter() - t
            m, se = a.result.marginals, a.result.stderr
            k = m.shape[1]
            err = np.abs(m - exact[q][:, :k])
            pad = np.arange(k)[None, :] >= g.cardinality[q][:, None]
            err[pad] = 0.0
            z = np.where(err > 1e-6, err / np.maximum(se, 1e-300), 0.0)
            cover = float(np.mean((err <= 1.96 * se + 1e-6)[~pad]))
            did = a.reason.split("; ")[-1].split(": ")[-1][:60]
            print(f"| {pid} | {q.size} | {width} | {t_exact:.2f} | {seed} | {'on' if static else 'off'} | {wall:.2f} | {np.nanmax(err):.4f} | "
                  f"{cover:.3f} | {np.nanmax(z):.1f} | {_checks(a.warnings)} | {did} |", flush=True)
    print(f"\nmachine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
