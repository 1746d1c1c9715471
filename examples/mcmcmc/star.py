"""Seed 000 §4.1: Gibbs marginals on synthetic star models, exact vs subsampled factor scoring.

    python examples/mcmcmc/star.py [--models 100] [--budget 400000] [--seed 0]

Each model is one binary variable with 100 unary factors (the star of the paper's Figure 1a).
Factor i scores the positive label w_i, the negative label 0; w_i is drawn from N(0.5, 1) or
N(−0.5, 1) with probability ½ each (the two overlapping score distributions of Figure 1b), so
the true marginal P(y = +) = σ(Σ w_i) is exact. A Gibbs step scores the 100 factors that
change with y — all of them (p = 1), a uniform fraction p (eq. 7), or sequentially until the
fpc-corrected 95% interval (eq. 9) is narrower than i (optionally: until it excludes the Gibbs
decision threshold logit(u)/100, '+decide') — and sets y = + iff u < σ(estimate). We report
the L1 error Σ_y |P̂(y) − P(y)| of the running marginal, averaged over the models, against the
number of factors evaluated. The estimators are pdbq's kernels (pdbq.inference.coreference.subsample).
Writes docs/img/mcmcmc_star.png and prints the error at fixed factor budgets.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from numba import njit

from pdbq.inference.mcmc.rng import bounded, chain_states, next_state, uniform
from pdbq.inference.coreference.subsample import SubsampleConfig, exact_sum, sequential_sum, uniform_sum

N_FACTORS = 100
CONFIGS = [
    SubsampleConfig(),
    SubsampleConfig("uniform", rate=0.5),
    SubsampleConfig("uniform", rate=0.2),
    SubsampleConfig("uniform", rate=0.1),
    SubsampleConfig("uniform", rate=0.05),
    SubsampleConfig("confidence", interval=0.5),
    SubsampleConfig("confidence", interval=1.0),
    SubsampleConfig("confidence", interval=2.0),
    SubsampleConfig("confidence", interval=0.0, decide=True),
]


@njit(cache=True)
def _gibbs(w, params, rng, sub_rng, budget, checkpoints, truth, err_out):
    """Run Gibbs until `budget` factors are evaluated; err_out[c] gets the L1 error of the
    running marginal when the evaluations first reach checkpoints[c]."""
    n = w.shape[0]
    edges = np.arange(n)
    signs = np.ones(n)
    mode = params[0]
    rate = params[1]
    interval = params[2]
    decide = params[3] != 0.0
    m = int(np.ceil(rate * n * (1.0 - 1e-12)))
    if m < 1:
        m = 1
    rng = next_state(rng)
    y = 1 if uniform(rng) < 0.5 else 0
    evals = 0
    steps = 0
    ones = 0
    c = 0
    while c < checkpoints.shape[0]:
        rng = next_state(rng)
        u = uniform(rng)
        if mode == 0.0 or (mode == 1.0 and m >= n):
            est = exact_sum(w, edges, signs, n)
            used = n
        elif mode == 1.0:
            sub_rng, est = uniform_sum(w, edges, signs, n, m, sub_rng)
            used = m
        else:
            mu0 = np.log(u / (1.0 - u)) / n if u > 0.0 else -np.inf
            sub_rng, est, used = sequential_sum(w, edges, signs, n, sub_rng, interval, decide, mu0)
        # Gibbs: y = + with probability σ(est), i.e. iff logit(u) < est
        y = 1 if u * (1.0 + np.exp(-est)) < 1.0 else 0
        evals += used
        steps += 1
        ones += y
        while c < checkpoints.shape[0] and evals >= checkpoints[c]:
            err_out[c] = 2.0 * abs(ones / steps - truth)
            c += 1
    return rng, sub_rng


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=100)
    ap.add_argument("--budget", type=int, default=400_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reading", choices=("mixture", "per-label"), default="mixture",
                    help="mixture: w_i ~ N(±0.5, 1) with prob ½ each (default); per-label: "
                         "f_i(+) ~ N(0.5, 1), f_i(−) ~ N(−0.5, 1), so each change is f_i(+) − f_i(−)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if a.out is None:
        name = "mcmcmc_star.png" if a.reading == "mixture" else "mcmcmc_star_per_label.png"
        a.out = str(Path(__file__).resolve().parents[2] / "docs" / "img" / name)
    gen = np.random.default_rng(a.seed)
    models = []
    for _ in range(a.models):
        if a.reading == "mixture":
            sign = np.where(gen.random(N_FACTORS) < 0.5, 0.5, -0.5)
            w = gen.normal(sign, 1.0)
        else:
            w = gen.normal(0.5, 1.0, N_FACTORS) - gen.normal(-0.5, 1.0, N_FACTORS)
        models.append((w, 1.0 / (1.0 + np.exp(-w.sum()))))
    checkpoints = np.unique(np.geomspace(N_FACTORS, a.budget, 40).astype(np.int64))
    results = {}
    t0 = time.perf_counter()
    for ci, cfg in enumerate(CONFIGS):
        cfg.check()
        errs = np.zeros((a.models, checkpoints.size))
        rngs = chain_states(a.seed * 1000 + ci, a.models)
        subs = chain_states(a.seed * 1000 + ci + 500, a.models)
        for k, (w, truth) in enumerate(models):
            _gibbs(w.copy(), cfg.params(), rngs[k], subs[k], a.budget, checkpoints, truth, errs[k])
        results[cfg.label()] = errs
    secs = time.perf_counter() - t0
    marg = np.array([t for _, t in models])
    print(f"{a.models} star models x {N_FACTORS} factors; true marginals in (0.05, 0.95): "
          f"{int(np.sum((marg > 0.05) & (marg < 0.95)))}; {secs:.1f} s")
    show = [c for c in (1_000, 10_000, 100_000, a.budget) if c <= a.budget]
    idx = [int(np.searchsorted(checkpoints, c)) for c in show]
    print("method        " + "".join(f"{'L1 @ ' + format(c, ','):>16}" for c in show))
    for label, errs in results.items():
        mean = errs.mean(axis=0)
        se = errs.std(axis=0, ddof=1) / np.sqrt(a.models)
        print(f"{label:<14}" + "".join(f"{mean[i]:>9.4f} ±{se[i]:.4f}" for i in idx))
    # factors to reach the exact chain's error at the budget
    target = results["exact"].mean(axis=0)[-1]
    print(f"factors to reach the exact chain's final error {target:.4f}:")
    for label, errs in results.items():
        mean = errs.mean(axis=0)
        hit = np.flatnonzero(mean <= target)
        print(f"  {label:<14} {format(int(checkpoints[hit[0]]), ',') if hit.size else 'not reached':>12}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, errs in results.items():
        mean = errs.mean(axis=0)
        se = errs.std(axis=0, ddof=1) / np.sqrt(a.models)
        style = "-" if label == "exact" or label.startswith("p=") else "--"
        ax.plot(checkpoints, mean, style, label=label, lw=2.2 if label == "exact" else 1.2)
        ax.fill_between(checkpoints, mean - se, mean + se, alpha=0.15)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("factors evaluated")
    ax.set_ylabel("mean L1 error of the marginal")
    ax.set_title(f"Star models ({a.models} × {N_FACTORS} factors, {a.reading}), Gibbs, seed 000 §4.1")
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
