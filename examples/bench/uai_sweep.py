"""The default query and forced sampling over the UAI 2014 networks and generated hard families,
seeds × instances: is every answer right within its reported error or warned, within its limit?

Instances: the shared UAI 2014 networks with a ``.MAR`` file (``--data``; their evidence read with
them), and ``--generated`` models per family, each drawn from its own seed:

- ``dense-dbn``: time slices of binary variables, each tied to every variable of the slice before
  (a dense transition pulling towards the majority), a bias towards 0 whose opposite (all 1) is a
  rare mode;
- ``near-det``: a chain of 3-valued variables whose transitions are a permutation with 1e-9
  (or 0) elsewhere, the first observed (the answers are nearly or exactly forced);
- ``frustrated``: a square grid spin glass (couplings ±1.5 of random sign, weak random fields);
- ``coupled-grid``: a 10×10 grid with strong ferromagnetic couplings (EQUAL weights 0.45–0.9)
  and weak random fields: two modes, the batch means' hardest case.

Exact references: pdbq's exact elimination (the UAI files' ``.MAR`` for the shared networks).
Per instance and seed: (a) the default query (``QueryOptions()``: AUTO, the 5 s default limit;
once per instance unless ``--default-seeds``) and (b) forced sampling
``AUTO WITH (exact_budget = 0, time_limit = --limit, seed = s)``, every free variable asked
through ``pdbq.answers.engine.answer`` with the query's clock started before it. Per run: wall
time (an overrun: over limit × 1.1 + 1 s), the largest |error|, whether any warning came, and,
for unwarned answers, each (variable, value) whose |error| ≤ 1.96·stderr + 5e-7 (coverage).
A *silent wrong* answer is one off by over 0.01 with no warning. ``--busy N`` runs N CPU-bound
processes beside (stopped by their ids at the end).

Usage: ``python examples/bench/uai_sweep.py [--generated 2] [--seeds 3] [--limit 3] [--busy 0]
[--only-families coupled-grid ...] [--no-uai]``
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from pdbq.answers.engine import answer
from pdbq.answers.warmup import _misses, warm_up
from pdbq.graph.builder import GraphBuilder
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.io.uai import read_mar, read_uai_graph
from pdbq.language.nodes import FactorFunction as F
from pdbq.language.nodes import Method
from pdbq.planning.options import QueryOptions

MAR_PRECISION = 5e-7


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


def dense_dbn(rng):
    slices, width, rare = int(rng.integers(5, 9)), int(rng.integers(3, 6)), float(rng.uniform(2.0, 4.0))
    b = GraphBuilder()
    xs = [b.add_variables(width) for _ in range(slices)]
    for t in range(slices):
        for v in xs[t]:
            b.add_factor(F.ISTRUE, [v], weight=b.add_weight(-rare / width))
        if t:
            for v in xs[t]:
                for u in xs[t - 1]:
                    b.add_factor(F.EQUAL, [u, v], weight=b.add_weight(float(rng.uniform(0.6, 1.2))))
    return b.build()


def near_det(rng):
    n, card = int(rng.integers(20, 60)), int(rng.integers(2, 5))
    eps = 0.0 if rng.random() < 0.5 else float(10.0 ** -rng.uniform(6, 12))
    b = GraphBuilder()
    xs = [b.add_variable(card) for _ in range(n)]
    b.set_evidence(xs[0], int(rng.integers(card)))
    for a, c in zip(xs, xs[1:]):
        t = np.full((card, card), eps)
        t[np.arange(card), rng.permutation(card)] = 1.0
        with np.errstate(divide="ignore"):
            b.add_factor(F.TABLE, [a, c], table=np.log(t).ravel())
    return b.build()


def _grid(rng, side: int, coupling) -> object:
    b = GraphBuilder()
    xs = b.add_variables(side * side)
    for r in range(side):
        for c in range(side):
            v = xs[r * side + c]
            b.add_factor(F.ISTRUE, [v], weight=b.add_weight(float(rng.normal(scale=0.2))))
            for dr, dc in ((0, 1), (1, 0)):
                if r + dr < side and c + dc < side:
                    b.add_factor(F.EQUAL, [v, xs[(r + dr) * side + c + dc]], weight=b.add_weight(coupling(rng)))
    return b.build()


def frustrated(rng):
    return _grid(rng, int(rng.integers(5, 9)), lambda r: 1.5 * (1 if r.random() < 0.5 else -1))


def coupled_grid(rng):
    return _grid(rng, 10, lambda r: float(r.uniform(0.45, 0.9)))


FAMILIES = {"dense-dbn": dense_dbn, "near-det": near_det, "frustrated": frustrated, "coupled-grid": coupled_grid}


def instances(args) -> list[tuple[str, object, np.ndarray]]:
    out = []
    if not args.no_uai:
        folder = _data(args.data)
        for p in sorted(folder.glob("*.uai")):
            if Path(f"{p}.MAR").exists() and (not args.only or p.stem in args.only):
                g = read_uai_graph(p, f"{p}.evid").graph
                mar = read_mar(f"{p}.MAR")
                ex = np.zeros((g.n_vars, int(g.cardinality.max())))
                for v, m in enumerate(mar):
                    ex[v, : len(m)] = m
                out.append((p.stem, g, ex))
    for fam, gen in FAMILIES.items():
        if args.only_families and fam not in args.only_families:
            continue
        for i in range(args.generated):
            g = gen(np.random.default_rng([args.instance_seed, i, len(fam)]))
            out.append((f"{fam}-{i}", g, exact_marginals(g).marginals))
    return out


def run(g, exact, opts) -> dict:
    free = np.flatnonzero(g.evidence < 0)
    q = np.arange(g.n_vars, dtype=np.int64)
    compiled = _misses()
    t = time.perf_counter()
    c = time.process_time()
    try:
        a = answer(g, q, Method.AUTO, opts, started=t)
    except Exception as e:  # noqa: BLE001 - a benchmark reports every failure
        return dict(wall=time.perf_counter() - t, error=f"{type(e).__name__}: {e}"[:80], compiled=_misses() - compiled)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    m, se = a.result.marginals, a.result.stderr
    errs, hits, total = [], 0, 0
    for v in free:
        k = int(g.cardinality[v])
        if np.isnan(m[v, :k]).any():
            continue
        d = np.abs(m[v, :k] - exact[v, :k])
        errs.append(float(d.max()))
        hits += int((d <= Z * se[v, :k] + MAR_PRECISION).sum())
        total += k
    warned = [w for w in a.warnings if not w.startswith(NOTES)]
    return dict(wall=wall, cpu=cpu, method=a.method, err=max(errs, default=0.0), warned=bool(warned),
                unreliable=any(w.startswith(UNRELIABLE) for w in warned), warnings=list(a.warnings), hits=hits,
                total=total, error=None, compiled=_misses() - compiled)


Z = 1.959963984540054
# Notes that claim nothing about the answer's error: why AUTO sampled, what the CPU share was.
NOTES = ("AUTO sampled because", "the machine was busy")
# The lead warning of an answer whose intervals the checks found untrustworthy.
UNRELIABLE = "error bars unreliable"


def _fmt_runs(runs: list[dict], limit: float) -> str:
    errs = [r["err"] for r in runs if r["error"] is None]
    failed = sum(r["error"] is not None for r in runs)
    warned = sum(r["error"] is None and r["warned"] for r in runs)
    silent = sum(r["error"] is None and not r["warned"] and r["err"] > 0.01 for r in runs)
    over = sum(r["wall"] > 1.1 * limit + 1.0 for r in runs)
    hits = sum(r["hits"] for r in runs if r["error"] is None and not r["warned"])
    total = sum(r["total"] for r in runs if r["error"] is None and not r["warned"])
    cov = f"{hits / total:.3f}" if total else "–"
    valid = [r for r in runs if r["error"] is None and not r["unreliable"]]
    vh, vt = sum(r["hits"] for r in valid), sum(r["total"] for r in valid)
    cov += f" / {vh / vt:.3f} ({len(valid)})" if vt else " / – (0)"
    compiled = sum(r["compiled"] for r in runs)
    med = f"{np.median(errs):.4f} / {max(errs):.4f}" if errs else "–"
    walls = max(r["wall"] for r in runs)
    return f"{med} | {warned}/{len(runs)} | {silent} | {cov} | {over} (max {walls:.1f} s) | {failed} | {compiled}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--only", nargs="*", default=None, help="UAI networks by name")
    ap.add_argument("--no-uai", action="store_true")
    ap.add_argument("--only-families", nargs="*", default=None)
    ap.add_argument("--generated", type=int, default=2, help="instances per generated family")
    ap.add_argument("--instance-seed", type=int, default=39)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--limit", type=float, default=3.0, help="forced sampling's time_limit")
    ap.add_argument("--default-seeds", type=int, default=1)
    ap.add_argument("--skip-default", action="store_true")
    ap.add_argument("--busy", type=int, default=0)
    ap.add_argument("--verbose", action="store_true", help="one line per run")
    args = ap.parse_args()
    for tier in ("core", "moves", "wide", "wide-moves"):
        warm_up(tier)
    todo = instances(args)
    busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.busy)]
    loads = [os.getloadavg()[0]]
    print(f"| instance | vars | default: wall s, method, err, warned | forced ({args.limit:g} s): median / max err "
          "| warned | silent wrong | coverage: unwarned / not 'unreliable' (runs) | overruns | errors | kernels compiled |")
    print("|---|---:|---|---|---:|---:|---|---|---:|---:|")
    totals = {"silent": 0, "over": 0, "runs": 0, "default_over": 0, "default_silent": 0, "default_failed": 0}
    try:
        for name, g, exact in todo:
            dflt = "–"
            if not args.skip_default:
                ds = [run(g, exact, QueryOptions(seed=s)) for s in range(args.first_seed, args.first_seed + args.default_seeds)]
                parts = []
                for d in ds:
                    if d["error"]:
                        parts.append(f"{d['wall']:.1f}, ERROR {d['error']}")
                        totals["default_failed"] += 1
                        continue
                    parts.append(f"{d['wall']:.1f}, {d['method'].name if hasattr(d['method'], 'name') else d['method']}, "
                                 f"{d['err']:.4f}, {'warned' if d['warned'] else 'unwarned'}")
                    totals["default_over"] += d["wall"] > 1.1 * 5.0 + 1.0
                    totals["default_silent"] += (not d["warned"]) and d["err"] > 0.01
                dflt = "; ".join(parts)
            runs = []
            for s in range(args.first_seed, args.first_seed + args.seeds):
                r = run(g, exact, QueryOptions(exact_budget=0.0, time_limit=args.limit, seed=s))
                runs.append(r)
                if args.verbose:
                    print(f"  {name} seed {s}: " + str({k: v for k, v in r.items() if k != "warnings"}) + " " + str([w[:60] for w in r.get("warnings", [])]), file=sys.stderr, flush=True)
            totals["silent"] += sum(r["error"] is None and not r["warned"] and r["err"] > 0.01 for r in runs)
            totals["over"] += sum(r["wall"] > 1.1 * args.limit + 1.0 for r in runs)
            totals["runs"] += len(runs)
            loads.append(os.getloadavg()[0])
            print(f"| {name} | {g.n_vars} | {dflt} | {_fmt_runs(runs, args.limit)} |", flush=True)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    print(f"\n{len(todo)} instances × {args.seeds} seeds: {totals['runs']} forced runs, {totals['silent']} silent wrong, "
          f"{totals['over']} overruns; default: {totals['default_failed']} errors, {totals['default_silent']} silent "
          f"wrong, {totals['default_over']} overruns. Machine: {os.cpu_count()} cores, {args.busy} busy processes "
          f"beside, load average {min(loads):.1f}–{max(loads):.1f}.")


if __name__ == "__main__":
    main()
