"""Cold start: what a fresh install pays before pdbq's first answers, door by door.

Every measurement is a fresh subprocess; "empty cache" is a new ``NUMBA_CACHE_DIR`` of its own.
Wall time is the subprocess's; CPU time is its user + system time (from ``wait4``), so a loaded
machine shows up as wall ≫ CPU. Scenarios (``--only a,b``; default all):

* ``import``: ``import pdbq`` (seconds, peak RSS, heavy modules loaded); ``pdbq --help``; ``pdbq
  dedupe --help``;
* ``families``: empty cache, each warm-up tier (`pdbq.answers.warmup`) and the dedupe warm-up in
  one process, the compile seconds per kernel family and the ten costliest kernels (numba's
  compile events), then the same in a second process (loading from the cache);
* ``warmup``: ``pdbq warm-up`` on an empty cache (all kernels, parallel processes);
* ``demo``: ``pdbq -f examples/movies.sql`` on an empty cache, then again (warm): wall, CPU,
  when the first compile notice came, the longest silence and what was printed before it;
* ``dedupe``: first ``pdbq dedupe`` of 40 records on an empty cache;
* ``grid``: first default query (AUTO) on a 20×20 Ising grid on an empty cache;
* ``anneal``: first ``USING ANNEAL`` MAP on an empty cache;
* ``prewarmed``: the demo, dedupe, grid and anneal runs again, each on a cache ``pdbq warm-up``
  filled (what a user who ran the README's install line sees).

Usage: ``python examples/bench/cold_start.py [--only import,families,...]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable

FAMILIES = """
import json, time
from pdbq.progress import watch_compiles
from pdbq.answers.warmup import warm_up
from pdbq.linkage.warmup import warm_up_dedupe
out = {}
with watch_compiles() as w:
    for tier in ("core", "moves", "anneal", "wide", "wide-moves", "dedupe"):
        t = time.perf_counter()
        before = dict(w.kernels)
        warm_up_dedupe() if tier == "dedupe" else warm_up(tier)
        fam = {}
        for k, s in w.kernels.items():
            d = s - before.get(k, 0.0)
            if d > 0:
                from pdbq.progress import kernel_family
                f = kernel_family(k.rsplit(".", 1)[0])
                fam[f] = fam.get(f, 0.0) + d
        out[tier] = {"seconds": time.perf_counter() - t, "families": fam}
        w.settle()
    out["kernels"] = sorted(w.kernels.items(), key=lambda kv: -kv[1])[:10]
print(json.dumps(out))
"""

GRID = """
import pdbq, time
db = pdbq.connect()
db.execute('''CREATE TABLE cells AS SELECT x, y FROM range(20) a(x), range(20) b(y);
CREATE TABLE edges AS SELECT a.x * 20 + a.y AS i, b.x * 20 + b.y AS j FROM cells a, cells b
  WHERE (a.x = b.x AND b.y = a.y + 1) OR (a.y = b.y AND b.x = a.x + 1);
CREATE TABLE ids AS SELECT x * 20 + y AS i FROM cells;
CREATE VARIABLE spin(i INT) DOMAIN BOOLEAN FROM (SELECT i FROM ids);
CREATE RULE couple WEIGHT 0.3 FUNCTION EQUAL AS spin(a) = spin(b) :- edges(a, b);
CREATE RULE field WEIGHT 0.1 AS spin(^a) :- ids(a), a % 7 = 0;''')
r = db.execute("SELECT s.i, PROB(s) FROM spin AS s WHERE s.i < 5 USING AUTO WITH (seed = 1)", progress=True)
print(r.diagnostics["method"], [None if x is None else round(x, 6) for x in r.arrow().column(1).to_pylist()],
      r.diagnostics["warnings"][:1], flush=True)
"""

ANNEAL = """
import pdbq
db = pdbq.connect()
db.execute('''CREATE TABLE t(i INT); INSERT INTO t VALUES (1), (2), (3);
CREATE VARIABLE x(i INT) DOMAIN BOOLEAN FROM (SELECT i FROM t);
CREATE RULE r WEIGHT 0.5 FUNCTION EQUAL AS x(a) = x(b) :- t(a), t(b), a < b;
CREATE RULE f WEIGHT 0.2 AS x(^a) :- t(a), a = 2;''')
r = db.execute("SELECT v.i, MAP(v) FROM x AS v USING ANNEAL WITH (seed = 3)", progress=True)
print(r.arrow().to_pylist(), flush=True)
"""


def _records(path: Path) -> None:
    from pdbq.linkage.warmup import _records as rows  # noqa: PLC0415

    path.write_text("id,name,city,born\n" + "".join(f"{i},{n},{c},{b}\n" for i, n, c, b in rows()))


def run(cmd: list[str], cache: str, cwd: str | None = None) -> dict:
    """Run ``cmd``; wall and CPU seconds, the time of the first compile notice, the longest
    silence (stdout and stderr merged) and what came before it, and the output."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[tuple[float, str]] = []

    def read() -> None:
        for line in p.stdout:
            lines.append((time.monotonic() - t0, line.rstrip("\n")))

    th = threading.Thread(target=read, daemon=True)
    th.start()
    _, status, usage = os.wait4(p.pid, 0)
    end = time.monotonic() - t0
    th.join(10)
    gap, before, last_t, last = 0.0, "(start)", 0.0, "(start)"
    for t, text in lines + [(end, "(end)")]:
        if t - last_t > gap:
            gap, before = t - last_t, last
        last_t, last = t, text.split("\r")[-1]
    notice = next((t for t, text in lines if "pdbq: compiling" in text), None)
    return {"wall": end, "cpu": usage.ru_utime + usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024,
            "rc": os.waitstatus_to_exitcode(status), "notice_at": notice, "silence": gap, "before": before[:70],
            "out": "\n".join(t for _, t in lines)}


