"""Forced sampling under a time limit on the UAI 2014 instances: is the limit held, is every answer
within 0.01 of the exact marginals or warned?

For each instance with a ``.MAR`` file: ``answer(graph, every variable, AUTO, exact_budget = 0,
time_limit = T, seed = 1)`` (the engine a SQL query reaches, without the SQL), after the kernels
are warmed (their one-time cost is not the query's). Reported per instance: wall time against
the limit (held within 10% + 1 s?), updates per chain kept, NULL answers, the largest |error|
against the exact marginals, whether the answer carries a warning, and what AUTO did.

Usage: ``python examples/bench/anytime_auto.py [--limit 10] [--only DBN_11 ...] [--data DIR]``
(data: ``$PDBQ_TEST_DATA/uai2014`` or the checkout's ``../shared/data/uai2014``).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from pdbq.answers.engine import answer
from pdbq.answers.warmup import warm_up
from pdbq.io.uai import read_mar, read_uai_graph
from pdbq.language.nodes import Method
from pdbq.planning.options import QueryOptions


def _data(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    env = os.environ.get("PDBQ_TEST_DATA")
    if env:
        return Path(env) / "uai2014"
    root = Path(__file__).resolve().parents[2]
    for c in (root.parent / "shared" / "data", root.parent.parent / "shared" / "data"):
        if c.is_dir():
            return c / "uai2014"
    return root.parent / "shared" / "data" / "uai2014"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=float, default=10.0)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--data", default=None)
    args = ap.parse_args()
    folder = _data(args.data)
    warm_up("core")
    warm_up("moves")
    print("| instance | vars | wall s (limit) | held | kept/chain | NULL | max err | warned | AUTO |")
    print("|---|---:|---:|---|---:|---:|---:|---|---|")
    for uai in sorted(folder.glob("*.uai")):
        name = uai.stem
        mar = uai.with_suffix(".uai.MAR")
        if not mar.exists() or (args.only and name not in args.only):
            continue
        evid = uai.with_suffix(".uai.evid")
        model = read_uai_graph(uai, evid if evid.exists() else None)
        g = model.graph
        exact = read_mar(mar)
        q = np.arange(g.n_vars, dtype=np.int64)
        opts = QueryOptions(exact_budget=0.0, time_limit=args.limit, seed=1)
        t = time.perf_counter()
        a = answer(g, q, Method.AUTO, opts, started=t)
        wall = time.perf_counter() - t
        m = a.result.marginals
        free = g.evidence < 0
        err = max((float(np.max(np.abs(m[v, : len(exact[v])] - exact[v]))) for v in np.flatnonzero(free)
                   if not np.isnan(m[v]).any()), default=float("nan"))
        nulls = int(np.isnan(m[free]).any(axis=1).sum())
        held = wall <= 1.1 * args.limit + 1.0
        what = a.reason.split("; ")[-1][:70]
        print(f"| {name} | {g.n_vars:,} | {wall:.2f} ({args.limit:g}) | {'yes' if held else 'NO'} | {a.steps:,} | "
              f"{nulls} | {err:.4f} | {'yes' if a.warnings else 'no'} | {what} |", flush=True)
    print(f"\nmachine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
