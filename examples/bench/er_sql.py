"""Entity resolution from SQL against the Python front door, one process: the same stored pair model.

For each data set: `pdbq.dedupe(..., model_name=..., probabilities=POSTERIOR_CONFIG)` fits and
stores the model and samples the pair posterior (Python); then, in SQL on the same database, a
cluster relation whose one rule is `WEIGHT MODEL '<name>' ON <records>` over the front door's
candidate pairs answers MAP(e), every candidate pair's PROB(a = b) / STDERR(a = b) (one query,
the same sampler settings), and EXPLAIN MATCH over all pairs. Printed: pairwise / B³ F1 of both
MAP clusterings against the gold entities, how many pair probabilities agree within 4 combined
standard errors + 0.02, the largest difference, and wall seconds of each step.

    python examples/bench/er_sql.py [--sets fz,cora]

Data: Fodors–Zagats and Cora from the shared data (PDBQ_TEST_DATA or ../shared/data).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coref_data import load_cora, load_restaurants  # noqa: E402

import pdbq  # noqa: E402
from pdbq.coref.metrics import b_cubed, pairwise  # noqa: E402
from pdbq.linkage import POSTERIOR_CONFIG, dedupe  # noqa: E402

SETS = {"fz": ("restaurants", ["name", "addr", "city", "phone", "type"], load_restaurants),
        "cora": ("cora", ["author", "title", "venue", "year"], load_cora)}


def run(name: str) -> dict:
    table, fields, loader = SETS[name]
    db = pdbq.connect()
    con = db.duckdb
    con.execute("SET threads = 1")
    loader(con)
    gold = con.execute(f"SELECT id, entity FROM {table}_gold ORDER BY id").fetchnumpy()
    cfg = replace(POSTERIOR_CONFIG, seed=1)
    t0 = time.perf_counter()
    fit = dedupe(table, id="id", fields=fields, con=db, model_name=name, probabilities=cfg)
    t_py = time.perf_counter() - t0
    ids = fit.ids
    con.register("__p", pa.table({"a": ids[fit.scores.a], "b": ids[fit.scores.b]}))
    con.execute("CREATE TABLE pairs AS SELECT least(a, b) AS a, greatest(a, b) AS b FROM __p")
    con.unregister("__p")
    db.execute(f"CREATE VARIABLE ent(id BIGINT) DOMAIN CLUSTER FROM (SELECT id FROM {table})")
    db.execute(f"CREATE RULE fs WEIGHT MODEL '{name}' ON {table} FUNCTION EQUAL AS ent(a) = ent(b) :- pairs(a, b)")
    t0 = time.perf_counter()
    m = db.execute("SELECT e.id, MAP(e) AS cluster FROM ent AS e ORDER BY e.id "
                   "WITH (sweeps = 20, temperature = 0.5, chains = 1, p_split_merge = 0.2, init = 'components')").arrow()
    t_map = time.perf_counter() - t0
    t0 = time.perf_counter()
    p = db.execute(
        "SELECT a.id AS l, b.id AS r, PROB(a = b) AS p, STDERR(a = b) AS se FROM ent AS a JOIN ent AS b "
        "ON a.id < b.id JOIN pairs ON pairs.a = a.id AND pairs.b = b.id "
        f"WITH (chains = {cfg.chains}, burn_in = 50, sweeps = {cfg.sweeps}, p_split_merge = {cfg.p_split_merge}, "
        "seed = 2, init = 'components')").arrow()
    t_prob = time.perf_counter() - t0
    t0 = time.perf_counter()
    expl = db.execute("EXPLAIN MATCH ent").arrow()
    t_expl = time.perf_counter() - t0
    py = fit.pairs.to_pydict()
    key = lambda a, b: (min(a, b), max(a, b))  # noqa: E731
    want = {key(a, b): (q, s) for a, b, q, s in zip(py["id_l"], py["id_r"], py["match_probability"], py["se"])}
    got = p.to_pydict()
    diff = np.array([abs(q - want[(a, b)][0]) for a, b, q in zip(got["l"], got["r"], got["p"])])
    tol = np.array([4 * np.hypot(s, want[(a, b)][1]) + 0.02 for a, b, s in zip(got["l"], got["r"], got["se"])])
    ent = gold["entity"]
    f_py = fit.clusters.column("cluster").to_numpy()
    f_sql = m.column("cluster").to_numpy()
    db.close()
    return {"set": name, "records": ids.size, "pairs": len(got["l"]), "expl_rows": expl.num_rows,
            "py_pw": pairwise(f_py, ent).f1, "sql_pw": pairwise(f_sql, ent).f1,
            "py_b3": b_cubed(f_py, ent).f1, "sql_b3": b_cubed(f_sql, ent).f1,
            "agree": float(np.mean(diff <= tol)), "max_diff": float(diff.max()), "t_py": t_py, "t_map": t_map,
            "t_prob": t_prob, "t_expl": t_expl, "t_py_post": fit.diagnostics["seconds_posterior"]}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="fz,cora")
    args = ap.parse_args(argv)
    run("fz")  # warm-up: imports and numba compilation
    print("| data | records | candidate pairs | pairwise F1 Python / SQL | B³ F1 Python / SQL | pair P agree (4 se + 0.02) "
          "| max diff | Python fit+MAP+posterior s (posterior) | SQL MAP s | SQL PROB(a = b) s | EXPLAIN MATCH s (rows) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.sets.split(","):
        r = run(name)
        print(f"| {r['set']} | {r['records']:,} | {r['pairs']:,} | {r['py_pw']:.4f} / {r['sql_pw']:.4f} | "
              f"{r['py_b3']:.4f} / {r['sql_b3']:.4f} | {r['agree']:.3f} | {r['max_diff']:.3f} | "
              f"{r['t_py']:.2f} ({r['t_py_post']:.2f}) | {r['t_map']:.2f} | {r['t_prob']:.2f} | "
              f"{r['t_expl']:.2f} ({r['expl_rows']:,}) |", flush=True)


if __name__ == "__main__":
    main()
