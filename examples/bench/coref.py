"""Coreference benchmark: pdbq vs Splink vs a 10-line DuckDB baseline, same process, one core.

    python examples/bench/coref.py [--repeats 3] [--quick] [--threads 1]

Data: ../shared/data/cora (1,879 citations, 182 papers) and restaurants_fodors_zagats
(533 + 331 restaurants, 112 matches). Prints B³ and pairwise precision/recall/F1 and the median
wall time (loading the records into DuckDB included, Python start-up and numba compilation
excluded: every method runs once untimed first). DuckDB runs with `--threads` threads.

pdbq weights are set by hand (issue 14 allows it; learning is issue 16) and were chosen while
looking at these two data sets' results, so they are not a held-out estimate. Splink is run
with its documented recipe: blocking rules, the comparison library, u by random sampling,
λ from deterministic rules, m by EM, then clustering at a match probability threshold
(0.5 on Cora, 0.2 on Fodors–Zagats: the best of 0.2–0.99 on each, so Splink is tuned on the
data as much as pdbq's weights are).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from pathlib import Path

import duckdb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coref_data import load_cora, load_restaurants  # noqa: E402

from pdbq.coref.metrics import b_cubed, labels_from_pairs, pairwise  # noqa: E402
from pdbq.coref.model import Blocking, Comparison  # noqa: E402
from pdbq.linkage import dedupe  # noqa: E402
from pdbq.inference.coreference.resolve import CorefConfig  # noqa: E402

TOKENS = "list_distinct(list_filter(string_split(regexp_replace(lower({f}), '[^a-z0-9 ]', ' ', 'g'), ' '), x -> length(x) >= {n}))"

CORA_COMPARISONS = [
    Comparison("title", "token_cosine", 3.0, 0.6),
    Comparison("author", "token_cosine", 2.0, 0.5),
    Comparison("year", "exact", 1.0, 0.5),
    Comparison("text", "token_cosine", 12.0, 0.6),
]
# records sharing at least 3 words of >= 4 letters of the whole citation (words in > 600 records skipped)
CORA_BLOCKING = [Blocking(TOKENS.format(f="text", n=4), max_key_size=600, min_shared=3)]
CORA_BIAS = 1.0

REST_COMPARISONS = [
    Comparison("name", "jaro_winkler", 5.0, 0.8),
    Comparison("name", "token_cosine", 5.0, 0.5),
    Comparison("addr", "jaro_winkler", 4.0, 0.85),
    Comparison("city", "jaro_winkler", 3.0, 0.9),
    Comparison("phone_digits", "exact", 4.0, 0.5),
    Comparison("src", "exact", -8.0, 0.0),  # each guide lists a restaurant once: same source repels
    Comparison("type", "token_jaccard", 0.5, 0.5),
]
REST_BLOCKING = [
    Blocking("phone_digits"),
    Blocking(TOKENS.format(f="name", n=3), max_key_size=50),
    Blocking("substr(lower(addr), 1, 6)"),
]
REST_BIAS = -1.0

CONFIG = CorefConfig(sweeps=20, temperature=0.5, chains=1, p_split_merge=0.2, init="components", init_threshold=2.0)


def _gold(con, table):
    return con.execute(f"SELECT entity FROM {table} ORDER BY id").fetchnumpy()["entity"]


def _scores(pred, gold):
    b3, pw = b_cubed(pred, gold), pairwise(pred, gold)
    return {"b3_p": b3.precision, "b3_r": b3.recall, "b3_f1": b3.f1, "pw_p": pw.precision, "pw_r": pw.recall, "pw_f1": pw.f1}


def _con(data_loader, threads):
    con = duckdb.connect()
    con.execute(f"SET threads = {int(threads)}")
    data_loader(con)
    return con


# --- pdbq -------------------------------------------------------------------------------------

def pdbq_cora(con):
    res = dedupe("cora", id="id", comparisons=CORA_COMPARISONS, blocking=CORA_BLOCKING, bias=CORA_BIAS, config=CONFIG, con=con)
    return res.clusters.column("cluster").to_numpy(), res.diagnostics


def pdbq_restaurants(con):
    res = dedupe("restaurants", id="id", comparisons=REST_COMPARISONS, blocking=REST_BLOCKING, bias=REST_BIAS, config=CONFIG, con=con)
    return res.clusters.column("cluster").to_numpy(), res.diagnostics


# --- the 10-line DuckDB baseline --------------------------------------------------------------

def _components(con, table, pairs_sql):
    ids = con.execute(f"SELECT id FROM {table} ORDER BY id").fetchnumpy()["id"]
    p = con.execute(pairs_sql).fetchnumpy()
    return labels_from_pairs(ids, p["a"], p["b"]), {}


def baseline_cora(con):
    return _components(con, "cora", """
        SELECT l.id AS a, r.id AS b FROM cora l JOIN cora r ON l.id < r.id
        WHERE jaro_winkler_similarity(coalesce(l.title, '') || ' ' || coalesce(l.author, ''),
                                      coalesce(r.title, '') || ' ' || coalesce(r.author, '')) > 0.9""")


def baseline_restaurants(con):
    return _components(con, "restaurants", """
        SELECT l.id AS a, r.id AS b FROM restaurants l JOIN restaurants r ON l.id < r.id AND l.src <> r.src
        WHERE jaro_winkler_similarity(l.name || ' ' || l.addr, r.name || ' ' || r.addr) > 0.9""")


# --- Splink ---------------------------------------------------------------------------------

def _splink_cluster(con, linker, table, threshold):
    preds = linker.inference.predict(threshold_match_probability=0.05)
    clusters = linker.clustering.cluster_pairwise_predictions_at_threshold(preds, threshold_match_probability=threshold)
    df = clusters.as_duckdbpyrelation().select("id, cluster_id").fetchnumpy()
    ids = con.execute(f"SELECT id FROM {table} ORDER BY id").fetchnumpy()["id"]
    label = dict(zip(df["id"].tolist(), df["cluster_id"].tolist()))
    out = np.array([hash(label.get(i, ("singleton", i))) for i in ids.tolist()])
    return out, {}


def splink_cora(con):
    import splink.comparison_library as cl
    from splink import DuckDBAPI, Linker, SettingsCreator, block_on

    db = DuckDBAPI(connection=con)
    df = db.register(con.table("cora").select("id, title, author, venue, year"))
    settings = SettingsCreator(
        link_type="dedupe_only",
        unique_id_column_name="id",
        comparisons=[
            cl.JaroWinklerAtThresholds("title", [0.95, 0.85, 0.7]),
            cl.JaroWinklerAtThresholds("author", [0.95, 0.85, 0.7]),
            cl.JaroWinklerAtThresholds("venue", [0.9, 0.7]),
            cl.ExactMatch("year"),
        ],
        blocking_rules_to_generate_predictions=[
            block_on("substr(title, 1, 8)"),
            block_on("substr(author, 1, 6)", "year"),
            block_on("substr(title, -8, 8)"),
        ],
        retain_intermediate_calculation_columns=False,
    )
    linker = Linker(df, settings, log_level=logging.WARNING)
    linker.training.estimate_probability_two_random_records_match(
        [block_on("title", "author"), block_on("title", "year")], recall=0.6)
    linker.training.estimate_u_using_random_sampling(max_pairs=1e7)
    linker.training.estimate_parameters_using_expectation_maximisation(block_on("substr(title, 1, 8)"))
    linker.training.estimate_parameters_using_expectation_maximisation(block_on("year"))
    return _splink_cluster(con, linker, "cora", 0.5)


def splink_restaurants(con):
    import splink.comparison_library as cl
    from splink import DuckDBAPI, Linker, SettingsCreator, block_on

    db = DuckDBAPI(connection=con)
    cols = "id, name, addr, city, phone_digits, type"
    f = db.register(con.sql(f"SELECT {cols} FROM restaurants WHERE src = 'fodors'"))
    z = db.register(con.sql(f"SELECT {cols} FROM restaurants WHERE src = 'zagats'"))
    settings = SettingsCreator(
        link_type="link_only",
        unique_id_column_name="id",
        comparisons=[
            cl.JaroWinklerAtThresholds("name", [0.95, 0.85, 0.7]),
            cl.JaroWinklerAtThresholds("addr", [0.95, 0.85, 0.7]),
            cl.JaroWinklerAtThresholds("city", [0.9]),
            cl.ExactMatch("phone_digits"),
            cl.ExactMatch("type"),
        ],
        blocking_rules_to_generate_predictions=[
            block_on("phone_digits"),
            block_on("substr(name, 1, 3)"),
            block_on("substr(addr, 1, 6)"),
        ],
    )
    linker = Linker([f, z], settings, log_level=logging.WARNING)
    linker.training.estimate_probability_two_random_records_match([block_on("phone_digits"), block_on("name", "city")], recall=0.8)
    linker.training.estimate_u_using_random_sampling(max_pairs=1e7)
    linker.training.estimate_parameters_using_expectation_maximisation(block_on("city"))
    linker.training.estimate_parameters_using_expectation_maximisation(block_on("phone_digits"))
    return _splink_cluster(con, linker, "restaurants", 0.2)


# --- harness ----------------------------------------------------------------------------------

def _timed(fn, loader, table, threads, repeats):
    times, result = [], None
    for r in range(repeats + 1):  # run 0 warms up (numba compile / imports), untimed
        t0 = time.perf_counter()
        con = _con(loader, threads)
        labels, diag = fn(con)
        dt = time.perf_counter() - t0
        if r == 0:
            gold = _gold(con, f"{table}_gold")
            result = (_scores(labels, gold), diag)
        else:
            times.append(dt)
        con.close()
    return result[0], result[1], statistics.median(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-splink", action="store_true")
    args = ap.parse_args(argv)
    rows = []
    for data, loader, table, methods in [
        ("Cora", load_cora, "cora", [("pdbq", pdbq_cora), ("splink", splink_cora), ("duckdb-baseline", baseline_cora)]),
        ("Fodors-Zagats", load_restaurants, "restaurants",
         [("pdbq", pdbq_restaurants), ("splink", splink_restaurants), ("duckdb-baseline", baseline_restaurants)]),
    ]:
        base = None
        for name, fn in methods:
            if name == "splink" and args.no_splink:
                continue
            try:
                s, diag, t = _timed(fn, loader, table, args.threads, args.repeats)
            except ImportError as exc:
                print(f"{data} {name}: skipped ({exc})")
                continue
            if name == "pdbq":
                base = t
            rows.append((data, name, s, t, t / base if base else float("nan"), diag))
    print(f"threads={args.threads}, median of {args.repeats} runs (after one warm-up run)")
    print(f"{'data':14} {'method':16} {'B3 P':>6} {'B3 R':>6} {'B3 F1':>6} {'pw P':>6} {'pw R':>6} {'pw F1':>6} {'time s':>7} {'x pdbq':>7}")
    for data, name, s, t, ratio, diag in rows:
        print(f"{data:14} {name:16} {s['b3_p']:6.3f} {s['b3_r']:6.3f} {s['b3_f1']:6.3f} {s['pw_p']:6.3f} {s['pw_r']:6.3f} {s['pw_f1']:6.3f} {t:7.2f} {ratio:7.2f}")
    for data, name, s, t, ratio, diag in rows:
        if diag:
            print(f"{data} {name}: {diag['records']} records, {diag['candidate_pairs']} candidate pairs, {diag['clusters']} clusters, "
                  f"{diag['factor_evaluations']:,} factor evaluations, {diag['proposals']:,} proposals, "
                  f"pairs {diag['seconds_pairs']:.2f} s, MAP {diag['seconds_map']:.2f} s, graph {diag['bytes_graph']:,} bytes")


if __name__ == "__main__":
    main()
