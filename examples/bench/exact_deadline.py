"""How far past its deadline exact elimination runs: per network, the time of a full
``exact_marginals`` and, with deadlines at a share of it, when the call ends with
`TimeLimitError` (overrun = end - deadline), on the compiled (small cliques) and numpy paths.

Networks: the UAI files that ``examples/bench/unseen_networks.py`` caches (run it once first,
``--cache`` as there). Usage: ``python examples/bench/exact_deadline.py [--only link munin]``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from pdbq.errors import TimeLimitError
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.io.uai import read_uai_graph


def main() -> None:
    p = argparse.ArgumentParser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    p.add_argument("--cache", default=str(Path(base) / "pdbq-bench" / "unseen"))
    p.add_argument("--only", nargs="*", default=["link", "munin", "pigs", "andes"])
    p.add_argument("--shares", nargs="*", type=float, default=[0.1, 0.5])
    a = p.parse_args()
    exact_marginals(read_uai_graph(str(Path(a.cache) / "asia.uai")).graph)  # compile / load the kernels
    print(f"{'network':10} {'full s':>7} " + " ".join(f"{f'overrun@{s:g}':>12}" for s in a.shares))
    for name in a.only:
        uai = Path(a.cache) / f"{name}.uai"
        evid = next(Path(a.cache).glob(f"{name}.e*.evid"), None)
        g = read_uai_graph(str(uai), str(evid) if evid else None).graph
        t = time.perf_counter()
        exact_marginals(g, max_table=2**26)
        full = time.perf_counter() - t
        cells = []
        for share in a.shares:
            t = time.perf_counter()
            deadline = t + share * full
            try:
                exact_marginals(g, max_table=2**26, deadline=deadline)
                cells.append("finished")
            except TimeLimitError:
                cells.append(f"{(time.perf_counter() - deadline) * 1e3:.0f} ms")
        print(f"{name:10} {full:7.2f} " + " ".join(f"{c:>12}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
