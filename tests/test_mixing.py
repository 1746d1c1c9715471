"""Moves that cross modes (issue 18): exact block moves and replica exchange.

Each kernel is checked on the exact transition-matrix checker (detailed balance, πK = π), a
perturbed one must fail that check, and each reaches the exact marginals on a small multimodal
graph where single-site Gibbs provably sticks (and plain Gibbs fails the same statistical check).
"""

from __future__ import annotations

import numpy as np
import pytest

from exact_graphs import random_graph, within
from pdbq.errors import InferenceError, OptionError
from pdbq.graph.builder import GraphBuilder
from pdbq.inference.moves.block_kernels import _fill, block_pass, pack_blocks
from pdbq.inference.moves.blocks import BlockSampler, block_edges, block_kernel, build_blocks
from pdbq.inference.mcmc.config import GibbsConfig, MixingConfig
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.inference.mcmc.gibbs import run_gibbs
from pdbq.inference.moves.mixing import run_mixing
from pdbq.inference.moves.tempering import adapt_ladder, initial_ladder, swap_kernel, swap_probability
from pdbq.inference.mcmc.transition import check_kernel, gibbs_kernel, log_joint
from pdbq.language.nodes import FactorFunction as F
from pdbq.language.nodes import Semantics as S


# ---------------------------------------------------------------------------------------------
# graphs


def walled_pairs(n_pairs: int = 5):
    """Pairs (a_i, b_i) that must be equal (zero table entries off the diagonal), a bias on each
    a_i, and soft EQUAL links b_i — a_{i+1}: single-site Gibbs can never change a pair."""
    b = GraphBuilder()
    xs = b.add_variables(2 * n_pairs)
    for i in range(n_pairs):
        a, c = xs[2 * i], xs[2 * i + 1]
        b.add_factor(F.TABLE, [a, c], table=[0.0, -np.inf, -np.inf, 0.0])
        b.add_factor(F.TABLE, [a], table=[0.0, 0.4 + 0.3 * i])
        if i + 1 < n_pairs:
            b.add_factor(F.EQUAL, [c, xs[2 * i + 2]], weight=b.add_weight(0.5))
    return b.build()


def ising(n: int, coupling: float, field: float):
    b = GraphBuilder()
    xs = b.add_variables(n * n)
    w = b.add_weight(coupling)
    h = b.add_weight(field)
    for r in range(n):
        for c in range(n):
            v = xs[r * n + c]
            b.add_factor(F.ISTRUE, [v], weight=h)
            if c + 1 < n:
                b.add_factor(F.EQUAL, [v, xs[r * n + c + 1]], weight=w)
            if r + 1 < n:
                b.add_factor(F.EQUAL, [v, xs[(r + 1) * n + c]], weight=w)
    return b.build()




# ---------------------------------------------------------------------------------------------
# blocks: structure


def test_blocks_cover_the_free_variables_and_respect_the_table_budget():
    g = ising(6, 0.3, 0.1)
    for table, cap in ((2**4, None), (2**6, 10), (2**10, None)):
        blocks = build_blocks(g, max_table=table, max_vars=cap, min_new=0.0)
        covered = np.zeros(g.n_vars, dtype=bool)
        for blk in blocks:
            covered[blk.vars] = True
            assert blk.max_table <= table
            assert cap is None or blk.size <= cap
        assert covered.sum() >= g.n_vars - 2  # a lone leftover variable is left to single sites
    # near-copies of a large block are dropped: their new variables are left to single-site moves
    big = ising(8, 0.3, 0.1)
    assert len(build_blocks(big, max_table=16)) < len(build_blocks(big, max_table=16, min_new=0.0))
    # a wall's two variables land in one block (strongest coupling first)
    g = walled_pairs(4)
    for blk in build_blocks(g, max_table=4, max_vars=2):
        assert sorted(blk.vars.tolist()) in ([0, 1], [2, 3], [4, 5], [6, 7])


