"""Mixing moves (issue 18) against plain single-site Gibbs, same process, same budget.

    python examples/bench/mixing.py [--seconds 10] [--ising-seconds 60] [--skip-ising] [--only NAME] [--cutset]
    python examples/bench/mixing.py --seeds 8 [--first-seed 0] [--methods auto,cutset] [--only A B] [--dump DIR] --skip-ising

UAI 2014 (../shared/data/uai2014, every instance with exact answers; relational_5 has none):
exact inference off, every variable a target, 4 chains, `time_limit` seconds each for
- GIBBS: `run_gibbs` (random scan), the baseline;
- BLOCKS: `run_mixing` with exact block moves (blocks = 'auto', block_table 2^10);
- AUTO: `move_choice.run_auto` with `choose_moves`: where walls or strong couplings are found, a
  plain pilot (25% of the budget) and, if its R-hat flags non-mixing, block moves for the rest;
  plain single-site chains otherwise;
- CUTSET (with --cutset): `cutset.run_cutset`, collapsed Gibbs on a cutset whose remainder fits
  2^10-entry clique tables, the remainder answered exactly (choosing the cutset is in the budget).
Per run: max |estimate − exact| over all variables and values, and the coverage of the 95%
intervals (share of variables whose every value has |error| ≤ 1.96·stderr + 1e-6; the 1e-6
absorbs float noise where a conditional is deterministic and the stderr is 0). That per-variable
metric asks for a simultaneous interval over a variable's K values, stricter than a 95% interval
promises; with --seeds the table adds issue 12's per-value coverage (as
examples/bench/interval_coverage.py: over the unwarned runs, each non-evidence value with
|error| ≤ 1.96·stderr + 5e-7, pooled over seeds, with the run-clustered 95% interval — a run's
values share its chains and miss together — and the 10th-percentile run), the median and mean
stderr, the largest |z|, and the same runs' coverage and stderrs without the resolution floor of
`estimates.batch_statistics` (recomputed from the same batch store: a same-run before/after).

Ising 300×300 at the critical coupling (±1 spins, J = ln(1 + √2)/2 per EQUAL factor, no field,
so every marginal is exactly 1/2): 100 target spins, error = max |p̂ − 1/2| along the run's
trace; reported: the error after the budget and the first time the error fell under 0.05, for
single-site Gibbs and for forest block moves (the graph is beyond the global-order limit).
"""

from __future__ import annotations

import argparse
import json
import time
import sys
from pathlib import Path

import numpy as np

from pdbq.errors import InferenceError

from pdbq.inference.mcmc import gibbs as gibbs_mod
from pdbq.inference.mcmc.config import GibbsConfig, MixingConfig
from pdbq.inference.moves.cutset import choose_cutset, run_cutset
from pdbq.inference.mcmc.gibbs import run_gibbs
from pdbq.inference.moves.mixing import run_mixing
from pdbq.inference.moves.move_choice import choose_moves, run_auto
from pdbq.io.uai import read_mar, read_uai_graph

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from shared_data import data_dir  # noqa: E402

DATA = data_dir("uai2014")
INSTANCES = ["Alchemy_11", "CSP_12", "DBN_11", "Grids_12", "ObjectDetection_11", "Promedus_24", "Promedus_26",
             "Segmentation_11"]


MAR_PRECISION = 5e-7  # the .MAR files print ~6 significant digits (as interval_coverage.py)


def scores(g, r, mar):
    """(max error, per-variable coverage) of one run; the per-value detail is `value_scores`."""
    err = np.zeros(g.n_vars)
    cover = np.zeros(g.n_vars, dtype=bool)
    for v in range(g.n_vars):
        k = len(mar[v])
        e = np.abs(r.marginals[v, :k] - mar[v])
        se = np.nan_to_num(r.stderr[v, :k], nan=np.inf)
        err[v] = np.inf if np.isnan(e).any() else e.max()  # NaN: no number (a warned answer)
        cover[v] = bool(np.all(e <= 1.96 * se + 1e-6))
    return float(err.max()), float(cover.mean())


_BATCH_STATISTICS = gibbs_mod.batch_statistics
_UNFLOORED: dict = {}


