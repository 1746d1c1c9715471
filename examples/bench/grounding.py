"""Grounding benchmark (issue 3): a synthetic movies/tweets model.

1M variables (100k is_popular movies + 900k is_fan users) and 10M groundings of the rule
``is_popular(m) :- tweets(u, m), is_fan(u)`` (two random atoms over one observed table).
Reports, in one process: the bare DuckDB join producing the same rows, full grounding into the
factor store, groundings/s, building the FactorGraph arrays, edges/s, bytes/edge, peak RSS.

    python examples/bench/grounding.py            # full size
    python examples/bench/grounding.py --scale 0.05   # quick run
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import time

import duckdb

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="1.0 = 1M variables, 10M groundings")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
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
    t = time.perf_counter()
    g, _ = graph_from_store(con, check=False)
    t_arrays = time.perf_counter() - t
    t = time.perf_counter()
    validate(g)
    t_validate = time.perf_counter() - t

    t_bare = min(bare)
    rows += [
        ("bare DuckDB join (CTAS, best of 2)", t_bare, f"{n_bare / t_bare / 1e6:.2f} M rows/s"),
        ("ground_all (fingerprints, estimate, insert, checks)", t_ground, f"{n / t_ground / 1e6:.2f} M groundings/s"),
        ("  grounding speed / bare join speed", None, f"{t_bare / t_ground:.2f}x"),
        ("ground_all again (all reused, fingerprints only)", t_reuse, ""),
        ("graph arrays from store (Arrow + numpy/numba)", t_arrays, f"{g.n_edges / t_arrays / 1e6:.1f} M edges/s"),
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
