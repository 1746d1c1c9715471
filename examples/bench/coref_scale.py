"""Coreference at scale: synthetic persons with noisy name / birth date / zip variants.

    python examples/bench/coref_scale.py [--mentions 1000000] [--threads 1] [--sweeps 10]

Generates `--mentions` person mentions of ~mentions/4 persons (1–8 mentions each, Zipf-ish),
each mention a copy of its person's first name, last name, birth date and zip with typos
(a character substituted, deleted or doubled), a day/month swap and a wrong zip at fixed rates.
Then resolves them with `pdbq.dedupe` on one core and prints the phase times, mentions/s,
B³ / pairwise F1 and memory: the pair graph, the chain state and scratch, the feature
matrix (bytes per mention), and the process peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import duckdb
import numpy as np
import pyarrow as pa

from pdbq.coref.metrics import b_cubed, pairwise
from pdbq.coref.model import Blocking, Comparison
from pdbq.linkage import dedupe
from pdbq.inference.coreference.resolve import CorefConfig

LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))


def _names(rng, k, lo, hi):
    syll = np.array(["".join(rng.choice(LETTERS, 2)) + str(rng.choice(list("aeiou"))) for _ in range(400)])
    out: set[str] = set()
    while len(out) < k:
        parts = rng.integers(0, syll.size, (k, hi))
        lens = rng.integers(lo, hi + 1, k)
        out.update("".join(syll[row[:n]]) for row, n in zip(parts, lens.tolist()))
    return np.array(sorted(out)[:k])


def _typos(rng, words):
    """Each word with one typo: a character substituted, deleted (words > 3 letters) or doubled."""
    n = len(words)
    pos = rng.random(n)
    kind = rng.integers(0, 3, n)
    letter = rng.choice(LETTERS, n)
    out = []
    for w, u, k, c in zip(words, pos.tolist(), kind.tolist(), letter.tolist()):
        i = int(u * len(w))
        if k == 0:
            out.append(w[:i] + c + w[i + 1:])
        elif k == 1 and len(w) > 3:
            out.append(w[:i] + w[i + 1:])
        else:
            out.append(w[:i] + w[i] + w[i:])
    return out


def _noisy(rng, clean, rate):
    out = np.array(clean, dtype=object)
    hit = np.flatnonzero(rng.random(len(out)) < rate)
    out[hit] = _typos(rng, out[hit].tolist())
    return out.tolist()


def generate(n_mentions, seed=0):
    rng = np.random.default_rng(seed)
    sizes = np.minimum(8, rng.zipf(1.6, n_mentions))
    sizes = sizes[: int(np.searchsorted(np.cumsum(sizes), n_mentions)) + 1]
    sizes[-1] -= int(sizes.sum()) - n_mentions
    sizes = sizes[sizes > 0]
    n_persons = sizes.size
    first = _names(rng, 3000, 1, 2)
    last = _names(rng, 60000, 2, 3)
    pf = rng.choice(first, n_persons)
    pl = rng.choice(last, n_persons)
    year = rng.integers(1930, 2005, n_persons)
    month = rng.integers(1, 13, n_persons)
    day = rng.integers(1, 29, n_persons)
    pz = rng.integers(10000, 99999, n_persons)
    person = np.repeat(np.arange(n_persons), sizes)
    rng.shuffle(person)
    fn = _noisy(rng, pf[person].tolist(), 0.2)
    ln = _noisy(rng, pl[person].tolist(), 0.2)
    y, m, d = year[person], month[person].copy(), day[person].copy()
    swap = (rng.random(n_mentions) < 0.05) & (d <= 12)
    m[swap], d[swap] = d[swap], month[person][swap]
    dob = (y - 1970).astype("datetime64[Y]").astype("datetime64[M]") + (m - 1).astype("timedelta64[M]")
    dob = dob.astype("datetime64[D]") + (d - 1).astype("timedelta64[D]")
    zp = np.where(rng.random(n_mentions) < 0.1, rng.integers(10000, 99999, n_mentions), pz[person])
    table = pa.table({"id": np.arange(n_mentions, dtype=np.int64), "first_name": fn, "last_name": ln,
                      "dob": pa.array(dob), "zip": zp.astype(np.int64)})
    return table, person


COMPARISONS = [
    Comparison("first_name", "jaro_winkler", 3.0, 0.85),
    Comparison("last_name", "jaro_winkler", 4.0, 0.88),
    Comparison("dob", "exact", 4.0, 0.5),
    Comparison("zip", "exact", 2.0, 0.5),
]
BLOCKING = [
    Blocking("last_name || '|' || year(dob)::VARCHAR", 200),
    Blocking("first_name || '|' || dob::VARCHAR", 200),
    Blocking("substr(last_name, 1, 3) || '|' || dob::VARCHAR || '|' || substr(first_name, 1, 1)", 200),
]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mentions", type=int, default=1_000_000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sweeps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    table, truth = generate(args.mentions, args.seed)
    t_gen = time.perf_counter() - t0
    con = duckdb.connect()
    con.execute(f"SET threads = {args.threads}")
    con.register("persons_arrow", table)
    con.execute("CREATE TABLE persons AS SELECT * FROM persons_arrow")
    con.unregister("persons_arrow")
    config = CorefConfig(sweeps=args.sweeps, temperature=0.5, chains=1, p_split_merge=0.1,
                         init="components", init_threshold=4.0, greedy_sweeps=3)
    t1 = time.perf_counter()
    res = dedupe("persons", id="id", comparisons=COMPARISONS, blocking=BLOCKING, bias=1.0, config=config, con=con)
    total = time.perf_counter() - t1
    pred = res.clusters.column("cluster").to_numpy()
    b3, pw = b_cubed(pred, truth), pairwise(pred, truth)
    d = res.diagnostics
    n = args.mentions
    nnz = 2 * d["candidate_pairs"]
    state = 6 * 4 * n + 8
    scratch = nnz * 16 + n * 5
    features = d["candidate_pairs"] * (len(COMPARISONS) * 8 + 16)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"mentions {n:,}, persons {int(truth.max()) + 1:,}, candidate pairs {d['candidate_pairs']:,} (generation {t_gen:.1f} s, untimed)")
    print(f"load {d['seconds_load']:.1f} s, blocking+features {d['seconds_pairs']:.1f} s, MAP {d['seconds_map']:.1f} s, "
          f"total {total:.1f} s -> {n / total:,.0f} mentions/s end to end, {n / d['seconds_map']:,.0f} mentions/s MAP")
    print(f"proposals {d['proposals']:,}, factor evaluations {d['factor_evaluations']:,}, clusters {d['clusters']:,}")
    print(f"B3 P {b3.precision:.4f} R {b3.recall:.4f} F1 {b3.f1:.4f}; pairwise P {pw.precision:.4f} R {pw.recall:.4f} F1 {pw.f1:.4f}")
    print(f"bytes/mention: pair graph {d['bytes_graph'] / n:.0f}, chain state {state / n:.0f}, scratch {scratch / n:.0f}, "
          f"feature matrix {features / n:.0f}; process peak RSS {peak / 2**20:,.0f} MiB ({peak / n:.0f} B/mention, DuckDB and Python included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
