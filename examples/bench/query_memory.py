"""Query memory (issue 12, item 10): peak RSS of one SQL query per factor of its graph.

    python examples/bench/query_memory.py [--n 1000000 5000000 10000000] [--chains 4]

A chain x(0) - ... - x(n-1) (EQUAL weight 0.3, ISTRUE weight 0.05: 2n - 1 factors), defined in
SQL and grounded (``Database.ground()``) in a fresh process's
in-memory database (so the factor tables are in memory before the query, as in the issue's
measurement), or with ``--file`` also in a database file that a fresh process opens (DuckDB's
reads of the file then count too). The process first answers a query on a three-variable chain
in another database (imports, compiled kernels, first-use costs), then one query whose region is
the whole x model:

    SELECT PROB(v) FROM x AS v WHERE v.i = n/2 USING GIBBS WITH (sweeps = 2, chains = 4, seed = 1)

A thread samples the process's resident set (/proc/self/statm) every 2 ms during that query; the
peak above the RSS before it, divided by the factors of the graph, is "bytes per factor": DuckDB
reading the factor tables, the graph, the kernel arrays, the chains and the answer all count.
"traced": the same query once more with the graph cache cleared and `tracemalloc` on: the exact
peak of Python's and numpy's allocations (not DuckDB's or Arrow's), free of allocator noise.
(A fresh process per size, because freed memory is not always returned to the OS: in a process
that has already answered a big query the baseline would hide part of the next one.)
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc

import pdbq

CHAIN = """
CREATE TABLE nodes AS SELECT i FROM range({n}) r(i);
CREATE TABLE links AS SELECT i AS a, i + 1 AS b FROM range({n} - 1) r(i);
CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM nodes);
CREATE RULE link WEIGHT 0.3 FUNCTION EQUAL AS x(a) = x(b) :- links(a, b);
CREATE RULE prior WEIGHT 0.05 FUNCTION ISTRUE AS x(i) :- nodes(i);
"""

WARM = """
CREATE TABLE few AS SELECT i FROM range(3) r(i);
CREATE TABLE few_links AS SELECT i AS a, i + 1 AS b FROM range(2) r(i);
CREATE VARIABLE y(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM few);
CREATE RULE few_link WEIGHT 0.3 FUNCTION EQUAL AS y(a) = y(b) :- few_links(a, b);
"""

_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


class PeakSampler:
    def __init__(self, every: float = 0.002):
        self.every = every
        self.peak = rss()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.peak = max(self.peak, rss())

    def __enter__(self) -> PeakSampler:
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, rss())


def measure(path: str, n: int, chains: int) -> None:
    with pdbq.connect() as warm:  # another database: x's region stays the whole of its model
        warm.execute(WARM)
        warm.execute("SELECT PROB(v) FROM y AS v USING GIBBS WITH (sweeps = 2, chains = 4, seed = 1)").fetchall()
    with (pdbq.connect() if path == ":memory:" else pdbq.connect(path)) as db:
        if path == ":memory:":
            db.execute(CHAIN.format(n=n))
            db.ground()
        gc.collect()
        q = f"SELECT PROB(v) FROM x AS v WHERE v.i = {n // 2} USING GIBBS WITH (sweeps = 2, chains = {chains}, seed = 1)"
        base = rss()
        t = time.perf_counter()
        with PeakSampler() as s:
            r = db.execute(q)
            r.fetchall()
        secs = time.perf_counter() - t
        # the same query again with tracemalloc on (graph cache cleared): the peak of what Python
        # and numpy allocate, exactly (DuckDB's and Arrow's C++ allocations are not traced)
        del r
        db.graph_cache.clear()
        gc.collect()
        tracemalloc.start()
        r = db.execute(q)
        r.fetchall()
        traced = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        factors = r.diagnostics["graph_factors"]
        peak = s.peak - base
        print(f"| {'file' if path != ':memory:' else 'memory'} | {n:,} | {factors:,} | {base / 2**20:,.0f} | {peak / 2**20:,.0f} | {peak / factors:.0f} | "
              f"{traced / factors:.0f} | {s.peak / 2**20:,.0f} | {secs:.2f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="*", default=[1_000_000])
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--file", action="store_true", help="also a database file: DuckDB's reads of it count too")
    ap.add_argument("--dir", default=None, help="where the database files go (default: a temporary directory)")
    ap.add_argument("--measure", default=None, help=argparse.SUPPRESS)  # internal: the fresh process
    args = ap.parse_args()
    if args.measure:
        measure(args.measure, args.n[0], args.chains)
        return
    print("| database | variables | factors | RSS before MiB | peak above it MiB | bytes per factor | traced (numpy) B/factor | peak RSS MiB | query s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for n in args.n:
            subprocess.run([sys.executable, __file__, "--measure", ":memory:", "--n", str(n), "--chains", str(args.chains)],
                           check=True)
            if not args.file:
                continue
            path = os.path.join(tmp, f"chain{n}.db")
            with pdbq.connect(path) as db:
                db.execute(CHAIN.format(n=n))
                db.ground()
            subprocess.run([sys.executable, __file__, "--measure", path, "--n", str(n), "--chains", str(args.chains)],
                           check=True)
            os.remove(path)


if __name__ == "__main__":
    main()
