"""The move hook of `run_gibbs` (`gibbs.Moves`) and the deadline through mixing and AUTO."""

from __future__ import annotations

import time

import numpy as np

from pdbq.graph.builder import GraphBuilder
from pdbq.inference.mcmc.config import GibbsConfig, MixingConfig
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.inference.mcmc.gibbs import ChainMoves, MoveContext, Moves, run_gibbs
from pdbq.inference.mcmc.kernels import Best, run_chain
from pdbq.inference.moves.mixing import run_mixing
from pdbq.inference.moves.move_choice import choose_moves, run_auto
from pdbq.language.nodes import FactorFunction as F


def _chain(n: int = 6):
    b = GraphBuilder()
    xs = b.add_variables(n)
    for i in range(n):
        b.add_factor(F.ISTRUE, [xs[i]], weight=b.add_weight(0.3 - 0.1 * i))
        if i + 1 < n:
            b.add_factor(F.EQUAL, [xs[i], xs[i + 1]], weight=b.add_weight(0.7))
    return b.build()


def _walled(n_pairs: int = 3):
    b = GraphBuilder()
    xs = b.add_variables(2 * n_pairs)
    for i in range(n_pairs):
        b.add_factor(F.TABLE, [xs[2 * i], xs[2 * i + 1]], table=[0.0, -np.inf, -np.inf, 0.0])
        b.add_factor(F.TABLE, [xs[2 * i]], table=[0.0, 0.5])
    return b.build()


def _recording_moves(unit: int, calls: list, phases: list) -> Moves:
    """Single-site updates through the hook, recording what the driver asks for."""

    def start(ctx: MoveContext) -> ChainMoves:
        unused = Best(np.zeros(2), np.zeros(0, dtype=ctx.states[0].values.dtype), np.ones(1))

        def advance(c: int, n: int, collect: bool) -> None:
            calls.append(n)
            run_chain(ctx.graph, ctx.kernel, ctx.states[c], ctx.sched, ctx.accs[c], unused, n, collect)

        return ChainMoves(advance, phases.append)

    return Moves(unit=unit, start=start)


def test_a_hook_making_single_site_updates_is_the_default_sampler():
    g = _chain()
    cfg = GibbsConfig(steps=6_000, burn_in=600, seed=5, threads=1)
    calls: list = []
    phases: list = []
    a = run_gibbs(g, np.arange(g.n_vars), cfg, moves=_recording_moves(1, calls, phases))
    b = run_gibbs(g, np.arange(g.n_vars), cfg)
    assert np.array_equal(a.marginals, b.marginals) and np.array_equal(a.stderr, b.stderr)
    assert calls and phases.count("kept") > 0 and phases.count("burn_in") > 0 and "cut" not in phases


def test_the_driver_asks_a_hook_for_whole_units_and_reports_every_round():
    g = _chain()
    cfg = GibbsConfig(steps=7_000, burn_in=700, seed=3, threads=1)
    calls: list = []
    phases: list = []
    r = run_gibbs(g, np.arange(g.n_vars), cfg, moves=_recording_moves(7, calls, phases))
    assert calls and all(n % 7 == 0 and n > 0 for n in calls)
    assert r.steps == 7_000 and r.burn_in == 700
    # a round's updates are chains × calls; every round ends with one end_round
    assert len(calls) == r.chains * len(phases)
    assert phases == ["burn_in"] * phases.count("burn_in") + ["kept"] * phases.count("kept")
    exact = exact_marginals(g).marginals
    assert np.all(np.abs(r.marginals - exact) <= 4 * r.stderr + 1e-3)
    # a broken step (one that never updates) is caught by the same check
    frozen = Moves(unit=7, start=lambda ctx: ChainMoves(lambda c, n, collect: None))
    bad = run_gibbs(g, np.arange(g.n_vars), cfg, moves=frozen)
    assert np.isnan(bad.marginals).all() and any("too few updates" in w for w in bad.warnings)


def test_mixing_and_auto_keep_a_deadline_that_has_passed():
    g = _walled()
    cfg = GibbsConfig(steps=20_000, seed=1)
    past = time.perf_counter()
    r = run_mixing(g, [0, 1], cfg, MixingConfig(blocks=2, block_table=4), deadline=past)
    assert r.steps == 0 and np.isnan(r.marginals).all()
    assert any("too few updates" in w for w in r.warnings)
    moves = choose_moves(g)
    assert moves.mixing.active
    r, why = run_auto(g, np.array([0, 1]), cfg, moves, deadline=time.perf_counter())
    assert r.steps == 0 and np.isnan(r.marginals).all()
    # a deadline already past sets up no mixing move: the plain pilot is the answer, and why says so
    assert "time limit ended the query with the plain pilot" in why or "gave no split R-hat" in why


def test_auto_splits_a_deadline_between_pilot_and_moves():
    g = _walled()
    cfg = GibbsConfig(seed=2, tolerance=1e-9, steps=10**9)  # only the deadline can end these runs
    # load the compiled kernels first: a loaded machine's cache load is not what this times
    run_auto(g, np.array([0, 1]), cfg, choose_moves(g), deadline=time.perf_counter() + 0.5)
    t = time.perf_counter()
    r, why = run_auto(g, np.array([0, 1]), cfg, choose_moves(g), deadline=t + 3.0)
    assert "did not mix" in why and "exact block" in why
    # the moves got what the pilot left (a deadline overrun is at most a ~50 ms chunk; slack for load)
    assert r.steps > 0 and time.perf_counter() - t < 3.0 + 1.0
    exact = exact_marginals(g).marginals[[0, 1]]
    assert np.all(np.abs(r.marginals - exact) <= 4 * r.stderr + 0.01)