def test_blocks_are_seeded_at_the_targets_and_skip_evidence():
    b = GraphBuilder()
    xs = b.add_variables(6)
    for a, c in zip(xs, xs[1:]):
        b.add_factor(F.EQUAL, [a, c], weight=b.add_weight(0.5))
    b.set_evidence(xs[2], 1)
    g = b.build()
    blocks = build_blocks(g, max_vars=2, targets=np.array([5]))
    assert 5 in blocks[0].vars.tolist()
    assert all(2 not in blk.vars.tolist() for blk in blocks)


def test_forest_blocks_for_graphs_beyond_the_global_order_limit():
    g = ising(5, 0.5, 0.0)
    blocks = build_blocks(g, global_order_limit=10, min_new=0.0)
    count = np.zeros(g.n_vars, dtype=int)
    for blk in blocks:
        count[blk.vars] += 1
        assert blk.max_table <= 4  # width 1: pairwise cliques only
    # no overlap beyond the limit; only variables no forest could take are left to single sites
    assert count.max() == 1 and count.sum() >= 0.7 * g.n_vars
    assert max(blk.size for blk in blocks) > 5


# ---------------------------------------------------------------------------------------------
# blocks: exact transition matrices


@pytest.mark.parametrize(
    "function,semantics,categorical,evidence",
    [
        (F.TABLE, S.LINEAR, True, False),
        (F.IMPLY, S.LOGICAL, False, True),
        (F.EQUAL, S.LINEAR, True, True),
        (F.OR, S.RATIO, False, False),
    ],
)
def test_block_moves_satisfy_detailed_balance(function, semantics, categorical, evidence):
    rng = np.random.default_rng(11)
    g = random_graph(rng, function, semantics, categorical, evidence, n_vars=6, n_factors=6)
    logp = log_joint(g)
    blocks = build_blocks(g, max_table=9, max_vars=3)
    assert blocks
    k = block_kernel(g, blocks, np.full(len(blocks), 1.0 / len(blocks)))
    check_kernel(k, np.exp(logp))


def test_block_moves_cross_a_wall_in_the_transition_matrix():
    g = walled_pairs(2)
    logp = log_joint(g)
    pi = np.exp(logp)
    blocks = build_blocks(g, max_table=4, max_vars=2)
    k = block_kernel(g, blocks, [0.5, 0.5])
    check_kernel(k, pi)
    # single-site Gibbs is reducible here: from all-zeros it never reaches all-ones; blocks do
    start = np.zeros(pi.shape[0])
    start[0] = 1.0
    sgibbs = gibbs_kernel(g, logp, np.full(g.n_vars, 1.0 / g.n_vars)).run(start, 200)[-1]
    sblock = k.run(start, 200)[-1]
    assert np.abs(sgibbs - pi).max() > 0.3
    assert np.abs(sblock - pi).max() < 1e-8


@pytest.mark.parametrize("categorical,evidence", [(False, False), (True, True)])
def test_numba_block_kernel_computes_the_reference_potentials(categorical, evidence):
    """`block_kernels` (what the chains run) against `BlockSampler` (what the matrices check)."""
    rng = np.random.default_rng(8)
    for function in (F.TABLE, F.IMPLY, F.EQUAL):
        g = random_graph(rng, function, S.LINEAR, categorical, evidence, n_vars=9, n_factors=10)
        blocks = build_blocks(g, max_table=27, max_vars=5)
        ba = pack_blocks(blocks)
        values = rng.integers(0, g.cardinality).astype(np.uint8)
        values[g.evidence >= 0] = g.evidence[g.evidence >= 0]
        psi = np.zeros(int(ba.blk_psi.max()))
        coords = np.zeros(16, dtype=np.int64)
        for b, blk in enumerate(blocks):
            _fill(ba, ba.blk_clique[b], ba.blk_clique[b + 1], values, psi, coords, 0.7)
            ref = BlockSampler(blk).potentials(values, 0.7)
            for i in range(blk.size):
                c = ba.blk_clique[b] + i
                assert np.allclose(psi[ba.c_psi[c] : ba.c_psi[c] + ba.c_size[c]], ref[i].ravel(), atol=1e-9)
        # and its draws respect the walls a block holds
    g = walled_pairs(3)
    blocks = build_blocks(g, max_table=4, max_vars=2)
    ba = pack_blocks(blocks)
    values = np.array([0, 1, 1, 0, 0, 1], dtype=np.uint8)  # infeasible start
    st = np.array([np.uint64(99)])
    tix = np.full(g.n_vars, -1, dtype=np.int32)
    block_pass(ba, np.arange(len(blocks)), values, np.zeros(int(ba.blk_psi.max())), np.zeros(4, dtype=np.int64),
               np.zeros(2), st, 1.0, False, tix, np.zeros((1, 2)), np.zeros(1, dtype=np.int64))
    assert values[0] == values[1] and values[2] == values[3] and values[4] == values[5]