def out(k: str, v: str) -> None:
    print(f"{k:<58} {v}", flush=True)


def line(label: str, r: dict) -> None:
    notice = "" if r["notice_at"] is None else f"; compile notice at {r['notice_at']:.1f} s"
    out(label, f"{r['wall']:.1f} s wall, {r['cpu']:.1f} s CPU, {r['rss_mib']:.0f} MiB (exit {r['rc']}){notice}; "
               f"longest silence {r['silence']:.1f} s after {r['before']!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="import,families,warmup,demo,dedupe,grid,anneal,prewarmed")
    ap.add_argument("--warmed-cache", metavar="DIR",
                    help="prewarmed: use this cache, which 'pdbq warm-up' already filled, instead of warming a new one")
    args = ap.parse_args()
    only = set(args.only.split(","))
    out("machine", f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at the start")
    demo = [PY, "-m", "pdbq", "-f", str(ROOT / "examples" / "movies.sql")]
    with tempfile.TemporaryDirectory() as work:
        records = Path(work) / "records.csv"
        _records(records)
        dedupe = [PY, "-m", "pdbq", "dedupe", str(records), "--id", "id", "--fields", "name,city,born"]
        grid, anneal = [PY, "-c", GRID], [PY, "-c", ANNEAL]
        if "import" in only:
            with tempfile.TemporaryDirectory() as cache:
                probe = ("import time, sys; t = time.perf_counter(); import pdbq; print(time.perf_counter() - t); "
                         "print([m for m in ('numba', 'duckdb', 'pyarrow', 'pandas', 'dask', 'matplotlib') "
                         "if m in sys.modules])")
                r = run([PY, "-c", probe], cache)
                out("import pdbq (s in-process; heavy modules loaded)", r["out"].replace("\n", "; "))
                line("import pdbq (process)", r)
                line("pdbq --help", run([PY, "-m", "pdbq", "--help"], cache))
                line("pdbq dedupe --help", run([PY, "-m", "pdbq", "dedupe", "--help"], cache))
        if "families" in only:
            with tempfile.TemporaryDirectory() as cache:
                for label in ("empty cache", "cached"):
                    r = run([PY, "-c", FAMILIES], cache)
                    data = json.loads(r["out"].splitlines()[-1])
                    for tier in ("core", "moves", "anneal", "wide", "wide-moves", "dedupe"):
                        fam = ", ".join(f"{f} {s:.1f}" for f, s in sorted(data[tier]["families"].items(),
                                                                           key=lambda kv: -kv[1]))
                        out(f"{label}: warm-up {tier!r} (s; compile s per family)",
                            f"{data[tier]['seconds']:.1f}" + (f"; {fam}" if fam else ""))
                    if label == "empty cache":
                        for k, s in data["kernels"]:
                            out(f"  costliest kernel: {k}", f"{s:.1f} s")
                    line(f"{label}: the whole process", r)
        if "warmup" in only:
            with tempfile.TemporaryDirectory() as cache:
                line("pdbq warm-up, empty cache", run([PY, "-m", "pdbq", "warm-up"], cache))
                line("pdbq warm-up, again (cached)", run([PY, "-m", "pdbq", "warm-up"], cache))
        for name, cmd in (("demo", demo), ("dedupe", dedupe), ("grid", grid), ("anneal", anneal)):
            if name in only:
                with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as cwd:
                    first = run(cmd, cache, cwd)
                    line(f"{name}: first run, empty cache", first)
                    line(f"{name}: second run (warm)", run(cmd, cache, cwd))
                    if name in ("grid", "anneal"):
                        out(f"{name}: answer", first["out"].splitlines()[-1][:100])
        if "prewarmed" in only:
            with tempfile.TemporaryDirectory() as new:
                cache = args.warmed_cache or new
                if not args.warmed_cache:
                    line("pdbq warm-up (for the runs below)", run([PY, "-m", "pdbq", "warm-up"], cache))
                for name, cmd in (("demo", demo), ("dedupe", dedupe), ("grid", grid), ("anneal", anneal)):
                    with tempfile.TemporaryDirectory() as cwd:
                        line(f"{name}: first run after pdbq warm-up", run(cmd, cache, cwd))
    out("machine", f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