def _recording_statistics(sums, counts, constant=None, **kw):
    """`batch_statistics` as the sampler calls it, also keeping the same store's standard errors
    without the resolution floor: the floor's effect measured on the very same run."""
    kw.pop("floor", None)
    _UNFLOORED["se"] = _BATCH_STATISTICS(sums, counts, constant, floor=False, **kw)[1]
    return _BATCH_STATISTICS(sums, counts, constant, **kw)


gibbs_mod.batch_statistics = _recording_statistics


def value_scores(g, r, mar) -> dict:
    """Issue 12's coverage, per value: over the non-evidence variables' values, the share with
    |estimate − exact| ≤ 1.96·stderr + `MAR_PRECISION` (a NaN estimate is a miss; runs never
    give one without a warning, and the caller keeps warned runs apart). Also the median stderr
    over those values and the largest |z|, to show that coverage is not bought with wider
    intervals; and the same without the resolution floor (``*_nofloor``), from the standard
    errors of the run's last batch store without it (NaN when that store's rows are not the
    free variables: cutset sampling answers some of them exactly)."""
    free = np.flatnonzero(g.evidence < 0)
    kmax = r.marginals.shape[1]
    card = np.array([len(mar[v]) for v in range(g.n_vars)])
    exact = np.zeros((g.n_vars, kmax))
    for v in range(g.n_vars):
        exact[v, : card[v]] = mar[v]
    inside = np.arange(kmax)[None, :] < card[free][:, None]
    e = np.abs(r.marginals[free] - exact[free])[inside]
    out = {"values": int(inside.sum()), "warned": bool(r.warnings)}
    raw = _UNFLOORED.pop("se", None)
    variants = {"": r.stderr[free]}
    if raw is not None and raw.shape[0] == free.size and raw.shape[1] <= kmax:
        nf = np.zeros((free.size, kmax))
        nf[:, : raw.shape[1]] = raw
        nf = np.where(np.isnan(r.stderr[free]), np.nan, np.where(inside, nf, 0.0))
        variants["_nofloor"] = nf
    for tag, se_all in variants.items():
        se = se_all[inside]
        ok = e <= 1.96 * np.nan_to_num(se, nan=0.0) + MAR_PRECISION
        ok &= ~np.isnan(r.marginals[free][inside])
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(se > 0, np.maximum(e - MAR_PRECISION, 0.0) / se, np.where(ok, 0.0, np.inf))
        known = se[~np.isnan(se)]
        out.update({f"hit{tag}": int(ok.sum()), f"median_se{tag}": float(np.median(known)) if known.size else np.nan,
                    f"mean_se{tag}": float(np.mean(known)) if known.size else np.nan,
                    f"max_z{tag}": float(np.nanmax(z)) if z.size else 0.0})
    return out


def _race(row: dict, name: str, g, mar, run):
    """Run one method; an InferenceError (e.g. a chain that never left an impossible world) is
    recorded as the method's answer: no number (error inf, coverage 0)."""
    try:
        out = run()
    except InferenceError as e:
        row[f"{name}_err"], row[f"{name}_cover"], row[f"{name}_error"] = float("inf"), 0.0, str(e)[:80]
        return None
    r = out[0] if isinstance(out, tuple) else out
    row[f"{name}_err"], row[f"{name}_cover"] = scores(g, r, mar)
    row[f"{name}_values"] = value_scores(g, r, mar)
    row[f"{name}_result"] = r
    return out


