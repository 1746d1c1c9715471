"""The estimated pair model: EM recovers planted m, term frequencies, blocking recall estimate,
the front door end to end on generated person records, and its bad-input errors."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from pdbq.coref.autoblock import choose_blocking, rules_recall
from pdbq.coref.estimate import EmSettings, em
from pdbq.coref.layout import CorefInputError
from pdbq.coref.levels import FieldSpec
from pdbq.coref.metrics import pairwise
from pdbq.coref.model import Blocking, load_records
from pdbq.linkage import dedupe
from pdbq.linkage.pairs import estimate_and_score

LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))


def _word(rng, k):
    return "".join(rng.choice(LETTERS, size=k))


def _typo(rng, s):
    i = int(rng.integers(0, len(s)))
    c = str(rng.integers(0, 10)) if s[i].isdigit() else str(rng.choice(LETTERS))  # a digit stays a digit
    return s[:i] + c + s[i + 1:]


def people(n_entities=600, seed=0, p_err=0.2, p_null=0.05, dup_max=3):
    """FEBRL-like person records: each entity 1..dup_max records; each field of a duplicate is,
    independently, mistyped with p_err and NULL with p_null. Returns (pyarrow table, entity)."""
    rng = np.random.default_rng(seed)
    firsts = [_word(rng, int(rng.integers(4, 8))) for _ in range(150)]
    lasts = [_word(rng, int(rng.integers(5, 10))) for _ in range(2000)]
    rows, ent = [], []
    for e in range(n_entities):
        base = {
            "given": firsts[int(rng.zipf(1.6)) % len(firsts)],
            "surname": lasts[int(rng.integers(len(lasts)))],
            "dob": f"{rng.integers(1930, 2005)}{rng.integers(1, 13):02d}{rng.integers(1, 29):02d}",
            "postcode": f"{rng.integers(2000, 2400)}",
        }
        for d in range(int(rng.integers(1, dup_max + 1))):
            r = dict(base)
            if d:
                for f in r:
                    u = rng.random()
                    if u < p_null:
                        r[f] = None
                    elif u < p_null + p_err:
                        r[f] = _typo(rng, r[f])
            rows.append(r)
            ent.append(e)
    order = rng.permutation(len(rows))
    cols = {f: [rows[i][f] for i in order] for f in rows[0]}
    tbl = pa.table({"rid": np.arange(len(rows)), **cols})
    return tbl, np.asarray(ent)[order]


# --- EM ---------------------------------------------------------------------------------------

def _planted(seed=1, n=200_000, lam=0.05):
    rng = np.random.default_rng(seed)
    m = [np.array([0.8, 0.15, 0.05]), np.array([0.7, 0.2, 0.1]), np.array([0.9, 0.1]), np.array([0.6, 0.3, 0.1])]
    u = [np.array([0.01, 0.09, 0.9]), np.array([0.05, 0.15, 0.8]), np.array([0.2, 0.8]), np.array([0.02, 0.08, 0.9])]
    match = rng.random(n) < lam
    g = np.stack([np.where(match, rng.choice(len(mk), n, p=mk), rng.choice(len(uk), n, p=uk)) for mk, uk in zip(m, u)], 1)
    pats, counts = np.unique(g, axis=0, return_counts=True)
    return m, u, pats, counts.astype(float), int(match.sum()), lam


def _recovered(est_m, est_lam, m, n_match, lam, n):
    ok = abs(est_lam - lam) < 4 * np.sqrt(lam * (1 - lam) / n)
    for mk, ek in zip(m, est_m):
        se = np.sqrt(mk * (1 - mk) / n_match)
        ok &= bool(np.all(np.abs(ek - mk) < 4 * se + 1e-3))
    return ok


def test_em_recovers_planted_m_and_prior_within_standard_error():
    m, u, pats, counts, n_match, lam = _planted()
    init = [np.full(mk.size, 1.0 / mk.size) for mk in m]
    for k in range(len(init)):
        init[k][0] += 0.3
        init[k] /= init[k].sum()
    res = em(pats, counts, u, init, 0.2, [True] * 4, max_iter=500, tol=1e-8)
    assert res.converged
    assert _recovered(res.m, res.prior, m, n_match, lam, counts.sum())
    # a broken EM that never updates m must fail the same check
    broken = em(pats, counts, u, init, 0.2, [True] * 4, max_iter=500, tol=1e-8, fixed_m=True)
    assert not _recovered(broken.m, broken.prior, m, n_match, lam, counts.sum())


def test_em_leaves_a_forced_field_alone():
    m, u, pats, counts, _, _ = _planted(seed=2)
    init = [np.full(mk.size, 1.0 / mk.size) for mk in m]
    res = em(pats, counts, u, init, 0.2, [False, True, True, True], max_iter=500, tol=1e-8)
    np.testing.assert_array_equal(res.m[0], init[0])


# --- term frequencies -------------------------------------------------------------------------

def test_a_rare_surname_match_weighs_more_than_a_common_one():
    rng = np.random.default_rng(3)
    n = 400
    surname = np.where(np.arange(n) < 200, "smith", [f"{_word(rng, 8)}" for _ in range(n)])
    surname[398] = surname[399] = "zzyzxqwv"
    given = [_word(rng, 6) for _ in range(n)]
    given[398] = given[399] = given[0] = given[1] = "johanna"
    con = duckdb.connect()
    con.register("src", pa.table({"rid": np.arange(n), "surname": surname, "given": given}))
    con.execute("CREATE TABLE t AS SELECT * FROM src")
    rec = load_records(con, "t", "rid", ["surname", "given"])
    st = estimate_and_score(con, rec, ["surname", "given"], specs={"surname": FieldSpec("surname", "string")},
                            blocking=(Blocking("given"),))
    s = st.scores
    w = {(int(a), int(b)): float(x) for a, b, x in zip(s.a, s.b, s.contributions[:, 0])}
    assert w[(398, 399)] > w[(0, 1)] + 5  # log2(200 / 2) ≈ 6.6 bits apart
    assert st.model.fields[0].tf


# --- blocking recall --------------------------------------------------------------------------

def test_blocking_recall_estimate_matches_the_true_recall():
    tbl, ent = people(n_entities=1500, seed=4, p_err=0.3)
    con = duckdb.connect()
    con.register("src", tbl)
    con.execute("CREATE TABLE t AS SELECT * FROM src")
    rec = load_records(con, "t", "rid", ["given", "surname", "dob", "postcode"])
    stage = estimate_and_score(con, rec, ["given", "surname", "dob", "postcode"],
                               specs={f: FieldSpec(f, "code" if f in ("dob", "postcode") else "string")
                                      for f in ("dob", "postcode")})
    m = stage.model
    q = np.ones(4) * 0.95 ** 2  # the share of pairs with both values present, about
    e = ent  # rid i is row i, and the dense index orders by rid
    true_pairs = {(int(i), int(j)) for g in np.unique(e) for i in np.flatnonzero(e == g) for j in np.flatnonzero(e == g) if i < j}
    from pdbq.coref.autoblock import BlockRule, build_candidates

    for rules in ([BlockRule("equal", (2,))], [BlockRule("equal", (1,)), BlockRule("equal", (2,))]):
        build_candidates(con, m, tuple(rules))
        pairs = con.execute("SELECT a, b FROM pdbq_coref_pairs").fetchnumpy()
        got = set(zip(pairs["a"].tolist(), pairs["b"].tolist()))
        true_recall = len(got & true_pairs) / len(true_pairs)
        est = rules_recall(m, rules, q)
        se = np.sqrt(true_recall * (1 - true_recall) / len(true_pairs))
        assert abs(est - true_recall) < 4 * se + 0.02, (rules, est, true_recall)
    choice = choose_blocking(con, m, rec.n, max_pairs=5_000)
    assert choice.pairs_bound <= 5_000 and 0.5 < choice.recall <= 1.0


# --- the front door ---------------------------------------------------------------------------

def test_dedupe_defaults_on_generated_person_records():
    tbl, ent = people(n_entities=800, seed=5)
    con = duckdb.connect()
    con.register("src", tbl)
    con.execute("CREATE TABLE people AS SELECT * FROM src")
    res = dedupe("people", id="rid", fields=["given", "surname", "dob", "postcode"], con=con)
    gold = ent
    pw = pairwise(res.clusters.column("cluster").to_numpy(), gold)
    assert pw.f1 > 0.95, pw
    kinds = {f.field: f.levels.kind for f in res.pair_model.fields}
    assert kinds == {"given": "string", "surname": "string", "dob": "date", "postcode": "code"}
    assert res.scores.levels.shape == (res.scores.a.size, 4)
    np.testing.assert_allclose(res.scores.match_weight, res.scores.prior_bits + res.scores.contributions.sum(1))
    assert res.blocking is not None and res.blocking.recall > 0.95
    assert con.execute("SELECT count(*) FROM people").fetchall()[0][0] == len(ent)  # input untouched


def test_dedupe_from_labels_with_a_holdout_report(tmp_path):
    tbl, ent = people(n_entities=400, seed=6)
    import pyarrow.csv as pacsv

    data = tmp_path / "p.csv"
    pacsv.write_csv(tbl, str(data))
    gold = tmp_path / "gold.csv"
    gold.write_text("rid,person\n" + "".join(f"{r},{e}\n" for r, e in zip(tbl.column("rid").to_pylist(), ent)))
    res = dedupe(data, id="rid", fields=["given", "surname", "dob", "postcode"], train=gold)
    assert res.pair_model.source == "labels"
    h = res.diagnostics["holdout"]
    assert h["records"] > 100 and h["pairwise_f1"] > 0.9
    pairs = tmp_path / "pairs.csv"
    rid = tbl.column("rid").to_numpy()
    first = {}
    rows = []
    for r, e in zip(rid.tolist(), ent.tolist()):
        if e in first:
            rows.append(f"{first[e]},{r}\n")
        else:
            first[e] = r
    pairs.write_text("left_id,right_id\n" + "".join(rows))
    res = dedupe(data, id="rid", fields=["given", "surname", "dob", "postcode"], train=pairs)
    assert res.pair_model.source == "labels-pairs" and 0 < res.pair_model.prior < 0.01
    assert res.diagnostics["holdout"]["pairwise_f1"] > 0.9
    bad = tmp_path / "bad.csv"
    bad.write_text("rid,person\n99999,1\n")
    with pytest.raises(CorefInputError, match="not among the records.*99999"):
        dedupe(data, id="rid", fields=["given", "surname"], train=bad)
    odd = tmp_path / "odd.csv"
    odd.write_text("x,y,z\n1,2,3\n")
    with pytest.raises(CorefInputError, match="expected either the id column 'rid'"):
        dedupe(data, id="rid", fields=["given", "surname"], train=odd)


def test_cli_prints_the_model_and_reads_gold_by_its_own_columns(tmp_path, capsys):
    from pdbq.linkage.cli import main

    tbl, ent = people(n_entities=150, seed=7)
    import pyarrow.csv as pacsv

    data = tmp_path / "p.csv"
    pacsv.write_csv(tbl, str(data))
    gold = tmp_path / "gold.csv"
    gold.write_text("rid,person\n" + "".join(f"{r},{e}\n" for r, e in zip(tbl.column("rid").to_pylist(), ent)))
    assert main([str(data), "--id", "rid", "--fields", "given,surname,dob,postcode", "--compare", "postcode=code:2",
                 "--gold", str(gold), "--out", str(tmp_path / "c.csv")]) == 0
    err = capsys.readouterr().err
    assert "postcode: code (exact / edits<=2 or diff<=2 / else)" in err and "estimated recall" in err and "B3 P" in err
    nogood = tmp_path / "g2.csv"
    nogood.write_text("a,b,c\n1,2,3\n")
    assert main([str(data), "--id", "rid", "--fields", "given", "--gold", str(nogood)]) == 2
    assert "expected either the id column" in capsys.readouterr().err
    assert main([str(data), "--id", "rid", "--fields", "given", "--compare", "given=fuzzy"]) == 2


def test_bad_input_is_a_clear_error_or_warning(tmp_path):
    one = tmp_path / "one.csv"
    one.write_text("rid,name\n1,alpha\n")
    with pytest.raises(CorefInputError, match="1 record"):
        dedupe(one, id="rid", fields=["name"])
    nul = tmp_path / "nul.csv"
    nul.write_text("rid,name,city\n1,,x\n2,,y\n3,,z\n")
    with pytest.raises(CorefInputError, match="field 'name' has fewer than two non-NULL values"):
        dedupe(nul, id="rid", fields=["name", "city"])
    const = tmp_path / "const.csv"
    const.write_text("rid,name,city\n1,ann,x\n2,bob,x\n3,cid,x\n")
    with pytest.raises(CorefInputError, match="field 'city' holds one value in every record"):
        dedupe(const, id="rid", fields=["name", "city"])
    with pytest.raises(CorefInputError, match="unknown comparison kind 'fuzzy'"):
        dedupe(const, id="rid", fields=["name"], compare=[FieldSpec("name", "fuzzy")])
    tbl, _ = people(n_entities=200, seed=8)
    con = duckdb.connect()
    con.register("src", tbl)
    con.execute("CREATE TABLE p AS SELECT * FROM src")
    res = dedupe("p", id="rid", fields=["given", "surname", "dob"], con=con, em=EmSettings(max_iter=1))
    assert any("did not converge" in w for w in res.warnings)


# --- swapped fields ---------------------------------------------------------------------------

def test_names_swapped_level_from_value_overlap():
    # two name columns drawn from one pool of names (named neutrally: the pairing comes from the
    # values, not the column names), a third string column from other words; a quarter of the
    # duplicates have the two names swapped
    rng = np.random.default_rng(11)
    pool = [_word(rng, int(rng.integers(5, 9))) for _ in range(400)]
    towns = [_word(rng, 7) for _ in range(300)]
    rows, ent, swapped = [], [], []
    for e in range(700):
        x, y = pool[int(rng.integers(400))], pool[int(rng.integers(400))]
        born = f"{rng.integers(1930, 2005)}{rng.integers(1, 13):02d}{rng.integers(1, 29):02d}"
        town = towns[int(rng.integers(300))]
        for d in range(int(rng.integers(1, 3))):
            sw = d > 0 and rng.random() < 0.25
            rows.append({"c1": y if sw else x, "c2": x if sw else y, "born": born if rng.random() < 0.8 else _typo(rng, born),
                         "town": town})
            ent.append(e)
            swapped.append(sw)
    con = duckdb.connect()
    con.register("src", pa.table({"rid": np.arange(len(rows)), **{f: [r[f] for r in rows] for f in rows[0]}}))
    con.execute("CREATE TABLE t AS SELECT * FROM src")
    res = dedupe("t", id="rid", fields=["c1", "c2", "born", "town"], con=con)
    swap = {f.field: f.levels.swap_with for f in res.pair_model.fields}
    assert swap == {"c1": "c2", "c2": "c1", "born": None, "town": None}
    ent, swapped = np.asarray(ent), np.asarray(swapped)
    s = res.scores
    names = s.contributions[:, 0] + s.contributions[:, 1]
    same = ent[s.a] == ent[s.b]
    sw_pairs = same & (swapped[s.a] | swapped[s.b])
    assert sw_pairs.sum() > 30
    # a swapped pair's names are evidence for a match, far above a different person's
    assert np.median(names[sw_pairs]) > np.percentile(names[~same], 99) + 4
    pw = pairwise(res.clusters.column("cluster").to_numpy(), ent)
    assert pw.recall > 0.95, pw


def test_code_level_holds_integers_a_unit_apart():
    # a year off by one across a decade differs in two digits: as integers it is one apart,
    # and is compared as the near level, not as two unrelated codes
    from pdbq.coref.levels import FieldLevels
    from pdbq.coref.model import load_records
    from pdbq.coref.pair_levels import pair_levels
    from pdbq.coref.levels import prepare_values

    years = ["1989", "1990", "1991", "1980", "099", "100", "2400", "2410", "12a", "12b", None]
    con = duckdb.connect()
    con.register("src", pa.table({"rid": np.arange(len(years)), "year": years}))
    con.execute("CREATE TABLE t AS SELECT * FROM src")
    rec = load_records(con, "t", "rid", ["year"])
    fl = (FieldLevels("year", "code", (1,)),)
    prepare_values(con, "pdbq_coref_records", "__pdbq_m", rec.columns, fl)
    a, b, lv = pair_levels(con, fl, "SELECT * FROM (VALUES (0, 1), (1, 2), (0, 2), (0, 3), (4, 5), (6, 7), (8, 9), (9, 10)) p(a, b)",
                           rec.n)
    got = dict(zip(zip(a.tolist(), b.tolist()), lv[:, 0].tolist()))
    assert got == {(0, 1): 1, (1, 2): 1, (0, 2): 2, (0, 3): 1, (4, 5): 1, (6, 7): 1, (8, 9): 1, (9, 10): -1}


def test_text_words_are_split_at_punctuation():
    # "cascade-correlation" and "cascade correlation", "S.E." and "S. E." are the same words:
    # deleting the punctuation would fuse them into one word that matches neither
    from pdbq.coref.levels import FieldLevels, prepare_values
    from pdbq.coref.model import load_records
    from pdbq.coref.pair_levels import pair_levels

    titles = ["The cascade-correlation learning architecture,", "The Cascade Correlation Learning Architecture.",
              "S.E. Fahlman", "Fahlman, S. E.", "recurrent cascade-correlation", "Recurrent networks"]
    con = duckdb.connect()
    con.register("src", pa.table({"rid": np.arange(len(titles)), "title": titles}))
    con.execute("CREATE TABLE t AS SELECT * FROM src")
    rec = load_records(con, "t", "rid", ["title"])
    fl = (FieldLevels("title", "text", (0.7, 0.4, 0.15)),)
    prepare_values(con, "pdbq_coref_records", "__pdbq_m", rec.columns, fl)
    a, b, lv = pair_levels(con, fl, "SELECT * FROM (VALUES (0, 1), (2, 3), (4, 5)) p(a, b)", rec.n)
    got = dict(zip(zip(a.tolist(), b.tolist()), lv[:, 0].tolist()))
    # the same words in another order and punctuation are "exact"; a shared word is not more
    assert got == {(0, 1): 0, (2, 3): 0, (4, 5): 3}
