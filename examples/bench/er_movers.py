"""People who moved: pairwise precision / recall / F1 and CPU seconds of `pdbq.dedupe` on the
movers generator (tests/movers_data.py: households, typos, swaps, blanks, new addresses and
phones), natural fields, no labels, defaults.

    python examples/bench/er_movers.py [--records 150000] [--seed 0]

Prints one Markdown row: records, true pairs, candidate pairs, P, R, F1, CPU s (this process:
loading, estimation, blocking, MAP), wall s, and the fitted field interactions.
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

FIELDS = ["first_name", "last_name", "dob", "email", "phone", "address", "city", "zip"]


def _movers():
    spec = importlib.util.spec_from_file_location("pdbq_tests_movers_data", ROOT / "tests" / "movers_data.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.movers


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=150_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    tbl, ent = _movers()(args.records, seed=args.seed)
    con = duckdb.connect()
    con.register("src", tbl)
    con.execute("CREATE TABLE people AS SELECT * FROM src")
    con.unregister("src")
    t0, w0 = time.process_time(), time.perf_counter()
    res = dedupe("people", id="rid", fields=FIELDS, con=con)
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    pw = pairwise(res.clusters.column("cluster").to_numpy(), ent)
    sizes = np.bincount(ent)
    print("| records | true pairs | candidate pairs | P | R | F1 | CPU s | wall s |\n|---|---|---|---|---|---|---|---|")
    print(f"| {tbl.num_rows:,} | {int((sizes * (sizes - 1) // 2).sum()):,} | {res.diagnostics['candidate_pairs']:,} | "
          f"{pw.precision:.4f} | {pw.recall:.4f} | {pw.f1:.4f} | {cpu:.1f} | {wall:.1f} |")
    print("interactions (bits):", ", ".join(f"{r['field']}&{r['given']} {r['bits']:.1f}"
                                             for r in res.pair_model.interactions_table()))
    con.close()


if __name__ == "__main__":
    main()
