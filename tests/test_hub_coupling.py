"""AUTO on a variable whose many weak couplings add up to a strong one: no factor looks strong,
so per-factor checks ran plain single-site chains, which leave the hub (and its neighbours) in
the mode they start in. The summed coupling of one variable sends it through a pilot, whose
R-hat sees the stuck hub, and then through moves that cross it."""

from __future__ import annotations

import numpy as np

from pdbq.graph.builder import GraphBuilder
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.inference.mcmc.config import GibbsConfig
from pdbq.inference.mcmc.gibbs import run_gibbs
from pdbq.inference.moves.move_choice import STRONG_WEIGHT, _summed_coupling, _table_spread, choose_moves, run_auto
from pdbq.language.nodes import FactorFunction as F


def hub(neighbours: int, seed: int = 3, scale: float = 0.7):
    """A 3-valued hub tied to ``neighbours`` booleans (log-tables scale·N(0, 1)) that also form a chain."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder()
    h = b.add_variable(3)
    xs = b.add_variables(neighbours)
    for x in xs:
        b.add_factor(F.TABLE, [h, x], table=list(scale * rng.normal(size=6)))
    for a, c in zip(xs, xs[1:]):
        b.add_factor(F.TABLE, [a, c], table=list(scale * rng.normal(size=4)))
    b.add_factor(F.TABLE, [h], table=list(rng.normal(size=3)))
    return b.build()


def test_many_weak_couplings_on_one_variable_send_auto_through_a_pilot():
    g = hub(120)
    _, spread = _table_spread(g)
    summed, at = _summed_coupling(g)
    assert spread < 2 * STRONG_WEIGHT <= summed and at == 0  # no factor strong; the hub's sum is
    d = choose_moves(g)
    assert d.pilots and "many couplings on one variable" in d.reason, d.reason
    # weaker ties around a hub of three neighbours: plain single-site moves, no pilot
    small = choose_moves(hub(3, scale=0.3))
    assert not small.pilots and small.reason.startswith("single-site moves"), small.reason


def test_auto_crosses_the_hub_that_plain_chains_leave_stuck():
    g = hub(120)
    exact = exact_marginals(g).marginals
    q = np.arange(g.n_vars)
    cfg = GibbsConfig(steps=40_000, seed=1)
    plain = run_gibbs(g, q, cfg)
    # teeth: plain chains are stuck, and say so (R-hat) or are off by far
    assert any("R-hat" in w for w in plain.warnings) or np.nanmax(np.abs(plain.marginals[0] - exact[0])) > 0.2
    r, why = run_auto(g, q, cfg, choose_moves(g))
    assert "did not mix" in why, why
    err = np.abs(r.marginals[0, :3] - exact[0, :3])
    assert np.all(err <= 4 * r.stderr[0, :3] + 1e-6), (err, r.stderr[0, :3], why)
    assert not any("R-hat" in w for w in r.warnings), r.warnings
