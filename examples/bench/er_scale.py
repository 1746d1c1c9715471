"""The estimated pair model at scale: synthetic persons, 8 natural fields, every default.

    PYTHONPATH=. python examples/bench/er_scale.py [--mentions 150000] [--threads 1]

Persons of examples/bench/coref_scale.py (first/last name with typos, birth date with day/month
swaps, zip) plus a phone (digit typos), a street, a city and a gender. `pdbq.dedupe(table, id=,
fields=[8 columns])` with no comparisons, blocking or weights given: the levels are sniffed,
u / m / the prior estimated, blocking chosen under the default budget. Prints phase times,
candidate pairs, the blocking recall estimate against the true recall, B³ / pairwise scores and
the process peak RSS.
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

from pdbq.coref.metrics import b_cubed, pairwise  # noqa: E402
from pdbq.linkage import dedupe  # noqa: E402

FIELDS = ["first_name", "last_name", "dob", "zip", "phone", "street", "city", "gender"]


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
    args = ap.parse_args(argv)
    table, truth = generate(args.mentions, args.seed)
    table = more_fields(table, truth, args.seed)
    con = duckdb.connect()
    con.execute(f"SET threads = {args.threads}")
    con.register("persons_arrow", table)
    con.execute("CREATE TABLE persons AS SELECT * FROM persons_arrow")
    con.unregister("persons_arrow")
    t1 = time.perf_counter()
    res = dedupe("persons", id="id", fields=FIELDS, con=con)
    total = time.perf_counter() - t1
    pred = res.clusters.column("cluster").to_numpy()
    b3, pw = b_cubed(pred, truth), pairwise(pred, truth)
    d = res.diagnostics
    same = truth[res.scores.a] == truth[res.scores.b]
    sizes = np.bincount(truth)
    true_pairs = int((sizes * (sizes - 1) // 2).sum())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"mentions {args.mentions:,}, persons {int(truth.max()) + 1:,}, fields {len(FIELDS)}, threads {args.threads}")
    for f in res.pair_model.fields:
        print(f"  {f.levels.describe()}")
    print(f"blocking: {'; '.join(res.blocking.describe(res.pair_model))}")
    print(f"candidate pairs {d['candidate_pairs']:,}; blocking recall estimated {res.blocking.recall:.4f}, "
          f"true {same.sum() / true_pairs:.4f}; prior estimated {res.pair_model.prior:.3g}, "
          f"true {true_pairs / (args.mentions * (args.mentions - 1) / 2):.3g}")
    print(f"load {d['seconds_load']:.1f} s, model+blocking+scoring {d['seconds_pairs']:.1f} s, MAP {d['seconds_map']:.1f} s, "
          f"total {total:.1f} s")
    print(f"B3 P {b3.precision:.4f} R {b3.recall:.4f} F1 {b3.f1:.4f}; pairwise P {pw.precision:.4f} R {pw.recall:.4f} F1 {pw.f1:.4f}")
    print(f"process peak RSS {peak / 2**20:,.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
