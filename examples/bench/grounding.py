"""Grounding benchmark (issue 3): a synthetic movies/tweets model.

1M variables (100k is_popular movies + 900k is_fan users) and 10M groundings of the rule
``is_popular(m) :- tweets(u, m), is_fan(u)`` (two random atoms over one observed table).
Reports, in one process: the bare DuckDB join producing the same rows, full grounding into the
factor store, groundings/s, building the FactorGraph arrays, edges/s (against the old one-pass
scatter in the same process), bytes/edge, peak RSS.

    python examples/bench/grounding.py            # full size
    python examples/bench/grounding.py --scale 0.05   # quick run
    python examples/bench/grounding.py --sweep 1 2 5 10 --reps 3   # ground_all / bare join by size (issue 12)

``--sweep``: for each size (millions of groundings), ``ground_all`` into an empty factor store
against the bare DuckDB join producing the same rows (CTAS), both on the same synced vid maps in
the same process, alternating which goes first; medians and the
ratio bare / ground_all (the issue's goal: ≥ 0.5 at every size from 1M to 10M). Each size runs on
one connection whose vid maps are synced (not timed), warmed by one untimed pair; between runs
the rule's groundings are dropped. The cold first calls of the process (imports, sqlglot, DuckDB's
first use of the connection) are reported on their own row.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import time

import duckdb

from pdbq.graph import from_store
from pdbq.graph.from_store import graph_from_store
from pdbq.graph.layout import validate
from pdbq.grounding.compile import compile_rule, observed_columns
from pdbq.grounding.ground import ground_all
from pdbq.grounding.variables import sync_variables
from pdbq.language import parse_script
from pdbq.language.nodes import CreateRule, CreateVariable

MODEL = """
CREATE VARIABLE is_popular(movie INTEGER) DOMAIN BOOLEAN FROM (SELECT movie FROM movies);
CREATE VARIABLE is_fan(usr INTEGER) DOMAIN BOOLEAN FROM (SELECT usr FROM users);
CREATE RULE fans_vote WEIGHT 0.8 AS is_popular(m) :- tweets(u, m), is_fan(u);
"""


def _data(scale: float, threads: int) -> duckdb.DuckDBPyConnection:
    n_movies = max(10, int(100_000 * scale))
    n_users = max(10, int(900_000 * scale))
    n_tweets = max(10, int(10_000_000 * scale))
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    con.execute(f"CREATE TABLE movies AS SELECT range::INTEGER AS movie FROM range({n_movies})")
    con.execute(f"CREATE TABLE users AS SELECT range::INTEGER AS usr FROM range({n_users})")
    con.execute(
        f"CREATE TABLE tweets AS SELECT (hash(range) % {n_users})::INTEGER AS usr, "
        f"(hash(range * 7 + 1) % {n_movies})::INTEGER AS movie FROM range({n_tweets})"
    )
    return con


class _Counting:
    """A connection that counts the statements run through it."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con
        self.n = 0

    def execute(self, *args, **kw):
        self.n += 1
        return self.con.execute(*args, **kw)

    def sql(self, *args, **kw):
        self.n += 1
        return self.con.sql(*args, **kw)

    def __getattr__(self, name: str):
        return getattr(self.con, name)


def _reset_rule(con: duckdb.DuckDBPyConnection, rule: str) -> None:
    """Forget the rule's groundings (the vid maps stay): the next ground_all grounds it anew."""
    con.execute("DELETE FROM pdbq_fs_rules WHERE rule = ?", [rule])
    con.execute("DELETE FROM pdbq_fs_weights WHERE rule = ?", [rule])
    con.execute(f'DROP TABLE IF EXISTS "pdbq_fs_factors__{rule}"')


def _pair(con, V, R, ground_first: bool) -> tuple[float, float, int]:
    """(ground_all seconds, bare join seconds, groundings) on ``con`` (vid maps synced)."""
    select = compile_rule(R["fans_vote"], V, observed_columns(con)).select.sql(dialect="duckdb")
    out = {}
    for step in (("ground", "bare") if ground_first else ("bare", "ground")):
        if step == "bare":
            t = time.perf_counter()
            con.execute("CREATE TABLE bare AS " + select)
            out[step] = time.perf_counter() - t
            n_bare = con.execute("SELECT count(*) FROM bare").fetchone()[0]
            con.execute("DROP TABLE bare")
        else:
            _reset_rule(con, "fans_vote")
            t = time.perf_counter()
            stats = ground_all(con, V, R)
            out[step] = time.perf_counter() - t
            assert stats.grounded == ["fans_vote"]
            n = stats.factors["fans_vote"]
    assert n == n_bare, (n, n_bare)
    return out["ground"], out["bare"], n


