"""Query-aware MCMC benchmark (issue 5): one query variable in the middle of a huge model.

Models, defined through pdbq SQL (tables + CREATE VARIABLE + CREATE RULE):

- chain: N binary variables c(0..N-1), EQUAL links with random weights in [0.3, 1.2] and a
  random field h_i ~ N(0, 0.5) (ISTRUE); its exact marginal by forward–backward (numpy, below);
- grid: an S×S Ising-like grid g(r, c) with EQUAL links of weight 0.4 and a random field.

Reported (table on stdout, numbers recorded in docs/benchmarks.md):

1. chain: time for QAM (trail selection) to reach |error| ≤ 0.01 on the middle variable versus
   GIBBS (uniform random scan over the whole chain), in the same run and on the same pruned graph;
   time-to-error is read off each run's running-estimate trace (first point from which the error
   stays ≤ 0.01), the sampling time spread evenly over the updates, plus the fixed costs each
   method pays (kernel arrays; for QAM also its selection table). GIBBS runs for 110× QAM's time:
   if it has not reached the error by then, the measured ratio is > 100× (and an extrapolation
   from its standard error is printed).
2. a chain of ``--small-n`` variables on which uniform GIBBS does reach the error: the ratio
   measured with both ends known.
3. warm end-to-end latency of the SQL query (the query-graph cache: graph, kernel arrays and
   selection table kept), median of 5, with its breakdown; and the latency of another query
   variable on the same model (a new selection table).
4. grid: QAM versus GIBBS estimates at the same wall time (no exact answer; spread of the
   estimates shown).

Usage: ``python examples/bench/qam.py [--quick] [--n 1000000] [--side 1000]``
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import pdbq
from pdbq.planning.plan import plan_query
from pdbq.inference.mcmc.config import GibbsConfig
from pdbq.inference.mcmc.gibbs import run_gibbs
from pdbq.inference.query_aware.selection import SelectionConfig, selection_distribution
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


def time_to_error(result, exact: float, seconds: float, total_steps: int, trusted: bool = False) -> float | None:
    """Sampling seconds until the running estimate's error is ≤ TOL for good (None: never), the
    run's wall time spread evenly over its updates. ``trusted``: also the run's own 95%
    half-width (batch means over all chains) must be ≤ TOL from that point on: the time after
    which a user asking for tolerance 0.01 gets a right answer that knows it is right, not one
    that wandered into the band by luck."""
    steps = result.trace.steps
    est = result.trace.estimates[:, 0, 1]
    good = np.abs(est - exact) <= TOL
    if trusted:
        se = result.trace.stderr[:, 0, 1]
        good &= 1.96 * se <= TOL  # NaN (too few batches) is not good
    bad = np.flatnonzero(~good)
    if bad.size == 0:
        first = 0
    elif bad[-1] == est.size - 1:
        return None
    else:
        first = bad[-1] + 1
    burn = result.burn_in
    return seconds * (burn + steps[first]) / max(burn + total_steps, 1)


def run_timed(graph, q, config, sel=None, kernel=None):
    t0 = time.perf_counter()
    r = run_gibbs(graph, [q], config, sites=np.flatnonzero(graph.evidence < 0), selection=sel, kernel=kernel)
    return r, time.perf_counter() - t0


def race(graph, local: int, exact: float, qam_steps: int, gibbs_cap: float | None, out, label: str) -> None:
    """QAM (trail selection, with its selection table's time counted) against uniform GIBBS on
    one graph: time until the running estimate stays within TOL of the exact marginal.

    GIBBS runs for ``gibbs_cap`` seconds, or (None) for at least 110× QAM's time: GIBBS still
    off by more than TOL at the end of that budget is a measured ratio > 100×."""
    t = time.perf_counter()
    s = selection_distribution(graph, [local], np.flatnonzero(graph.evidence < 0), SelectionConfig())
    sel_seconds = time.perf_counter() - t
    out(f"{label}: QAM selection distribution (trail) (s)", f"{sel_seconds:.3f}")
    out(f"{label}: selection share of the query variable", f"{s.p[np.searchsorted(s.sites, local)]:.4f}")
    from pdbq.inference.mcmc.kernels import prepare_kernel_graph

    t = time.perf_counter()
    kernel = prepare_kernel_graph(graph)
    prep = time.perf_counter() - t
    out(f"{label}: kernel arrays (prepare_kernel_graph) (s)", f"{prep:.3f}")
    run_timed(graph, local, GibbsConfig(steps=2000, chains=1, seed=1), (s.prob, s.alias), kernel)  # compile
    cfg = GibbsConfig(steps=qam_steps, burn_in=1000, chains=4, seed=3, scan="random", trace_points=400)
    r_qam, sec_qam = run_timed(graph, local, cfg, (s.prob, s.alias), kernel)
    out(f"{label}: QAM estimate ± stderr", f"{r_qam.marginals[0, 1]:.4f} ± {r_qam.stderr[0, 1]:.4f} "
        f"({r_qam.steps:,} updates/chain, {sec_qam:.2f} s sampling)")
    fixed_qam = sel_seconds + prep  # both methods pay for the kernel arrays; QAM also for its selection table
    t_qam = {}
    for trusted in (False, True):
        t = time_to_error(r_qam, exact, sec_qam, r_qam.steps, trusted)
        t_qam[trusted] = None if t is None else fixed_qam + t
        what = "|error| ≤ 0.01 and 95% half-width ≤ 0.01" if trusted else "|error| ≤ 0.01"
        out(f"{label}: QAM time to {what} (s)", "not reached" if t is None else
            f"{fixed_qam + t:.3f} = selection {sel_seconds:.3f} + kernel arrays {prep:.3f} + sampling {t:.3f}")
    if t_qam[True] is None:
        return

    sites = graph.n_vars
    run_timed(graph, local, GibbsConfig(steps=2000, chains=1, seed=1, scan="random"), None, kernel)  # compile
    # long enough that thread start-up and per-round overhead do not distort the rate
    probe = GibbsConfig(steps=max(sites, 2_000_000), burn_in=0, chains=4, seed=4, scan="random")
    _, sec_probe = run_timed(graph, local, probe, None, kernel)
    rate = probe.steps / sec_probe
    cap = gibbs_cap if gibbs_cap is not None else max(110.0 * t_qam[True], 5.0)
    g_steps = int(rate * cap)
    cfg_g = GibbsConfig(steps=g_steps, burn_in=g_steps // 20, chains=4, seed=4, scan="random", trace_points=400)
    r_g, sec_g = run_timed(graph, local, cfg_g, None, kernel)
    out(f"{label}: GIBBS estimate ± stderr", f"{r_g.marginals[0, 1]:.4f} ± {r_g.stderr[0, 1]:.4f} "
        f"({r_g.steps:,} updates/chain, {sec_g:.1f} s sampling, {rate / 1e6:.2f} M updates/s per chain, 4 chains)")
    for trusted in (False, True):
        what = "|error| ≤ 0.01 and 95% half-width ≤ 0.01" if trusted else "|error| ≤ 0.01"
        t = time_to_error(r_g, exact, sec_g, r_g.steps, trusted)
        ref = t_qam[trusted]
        if t is None:
            out(f"{label}: GIBBS time to {what} (s)", f"> {prep + sec_g:.1f} (not reached within the run)")
            if ref is not None:
                out(f"{label}: ... GIBBS / QAM (measured)", f"> {(prep + sec_g) / ref:,.0f}×")
        else:
            out(f"{label}: GIBBS time to {what} (s)", f"{prep + t:.2f} = kernel arrays {prep:.3f} + sampling {t:.2f}")
            if ref is not None:
                out(f"{label}: ... GIBBS / QAM (measured)", f"{(prep + t) / ref:,.0f}×")
    if time_to_error(r_g, exact, sec_g, r_g.steps, True) is None:
        extra = sec_g * (1.96 * r_g.stderr[0, 1] / TOL) ** 2  # stderr falls as 1/sqrt(time)
        out(f"{label}: GIBBS time to 95% half-width {TOL}, extrapolated (s)",
            f"{extra:,.0f} (≈ {extra / t_qam[True]:,.0f}× QAM)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (chain 10,000, grid 100×100)")
    ap.add_argument("--n", type=int, default=1_000_000, help="chain length")
    ap.add_argument("--small-n", type=int, default=100_000, help="chain on which uniform GIBBS is run until it reaches the error")
    ap.add_argument("--side", type=int, default=1000, help="grid side")
    ap.add_argument("--qam-steps", type=int, default=400_000, help="QAM updates per chain on the chain")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--parts", default="chain,small,grid", help="comma-separated subset of chain,small,grid")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    if args.quick:
        args.n, args.side, args.small_n = 10_000, 100, 2_000
    rows: list[tuple[str, str]] = []

    def out(k: str, v: str) -> None:
        rows.append((k, v))
        print(f"{k:<62} {v}", flush=True)

    if "chain" in parts:
        chain_part(args, out)
    if "small" in parts:
        small_part(args, out)
    if "grid" in parts:
        grid_part(args, out)
    out("machine", f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")


def chain_part(args, out) -> None:
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
    race(plan.graph, int(plan.local[0]), exact, args.qam_steps, None, out, "chain")

    # Warm end-to-end SQL latency: the same query again (graph, kernel arrays and selection table
    # cached), then other query variables on the same model (graph and kernel arrays cached).
    lat_sql = sql.replace(f"steps = {args.qam_steps}", "steps = 100000")
    res = db.execute(lat_sql)
    out("chain: SQL first run after the plan above (s)", f"{res.diagnostics['seconds']:.3f}")
    times, parts = [], []
    for _ in range(5):
        t = time.perf_counter()
        res = db.execute(lat_sql)
        times.append(time.perf_counter() - t)
        parts.append((res.diagnostics["grounding_seconds"], res.diagnostics["inference_seconds"]))
    d = res.diagnostics
    p, se = res.fetchall()[0]
    mid = int(np.argsort(times)[len(times) // 2])
    out("chain: warm SQL latency, median of 5 (s)", f"{times[mid]:.3f} (runs: {', '.join(f'{x:.3f}' for x in times)})")
    out("chain: ... of which planning / inference (s)", f"{parts[mid][0]:.3f} / {parts[mid][1]:.3f} "
        f"(graph cached: {d['graph_cached']})")
    out("chain: warm SQL answer (steps = 100000)", f"{p:.4f} ± {se:.4f} (exact {exact:.4f})")
    others = []
    for qq in (q + 1, args.n // 3, 2 * args.n // 3):
        t = time.perf_counter()
        r2 = db.execute(lat_sql.replace(f"v.i = {q}", f"v.i = {qq}"))
        others.append(time.perf_counter() - t)
        assert r2.diagnostics["graph_cached"]
    out("chain: another query variable, same model, median of 3 (s)", f"{sorted(others)[1]:.3f} "
        f"(runs: {', '.join(f'{x:.3f}' for x in others)}; new selection table, graph and kernel arrays cached)")
    t = time.perf_counter()
    res = db.execute(f"SELECT PROB(v) AS p, STDERR(v) AS se FROM c v WHERE v.i = {q}")
    out("chain: SQL with defaults (AUTO, tolerance 0.01) (s)", f"{time.perf_counter() - t:.2f} "
        f"({res.diagnostics['method']}, {res.fetchall()[0][0]:.4f}, {res.diagnostics['steps']:,} updates/chain)")
    db.close()



def small_part(args, out) -> None:
    """A chain short enough for uniform GIBBS to reach the error: the ratio measured directly."""
    db = pdbq.connect()
    w, h = chain_model(db, args.small_n, args.seed)
    q = args.small_n // 2
    exact = forward_backward(w, h, q)
    plan = plan_query(db, parse_statement(f"SELECT PROB(v) FROM c v WHERE v.i = {q} USING QAM"))
    out("small chain: variables / exact P(c_q)", f"{args.small_n:,} / {exact:.6f}")
    race(plan.graph, int(plan.local[0]), exact, 1_000_000, 20.0 if args.quick else 240.0, out, "small chain")
    db.close()


def grid_part(args, out) -> None:
    db = pdbq.connect()
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
    probe = GibbsConfig(steps=max(graph.n_vars, 100_000), burn_in=0, chains=4, seed=4, scan="random")
    _, sec_probe = run_timed(graph, local, probe)
    rate = probe.steps / sec_probe
    budget = sec_qam + sel_seconds
    g_steps = int(rate * budget * 0.9)
    r_g, sec_g = run_timed(graph, local, GibbsConfig(steps=max(g_steps, 1000), chains=4, seed=4, scan="random"))
    out("grid: GIBBS (uniform) in the same time ± stderr", f"{r_g.marginals[0, 1]:.4f} ± {r_g.stderr[0, 1]:.4f} "
        f"({sec_g:.2f} s, {r_g.steps:,} updates/chain over {graph.n_vars:,} sites; R-hat {r_g.rhat[0]:.3g})")
    for w_ in r_g.warnings:
        out("grid: GIBBS warning", w_[:110])
    db.execute(gsql)
    times = []
    for _ in range(3):
        t = time.perf_counter()
        res = db.execute(gsql.replace("steps = 200000", "steps = 100000"))
        times.append(time.perf_counter() - t)
    out("grid: warm SQL latency (steps = 100000), median of 3 (s)", f"{sorted(times)[1]:.3f} "
        f"(plan {res.diagnostics['grounding_seconds']:.3f}, inference {res.diagnostics['inference_seconds']:.3f})")
    db.close()


if __name__ == "__main__":
    main()
