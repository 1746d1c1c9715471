"""Distributed coreference MAP (issue 17): map/redistribute rounds on Dask, 1 vs N workers.

Person-X-style synthetic mentions (seed 001's evaluation; `pdbq.coref.personx`), resolved by
`pdbq.distributed.resolve_distributed` with the same total number of proposals for every worker
count, so B³ F1 differences come from the partitioning alone; plus the single-process annealer
(`pdbq.inference.coreference.resolve.resolve_map`) at the same proposals. Prints wall time, speed-up, B³ and
pairwise F1, the per-round split (compute on the slowest partition vs Dask/redistribution
overhead), parallel efficiency, memory per worker and the array bytes the client sends and
receives per round (today O(mentions) per round: every partition's mentions and labels).

    python examples/bench/coref_distributed.py --mentions 100000 --workers 1 2
    python examples/bench/coref_distributed.py --mentions 1000000 --workers 1 2 --rounds 6
    python examples/bench/coref_distributed.py --scheduler tcp://host:8786 --workers 4 8 16   # a bigger cluster
    python examples/bench/coref_distributed.py --mentions 1000000 --workers 1 8 14 --sharded  # shards on workers
    python examples/bench/coref_distributed.py --mentions 100000 --workers 1 8 --sharded --linked  # one component
    python examples/bench/coref_distributed.py --sharded --ship --scheduler tcp://host:8786     # shards sent to them

``--linked`` joins consecutive name blocks by one weak pair each (score -1), so all mentions form
one connected component of candidate pairs (loose blocking): the sharded rounds then split it
over the shards and exchange entities across the cut pairs between rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

from pdbq.coref.metrics import b_cubed, pairwise
from pdbq.coref.personx import person_x
from pdbq.distributed import DistributedConfig, resolve_distributed
from pdbq.distributed.shards import resolve_sharded, write_pairs
from pdbq.inference.coreference.resolve import CorefConfig, resolve_map


def _rss_mib() -> float:
    import psutil

    return psutil.Process(os.getpid()).memory_info().rss / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mentions", type=int, nargs="+", default=[100_000])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--sweeps", type=float, default=12.0, help="total proposals = sweeps x mentions")
    ap.add_argument("--redistribution", default="super", choices=["super", "random"])
    ap.add_argument("--hierarchy", action="store_true")
    ap.add_argument("--scheduler", default=None, help="address of an existing Dask scheduler")
    ap.add_argument("--threads", action="store_true", help="in-process cluster (threads) instead of processes")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip-flat", action="store_true")
    ap.add_argument("--sharded", action="store_true",
                    help="shards of name blocks built by the workers from Parquet files (resolve_sharded)")
    ap.add_argument("--linked", action="store_true",
                    help="join consecutive name blocks by a weak pair: one component, split over the shards")
    ap.add_argument("--ship", action="store_true",
                    help="with --sharded: this process sends each shard's rows to its worker (a cluster that cannot "
                         "read the files) instead of the workers reading them")
    args = ap.parse_args()
    import distributed

    for n in args.mentions:
        t = time.perf_counter()
        data = person_x(n, seed=args.seed)
        g = _linked(data.graph, data.name) if args.linked else data.graph
        print(f"\n## {n:,} mentions, {g.n_pairs:,} candidate pairs, {np.unique(data.truth).size:,} true entities "
              f"(made in {time.perf_counter() - t:.1f} s); pair graph {g.nbytes() / n:.0f} bytes/mention")
        total = int(args.sweeps * n)
        # linked: one block for all (the plan splits the one group of linked blocks by itself)
        block = np.zeros(n, np.int64) if args.linked else data.name
        source = write_pairs(tempfile.mkdtemp(prefix="pdbq-shards-"), g, block) if args.sharded else None
        greedy = 2
        if not args.skip_flat:
            t = time.perf_counter()
            flat = resolve_map(g, CorefConfig(sweeps=max(1, int(args.sweeps)), chains=1, greedy_sweeps=greedy, seed=args.seed))
            print(f"single-process resolve_map ({int(args.sweeps)} sweeps): B3 F1 {b_cubed(flat.labels, data.truth).f1:.4f}, "
                  f"{time.perf_counter() - t:.1f} s")
        print("| workers | wall s | speed-up | B3 F1 | pairwise F1 | round s (median) | slowest partition s | overhead % | "
              "efficiency | worker RSS MiB | graph MiB per worker | client MiB/round |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        base = None
        for w in args.workers:
            cfg = DistributedConfig(workers=w, rounds=args.rounds, greedy_rounds=greedy,
                                    steps_per_round=max(1, total // (args.rounds + greedy) // w),
                                    redistribution=args.redistribution, hierarchy=args.hierarchy, seed=args.seed)
            if args.scheduler:
                client, cluster = distributed.Client(args.scheduler), None
            else:
                cluster = distributed.LocalCluster(n_workers=w, threads_per_worker=1, processes=not args.threads,
                                                   dashboard_address=":0", silence_logs=50)
                client = distributed.Client(cluster)
            try:
                # warm-up on a small graph: numba loads its cache on every worker (the data's own
                # graph would stay in the workers' memory and in their RSS below)
                resolve_distributed(person_x(600, seed=1).graph,
                                    DistributedConfig(workers=w, rounds=1, greedy_rounds=0, steps_per_round=10), client=client)
                t = time.perf_counter()
                res = (resolve_sharded(source, cfg, client=client, ship=args.ship) if args.sharded
                       else resolve_distributed(g, cfg, client=client))
                wall = time.perf_counter() - t
                if args.sharded and args.ship:
                    print(f"<!-- {w} worker(s): {res.shipped / 2**20:.1f} MiB of shard rows shipped, once -->")
                rss = client.run(_rss_mib)
            finally:
                client.close()
                if cluster is not None:
                    cluster.close()
            # what a worker holds: the whole pair graph (dealt rounds), or its largest shard's
            held = (int((24 * res.plan.pairs + 8 * res.plan.mentions).max()) if args.sharded else g.nbytes())
            base = base or wall
            rounds = res.rounds
            over = sum(r.overhead for r in rounds) / sum(r.wall + getattr(r, "redistribute", 0.0) for r in rounds)
            print(f"| {w} | {wall:.1f} | {base / wall:.2f}x | {b_cubed(res.labels, data.truth).f1:.4f} | "
                  f"{pairwise(res.labels, data.truth).f1:.4f} | {statistics.median(r.wall for r in rounds):.2f} | "
                  f"{statistics.median(r.compute_max for r in rounds):.2f} | {100 * over:.1f} | {res.efficiency():.2f} | "
                  f"{max(rss.values()):.0f} | {held / 2**20:.0f} | "
                  f"{statistics.median((r.bytes_sent + getattr(r, 'bytes_received', 0)) / 2**20 for r in rounds):.3f} |")
            if args.sharded and res.plan.cut_pairs:
                print(f"|   | cut pairs {res.plan.cut_pairs:,} of {g.n_pairs:,}; mentions moved per round (median) "
                      f"{statistics.median(r.moved for r in rounds):,.0f}; MiB moved worker to worker per round "
                      f"{statistics.median(r.bytes_moved for r in rounds) / 2**20:.3f}; boundary MiB per round "
                      f"{statistics.median(r.bytes_boundary for r in rounds) / 2**20:.3f} |")


def _linked(g, name: np.ndarray):
    """``g`` with a weak pair (score -1) from the last mention of each name block to the first of
    the next (mentions are sorted by name), so that all of them form one component."""
    from pdbq.coref.layout import pair_graph

    n = g.indptr.shape[0] - 1
    src = np.repeat(np.arange(n), np.diff(g.indptr))
    keep = src < g.nbr
    first = np.searchsorted(name, np.unique(name))
    a = np.concatenate([src[keep], first[1:] - 1])
    b = np.concatenate([g.nbr[keep].astype(np.int64), first[1:]])
    return pair_graph(n, a, b, np.concatenate([g.score[keep], np.full(first.size - 1, -1.0)]))


if __name__ == "__main__":
    main()
