"""Estimation that cannot collapse silently: the mutual-best bound on the prior, warnings for a
model that finds almost no match, and guessed m values that cannot carry many bits."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from pdbq.coref.estimate import GUESS_BITS, EmSettings, mutual_best, prior_floor
from pdbq.linkage import dedupe


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(2, 12), m=st.integers(1, 30))
def test_mutual_best_is_each_records_best_positive_partner(seed, n, m):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n, size=m)
    b = rng.integers(0, n, size=m)
    keep = a != b
    a, b = np.minimum(a[keep], b[keep]), np.maximum(a[keep], b[keep])
    pairs = np.unique(np.stack([a, b], axis=1), axis=0)  # candidate pairs are distinct
    a, b = pairs[:, 0], pairs[:, 1]
    w = rng.normal(0, 3, size=a.size).round(0)  # ties happen
    got = mutual_best(a, b, w, n)
    for p in range(a.size):
        best = {}
        for q in range(a.size):
            for x in (a[q], b[q]):
                best[x] = max(best.get(x, -np.inf), w[q])
        expect_best = w[p] == best[a[p]] and w[p] == best[b[p]] and w[p] > 0
        # a flagged pair is a best pair of both records (with ties, one of them is flagged)
        if got[p]:
            assert expect_best, f"seed {seed}: pair {p} flagged but not best"
    # no record is in two flagged pairs
    flagged = np.r_[a[got], b[got]]
    assert np.unique(flagged).size == flagged.size, f"seed {seed}"


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), k=st.integers(0, 40))
def test_prior_floor_counts_pairs_strong_enough_at_their_own_bound(seed, k):
    """k disjoint pairs with overwhelming evidence and noise pairs with little: the bound is k
    over all pairs (the noise never qualifies at that prior)."""
    rng = np.random.default_rng(seed)
    n, total = 1000, 1000 * 999 // 2
    a = np.arange(0, 2 * k, 2)
    b = a + 1
    ev = np.full(k, 40.0)
    na = rng.integers(2 * k, n - 1, size=200)
    nb = na + 1
    a, b, ev = np.r_[a, na], np.r_[b, nb], np.r_[ev, rng.uniform(-5, 5, size=200)]
    low, got = prior_floor(a, b, ev, n, total)
    assert got == k, f"seed {seed}: {got} != {k}"
    assert low == k / total


def _people(rng, n):
    first = [f"name{k:03d}" for k in range(300)]
    streets = [f"{w} street" for w in ("oak", "elm", "pine", "birch", "cedar", "maple", "ash", "lime")]
    return [{"id": i, "first": first[int(rng.integers(300))], "last": f"family{int(rng.integers(2000)):04d}",
             "dob": f"{int(rng.integers(1940, 2005))}{int(rng.integers(1, 13)):02d}{int(rng.integers(1, 29)):02d}",
             "street": streets[int(rng.integers(len(streets)))]}
            for i in range(n)]


def test_almost_no_matches_is_said_and_the_clustering_stays_usable():
    """1,500 people with a single duplicate: the fitted model finds almost no match, which the
    result says; the one duplicate is still joined and nothing else is."""
    rng = np.random.default_rng(3)
    rows = _people(rng, 1500)
    rows.append(dict(rows[7], id=5000))
    con = duckdb.connect()
    con.register("people", pa.Table.from_pylist(rows))
    res = dedupe("people", id="id", fields=["first", "last", "dob", "street"], con=con)
    assert any("almost no match" in w for w in res.warnings), res.warnings
    c = res.clusters.to_pydict()
    cl = dict(zip(c["id"], c["cluster"]))
    assert cl[5000] == cl[7]
    assert len(set(c["cluster"])) >= 1500 - 1


def test_a_field_forced_equal_in_every_rule_carries_a_bounded_guess():
    """A code shared only by a record and its duplicate is the one training rule's field (the
    other field is too broad for a rule): its m cannot be estimated, and its weights stay within
    ±GUESS_BITS instead of the default guess's several bits."""
    rng = np.random.default_rng(4)
    n = 1200
    rows = [{"id": i, "code": f"c{int(rng.integers(10**6)):07d}x", "size": ["s", "m", "l"][int(rng.integers(3))]}
            for i in range(n)]
    for i in range(0, 300, 3):
        rows.append(dict(rows[i], id=10_000 + i))
    em = EmSettings(train_pairs=20_000)
    con = duckdb.connect()
    con.register("items", pa.Table.from_pylist(rows))
    res = dedupe("items", id="id", fields=["code", "size"], em=em, con=con)
    pm = res.pair_model
    code = next(f for f in pm.fields if f.field == "code")
    w = code.weights()
    assert np.all(np.abs(w) <= GUESS_BITS + 1e-6), w
    assert pm.diagnostics["guessed_m"] == ["code"], (pm.diagnostics, res.warnings)
    assert any("guess" in w for w in res.warnings)