def test_a_perturbed_block_kernel_fails_the_check():
    rng = np.random.default_rng(3)
    g = random_graph(rng, F.TABLE, S.LINEAR, False, False, n_vars=5, n_factors=6)
    blocks = build_blocks(g, max_table=8, max_vars=3)
    p = np.full(len(blocks), 1.0 / len(blocks))
    with pytest.raises(InferenceError):  # the conditional at the wrong temperature
        check_kernel(block_kernel(g, blocks, p, beta=0.7), np.exp(log_joint(g)))


def test_sampler_draws_follow_the_block_conditional():
    """The sampler itself (not only its matrix) draws a block with the conditional's frequencies."""
    g = walled_pairs(2)
    blocks = build_blocks(g, max_table=4, max_vars=2)
    blk = [b for b in blocks if 0 in b.vars.tolist()][0]
    s = BlockSampler(blk)
    rng = np.random.default_rng(0)
    values = np.array([0, 0, 1, 1], dtype=np.uint8)
    n = 20_000
    ones = 0
    for _ in range(n):
        s.sample(values, rng)
        assert values[0] == values[1]
        ones += int(values[0])
    # p(a0 = b0 = 1 | b0—a1 link with a1 = 1) ∝ exp(0.4 + 0.5) vs exp(-0.5)
    p = np.exp(0.9) / (np.exp(0.9) + np.exp(-0.5))
    assert abs(ones / n - p) < 4 * np.sqrt(p * (1 - p) / n)


# ---------------------------------------------------------------------------------------------
# blocks and tempering: marginals where single-site Gibbs sticks


def test_blocks_reach_the_exact_marginals_through_walls_where_gibbs_sticks():
    g = walled_pairs(5)
    exact = exact_marginals(g).marginals
    config = GibbsConfig(steps=3_000, burn_in=300, seed=4)
    r = run_mixing(g, np.arange(g.n_vars), config, MixingConfig(blocks=4, block_table=16))
    ok, err = within(r, exact)
    assert ok, err
    assert r.n_blocks >= 3 and r.largest_block <= 4
    plain = run_gibbs(g, np.arange(g.n_vars), GibbsConfig(steps=30_000, seed=4))
    ok_plain, err_plain = within(plain, exact)
    # plain Gibbs sticks: far off, and it says so (R-hat; its standard error, which counts the
    # chains' disagreement, is wide too — a wrong answer, never a confident one)
    assert err_plain > 0.1 and not plain.converged


def test_tempering_reaches_the_exact_marginals_of_a_strong_ising_where_gibbs_sticks():
    g = ising(4, 1.5, 0.1)
    exact = exact_marginals(g).marginals
    config = GibbsConfig(steps=60_000, seed=2)
    r = run_mixing(g, np.arange(g.n_vars), config, MixingConfig(tempering=6, beta_min=0.15))
    ok, err = within(r, exact)
    assert ok, err
    assert r.betas[0] == 1.0 and np.all(np.diff(r.betas) < 0)
    assert np.all(r.swap_rates > 0.05)
    assert r.converged
    plain = run_gibbs(g, np.arange(g.n_vars), GibbsConfig(steps=60_000, seed=2))
    # plain chains stick far from the answer; the driver's within-chain split R-hat and batch
    # means make their error bars wide and flag them, so the check is the error and the flag
    _, err_plain = within(plain, exact)
    assert err_plain > 0.1
    assert not plain.converged


