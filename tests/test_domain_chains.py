"""Domain blocks estimated by their exact marginals (`domain_chains`, `domains.whole_domain_blocks`):
a patch that flips as one, drawn whole, each of its variables estimated by its exact marginal
given the rest of the graph.

Checked against exact marginals on the grid of test_domains (its corner patch flips as one); the
same run with a block whose tables are wrong fails the check; the estimator's error is smaller
than the draw probabilities' at the same seed and cycles; with the rest of the graph pinned (every
draw sees the same outside) the resolution floor keeps the standard error honest.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from exact_graphs import within
from test_domains import _patch, domain_grid

from pdbq.errors import InferenceError
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.inference.mcmc.config import GibbsConfig, MixingConfig
from pdbq.inference.mcmc.gibbs import run_gibbs
from pdbq.inference.moves.domain_chains import domain_moves
from pdbq.inference.moves.domains import domain_blocks, slow_patches, whole_domain_blocks
from pdbq.inference.moves.mixing import run_mixing


def _setup(n: int = 6, patch: int = 4, **kw):
    g = domain_grid(n, patch, **kw)
    p = _patch(n, patch)
    ess = np.full(g.n_vars, 1e5)
    ess[p] = 3.0
    return g, p, domain_blocks(g, p, ess, max_table=2**10)


def test_exact_marginals_of_the_domain_reach_the_exact_answer_and_a_wrong_block_fails():
    g, patch, blocks = _setup()
    assert sorted(blocks[0].vars.tolist()) == patch.tolist()
    exact = exact_marginals(g).marginals
    sites = np.arange(g.n_vars)
    config = GibbsConfig(steps=60_000, seed=1)
    good = run_gibbs(g, sites, config, moves=domain_moves(g, blocks, sites, 2))
    ok, err = within(good, exact, slack=0.003)
    assert ok and err < 0.02, err
    b = blocks[0]
    half = tuple(tuple(f._replace(table=0.5 * f.table) for f in fs) for fs in b.factors)
    broken = [dataclasses.replace(b, factors=half)]
    bad = run_gibbs(g, sites, config, moves=domain_moves(g, broken, sites, 2))
    ok, err = within(bad, exact, slack=0.003)
    assert not ok, err


def test_exact_marginals_beat_the_draw_probabilities_on_the_domain():
    g, patch, blocks = _setup()
    sites = np.arange(g.n_vars)
    config = GibbsConfig(steps=60_000, seed=2)
    new = run_gibbs(g, sites, config, moves=domain_moves(g, blocks, sites, 2))
    old = run_mixing(g, sites, config, MixingConfig(blocks="auto", query_passes=0), blocks=blocks, sweeps=2)
    # same cycles (two sweeps and one draw); the patch's error estimates
    assert np.median(new.stderr[patch, 1]) < 0.5 * np.median(old.stderr[patch, 1])


def test_a_pinned_outside_keeps_the_resolution_floor():
    # the outside's fields pin it off: every draw sees the same outside, so the patch's exact
    # marginal is the same number at every draw and its batch means agree to rounding; the
    # resolution floor (Z95 / draws) is what keeps its standard error honest
    g, patch, blocks = _setup(n=4, patch=2, h_out=-12.0, w_out=0.1)
    sites = np.arange(g.n_vars)
    r = run_gibbs(g, sites, GibbsConfig(steps=4_000, seed=0, chains=2), moves=domain_moves(g, blocks, sites, 1))
    per_cycle = len(sites) + blocks[0].size
    draws = (r.steps // per_cycle) * 2  # kept cycles over both chains
    assert draws > 0
    assert np.all(r.stderr[patch, 1] >= 1.96 / draws * 0.999), (r.stderr[patch, 1], draws)


def test_domain_moves_reject_bad_input():
    g, patch, blocks = _setup(n=3, patch=2)
    sites = np.arange(g.n_vars)
    with pytest.raises(InferenceError, match="at least one block"):
        domain_moves(g, [], sites, 1)
    with pytest.raises(InferenceError, match="sweeps"):
        domain_moves(g, blocks, sites, -1)
    with pytest.raises(InferenceError, match="static blocks"):  # sweeps = 0: blocks over every free variable
        domain_moves(g, blocks, sites, 0)
    with pytest.raises(InferenceError, match="not among the sampled sites"):
        domain_moves(g, blocks, np.setdiff1d(sites, patch[:1]), 1)


def test_whole_domain_blocks_grow_the_table_until_each_slow_patch_is_in_one_block():
    g = domain_grid(6, 6)  # the whole 6 × 6 grid is the patch: width 6 under its own order
    slow = np.arange(g.n_vars)
    ess = np.full(g.n_vars, 3.0)
    assert not any(b.size == g.n_vars for b in domain_blocks(g, slow, ess, max_table=8))
    blocks = whole_domain_blocks(g, slow, ess, base_table=8, affordable=lambda b: True)
    assert len(blocks) == 1 and sorted(blocks[0].vars.tolist()) == slow.tolist() and blocks[0].max_table > 8
    # a budget that cannot pay for the draws: no blocks (AUTO keeps the plain domain blocks)
    assert whole_domain_blocks(g, slow, ess, base_table=8, affordable=lambda b: False) is None
    assert whole_domain_blocks(g, slow[:1], ess, base_table=8, affordable=lambda b: True) is None


def test_separate_slow_patches_get_one_block_each_and_a_lone_slow_variable_none():
    g = domain_grid(6, 2)
    # two 2 × 2 patches in opposite corners and one lone variable between them
    a = np.array([0, 1, 6, 7])
    b = np.array([28, 29, 34, 35])
    slow = np.concatenate([a, b, [15]])
    assert [p.tolist() for p in slow_patches(g, slow)] == [a.tolist(), b.tolist()]
    ess = np.full(g.n_vars, 1e5)
    ess[slow] = 3.0
    blocks = whole_domain_blocks(g, slow, ess, base_table=2**10, affordable=lambda b: True)
    assert sorted(sorted(x.vars.tolist()) for x in blocks) == [a.tolist(), b.tolist()]


def test_a_timed_domain_run_gets_a_burn_in_from_the_pilots_measured_mixing_not_the_share():
    from pdbq.inference.moves import move_choice as mc  # noqa: PLC0415

    timed = GibbsConfig(time_limit=5.0, seed=0)
    # 5 autocorrelation times of at most 1 / SLOW_ESS_RATIO = 100 sweeps, in whole cycles of 40 sweeps
    assert mc._measured_burn_in(timed, None, 40, 1_000).burn_in == 13 * 1_000
    assert mc._measured_burn_in(GibbsConfig(steps=10_000, seed=0), None, 40, 1_000).burn_in is None
    assert mc._measured_burn_in(dataclasses.replace(timed, burn_in=7), None, 40, 1_000).burn_in == 7