def sweep(sizes: list[float], reps: int, threads: int) -> None:
    stmts = parse_script(MODEL)
    V = {s.name: s for s in stmts if isinstance(s, CreateVariable)}
    R = {s.name: s for s in stmts if isinstance(s, CreateRule)}
    con = _data(sizes[0] / 10, threads)
    sync_variables(con, V)
    cold_g, cold_b, _ = _pair(con, V, R, ground_first=True)  # the process's and connection's first calls
    con.close()
    print(f"# ground_all against the bare join: threads {threads}, {platform.machine()}, duckdb {duckdb.__version__}, "
          f"medians of {reps}; each size on one connection, warmed by one untimed pair")
    print("| groundings | ground_all s | bare join s | bare / ground_all | ground_all − bare s | M groundings/s |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(f"| {sizes[0]:g}M, first calls of the process (cold) | {cold_g:.3f} | {cold_b:.3f} | {cold_b / cold_g:.2f}x | "
          f"{cold_g - cold_b:.3f} | |")
    # Fixed cost: ground_all on a tiny model (1,000 groundings: the join is ~free), and how many
    # SQL statements one ground_all issues (deterministic, unlike the times on a shared machine).
    con = _data(0.0001, threads)
    sync_variables(con, V)
    _pair(con, V, R, ground_first=True)
    tiny = []
    for rep in range(3 * reps):
        tg, tb, n = _pair(con, V, R, ground_first=rep % 2 == 1)
        tiny.append((tg, tb))
    _reset_rule(con, "fans_vote")
    counter = _Counting(con)
    ground_all(counter, V, R)
    con.close()
    mg, mb = statistics.median(t[0] for t in tiny), statistics.median(t[1] for t in tiny)
    print(f"| {n:,} (fixed cost; {counter.n} SQL statements per ground_all) | {mg:.4f} | {mb:.4f} | {mb / mg:.2f}x | "
          f"{mg - mb:.4f} | |")
    for size in sizes:
        con = _data(size / 10, threads)
        sync_variables(con, V)
        _pair(con, V, R, ground_first=True)  # warm-up (not timed)
        g, b = [], []
        for rep in range(reps):
            tg, tb, n = _pair(con, V, R, ground_first=rep % 2 == 1)
            g.append(tg)
            b.append(tb)
        con.close()
        if os.environ.get("PDBQ_BENCH_VERBOSE"):
            print("ground", [round(x, 3) for x in g], "bare", [round(x, 3) for x in b])
        mg, mb = statistics.median(g), statistics.median(b)
        print(f"| {n:,} | {mg:.3f} | {mb:.3f} | {mb / mg:.2f}x | {mg - mb:.3f} | {n / mg / 1e6:.1f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="1.0 = 1M variables, 10M groundings")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--reps", type=int, default=5, help="runs of the graph-array step (medians)")
    ap.add_argument("--sweep", type=float, nargs="*", help="sizes in millions of groundings: ground_all vs bare join only")
    args = ap.parse_args()
    if args.sweep:
        sweep(args.sweep, args.reps, args.threads)
        return
    n_movies = max(10, int(100_000 * args.scale))
    n_users = max(10, int(900_000 * args.scale))
    n_tweets = max(10, int(10_000_000 * args.scale))
    con = duckdb.connect()
    con.execute(f"SET threads = {args.threads}")
    con.execute(f"CREATE TABLE movies AS SELECT range::INTEGER AS movie FROM range({n_movies})")
    con.execute(f"CREATE TABLE users AS SELECT range::INTEGER AS usr FROM range({n_users})")
    con.execute(
        f"CREATE TABLE tweets AS SELECT (hash(range) % {n_users})::INTEGER AS usr, "
        f"(hash(range * 7 + 1) % {n_movies})::INTEGER AS movie FROM range({n_tweets})"
    )
    stmts = parse_script(MODEL)
    V = {s.name: s for s in stmts if isinstance(s, CreateVariable)}
    R = {s.name: s for s in stmts if isinstance(s, CreateRule)}

    rows = []
    t = time.perf_counter()
    sync_variables(con, V)
    rows.append(("vid maps (1 sync)", time.perf_counter() - t, ""))

    select = compile_rule(R["fans_vote"], V, observed_columns(con)).select.sql(dialect="duckdb")
    bare = []
    for _ in range(2):
        con.execute("DROP TABLE IF EXISTS bare")
        t = time.perf_counter()
        con.execute("CREATE TABLE bare AS " + select)
        bare.append(time.perf_counter() - t)
    n_bare = con.execute("SELECT count(*) FROM bare").fetchone()[0]
    con.execute("DROP TABLE bare")

    t = time.perf_counter()
    stats = ground_all(con, V, R)
    t_ground = time.perf_counter() - t
    n = stats.factors["fans_vote"]
    assert n == n_bare, (n, n_bare)
    t = time.perf_counter()
    again = ground_all(con, V, R)
    t_reuse = time.perf_counter() - t
    assert again.reused == ["fans_vote"]

    graph_from_store(con, check=False)  # warm numba's compile cache
    # New (two-pass bucketed scatter) against old (one-pass scatter) in this process, alternating
    # which goes first (ABBA), each result dropped before the next run, medians of --reps runs.
    new_t, old_t, csr_new, csr_old = [], [], [], []
    default_min = from_store._TWO_PASS_MIN_EDGES

    cpu_new, cpu_old = [], []

    def arrays(two_pass: bool) -> float:
        from_store._TWO_PASS_MIN_EDGES = default_min if two_pass else 2**62
        try:
            c = time.process_time()
            t = time.perf_counter()
            graph_from_store(con, check=False)
            wall = time.perf_counter() - t
            (cpu_new if two_pass else cpu_old).append(time.process_time() - c)
            return wall
        finally:
            from_store._TWO_PASS_MIN_EDGES = default_min

    g, _, _ = graph_from_store(con, check=False)
    for rep in range(args.reps):
        for two_pass in ((True, False) if rep % 2 == 0 else (False, True)):
            (new_t if two_pass else old_t).append(arrays(two_pass))
            t = time.perf_counter()
            from_store._var_csr_fast(g.factor_offsets, g.factor_vars, g.n_vars, two_pass=two_pass, arity=2)
            (csr_new if two_pass else csr_old).append(time.perf_counter() - t)
    if os.environ.get("PDBQ_BENCH_VERBOSE"):
        print("new", [round(x, 3) for x in new_t], "old", [round(x, 3) for x in old_t])
        print("csr new", [round(x, 3) for x in csr_new], "old", [round(x, 3) for x in csr_old])
    t_arrays, t_old = statistics.median(new_t), statistics.median(old_t)
    c_new, c_old = statistics.median(csr_new), statistics.median(csr_old)
    t = time.perf_counter()
    validate(g)
    t_validate = time.perf_counter() - t

    t_bare = min(bare)
    rows += [
        ("bare DuckDB join (CTAS, best of 2)", t_bare, f"{n_bare / t_bare / 1e6:.2f} M rows/s"),
        ("ground_all (fingerprints, estimate, insert, checks)", t_ground, f"{n / t_ground / 1e6:.2f} M groundings/s"),
        ("  grounding speed / bare join speed", None, f"{t_bare / t_ground:.2f}x"),
        ("ground_all again (all reused, fingerprints only)", t_reuse, ""),
        (f"graph arrays from store, median of {args.reps}", t_arrays, f"{g.n_edges / t_arrays / 1e6:.1f} M edges/s"),
        ("  same with the old one-pass scatter", t_old, f"{g.n_edges / t_old / 1e6:.1f} M edges/s"),
        ("  old / new (wall-clock medians)", None, f"{t_old / t_arrays:.2f}x"),
        ("  CPU time (process, DuckDB threads included): new", statistics.median(cpu_new), ""),
        ("  CPU time: old", statistics.median(cpu_old), f"old / new {statistics.median(cpu_old) / statistics.median(cpu_new):.2f}x"),
        ("  variable CSR alone: two-pass (new)", c_new, f"{g.n_edges / c_new / 1e6:.1f} M edges/s"),
        ("  variable CSR alone: one-pass (old)", c_old, f"{g.n_edges / c_old / 1e6:.1f} M edges/s"),
        ("validate(graph)", t_validate, f"{g.n_edges / t_validate / 1e6:.1f} M edges/s"),
        ("bytes per edge (graph.nbytes() / n_edges)", None, f"{g.nbytes() / g.n_edges:.1f}"),
        ("peak RSS", None, f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"),
    ]
    print(f"# grounding benchmark: scale {args.scale}, {g.n_vars:,} variables, {n:,} groundings, "
          f"{g.n_edges:,} edges, threads {args.threads}, {platform.machine()}, duckdb {duckdb.__version__}")
    print(f"| {'step':<52} | {'seconds':>8} | {'rate':>24} |")
    print(f"|{'-' * 54}|{'-' * 10}:|{'-' * 25}:|")
    for name, secs, rate in rows:
        print(f"| {name:<52} | {'' if secs is None else f'{secs:8.3f}':>8} | {rate:>24} |")


if __name__ == "__main__":
    main()