def test_same_seed_same_answer():
    g = walled_pairs(3)
    cfg = GibbsConfig(steps=2_000, seed=9)
    m = MixingConfig(tempering=2, blocks=2, block_table=4)
    a = run_mixing(g, [0, 3], cfg, m)
    b = run_mixing(g, [0, 3], cfg, m)
    assert np.array_equal(a.marginals, b.marginals)


# ---------------------------------------------------------------------------------------------
# tempering: exact transition matrices


def _tempered_setup():
    rng = np.random.default_rng(5)
    g = random_graph(rng, F.EQUAL, S.LINEAR, False, False, n_vars=4, n_factors=4)
    logp = log_joint(g)
    # the energy up to a constant: log π
    betas = np.array([1.0, 0.6, 0.3])
    pis = [np.exp(b * logp - np.logaddexp.reduce(b * logp)) for b in betas]
    prod = pis[0][:, None, None] * pis[1][None, :, None] * pis[2][None, None, :]
    return g, logp, betas, prod.ravel()


@pytest.mark.parametrize("pair", [0, 1])
def test_swap_moves_satisfy_detailed_balance_on_the_product_space(pair):
    g, logp, betas, pi = _tempered_setup()
    check_kernel(swap_kernel(logp, betas, pair), pi)


def test_tempered_cycle_leaves_the_product_invariant_and_a_wrong_swap_fails():
    g, logp, betas, pi = _tempered_setup()
    n = logp.shape[0]
    # one tempered single-site Gibbs kernel per copy, then the two swaps: πK = π for the cycle
    dist = pi.reshape(n, n, n)
    for k, b in enumerate(betas):
        kb = gibbs_kernel(g, b * logp - np.logaddexp.reduce(b * logp), np.full(g.n_vars, 1.0 / g.n_vars)).dense()
        dist = np.moveaxis(np.tensordot(dist, kb, axes=([k], [0])), -1, k)
    flat = dist.ravel()
    for pair in (0, 1):
        flat = swap_kernel(logp, betas, pair).step(flat)
    assert np.abs(flat - pi).max() < 1e-12
    # a swap whose acceptance has the energy difference the wrong way round breaks balance
    wrong = swap_kernel(-logp, betas, 0)
    with pytest.raises(InferenceError):
        check_kernel(wrong, pi)


def test_ladder_helpers():
    b = initial_ladder(3, 0.25)
    assert np.allclose(b, [1.0, 0.5, 0.25])
    wider = adapt_ladder(b, np.array([0.9, 0.9]))
    narrower = adapt_ladder(b, np.array([0.0, 0.0]))
    assert wider[0] == narrower[0] == 1.0
    assert wider[-1] < b[-1] < narrower[-1]
    assert swap_probability(1.0, 0.5, 0.0, 2.0) == 1.0
    assert swap_probability(1.0, 0.5, 2.0, 0.0) == pytest.approx(np.exp(-1.0))


# ---------------------------------------------------------------------------------------------
# options


def test_bad_mixing_options_raise_clear_errors():
    g = walled_pairs(2)
    with pytest.raises(OptionError, match="tempering"):
        run_mixing(g, [0], GibbsConfig(steps=100), MixingConfig(tempering=0))
    with pytest.raises(OptionError, match="blocks"):
        run_mixing(g, [0], GibbsConfig(steps=100), MixingConfig(blocks="big"))
    with pytest.raises(OptionError, match="blocks"):
        run_mixing(g, [0], GibbsConfig(steps=100), MixingConfig(blocks=1))
    with pytest.raises(OptionError, match="beta_min"):
        run_mixing(g, [0], GibbsConfig(steps=100), MixingConfig(tempering=2, beta_min=1.5))
    with pytest.raises(InferenceError, match="out of range"):
        run_mixing(g, [99], GibbsConfig(steps=100))
    edges = block_edges(g)
    assert len(edges) == 5 and all(np.isfinite(h.log_table).all() for h in edges)  # zeros clamped
