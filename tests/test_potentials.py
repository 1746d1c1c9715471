"""potentials.py against docs/factors.md: truth tables by hand, and the vectorised hyperedge
tables against the per-assignment reference `log_score`."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pdbq.errors import InferenceError
from pdbq.graph.builder import GraphBuilder
from pdbq.inference.exact.potentials import condition, factor_value, hyperedges, log_score
from pdbq.language.nodes import FactorFunction as F
from pdbq.language.nodes import Semantics as S

from exact_graphs import FUNCTIONS, random_graph


def _one(function, cards, literals=None, table=None, weight=1.0):
    b = GraphBuilder()
    vs = [b.add_variable(c) for c in cards]
    kw = {} if function == F.TABLE else {"weight": b.add_weight(weight)}
    f = b.add_factor(function, vs, literals=literals, table=table, **kw)
    return b.build(), f


def _phis(function, cards, literals=None, table=None):
    g, f = _one(function, cards, literals, table)
    return [factor_value(g, f, x) for x in itertools.product(*[range(c) for c in cards])]


def test_truth_tables_of_docs_factors_md():
    # assignments in order 00, 01, 10, 11 (last variable = head)
    assert _phis(F.IMPLY, [2, 2], [1, 1]) == [0, 0, -1, 1]
    assert _phis(F.IMPLY_MLN, [2, 2], [1, 1]) == [1, 1, 0, 1]
    assert _phis(F.OR, [2, 2], [1, 1]) == [-1, 1, 1, 1]
    assert _phis(F.AND, [2, 2], [1, 1]) == [-1, -1, -1, 1]
    assert _phis(F.EQUAL, [2, 2]) == [1, -1, -1, 1]
    assert _phis(F.ISTRUE, [2], [1]) == [-1, 1]
    assert _phis(F.ISTRUE, [2], [0]) == [1, -1]  # NOT a(x)
    assert _phis(F.VOTE, [2, 2], [1, 1]) == [0, 0, -1, 1]
    assert _phis(F.VOTE, [2], [1]) == [-1, 1]  # empty body: the head's sign
    # negated body literal
    assert _phis(F.IMPLY, [2, 2], [0, 1]) == [-1, 1, 0, 0]
    # n = Σ [¬b ∨ h] over the body; LINEAR n, RATIO log2(1+n), LOGICAL [n>0]
    assert _phis(F.LINEAR, [2, 2, 2], [1, 1, 1]) == [2, 2, 1, 2, 1, 2, 0, 2]
    assert _phis(F.LOGICAL, [2, 2, 2], [1, 1, 1]) == [1, 1, 1, 1, 1, 1, 0, 1]
    assert _phis(F.RATIO, [2, 2], [1, 1]) == [1, 1, 0, 1]
    assert _phis(F.LINEAR, [2], [1]) == [0, 1]


def test_categorical_literals_and_vote_on_categorical_head():
    # tag = 'B' (index 1) with a 3-valued head: VOTE s(h) = t(h), no -1
    assert _phis(F.VOTE, [2, 3], [1, 1]) == [0, 0, 0, 0, 1, 0]
    # raw EQUAL between categoricals compares values
    assert _phis(F.EQUAL, [3, 3]) == [1, -1, -1, -1, 1, -1, -1, -1, 1]
    # EQUAL between a literal [x = 2] and a boolean
    assert _phis(F.EQUAL, [3, 2], [2, -1]) == [1, -1, 1, -1, -1, 1]


def test_table_is_row_major_with_last_argument_fastest_and_allows_repeats():
    assert _phis(F.TABLE, [2, 3], table=np.arange(6.0)) == [0, 1, 2, 3, 4, 5]
    g, f = _one(F.TABLE, [3, 2], table=np.arange(6.0))
    # swap scope order in a second graph: hyperedge must transpose to sorted ids
    b = GraphBuilder()
    x, y = b.add_variable(2), b.add_variable(3)
    b.add_factor(F.TABLE, [y, x], table=np.arange(6.0))
    (h,) = hyperedges(b.build())
    assert h.scope.tolist() == [0, 1]
    assert h.log_table.tolist() == [[0, 2, 4], [1, 3, 5]]
    # a variable twice in one scope reads the diagonal
    b = GraphBuilder()
    x = b.add_variable(2)
    b.add_factor(F.TABLE, [x, x], table=[1.0, 2.0, 3.0, 4.0])
    (h,) = hyperedges(b.build())
    assert h.scope.tolist() == [0] and h.log_table.tolist() == [1.0, 4.0]


def test_group_semantics():
    for sem, expect in [(S.LOGICAL, np.sign), (S.RATIO, lambda s: np.sign(s) * np.log1p(abs(s))), (S.LINEAR, lambda s: s)]:
        b = GraphBuilder()
        h, x, y = b.add_variables(3)
        w = b.add_weight(0.7)
        grp = b.add_group(sem, w)
        b.add_factor(F.VOTE, [x, h], literals=[1, 1], group=grp)
        b.add_factor(F.VOTE, [y, h], literals=[1, 1], group=grp)
        g = b.build()
        for vals in itertools.product(range(2), repeat=3):
            hh, xx, yy = vals
            s = (2 * hh - 1) * (xx + yy)
            assert log_score(g, np.array(vals)) == pytest.approx(0.7 * expect(s))


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("semantics", [S.LINEAR, S.LOGICAL, S.RATIO])
@pytest.mark.parametrize("categorical", [False, True])
def test_hyperedges_sum_to_log_score(function, semantics, categorical):
    rng = np.random.default_rng(hash((int(function), int(semantics), categorical)) % 2**32)
    g = random_graph(rng, function, semantics, categorical, evidence=False, n_vars=7)
    edges = hyperedges(g)
    for _ in range(25):
        x = np.array([rng.integers(c) for c in g.cardinality])
        total = sum(float(h.log_table[tuple(x[h.scope])]) for h in edges)
        assert total == pytest.approx(log_score(g, x), abs=1e-12)


def test_condition_slices_evidence_and_leaves_constants():
    b = GraphBuilder()
    x, y = b.add_variable(2), b.add_variable(3)
    b.add_factor(F.TABLE, [x, y], table=np.arange(6.0))
    (h,) = condition(hyperedges(b.build()), {0: 1})
    assert h.scope.tolist() == [1] and h.log_table.tolist() == [3, 4, 5]
    (h,) = condition(hyperedges(b.build()), np.array([1, 2]))
    assert h.scope.size == 0 and float(h.log_table) == 5.0


def test_zero_weight_times_minus_inf_is_zero_and_budget_is_enforced():
    b = GraphBuilder()
    x = b.add_variable(2)
    b.add_factor(F.TABLE, [x], table=[0.0, -np.inf], weight=b.add_weight(0.0))
    (h,) = hyperedges(b.build())
    assert h.log_table.tolist() == [0.0, 0.0]
    b = GraphBuilder()
    xs = b.add_variables(12)
    w = b.add_weight(1.0)
    grp = b.add_group(S.LOGICAL, w)
    for v in xs[1:]:
        b.add_factor(F.VOTE, [v, xs[0]], literals=[1, 1], group=grp)
    with pytest.raises(InferenceError, match="head group 0"):
        hyperedges(b.build(), max_entries=1000)
