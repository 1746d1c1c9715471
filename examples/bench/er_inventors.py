"""Large entities: pairwise precision / recall / F1 and CPU seconds of `pdbq.dedupe` on the
inventor generator (tests/inventors_data.py: careers over decades, changing employers, homes
and co-inventors, name variants and initials, entities up to 1,000 mentions, co-inventor
surnames and classification codes as lists), natural fields, no labels, defaults (automatic
blocking).

    python examples/bench/er_inventors.py [--records 150000] [--seed 0]

Prints one Markdown row: mentions, inventors, largest entity, true pairs, candidate pairs, P, R,
F1, CPU s (this process: estimation, blocking, MAP), wall s; then the groups and blocking rules.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import duckdb
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pdbq.coref.metrics import pairwise  # noqa: E402
from pdbq.linkage import dedupe  # noqa: E402

FIELDS = ["first_name", "last_name", "city", "state", "country", "assignee", "coinventors", "classes"]


def _inventors():
    spec = importlib.util.spec_from_file_location("pdbq_tests_inventors_data", ROOT / "tests" / "inventors_data.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.inventors


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=150_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    tbl, ent = _inventors()(args.records, seed=args.seed)
    con = duckdb.connect()
    con.register("src", tbl)
    con.execute("CREATE TABLE mentions AS SELECT * FROM src")
    con.unregister("src")
    t0, w0 = time.process_time(), time.perf_counter()
    res = dedupe("mentions", id="rid", fields=FIELDS, con=con)
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    pw = pairwise(res.clusters.column("cluster").to_numpy(), ent)
    sizes = np.bincount(ent)
    print("| mentions | inventors | largest | true pairs | candidate pairs | P | R | F1 | CPU s | wall s |\n"
          "|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {tbl.num_rows:,} | {sizes.size:,} | {sizes.max():,} | {int((sizes * (sizes - 1) // 2).sum()):,} | "
          f"{res.diagnostics['candidate_pairs']:,} | {pw.precision:.4f} | {pw.recall:.4f} | {pw.f1:.4f} | {cpu:.1f} | {wall:.1f} |")
    print("groups:", res.pair_model.diagnostics.get("groups"), "| blocking:", res.blocking)
    for w in res.warnings:
        print("warning:", w)
    con.close()


if __name__ == "__main__":
    main()
