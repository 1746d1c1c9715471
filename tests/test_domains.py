"""Pilot-driven domain blocks (issue 18, Segmentation_11): exact blocks around the patch a plain
pilot shows mixing slowly.

The move is checked on the exact transition-matrix checker (detailed balance of the domain
block's draw, invariance of the sweep-then-block cycle; a draw at the wrong temperature fails),
and on a small grid whose corner patch flips as one, where single-site Gibbs sticks: AUTO finds
the patch from its pilot and reaches the exact marginals; the same run with a block whose
conditional is wrong fails the same statistical check.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from exact_graphs import within

from pdbq.errors import InferenceError
from pdbq.graph.builder import GraphBuilder
from pdbq.inference.moves.blocks import block_kernel
from pdbq.inference.mcmc.config import GibbsConfig, MixingConfig
from pdbq.inference.moves.domains import domain_blocks, slow_variables, sweeps_per_cycle
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.inference.mcmc.gibbs import run_gibbs
from pdbq.inference.mcmc.kernels import prepare_kernel_graph
from pdbq.inference.moves.mixing import run_mixing
from pdbq.inference.moves.move_choice import choose_moves, run_auto
from pdbq.inference.mcmc.transition import check_kernel, gibbs_kernel, log_joint
from pdbq.language.nodes import FactorFunction as F


def domain_grid(n: int, patch: int, w_in: float = 1.9, w_out: float = 0.5, h_out: float = -1.5,
                h_in: float = 0.2):
    """n × n grid, every coupling ferromagnetic (EQUAL); the patch × patch corner is coupled
    strongly inside (``w_in``) and weakly to the rest (``w_out``), whose fields pin it off: the
    patch is one unit that is on with a small probability, and single-site moves flip it only by
    breaking a row of strong bonds."""
    b = GraphBuilder()
    xs = b.add_variables(n * n)
    wi, wo, ho, hi = b.add_weight(w_in), b.add_weight(w_out), b.add_weight(h_out), b.add_weight(h_in)

    def inside(r, c):
        return r < patch and c < patch

    for r in range(n):
        for c in range(n):
            v = xs[r * n + c]
            b.add_factor(F.ISTRUE, [v], weight=hi if inside(r, c) else ho)
            if c + 1 < n:
                b.add_factor(F.EQUAL, [v, v + 1], weight=wi if inside(r, c) and inside(r, c + 1) else wo)
            if r + 1 < n:
                b.add_factor(F.EQUAL, [v, v + n], weight=wi if inside(r, c) and inside(r + 1, c) else wo)
    return b.build()


def _patch(n: int, patch: int) -> np.ndarray:
    return np.array([r * n + c for r in range(patch) for c in range(patch)])




# ---------------------------------------------------------------------------------------------
# choosing the domain


def test_slow_variables_are_the_low_ess_free_targets_slowest_first():
    ess = np.array([5.0, 9e4, 0.0, 4.0, 30.0, np.nan, 8.0])
    ev = np.array([-1, -1, -1, -1, -1, -1, 1])
    # cut 0.01 × 1000 = 10: an ESS of 0 (never varied) and NaN say nothing; evidence is not sampled
    assert slow_variables(np.arange(7), ess, ev, draws=1000).tolist() == [3, 0]
    assert slow_variables(np.arange(7), ess, ev, draws=100).size == 0  # one variable is no domain
    assert slow_variables(np.arange(7), ess, ev, draws=5000).tolist() == [3, 0, 4]


def test_domain_blocks_stay_inside_the_slow_set_and_the_table_budget():
    g = domain_grid(6, 4)
    patch = _patch(6, 4)
    ess = np.full(g.n_vars, 1e5)
    ess[patch] = 3.0
    blocks = domain_blocks(g, patch, ess, max_table=2**10)
    assert len(blocks) == 1 and sorted(blocks[0].vars.tolist()) == patch.tolist()
    small = domain_blocks(g, patch, ess, max_table=4)  # width 1 at most: paths of the patch
    held = np.concatenate([b.vars for b in small])
    assert np.isin(held, patch).all() and all(b.max_table <= 4 for b in small)
    assert domain_blocks(g, patch[:1], ess, max_table=2**10) == []


def test_sweeps_per_cycle_grow_with_the_block_cost():
    g = domain_grid(6, 4)
    kg = prepare_kernel_graph(g)
    sites = np.arange(g.n_vars)
    ess = np.ones(g.n_vars)
    one = sweeps_per_cycle(domain_blocks(g, _patch(6, 2), ess, max_table=2**10), kg, sites)
    big = sweeps_per_cycle(domain_blocks(g, np.arange(g.n_vars), ess, max_table=2**10), kg, sites)
    assert 1 <= one < big
    assert sweeps_per_cycle([], kg, sites) == 1


def test_run_mixing_rejects_a_bad_sweep_count():
    g = domain_grid(3, 2)
    with pytest.raises(InferenceError, match="sweeps"):
        run_mixing(g, [0], GibbsConfig(steps=100, seed=0), MixingConfig(blocks="auto"), sweeps=0)


# ---------------------------------------------------------------------------------------------
# the move on the exact transition matrix


def test_domain_block_draw_satisfies_detailed_balance_and_the_cycle_keeps_pi():
    g = domain_grid(3, 2)  # 9 variables, 512 states
    logp = log_joint(g)
    pi = np.exp(logp)
    patch = _patch(3, 2)
    ess = np.full(g.n_vars, 1e5)
    ess[patch] = 2.0
    blocks = domain_blocks(g, patch, ess, max_table=2**10)
    assert sorted(blocks[0].vars.tolist()) == patch.tolist()
    k = block_kernel(g, blocks, [1.0])
    check_kernel(k, pi)
    # the cycle AUTO runs: single-site sweeps, then the domain block, keeps π
    sweep = gibbs_kernel(g, logp, np.full(g.n_vars, 1.0 / g.n_vars))
    after = k.step(sweep.run(pi, 3 * g.n_vars)[-1])
    assert np.abs(after - pi).max() < 1e-12
    # a draw at the wrong temperature: not reversible, and π moves
    wrong = block_kernel(g, blocks, [1.0], beta=0.7)
    with pytest.raises(InferenceError):
        check_kernel(wrong, pi)
    assert np.abs(wrong.step(pi) - pi).max() > 1e-4


# ---------------------------------------------------------------------------------------------
# a patch that flips as one: single-site Gibbs sticks, domain blocks reach the exact marginals


def test_auto_finds_the_domain_from_its_pilot_and_reaches_the_exact_marginals():
    g = domain_grid(6, 4)
    exact = exact_marginals(g).marginals
    assert 0.1 < exact[0, 1] < 0.3  # the patch is on with a small probability
    d = choose_moves(g)
    assert d.ordered and not d.mixing.active and "slow domains" in d.reason
    config = GibbsConfig(steps=200_000, seed=0)
    r, why = run_auto(g, np.arange(g.n_vars), config, d)
    assert "exact block(s) of 16 variables" in why and "hold each slow patch whole" in why, why
    ok, err = within(r, exact)
    assert ok and err < 0.03, err
    plain = run_gibbs(g, np.arange(g.n_vars), config)
    _, err_plain = within(plain, exact)
    assert err_plain > 0.2 and not plain.converged


def test_a_domain_block_with_a_wrong_conditional_fails_the_same_check():
    g = domain_grid(6, 4)
    exact = exact_marginals(g).marginals
    patch = _patch(6, 4)
    ess = np.full(g.n_vars, 1e5)
    ess[patch] = 3.0
    blocks = domain_blocks(g, patch, ess, max_table=2**10)
    config = GibbsConfig(steps=150_000, seed=1)
    mixing = MixingConfig(blocks="auto", query_passes=0)
    good = run_mixing(g, np.arange(g.n_vars), config, mixing, blocks=blocks, sweeps=9)
    ok, err = within(good, exact)
    assert ok, err
    # every table of the block at half strength: the draw no longer follows p(x_B | rest)
    b = blocks[0]
    half = tuple(tuple(f._replace(table=0.5 * f.table) for f in fs) for fs in b.factors)
    broken = [dataclasses.replace(b, factors=half)]
    bad = run_mixing(g, np.arange(g.n_vars), config, mixing, blocks=broken, sweeps=9)
    ok, err = within(bad, exact)
    assert not ok, err


# ---------------------------------------------------------------------------------------------
# through SQL: EXPLAIN and the answer say why

GRID = """
CREATE TABLE cells AS SELECT a.r AS r, b.c AS c, (a.r < 4 AND b.c < 4) AS inside FROM range(6) a(r), range(6) b(c);
CREATE VARIABLE x(r BIGINT, c BIGINT) DOMAIN BOOLEAN FROM (SELECT r, c FROM cells);
CREATE RULE field_in WEIGHT 0.2 FUNCTION ISTRUE AS x(r, c) :- cells(r, c, i), i;
CREATE RULE field_out WEIGHT -1.5 FUNCTION ISTRUE AS x(r, c) :- cells(r, c, i), NOT i;
CREATE RULE bond_in WEIGHT 1.9 FUNCTION EQUAL AS x(r, c) = x(s, d) :-
    cells(r, c, i), cells(s, d, j), i AND j, (s = r AND d = c + 1) OR (s = r + 1 AND d = c);
