"""Exact inference side by side: pdbq, pyAgrum and pgmpy on the same UAI files, in one process.

    python examples/bench/exact_peers.py                 # the 8 UAI 2014 instances
    python examples/bench/exact_peers.py --generated     # also the 7 generated models
    python examples/bench/exact_peers.py --only Grids_12 --repeats 5

Every system gets the same network: the file is parsed once by pdbq (`pdbq.io.read_uai_graph`,
evidence from the `.evid` file) and the peers' models are built from those arrays (both peers'
own UAI readers fail on or misread several of these files). Building a model is not timed for
anyone (pdbq's `read_uai` into a fresh database, pyAgrum's MarkovRandomField, pgmpy's
MarkovNetwork); a query is:

- single: the marginal of one variable. pdbq: ``SELECT v.id, DIST(v) FROM net v WHERE v.id = k
  USING EXACT`` on a database fresh after `read_uai` ("fresh") and the same query again
  ("repeat", served from the query-graph cache); pyAgrum: a new ShaferShenoyMRFInference,
  evidence, ``makeInference`` and ``posterior``; pgmpy: VariableElimination.query.
- all: every variable's marginal. pdbq: ``SELECT v.id, DIST(v) FROM net v USING EXACT`` on a
  fresh database; pyAgrum: one inference and every posterior; pgmpy: BeliefPropagation
  calibrated once and queried per variable (only with --pgmpy-all: minutes on some instances).

Times are medians over 3 query variables (first, middle and last free variable) x ``--repeats``
runs (all-marginals: ``--all-repeats`` runs), pdbq and pyAgrum interleaved run by run; ratios
are pdbq / peer from the same process (the machine is shared: ratios are the
numbers to compare, absolute times move with the load).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from instances import instances  # noqa: E402

import pdbq  # noqa: E402
from pdbq.io import read_uai, read_uai_graph  # noqa: E402

try:
    import pyagrum as gum
except ImportError:  # older releases
    try:
        import pyAgrum as gum  # type: ignore[no-redef]
    except ImportError:
        gum = None


def scopes_and_tables(graph):
    """Per file factor: (scope as a tuple of variable ids, potential table in scope order)."""
    out = []
    for f in range(graph.n_factors):
        scope = tuple(int(v) for v in graph.factor_vars[graph.factor_offsets[f]:graph.factor_offsets[f + 1]])
        shape = tuple(int(graph.cardinality[v]) for v in scope)
        size = int(np.prod(shape)) if shape else 1
        t0 = int(graph.table_offset[f])
        log_table = graph.tables[t0:t0 + size]
        # scaled to a largest entry of 1 (the marginals do not change): the peers multiply tables
        # in probability space, where Alchemy_11's raw tables overflow (log10 Z = 606) to NaN
        top = np.max(log_table) if np.isfinite(np.max(log_table)) else 0.0
        out.append((scope, np.exp(log_table - top).reshape(shape)))
    return out


def merged(factors):
    """Factors over the same variable set multiplied into one (pyAgrum keeps one per set)."""
    by_set: dict[frozenset, tuple[tuple, np.ndarray]] = {}
    for scope, table in factors:
        key = frozenset(scope)
        if key not in by_set:
            by_set[key] = (scope, table.copy())
            continue
        s0, t0 = by_set[key]
        by_set[key] = (s0, t0 * np.transpose(table, [scope.index(v) for v in s0]))
    return list(by_set.values())


def build_pyagrum(graph, factors):
    m = gum.MarkovRandomField()
    for v in range(graph.n_vars):
        m.add(gum.RangeVariable(f"v{v}", f"v{v}", 0, int(graph.cardinality[v]) - 1))
    for scope, table in merged(factors):
        m.addFactor([f"v{v}" for v in scope])
        pot = m.factor({f"v{v}" for v in scope})
        names = pot.names  # the first name changes fastest
        order = [scope.index(int(n[1:])) for n in reversed(names)]
        pot.fillWith(np.transpose(table, order).ravel().tolist())
    return m


def build_pgmpy(graph, factors):
    from pgmpy.factors.discrete import DiscreteFactor
    try:
        from pgmpy.models import DiscreteMarkovNetwork as MarkovNetwork
    except ImportError:  # pgmpy < 1.0
        from pgmpy.models import MarkovNetwork

    m = MarkovNetwork()
    m.add_nodes_from([f"v{v}" for v in range(graph.n_vars)])
    for scope, _ in factors:
        m.add_edges_from((f"v{a}", f"v{b}") for i, a in enumerate(scope) for b in scope[i + 1:])
    m.add_factors(*[
        DiscreteFactor([f"v{v}" for v in scope], [int(graph.cardinality[v]) for v in scope], table.ravel())
        for scope, table in factors
    ])
    return m


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def fresh_db(inst):
    db = pdbq.connect()
    read_uai(db, inst.path, "net", evidence=inst.evid)
    return db


def run(inst, repeats: int, pgmpy_all: bool, with_pgmpy: bool, all_repeats: int = 0):
    model = read_uai_graph(inst.path, inst.evid)
    g = model.graph
    free = np.flatnonzero(g.evidence < 0)
    targets = [int(free[0]), int(free[len(free) // 2]), int(free[-1])]
    evidence = {f"v{v}": int(x) for v, x in model.evidence.items()}
    factors = scopes_and_tables(g)
    row = {"name": inst.name, "vars": g.n_vars}
    # pdbq and pyAgrum interleaved run by run (the machine's load moves: each pair sees the same)
    m = build_pyagrum(g, factors) if gum is not None else None
    fresh, repeat, all_fresh, checks = [], [], [], {}
    single, every = [], []
    for k in targets:
        q = f"SELECT v.id, DIST(v) AS d FROM net v WHERE v.id = {k} USING EXACT"
        for _ in range(repeats):
            db = fresh_db(inst)
            t, r = timed(lambda: db.execute(q))
            fresh.append((t, r.diagnostics["inference_seconds"]))
            t, _ = timed(lambda: db.execute(q))
            repeat.append(t)
            dist = dict(r.arrow().column("d")[0].as_py())  # value -> probability
            checks[k] = np.asarray([dist[x] for x in sorted(dist)], dtype=float)
            db.close()
            if m is not None:
                def one():
                    ie = gum.ShaferShenoyMRFInference(m)
                    ie.setEvidence(evidence)
                    ie.makeInference()
                    return ie.posterior(f"v{k}").toarray()
                try:
                    t, p = timed(one)
                except Exception as e:  # noqa: BLE001 - a peer's failure is a result to report
                    row["agrum_error"] = f"{type(e).__name__}: {e}"[:100]
                    m = None
                    continue
                single.append(t)
                ref = checks[k][: p.shape[0]]
                row["agrees"] = row.get("agrees", True) and bool(np.allclose(ref, p, atol=1e-6))
    for _ in range(all_repeats or repeats):
        db = fresh_db(inst)
        t, r = timed(lambda: db.execute("SELECT v.id, DIST(v) AS d FROM net v USING EXACT"))
        all_fresh.append(t)
        db.close()
        if m is not None:
            def all_():
                ie = gum.ShaferShenoyMRFInference(m)
                ie.setEvidence(evidence)
                ie.makeInference()
                return [ie.posterior(f"v{v}") for v in range(g.n_vars)]
            t, _ = timed(all_)
            every.append(t)
    row["pdbq_single"] = med([t for t, _ in fresh])
    row["pdbq_overhead"] = med([t - i for t, i in fresh])
    row["pdbq_repeat"] = med(repeat)
    row["pdbq_all"] = med(all_fresh)
    row["n_single"], row["n_all"] = len(fresh), len(all_fresh)
    if single:
        row["agrum_single"] = med(single)
    if every:
        row["agrum_all"] = med(every)
    # pgmpy
    if with_pgmpy:
        from pgmpy.inference import BeliefPropagation, VariableElimination

        m = build_pgmpy(g, factors)
        ev = {k: int(v) for k, v in evidence.items()}
        single = []
        for k in targets:
            def one():
                return VariableElimination(m).query([f"v{k}"], evidence=ev or None, show_progress=False)
            t, _ = timed(one)
            single.append(t)
            if t > 20:  # one run per variable is enough to place a slow peer
                break
        row["pgmpy_single"] = med(single)
        if pgmpy_all:
            def all_():
                bp = BeliefPropagation(m)
                bp.calibrate()
                return [bp.query([f"v{v}"], evidence=ev or None, show_progress=False) for v in free]
            try:
                row["pgmpy_all"], _ = timed(all_)
            except Exception as e:  # noqa: BLE001 - a peer's failure is a result to report
                row["pgmpy_all_error"] = f"{type(e).__name__}: {e}"[:60]
    return row


def fmt(x):
    return "    -   " if x is None or x != x else f"{x * 1e3:8.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--generated", action="store_true", help="also the 7 generated models")
    ap.add_argument("--only", nargs="*", help="instance names")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--all-repeats", type=int, default=0, help="runs of all-marginals (default: --repeats)")
    ap.add_argument("--no-pgmpy", action="store_true")
    ap.add_argument("--pgmpy-all", action="store_true", help="pgmpy all-marginals by belief propagation (slow)")
    args = ap.parse_args()
    if gum is None:
        print("pyAgrum is not installed (pip install -e '.[bench]'): pdbq and pgmpy only")
    todo = instances(which="all" if args.generated else "uai")
    if args.only:
        todo = [i for i in todo if i.name in args.only]
    warm = fresh_db(todo[0])  # numba kernels compiled or loaded before any timing
    warm.execute("SELECT v.id, DIST(v) FROM net v WHERE v.id = 0 USING EXACT")
    print("times in ms (medians); ratio = pdbq / pyAgrum (< 1: pdbq faster)")
    print(f"{'instance':20s} {'pdbq 1':>8s} {'overhd':>8s} {'repeat':>8s} {'agrum 1':>8s} {'ratio':>6s} {'pgmpy 1':>8s} |"
          f" {'pdbq all':>8s} {'agrum all':>9s} {'ratio':>6s} {'pgmpy all':>9s}  agree")
    for inst in todo:
        r = run(inst, args.repeats, args.pgmpy_all, not args.no_pgmpy, args.all_repeats)
        ratio1 = r["pdbq_single"] / r["agrum_single"] if "agrum_single" in r else float("nan")
        ratio_all = r["pdbq_all"] / r["agrum_all"] if "agrum_all" in r else float("nan")
        print(f"{r['name']:20s} {fmt(r['pdbq_single'])} {fmt(r['pdbq_overhead'])} {fmt(r['pdbq_repeat'])} "
              f"{fmt(r.get('agrum_single'))} {ratio1:6.2f} {fmt(r.get('pgmpy_single'))} | {fmt(r['pdbq_all'])} "
              f"{fmt(r.get('agrum_all')):>9s} {ratio_all:6.2f} {fmt(r.get('pgmpy_all')):>9s}  {r.get('agrees', '-')}"
              f"  (n={r['n_single']}/{r['n_all']})",
              flush=True)
        if "agrum_error" in r:
            print(f"    pyAgrum failed: {r['agrum_error']}")
        if "pgmpy_all_error" in r:
            print(f"    pgmpy BeliefPropagation failed: {r['pgmpy_all_error']}")


if __name__ == "__main__":
    main()
