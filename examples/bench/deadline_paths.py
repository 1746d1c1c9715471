"""Wall and CPU time of the statements an audit found ignoring a time limit or a cancel: cutset
choice, block building, chains, AUTO/EXACT order search, coreference MAP/DIST, a large GIVEN and
a long IN list (each cancelled after 1 s). One case per process, as
``python examples/bench/deadline_paths.py CASE [ARG]``; CPU time is printed beside the wall so a
loaded machine's numbers can be read (wall / CPU is how much the process was slowed).

Cases: cutset, cutset_cancel, blocks, blocks8, chains, exact, auto (grid models; ARG: the limit),
coref, corefdist (ARG: mentions[:limit]), given (ARG: atoms), inlist (ARG: literals).
"""

from __future__ import annotations

import os
import sys
import threading
import time

import pdbq
from pdbq.progress import CancelToken


def grid(db, rows: int, cols: int) -> None:
    n = rows * cols
    db.execute(f"CREATE TABLE n AS SELECT * FROM range({n}) r(i); "
               f"CREATE TABLE e AS SELECT i AS a, i + 1 AS b FROM range({n}) r(i) WHERE i % {cols} < {cols - 1} "
               f"UNION ALL SELECT i, i + {cols} FROM range({n - cols}) r(i)")
    db.execute("CREATE VARIABLE v(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM n)")
    db.execute("CREATE RULE eq WEIGHT 0.3 FUNCTION EQUAL AS v(a) = v(b) :- e(a, b)")
    db.execute("CREATE RULE f WEIGHT 0.1 FUNCTION ISTRUE AS v(i) :- n(i)")


def coref(db, n: int) -> None:
    db.execute(f"CREATE TABLE r AS SELECT i AS id, 'name' || (hash(i) % 40) AS name FROM range({n}) t(i)")
    db.execute("CREATE TABLE p AS SELECT a.id AS a, b.id AS b, jaro_winkler_similarity(a.name, b.name) AS sim "
               "FROM r a JOIN r b ON a.id < b.id AND a.id // 100 = b.id // 100")
    db.execute("CREATE VARIABLE e(id BIGINT) DOMAIN CLUSTER FROM (SELECT id FROM r)")
    db.execute("CREATE RULE aff WEIGHT = 10 * (sim - 0.85) FUNCTION EQUAL AS e(a) = e(b) :- p(a, b, sim)")


def timed(db, sql: str, cancel_after: float | None = None) -> None:
    token = None
    if cancel_after is not None:
        token = CancelToken()
        threading.Timer(cancel_after, token.cancel).start()
    t, c = time.perf_counter(), time.process_time()
    try:
        r = db.execute(sql, cancel=token)
        rows = r.fetchall()
        out = f"{len(rows)} rows; warnings: {[w[:160] for w in r.diagnostics.get('warnings', [])]}"
    except Exception as e:  # noqa: BLE001 - the outcome is what is measured
        out = f"{type(e).__name__}: {str(e)[:200]}"
    print(f"wall {time.perf_counter() - t:.2f} s, CPU {time.process_time() - c:.2f} s: {out}", flush=True)


def main() -> None:
    case, arg = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
    db = pdbq.connect()
    if case in ("cutset", "cutset_cancel", "blocks", "blocks8", "chains"):
        grid(db, 60, 60)
        db.execute("SELECT PROB(x) FROM v x WHERE x.i < 2 USING GIBBS WITH (steps = 10)")  # grounded
        opt = {"cutset": "cutset = true", "cutset_cancel": "cutset = true", "blocks": "blocks = 'auto'",
               "blocks8": "blocks = 8", "chains": "chains = 1024"}[case]
        if case == "cutset_cancel":
            timed(db, f"SELECT PROB(x) FROM v x WHERE x.i < 2 USING GIBBS WITH ({opt})", cancel_after=1)
        else:
            timed(db, f"SELECT PROB(x) FROM v x WHERE x.i < 2 USING GIBBS WITH ({opt}, time_limit = {arg or 1})")
    elif case in ("exact", "auto"):
        grid(db, 17, 1500)
        db.execute("SELECT PROB(x) FROM v x WHERE x.i < 2 USING GIBBS WITH (steps = 10)")
        extra = ", exact_budget = 100000" if case == "auto" else ""
        timed(db, f"SELECT PROB(x) FROM v x WHERE x.i < 2 USING {case.upper()} WITH (time_limit = {arg or 1}{extra})")
    elif case in ("coref", "corefdist"):
        n, _, limit = (arg or "2000").partition(":")
        coref(db, int(n))
        q = "SELECT MAP(e) FROM e USING ANNEAL" if case == "coref" else "SELECT DIST(e) FROM e USING GIBBS"
        timed(db, f"{q} WITH (time_limit = {limit or 1})")
    elif case in ("given", "inlist"):
        n = int(arg or (20000 if case == "given" else 300000))
        db.execute(f"CREATE TABLE t AS SELECT * FROM range({max(n, 1000)}) r(i)")
        db.execute("CREATE VARIABLE v(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t)")
        db.execute("CREATE RULE b WEIGHT 0.5 FUNCTION ISTRUE AS v(i) :- t(i)")
        if case == "given":
            sql = "SELECT PROB(x) FROM v x WHERE x.i = 0 GIVEN " + ", ".join(f"v({i}) = TRUE" for i in range(1, n))
        else:
            sql = "SELECT PROB(x) FROM v x WHERE x.i IN (" + ", ".join(str(i) for i in range(n)) + ")"
        timed(db, sql, cancel_after=1)
    else:
        raise SystemExit(__doc__)
    os._exit(0)  # a cancel timer may still be pending


if __name__ == "__main__":
    main()
