"""SampleRank weight learning for coreference (issue 16 item 3), against hand-set weights.

    python examples/bench/coref_learn.py [--repeats 3] [--quick]

Fodors–Zagats and Cora (../shared/data). The gold entities are split in two at random (seed
fixed): SampleRank (margin 1, AdaGrad, averaged parameters; seed 002 Algorithm 1) learns one
weight per comparison plus a bias on the training half's mentions against their gold clustering,
and the MAP clustering with the learned weights is scored on the held-out half (and, for Cora,
on all records). The comparisons and blocking are examples/bench/coref.py's (their hand-set
weights are ignored, only field, method and center are used); the hand-set weights are run on
the same held-out half for reference. Learning time excludes numba compilation (one untimed
warm-up run) and pair building; medians over --repeats runs with different learning seeds.

dedupe 3.0.3 (the `bench` extra, with BTrees < 6.5) runs its own restaurant benchmark recipe
(dedupe/benchmarks canonical: String(name), Exact(name), String(address), ShortString(cuisine,
has missing), ShortString(city); training pairs from the gold clustering by
`training_data_dedupe(data, "unique_id", 5000)`, `prepare_training(sample_size=10000)`,
`train(index_predicates=True)`, `partition(threshold=0.5)`; no phone, as its data set), once as
published (trained and scored on all records) and once on the same split as SampleRank (trained
on the training half, scored on the held-out half); one core. Skipped with a note when dedupe
is not installed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import duckdb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coref import CONFIG, CORA_BIAS, CORA_BLOCKING, CORA_COMPARISONS, REST_BIAS, REST_BLOCKING, REST_COMPARISONS  # noqa: E402
from coref_data import load_cora, load_restaurants  # noqa: E402

from pdbq.learning.coref_rank import (  # noqa: E402
    learn_coref_weights,
    pair_table,
    resolve_with_weights,
    scores_against,
    subset,
)
from pdbq.learning.samplerank import SampleRankConfig  # noqa: E402


def split_entities(gold: np.ndarray, seed: int, frac: float = 0.5) -> np.ndarray:
    ents = np.unique(gold)
    rng = np.random.default_rng(seed)
    train = rng.choice(ents, size=int(round(frac * ents.size)), replace=False)
    return np.isin(gold, train)


# MAP exactly as examples/bench/coref.py runs it (20 annealing sweeps, τ 0.5, start from the
# components of pairs scoring > 2). Learned weights have no fixed scale, so this start suits
# large-scale weights; --decode zero starts from the pairs scoring > 0 instead.
DECODE = CONFIG

LEARNERS = {
    "AdaGrad, margin 1, τ 1 (FACTORIE)": dict(optimizer="adagrad", margin=1.0, learning_rate=1.0, temperature=1.0),
    "AdaGrad, margin 1, τ 0.2, η 3": dict(optimizer="adagrad", margin=1.0, learning_rate=3.0, temperature=0.2),
    "perceptron, margin 1, η 0.01": dict(optimizer="perceptron", margin=1.0, learning_rate=0.01, temperature=1.0),
}


def run(name, loader, table, comparisons, blocking, bias, objective, steps, repeats, split_seed=7):
    con = duckdb.connect()
    con.execute("SET threads = 1")
    loader(con)
    ids, pairs, names = pair_table(con, table, "id", comparisons, blocking)
    gold_tab = con.execute(f"SELECT id, entity FROM {table}_gold ORDER BY id").fetchnumpy()
    assert np.array_equal(gold_tab["id"], ids)
    gold = gold_tab["entity"]
    train = split_entities(gold, split_seed)
    n_tr, p_tr, old_tr = subset(pairs, train)
    n_te, p_te, old_te = subset(pairs, ~train)
    hand = np.array([c.weight for c in comparisons] + [-bias])
    learn_coref_weights(n_tr, p_tr, gold[old_tr], SampleRankConfig(steps=200), objective=objective, names=names)  # warm-up
    hand_test = scores_against(resolve_with_weights(n_te, p_te, hand, DECODE).labels, gold[old_te])
    hand_full = scores_against(resolve_with_weights(ids.size, pairs, hand, DECODE).labels, gold)
    print(f"\n## {name}: {ids.size} records, {pairs.a.size} candidate pairs; train {n_tr} mentions "
          f"({p_tr.a.size} pairs), held out {n_te} ({p_te.a.size} pairs); objective {objective}, {steps} steps, "
          f"medians over {repeats} learning seeds")
    print("| weights | learn s | held-out B³ F1 | held-out pairwise P | R | F1 | all B³ F1 | all pairwise F1 |")
    print("|---|---|---|---|---|---|---|---|")
    for label, opts in LEARNERS.items():
        rows = []
        for rep in range(repeats):
            t0 = time.perf_counter()
            res = learn_coref_weights(n_tr, p_tr, gold[old_tr], SampleRankConfig(steps=steps, seed=rep, **opts),
                                      objective=objective, names=names)
            secs = time.perf_counter() - t0
            test = scores_against(resolve_with_weights(n_te, p_te, res.weights, DECODE).labels, gold[old_te])
            full = scores_against(resolve_with_weights(ids.size, pairs, res.weights, DECODE).labels, gold)
            rows.append((secs, test, full, res))
        med = lambda key, which: statistics.median(r[which][key] for r in rows)  # noqa: E731
        lo = lambda key, which: min(r[which][key] for r in rows)  # noqa: E731
        print(f"| SampleRank {label} | {statistics.median(r[0] for r in rows):.2f} | {med('b3_f1', 1):.3f} (min {lo('b3_f1', 1):.3f}) | "
              f"{med('pw_p', 1):.3f} | {med('pw_r', 1):.3f} | {med('pw_f1', 1):.3f} (min {lo('pw_f1', 1):.3f}) | "
              f"{med('b3_f1', 2):.3f} (min {lo('b3_f1', 2):.3f}) | {med('pw_f1', 2):.3f} |", flush=True)
        r = rows[0][3]
        print("|   weights (seed 0) | " + ", ".join(f"{k} {v:+.2f}" for k, v in zip(r.names, r.weights))
              + f"; {r.samplerank.updates} updates, {r.samplerank.accepted} accepted, final train F {r.train_objective:.3f} |||||||")
    print(f"| hand-set (examples/bench/coref.py) | – | {hand_test['b3_f1']:.3f} | {hand_test['pw_p']:.3f} | "
          f"{hand_test['pw_r']:.3f} | {hand_test['pw_f1']:.3f} | {hand_full['b3_f1']:.3f} | {hand_full['pw_f1']:.3f} |")


def run_sql(name, loader, table, comparisons, blocking, objective, repeats, split_seed=7, epochs=None):
    """The same split through SQL: the candidate pairs and their features (similarity − center,
    as above) in a DuckDB table, one `WEIGHT ? * feature` pair rule per comparison plus a
    `WEIGHT ?` bias rule, and LEARN WEIGHTS ... USING SAMPLERANK with the DEFAULT options except
    gold, objective, the held-out mentions (the held-out half as a query) and the seed. The
    statement's own held-out scores are reported (its MAP: a `MAP(e)` query's defaults started from
    the components of the positive pairs), and the MAP clustering of all records by a
    `SELECT e.id, MAP(e)` query after learning, with `init = 'components'` and with the defaults."""
    import pyarrow as pa

    import pdbq

    db = pdbq.connect()
    con = db.duckdb
    con.execute("SET threads = 1")
    loader(con)
    ids, pairs, names = pair_table(con, table, "id", comparisons, blocking)
    gold_tab = con.execute(f"SELECT id, entity FROM {table}_gold ORDER BY id").fetchnumpy()
    gold = gold_tab["entity"]
    train = split_entities(gold, split_seed)
    k = pairs.x.shape[1]
    cols = {"a": ids[pairs.a], "b": ids[pairs.b], **{f"x{c}": pairs.x[:, c] for c in range(k)}}
    con.register("pairs_arrow", pa.table(cols))
    con.execute("CREATE TABLE pairs AS SELECT * FROM pairs_arrow")
    con.register("held_arrow", pa.table({"id": ids[~train]}))
    con.execute("CREATE TABLE held AS SELECT * FROM held_arrow")
    db.execute(f"CREATE VARIABLE entity(id BIGINT) DOMAIN CLUSTER FROM (SELECT id FROM {table})")
    body = "pairs(a, b, " + ", ".join(f"x{c}" for c in range(k)) + ")"
    for c in range(k):
        db.execute(f"CREATE RULE f{c} WEIGHT ? * x{c} FUNCTION EQUAL AS entity(a) = entity(b) :- {body}")
    db.execute(f"CREATE RULE bias WEIGHT ? FUNCTION EQUAL AS entity(a) = entity(b) :- {body}")
    opts = f"gold = '{table}_gold', objective = '{objective}', holdout = 'SELECT id FROM held'"
    if epochs:
        opts += f", epochs = {epochs}"
    print(f"\n## {name} through SQL: LEARN WEIGHTS USING SAMPLERANK WITH ({opts}, seed = s); defaults otherwise")
    print("| seed | statement s | learn s | held-out B³ P | R | F1 | held-out pairwise P | R | F1 | all B³ F1 (MAP query, init components) | all pairwise F1 | all B³ F1 (MAP query, defaults) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for rep in range(repeats):
        t0 = time.perf_counter()
        r = db.execute(f"LEARN WEIGHTS USING SAMPLERANK WITH ({opts}, seed = {rep})").arrow().to_pylist()[0]
        secs = time.perf_counter() - t0
        db.execute("CREATE OR REPLACE TABLE clusters AS SELECT e.id, MAP(e) AS cluster FROM entity e")
        b3d = con.execute(f"SELECT f1 FROM coref_b3('clusters', '{table}_gold')").fetchone()[0]
        db.execute("CREATE OR REPLACE TABLE clusters AS SELECT e.id, MAP(e) AS cluster FROM entity e WITH (init = 'components')")
        b3 = con.execute(f"SELECT f1 FROM coref_b3('clusters', '{table}_gold')").fetchone()[0]
        pw = con.execute(f"SELECT f1 FROM coref_pairwise('clusters', '{table}_gold')").fetchone()[0]
        rows.append((secs, r, b3, pw, b3d))
        print(f"| {rep} | {secs:.2f} | {r['seconds']:.2f} | {r['b3_precision']:.3f} | {r['b3_recall']:.3f} | {r['b3_f1']:.3f} | "
              f"{r['pairwise_precision']:.3f} | {r['pairwise_recall']:.3f} | {r['pairwise_f1']:.3f} | {b3:.3f} | {pw:.3f} | {b3d:.3f} |", flush=True)
    med = lambda f: statistics.median(f(x) for x in rows)  # noqa: E731
    print(f"| median | {med(lambda x: x[0]):.2f} | {med(lambda x: x[1]['seconds']):.2f} | {med(lambda x: x[1]['b3_precision']):.3f} | "
          f"{med(lambda x: x[1]['b3_recall']):.3f} | {med(lambda x: x[1]['b3_f1']):.3f} | {med(lambda x: x[1]['pairwise_precision']):.3f} | "
          f"{med(lambda x: x[1]['pairwise_recall']):.3f} | {med(lambda x: x[1]['pairwise_f1']):.3f} | {med(lambda x: x[2]):.3f} | "
          f"{med(lambda x: x[3]):.3f} | {med(lambda x: x[4]):.3f} |")
    w = db.execute("SHOW WEIGHTS").arrow().to_pylist()
    print("| weights (last seed) | " + ", ".join(f"{x['rule']} {x['value']:+.2f}" for x in w)
          + f" ({', '.join(f'f{c} = {nm}' for c, nm in enumerate(names))}) |")
    db.close()


def _dedupe_records(con, ids):
    rows = con.execute("SELECT r.id, r.name, r.addr, r.type, r.city, g.entity FROM restaurants r "
                       "JOIN restaurants_gold g USING (id) ORDER BY r.id").fetchall()
    clean = lambda v: (" ".join(str(v).lower().replace(".", " ").replace(",", " ").split()) or None) if v is not None else None  # noqa: E731
    return {int(r[0]): {"name": clean(r[1]), "address": clean(r[2]), "cuisine": clean(r[3]), "city": clean(r[4]),
                        "unique_id": int(r[5])} for r in rows}


def _dedupe_run(train_data, test_data):
    import dedupe

    variables = [
        dedupe.variables.String("name"),
        dedupe.variables.Exact("name"),
        dedupe.variables.String("address"),
        dedupe.variables.ShortString("cuisine", has_missing=True),
        dedupe.variables.ShortString("city"),
    ]
    t0 = time.perf_counter()
    pairs = dedupe.training_data_dedupe(train_data, "unique_id", 5000)
    deduper = dedupe.Dedupe(variables, num_cores=1)
    deduper.prepare_training(train_data, sample_size=10000)
    deduper.mark_pairs(pairs)
    deduper.train(index_predicates=True)
    t_train = time.perf_counter() - t0
    clusters = deduper.partition(test_data, threshold=0.5)
    secs = time.perf_counter() - t0
    ids = sorted(test_data)
    label = {i: i for i in ids}
    for members, _ in clusters:
        for m in members:
            label[m] = min(members)
    pred = np.array([label[i] for i in ids])
    gold = np.array([test_data[i]["unique_id"] for i in ids])
    deduper.cleanup_training()
    return t_train, secs, scores_against(pred, gold)


def run_dedupe(split_seed=7):
    try:
        import dedupe  # noqa: F401
    except ImportError:
        print("\ndedupe 3.0.3 not installed (pip install 'pdbq[bench]'); its published figure: pairwise F1 0.922 after 22 s")
        return
    import logging

    logging.getLogger("dedupe").setLevel(logging.ERROR)
    con = duckdb.connect()
    load_restaurants(con)
    data = _dedupe_records(con, None)
    gold = np.array([data[i]["unique_id"] for i in sorted(data)])
    train = split_entities(gold, split_seed)
    ids = np.array(sorted(data))
    tr = {int(i): data[int(i)] for i in ids[train]}
    te = {int(i): data[int(i)] for i in ids[~train]}
    print("\n## dedupe 3.0.3, its restaurant recipe (one core)")
    print("| run | train s | total s | B³ F1 | pairwise P | R | F1 |")
    print("|---|---|---|---|---|---|---|")
    for name, a, b in (("as published: trained and scored on all records", data, data),
                       ("training half → held-out half (SampleRank's split)", tr, te)):
        t_train, secs, sc = _dedupe_run(a, b)
        print(f"| {name} | {t_train:.1f} | {secs:.1f} | {sc['b3_f1']:.3f} | {sc['pw_p']:.3f} | {sc['pw_r']:.3f} | {sc['pw_f1']:.3f} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=["rest", "cora", "dedupe", "sql"], default=None)
    ap.add_argument("--sql", action="store_true", help="only the SQL path (LEARN WEIGHTS), both data sets")
    ap.add_argument("--decode", choices=["coref", "zero"], default="coref")
    args = ap.parse_args()
    global DECODE
    if args.decode == "zero":
        DECODE = replace(CONFIG, init_threshold=0.0)
    steps_r = 20_000 if args.quick else 100_000
    steps_c = 20_000 if args.quick else 100_000
    if args.sql or args.only == "sql":
        run_sql("Fodors–Zagats", load_restaurants, "restaurants", REST_COMPARISONS, REST_BLOCKING, "pairwise", args.repeats)
        run_sql("Cora", load_cora, "cora", CORA_COMPARISONS, CORA_BLOCKING, "b3", args.repeats)
        return
    if args.only in (None, "rest"):
        run_sql("Fodors–Zagats", load_restaurants, "restaurants", REST_COMPARISONS, REST_BLOCKING, "pairwise", args.repeats)
        run("Fodors–Zagats", load_restaurants, "restaurants", REST_COMPARISONS, REST_BLOCKING, REST_BIAS, "pairwise", steps_r, args.repeats)
    if args.only in (None, "dedupe"):
        run_dedupe()
    if args.only in (None, "cora"):
        run_sql("Cora", load_cora, "cora", CORA_COMPARISONS, CORA_BLOCKING, "b3", args.repeats)
        run("Cora", load_cora, "cora", CORA_COMPARISONS, CORA_BLOCKING, CORA_BIAS, "b3", steps_c, args.repeats)


if __name__ == "__main__":
    main()
