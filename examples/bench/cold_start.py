"""Cold start: what a fresh install pays for pdbq's numba kernels, and what the first query sees.

Each measurement is a fresh subprocess with its own ``NUMBA_CACHE_DIR``:

1. empty cache: `pdbq.answers.warmup.warm_up` for the ``core`` and ``moves`` tiers (seconds and
   kernel signatures compiled);
2. the same cache again (a later process): the same warm-up, now loading from the cache;
3. empty cache: ``pdbq -f examples/movies.sql`` (the README's first command; its QAM query has
   ``time_limit = 5``): wall time, NULL cells printed, and how often the one-time notice appears.

Usage: ``python examples/bench/cold_start.py [--skip-demo]``
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WARM = """
import time
t = time.perf_counter()
from pdbq.answers.warmup import warm_up
print("import", time.perf_counter() - t)
for tier in ("core", "moves"):
    w = warm_up(tier)
    print(tier, w.seconds, w.compiled)
"""


def _env(cache: str) -> dict:
    return dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=str(ROOT))


def _warm(cache: str) -> dict:
    p = subprocess.run([sys.executable, "-c", WARM], env=_env(cache), capture_output=True, text=True, check=True)
    return {line.split()[0]: line.split()[1:] for line in p.stdout.splitlines()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--skip-demo", action="store_true", help="skip the movies.sql run (another full compile)")
    args = ap.parse_args()

    def out(k: str, v: str) -> None:
        print(f"{k:<52} {v}", flush=True)

    with tempfile.TemporaryDirectory() as cache:
        for label in ("empty cache", "cached (a later process)"):
            r = _warm(cache)
            out(f"{label}: import pdbq.answers.warmup (s)", f"{float(r['import'][0]):.2f}")
            for tier in ("core", "moves"):
                s, n = r[tier]
                out(f"{label}: warm-up '{tier}' (s, signatures compiled)", f"{float(s):.2f}, {n}")
    if not args.skip_demo:
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as cwd:
            t = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "pdbq", "-f", str(ROOT / "examples" / "movies.sql")], cwd=cwd,
                               env=_env(cache), capture_output=True, text=True)
            text = p.stdout + p.stderr
            out("movies.sql, empty cache: wall time (s)", f"{time.perf_counter() - t:.1f} (exit {p.returncode})")
            out("... NULL cells printed", str(text.count("NULL")))
            out("... compile notices", str(text.count("first use on this machine")))
    out("machine", f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
