"""The default query (no USING clause) on the UAI 2014 instances with busy processes beside it:
does it always answer, within its time limit, right or warned?

Starts ``--busy`` CPU-bound processes (default 2; each ``while 1: pass``), runs
``SELECT v.id, DIST(v) FROM net v`` on each instance imported with its evidence (a fresh database
each, after one warm-up query so the kernels' one-time load is not a query's time), and stops
the busy processes (by their ids) at the end. Per instance: wall time (limit: the default 5 s),
the method, the largest |error| against the ``.MAR`` file, which checks warned, the CPU share the
query got (``diagnostics["cpu_share"]``) and what AUTO's hedge did (its prediction, the CPU share
its probe measured, whether exact ran, was stopped, or was skipped).

Usage: ``python examples/bench/busy_default.py [--busy 2] [--only ObjectDetection_11 ...] [--data DIR]``
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import pdbq
from pdbq.io.uai import read_mar

_CHECKS = (("error bars unreliable", "unreliable"), ("not converged", "R-hat"), ("tolerance", "tolerance"),
           ("machine was busy", "busy"), ("cross-check", "cross-check"), ("AUTO sampled", "exact note"),
           ("effective sample", "ESS"), ("jump", "jumps"))


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


def run(folder: Path, names: list[str]) -> None:
    print("| instance | wall s (limit 5) | method | max err | warned by | CPU share | AUTO's hedge |")
    print("|---|---:|---|---:|---|---:|---|")
    warm = True
    for name in names:
        uai = folder / f"{name}.uai"
        db = pdbq.connect()
        db.execute(f"IMPORT UAI '{uai}' AS net EVIDENCE '{uai}.evid'")
        if warm:
            db.execute("SELECT v.id, DIST(v) FROM net v WHERE v.id < 3 USING AUTO WITH (time_limit = 0.5, exact_budget = 0)")
            warm = False
        t = time.perf_counter()
        try:
            r = db.execute("SELECT v.id, DIST(v) FROM net v")
        except pdbq.PdbqError as e:
            print(f"| {name} | {time.perf_counter() - t:.2f} | error: {type(e).__name__} | – | – | – | – |", flush=True)
            db.close()
            continue
        wall = time.perf_counter() - t
        d = r.diagnostics
        exact = read_mar(f"{uai}.MAR")
        err = 0.0
        for row in r.arrow().to_pylist():
            vals = [x[1] for x in row["DIST(v)"]]
            if any(v is None for v in vals):
                continue
            x = exact[row["id"]]
            err = max(err, float(np.max(np.abs(np.asarray(vals, float)[: len(x)] - x))))
        keys: list[str] = []
        for w in d["warnings"]:
            for k, label in _CHECKS:
                if k in w and label not in keys:
                    keys.append(label)
                    break
        h = d.get("hedge")
        if h:
            did = "stopped" if h["exact_stopped"] else ("ran" if d["method"] == "EXACT" else "skipped")
            probe = f", probe {h['cpu_share_probe']:.2f}" if h["cpu_share_probe"] is not None else ""
            hedge = f"exact {did}: predicted {h['predicted_seconds'] or 0:.2g} s{probe}"
        else:
            hedge = "–"
        print(f"| {name} | {wall:.2f} | {d['method']} | {err:.4f} | {', '.join(keys) or '–'} | "
              f"{d['cpu_share'] or 0:.2f} | {hedge} |", flush=True)
        db.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--busy", type=int, default=2, help="CPU-bound processes beside the queries")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--data", default=None)
    args = ap.parse_args()
    folder = _data(args.data)
    names = sorted(p.stem for p in folder.glob("*.uai") if Path(f"{p}.MAR").exists())
    if args.only:
        names = [n for n in names if n in args.only]
    busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.busy)]
    try:
        run(folder, names)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    print(f"\nmachine: {os.cpu_count()} cores; {args.busy} busy processes beside; load average "
          f"{os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
