"""Seed 000 §4.2 / Table 1 on our Cora: B³ F1 vs factors evaluated and wall time, exact vs
subsampled proposal scoring, on the same annealed mention-move chains and seeds.

    python examples/mcmcmc/cora.py [--seeds 5] [--sweeps 150] [--target 0.90] [--quick]

The model is examples/mcmcmc/cora_model.py (DuckDB Jaro–Winkler pair scores within blocks). Each
chain starts from singletons and runs pdbq's mention moves (`pdbq.inference.coreference.entity_moves`, the
paper's proposal: move one mention to another entity or a new singleton; no split/merge), with
τ annealed geometrically from 2 to 0.02 over `--sweeps` passes of n steps. After every pass we
record the cumulative factor evaluations (pdbq's counter), the cumulative seconds spent inside
the move kernel (estimator overhead included; F1 bookkeeping excluded), and B³ F1. "Factors to
target" is the count at the first pass whose F1 reaches the target; speedups are the exact
chain's median over seeds divided by the method's median. Writes docs/img/mcmcmc_cora_*.png.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cora_model as cm  # noqa: E402

from pdbq.coref.tokens import empty_token_model  # noqa: E402
from pdbq.inference.coreference.entity_moves import new_scratch, new_state, run_moves  # noqa: E402
from pdbq.inference.coreference.member_moves import members_of, run_witness_moves  # noqa: E402
from pdbq.inference.mcmc.rng import chain_states  # noqa: E402
from pdbq.inference.coreference.subsample import SubsampleConfig, subsample_seeds, subsample_state  # noqa: E402

IMG = Path(__file__).resolve().parents[2] / "docs" / "img"

CONFIGS = [SubsampleConfig()] + [SubsampleConfig("uniform", rate=p) for p in (0.75, 0.5, 0.3, 0.2, 0.1)] + [
    SubsampleConfig("confidence", interval=i) for i in (0.001, 0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0)
] + [SubsampleConfig("confidence", interval=0.0, decide=True), SubsampleConfig("confidence", interval=1.0, decide=True)]


def run_chain(g, gold, cfg, seed, sweeps, t0=2.0, t1=0.02, p_new=0.1, proposal="neighbour", tokens=None):
    """One annealed chain from singletons: (cumulative evaluations, kernel seconds, B³ F1) per pass.
    `tokens`: score every member pair on demand (witness moves)."""
    n = g.n_mentions
    st = new_state(n)
    mb = members_of(st) if proposal == "witness" else None
    tm = tokens if tokens is not None else empty_token_model()
    sc = new_scratch(g, subsample_state(cfg, subsample_seeds(seed, 1)[0]))
    rng = chain_states(seed, 1)
    counters = np.zeros(4, np.int64)
    log = np.zeros(1)
    cool = (t1 / t0) ** (1.0 / max(sweeps - 1, 1))  # geometric, as pdbq's resolve_map
    temp = t0
    evals, secs, f1 = [], [], []
    spent = 0.0
    for _ in range(sweeps):
        a = time.perf_counter()
        if mb is None:
            run_moves(g, st, sc, rng, n, temp, p_new, 0.0, counters, log)
        else:
            run_witness_moves(g, tm, st, mb, sc, rng, n, temp, p_new, 0.0, counters, log)
        spent += time.perf_counter() - a
        evals.append(int(counters[0]))
        secs.append(spent)
        f1.append(cm.b3_f1(st.label, gold))
        temp = max(temp * cool, t1)
    return np.array(evals), np.array(secs), np.array(f1)


def first_hit(x, f1, target):
    hit = np.flatnonzero(f1 >= target)
    return float(x[hit[0]]) if hit.size else np.inf


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--sweeps", type=int, default=150)
    ap.add_argument("--target", type=float, default=0.90)
    ap.add_argument("--quick", action="store_true", help="2 seeds, 40 sweeps, 4 methods")
    ap.add_argument("--proposal", choices=("neighbour", "witness"), default="neighbour",
                    help="the mention move (CorefConfig.proposal); witness runs a subset of the methods")
    ap.add_argument("--model", choices=("stored", "tokens"), default="stored",
                    help="stored pair scores, or every within-entity pair scored on demand from token sets "
                         "(cora_model.cora_tokens; implies --proposal witness)")
    ap.add_argument("--api-only", action="store_true", help="only check that resolve_map runs the benchmark's chain")
    a = ap.parse_args()
    if a.model == "tokens":
        a.proposal = "witness"
    configs = CONFIGS if a.proposal == "neighbour" else [CONFIGS[i] for i in (0, 1, 2, 4, 10, 12, 13, 15)]
    if a.model == "tokens":
        configs = [CONFIGS[i] for i in (0, 2, 4, 5, 10, 11, 12, 13, 14, 15, 16)]
    if a.quick:
        a.seeds, a.sweeps = 2, 40
        configs = [CONFIGS[0], CONFIGS[5], CONFIGS[-2], CONFIGS[10]]
    t = time.perf_counter()
    recs, gold = cm.load_records()
    g, npairs = cm.cora_graph(recs)
    prep = time.perf_counter() - t
    print(f"Cora: {len(recs)} records, {len(set(gold))} papers, {npairs:,} candidate pairs; model built in {prep:.1f} s")
    tokens = cm.cora_tokens(recs) if a.model == "tokens" else None
    tag = "cora" if a.proposal == "neighbour" else ("cora_witness" if tokens is None else "cora_tokens")
    what = f"{a.proposal} moves" + (", factors on demand" if tokens is not None else "")
    if not a.api_only:
        table(g, gold, configs, a.seeds, a.sweeps, a.target, tag, f"Cora ({len(recs)} records), {what}",
              proposal=a.proposal, tokens=tokens)
    if a.proposal == "witness":
        api_check(g, gold, a.sweeps, tokens)


def api_check(g, gold, sweeps, tokens, seed=0):
    """The benchmark's chain is the one a user gets: `resolve_map` with the matching CorefConfig
    (one chain, no greedy passes) evaluates the same factors as `run_chain` for the same seed."""
    from pdbq.inference.coreference.resolve import CorefConfig, resolve_map

    for cfg in (SubsampleConfig(), SubsampleConfig("confidence", interval=0.0, decide=True)):
        e, _, f = run_chain(g, gold, cfg, seed, sweeps, proposal="witness", tokens=tokens)
        conf = CorefConfig(sweeps=sweeps, chains=1, seed=seed, temperature=2.0, min_temperature=0.02, greedy_sweeps=0,
                           p_new=0.1, p_split_merge=0.0, proposal="witness", subsample=cfg)
        res = resolve_map(g, conf, tokens=tokens)
        print(f"resolve_map({cfg.label()}): {res.factor_evaluations:,} factor evaluations (benchmark chain "
              f"{int(e[-1]):,}), B3 F1 {cm.b3_f1(res.labels, gold):.3f} (benchmark {f[-1]:.3f}), {res.seconds:.2f} s")


def table(g, gold, configs, seeds, sweeps, target, tag, title, t0=2.0, t1=0.02, proposal="neighbour", tokens=None):
    """Run every config on the same seeds, print the Table-1 rows, save the two plots."""
    # compile / cache-load outside the timings
    for warm in (SubsampleConfig("uniform", rate=0.5), SubsampleConfig("confidence", interval=1.0, decide=True),
                 SubsampleConfig()):
        run_chain(g, gold, warm, 99, 1, proposal=proposal, tokens=tokens)
    traces = {cfg.label(): [] for cfg in configs}
    for s in range(seeds):  # seed-major, so drifts in the shared machine's load hit every method
        for cfg in configs:
            traces[cfg.label()].append(run_chain(g, gold, cfg, s, sweeps, t0, t1, proposal=proposal, tokens=tokens))
    base = traces["exact"]
    reach = float(np.median([f[-1] for _, _, f in base]))
    if reach < target:  # the exact chain never gets there: measure at 95% of what it reaches
        print(f"exact chains end at median B3 F1 {reach:.3f} < target {target}; "
              f"target lowered to {0.95 * reach:.3f}")
        target = round(0.95 * reach, 3)
    base_f = np.median([first_hit(e, f, target) for e, _, f in base])
    base_s = np.median([first_hit(s, f, target) for _, s, f in base])
    n = g.n_mentions
    print(f"\n2-core x86-64, 24 GiB, shared with other work; {seeds} seeds, {sweeps} sweeps, "
          f"target B3 F1 {target}; medians over seeds")
    print(f"{'method':<16}{'factors to target':>18}{'speedup':>9}{'seconds':>9}{'wall x':>8}"
          f"{'final F1':>10}{'factors/step':>13}")
    rows = []
    for label, tr in traces.items():
        fac = np.median([first_hit(e, f, target) for e, _, f in tr])
        sec = np.median([first_hit(s, f, target) for _, s, f in tr])
        fin = np.median([f[-1] for _, _, f in tr])
        per_step = np.median([e[-1] / (len(e) * n) for e, _, _ in tr])
        sp = base_f / fac if np.isfinite(fac) else 0.0
        wx = base_s / sec if np.isfinite(sec) else 0.0
        rows.append((label, fac, sp, sec, wx, fin))
        fs = f"{fac:,.0f}" if np.isfinite(fac) else "not reached"
        ss = f"{sec:.2f}" if np.isfinite(sec) else "-"
        print(f"{label:<16}{fs:>18}{sp:>8.2f}x{ss:>9}{wx:>7.2f}x{fin:>10.3f}{per_step:>13.2f}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for xi, name, xlabel in ((0, "factors", "factors evaluated"), (1, "seconds", "seconds in the move kernel")):
        fig, ax = plt.subplots(figsize=(7.5, 4.6))
        for label, tr in traces.items():
            if label not in ("exact", "p=0.5", "p=0.2", "p=0.1", "i=0.1", "i=1", "i=5", "i=20", "i=0 +decide", "i=1 +decide"):
                continue
            x = np.median(np.array([t[xi] for t in tr]), axis=0)
            y = np.median(np.array([t[2] for t in tr]), axis=0)
            ax.plot(x, y, "-" if label == "exact" or label.startswith("p=") else "--", label=label,
                    lw=2.2 if label == "exact" else 1.2)
        ax.axhline(target, color="grey", lw=0.6)
        ax.set_xscale("log")
        ax.set_xlabel(xlabel + " (median over seeds)")
        ax.set_ylabel("B³ F1")
        ax.set_title(f"{title}: annealed mention moves, seed 000", fontsize=9)
        ax.legend(fontsize=8, ncol=2)
        fig.tight_layout()
        out = IMG / f"mcmcmc_{tag}_{name}.png"
        fig.savefig(out, dpi=110)
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
