"""AUTO's exact-inference cost estimate against measured exact times on 15 networks.

    python examples/bench/auto_cost.py            # all 15 (about 2 minutes on 2 cores)
    python examples/bench/auto_cost.py --quick    # skip instances whose estimate is over 10 s

For each network (examples/bench/instances.py): the estimate `choose_method` computes from the
min-fill order (`pdbq.inference.exact.auto.estimate_exact_seconds`), the measured CPU and wall time of
`exact_marginals` on the whole graph (median of 3 runs; 1 run when over 3 s), the ratio CPU / estimate, and
the decision AUTO takes with the default exact_budget. An estimate is useful when the ratio
stays within a small factor: AUTO must not send a model to sampling whose exact answer would
come within the budget (ratio well above 1 near the budget is the failure to look for).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from instances import instances  # noqa: E402

from pdbq.inference.exact.auto import DEFAULT_EXACT_BUDGET, choose_method  # noqa: E402
from pdbq.inference.exact.elimination import exact_marginals  # noqa: E402
from pdbq.io import read_uai_graph  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    warm = read_uai_graph(instances(which="uai")[5].path).graph  # compile/load numba kernels first
    exact_marginals(warm)
    print(f"{'instance':20s} {'vars':>5s} {'width':>5s} {'entries':>12s} {'estimated':>10s} {'cpu':>9s} {'wall':>9s} "
          f"{'ratio':>6s}  AUTO (budget {DEFAULT_EXACT_BUDGET:g} s)")
    for inst in instances():
        g = read_uai_graph(inst.path, inst.evid).graph
        d = choose_method(g, max_seconds=float("inf"))
        est = d.estimated_seconds
        if est is None:
            print(f"{inst.name:20s} {g.n_vars:5d} {'>' + str(d.width):>5s}  over max_table")
            continue
        if args.quick and est > 10:
            print(f"{inst.name:20s} {g.n_vars:5d} {d.width:5d} {'':>12s} {est:10.3f}   skipped (--quick)")
            continue
        times, cpu = [], []
        for _ in range(3):
            t0, c0 = time.perf_counter(), time.process_time()
            r = exact_marginals(g)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            if times[-1] > 3:
                break
        wall = statistics.median(times)
        # CPU time of this process: on a shared machine the wall time also counts the waits for a
        # core; exact_marginals runs on one thread, so on an idle machine wall ~ CPU
        measured = statistics.median(cpu)
        auto = "EXACT" if est <= DEFAULT_EXACT_BUDGET else "sampling"
        right = "ok" if (auto == "EXACT") == (measured <= DEFAULT_EXACT_BUDGET) else "WRONG SIDE"
        print(f"{inst.name:20s} {g.n_vars:5d} {r.width:5d} {d.table_size:12,d} {est:10.3f} {measured:9.3f} {wall:9.3f} "
              f"{measured / est:6.2f}  {auto} ({right})")


if __name__ == "__main__":
    main()
