"""Query-aware MCMC benchmark (issue 5): one query variable in the middle of a huge model.

Models, defined through pdbq SQL (tables + CREATE VARIABLE + CREATE RULE):

- chain: N binary variables c(0..N-1), EQUAL links with random weights in [0.3, 1.2] and a
  random field h_i ~ N(0, 0.5) (ISTRUE); its exact marginal by forward–backward (numpy, below);
- grid: an S×S Ising-like grid g(r, c) with EQUAL links of weight 0.4 and a random field.

Reported (table on stdout, numbers recorded in docs/benchmarks.md):

1. chain: time for QAM (trail selection) to reach |error| ≤ 0.01 on the middle variable versus
   GIBBS (uniform random scan over the whole chain), in the same run and on the same pruned graph;
   time-to-error is read off each run's running-estimate trace (first point from which the error
   stays ≤ 0.01), with the run's wall time spread evenly over its updates. GIBBS is capped at
   ``--gibbs-seconds``; if it has not reached the error by then the ratio is a lower bound.
2. warm end-to-end latency of the SQL query (grounding cached; the second and later runs), with
   its breakdown (planning and grounding / inference / final SQL).
3. grid: QAM versus GIBBS estimates at the same wall time (no exact answer; spread of the
   estimates shown).

Usage: ``python examples/bench/qam.py [--quick] [--n 1000000] [--side 1000]``
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import pdbq
from pdbq.api.query import plan_query
from pdbq.inference.config import GibbsConfig
from pdbq.inference.gibbs import run_gibbs
from pdbq.inference.selection import SelectionConfig, selection_distribution
from pdbq.language.parser import parse_statement

TOL = 0.01


def chain_model(db, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.3, 1.2, n - 1)
    h = rng.normal(0.0, 0.5, n)
    con = db.duckdb
    import pyarrow as pa

    con.register("chain_nodes_src", pa.table({"i": np.arange(n, dtype=np.int64), "h": h}))
    con.register("chain_edges_src", pa.table({"a": np.arange(n - 1, dtype=np.int64), "b": np.arange(1, n, dtype=np.int64), "w": w}))
    db.execute("""
        CREATE TABLE chain_nodes AS SELECT * FROM chain_nodes_src;
        CREATE TABLE chain_edges AS SELECT * FROM chain_edges_src;
        CREATE VARIABLE c(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM chain_nodes);
        CREATE RULE c_link WEIGHT = w FUNCTION EQUAL AS c(a) = c(b) :- chain_edges(a, b, w);
        CREATE RULE c_field WEIGHT = h FUNCTION ISTRUE AS c(i) :- chain_nodes(i, h);
    """)
    con.unregister("chain_nodes_src")
    con.unregister("chain_edges_src")
    return w, h


def forward_backward(w: np.ndarray, h: np.ndarray, q: int) -> float:
    """Exact P(c_q = TRUE) on the chain (EQUAL = ±1, ISTRUE = ±1), in log space."""
    s = np.array([-1.0, 1.0])
    unary = np.outer(h, s)  # log φ_i(x)
    n = h.shape[0]
    fwd = unary[0].copy()
    for i in range(1, q + 1):
        pair = w[i - 1] * np.where(np.equal.outer([0, 1], [0, 1]), 1.0, -1.0)
        fwd = np.logaddexp.reduce(fwd[:, None] + pair, axis=0) + unary[i]
    bwd = np.zeros(2)
    for i in range(n - 1, q, -1):
        pair = w[i - 1] * np.where(np.equal.outer([0, 1], [0, 1]), 1.0, -1.0)
        bwd = np.logaddexp.reduce(pair + (unary[i] + bwd)[None, :], axis=1)
    logp = fwd + bwd
    logp -= np.logaddexp.reduce(logp)
    return float(np.exp(logp[1]))


def grid_model(db, side: int, seed: int) -> None:
    """Cells keyed by one BIGINT k = r·side + c: the grounding's size estimate for a join on
    two-column keys is far too high (6e9 for 2e6 rows at side 1000) and trips max_groundings."""
    rng = np.random.default_rng(seed)
    import pyarrow as pa

    k = np.arange(side * side, dtype=np.int64)
    db.duckdb.register("grid_src", pa.table({"k": k, "h": rng.normal(0.0, 0.3, side * side)}))
    db.execute(f"""
        CREATE TABLE grid_cells AS SELECT * FROM grid_src;
        CREATE TABLE grid_edges AS
            SELECT k AS a, k + {side} AS b FROM grid_cells WHERE k + {side} < {side * side}
            UNION ALL SELECT k, k + 1 FROM grid_cells WHERE (k + 1) % {side} <> 0;
        CREATE VARIABLE g(k BIGINT) DOMAIN BOOLEAN FROM (SELECT k FROM grid_cells);
        CREATE RULE g_link WEIGHT 0.4 FUNCTION EQUAL AS g(a) = g(b) :- grid_edges(a, b);
        CREATE RULE g_field WEIGHT = h FUNCTION ISTRUE AS g(k) :- grid_cells(k, h);
    """)
    db.duckdb.unregister("grid_src")


def time_to_error(result, exact: float, seconds: float, total_steps: int) -> float | None:
    """Seconds until the running estimate's error is ≤ TOL for good (None: never)."""
    steps = result.trace.steps
    est = result.trace.estimates[:, 0, 1]
    bad = np.flatnonzero(np.abs(est - exact) > TOL)
    if bad.size == 0:
        first = 0
    elif bad[-1] == est.size - 1:
        return None
    else:
        first = bad[-1] + 1
    burn = result.burn_in
    return seconds * (burn + steps[first]) / max(burn + total_steps, 1)


