"""Load a UAI 2014 competition network and compare pdbq's marginals with the published `.MAR`.

    python examples/uai.py                          # ObjectDetection_11, exact + 3 s of Gibbs
    python examples/uai.py CSP_12 --seconds 10
    python examples/uai.py --all --seconds 2        # every instance with a .MAR file

The networks live in ../shared/data/uai2014/ (override with --data). Each is read with
`pdbq.io.read_uai_graph` into pdbq's factor-graph layout (one TABLE factor per file factor,
evidence from the `.evid` file clamped), then answered twice, straight from the inference layer:
exact variable elimination (`pdbq.inference.exact.elimination.exact_marginals`) and single-site Gibbs
sampling (`pdbq.inference.mcmc.gibbs.run_gibbs`, 4 chains). The table shows the largest absolute
error over all variables and values against the `.MAR` answers, and the mean one.
Plain Gibbs is known to get stuck on the hard instances (Grids_12, DBN_11: chains in one mode);
R-hat in the warnings column says so.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from pdbq.errors import PdbqError
from pdbq.inference.mcmc.config import GibbsConfig
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.inference.mcmc.gibbs import run_gibbs
from pdbq.io import read_mar, read_uai_graph

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "uai2014"


def errors(marginals: np.ndarray, reference: list[np.ndarray]) -> tuple[float, float]:
    """Largest and mean absolute error over every variable's values."""
    diffs = np.concatenate([np.abs(marginals[i, : ref.size] - ref) for i, ref in enumerate(reference)])
    return float(diffs.max()), float(diffs.mean())


def compare(name: str, data: Path, seconds: float, seed: int) -> list[tuple]:
    path = data / f"{name}.uai"
    evid = data / f"{name}.uai.evid"
    model = read_uai_graph(path, evid if evid.exists() else None)
    reference = read_mar(data / f"{name}.uai.MAR")
    g = model.graph
    rows = []
    t0 = time.perf_counter()
    try:
        ex = exact_marginals(g)
        worst, mean = errors(ex.marginals, reference)
        rows.append((name, g.n_vars, g.n_factors, "EXACT", time.perf_counter() - t0, worst, mean, f"width {ex.width}"))
    except PdbqError as e:
        rows.append((name, g.n_vars, g.n_factors, "EXACT", time.perf_counter() - t0, float("nan"), float("nan"), str(e)[:60]))
    targets = np.arange(g.n_vars)
    # compile (or load from numba's cache) the kernels first, so the time limit is all sampling
    run_gibbs(g, targets[:1], GibbsConfig(seed=seed, steps=10, burn_in=0, chains=1))
    t0 = time.perf_counter()
    r = run_gibbs(g, targets, GibbsConfig(seed=seed, time_limit=seconds, steps=None))
    worst, mean = errors(r.marginals, reference)
    note = "; ".join(w[:60] for w in r.warnings[:1]) or f"{r.steps} updates/chain"
    rows.append((name, g.n_vars, g.n_factors, "GIBBS", time.perf_counter() - t0, worst, mean, note))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instances", nargs="*", default=["ObjectDetection_11"], help="instance names (no .uai)")
    ap.add_argument("--all", action="store_true", help="every instance with a .MAR file")
    ap.add_argument("--seconds", type=float, default=3.0, help="Gibbs time limit per instance")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", type=Path, default=DATA, help="folder of .uai/.evid/.MAR files")
    args = ap.parse_args(argv)
    if not args.data.is_dir():
        print(f"no UAI data folder at {args.data} (pass --data)", file=sys.stderr)
        return 2
    names = sorted(p.name[: -len(".uai.MAR")] for p in args.data.glob("*.uai.MAR")) if args.all else args.instances
    header = ("instance", "vars", "factors", "method", "seconds", "max error", "mean error", "notes")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name in names:
        for row in compare(name, args.data, args.seconds, args.seed):
            n, nv, nf, method, secs, worst, mean, note = row
            print(f"| {n} | {nv} | {nf} | {method} | {secs:.2f} | {worst:.2g} | {mean:.2g} | {note} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
