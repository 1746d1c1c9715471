"""Forced sampling under a time limit on the UAI 2014 instances: is the limit held, is every answer
within 0.01 of the exact marginals or warned?

For each instance with a ``.MAR`` file: ``answer(graph, every variable, AUTO, exact_budget = 0,
time_limit = T, seed = 1)`` (the engine a SQL query reaches, without the SQL), after the kernels
are warmed (their one-time cost is not the query's). Reported per instance: wall time against
the limit (held within 10% + 1 s?), updates per chain kept, NULL answers, the largest |error|
against the exact marginals, whether the answer carries a warning, and what AUTO did (the first
seed); with ``--seeds N``, also the coverage of the unwarned answers' 95% intervals over every
(variable, value): |estimate − exact| ≤ 1.96·stderr + 5e-7 (the .MAR files' precision); which
checks warned the other runs (R-hat, ESS, tolerance, NULL, AUTO's exact_budget note), their
largest error, coverage and half-width, and the coverage of the runs whose only warning is the
tolerance (their intervals are claimed valid, only wider than asked).

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


# warnings that leave the interval claimed valid (it is only wider than the tolerance asked, and
# AUTO's note on how to get the exact answer)
_WIDE_ONLY = {"tolerance", "exact_budget note"}


def _check(warning: str) -> str:
    """The check a warning comes from, in a word."""
    for key, name in (("R-hat", "R-hat"), ("effective sample size", "ESS"), ("tolerance", "tolerance"),
                      ("too few updates", "NULL"), ("AUTO sampled", "exact_budget note"), ("burn-in", "burn-in"),
                      ("swaps", "swap rate"), ("accepted mode jump", "jumps")):
        if key in warning:
            return name
    return warning[:40]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=float, default=10.0)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--data", default=None)
    ap.add_argument("--seeds", type=int, default=1, help="seeds per instance (coverage of unwarned intervals)")
    args = ap.parse_args()
    folder = _data(args.data)
    warm_up("core")
    warm_up("moves")
    print("| instance | vars | wall s (limit) | held | kept/chain | NULL | max err | warned | AUTO | unwarned runs | coverage "
          "| warned by (runs) | warned runs: max err, coverage, largest half-width | runs warned only for the "
          "tolerance: coverage |")
    print("|---|---:|---:|---|---:|---:|---:|---|---|---:|---:|---|---|---|")
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
        free = g.evidence < 0
        hits = total = unwarned = 0
        why: dict[str, int] = {}
        w_hits = w_total = 0
        c_hits = c_total = claimed = 0
        w_err = w_half = 0.0
        worst_wall, first = 0.0, None
        for seed in range(1, args.seeds + 1):
            opts = QueryOptions(exact_budget=0.0, time_limit=args.limit, seed=seed)
            t = time.perf_counter()
            a = answer(g, q, Method.AUTO, opts, started=t)
            worst_wall = max(worst_wall, time.perf_counter() - t)
            m, se = a.result.marginals, a.result.stderr
            if first is None:
                err = max((float(np.max(np.abs(m[v, : len(exact[v])] - exact[v]))) for v in np.flatnonzero(free)
                           if not np.isnan(m[v]).any()), default=float("nan"))
                first = (a, err, int(np.isnan(m[free]).any(axis=1).sum()))
            checks = {_check(w) for w in a.warnings}
            claimed += bool(a.warnings) and checks <= _WIDE_ONLY
            for check in sorted(checks):
                why[check] = why.get(check, 0) + 1
            for v in np.flatnonzero(free):
                k = len(exact[v])
                if np.isnan(m[v]).any():
                    continue
                ok = np.abs(m[v, :k] - exact[v]) <= 1.96 * se[v, :k] + 5e-7
                if a.warnings and checks <= _WIDE_ONLY:  # an interval claimed valid, only wider than asked
                    c_hits += int(ok.sum())
                    c_total += k
                if a.warnings:
                    w_hits += int(ok.sum())
                    w_total += k
                    w_err = max(w_err, float(np.max(np.abs(m[v, :k] - exact[v]))))
                    w_half = max(w_half, float(1.96 * np.max(se[v, :k])))
                else:
                    hits += int(ok.sum())
                    total += k
            unwarned += not a.warnings
        a, err, nulls = first
        held = worst_wall <= 1.1 * args.limit + 1.0
        what = a.reason.split("; ")[-1][:70]
        cov = f"{hits / total:.3f}" if total else "–"
        print(f"| {name} | {g.n_vars:,} | {worst_wall:.2f} ({args.limit:g}) | {'yes' if held else 'NO'} | {a.steps:,} | "
              f"{nulls} | {err:.4f} | {'yes' if a.warnings else 'no'} | {what} | {unwarned}/{args.seeds} | {cov} | "
              f"{', '.join(f'{k} ({n})' for k, n in why.items()) or '–'} | "
              + (f"{w_err:.4f}, {w_hits / w_total:.3f}, {w_half:.4f}" if w_total else "–") + " | "
              + f"{claimed}/{args.seeds}: " + (f"{c_hits / c_total:.3f}" if c_total else "–") + " |", flush=True)
    print(f"\nmachine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
