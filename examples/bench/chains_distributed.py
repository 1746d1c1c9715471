"""Chains of a marginal query on Dask workers vs one process, at equal total updates.

A side×side Ising grid (pairwise EQUAL w=0.3, unary ISTRUE w=0.05; side 1000 = 1M variables),
`targets` query variables spread over the grid. For each worker count W the run makes the same
total number of single-variable updates: W chains (one per worker) of total/W updates each, on
a Dask cluster of W single-threaded workers (`pdbq.distributed.run_chains`); the baseline is one
chain of `total` updates in this process on one thread (`run_gibbs`). Printed per W: wall time,
the rate (updates/s, burn-in included), speed-up over the baseline, the slowest group's compute,
overhead (wall beyond the slowest group plus shipping the graph), cluster start, bytes shipped
and gathered, worker RSS, and how the pooled answer compares with an in-process run of the
same chains (the same seed: single-site chains must agree bit for bit).

    python examples/bench/chains_distributed.py --side 300 --workers 1 2              # 2 cores
    python examples/bench/chains_distributed.py --side 1000 --workers 1 8 14 --sweeps 16 # 16 cores
    python examples/bench/chains_distributed.py --scheduler tcp://host:8786 --workers 8 16

With ``--tolerance T`` (and ``--time-limit S``) the runs are budget-governed instead: W chains
stop when the pooled 95% half-width of every target is at most T (or at S seconds), on Dask the
groups kept on their workers and run segment by segment (`pdbq.distributed.chain_rounds`). The
table then adds the segments, the updates per chain at the stop and what stopped the run, and the
check compares with the in-process run of the same chains and budget (a tolerance stop: bit for
bit; a time stop: within the standard errors).

    python examples/bench/chains_distributed.py --side 100 --workers 1 2 --tolerance 0.02 --time-limit 30

With ``--tempering K`` every chain runs K tempered copies; the ladder adapts from all groups
between burn-in rounds (one segment per burn-in round), so the pooled answer is again the
in-process one, bit for bit; the row ends with the number of segments.

    python examples/bench/chains_distributed.py --side 100 --workers 1 2 --tempering 4
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gibbs import ising  # noqa: E402 - the sibling benchmark's graph

from pdbq.distributed import run_chains  # noqa: E402
from pdbq.inference.mcmc.config import GibbsConfig  # noqa: E402
from pdbq.inference.mcmc.gibbs import run_gibbs  # noqa: E402
from pdbq.inference.mcmc.config import MixingConfig  # noqa: E402
from pdbq.inference.mcmc.kernels import prepare_kernel_graph  # noqa: E402
from pdbq.inference.moves.mixing import run_mixing  # noqa: E402


def _rss_mib() -> float:
    import psutil

    return psutil.Process(os.getpid()).memory_info().rss / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--side", type=int, default=300, help="grid side (variables = side²)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--sweeps", type=float, default=8.0, help="total updates = sweeps x variables (all chains)")
    ap.add_argument("--targets", type=int, default=100)
    ap.add_argument("--threads", action="store_true", help="in-process cluster (threads) instead of processes")
    ap.add_argument("--scheduler", default=None)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-check", action="store_true", help="skip the in-process run of the same chains")
    ap.add_argument("--tolerance", type=float, default=None, help="budget-governed: stop at this 95%% half-width")
    ap.add_argument("--time-limit", type=float, default=None, help="budget-governed: stop after this many seconds")
    ap.add_argument("--tempering", type=int, default=1,
                    help="replica exchange with this many copies per chain (the ladder adapted from all groups)")
    args = ap.parse_args()
    import distributed

    t = time.perf_counter()
    g = ising(args.side)
    n = g.n_vars
    targets = np.linspace(0, n - 1, args.targets).astype(np.int64)
    sites = np.arange(n, dtype=np.int32)
    total = int(args.sweeps * n)
    print(f"## Ising {args.side}x{args.side}: {n:,} variables, {g.nbytes() / 2**20:.1f} MiB graph, {total:,} updates in all "
          f"(made in {time.perf_counter() - t:.1f} s); {os.cpu_count()} cores")
    kg = prepare_kernel_graph(g)
    warm = GibbsConfig(steps=1_000, chains=1, threads=1, seed=0)
    run_gibbs(g, targets, warm, sites=sites, kernel=kg)  # compile or load the kernels here
    t = time.perf_counter()
    base = run_gibbs(g, targets, GibbsConfig(steps=total, chains=1, threads=1, seed=args.seed), sites=sites, kernel=kg)
    base_wall = time.perf_counter() - t
    rate0 = total * 1.1 / base_wall  # steps/10 of burn-in on top
    print(f"one process, one chain, one thread: {base_wall:.2f} s, {rate0 / 1e6:.1f} M updates/s\n")
    budget = args.tolerance is not None or args.time_limit is not None
    mixing = MixingConfig(tempering=args.tempering).check() if args.tempering > 1 else None
    print("| workers | chains | wall s | M updates/s | speed-up | slowest group s | overhead s | cluster start s | "
          "MiB shipped | KiB gathered | worker RSS MiB | pooled = in-process |" + (" segments | updates/chain | stopped by |" if budget else ""))
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|" + ("---:|---:|---|" if budget else ""))
    for w in args.workers:
        cfg = GibbsConfig(steps=max(1, total // w), chains=w, threads=1, seed=args.seed)
        if budget:
            cfg = GibbsConfig(chains=max(w, 2), threads=1, seed=args.seed, tolerance=args.tolerance,
                              time_limit=args.time_limit)
        t = time.perf_counter()
        if args.scheduler:
            client, cluster = distributed.Client(args.scheduler), None
        else:
            cluster = distributed.LocalCluster(n_workers=w, threads_per_worker=1, processes=not args.threads,
                                               dashboard_address=":0", silence_logs=50)
            client = distributed.Client(cluster)
        start = time.perf_counter() - t
        try:
            small = ising(8)
            run_chains(small, np.array([0]), GibbsConfig(steps=100, chains=w, threads=1), workers=w,
                       sites=np.arange(small.n_vars, dtype=np.int32), client=client)  # numba loads on every worker
            t = time.perf_counter()
            pooled, _, run = run_chains(g, targets, cfg, workers=w, sites=sites, kernel=kg, client=client, mixing=mixing)
            wall = time.perf_counter() - t
            rss = client.run(_rss_mib)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
        same = "not checked"
        if not args.no_check:
            ref = (run_mixing(g, targets, cfg, mixing, sites=sites, kernel=kg) if mixing is not None
                   else run_gibbs(g, targets, cfg, sites=sites, kernel=kg))
            diff = float(np.nanmax(np.abs(ref.marginals - pooled.marginals)))
            same = "yes" if diff == 0.0 else f"max diff {diff:.2g}"
            if budget and diff:
                z = diff / float(np.nanmax(np.hypot(ref.stderr, pooled.stderr)))
                same += f" ({z:.1f} se)"
        updates = (pooled.steps + pooled.burn_in) if budget else cfg.steps * 1.1
        rate = updates * cfg.chains / wall
        print(f"| {w} | {cfg.chains} | {wall:.2f} | {rate / 1e6:.1f} | {rate / rate0:.2f}x | {run.compute_max:.2f} | "
              f"{run.overhead:.2f} | {start:.2f} | {run.bytes_scattered / 2**20:.1f} | {run.bytes_gathered / 2**10:.0f} | "
              f"{max(rss.values()):.0f} | {same} |"
              + (f" {run.rounds} | {pooled.steps + pooled.burn_in:,} | {pooled.batches.stopped_by} |" if budget else "")
              + (f" <!-- {run.rounds} segment(s) -->" if mixing is not None and not budget else ""))


if __name__ == "__main__":
    main()
