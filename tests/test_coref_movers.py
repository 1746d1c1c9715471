"""People who moved: the stable identifiers (date of birth, email) agree on most pairs of one
person while the moved fields (address, city, zip, phone) disagree together — dependence among
matches. Agreement on several stable identifiers must never be evidence against a match, and
the front door must find the movers.

Before field groups (`pdbq.coref.comoving`), measured on 20,000 records without households: EM
within each training rule fitted the rule's own u (for neighbours sharing an address and phone),
which took the people who moved for non-matches (the rule "email equal" got a match share of
0.47; m(city differs) ≈ 0); the field interactions then gave a pair exact on date of birth and
email −10.7 bits. Precision 1.0, recall 0.38.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import Phase, given, settings, strategies as st

from pdbq.coref.metrics import pairwise
from pdbq.linkage import dedupe

FIELDS = ["first_name", "last_name", "dob", "email", "phone", "address", "city", "zip"]


def _movers():
    spec = importlib.util.spec_from_file_location("pdbq_tests_movers_data", Path(__file__).parent / "movers_data.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.movers


def _run(n, seed):
    tbl, ent = _movers()(n, seed=seed)
    con = duckdb.connect()
    con.register("src", tbl)
    con.execute("CREATE TABLE people AS SELECT * FROM src")
    return dedupe("people", id="rid", fields=FIELDS, con=con), ent


def test_generator_plants_dependence_among_matches():
    """The generator does what the tests rely on: among one person's pairs, the place fields
    change together (far more often than independence says) while dob and email mostly agree."""
    tbl, ent = _movers()(4000, seed=3)
    cols = {f: np.asarray(tbl.column(f).to_pylist(), dtype=object) for f in FIELDS}
    order = np.argsort(ent, kind="stable")
    e = ent[order]
    a = order[:-1][e[1:] == e[:-1]]
    b = order[1:][e[1:] == e[:-1]]
    assert a.size > 300

    def differ(f):
        x, y = cols[f][a], cols[f][b]
        ok = (x != None) & (y != None)  # noqa: E711
        return (x != y) & ok, ok

    addr, ok_a = differ("address")
    city, ok_c = differ("city")
    both = ok_a & ok_c
    p_addr, p_city = addr[both].mean(), city[both].mean()
    assert 0.25 < p_addr < 0.7
    assert (addr & city)[both].mean() > 1.5 * p_addr * p_city  # moves change both together
    for f, most in (("dob", 0.2), ("email", 0.4)):  # new emails and typos: email changes more
        d, ok = differ(f)
        assert d[ok].mean() < most


# no shrinking: each try is a whole dedupe run; the failing seed is in the message
@settings(max_examples=1, deadline=None, phases=[Phase.generate])
@given(seed=st.integers(0, 999))
def test_movers_are_found(seed):
    res, ent = _run(4000, seed)
    # few pairs of different people share a date of birth and an email (twins with a family
    # address): agreeing on both is nearly two independent coincidences, not a -10-bit penalty
    inter = {(r["field"], r["given"]): r["bits"] for r in res.pair_model.interactions_table()}
    assert inter.get(("dob", "email"), 0.0) > -3.0, (seed, inter)
    assert res.pair_model.diagnostics.get("groups") == [["address", "city", "zip"]], (seed, res.pair_model.diagnostics)
    pw = pairwise(res.clusters.column("cluster").to_numpy(), ent)
    assert pw.recall >= 0.95 and pw.precision >= 0.85, (seed, pw)


# Precision stays near 0.90 at 4,000 records (seed 0: P 0.903, R 0.972): the false pairs are
# different people with the same first and last name, whose e-mails (first.last1234@...) are
# then similar too. That dependence among non-matches lives at the *similar* levels, which the
# field interactions (counted on exact agreement) do not see; estimating it from random pairs
# weighed by the model's posterior fixed it here (P 0.958) but took Cora from 0.962 to 0.676.
# one measured seed (a drawn one might pass by luck and flip a strict marker)
@pytest.mark.xfail(strict=True, reason="dependence among non-matches at similar levels (e-mails built from names)")
def test_movers_found_with_same_name_people_apart(seed=0):
    res, ent = _run(4000, seed)
    pw = pairwise(res.clusters.column("cluster").to_numpy(), ent)
    assert pw.f1 >= 0.95, (seed, pw)


def _planted(rng, people, p_move, p_typo, n_stable):
    """People with `n_stable` stable identifiers (agree among one person's records but for a typo
    with probability `p_typo`) and a place (address, city, zip) that moves as a whole with
    probability `p_move` per further record. Each person has 1–3 records. Returns (table, entity)."""
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))

    def word(k):
        return "".join(rng.choice(letters, size=k))

    def typo(s):
        i = int(rng.integers(len(s)))
        return s[:i] + str(rng.choice(letters)) + s[i + 1:]

    cities = [(word(7), [str(z) for z in rng.integers(10000, 99999, size=3)]) for _ in range(max(5, people // 100))]

    def place():
        c, zips = cities[int(rng.integers(len(cities)))]
        return [f"{rng.integers(1, 999)} {word(6)} st", c, zips[int(rng.integers(len(zips)))]]

    stable = [f"s{k}" for k in range(n_stable)]
    rows, ent = [], []
    for e in range(people):
        ids = [word(int(rng.integers(6, 10))) for _ in stable]
        home = place()
        for d in range(int(rng.choice([1, 2, 3], p=[0.5, 0.3, 0.2]))):
            vals = [typo(v) if d and rng.random() < p_typo else v for v in ids]
            if d and rng.random() < p_move:
                home = place()
            rows.append(vals + home)
            ent.append(e)
    cols = stable + ["address", "city", "zip"]
    tbl = pa.table({"rid": np.arange(len(rows)), **{c: [r[k] for r in rows] for k, c in enumerate(cols)}})
    return tbl, np.asarray(ent), cols, stable


# Failed before field groups, for two reasons measured on seed 0 (p_move 0.3, no typos, two stable
# identifiers): EM within the training rules "s0 equal" / "s1 equal" (which hold only matches)
# fitted the rule's own u and took the 35% who moved for non-matches (rule match share 0.65,
# m(address differs) 0.015); and even with m from labels (every tenth person), the interaction's
# EM for the non-matches among the pairs equal on s0 and s1 counted one move as three independent
# disagreements (address, city, zip) and gave s0&s1 -8.1 bits (recall 0.77). Now the place is
# found as a group (the postcode fixes the city, the address fixes both) and modelled jointly.
# no shrinking: each try is a whole dedupe run; the failing parameters are in the message
@settings(max_examples=3, deadline=None, phases=[Phase.generate])
@given(seed=st.integers(0, 2**31 - 1), p_move=st.floats(0.3, 0.7), p_typo=st.floats(0.0, 0.2),
       n_stable=st.integers(2, 3))
def test_dependence_planted_among_matches_is_not_evidence_against(seed, p_move, p_typo, n_stable):
    """The place fields change together among matches (planted dependence among matches); the
    stable identifiers are independent among non-matches. Agreeing on two stable identifiers is
    then never evidence against a match, and the people who moved are found."""
    rng = np.random.default_rng(seed)
    tbl, ent, cols, stable = _planted(rng, 1500, p_move, p_typo, n_stable)
    con = duckdb.connect()
    con.register("src", tbl)
    con.execute("CREATE TABLE people AS SELECT * FROM src")
    res = dedupe("people", id="rid", fields=cols, con=con)
    msg = (seed, p_move, p_typo, n_stable)
    assert res.pair_model.diagnostics.get("groups") == [["address", "city", "zip"]], (msg, res.pair_model.diagnostics)
    # agreeing on a second stable identifier is evidence for a match, never against: whatever
    # dependence among non-matches is left (a few pairs EM cannot place), the field's own exact
    # weight outweighs it
    agree = {r["field"]: r["weight_bits"] for r in res.pair_model.table() if r["level"] == 0}
    for r in res.pair_model.interactions_table():
        if r["field"] in stable and r["given"] in stable:
            assert r["bits"] + agree[r["given"]] > 0.5 * agree[r["given"]], (msg, r, agree)
    pw = pairwise(res.clusters.column("cluster").to_numpy(), ent)
    assert pw.recall >= 0.95 and pw.precision >= 0.95, (msg, pw)


@settings(max_examples=3, deadline=None, phases=[Phase.generate])
@given(seed=st.integers(0, 2**31 - 1), p_move=st.floats(0.3, 0.7), p_typo=st.floats(0.0, 0.2),
       n_stable=st.integers(2, 3))
def test_fields_that_move_together_compared_as_one_field_find_the_movers(seed, p_move, p_typo, n_stable):
    """The remedy docs/coreference.md gives for the xfail above: the place compared as one field,
    so a move is one disagreement. The same planted data is then resolved."""
    rng = np.random.default_rng(seed)
    tbl, ent, _, stable = _planted(rng, 1500, p_move, p_typo, n_stable)
    con = duckdb.connect()
    con.register("src", tbl)
    con.execute(f"CREATE TABLE people AS SELECT rid, {', '.join(stable)}, address || ', ' || city || ' ' || zip AS place FROM src")
    res = dedupe("people", id="rid", fields=[*stable, "place"], con=con)
    msg = (seed, p_move, p_typo, n_stable)
    # agreement on a second stable field is never evidence against a match: whatever the fitted
    # interaction subtracts, the field's own exact-match weight outweighs it (the interaction
    # itself is not yet zero: with many typos it reached -3.8 bits against +11.3, seed 521)
    agree = {r["field"]: r["weight_bits"] for r in res.pair_model.table() if r["level"] == 0}
    for r in res.pair_model.interactions_table():
        if r["field"] in stable and r["given"] in stable:
            assert r["bits"] + agree[r["field"]] > 0.0, (msg, r, agree)
    pw = pairwise(res.clusters.column("cluster").to_numpy(), ent)
    assert pw.recall >= 0.95 and pw.precision >= 0.95, (msg, pw)
