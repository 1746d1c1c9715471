"""Gibbs throughput on three boolean graphs, pdbq next to numbskull 0.1.1 (same graphs, same run).

    python examples/bench/gibbs.py [--quick]

Graphs (issue 4): Ising 300×300 (pairwise EQUAL w=0.3, unary ISTRUE w=0.05); voting (one query
variable, 10,000 true and 10,000 false voters linked by EQUAL w=±0.02, ISTRUE priors 0.5 on the
voters, voters' values free); a chain of 1,000,000 (EQUAL w=0.3 + ISTRUE w=0.05).

Reported per graph and thread count: samples/s per core (single-variable updates per second
divided by threads) and factor visits/s (updates × mean factors per updated variable). pdbq runs
through `run_gibbs` (systematic sweeps, one chain per thread, Rao-Blackwellised estimates for
one target); its rate is the difference of a 2·k-sweep and a k-sweep run, so the once-per-graph
preparation (reported separately) and set-up cancel out, as does the first-call (compile or
cache-load) time, reported on its own line. numbskull runs its `FactorGraph.inference` epochs
(one epoch = one sweep); if numbskull is not installed only pdbq's numbers are printed.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from pdbq.graph.builder import csr_from_edges
from pdbq.graph.layout import NO_TABLE, FactorGraph, validate
from pdbq.inference.mcmc.config import GibbsConfig
from pdbq.inference.mcmc.gibbs import run_gibbs
from pdbq.inference.mcmc.kernels import prepare_kernel_graph
from pdbq.language.nodes import FactorFunction as F


def pairwise_graph(n: int, pairs: np.ndarray, pair_w: np.ndarray, unary_vars: np.ndarray, unary_w: np.ndarray) -> FactorGraph:
    """EQUAL over each row of ``pairs`` (weight pair_w[i]) and ISTRUE on each unary var."""
    n_pair, n_un = pairs.shape[0], unary_vars.shape[0]
    weights = np.concatenate([pair_w, unary_w]).astype(np.float64)
    function = np.concatenate([np.full(n_pair, F.EQUAL, np.int8), np.full(n_un, F.ISTRUE, np.int8)])
    arity = np.concatenate([np.full(n_pair, 2), np.full(n_un, 1)])
    factor_offsets = np.zeros(n_pair + n_un + 1, dtype=np.int64)
    np.cumsum(arity, out=factor_offsets[1:])
    factor_vars = np.concatenate([pairs.ravel(), unary_vars]).astype(np.int32)
    nf = n_pair + n_un
    group = np.full(nf, -1, dtype=np.int32)
    var_offsets, var_factors = csr_from_edges(factor_offsets, factor_vars, group, n)
    lits = np.concatenate([np.full(2 * n_pair, -1), np.full(n_un, 1)]).astype(np.int32)
    return validate(
        FactorGraph(
            cardinality=np.full(n, 2, np.int32),
            evidence=np.full(n, -1, np.int32),
            var_offsets=var_offsets,
            var_factors=var_factors,
            function=function,
            weight=np.arange(nf, dtype=np.int32),
            group=group,
            factor_offsets=factor_offsets,
            factor_vars=factor_vars,
            factor_literals=lits,
            table_offset=np.full(nf, NO_TABLE, np.int64),
            tables=np.zeros(0),
            weights=weights,
            learnable=np.zeros(nf, dtype=bool),
            semantics=np.zeros(0, np.int8),
            group_weight=np.zeros(0, np.int32),
        )
    )


def ising(side: int = 300) -> FactorGraph:
    idx = np.arange(side * side).reshape(side, side)
    pairs = np.concatenate([np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1), np.stack([idx[:-1].ravel(), idx[1:].ravel()], 1)])
    n = side * side
    return pairwise_graph(n, pairs, np.full(len(pairs), 0.3), np.arange(n), np.full(n, 0.05))


def voting(voters: int = 10_000) -> FactorGraph:
    n = 1 + 2 * voters
    pairs = np.stack([np.arange(1, n), np.zeros(n - 1, dtype=np.int64)], 1)  # voter, query
    w = np.concatenate([np.full(voters, 0.02), np.full(voters, -0.02)])
    return pairwise_graph(n, pairs, w, np.arange(1, n), np.full(n - 1, 0.5))


def chain(n: int = 1_000_000) -> FactorGraph:
    pairs = np.stack([np.arange(n - 1), np.arange(1, n)], 1)
    return pairwise_graph(n, pairs, np.full(n - 1, 0.3), np.arange(n), np.full(n, 0.05))


# ---------------------------------------------------------------------------------------------


def bench_pdbq(g: FactorGraph, sweeps: int, threads: int) -> tuple[float, float]:
    """(samples/s per core, prepare seconds): one chain per thread. The rate is taken from the
    difference between runs of 2·sweeps and sweeps, so set-up costs cancel out."""
    t = time.perf_counter()
    prepare_kernel_graph(g)
    prep = time.perf_counter() - t

    def run(k: int) -> float:
        cfg = GibbsConfig(steps=k * g.n_vars, burn_in=0, chains=threads, threads=threads, seed=1)
        return run_gibbs(g, [0], cfg).seconds

    dt = run(2 * sweeps) - run(sweeps)
    return sweeps * g.n_vars / max(dt, 1e-9), prep


def numbskull_graph(g: FactorGraph):
    from numbskull.numbskulltypes import Factor, FactorToVar, Variable, Weight

    weight = np.zeros(g.weights.shape[0], Weight)
    weight["isFixed"] = True
    weight["initialValue"] = g.weights
    variable = np.zeros(g.n_vars, Variable)
    variable["cardinality"] = 2
    factor = np.zeros(g.n_factors, Factor)
    factor["factorFunction"] = g.function
    factor["weightId"] = g.weight
    factor["featureValue"] = 1.0
    factor["arity"] = np.diff(g.factor_offsets)
    factor["ftv_offset"] = g.factor_offsets[:-1]
    fmap = np.zeros(g.n_edges, FactorToVar)
    fmap["vid"] = g.factor_vars
    fmap["dense_equal_to"] = 0
    return weight, variable, factor, fmap


def bench_numbskull(g: FactorGraph, sweeps: int, threads: int) -> float | None:
    try:
        import numbskull
    except ImportError:
        return None
    weight, variable, factor, fmap = numbskull_graph(g)
    ns = numbskull.NumbSkull(n_inference_epoch=sweeps, nthreads=threads, quiet=True)
    ns.loadFactorGraph(weight, variable, factor, fmap, np.zeros(g.n_vars, dtype=bool), int(g.n_edges))
    fg = ns.factorGraphs[0]
    fg.inference(0, 1, diagnostics=False)  # compile
    t = time.perf_counter()
    fg.inference(0, sweeps, diagnostics=False)
    dt = time.perf_counter() - t
    return sweeps * g.n_vars / dt / threads


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer sweeps (a smoke run)")
    args = ap.parse_args()
    t = time.perf_counter()
    tiny = ising(4)
    run_gibbs(tiny, [0], GibbsConfig(steps=100, chains=1, threads=1))
    run_gibbs(tiny, [0], GibbsConfig(steps=100, chains=2, threads=2))
    first = time.perf_counter() - t
    cache = os.environ.get("NUMBA_CACHE_DIR", "__pycache__ next to the modules")
    print(f"first call (numba compile, or load from cache at {cache}): {first:.2f} s\n")
    graphs = [("Ising 300x300", ising(), 40), ("voting 2x10k", voting(), 400), ("chain 1M", chain(), 8)]
    if args.quick:
        graphs = [(n, g, max(1, s // 8)) for n, g, s in graphs]
    print(f"{'graph':<15}{'threads':>8}{'pdbq M/s/core':>15}{'visits M/s':>12}{'numbskull M/s/core':>20}{'speed-up':>10}{'prepare s':>11}")
    for name, g, sweeps in graphs:
        visits_per_update = float(np.mean(np.diff(g.var_offsets)))
        for threads in (1, 2):
            rate, prep = bench_pdbq(g, sweeps, threads)
            nsr = bench_numbskull(g, max(1, sweeps // 10), threads)
            ns_txt = f"{nsr / 1e6:20.2f}" if nsr else f"{'not installed':>20}"
            su = f"{rate / nsr:9.1f}x" if nsr else f"{'-':>10}"
            print(
                f"{name:<15}{threads:>8}{rate / 1e6:15.2f}{rate * threads * visits_per_update / 1e6:12.1f}{ns_txt}{su}{prep:11.2f}"
            )


if __name__ == "__main__":
    main()
