"""The CEM split/merge proposer against the uniform split/merge proposer (issue 16 item 5).

    python examples/bench/cem.py [--seeds 10] [--entities 40]

Planted coreference sets (tests/test_learning_coref.py's generator): entities of 2–8 mentions,
candidate pairs within blocks of 5 entities, pair scores N(+1.5, 1) within an entity and
N(−1.5, 1) across; the walk starts from random clusters within each block. Both proposers
hill-climb ψ under seed 002's protocol (`pdbq.learning.cem.cem_decode`: every 5th step 20 CEM
rounds × 50 jumps, for the uniform proposer 1,000 uniform jumps; other steps 5 jumps; the best
jump is proposed and taken when it raises ψ) until B³ F1 ≥ 0.95. Counted: steps (one proposed
jump each, seed 002's "jumps"), taken moves, and jumps drawn. Medians over seeds; the ratio is
per seed (CEM / uniform), its median reported.

`--real`: also Fodors–Zagats (../shared/data) with examples/bench/coref.py's hand-set pair
scores, starting from the connected components of the pairs scoring > −4 (B³ F1 0.869: over-
merged), target B³ F1 0.94 (split/merge hill-climbing stops near 0.943 on this set: without
mention moves the remaining errors are local maxima of ψ).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from test_learning_coref import planted_graph  # noqa: E402

from pdbq.learning.cem import CEMConfig, cem_decode  # noqa: E402


def compare(cases, target):
    """cases: (seed, graph, gold, initial) → rows per proposer."""
    rows = {True: [], False: []}
    for seed, g, gold, init in cases:
        for adaptive in (True, False):
            t0 = time.perf_counter()
            r = cem_decode(g, gold, CEMConfig(seed=seed, target=target), adaptive=adaptive, initial=init)
            rows[adaptive].append((r.steps, r.jumps, r.proposals, r.reached, time.perf_counter() - t0, g.n_mentions))
    print("| proposer | reached | steps (proposed jumps) | taken moves | jumps drawn | seconds |")
    print("|---|---|---|---|---|---|")
    for adaptive, name in ((False, "uniform split/merge"), (True, "CEM (seed 002)")):
        rr = rows[adaptive]
        print(f"| {name} | {sum(r[3] for r in rr)}/{len(rr)} | {statistics.median(r[0] for r in rr):.0f} | "
              f"{statistics.median(r[1] for r in rr):.0f} | {statistics.median(r[2] for r in rr):.0f} | "
              f"{statistics.median(r[4] for r in rr):.2f} |")
    both = [(a, b) for a, b in zip(rows[True], rows[False]) if a[3] and b[3]]
    print(f"seeds where both reached the target: {len(both)}")
    for k, what in ((0, "steps"), (1, "taken moves"), (2, "jumps drawn")):
        ratio = [a[k] / b[k] for a, b in both]
        if ratio:
            print(f"CEM / uniform {what}: median {statistics.median(ratio):.3f} "
                  f"(range {min(ratio):.3f}–{max(ratio):.3f}); {100 * (1 - statistics.median(ratio)):.0f}% fewer")


def restaurants_cases(seeds):
    import duckdb

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from coref import REST_BIAS, REST_BLOCKING, REST_COMPARISONS
    from coref_data import load_restaurants

    from pdbq.coref.layout import pair_graph
    from pdbq.coref.metrics import labels_from_pairs
    from pdbq.learning.coref_rank import pair_table

    con = duckdb.connect()
    load_restaurants(con)
    ids, pairs, _ = pair_table(con, "restaurants", "id", REST_COMPARISONS, REST_BLOCKING)
    gold = con.execute("SELECT entity FROM restaurants_gold ORDER BY id").fetchnumpy()["entity"]
    w = pairs.x @ np.array([c.weight for c in REST_COMPARISONS]) - REST_BIAS
    g = pair_graph(ids.size, pairs.a, pairs.b, w)
    keep = w > -4
    init = labels_from_pairs(np.arange(ids.size), pairs.a[keep], pairs.b[keep])
    return [(seed, g, gold, init) for seed in range(seeds)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--entities", type=int, default=40)
    ap.add_argument("--target", type=float, default=0.95)
    ap.add_argument("--real", action="store_true")
    args = ap.parse_args()
    g, gold, init = planted_graph(0, n_ent=8)
    cem_decode(g, gold, CEMConfig(max_steps=10), initial=init)  # compile
    print(f"## planted sets: {args.seeds} seeds, {args.entities} entities, target B³ F1 {args.target}")
    compare([(seed, *planted_graph(seed, n_ent=args.entities)) for seed in range(args.seeds)], args.target)
    if args.real:
        print("\n## Fodors–Zagats (hand-set scores, over-merged start), target B³ F1 0.94")
        compare(restaurants_cases(args.seeds), 0.94)

if __name__ == "__main__":
    main()
