"""Fields that depend on each other given a non-match: restaurants in one building share its
address and phone. EM within a training rule fits the rule's own u (so those neighbours are
not taken for matches), and pairs exact on both dependent fields get a negative interaction."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from pdbq.coref.metrics import pairwise
from pdbq.linkage import dedupe

LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))


def _word(rng, k):
    return "".join(rng.choice(LETTERS, size=k))


def _typo(rng, s):
    i = int(rng.integers(0, len(s)))
    c = str(rng.integers(0, 10)) if s[i].isdigit() else str(rng.choice(LETTERS))
    return s[:i] + c + s[i + 1:]


def restaurants(seed=0, buildings=500):
    """Restaurant-like records: a building (address, phone, city) hosts 1 restaurant, or 2–4 in
    a third of them (hotels: one address and switchboard phone for all); each restaurant has a
    name and a cuisine, and one or two records with typos. Returns (table, entity, building)."""
    rng = np.random.default_rng(seed)
    cities = [_word(rng, 7) for _ in range(12)]
    cuisines = [_word(rng, 6) for _ in range(15)]
    rows, ent, bld = [], [], []
    e = 0
    for b in range(buildings):
        addr = f"{rng.integers(1, 999)} {_word(rng, 7)} st"
        phone = f"{rng.integers(200, 999)}-{rng.integers(1000000, 9999999)}"
        city = cities[int(rng.integers(len(cities)))]
        for _ in range(int(rng.integers(2, 5)) if rng.random() < 1 / 3 else 1):
            name = f"{_word(rng, int(rng.integers(4, 9)))} {_word(rng, 5)}"
            kind = cuisines[int(rng.integers(len(cuisines)))]
            for d in range(int(rng.integers(1, 3))):
                r = {"name": name, "addr": addr, "phone": phone, "city": city, "type": kind}
                if d:
                    r["name"] = _typo(rng, name) if rng.random() < 0.4 else name
                    r["addr"] = _typo(rng, addr) if rng.random() < 0.3 else addr
                    r["phone"] = _typo(rng, phone) if rng.random() < 0.1 else phone
                    r["type"] = cuisines[int(rng.integers(len(cuisines)))] if rng.random() < 0.3 else kind
                rows.append(r)
                ent.append(e)
                bld.append(b)
            e += 1
    tbl = pa.table({"rid": np.arange(len(rows)), **{f: [r[f] for r in rows] for f in rows[0]}})
    return tbl, np.asarray(ent), np.asarray(bld)


def _run(seed):
    tbl, ent, bld = restaurants(seed)
    con = duckdb.connect()
    con.register("src", tbl)
    con.execute("CREATE TABLE t AS SELECT * FROM src")
    res = dedupe("t", id="rid", fields=["name", "addr", "phone", "city", "type"], con=con)
    return res, ent, bld


def test_neighbours_sharing_address_and_phone_are_not_matched():
    res, ent, bld = _run(1)
    s = res.scores
    neighbours = (bld[s.a] == bld[s.b]) & (ent[s.a] != ent[s.b])
    assert neighbours.sum() > 100
    # the building's shared address and phone are one coincidence, not two: the different
    # names decide, and a neighbour pair is evidence against a match
    assert np.median(s.match_weight[neighbours]) < -3
    inter = {(r["field"], r["given"]): r["bits"] for r in res.pair_model.interactions_table()}
    assert inter.get(("addr", "phone"), 0.0) < -1.0
    # every training rule that leaves the name free (address equal, phone equal) is full of
    # neighbours with different names, and EM there does not converge in 200 iterations: the
    # name's m comes from those last iterates (warned). It used to be the default guess
    # (m_else 0.006, -6.4 bits), which passed 0.05 / 0.97 by luck; a guess may no longer carry
    # that many bits. The neighbours are still kept apart on the whole (median above).
    name_else = res.pair_model.fields[0].m[-1]
    assert name_else < 0.15  # few true matches have different names
    assert any("did not converge" in w for w in res.warnings)
    pw = pairwise(res.clusters.column("cluster").to_numpy(), ent)
    assert pw.precision > 0.85 and pw.recall > 0.9, pw


def test_interactions_and_new_levels_survive_a_store_round_trip():
    from pdbq.coref.pair_model import PairModel

    res, _, _ = _run(2)
    m = res.pair_model
    assert m.interactions and m.fields[0].levels.words == 0.5  # names have several words
    back = PairModel.from_dict(m.to_dict())
    assert back.interactions == tuple((i, j, float(b)) for i, j, b in m.interactions)
    assert [f.levels for f in back.fields] == [f.levels for f in m.fields]


def test_words_level_in_numba_matches_the_sql_level():
    from pdbq.coref.levels import VALUES, FieldLevels, gamma_sql, prepare_values
    from pdbq.coref.model import load_records
    from pdbq.coref.pair_levels import pair_levels

    names = ["the palm", "palm the los angeles", "spago", "spago beverly hills", "la palm", None, "the spago palm",
             "palm", "grill on the alley", "the grill", "alley grill the"]
    con = duckdb.connect()
    con.register("src", pa.table({"rid": np.arange(len(names)), "name": names}))
    con.execute("CREATE TABLE t AS SELECT * FROM src")
    rec = load_records(con, "t", "rid", ["name"])
    fl = (FieldLevels("name", "string", (0.92, 0.8), words=0.5),)
    prepare_values(con, "pdbq_coref_records", "__pdbq_m", rec.columns, fl)
    pairs = f"SELECT l.m AS a, r.m AS b FROM {VALUES} l JOIN {VALUES} r ON l.m < r.m ORDER BY a, b"
    a, b, lv = pair_levels(con, fl, pairs, rec.n)
    sql = con.execute(f"SELECT {gamma_sql(0, fl[0])} FROM ({pairs}) p JOIN {VALUES} l ON l.m = p.a "
                      f"JOIN {VALUES} r ON r.m = p.b ORDER BY p.a, p.b").fetchnumpy()
    want = np.asarray(list(sql.values())[0], np.int8)
    np.testing.assert_array_equal(lv[:, 0], want)
    assert (want == 3).any() and (want == 4).any()  # the words level and else both occur
