"""B³ / pairwise metrics against hand-computed values, in Python and as DuckDB table macros."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from pdbq.coref.layout import CorefInputError, pair_graph
from pdbq.coref.metrics import align_gold, b_cubed, labels_from_pairs, pairwise, register_sql

# pred {1,2,3} {4,5}; gold {1,2} {3,4,5}
PRED = [1, 1, 1, 4, 4]
GOLD = [1, 1, 3, 3, 3]


def test_b_cubed_by_hand():
    # precision per mention: 2/3, 2/3, 1/3, 2/2, 2/2 -> 11/15; recall: 2/2, 2/2, 1/3, 2/3, 2/3 -> 11/15
    s = b_cubed(PRED, GOLD)
    assert s.precision == pytest.approx(11 / 15)
    assert s.recall == pytest.approx(11 / 15)
    assert s.f1 == pytest.approx(11 / 15)
    assert b_cubed(GOLD, GOLD).f1 == 1.0
    # all singletons: precision 1, recall mean(1/|G|) = (1/2 + 1/2 + 1/3 * 3) / 5
    s = b_cubed([1, 2, 3, 4, 5], GOLD)
    assert (s.precision, s.recall) == (1.0, pytest.approx(2 / 5))


def test_pairwise_by_hand():
    # predicted pairs: 3 + 1 = 4; gold pairs: 1 + 3 = 4; common: (1,2), (4,5) -> 2
    s = pairwise(PRED, GOLD)
    assert (s.precision, s.recall, s.f1) == (0.5, 0.5, 0.5)
    assert pairwise([1, 2, 3], [1, 2, 3]).f1 == 1.0


def test_sql_macros_match_python():
    con = duckdb.connect()
    register_sql(con)
    con.execute("CREATE TABLE p AS SELECT * FROM (VALUES (1, 1), (2, 1), (3, 1), (4, 4), (5, 4)) t(id, cluster)")
    con.execute("CREATE TABLE g AS SELECT * FROM (VALUES (1, 1), (2, 1), (3, 3), (4, 3), (5, 3)) t(id, entity)")
    p, r, f = con.execute("SELECT * FROM coref_b3('p', 'g')").fetchone()
    assert (p, r, f) == (pytest.approx(11 / 15), pytest.approx(11 / 15), pytest.approx(11 / 15))
    assert con.execute("SELECT * FROM coref_pairwise('p', 'g')").fetchone() == (0.5, 0.5, 0.5)
    con.execute("CREATE TABLE g2 AS SELECT * FROM (VALUES (1, 1), (2, 1), (3, 3), (4, 3), (9, 3)) t(id, entity)")
    with pytest.raises(duckdb.Error, match="appear in only one"):
        con.execute("SELECT * FROM coref_b3('p', 'g2')").fetchall()


def test_labels_from_pairs_and_unknown_ids():
    ids = np.array([10, 11, 12, 13])
    assert labels_from_pairs(ids, [11, 12], [12, 13]).tolist() == [10, 11, 11, 11]
    with pytest.raises(CorefInputError, match="unknown id"):
        labels_from_pairs(ids, [10], [99])


def test_align_gold_errors():
    ids = np.array([1, 2, 3])
    assert align_gold(ids, [3, 1, 2], [7, 5, 5]).tolist() == [5, 5, 7]
    with pytest.raises(CorefInputError, match="not among the records"):
        align_gold(ids, [1, 2, 3, 4], [1, 1, 1, 1])
    with pytest.raises(CorefInputError, match="more than once"):
        align_gold(ids, [1, 1, 2, 3], [1, 1, 1, 1])
    with pytest.raises(CorefInputError, match="does not cover"):
        align_gold(ids, [1, 2], [1, 1])


def test_pair_graph_errors():
    with pytest.raises(CorefInputError, match="itself"):
        pair_graph(3, np.array([1]), np.array([1]), np.array([1.0]))
    with pytest.raises(CorefInputError, match="more than once"):
        pair_graph(3, np.array([0, 1]), np.array([1, 0]), np.array([1.0, 1.0]))
    with pytest.raises(CorefInputError, match="finite"):
        pair_graph(3, np.array([0]), np.array([1]), np.array([np.nan]))


@pytest.mark.parametrize("shuffled", [False, True])
def test_pair_graph_rows_hold_each_pair_both_ways_sorted(shuffled):
    rng = np.random.default_rng(3)
    n = 60
    lo, hi = np.triu_indices(n, 1)
    pick = rng.random(lo.size) < 0.1
    a, b = lo[pick], hi[pick]  # in (a, b) order: the fast path; shuffled (and flipped): the sort
    if shuffled:
        order = rng.permutation(a.size)
        a, b = b[order], a[order]
    w = rng.normal(size=a.size)
    g = pair_graph(n, a, b, w)
    want = {m: sorted([(int(j), float(s)) for i, j, s in zip(a, b, w) if i == m]
                      + [(int(i), float(s)) for i, j, s in zip(a, b, w) if j == m]) for m in range(n)}
    for m in range(n):
        row = list(zip(g.nbr[g.indptr[m]:g.indptr[m + 1]].tolist(), g.score[g.indptr[m]:g.indptr[m + 1]].tolist()))
        assert row == want[m]
    with pytest.raises(CorefInputError, match=r"pair \(0, 2\) is listed more than once"):
        pair_graph(4, np.array([0, 1, 2]), np.array([2, 3, 0]), np.ones(3))
