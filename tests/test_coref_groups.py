"""Field groups: fields that change together among matches and agree together among non-matches
(pdbq.coref.groups, pdbq.coref.comoving). Property tests draw new inputs each run; a failure
prints its draw."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from pdbq.coref.comoving import find_groups
from pdbq.coref.estimate import em
from pdbq.coref.groups import (
    correction_nats,
    estimate_joint,
    group_codes,
    independent,
    marginal,
)
from pdbq.coref.levels import prepare_values, sniff_fields
from pdbq.coref.model import MENTION, RECORDS
from pdbq.linkage.front import load_records


def _dist(rng, L):
    x = rng.random(L) + 0.05
    return x / x.sum()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), sizes=st.lists(st.integers(2, 5), min_size=2, max_size=4))
def test_members_independent_among_matches_add_nothing(seed, sizes):
    """A joint estimated from counts that follow the product of the marginals corrects nothing,
    and summing members out of a joint gives the others' joint."""
    rng = np.random.default_rng(seed)
    ms = [_dist(rng, L) for L in sizes]
    ind = independent(ms)
    joint = estimate_joint(1e7 * ind, ms)
    corr = correction_nats(joint, ms)
    assert np.abs(corr).max() < 1e-3, (seed, sizes, np.abs(corr).max())
    keep = tuple(sorted(rng.choice(len(sizes), size=2, replace=False).tolist()))
    sub = marginal(ind, tuple(sizes), keep)
    assert np.allclose(sub, independent([ms[k] for k in keep])), (seed, sizes, keep)


def _planted_levels(rng, n_pairs, lam, p_move, n_free, n_group):
    """Level vectors (pairs × fields; levels 0 exact, 1 similar, 2 else) of a mixture: matches
    (share lam) whose group of fields changes together (all at "else" with probability p_move,
    else each exact) and whose free fields are exact with probability 0.9; non-matches with
    every field independent (mostly "else")."""
    K = n_free + n_group
    match = rng.random(n_pairs) < lam
    lv = np.where(rng.random((n_pairs, K)) < 0.02, 1, 2)  # non-matches
    free_m = np.where(rng.random((n_pairs, n_free)) < 0.9, 0, rng.integers(1, 3, (n_pairs, n_free)))
    moved = rng.random(n_pairs) < p_move
    grp_m = np.where(moved[:, None], 2, np.where(rng.random((n_pairs, n_group)) < 0.95, 0, 1))
    lv[match] = np.concatenate([free_m, grp_m], axis=1)[match]
    return lv, match, moved


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), lam=st.floats(0.2, 0.8), p_move=st.floats(0.2, 0.6),
       n_free=st.integers(2, 3), n_group=st.integers(2, 3))
def test_em_recovers_a_planted_co_change(seed, lam, p_move, n_free, n_group):
    """Planted dependence among matches: a group of fields changes together. EM with the group
    recovers the match share and P(all members change | match), where EM without it counts the
    change once per member (its model says the members change together with probability
    Π m_k(else), far below the planted rate)."""
    rng = np.random.default_rng(seed)
    lv, match, moved = _planted_levels(rng, 20_000, lam, p_move, n_free, n_group)
    K = n_free + n_group
    keys, counts = np.unique(lv, axis=0, return_counts=True)
    us = [np.array([0.001, 0.02, 0.979])] * K
    m0 = [np.array([0.8, 0.15, 0.05])] * K
    group = tuple(range(n_free, K))
    res = em(keys, counts.astype(float), us, m0, 0.5, [True] * K, 500, 1e-7, groups=(group,))
    truth = float((match & moved).sum() / match.sum())
    assert abs(res.prior - match.mean()) < 0.02, (seed, res.prior, match.mean())
    joint = res.joints[group]
    nl = tuple([3] * n_group)
    all_else = group_codes(np.full((1, K), 2), group, nl)[0]
    assert abs(joint[all_else] - truth) < 0.03, (seed, joint[all_else], truth)
    product = float(np.prod([res.m[k][2] for k in group]))
    assert product < truth - 0.1, (seed, product, truth)  # without the joint a move costs every member


def _hierarchy_table(rng, n):
    """Records with a place hierarchy (address → postcode → city; several postcodes per city),
    an e-mail and a date of birth that stay with the person, and a name; each person has 1–3
    records, a share of them moved."""
    cities = [(f"city{c}", [f"{10000 + 10 * c + z}" for z in range(int(rng.integers(1, 5)))]) for c in range(max(5, n // 300))]
    rows, ent = [], []
    person = 0
    while len(rows) < n:
        dob = f"{rng.integers(1940, 2005)}-{rng.integers(1, 13):02d}-{rng.integers(1, 29):02d}"
        email = f"p{person}x{rng.integers(1000)}@mail.com"
        name = f"n{rng.integers(n // 3)}"
        for d in range(int(rng.integers(1, 4))):
            if d == 0 or rng.random() < 0.4:
                city, zips = cities[int(rng.integers(len(cities)))]
                place = (f"{rng.integers(1, 9999)} s{rng.integers(n)} st", city, zips[int(rng.integers(len(zips)))])
            rows.append((name, dob, email, *place))
            ent.append(person)
        person += 1
    cols = ["name", "dob", "email", "address", "city", "zip"]
    return pa.table({"rid": np.arange(len(rows)), **{c: [r[k] for r in rows] for k, c in enumerate(cols)}}), cols


@settings(max_examples=3, deadline=None, phases=[Phase.generate])
@given(seed=st.integers(0, 2**31 - 1))
def test_a_place_hierarchy_is_found_and_stable_identifiers_are_not_grouped(seed):
    """The postcode fixes the city (a broad field: many people share it), the address fixes both:
    one group. The e-mail fixes the date of birth (one person's records) but nothing broad: no group."""
    rng = np.random.default_rng(seed)
    tbl, cols = _hierarchy_table(rng, 3000)
    con = duckdb.connect()
    con.register("src", tbl)
    con.execute("CREATE TABLE people AS SELECT * FROM src")
    records = load_records(con, "people", "rid", cols)
    fls = sniff_fields(con, RECORDS, records.columns, cols, None)
    prepare_values(con, RECORDS, MENTION, records.columns, fls)
    groups = [[fls[k].field for k in g] for g in find_groups(con, fls, records.n)]
    assert groups == [["address", "city", "zip"]], (seed, groups)