def uai(seconds: float, only: str | None, cutset: bool = False) -> list[dict]:
    rows = []
    for name in INSTANCES:
        if only and name != only:
            continue
        g = read_uai_graph(DATA / f"{name}.uai", DATA / f"{name}.uai.evid").graph
        mar = read_mar(DATA / f"{name}.uai.MAR")
        cfg = GibbsConfig(time_limit=seconds, seed=0, scan="random")
        targets = np.arange(g.n_vars)
        try:  # compile / cache-load outside the race
            run_gibbs(g, targets, GibbsConfig(steps=1000, seed=0))
        except InferenceError:
            pass  # a short chain stuck in an impossible world: an error, as a query would get
        row = {"instance": name, "vars": g.n_vars}
        _race(row, "gibbs", g, mar, lambda: run_gibbs(g, targets, cfg))
        t = time.perf_counter()
        r = _race(row, "blocks", g, mar, lambda: run_mixing(g, targets, cfg, MixingConfig(blocks="auto")))
        row["blocks_s"] = time.perf_counter() - t
        if r is not None:
            row["blocks"] = f"{r.n_blocks} (largest {r.largest_block} vars)"
        out = _race(row, "auto", g, mar, lambda: run_auto(g, targets, cfg, choose_moves(g)))
        if out is not None:
            row["auto_moves"] = out[1].split("; ", 1)[-1]
        if cutset:
            try:
                run_cutset(g, targets, GibbsConfig(steps=10, seed=0))  # compile outside the race
            except InferenceError:
                pass

            def cut():
                t_end = time.perf_counter() + seconds
                cs = choose_cutset(g)
                return run_cutset(g, targets, cfg, cutset=cs, deadline=t_end)

            r = _race(row, "cutset", g, mar, cut)
            if r is not None:
                row["cutset"] = f"{r.cutset_size} vars, remainder width {r.remainder_width}, {r.sweeps} sweeps"
        print(json.dumps({k: v for k, v in row.items() if not k.endswith("_result")}), flush=True)
        rows.append(row)
    return rows


def _clustered(per_run: list[float]) -> tuple[float, float]:
    """Run-clustered 95% interval of a coverage: mean of the per-run coverages ± 1.96·sd/√runs
    (a run's values share its chains and miss together; a binomial interval over values would be
    far too narrow)."""
    pr = np.asarray(per_run, dtype=float)
    if pr.size < 2:
        return float("nan"), float("nan")
    half = 1.96 * pr.std(ddof=1) / np.sqrt(pr.size)
    return float(pr.mean() - half), float(pr.mean() + half)


