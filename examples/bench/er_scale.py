"""The estimated pair model at scale: synthetic persons, 8 natural fields, every default.

    PYTHONPATH=. python examples/bench/er_scale.py [--mentions 150000] [--threads 1]

Persons of examples/bench/coref_scale.py (first/last name with typos, birth date with day/month
swaps, zip) plus a phone (digit typos), a street, a city and a gender. `pdbq.dedupe(table, id=,
fields=[8 columns])` with no comparisons, blocking or weights given: the levels are sniffed,
u / m / the prior estimated, blocking chosen under the default budget. Prints candidate pairs,
the blocking recall estimate against the true recall, B³ / pairwise scores, the process peak RSS,
and a table of phases (sniffing, normalised values, u from random pairs, training rules and EM,
blocking choice, candidate pairs, scoring, prior refinement, pair graph, MAP, writing the
result with `--out`): wall and CPU seconds of each, the resident memory after it and the peak
reached during it. CPU seconds are the ones to compare on a shared machine (DuckDB runs on
`--threads` threads inside this process; wall time also counts waiting for a core).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from coref_scale import LETTERS, _names, _noisy, generate  # noqa: E402

import pdbq.coref.estimate as _estimate  # noqa: E402
import pdbq.coref.pair_model as _pair_model  # noqa: E402
import pdbq.linkage as _linkage  # noqa: E402
import pdbq.linkage.pairs as _pairs  # noqa: E402
from pdbq.coref.metrics import b_cubed, pairwise  # noqa: E402
from pdbq.linkage import dedupe  # noqa: E402

FIELDS = ["first_name", "last_name", "dob", "zip", "phone", "street", "city", "gender"]

# (module, function, phase): the front door's steps, timed by wrapping them for the run
PHASES = [
    (_linkage, "load_records", "load records"),
    (_pairs, "sniff_fields", "sniff field kinds"),
    (_pairs, "prepare_values", "normalised values, term frequencies"),
    (_estimate, "estimate_u", "u from random pairs"),
    (_pairs, "fit_pair_model", "training rules + EM (u excluded)"),
    (_pairs, "choose_blocking", "blocking choice"),
    (_pairs, "build_candidates", "candidate pairs"),
    (_pairs, "score_pairs", "pair levels and scores"),
    (_pairs, "refine_prior", "prior over the candidates"),
    (_pair_model.PairScores, "graph", "pair graph (CSR)"),
    (_linkage, "_resolve", "MAP clustering"),
    (_linkage, "_write", "write (id, cluster)"),
]


def _rss(key: str) -> int:
    """VmRSS / VmHWM of this process in bytes (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM: the peak of the next phase alone
        return True
    except OSError:
        return False


class Phases:
    """Wall / CPU seconds, RSS after and peak RSS during each wrapped phase (nested calls, e.g.
    u inside the model fit, are subtracted from the outer phase's seconds)."""

    def __init__(self):
        self.rows: dict[str, list[float]] = {}
        self.stack: list[list[float]] = []
        self.peak = 0
        self._saved = []

    def wrap(self):
        for owner, name, label in PHASES:
            fn = getattr(owner, name)
            self._saved.append((owner, name, fn))
            setattr(owner, name, self._timed(fn, label))

    def unwrap(self):
        for owner, name, fn in reversed(self._saved):
            setattr(owner, name, fn)

    def _timed(self, fn, label):
        def run(*args, **kwargs):
            self.peak = max(self.peak, _rss("VmHWM"))
            _reset_peak()
            self.stack.append([0.0, 0.0])
            w0, c0 = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                wall, cpu = time.perf_counter() - w0, time.process_time() - c0
                inner = self.stack.pop()
                if self.stack:
                    self.stack[-1][0] += wall
                    self.stack[-1][1] += cpu
                hwm = _rss("VmHWM")
                self.peak = max(self.peak, hwm)
                row = self.rows.setdefault(label, [0.0, 0.0, 0, 0])
                row[0] += wall - inner[0]
                row[1] += cpu - inner[1]
                row[2] = _rss("VmRSS")
                row[3] = max(row[3], hwm)
        return run

    def print(self):
        print("| phase | wall s | CPU s | RSS after, MiB | peak during, MiB |")
        print("|---|---|---|---|---|")
        for label, (wall, cpu, rss, hwm) in self.rows.items():
            print(f"| {label} | {wall:.1f} | {cpu:.1f} | {rss / 2**20:,.0f} | {hwm / 2**20:,.0f} |")
        wall = sum(r[0] for r in self.rows.values())
        cpu = sum(r[1] for r in self.rows.values())
        print(f"| all phases | {wall:.1f} | {cpu:.1f} | | {self.peak / 2**20:,.0f} |")


def more_fields(table, person, seed):
    rng = np.random.default_rng(seed + 1)
    n_p = int(person.max()) + 1
    n = person.size
    phone = rng.integers(2_000_000_000, 9_999_999_999, n_p)
    ph = phone[person].astype(str)
    typo = rng.random(n) < 0.1
    pos = rng.integers(0, 10, n)
    ph = np.array([s[:i] + str(rng.integers(0, 10)) + s[i + 1:] if t else s for s, i, t in zip(ph.tolist(), pos.tolist(), typo.tolist())])
    streets = _names(rng, 5000, 2, 3)
    street = [f"{rng.integers(1, 300)} {s} street" for s in rng.choice(streets, n_p)]
    st = _noisy(rng, np.array(street)[person].tolist(), 0.15)
    cities = _names(rng, 400, 2, 3)
    city = np.array(cities)[rng.zipf(1.3, n_p) % 400][person]
    gender = np.array(["f", "m"])[rng.integers(0, 2, n_p)][person]
    phone_col = np.where(rng.random(n) < 0.05, None, ph)
    return table.append_column("phone", pa.array(phone_col.tolist())).append_column("street", pa.array(st)) \
        .append_column("city", pa.array(city.tolist())).append_column("gender", pa.array(gender.tolist()))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mentions", type=int, default=150_000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="write (id, cluster) to this .parquet / .csv (timed as a phase)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    table, truth = generate(args.mentions, args.seed)
    table = more_fields(table, truth, args.seed)
    t_gen = time.perf_counter() - t0
    con = duckdb.connect()
    con.execute(f"SET threads = {args.threads}")
    con.register("persons_arrow", table)
    con.execute("CREATE TABLE persons AS SELECT * FROM persons_arrow")
    con.unregister("persons_arrow")
    phases = Phases()
    phases.wrap()
    t1, c1 = time.perf_counter(), time.process_time()
    try:
        res = dedupe("persons", id="id", fields=FIELDS, con=con, output=args.out)
    finally:
        phases.unwrap()
    total, total_cpu = time.perf_counter() - t1, time.process_time() - c1
    pred = res.clusters.column("cluster").to_numpy()
    b3, pw = b_cubed(pred, truth), pairwise(pred, truth)
    d = res.diagnostics
    same = truth[res.scores.a] == truth[res.scores.b]
    sizes = np.bincount(truth)
    true_pairs = int((sizes * (sizes - 1) // 2).sum())
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, phases.peak, _rss("VmHWM"))
    print(f"mentions {args.mentions:,}, persons {int(truth.max()) + 1:,}, fields {len(FIELDS)}, threads {args.threads} "
          f"(generation {t_gen:.1f} s, untimed)")
    for f in res.pair_model.fields:
        print(f"  {f.levels.describe()}")
    print(f"blocking: {'; '.join(res.blocking.describe(res.pair_model))}")
    print(f"candidate pairs {d['candidate_pairs']:,}; blocking recall estimated {res.blocking.recall:.4f}, "
          f"true {same.sum() / true_pairs:.4f}; prior estimated {res.pair_model.prior:.3g}, "
          f"true {true_pairs / (args.mentions * (args.mentions - 1) / 2):.3g}")
    print(f"load {d['seconds_load']:.1f} s, model+blocking+scoring {d['seconds_pairs']:.1f} s, MAP {d['seconds_map']:.1f} s, "
          f"total {total:.1f} s (CPU {total_cpu:.1f} s)")
    print(f"B3 P {b3.precision:.4f} R {b3.recall:.4f} F1 {b3.f1:.4f}; pairwise P {pw.precision:.4f} R {pw.recall:.4f} F1 {pw.f1:.4f}")
    print(f"process peak RSS {peak / 2**20:,.0f} MiB")
    phases.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
