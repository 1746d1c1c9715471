"""Seed 001's hierarchy on Cora (issue 17): factor evaluations to reach a B³ F1 target, flat
pairwise entity moves (`resolve_map`) vs the sub-entity/entity hierarchy (`resolve_hierarchical`).

Both start from singletons on the same pair graph (examples/bench/coref.py's Cora model) and
are run at growing lengths; each row is one run, so the numbers are evaluations of independent
runs, medians over seeds. Evaluations count every pair score read, including the pairs read
when the hierarchy rebuilds a level's graph.

    python examples/bench/coref_hierarchy.py --seeds 1 2 3 --target 0.90
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coref import CORA_BIAS, CORA_BLOCKING, CORA_COMPARISONS, _gold  # noqa: E402
from coref_data import load_cora  # noqa: E402

from pdbq.coref.metrics import b_cubed  # noqa: E402
from pdbq.coref.model import CorefModel, candidate_pairs, load_records, pair_features  # noqa: E402
from pdbq.inference.coreference.resolve import CorefConfig, resolve_map  # noqa: E402
from pdbq.inference.coreference.hierarchy import HierarchyConfig, resolve_hierarchical  # noqa: E402


def cora_graph():
    con = duckdb.connect()
    load_cora(con)
    records = load_records(con, "cora", id="id", fields=sorted({c.field for c in CORA_COMPARISONS}))
    model = CorefModel(tuple(CORA_COMPARISONS), tuple(CORA_BLOCKING), bias=CORA_BIAS, max_pairs=20_000_000)
    candidate_pairs(con, records, model)
    feats = pair_features(con, records, model)
    gold = _gold(con, "cora_gold")
    return feats.graph(records.n, model.scores(feats.x)), gold


def first_reaching(rows, target):
    """Evaluations of the shortest run whose F1 reached the target (None if none did)."""
    hit = [ev for ev, f1, _ in rows if f1 >= target]
    return min(hit) if hit else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--target", type=float, default=0.90)
    ap.add_argument("--sub-bias", type=float, default=2.0, help="the sub-entity level's extra bias")
    args = ap.parse_args()
    g, gold = cora_graph()
    print(f"Cora: {g.n_mentions} mentions, {g.n_pairs:,} candidate pairs")
    flat_len = [4, 8, 12, 16, 20, 24, 28, 32, 40]
    hier_len = [4, 8, 12, 16, 20, 24, 32]
    ratios, table = [], []
    for seed in args.seeds:
        flat, hier = [], []
        for s in flat_len:
            t = time.perf_counter()
            r = resolve_map(g, CorefConfig(sweeps=s, chains=1, seed=seed, temperature=0.5, greedy_sweeps=2, p_split_merge=0.2))
            flat.append((r.factor_evaluations, b_cubed(r.labels, gold).f1, time.perf_counter() - t))
        for k in hier_len:
            t = time.perf_counter()
            r = resolve_hierarchical(g, HierarchyConfig(rounds=k, seed=seed, temperature=0.5, greedy_rounds=2, sub_bias=args.sub_bias))
            hier.append((r.factor_evaluations, b_cubed(r.labels, gold).f1, time.perf_counter() - t))
        fe, he = first_reaching(flat, args.target), first_reaching(hier, args.target)
        table.append((seed, flat, hier, fe, he))
        if fe and he:
            ratios.append(fe / he)
        print(f"seed {seed}: flat reaches {args.target} at {fe} evaluations, hierarchy at {he}")
        for name, rows in (("flat", flat), ("hierarchy", hier)):
            print(f"  {name:9s} " + "  ".join(f"{ev / 1e6:.2f}M:{f1:.3f}" for ev, f1, _ in rows))
    if ratios:
        print(f"\nmedian ratio flat / hierarchy evaluations to B3 F1 {args.target}: {statistics.median(ratios):.2f}x "
              f"over {len(ratios)} seeds")


if __name__ == "__main__":
    main()
