"""Where the time of one probabilistic query goes, stage by stage.

    python examples/bench/query_latency.py                    # Grids_12 and Promedus_24
    python examples/bench/query_latency.py --runs 9 --only Grids_12

A single-variable ``SELECT v.id, DIST(v) FROM net v WHERE v.id = 7 USING EXACT`` on a database
fresh after `read_uai` ("fresh"), and the same query again on it ("repeat", its graph and exact
result served from the query-graph cache). Each stage is timed by a thin wrapper around the
function that does it (no profiler: cProfile multiplies the cost of Python-heavy stages such as
exact inference several times), median over ``--runs`` fresh databases, in this process's CPU
time (what the query costs; on a shared machine wall time adds the waits for a core) and wall
time. "pdbq overhead" is the whole query minus inference. Run it against another checkout with
``PYTHONPATH=<checkout>`` to compare (stages a version does not have are left out).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from instances import DATA  # noqa: E402

import pdbq  # noqa: E402
from pdbq.io import read_uai  # noqa: E402

# (label, module, attribute): the function doing the stage, looked up where its caller finds it
STAGES = [
    ("parse (sqlglot)", "pdbq.api.database", "_parse_script"),
    ("catalog definitions", "pdbq.planning.plan", "_definitions"),
    ("store sync: maps, fingerprints, imports", "pdbq.planning.plan", "prepare_store"),
    ("store sync: maps, fingerprints, imports", "pdbq.planning.plan", "checked_store"),
    ("store sync: maps, fingerprints, imports", "pdbq.planning.plan", "sync"),
    ("x_q by DuckDB", "pdbq.planning.plan", "_select_xq"),
    ("evidence", "pdbq.planning.plan", "resolve_evidence"),
    ("evidence", "pdbq.planning.plan", "check_evidence_possible"),
    ("graph: token, cache, region, arrays", "pdbq.planning.plan", "build_graph"),
    ("inference (exact)", "pdbq.planning.execute", "answer"),
    ("whole query", "pdbq.api.database.Database", "execute"),
]
TIMES: dict[str, list[float]] = {}


def _wrap(label: str, fn):
    @functools.wraps(fn)
    def timed(*args, **kwargs):
        c0, t0 = time.process_time(), time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            acc = TIMES.setdefault(label, [0.0, 0.0])
            acc[0] += time.process_time() - c0
            acc[1] += time.perf_counter() - t0

    return timed


def install() -> None:
    from pdbq.catalog.store import Catalog  # noqa: PLC0415

    if hasattr(Catalog, "definitions"):
        Catalog.definitions = _wrap("catalog definitions", Catalog.definitions)
    else:  # older versions: two lookups
        Catalog.variables = _wrap("catalog definitions", Catalog.variables)
        Catalog.rules = _wrap("catalog definitions", Catalog.rules)
    for label, module, attr in STAGES:
        if label == "catalog definitions":
            continue
        mod_name, _, cls = module.rpartition(".") if module.endswith("Database") else (module, "", "")
        owner = getattr(importlib.import_module(mod_name), cls) if cls else importlib.import_module(module)
        if hasattr(owner, attr):
            setattr(owner, attr, _wrap(label, getattr(owner, attr)))


def measure(db, q) -> dict[str, tuple[float, float]]:
    TIMES.clear()
    db.execute(q)
    return {k: (v[0], v[1]) for k, v in TIMES.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", default=["Grids_12", "Promedus_24"])
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    install()
    q = "SELECT v.id, DIST(v) AS d FROM net v WHERE v.id = 7 USING EXACT"
    for name in args.only:
        evid = DATA / f"{name}.uai.evid"

        def fresh():
            db = pdbq.connect()
            read_uai(db, DATA / f"{name}.uai", "net", evidence=evid if evid.exists() else None)
            return db

        warm = fresh()
        warm.execute(q)
        warm.close()
        runs: dict[str, list[dict[str, tuple[float, float]]]] = {"fresh": [], "repeat": []}
        loads: list[tuple[float, float]] = []
        for _ in range(args.runs):
            c0, t0 = time.process_time(), time.perf_counter()
            db = fresh()
            loads.append((time.process_time() - c0, time.perf_counter() - t0))
            runs["fresh"].append(measure(db, q))
            runs["repeat"].append(measure(db, q))
            db.close()
        print(f"\n{name}: ms, median of {args.runs} (CPU time of this process / wall time)")
        print(f"  {'stage':42s} {'fresh cpu':>9s} {'wall':>7s} {'repeat cpu':>10s} {'wall':>7s}")
        labels = list(dict.fromkeys(label for label, _, _ in STAGES))

        def med(kind, label, i):
            # a stage a query skipped (e.g. the store check kept from the last query) took 0
            return statistics.median([r[label][i] if label in r else 0.0 for r in runs[kind]]) * 1e3

        for label in labels:
            if not any(label in r for r in runs["fresh"]):
                continue
            print(f"  {label:42s} {med('fresh', label, 0):9.1f} {med('fresh', label, 1):7.1f} "
                  f"{med('repeat', label, 0):10.1f} {med('repeat', label, 1):7.1f}")
        inf = "inference (exact)"
        over = {(k, i): statistics.median([r["whole query"][i] - r.get(inf, (0.0, 0.0))[i] for r in v])
                for k, v in runs.items() for i in (0, 1)}
        print(f"  {'pdbq overhead (whole - inference)':42s} {over['fresh', 0] * 1e3:9.1f} {over['fresh', 1] * 1e3:7.1f} "
              f"{over['repeat', 0] * 1e3:10.1f} {over['repeat', 1] * 1e3:7.1f}")
        # the import's own cost (connect + read_uai): what it now does for the first query shows here
        print(f"  {'(connect + read_uai, before the query)':42s} {statistics.median(c for c, _ in loads) * 1e3:9.1f} "
              f"{statistics.median(w for _, w in loads) * 1e3:7.1f}")


if __name__ == "__main__":
    main()
