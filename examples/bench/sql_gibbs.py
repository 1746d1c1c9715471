"""All marginals of an Ising grid through SQL against the reference kernel, in one process.

    python examples/bench/sql_gibbs.py [--side 300] [--sweeps 200] [--repeats 3]

The model is defined in pdbq SQL (a cell table, a neighbour table, an EQUAL
rule of weight 0.3 and an ISTRUE rule of weight 0.05) and asked

    SELECT avg(PROB(v)) FROM x AS v USING GIBBS WITH (sweeps = N, chains = 1, threads = 1, seed = s)

Rates are single-variable updates per second of the *whole* warm SQL query (planning from the
query-graph cache, burn-in, sampling with Rao-Blackwellised estimates for every variable, the
final SQL): (N + N/10 burn-in) · side² / seconds. The reference is the hand-tuned numba kernel in
the shared bench folder (examples/shared_data.py: `minikernel.CSRGraph` on `graphs.ising(side, 0.3, 0.05)`, one thread, counting
every variable's value: its own estimates), timed with the same sweeps in the same process; the
table reports medians and the ratio pdbq ÷ reference. Also reported: the bare `run_gibbs` on the
query's graph (no SQL) and the phases of the SQL query.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

import pdbq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from shared_data import bench_root  # noqa: E402


def reference():
    for d in (str(bench_root()),):
        if os.path.isdir(d):
            sys.path.insert(0, os.path.abspath(d))
            try:
                import graphs  # noqa: PLC0415
                import minikernel  # noqa: PLC0415

                return graphs, minikernel
            except ImportError:
                sys.path.pop(0)
    return None, None


MODEL = """
CREATE TABLE cells AS SELECT i FROM range({n}) r(i);
CREATE TABLE nbr AS
    SELECT i AS a, i + 1 AS b FROM range({n}) r(i) WHERE i % {side} < {side} - 1
    UNION ALL SELECT i AS a, i + {side} AS b FROM range({n}) r(i) WHERE i < {n} - {side};
CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM cells);
CREATE RULE link WEIGHT 0.3 FUNCTION EQUAL AS x(a) = x(b) :- nbr(a, b);
CREATE RULE field WEIGHT 0.05 FUNCTION ISTRUE AS x(i) :- cells(i);
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", type=int, default=300)
    ap.add_argument("--sweeps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    side, sweeps = args.side, args.sweeps
    n = side * side
    db = pdbq.connect()
    db.execute(MODEL.format(n=n, side=side))
    q = f"SELECT avg(PROB(v)) AS p FROM x AS v USING GIBBS WITH (sweeps = {sweeps}, chains = 1, threads = 1, seed = 1)"
    t = time.perf_counter()
    first = db.execute(q)
    cold = time.perf_counter() - t
    updates = (sweeps + sweeps // 10) * n  # sweeps plus the default burn-in of a fixed run (steps/10)

    graphs, mk = reference()
    ref = None
    if mk is not None:
        ref = mk.CSRGraph(graphs.ising(side, 0.3, 0.05), graphs.var_csr)
        ref.run(1, 1)  # compile

    from pdbq.inference.mcmc.config import GibbsConfig  # noqa: PLC0415
    from pdbq.inference.mcmc.gibbs import run_gibbs  # noqa: PLC0415

    from pdbq.api import query_graph  # noqa: PLC0415

    g = query_graph(db, q)
    targets = np.arange(g.n_vars)
    sql_t, ref_t, bare_t = [], [], []
    diag = None
    for _ in range(args.repeats):
        t = time.perf_counter()
        r = db.execute(q)
        sql_t.append(time.perf_counter() - t)
        diag = r.diagnostics
        t = time.perf_counter()
        run_gibbs(g, targets, GibbsConfig(steps=sweeps * n, chains=1, threads=1, seed=1))
        bare_t.append(time.perf_counter() - t)
        if ref is not None:
            t = time.perf_counter()
            ref.run(sweeps + sweeps // 10, 1)
            ref_t.append(time.perf_counter() - t)
    sql_rate = updates / statistics.median(sql_t)
    bare_rate = updates / statistics.median(bare_t)
    print(f"Ising {side}x{side} ({n:,} variables), {sweeps} sweeps + {sweeps // 10} burn-in, chains = 1, threads = 1; "
          f"medians of {args.repeats}")
    print(f"first (cold) SQL query: {cold:.2f} s; answer {first.fetchall()[0][0]:.4f}")
    print(f"warm SQL: grounding {diag['grounding_seconds']:.3f} s, inference {diag['inference_seconds']:.3f} s, "
          f"total {statistics.median(sql_t):.3f} s")
    print("| path | M updates/s | ratio to reference |")
    print("|---|---|---|")
    ref_rate = updates / statistics.median(ref_t) if ref_t else None
    for name, rate in (("SQL query (whole, warm)", sql_rate), ("run_gibbs on the query's graph", bare_rate)):
        ratio = f"{rate / ref_rate:.2f}" if ref_rate else "n/a"
        print(f"| {name} | {rate / 1e6:.1f} | {ratio} |")
    if ref_rate:
        print(f"| reference kernel (shared/bench minikernel, CSR) | {ref_rate / 1e6:.1f} | 1.00 |")
    else:
        print("reference kernel not found (set PDBQ_REF_BENCH to the shared/bench folder)")


if __name__ == "__main__":
    main()