def pooled(seconds: float, seeds: int, methods: list[str], only: list[str] | None, dump: Path | None = None,
           first_seed: int = 0) -> list[dict]:
    """Per instance and method over seeds first_seed..first_seed+seeds-1: the median and largest
    max error; the per-variable coverage pooled over every (seed, variable) (every run, warned or
    not: the earlier tables' metric); and issue 12's per-value coverage over the unwarned runs,
    pooled, with its run-clustered 95% interval and 10th-percentile run, the median stderr and
    the largest |z|. ``dump``: one .npz per run (estimates, stderrs, exact, R-hat, ESS, warnings)."""
    rows = []
    for name in INSTANCES:
        if only and name not in only:
            continue
        g = read_uai_graph(DATA / f"{name}.uai", DATA / f"{name}.uai.evid").graph
        mar = read_mar(DATA / f"{name}.uai.MAR")
        targets = np.arange(g.n_vars)
        for warm in (lambda: run_gibbs(g, targets, GibbsConfig(steps=1000, seed=0)),
                     lambda: run_cutset(g, targets, GibbsConfig(steps=10, seed=0))):
            try:  # compile / cache-load outside the race
                warm()
            except InferenceError:
                pass
        row = {"instance": name, "seeds": seeds}
        for m in methods:
            errs, covers, per_run, med_se, warned, moves = [], [], [], [], 0, set()
            per_run_nf, med_se_nf, mean_se, mean_se_nf = [], [], [], []
            hit = total = hit_nf = 0
            max_z = max_z_nf = 0.0
            for seed in range(first_seed, first_seed + seeds):
                cfg = GibbsConfig(time_limit=seconds, seed=seed, scan="random")
                one: dict = {}
                if m == "auto":
                    out = _race(one, m, g, mar, lambda: run_auto(g, targets, cfg, choose_moves(g)))
                    if out is not None:
                        moves.add(out[1].split("; ", 1)[-1].split(":")[0][:60])
                elif m == "cutset":
                    _race(one, m, g, mar, lambda: run_cutset(g, targets, cfg, deadline=time.perf_counter() + seconds))
                elif m == "blocks":
                    _race(one, m, g, mar, lambda: run_mixing(g, targets, cfg, MixingConfig(blocks="auto")))
                else:
                    _race(one, m, g, mar, lambda: run_gibbs(g, targets, cfg))
                errs.append(one[f"{m}_err"])
                covers.append(one[f"{m}_cover"])
                vs = one.get(f"{m}_values")
                if vs is None or vs["warned"]:  # an error or a warning: an allowed answer, not scored
                    warned += 1
                else:
                    hit += vs["hit"]
                    total += vs["values"]
                    per_run.append(vs["hit"] / vs["values"])
                    max_z = max(max_z, vs["max_z"])
                    if "hit_nofloor" in vs:
                        hit_nf += vs["hit_nofloor"]
                        per_run_nf.append(vs["hit_nofloor"] / vs["values"])
                        max_z_nf = max(max_z_nf, vs["max_z_nofloor"])
                if vs is not None:
                    med_se.append(vs["median_se"])
                    mean_se.append(vs["mean_se"])
                    if "median_se_nofloor" in vs:
                        med_se_nf.append(vs["median_se_nofloor"])
                        mean_se_nf.append(vs["mean_se_nofloor"])
                if dump is not None and f"{m}_result" in one:
                    r = one[f"{m}_result"]
                    dump.mkdir(parents=True, exist_ok=True)
                    np.savez_compressed(dump / f"{name}-{m}-{seed}.npz", marginals=r.marginals, stderr=r.stderr,
                                        rhat=r.rhat, ess=r.ess, evidence=g.evidence, warnings=np.array(r.warnings),
                                        exact=np.array([np.pad(np.asarray(x, float), (0, r.marginals.shape[1] - len(x)))
                                                        for x in mar]))
            row[f"{m}_err_median"] = float(np.median(errs))
            row[f"{m}_err_max"] = float(np.max(errs))
            row[f"{m}_cover_pooled"] = float(np.mean(covers))
            row[f"{m}_unwarned"] = seeds - warned
            row[f"{m}_value_cover"] = hit / total if total else float("nan")
            row[f"{m}_value_cover_clustered"] = _clustered(per_run)
            row[f"{m}_value_cover_p10"] = float(np.percentile(per_run, 10)) if per_run else float("nan")
            row[f"{m}_median_se"] = float(np.median(med_se)) if med_se else float("nan")
            row[f"{m}_max_z"] = max_z
            row[f"{m}_mean_se"] = float(np.median(mean_se)) if mean_se else float("nan")
            full = len(per_run_nf) == len(per_run) and per_run  # the no-floor variant of every scored run
            row[f"{m}_value_cover_nofloor"] = hit_nf / total if full else float("nan")
            row[f"{m}_value_cover_nofloor_clustered"] = _clustered(per_run_nf) if full else (float("nan"),) * 2
            row[f"{m}_median_se_nofloor"] = float(np.median(med_se_nf)) if med_se_nf else float("nan")
            row[f"{m}_mean_se_nofloor"] = float(np.median(mean_se_nf)) if mean_se_nf else float("nan")
            row[f"{m}_max_z_nofloor"] = max_z_nf
            if moves:
                row[f"{m}_moves"] = sorted(moves)
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def pooled_table(rows: list[dict], methods: list[str]) -> None:
    """The pooled rows as a markdown table (per method: both coverage metrics side by side, and
    the per-value coverage and stderrs of the same runs without the resolution floor)."""
    print("| instance | method | max error, median (largest) | per-variable cover (all runs) | unwarned | "
          "per-value cover (unwarned) [run-clustered 95%] | p10 run | median / mean stderr | max \\|z\\| | "
          "without the floor: per-value cover [run-clustered] | median / mean stderr | max \\|z\\| |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        for m in methods:
            lo, hi = row[f"{m}_value_cover_clustered"]
            nlo, nhi = row[f"{m}_value_cover_nofloor_clustered"]
            print(f"| {row['instance']} | {m} | {row[f'{m}_err_median']:.4f} ({row[f'{m}_err_max']:.4f}) | "
                  f"{row[f'{m}_cover_pooled']:.3f} | {row[f'{m}_unwarned']} of {row['seeds']} | "
                  f"**{100 * row[f'{m}_value_cover']:.1f}%** [{100 * lo:.1f}, {100 * hi:.1f}] | "
                  f"{100 * row[f'{m}_value_cover_p10']:.1f}% | {row[f'{m}_median_se']:.2e} / {row[f'{m}_mean_se']:.2e} | "
                  f"{row[f'{m}_max_z']:.1f} | {100 * row[f'{m}_value_cover_nofloor']:.1f}% [{100 * nlo:.1f}, {100 * nhi:.1f}] | "
                  f"{row[f'{m}_median_se_nofloor']:.2e} / {row[f'{m}_mean_se_nofloor']:.2e} | {row[f'{m}_max_z_nofloor']:.1f} |",
                  flush=True)


def ising_graph(n: int, coupling: float):
    from pdbq.graph.builder import GraphBuilder  # noqa: PLC0415
    from pdbq.language.nodes import FactorFunction as F  # noqa: PLC0415

    b = GraphBuilder()
    xs = b.add_variables(n * n)
    w = b.add_weight(coupling)
    for r in range(n):
        for c in range(n):
            v = xs[r * n + c]
            if c + 1 < n:
                b.add_factor(F.EQUAL, [v, v + 1], weight=w)
            if r + 1 < n:
                b.add_factor(F.EQUAL, [v, v + n], weight=w)
    return b.build()


def ising(seconds: float, n: int = 300, threshold: float = 0.05) -> list[dict]:
    j_c = 0.5 * np.log1p(np.sqrt(2.0))  # ±1 spins: p ∝ exp(J Σ s_i s_j); EQUAL is ±1-valued
    g = ising_graph(n, j_c)
    rng = np.random.default_rng(0)
    targets = np.sort(rng.choice(g.n_vars, 100, replace=False))
    cfg = GibbsConfig(time_limit=seconds, seed=0, scan="random", burn_in=0)
    out = []
    for label in ("GIBBS", "BLOCKS (forest)"):
        t = time.perf_counter()
        if label == "GIBBS":
            r = run_gibbs(g, targets, cfg)
        else:
            r = run_mixing(g, targets, cfg, MixingConfig(blocks="auto"))
        wall = time.perf_counter() - t
        err = np.abs(r.trace.estimates[:, :, 1] - 0.5).max(axis=1)
        frac = r.trace.steps / max(r.steps, 1)
        hit = np.flatnonzero(err <= threshold)
        row = {"method": label, "seconds": round(wall, 1), "final_err": float(err[-1]) if err.size else None,
               f"t_err<={threshold}": float(frac[hit[0]] * r.seconds) if hit.size else None,
               "blocks": getattr(r, "n_blocks", 0), "steps": r.steps}
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--ising-seconds", type=float, default=60.0)
    ap.add_argument("--skip-ising", action="store_true")
    ap.add_argument("--skip-uai", action="store_true")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--cutset", action="store_true", help="add the CUTSET method")
    ap.add_argument("--seeds", type=int, default=0,
                    help="instead of the one-seed table: seeds 0..N-1 of --methods, coverage pooled")
    ap.add_argument("--methods", default="auto,cutset", help="with --seeds: gibbs,blocks,auto,cutset")
    ap.add_argument("--first-seed", type=int, default=0, help="with --seeds: seeds first..first+N-1")
    ap.add_argument("--dump", type=Path, help="with --seeds: write each run's estimates and errors here (.npz)")
    a = ap.parse_args()
    if a.seeds:
        methods = a.methods.split(",")
        pooled_table(pooled(a.seconds, a.seeds, methods, a.only, a.dump, a.first_seed), methods)
    elif not a.skip_uai:
        rows = uai(a.seconds, a.only[0] if a.only else None, a.cutset)
        if rows:
            for k in ("gibbs", "blocks", "auto") + (("cutset",) if a.cutset else ()):
                e = np.median([r[f"{k}_err"] for r in rows])
                c = np.median([r[f"{k}_cover"] for r in rows])
                print(f"median {k}: max error {e:.4f}, coverage {c:.3f}")
    if not a.skip_ising:
        ising(a.ising_seconds)


if __name__ == "__main__":
    main()
