"""The numba upward pass (`pdbq.inference.exact.upward_kernel`, used for clique tables up to
`SMALL_TABLE` entries) against the numpy pass it replaces there, on random small models with
evidence, impossible entries (-inf) and isolated variables; and against brute force."""

from __future__ import annotations

import numpy as np
import pytest

import pdbq.inference.exact.elimination as exact
from exact_graphs import brute_force, random_graph
from pdbq.graph.builder import GraphBuilder
from pdbq.inference.exact.elimination import _graph_edges, _prepared_tree, _upward_small, exact_marginals
from pdbq.language.nodes import FactorFunction as F
from pdbq.language.nodes import Semantics as S


def _numpy_upward(tree):
    n = len(tree.keys)
    up, roots = [None] * n, 0.0
    for i in range(n):
        msg = exact._lse0(exact._potential(tree, i, up))
        if tree.parent[i] < 0:
            roots += float(msg)
        else:
            up[i] = msg
    return up, roots


def _table_graph(rng, n_vars, n_factors, p_zero):
    b = GraphBuilder()
    cards = rng.integers(2, 5, size=n_vars)
    for c in cards:
        b.add_variable(int(c))
    w = b.add_weight(1.0)
    for _ in range(n_factors):
        k = int(rng.integers(1, 4))
        vs = [int(v) for v in rng.choice(n_vars, size=min(k, n_vars), replace=False)]
        size = int(np.prod(cards[vs]))
        t = rng.normal(size=size)
        t[rng.random(size) < p_zero] = -np.inf
        b.add_factor(F.TABLE, vs, weight=w, table=t)
    return b.build()


@pytest.mark.parametrize("seed", range(8))
def test_kernel_messages_equal_numpy_messages(seed):
    rng = np.random.default_rng(seed)
    g = _table_graph(rng, int(rng.integers(3, 14)), int(rng.integers(2, 20)), 0.15 if seed % 2 else 0.0)
    ev = np.full(g.n_vars, -1)
    if seed % 3 == 0:
        ev[0] = 0
    try:
        edges, ev, info = _graph_edges(g, ev, 2**20)
        _, _, _, tree, _ = _prepared_tree(edges, g.cardinality, ev, 2**20, info)
    except Exception as e:  # noqa: BLE001 - zero-probability evidence: both paths refuse it alike
        pytest.skip(f"not a valid model: {e}")
    up_k, roots_k = _upward_small(tree)
    up_n, roots_n = _numpy_upward(tree)
    assert roots_k == pytest.approx(roots_n, abs=1e-12) or (roots_k == roots_n == -np.inf)
    for a, b in zip(up_k, up_n):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.shape == b.shape
            assert np.array_equal(np.isneginf(a), np.isneginf(b))
            fin = np.isfinite(b)
            assert a[fin] == pytest.approx(b[fin], abs=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_small_path_equals_brute_force_and_the_numpy_path(seed, monkeypatch):
    rng = np.random.default_rng(100 + seed)
    g = random_graph(rng, [F.TABLE, F.EQUAL, F.IMPLY][seed % 3], S.LINEAR, categorical=seed % 2 == 0, evidence=seed % 2 == 1)
    marg, log_z = brute_force(g)[:2]
    fast = exact_marginals(g)
    monkeypatch.setattr(exact, "SMALL_TABLE", 0)  # every clique by numpy
    slow = exact_marginals(g)
    assert fast.log_z == pytest.approx(log_z, abs=1e-9) and slow.log_z == pytest.approx(fast.log_z, abs=1e-12)
    assert fast.marginals == pytest.approx(slow.marginals, abs=1e-12)
    assert fast.marginals == pytest.approx(marg, abs=1e-9)
