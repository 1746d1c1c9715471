"""The joint tolerance rule against the per-answer one, same process, same networks: how much
longer runs get, how many answers it warns, and how often an unwarned answer is off by more than
the tolerance.

``tolerance`` is met when every 95% half-width is within it *and* the expected number of answers
off by more than it is at most 0.05 (docs/inference.md, "One tolerance for many answers"). The
"per-answer" rows run the same query with the second condition switched off (the rule before it),
right after the joint run of the same seed.

Networks: the UAI 2014 instances with exact marginals (``../shared/data/uai2014`` or
``$PDBQ_TEST_DATA/uai2014``) and, with ``--unseen``, the cached pgmpy networks of
``unseen_networks.py`` (run that once first; its cache folder). Forced sampling: AUTO with
``exact_budget = 0``, ``time_limit`` ``--limit`` (default 10 s), the default tolerance 0.01, every
variable asked, kernels warmed first.

Per network and rule, over ``--seeds`` seeds: median wall time, median updates per chain kept,
runs unwarned, the largest error of an unwarned run, and the number of unwarned runs off by more
than the tolerance.

Usage: ``python examples/bench/joint_tolerance.py [--seeds 2] [--limit 10] [--unseen hepar2 alarm ...]``
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from anytime_auto import _data as uai_folder  # the same data folder rule

from pdbq.answers.engine import answer
from pdbq.answers.warmup import warm_up
from pdbq.inference.mcmc import run_book
from pdbq.io.uai import read_mar, read_uai_graph
from pdbq.language.nodes import Method
from pdbq.planning.options import QueryOptions

_NOTES = ("AUTO sampled", "compiled")  # notes, not warnings about the answer


def _networks(args) -> list[tuple[str, object, np.ndarray]]:
    out = []
    for uai in sorted(uai_folder(None).glob("*.uai")):
        mar = uai.with_suffix(".uai.MAR")
        if not mar.exists() or (args.only and uai.stem not in args.only):
            continue
        evid = uai.with_suffix(".uai.evid")
        g = read_uai_graph(uai, evid if evid.exists() else None).graph
        mar_rows = read_mar(mar)
        exact = np.zeros((g.n_vars, int(g.cardinality.max())))
        for v, row in enumerate(mar_rows):
            exact[v, :row.shape[0]] = row
        out.append((uai.stem, g, exact))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    cache = Path(args.cache or Path(base) / "pdbq-bench" / "unseen")
    for name in args.unseen or []:
        uai, evid, ref = cache / f"{name}.uai", cache / f"{name}.e0.075.s1.evid", cache / f"{name}.e0.075.s1.pdbq.npz"
        if not (uai.exists() and evid.exists() and ref.exists()):
            print(f"(skipped {name}: run unseen_networks.py --only {name} first)")
            continue
        out.append((name, read_uai_graph(uai, evid).graph, np.load(ref)["marginals"]))
    return out


def _run(g, exact, seed: int, limit: float) -> tuple[float, int, bool, float]:
    q = np.arange(g.n_vars, dtype=np.int64)
    free = np.flatnonzero(g.evidence < 0)
    t = time.perf_counter()
    a = answer(g, q, Method.AUTO, QueryOptions(exact_budget=0.0, time_limit=limit, seed=seed), started=t)
    wall = time.perf_counter() - t
    m = a.result.marginals
    err = 0.0
    for v in free:
        k = int(g.cardinality[v])
        d = np.abs(m[v, :k] - exact[v, :k])
        err = max(err, float(np.nanmax(d)) if not np.isnan(d).all() else np.inf)
    warned = any(not w.startswith(_NOTES) and "AUTO sampled" not in w for w in a.warnings)
    return wall, int(a.steps), warned, err


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--limit", type=float, default=10.0)
    ap.add_argument("--only", nargs="*", default=None, help="UAI 2014 instances (default: all with .MAR)")
    ap.add_argument("--unseen", nargs="*", default=None, help="cached pgmpy networks of unseen_networks.py")
    ap.add_argument("--cache", default=None)
    args = ap.parse_args()
    warm_up("core")
    warm_up("moves")
    joint_rule = run_book.expected_misses
    print("| network | rule | wall s (median) | kept/chain (median) | unwarned | largest unwarned error | unwarned off by > 0.01 |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, g, exact in _networks(args):
        rows = {"joint": [], "per-answer": []}
        for seed in range(1, args.seeds + 1):
            for rule in ("joint", "per-answer"):
                run_book.expected_misses = joint_rule if rule == "joint" else (lambda *a, **k: 0.0)
                try:
                    rows[rule].append(_run(g, exact, seed, args.limit))
                finally:
                    run_book.expected_misses = joint_rule
        for rule, rs in rows.items():
            un = [r for r in rs if not r[2]]
            worst = max((r[3] for r in un), default=float("nan"))
            print(f"| {name} | {rule} | {np.median([r[0] for r in rs]):.2f} | {int(np.median([r[1] for r in rs])):,} | "
                  f"{len(un)}/{len(rs)} | {worst:.4f} | {sum(r[3] > 0.01 for r in un)} |", flush=True)
    print(f"\nmachine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
