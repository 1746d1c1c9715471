"""The numba min-fill kernel (`pdbq.inference.exact.min_fill_kernel`) against the Python sets-and-heap
version it replaces for small graphs: the same order, cliques, sizes and stopping point."""

from __future__ import annotations

import numpy as np
import pytest

from pdbq.errors import InferenceError
from pdbq.inference.exact.elimination_order import _min_fill_dense, _min_fill_sets, min_fill_order
from pdbq.inference.exact.min_fill_kernel import MAX_DENSE, min_fill_graph


def _random_scopes(rng, n, m, k):
    return [np.unique(rng.choice(n, int(rng.integers(1, k + 1)))) for _ in range(m)]


def _same(a, b):
    return (
        np.array_equal(a.order, b.order)
        and len(a.cliques) == len(b.cliques)
        and all(np.array_equal(x, y) for x, y in zip(a.cliques, b.cliques))
        and (a.width, a.max_table_size, a.total_table_size, a.complete)
        == (b.width, b.max_table_size, b.total_table_size, b.complete)
    )


@pytest.mark.parametrize("seed", range(4))
def test_kernel_gives_the_python_order_on_random_graphs(seed):
    rng = np.random.default_rng(seed)
    for t in range(60):
        n = int(rng.integers(1, 45))
        card = rng.integers(1, 5, n) if t % 2 else np.full(n, 2)
        scopes = _random_scopes(rng, n, int(rng.integers(1, 70)), 4)
        stop = None if t % 3 else int(rng.integers(2, 300))
        a = _min_fill_sets(scopes, card, stop_above=stop)
        b = _min_fill_dense(scopes, card, stop)
        assert _same(a, b), (seed, t)


def test_cliques_are_the_elimination_cliques():
    # a broken kernel (wrong fill edges) fails this: each clique is {v} ∪ its neighbours when eliminated
    rng = np.random.default_rng(7)
    scopes = _random_scopes(rng, 30, 50, 3)
    card = rng.integers(2, 4, 30)
    info = _min_fill_dense(scopes, card, None)
    adj: dict[int, set[int]] = {}
    for s in scopes:
        for v in s.tolist():
            adj.setdefault(v, set()).update(s.tolist())
    for v in adj:
        adj[v].discard(v)
    for v, clique in zip(info.order.tolist(), info.cliques):
        nb = adj.pop(v)
        assert clique.tolist() == sorted(nb | {v})
        for u in nb:
            adj[u].discard(v)
            adj[u] |= nb - {u}


def test_min_fill_order_uses_the_kernel_up_to_the_dense_limit():
    scopes = [np.array([i, i + 1]) for i in range(9)]
    card = np.full(10, 3)
    assert _same(min_fill_order(scopes, card), _min_fill_sets(scopes, card))
    assert min_fill_order([], card).order.size == 0


def test_bad_inputs_are_refused_before_the_kernel():
    with pytest.raises(InferenceError, match="outside"):
        min_fill_graph([np.array([0, 5])], np.full(3, 2))
    with pytest.raises(InferenceError, match="below 1"):
        min_fill_graph([np.array([0, 1])], np.array([2, 0]))
    with pytest.raises(InferenceError, match="dense"):
        min_fill_graph([np.arange(MAX_DENSE + 1)], np.full(MAX_DENSE + 1, 2))


@pytest.mark.parametrize("seed", range(3))
def test_held_variables_go_last_in_both_versions(seed):
    rng = np.random.default_rng(50 + seed)
    for t in range(30):
        n = int(rng.integers(2, 30))
        card = rng.integers(2, 4, n)
        scopes = _random_scopes(rng, n, int(rng.integers(1, 50)), 3)
        present = np.unique(np.concatenate(scopes))
        held = frozenset(rng.choice(present, size=int(rng.integers(1, min(3, present.size) + 1)), replace=False).tolist())
        a = _min_fill_sets(scopes, card, held=held)
        b = _min_fill_dense(scopes, card, None, held)
        assert _same(a, b), (seed, t)
        tail = b.order[len(b.order) - len(held):].tolist()
        assert set(tail) == held  # eliminated after every other variable
        one = min_fill_order(scopes, card, last=[min(held)])
        assert one.order[-1] == min(held)
