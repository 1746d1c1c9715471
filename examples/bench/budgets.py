"""Do time limits hold? Wall time of SQL GIBBS queries against their `time_limit` (issue 12, item 1).

    python examples/bench/budgets.py [--n 200000] [--limits 1 3 10]

A chain x(0) - ... - x(n-1) (EQUAL weight 0.3, ISTRUE weight 0.05) defined in SQL; the query
asks one variable in the middle with a step cap far beyond any budget:

    SELECT PROB(v) FROM x AS v WHERE v.i = n/2 USING GIBBS WITH (time_limit = L, sweeps = 1e9, seed = 1)

Reported per limit: the whole query's wall time (planning included; the first query of the
process also pays for loading the compiled kernels), the bound 1.1·L + 1 s, the answer ± 1.96
STDERR against the exact marginal (forward-backward), updates kept and dropped as burn-in, and
the warnings. Also the tiny movies model of the docs with `steps = 1e8, time_limit = 1`.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import pdbq

CHAIN = """
CREATE TABLE nodes AS SELECT i FROM range({n}) r(i);
CREATE TABLE links AS SELECT i AS a, i + 1 AS b FROM range({n} - 1) r(i);
CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM nodes);
CREATE RULE link WEIGHT 0.3 FUNCTION EQUAL AS x(a) = x(b) :- links(a, b);
CREATE RULE prior WEIGHT 0.05 FUNCTION ISTRUE AS x(i) :- nodes(i);
"""

MOVIES = """
CREATE TABLE movies AS SELECT * FROM (VALUES ('Up'), ('Twilight'), ('Avengers')) t(movie);
CREATE TABLE tweets AS SELECT * FROM (VALUES ('Up', 'bart'), ('Twilight', 'lisa'), ('Up', 'bot'), ('Avengers', 'lisa')) t(movie, person);
CREATE TABLE people AS SELECT DISTINCT person FROM tweets;
CREATE TABLE labels AS SELECT * FROM (VALUES ('bart', TRUE)) t(person, fan);
CREATE VARIABLE is_popular(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies);
CREATE VARIABLE is_fan(person TEXT) DOMAIN BOOLEAN FROM (SELECT person FROM people) EVIDENCE (SELECT person, fan FROM labels);
CREATE RULE fans_vote WEIGHT 0.8 SEMANTICS RATIO AS is_popular(^m) :- tweets(m, p), is_fan(p), p <> 'bot';
"""


def chain_exact(n: int, i: int, link: float = 0.3, prior: float = 0.05) -> float:
    psi = np.exp(np.array([[link, -link], [-link, link]]))
    phi = np.exp(np.array([-prior, prior]))
    f = phi / phi.sum()
    for _ in range(1, i + 1):
        f = (f @ psi) * phi
        f /= f.sum()
    b = np.ones(2)
    for _ in range(n - 1, i, -1):
        b = psi @ (phi * b)
        b /= b.sum()
    p = f * b
    return float(p[1] / p.sum())


def row(label: str, limit: float, seconds: float, r, exact: float | None) -> None:
    d = r.diagnostics
    rows = r.fetchall()
    p, se = rows[0][0], rows[0][1]
    ans = "NULL" if p is None else f"{p:.4f} ± {1.96 * se:.4f}"
    ok = "✔" if seconds <= 1.1 * limit + 1.0 else "✘"
    ex = "" if exact is None else f"{exact:.4f}"
    warn = "; ".join(w[:70] for w in d["warnings"]) or "–"
    print(f"| {label} | {limit:g} | {seconds:.2f} {ok} | {ans} | {ex} | {d['steps']:,} / {d['burn_in']:,} | {warn} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--limits", type=float, nargs="*", default=[1.0, 3.0, 10.0])
    args = ap.parse_args()
    n = args.n
    print("| model | time_limit s | wall s (≤ 1.1·L + 1?) | answer ± 1.96·STDERR | exact | updates kept / burn-in per chain | warnings |")
    print("|---|---|---|---|---|---|---|")
    with pdbq.connect() as db:
        db.execute(MOVIES)
        for limit in (1.0,):
            t = time.perf_counter()
            r = db.execute(f"SELECT PROB(m) AS p, STDERR(m) AS se FROM is_popular m WHERE m.movie = 'Up' "
                           f"USING GIBBS WITH (steps = 100000000, time_limit = {limit}, seed = 1)")
            row("movies (first query of the process)", limit, time.perf_counter() - t, r, None)
    with pdbq.connect() as db:
        db.execute(CHAIN.format(n=n))
        exact = chain_exact(n, n // 2)
        for limit in args.limits:
            t = time.perf_counter()
            r = db.execute(f"SELECT PROB(v) AS p, STDERR(v) AS se FROM x AS v WHERE v.i = {n // 2} "
                           f"USING GIBBS WITH (time_limit = {limit}, sweeps = 1000000000, seed = 1)")
            row(f"chain of {n:,}", limit, time.perf_counter() - t, r, exact)


if __name__ == "__main__":
    main()