CREATE RULE bond_out WEIGHT 0.5 FUNCTION EQUAL AS x(r, c) = x(s, d) :-
    cells(r, c, i), cells(s, d, j), NOT (i AND j), (s = r AND d = c + 1) OR (s = r + 1 AND d = c);
"""


def test_sql_auto_explains_and_uses_domain_blocks():
    import pdbq  # noqa: PLC0415

    with pdbq.connect() as d:
        d.execute(GRID)  # domain_grid(6, 4) in SQL
        q = "SELECT v.r, v.c, PROB(v), STDERR(v) FROM x v ORDER BY v.r, v.c "
        exact = np.array([p for *_, p, _ in d.execute(q + "USING EXACT").fetchall()])
        moves = dict(d.execute("EXPLAIN SELECT PROB(v) FROM x v USING AUTO WITH (max_table = 2)").fetchall())["moves"]
        assert moves.startswith("AUTO: single-site moves, plus exact blocks around slow domains"), moves
        # max_table = 2 rules exact elimination out, so AUTO samples
        r = d.execute(q + "USING AUTO WITH (max_table = 2, seed = 0, steps = 200000)")
        rows = r.fetchall()
        p, se = np.array([x[2] for x in rows]), np.array([x[3] for x in rows])
        why = r.diagnostics["method_reason"]
        assert "exact block(s) of 16 variables" in why and "hold each slow patch whole" in why, why
        assert np.all(np.abs(p - exact) <= 4 * se + 0.01), np.abs(p - exact).max()


def test_auto_keeps_single_site_moves_on_an_ordered_model_without_a_slow_domain():
    g = domain_grid(6, 4, w_in=0.8, w_out=0.8, h_out=-0.8, h_in=-0.8)  # uniform: no patch
    d = choose_moves(g)
    assert d.ordered
    r, why = run_auto(g, np.arange(g.n_vars), GibbsConfig(steps=200_000, seed=0), d)
    assert "domain block" not in why and ("single-site moves only" in why or "no slow domain" in why), why
    ok, err = within(r, exact_marginals(g).marginals)
    assert ok, err


def test_an_ordered_models_pilot_keeps_its_start_and_is_never_the_answer(monkeypatch):
    """Chains from the dispersed starts begin in both states of a slow domain; once all have left
    the rarer one, every within-run check passes. The pilot of an ordered model therefore keeps
    its start (no burn-in dropped), where the settling shows, and has no tolerance stop, so it is
    never the answer by itself; other models' pilots are unchanged."""
    import pdbq.inference.moves.move_choice as mc  # noqa: PLC0415

    seen = []
    real = mc.run_gibbs

    def spy(graph, targets, config, **kw):
        seen.append(config)
        return real(graph, targets, config, **kw)

    monkeypatch.setattr(mc, "run_gibbs", spy)
    g = domain_grid(6, 4)
    d = choose_moves(g)
    assert d.ordered
    r, why = run_auto(g, np.arange(g.n_vars), GibbsConfig(steps=40_000, seed=0, tolerance=0.5), d)
    assert seen[0].burn_in == 0 and seen[0].tolerance is None
    assert "reached the tolerance" not in why
    # an explicit burn-in is the user's: kept
    seen.clear()
    run_auto(g, np.arange(g.n_vars), GibbsConfig(steps=40_000, seed=0, burn_in=500), d)
    assert seen[0].burn_in == 500
    # a model that is not ordered keeps the plain pilot, which may be the answer
    seen.clear()
    plain = dataclasses.replace(d, ordered=False, mixing=MixingConfig(blocks="auto"))
    r, why = run_auto(g, np.arange(g.n_vars), GibbsConfig(steps=40_000, seed=0, tolerance=0.5), plain)
    assert seen[0].burn_in is None and seen[0].tolerance == 0.5


def test_tolerance_stops_false_samples_to_the_budget_and_still_warns():
    g = domain_grid(4, 2)
    q = np.arange(g.n_vars)
    # the tolerance stop ends this run after about 2M updates (the first pass, at about 200,000,
    # is not confirmed by the fresh rounds' ESS; a later one is)
    early = run_gibbs(g, q, GibbsConfig(steps=3_000_000, seed=0, tolerance=0.2))
    full = run_gibbs(g, q, GibbsConfig(steps=3_000_000, seed=0, tolerance=0.2, tolerance_stops=False))
    assert early.steps + early.burn_in < 3_000_000 <= full.steps + full.burn_in
    assert not any("tolerance" in w for w in full.warnings)
    tight = run_gibbs(g, q, GibbsConfig(steps=20_000, seed=0, tolerance=1e-5, tolerance_stops=False))
    assert any("tolerance 1e-05 not reached" in w for w in tight.warnings)
