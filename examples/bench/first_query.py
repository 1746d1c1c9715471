"""A new user's first query on a tiny model: region grounding round by round vs the whole model at once.

On a chain of ``--n`` boolean variables (one EQUAL factor per link, a prior on each), each run opens
a fresh in-memory DuckDB connection, syncs the vid maps (not timed) and times `query_graph` for the
first variable: with ``whole_model_factors=0`` (the region is expanded in SQL, one frontier round
per link) and with the default (the row counts bound the model, so every rule is grounded at once).
Runs alternate between the two, after one untimed warm-up pair; medians, statements sent to DuckDB,
frontier rounds, and the ratio. Also the hierarchy-width analysis (`pdbq.analyze(graph)`) of the
movies demo's query graph: search states and median seconds.

    python examples/bench/first_query.py [--n 10] [--reps 7]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

import duckdb

import pdbq
from pdbq.graph.from_store import query_graph
from pdbq.grounding.limits import GroundingConfig
from pdbq.grounding.variables import keys_to_vids, sync_variables
from pdbq.language import parse_script
from pdbq.language.nodes import CreateRule, CreateVariable, PassThrough

ROOT = Path(__file__).resolve().parents[2]

CHAIN = """
CREATE TABLE nodes AS SELECT range::INT AS id FROM range({n});
CREATE TABLE edges AS SELECT range::INT AS a, (range + 1)::INT AS b FROM range({n} - 1);
CREATE VARIABLE v(id INT) DOMAIN BOOLEAN FROM (SELECT id FROM nodes);
CREATE RULE chain WEIGHT 1.0 FUNCTION EQUAL AS v(x) = v(y) :- edges(x, y);
CREATE RULE prior WEIGHT 0.1 AS v(x) :- nodes(x);
"""


class Counted:
    """A connection that counts the statements run through it."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con
        self.n = 0

    def execute(self, *args, **kw):
        self.n += 1
        return self.con.execute(*args, **kw)

    def __getattr__(self, name: str):
        return getattr(self.con, name)


def first_query(n: int, whole_model_factors: int) -> tuple[float, int, int]:
    con = duckdb.connect()
    variables, rules = {}, {}
    for stmt in parse_script(CHAIN.format(n=n)):
        if isinstance(stmt, PassThrough):
            con.execute(stmt.sql)
        elif isinstance(stmt, CreateVariable):
            variables[stmt.name] = stmt
        elif isinstance(stmt, CreateRule):
            rules[stmt.name] = stmt
    sync_variables(con, variables)
    seed = keys_to_vids(con, "v", [(0,)])
    counted = Counted(con)
    t = time.perf_counter()
    _, _, stats = query_graph(counted, variables, rules, seed, {},
                              config=GroundingConfig(whole_model_factors=whole_model_factors))
    seconds = time.perf_counter() - t
    con.close()
    return seconds, counted.n, stats.rounds


def movies_analysis(reps: int) -> tuple[int, float, int]:
    from pdbq.analysis.hierarchy import HierarchySearch
    from pdbq.analysis.hypergraph import build_hypergraph
    from pdbq.planning.plan import query_graph as plan_graph

    db = pdbq.connect()
    db.execute((ROOT / "examples" / "movies.sql").read_text().split("SHOW RULES;")[0])
    db.ground()
    graph = plan_graph(db, "SELECT PROB(m) FROM is_popular AS m")
    hg = build_hypergraph(graph)
    edges = [hg.edge(h).tolist() for h in range(hg.n_edges)]
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        width = pdbq.analyze(graph).hierarchy_width
        times.append(time.perf_counter() - t)
    search = HierarchySearch(edges)
    search.width()
    db.close()
    return width, statistics.median(times), search.states


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10, help="variables in the chain")
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    print(f"# {platform.node()} {platform.machine()} {platform.python_version()} duckdb {duckdb.__version__}")
    modes = {"region, round by round": 0, "whole model at once": GroundingConfig().whole_model_factors}
    first_query(args.n, 0)
    first_query(args.n, modes["whole model at once"])
    runs: dict[str, list[tuple[float, int, int]]] = {m: [] for m in modes}
    for i in range(args.reps):
        for m in (modes if i % 2 == 0 else reversed(list(modes))):
            runs[m].append(first_query(args.n, modes[m]))
    print(f"\nfirst query on a {args.n}-variable chain, {args.reps} runs each (median)")
    print(f"{'grounding':<26}{'seconds':>10}{'statements':>12}{'rounds':>8}")
    med = {}
    for m, rs in runs.items():
        med[m] = statistics.median(r[0] for r in rs)
        print(f"{m:<26}{med[m]:>10.4f}{rs[0][1]:>12}{rs[0][2]:>8}")
    print(f"ratio region / whole: {med['region, round by round'] / med['whole model at once']:.1f}x")
    width, seconds, states = movies_analysis(args.reps)
    print(f"\nmovies demo, pdbq.analyze(graph): hierarchy width {width}, {states} search states, {seconds:.4f} s (median)")


if __name__ == "__main__":
    main()
