"""SampleRank weight learning for coreference (issue 16 item 3), against hand-set weights.

    python examples/bench/coref_learn.py [--repeats 3] [--quick]

Fodors–Zagats and Cora (../shared/data). The gold entities are split in two at random (seed
fixed): SampleRank (margin 1, AdaGrad, averaged parameters; seed 002 Algorithm 1) learns one
weight per comparison plus a bias on the training half's mentions against their gold clustering,
and the MAP clustering with the learned weights is scored on the held-out half (and, for Cora,
on all records). The comparisons and blocking are examples/bench/coref.py's (their hand-set
weights are ignored, only field, method and center are used); the hand-set weights are run on
the same held-out half for reference. Learning time excludes numba compilation (one untimed
warm-up run) and pair building; medians over --repeats runs with different learning seeds.

dedupe 3.0.3 is not run: it needs BTrees < 6.5, which does not install here (see NOTES.md);
its own restaurant recipe's figure is quoted (pairwise F1 0.922 after 22 s of training).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import duckdb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coref import CONFIG, CORA_BIAS, CORA_BLOCKING, CORA_COMPARISONS, REST_BIAS, REST_BLOCKING, REST_COMPARISONS  # noqa: E402
from coref_data import load_cora, load_restaurants  # noqa: E402

from pdbq.learning.coref_rank import (  # noqa: E402
    learn_coref_weights,
    pair_table,
    resolve_with_weights,
    scores_against,
    subset,
)
from pdbq.learning.samplerank import SampleRankConfig  # noqa: E402


def split_entities(gold: np.ndarray, seed: int, frac: float = 0.5) -> np.ndarray:
    ents = np.unique(gold)
    rng = np.random.default_rng(seed)
    train = rng.choice(ents, size=int(round(frac * ents.size)), replace=False)
    return np.isin(gold, train)


# MAP exactly as examples/bench/coref.py runs it (20 annealing sweeps, τ 0.5, start from the
# components of pairs scoring > 2). Learned weights have no fixed scale, so this start suits
# large-scale weights; --decode zero starts from the pairs scoring > 0 instead.
DECODE = CONFIG

LEARNERS = {
    "AdaGrad, margin 1, τ 1 (FACTORIE)": dict(optimizer="adagrad", margin=1.0, learning_rate=1.0, temperature=1.0),
    "AdaGrad, margin 1, τ 0.2, η 3": dict(optimizer="adagrad", margin=1.0, learning_rate=3.0, temperature=0.2),
    "perceptron, margin 1, η 0.01": dict(optimizer="perceptron", margin=1.0, learning_rate=0.01, temperature=1.0),
}


def run(name, loader, table, comparisons, blocking, bias, objective, steps, repeats, split_seed=7):
    con = duckdb.connect()
    con.execute("SET threads = 1")
    loader(con)
    ids, pairs, names = pair_table(con, table, "id", comparisons, blocking)
    gold_tab = con.execute(f"SELECT id, entity FROM {table}_gold ORDER BY id").fetchnumpy()
    assert np.array_equal(gold_tab["id"], ids)
    gold = gold_tab["entity"]
    train = split_entities(gold, split_seed)
    n_tr, p_tr, old_tr = subset(pairs, train)
    n_te, p_te, old_te = subset(pairs, ~train)
    hand = np.array([c.weight for c in comparisons] + [-bias])
    learn_coref_weights(n_tr, p_tr, gold[old_tr], SampleRankConfig(steps=200), objective=objective, names=names)  # warm-up
    hand_test = scores_against(resolve_with_weights(n_te, p_te, hand, DECODE).labels, gold[old_te])
    hand_full = scores_against(resolve_with_weights(ids.size, pairs, hand, DECODE).labels, gold)
    print(f"\n## {name}: {ids.size} records, {pairs.a.size} candidate pairs; train {n_tr} mentions "
          f"({p_tr.a.size} pairs), held out {n_te} ({p_te.a.size} pairs); objective {objective}, {steps} steps, "
          f"medians over {repeats} learning seeds")
    print("| weights | learn s | held-out B³ F1 | held-out pairwise P | R | F1 | all B³ F1 | all pairwise F1 |")
    print("|---|---|---|---|---|---|---|---|")
    for label, opts in LEARNERS.items():
        rows = []
        for rep in range(repeats):
            t0 = time.perf_counter()
            res = learn_coref_weights(n_tr, p_tr, gold[old_tr], SampleRankConfig(steps=steps, seed=rep, **opts),
                                      objective=objective, names=names)
            secs = time.perf_counter() - t0
            test = scores_against(resolve_with_weights(n_te, p_te, res.weights, DECODE).labels, gold[old_te])
            full = scores_against(resolve_with_weights(ids.size, pairs, res.weights, DECODE).labels, gold)
            rows.append((secs, test, full, res))
        med = lambda key, which: statistics.median(r[which][key] for r in rows)  # noqa: E731
        lo = lambda key, which: min(r[which][key] for r in rows)  # noqa: E731
        print(f"| SampleRank {label} | {statistics.median(r[0] for r in rows):.2f} | {med('b3_f1', 1):.3f} (min {lo('b3_f1', 1):.3f}) | "
              f"{med('pw_p', 1):.3f} | {med('pw_r', 1):.3f} | {med('pw_f1', 1):.3f} (min {lo('pw_f1', 1):.3f}) | "
              f"{med('b3_f1', 2):.3f} (min {lo('b3_f1', 2):.3f}) | {med('pw_f1', 2):.3f} |", flush=True)
        r = rows[0][3]
        print("|   weights (seed 0) | " + ", ".join(f"{k} {v:+.2f}" for k, v in zip(r.names, r.weights))
              + f"; {r.samplerank.updates} updates, {r.samplerank.accepted} accepted, final train F {r.train_objective:.3f} |||||||")
    print(f"| hand-set (examples/bench/coref.py) | – | {hand_test['b3_f1']:.3f} | {hand_test['pw_p']:.3f} | "
          f"{hand_test['pw_r']:.3f} | {hand_test['pw_f1']:.3f} | {hand_full['b3_f1']:.3f} | {hand_full['pw_f1']:.3f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=["rest", "cora"], default=None)
    ap.add_argument("--decode", choices=["coref", "zero"], default="coref")
    args = ap.parse_args()
    global DECODE
    if args.decode == "zero":
        DECODE = replace(CONFIG, init_threshold=0.0)
    steps_r = 20_000 if args.quick else 100_000
    steps_c = 20_000 if args.quick else 100_000
    if args.only in (None, "rest"):
        run("Fodors–Zagats", load_restaurants, "restaurants", REST_COMPARISONS, REST_BLOCKING, REST_BIAS, "pairwise", steps_r, args.repeats)
    if args.only in (None, "cora"):
        run("Cora", load_cora, "cora", CORA_COMPARISONS, CORA_BLOCKING, CORA_BIAS, "b3", steps_c, args.repeats)


if __name__ == "__main__":
    main()
