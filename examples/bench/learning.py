"""Weight learning benchmarks (numbers recorded in docs/learning.md).

1. accuracy: pair-unit models sampled from known weights (`pdbq.learning.synthetic`); learned
   weights against the truth in units of the exact standard error, over several seeds, and the
   reported standard errors against the exact ones.
2. calibration: LEARN WEIGHTS ... WITH (holdout = 0.25) through SQL on a known-weights model:
   expected calibration error, accuracy and log-loss on the holdout.
3. speed: SGD epochs per second on a 1M-factor model, pdbq next to numbskull 0.1.1's learner
   (`FactorGraph.learn`, DeepDive's Hogwild SGD) in the same run, plus the weights each learned.

Run: python examples/bench/learning.py [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

import pdbq
from pdbq.graph.layout import FactorGraph
from pdbq.graph.builder import csr_from_edges
from pdbq.language.nodes import FactorFunction
from pdbq.learning import LearnConfig, learn_sgd
from pdbq.learning.synthetic import pair_mle, pair_units

TRUE = (0.8, -0.5, 1.2)


def pair_graph(a: np.ndarray, b: np.ndarray, init: float = 0.0) -> FactorGraph:
    """Units i: variables 2i (a), 2i+1 (b); factors ISTRUE(a), ISTRUE(b), EQUAL(a, b) per unit,
    built with numpy (GraphBuilder's per-factor Python calls are too slow for 1M factors)."""
    n = a.shape[0]
    nv, nf = 2 * n, 3 * n
    u = np.arange(n, dtype=np.int64)
    arity = np.tile(np.array([1, 1, 2]), n)
    factor_offsets = np.zeros(nf + 1, np.int64)
    np.cumsum(arity, out=factor_offsets[1:])
    factor_vars = np.stack([2 * u, 2 * u + 1, 2 * u, 2 * u + 1], axis=1).ravel().astype(np.int32)
    function = np.tile(np.array([FactorFunction.ISTRUE, FactorFunction.ISTRUE, FactorFunction.EQUAL], np.int8), n)
    weight = np.tile(np.array([0, 1, 2], np.int32), n)
    group = np.full(nf, -1, np.int32)
    var_offsets, var_factors = csr_from_edges(factor_offsets, factor_vars.astype(np.int64), group, nv)
    evidence = np.stack([a, b], axis=1).ravel().astype(np.int32)
    return FactorGraph(
        cardinality=np.full(nv, 2, np.int32), evidence=evidence, var_offsets=var_offsets,
        var_factors=var_factors.astype(np.int32), function=function, weight=weight, group=group,
        factor_offsets=factor_offsets, factor_vars=factor_vars,
        factor_literals=np.full(factor_vars.shape[0], -1, np.int32), table_offset=np.full(nf, -1, np.int64),
        tables=np.zeros(0), weights=np.full(3, init), learnable=np.ones(3, np.bool_),
        semantics=np.zeros(0, np.int8), group_weight=np.zeros(0, np.int32),
    )


def accuracy(seeds: int, n: int) -> None:
    print(f"## accuracy: pair units, n = {n}, true weights {TRUE}, defaults except reg = 0")
    print(f"{'seed':>4} {'z (learned - true)/se':>30} {'z (learned - MLE)/se':>28} {'stderr/exact':>22} {'s':>6}")
    within = 0
    total = 0
    for s in range(seeds):
        d = pair_units(n, TRUE, seed=100 + s)
        g = pair_graph(d.a, d.b)
        t = time.perf_counter()
        r = learn_sgd(g, LearnConfig(reg=0.0, seed=s))
        dt = time.perf_counter() - t
        z = (r.weights - d.weights) / d.stderr
        zm = (r.weights - pair_mle(d.a, d.b)) / d.stderr
        within += int(np.sum(np.abs(z) < 2))
        total += 3
        fmt = lambda v: " ".join(f"{x:+6.2f}" for x in v)  # noqa: E731
        print(f"{s:>4} {fmt(z):>30} {fmt(zm):>28} {fmt(r.stderr / d.stderr):>22} {dt:6.2f}")
    print(f"weights within 2 exact standard errors of the truth: {within}/{total}\n")


def calibration(n: int) -> None:
    d = pair_units(n, TRUE, seed=7)
    with pdbq.connect() as db:
        db.duckdb.register("src", pa.table({"id": np.arange(n), "a": d.a.astype(bool), "b": d.b.astype(bool)}))
        db.execute("CREATE TABLE units AS SELECT * FROM src")
        db.execute(
            """
            CREATE VARIABLE a(id INT) DOMAIN BOOLEAN FROM (SELECT id FROM units) EVIDENCE (SELECT id, a FROM units);
            CREATE VARIABLE b(id INT) DOMAIN BOOLEAN FROM (SELECT id FROM units) EVIDENCE (SELECT id, b FROM units);
            CREATE RULE pa WEIGHT ? FUNCTION ISTRUE AS a(i) :- units(i, _, _);
            CREATE RULE pb WEIGHT ? FUNCTION ISTRUE AS b(i) :- units(i, _, _);
            CREATE RULE eq WEIGHT ? FUNCTION EQUAL AS a(i) = b(i) :- units(i, _, _);
            """
        )
        t = time.perf_counter()
        r = db.execute("LEARN WEIGHTS WITH (holdout = 0.25, seed = 1)")
        dt = time.perf_counter() - t
        row = dict(zip(r.columns, r.fetchall()[0]))
        print(f"## calibration: pair units, n = {n}, LEARN WEIGHTS WITH (holdout = 0.25), DeepDive defaults")
        print(f"holdout variables {row['holdout']}, accuracy {row['accuracy']:.4f}, log-loss {row['log_loss']:.4f}, "
              f"ECE {row['ece']:.4f}, statement {dt:.1f} s (grounding, learning, evaluation)")
        for b in db.execute("SHOW CALIBRATION").fetchall():
            mp = "-" if b[6] is None else f"{b[6]:.3f}"
            of = "-" if b[7] is None else f"{b[7]:.3f}"
            print(f"  [{b[1]:.1f}, {b[2]:.1f})  predicted {b[3]:>6}  true {b[4]:>6}  false {b[5]:>6}  mean p {mp:>6}  observed {of:>6}")
        print()


def numbskull_learner(g: FactorGraph, threads: int):
    import numbskull
    from numbskull.numbskulltypes import Factor, FactorToVar, Variable, Weight

    weight = np.zeros(g.weights.shape[0], Weight)
    weight["isFixed"] = False
    weight["initialValue"] = g.weights
    variable = np.zeros(g.n_vars, Variable)
    variable["isEvidence"] = 1
    variable["initialValue"] = g.evidence
    variable["cardinality"] = 2
    factor = np.zeros(g.n_factors, Factor)
    factor["factorFunction"] = g.function
    factor["weightId"] = g.weight
    factor["featureValue"] = 1.0
    factor["arity"] = np.diff(g.factor_offsets)
    factor["ftv_offset"] = g.factor_offsets[:-1]
    fmap = np.zeros(g.n_edges, FactorToVar)
    fmap["vid"] = g.factor_vars
    ns = numbskull.NumbSkull(n_learning_epoch=1, nthreads=threads, quiet=True)
    ns.loadFactorGraph(weight, variable, factor, fmap, np.zeros(g.n_vars, dtype=bool), int(g.n_edges))
    return ns.factorGraphs[0]


def speed(n_units: int, epochs: int, full_epochs: int = 0, ns_epochs: int = 0) -> None:
    d = pair_units(n_units, TRUE, seed=11)
    g = pair_graph(d.a, d.b)
    print(f"## speed: pair units, {g.n_factors:,} factors, {g.n_vars:,} variables (all evidence), {epochs} epochs")
    print(f"{'learner':<28}{'threads':>8}{'epochs/s':>10}{'speed-up':>10}   learned weights (true {TRUE})")
    learn_sgd(pair_graph(d.a[:10], d.b[:10]), LearnConfig(epochs=2))  # compile
    for threads in (1, 2):
        # epochs/s from the median epoch time (set-up excluded; robust on a shared machine)
        stamps: list[float] = []
        r = learn_sgd(g, LearnConfig(epochs=epochs, threads=threads, seed=1, reg=0.0),
                      on_epoch=lambda info: stamps.append(info.elapsed))
        rate = 1.0 / float(np.median(np.diff(stamps)))
        ns_rate = None
        ns_w = None
        try:
            fg = numbskull_learner(g, threads)
            fg.learn(0, 1, 0.01, 0.95, 2, 0.01, 10)  # compile
            fg = numbskull_learner(g, threads)
            times = []
            for _ in range(epochs):  # one learn() call per epoch, step size decayed as learn() does
                t = time.perf_counter()
                fg.learn(0, 1, 0.01 * 0.95 ** len(times), 1.0, 2, 0.0, 10)
                times.append(time.perf_counter() - t)
            ns_rate = 1.0 / float(np.median(times))
            ns_w = fg.weight_value[0].copy()
        except ImportError:
            pass
        fmt = lambda v: " ".join(f"{x:+.3f}" for x in v)  # noqa: E731
        su = f"{rate / ns_rate:9.1f}x" if ns_rate else f"{'-':>10}"
        print(f"{'pdbq SGD':<28}{threads:>8}{rate:10.2f}{su}   {fmt(r.weights)}")
        if ns_rate:
            print(f"{'numbskull 0.1.1 learn':<28}{threads:>8}{ns_rate:10.2f}{'1.0x':>10}   {fmt(ns_w)}")
    print()
    if full_epochs:
        mle = pair_mle(d.a, d.b)
        print(f"to accuracy (2 threads; exact MLE {fmt3(mle)}, exact stderr {d.stderr[0]:.4f}):")
        t = time.perf_counter()
        r = learn_sgd(g, LearnConfig(epochs=full_epochs, threads=2, seed=1, reg=0.0))
        dt = time.perf_counter() - t
        print(f"  pdbq SGD, {full_epochs} epochs: {dt:6.1f} s (set-up included)  z vs MLE {fmt3((r.weights - mle) / d.stderr)}")
        try:
            fg = numbskull_learner(g, 2)
            t = time.perf_counter()
            fg.learn(0, ns_epochs, 0.01, 0.95, 2, 0.0, 10)
            dt = time.perf_counter() - t
            w = fg.weight_value[0]
            print(f"  numbskull, {ns_epochs} epochs: {dt:6.1f} s                  z vs MLE {fmt3((w - mle) / d.stderr)}")
        except ImportError:
            pass
        print()


def fmt3(v) -> str:
    return " ".join(f"{x:+8.2f}" for x in v)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller runs (a smoke test)")
    args = ap.parse_args()
    accuracy(seeds=3 if args.quick else 10, n=3000)
    calibration(n=2000 if args.quick else 20000)
    speed(n_units=20_000 if args.quick else 333_334, epochs=4 if args.quick else 10,
          full_epochs=10 if args.quick else 100, ns_epochs=4 if args.quick else 30)


if __name__ == "__main__":
    main()