def run_timed(graph, q, config, sel=None):
    t0 = time.perf_counter()
    r = run_gibbs(graph, [q], config, sites=np.flatnonzero(graph.evidence < 0), selection=sel)
    return r, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (chain 10,000, grid 100×100)")
    ap.add_argument("--n", type=int, default=1_000_000, help="chain length")
    ap.add_argument("--side", type=int, default=1000, help="grid side")
    ap.add_argument("--gibbs-seconds", type=float, default=60.0, help="cap on the uniform GIBBS run")
    ap.add_argument("--qam-steps", type=int, default=400_000, help="QAM updates per chain on the chain")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.quick:
        args.n, args.side, args.gibbs_seconds = 10_000, 100, 10.0
    rows: list[tuple[str, str]] = []

    def out(k: str, v: str) -> None:
        rows.append((k, v))
        print(f"{k:<58} {v}", flush=True)

    db = pdbq.connect()
    t = time.perf_counter()
    w, h = chain_model(db, args.n, args.seed)
    q = args.n // 2
    out("chain: variables", f"{args.n:,}")
    out("chain: load tables + definitions (s)", f"{time.perf_counter() - t:.2f}")
    t = time.perf_counter()
    exact = forward_backward(w, h, q)
    out("chain: exact P(c_q) by forward-backward", f"{exact:.6f} ({time.perf_counter() - t:.2f} s)")

    sql = f"SELECT PROB(v) AS p, STDERR(v) AS se FROM c v WHERE v.i = {q} USING QAM WITH (steps = {args.qam_steps}, seed = 3)"
    t = time.perf_counter()
    plan = plan_query(db, parse_statement(sql))
    out("chain: first plan (x_q, evidence, grounding, graph) (s)", f"{time.perf_counter() - t:.2f}")
    c = plan.counts()
    out("chain: |x_q| / |x_l| / pruned", f"{c['query_vars']} / {c['latent_vars']:,} / {c['pruned']:,}")
    graph, local = plan.graph, int(plan.local[0])

    t = time.perf_counter()
    s = selection_distribution(graph, [local], np.flatnonzero(graph.evidence < 0), SelectionConfig())
    sel_seconds = time.perf_counter() - t
    out("chain: QAM selection distribution (trail) (s)", f"{sel_seconds:.2f}")
    out("chain: selection share of the query variable", f"{s.p[np.searchsorted(s.sites, local)]:.4f}")
    from pdbq.inference.kernels import prepare_kernel_graph

    t = time.perf_counter()
    prepare_kernel_graph(graph)
    prep = time.perf_counter() - t
    out("chain: kernel arrays (prepare_kernel_graph, every run) (s)", f"{prep:.2f}")
    cfg = GibbsConfig(steps=args.qam_steps, burn_in=1000, chains=4, seed=3, scan="random", trace_points=400)
    run_timed(graph, local, GibbsConfig(steps=2000, chains=1, seed=1), (s.prob, s.alias))  # compile
    r_qam, sec_qam = run_timed(graph, local, cfg, (s.prob, s.alias))
    t_qam = time_to_error(r_qam, exact, sec_qam, r_qam.steps)
    out("chain: QAM estimate ± stderr", f"{r_qam.marginals[0, 1]:.4f} ± {r_qam.stderr[0, 1]:.4f} "
        f"({r_qam.steps:,} updates/chain, {sec_qam:.2f} s)")
    out("chain: QAM time to |error| ≤ 0.01 (s)", "not reached" if t_qam is None else f"{t_qam:.3f}")
    if t_qam is not None:
        # the same reading with the run's fixed setup (kernel arrays) taken out of the wall time
        t_samp = time_to_error(r_qam, exact, max(sec_qam - prep, 1e-9), r_qam.steps)
        upd = int(round(t_samp / max(sec_qam - prep, 1e-9) * (r_qam.burn_in + r_qam.steps)))
        out("chain: ... sampling only (without kernel arrays) (s)", f"{t_samp:.3f} (~{upd:,} updates/chain incl. burn-in)")
    out("chain: QAM time to |error| ≤ 0.01 incl. selection (s)",
        "not reached" if t_qam is None else f"{t_qam + sel_seconds:.3f}")

    # GIBBS: uniform random scan over the whole chain, capped in time.
    sites = graph.n_vars
    run_timed(graph, local, GibbsConfig(steps=2000, chains=1, seed=1, scan="random"))  # compile
    probe = GibbsConfig(steps=max(sites, 100_000), burn_in=0, chains=4, seed=4, scan="random")
    _, sec_probe = run_timed(graph, local, probe)
    rate = probe.steps / sec_probe
    g_steps = int(rate * args.gibbs_seconds * 0.9)
    cfg_g = GibbsConfig(steps=g_steps, burn_in=g_steps // 20, chains=4, seed=4, scan="random", trace_points=400)
    r_g, sec_g = run_timed(graph, local, cfg_g)
    t_g = time_to_error(r_g, exact, sec_g, r_g.steps)
    out("chain: GIBBS estimate ± stderr", f"{r_g.marginals[0, 1]:.4f} ± {r_g.stderr[0, 1]:.4f} "
        f"({r_g.steps:,} updates/chain, {sec_g:.1f} s, {rate / 1e6:.2f} M updates/s per chain, 4 chains)")
    if t_g is None:
        out("chain: GIBBS time to |error| ≤ 0.01 (s)", f"> {sec_g:.1f} (not reached)")
        # stderr falls as 1/sqrt(time): time for a 95% half-width of 0.01
        extra = sec_g * (1.96 * r_g.stderr[0, 1] / TOL) ** 2
        out("chain: GIBBS time to 95% half-width 0.01, extrapolated (s)", f"{extra:,.0f}")
        if t_qam is not None:
            out("chain: extrapolated GIBBS time / QAM time", f"{extra / max(t_qam, 1e-9):,.0f}×")
    else:
        out("chain: GIBBS time to |error| ≤ 0.01 (s)", f"{t_g:.2f}")
    if t_qam is not None:
        ratio = (sec_g if t_g is None else t_g) / max(t_qam, 1e-9)
        out("chain: GIBBS time / QAM time", ("> " if t_g is None else "") + f"{ratio:,.0f}×")
        ratio2 = (sec_g if t_g is None else t_g) / max(t_qam + sel_seconds, 1e-9)
        out("chain: GIBBS time / (QAM + selection) time", ("> " if t_g is None else "") + f"{ratio2:,.0f}×")

    # Warm end-to-end SQL latency (grounding cached).
    lat_sql = sql.replace(f"steps = {args.qam_steps}", "steps = 100000")
    db.execute(lat_sql)
    times = []
    for _ in range(3):
        t = time.perf_counter()
        res = db.execute(lat_sql)
        times.append(time.perf_counter() - t)
    d = res.diagnostics
    p, se = res.fetchall()[0]
    out("chain: warm SQL latency, best of 3 (s)", f"{min(times):.3f} (runs: {', '.join(f'{x:.2f}' for x in times)})")
    out("chain: ... of which planning + grounding / inference (s)",
        f"{d['grounding_seconds']:.3f} / {d['inference_seconds']:.3f}")
    out("chain: warm SQL answer (steps = 100000)", f"{p:.4f} ± {se:.4f} (exact {exact:.4f})")
    t = time.perf_counter()
    res = db.execute(f"SELECT PROB(v) AS p, STDERR(v) AS se FROM c v WHERE v.i = {q}")
    out("chain: SQL with defaults (AUTO, tolerance 0.01) (s)", f"{time.perf_counter() - t:.2f} "
        f"({res.diagnostics['method']}, {res.fetchall()[0][0]:.4f})")

    # Grid
    t = time.perf_counter()
    grid_model(db, args.side, args.seed)
    mid = args.side // 2
    gsql = f"SELECT PROB(v) AS p, STDERR(v) AS se FROM g v WHERE v.k = {mid * args.side + mid} USING QAM WITH (steps = 200000, seed = 3)"
    plan = plan_query(db, parse_statement(gsql))
    out("grid: variables", f"{args.side * args.side:,}")
    out("grid: load + first plan (s)", f"{time.perf_counter() - t:.2f}")
    graph, local = plan.graph, int(plan.local[0])
    t = time.perf_counter()
    s = selection_distribution(graph, [local], np.flatnonzero(graph.evidence < 0), SelectionConfig())
    sel_seconds = time.perf_counter() - t
    out("grid: QAM selection distribution (trail) (s)", f"{sel_seconds:.2f}")
    r_qam, sec_qam = run_timed(graph, local, GibbsConfig(steps=200_000, burn_in=1000, chains=4, seed=3, scan="random"),
                               (s.prob, s.alias))
    out("grid: QAM estimate ± stderr", f"{r_qam.marginals[0, 1]:.4f} ± {r_qam.stderr[0, 1]:.4f} ({sec_qam:.2f} s)")
    budget = sec_qam + sel_seconds
    g_steps = int(rate * budget * 0.9)
    r_g, sec_g = run_timed(graph, local, GibbsConfig(steps=max(g_steps, 1000), chains=4, seed=4, scan="random"))
    out("grid: GIBBS (uniform) in the same time ± stderr", f"{r_g.marginals[0, 1]:.4f} ± {r_g.stderr[0, 1]:.4f} "
        f"({sec_g:.2f} s, {r_g.steps:,} updates/chain over {graph.n_vars:,} sites; R-hat {r_g.rhat[0]:.3g})")
    for w_ in r_g.warnings:
        out("grid: GIBBS warning", w_[:110])
    db.execute(gsql)
    t = time.perf_counter()
    res = db.execute(gsql.replace("steps = 200000", "steps = 100000"))
    out("grid: warm SQL latency (steps = 100000) (s)", f"{time.perf_counter() - t:.3f} "
        f"(plan+ground {res.diagnostics['grounding_seconds']:.3f}, inference {res.diagnostics['inference_seconds']:.3f})")
    out("machine", f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")
    db.close()


if __name__ == "__main__":
    main()
