"""Exact elimination against enumeration on small graphs (every function × semantics ×
boolean/categorical × evidence), plus budget errors, -inf tables and components."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from exact_graphs import FUNCTIONS, brute_force, random_graph
from pdbq.errors import EvidenceError, InferenceError
from pdbq.graph.builder import GraphBuilder
from pdbq.inference.exact.elimination_order import elimination_order
from pdbq.inference.exact.elimination import exact_map, exact_marginals
from pdbq.inference.exact.potentials import log_score
from pdbq.language.nodes import FactorFunction as F
from pdbq.language.nodes import Semantics as S


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("semantics", [S.LINEAR, S.LOGICAL, S.RATIO])
@pytest.mark.parametrize("categorical", [False, True])
@pytest.mark.parametrize("evidence", [False, True])
def test_exact_matches_enumeration(function, semantics, categorical, evidence):
    seed = 1000 * int(function) + 100 * int(semantics) + 10 * categorical + evidence
    rng = np.random.default_rng(seed)
    g = random_graph(rng, function, semantics, categorical, evidence, n_vars=8)
    marg, log_z, top, joint = brute_force(g)
    r = exact_marginals(g)
    assert np.max(np.abs(r.marginals - marg)) < 1e-10
    assert r.log_z == pytest.approx(log_z, abs=1e-9)
    m = exact_map(g)
    assert m.log_score == pytest.approx(top, abs=1e-9)
    # the traced-back assignment really scores that much, and keeps the evidence
    assert log_score(g, m.values) == pytest.approx(top, abs=1e-9)
    ev = g.evidence
    assert np.all(m.values[ev >= 0] == ev[ev >= 0])
    assert np.all(m.values < g.cardinality)


def test_full_reference_enumeration_with_log_score():
    """Independent of the hyperedge tables: enumerate with the per-assignment reference."""
    rng = np.random.default_rng(7)
    g = random_graph(rng, F.VOTE, S.RATIO, True, True, n_vars=6, n_factors=6)
    scores = {}
    for x in itertools.product(*[range(int(c)) for c in g.cardinality]):
        if all(e < 0 or e == xi for e, xi in zip(g.evidence, x)):
            scores[x] = log_score(g, np.array(x))
    vals = np.array(list(scores.values()))
    log_z = np.log(np.sum(np.exp(vals - vals.max()))) + vals.max()
    r = exact_marginals(g)
    assert r.log_z == pytest.approx(log_z, abs=1e-9)
    for v in range(g.n_vars):
        for k in range(int(g.cardinality[v])):
            p = sum(np.exp(s - log_z) for x, s in scores.items() if x[v] == k)
            assert r.marginals[v, k] == pytest.approx(p, abs=1e-10)
    assert exact_map(g).log_score == pytest.approx(vals.max(), abs=1e-9)


def test_check_has_teeth():
    """A wrong weight changes the marginals beyond the tolerance used above."""
    rng = np.random.default_rng(3)
    g = random_graph(rng, F.IMPLY, S.LINEAR, False, False)
    marg, *_ = brute_force(g)
    bent = g._replace(weights=g.weights * 1.01)
    assert np.max(np.abs(exact_marginals(bent).marginals - marg)) > 1e-6


def test_minus_inf_tables_and_zero_probability_evidence():
    b = GraphBuilder()
    x, y, z = b.add_variables(3)
    # x XOR y forced (zeros on the diagonal), y -> z soft
    b.add_factor(F.TABLE, [x, y], table=[-np.inf, 0.0, 0.0, -np.inf])
    b.add_factor(F.TABLE, [y, z], table=[0.5, 0.0, 0.0, 1.5])
    b.add_factor(F.TABLE, [x], table=[0.2, 0.0])
    g = b.build()
    marg, log_z, top, _ = brute_force(g)
    r = exact_marginals(g)
    assert np.max(np.abs(r.marginals - marg)) < 1e-12 and r.log_z == pytest.approx(log_z)
    assert exact_map(g).log_score == pytest.approx(top)
    g_bad = g._replace(evidence=np.array([1, 1, -1], dtype=np.int32))
    with pytest.raises(EvidenceError, match="probability zero"):
        exact_marginals(g_bad)
    with pytest.raises(EvidenceError, match="probability zero"):
        exact_map(g_bad)
    # evidence makes the other variable certain
    r = exact_marginals(g, evidence={0: 1})
    assert r.marginals[1].tolist() == [1.0, 0.0]


def test_components_isolated_variables_and_evidence_override():
    b = GraphBuilder()
    a, c, d, e = b.add_variables(4)
    f = b.add_variable(3)  # isolated, categorical
    w = b.add_weight(0.8)
    b.add_factor(F.EQUAL, [a, c], weight=w)
    b.add_factor(F.EQUAL, [d, e], weight=b.add_weight(-0.4))
    b.add_factor(F.ISTRUE, [a], literals=[1], weight=b.add_weight(0.3))
    g = b.build()
    marg, log_z, _, _ = brute_force(g)
    r = exact_marginals(g)
    assert np.allclose(r.marginals, marg, atol=1e-12) and r.log_z == pytest.approx(log_z)
    assert r.marginals[f].tolist() == pytest.approx([1 / 3, 1 / 3, 1 / 3])
    assert r.marginals.shape == (5, 3) and r.marginals[0, 2] == 0.0
    r2 = exact_marginals(g, evidence={a: 0})
    g2 = g._replace(evidence=np.array([0, -1, -1, -1, -1], dtype=np.int32))
    marg2, log_z2, _, _ = brute_force(g2)
    assert np.allclose(r2.marginals, marg2, atol=1e-12) and r2.log_z == pytest.approx(log_z2)


def _grid(n: int, weight: float = 0.3):
    b = GraphBuilder()
    vs = b.add_variables(n * n)
    w = b.add_weight(weight)
    for i in range(n):
        for j in range(n):
            if j + 1 < n:
                b.add_factor(F.EQUAL, [vs[i * n + j], vs[i * n + j + 1]], weight=w)
            if i + 1 < n:
                b.add_factor(F.EQUAL, [vs[i * n + j], vs[(i + 1) * n + j]], weight=w)
    return b.build()


def test_beyond_budget_names_width_and_table_size():
    g = _grid(6)
    info = elimination_order(g)
    assert info.width == 6 and info.max_table_size == 2**7
    with pytest.raises(InferenceError, match=r"induced width (at least )?6 and needs a table of (at least )?128 entries") as e:
        exact_marginals(g, max_table=64)
    assert "max_table = 64" in str(e.value)
    with pytest.raises(InferenceError, match="induced width"):
        exact_map(g, max_table=64)
    # a graph far beyond the default budget is refused without building anything
    with pytest.raises(InferenceError, match=r"at least 2[6-9]"):
        exact_marginals(_grid(40))


def test_large_weights_stay_finite():
    b = GraphBuilder()
    xs = b.add_variables(6)
    for a, c in zip(xs, xs[1:]):
        b.add_factor(F.EQUAL, [a, c], weight=b.add_weight(1e3))
    b.add_factor(F.ISTRUE, [xs[0]], literals=[1], weight=b.add_weight(-1e3))
    g = b.build()
    r = exact_marginals(g)
    assert np.all(np.isfinite(r.marginals)) and np.isfinite(r.log_z)
    assert r.marginals[:6, 0] == pytest.approx(np.ones(6))
    assert r.log_z == pytest.approx(6e3)
    m = exact_map(g)
    assert m.values.tolist() == [0] * 6 and m.log_score == pytest.approx(6e3)
