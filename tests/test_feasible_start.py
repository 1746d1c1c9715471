"""Chains that start where the zero entries allow: a plain chain started in an impossible world
cannot leave it when every way out breaks one more hard constraint; AUTO then starts its moves'
chains from worlds found by search (`feasible_start.feasible_world`) and answers, where before it
raised `ImpossibleStateError` although the evidence is possible (pgmpy's munin networks)."""

from __future__ import annotations

import numpy as np
import pytest

from pdbq.answers.engine import answer
from pdbq.graph.builder import GraphBuilder
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.inference.mcmc import gibbs as gibbs_mod
from pdbq.inference.moves import move_choice
from pdbq.inference.mcmc.feasibility import violated_table_factor
from pdbq.inference.mcmc.feasible_start import feasible_world
from pdbq.inference.mcmc.gibbs import ImpossibleStateError
from pdbq.language.nodes import FactorFunction as F
from pdbq.language.nodes import Method
from pdbq.planning.options import QueryOptions

K = 12  # the AND over the copies has a 2^13-entry table, over AUTO's 1,024-entry blocks

NEG = float("-inf")


def _trap():
    """x, K hard copies y_i = x, an observed z = AND(y), and soft neighbours w_i of x. The world
    with every value lowest breaks only z's table, and each single change breaks one more."""
    b = GraphBuilder()
    x = b.add_variables(1)[0]
    ys = b.add_variables(K)
    z = b.add_variables(1)[0]
    ws = b.add_variables(4)
    b.add_factor(F.TABLE, [x], table=[0.0, -1.0])
    for y in ys:
        b.add_factor(F.TABLE, [x, y], table=[0.0, NEG, NEG, 0.0])
    table = np.full(2 ** (K + 1), NEG)  # z, the last in the scope, changes fastest
    table[0::2] = 0.0  # z = 0: any y
    table[-1] = 0.0  # z = 1 only when every y is 1
    b.add_factor(F.TABLE, [*ys, z], table=table.tolist())
    for w in ws:
        b.add_factor(F.TABLE, [x, w], table=[0.5, 0.0, 0.0, 1.0])
        b.add_factor(F.TABLE, [w], table=[0.0, 0.3])
    g = b.build()
    g.evidence[z] = 1
    return g, x, ws


def test_feasible_world_satisfies_every_zero_and_keeps_the_evidence():
    g, x, _ = _trap()
    worlds = [feasible_world(g, seed) for seed in range(3)]
    for w in worlds:
        assert w is not None and violated_table_factor(g, w) == -1
        assert w[g.evidence >= 0].tolist() == g.evidence[g.evidence >= 0].tolist()
        assert w[x] == 1
    assert len({tuple(w.tolist()) for w in worlds}) > 1  # the free soft variables are drawn


def _auto(g):
    """AUTO's sampling with exact blocks after its pilot (``cutset = false``: on this small graph
    AUTO would draw whole worlds by cutset sampling; on the networks where chains got stuck, over
    2,000 free variables, it does not look for a cutset)."""
    q = np.arange(g.n_vars)
    return answer(g, q, Method.AUTO, QueryOptions(exact_budget=0.0, steps=40_000, seed=1, cutset=False),
                  explicit=frozenset({"cutset"}))


def test_auto_answers_from_feasible_starts():
    g, x, ws = _trap()
    exact = exact_marginals(g).marginals
    a = _auto(g)
    m, se = a.result.marginals, a.result.stderr
    assert m[x, 1] == 1.0
    for w in ws:
        assert abs(m[w, 1] - exact[w, 1]) <= 4 * se[w, 1] + 1e-9


def test_without_feasible_starts_auto_ends_in_an_impossible_world(monkeypatch):
    monkeypatch.setattr(gibbs_mod, "feasible_world", lambda graph, seed, deadline=None: None)
    # static blocks draw whole worlds whatever the start: the block moves are the ones that need it
    monkeypatch.setattr(move_choice, "_static_run", lambda *a, **k: None)
    g, _, _ = _trap()
    with pytest.raises(ImpossibleStateError):
        _auto(g)
