"""AUTO's static blocks (`moves.static_blocks`): one exact block over every free variable, its
upward pass made once, every draw a backward sampling pass. On a generated pedigree (26
individuals, 3 loci, width 15) where AUTO's tied blocks are flagged (and off by 0.33) at the same budget,
the static draws are within their error of the exact marginals; drawn from stale messages (the
upward pass of other evidence) they fail the same check; the cached pass draws exactly what
refilling it before every draw draws."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from pedigree_graphs import pedigree

import pdbq.inference.moves.move_choice as mc
from pdbq.errors import InferenceError
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.inference.mcmc.config import GibbsConfig
from pdbq.inference.mcmc.gibbs import ImpossibleStateError, run_gibbs
from pdbq.inference.mcmc.rng import chain_states
from pdbq.inference.moves.block_kernels import block_pass, pack_blocks, sample_cached
from pdbq.inference.moves.blocks import build_blocks
from pdbq.inference.moves.static_blocks import StaticBlocks, arrange, static_blocks, static_moves, upward
from pdbq.inference.moves.tied import tied_blocks, tied_components

DRAWS = 400  # per chain: a step budget of DRAWS whole-model draws


@pytest.fixture(scope="module")
def ped():
    p = pedigree(founders=8, generations=3, loci=3, seed=1)  # 234 free variables, induced width 15
    return p.graph, exact_marginals(p.graph).marginals


def _within(r, exact, q, k: float = 4.0) -> bool:
    err = np.abs(r.marginals - exact[q][:, : r.marginals.shape[1]])
    return bool(np.all(err <= k * r.stderr + 1e-6))


def test_static_blocks_reach_the_pedigree_where_tied_blocks_are_flagged(ped):
    g, exact = ped
    q = np.flatnonzero(g.evidence < 0)
    cfg = GibbsConfig(steps=DRAWS * q.size, seed=3)
    d = mc.choose_moves(g)
    old, why_old = mc.run_auto(g, q, cfg, dataclasses.replace(d, static=False))
    assert "static" not in why_old and "hold every free variable" not in why_old
    assert not old.converged  # flagged (R-hat): measured off by 0.33, within its wide intervals
    r, why = mc.run_auto(g, q, cfg, d)
    assert "hold every free variable" in why and "backward sampling pass alone" in why
    assert r.converged, r.warnings
    assert _within(r, exact, q)
    assert np.abs(r.marginals - exact[q][:, : r.marginals.shape[1]]).max() < 0.06
    assert r.burn_in == 0  # independent draws: nothing to burn in


def test_draws_from_stale_messages_fail_the_same_check(ped):
    g, exact = ped
    q = np.flatnonzero(g.evidence < 0)
    sb = static_blocks(g, q)
    # the upward pass of other evidence (every observed marker moved to its next genotype): the
    # same free variables and layout, messages that belong to another model
    observed = np.flatnonzero(g.evidence >= 0)
    other = g.evidence.copy()
    other[observed] = (other[observed] + 1) % g.cardinality[observed]
    g_other = g._replace(evidence=other)
    sb_other = static_blocks(g_other, q)
    assert sb_other is not None and int(sb_other.psi_off[-1]) == int(sb.psi_off[-1])
    cfg = GibbsConfig(steps=DRAWS * q.size, seed=3)
    good = run_gibbs(g, q, cfg, moves=static_moves(g, sb, q, upward(sb, g.n_vars)))
    assert _within(good, exact, q)
    try:
        stale = run_gibbs(g, q, cfg, moves=static_moves(g, sb, q, upward(sb_other, g.n_vars)))
    except ImpossibleStateError:
        return  # the stale draws end in worlds this evidence forbids: refused, never answered
    assert not _within(stale, exact, q)


def test_cached_messages_draw_what_refilling_them_every_draw_draws(ped):
    g, _ = ped
    q = np.flatnonzero(g.evidence < 0)
    sb = static_blocks(g, q)
    psi = upward(sb, g.n_vars)
    blks = np.arange(len(sb.blocks), dtype=np.int64)
    tix = np.full(g.n_vars, -1, dtype=np.int32)
    tix[q] = np.arange(q.size, dtype=np.int32)
    runs = []
    for cached in (True, False):
        values = np.zeros(g.n_vars, dtype=np.uint8)
        values[g.evidence >= 0] = g.evidence[g.evidence >= 0]
        sums, counts = np.zeros((q.size, 3)), np.zeros(q.size, dtype=np.int64)
        rng, probs = chain_states(5, 1), np.zeros(3)
        buf = np.zeros(int(sb.psi_off[-1]))
        coords = np.zeros(64, dtype=np.int64)
        seen = []
        for _ in range(50):
            if cached:
                sample_cached(sb.packed, blks, psi, sb.psi_off, values, probs, rng, 1, True, tix, sums, counts)
            else:  # forward filtering again before every backward pass
                block_pass(sb.packed, blks, values, buf, coords, probs, rng, 1.0, True, tix, sums, counts)
            seen.append(values[q].copy())
        runs.append((np.array(seen), sums))
    assert len({tuple(s) for s in runs[0][0]}) > 10  # the draws move
    assert np.array_equal(runs[0][0], runs[1][0]) and np.array_equal(runs[0][1], runs[1][1])


def test_a_block_whose_boundary_is_sampled_is_refused(ped):
    g, _ = ped
    q = np.flatnonzero(g.evidence < 0)
    small = build_blocks(g, max_table=2**6)  # blocks that leave free variables outside them
    with pytest.raises(InferenceError, match="not a sampled block variable|outside it"):
        arrange(g, list(small), q)
    sb = static_blocks(g, q)
    with pytest.raises(InferenceError, match="not a sampled block variable"):
        arrange(g, sb.blocks, q[1:])


def test_blocks_whose_boundary_moves_drawn_from_cached_messages_fail_the_check(ped):
    """Why `arrange` refuses a block that reads a sampled variable: the locus blocks (each reads
    the selectors of the next locus) drawn from their first upward pass, never refilled, follow
    the boundary they were filled at, not the chain's."""
    g, exact = ped
    q = np.flatnonzero(g.evidence < 0)
    loci = tied_blocks(g, tied_components(g), max_table=2**10)
    with pytest.raises(InferenceError, match="outside it"):
        arrange(g, list(loci), q)
    pk = pack_blocks(list(loci))
    stale = StaticBlocks(list(loci), pk, np.concatenate([[0], np.cumsum(pk.blk_psi)]).astype(np.int64),
                         np.zeros(g.n_vars, dtype=bool), 4)
    r = run_gibbs(g, q, GibbsConfig(steps=DRAWS * q.size, seed=3), moves=static_moves(g, stale, q))
    assert not _within(r, exact, q)


def test_an_upward_pass_that_cannot_end_in_time_is_dropped_at_once():
    """A complete graph of 22 booleans: one block of 2^22-entry cliques, a pass of seconds whose
    first clique is most of it. Given 0.05 s, the pace of its smallest cliques says no before the
    first large one starts (not seconds later, when that clique is done)."""
    import time

    from pdbq.graph.builder import GraphBuilder
    from pdbq.language.nodes import FactorFunction as F

    rng = np.random.default_rng(0)
    b = GraphBuilder()
    xs = b.add_variables(22)
    for i in range(22):
        for j in range(i + 1, 22):
            w = float(rng.normal(0, 1.5))
            b.add_factor(F.TABLE, [xs[i], xs[j]], table=[w, -w, -w, w])
    g = b.build()
    sb = static_blocks(g, np.arange(22))
    assert sb is not None and sb.width == 21
    t = time.perf_counter()
    assert upward(sb, g.n_vars, until=t + 0.05) is None
    assert time.perf_counter() - t < 1.0  # the whole pass: about 3 s


def _chain(n: int, seed: int = 5):
    """A strongly coupled chain of booleans (log-tables 1.2·N(0, 1)): single-site chains drift."""
    from pdbq.graph.builder import GraphBuilder  # noqa: PLC0415
    from pdbq.language.nodes import FactorFunction as F  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    b = GraphBuilder()
    xs = b.add_variables(n)
    for a, c in zip(xs, xs[1:]):
        b.add_factor(F.TABLE, [a, c], table=list(1.2 * rng.normal(size=4)))
    return b.build()


@pytest.mark.parametrize("rhat", [1.3, 1.05])
def test_a_pilot_mixed_only_by_the_lenient_test_takes_static_blocks(monkeypatch, rhat):
    """A pilot whose split R-hat passes AUTO's lenient test (≤ 1.5) but would warn the answer
    (> 1.1) sends the run to static blocks when they fit; a pilot within 1.1 keeps single-site
    moves."""
    g = _chain(300)
    exact = exact_marginals(g).marginals
    q = np.arange(g.n_vars)
    monkeypatch.setattr(mc, "_pilot_rhat", lambda *a, **k: rhat)
    r, why = mc.run_auto(g, q, GibbsConfig(steps=DRAWS * q.size, seed=2), mc.choose_moves(g))
    if rhat > 1.1:
        assert "not by the answer's 1.1" in why and "backward sampling pass alone" in why, why
        assert r.converged and _within(r, exact, q)
    else:
        assert "so single-site moves only" in why, why


def test_an_ordered_models_lenient_pilot_keeps_its_domain_path(monkeypatch):
    """An ordered model's pilot keeps its dispersed starts, so its R-hat is raised by design: a
    pilot at 1.3 there goes on to the domain blocks' path, not to static blocks."""
    g = _chain(300)
    q = np.arange(g.n_vars)
    monkeypatch.setattr(mc, "_pilot_rhat", lambda *a, **k: 1.3)
    d = dataclasses.replace(mc.choose_moves(g), ordered=True)
    _, why = mc.run_auto(g, q, GibbsConfig(steps=DRAWS * q.size, seed=2), d)
    assert "backward sampling pass alone" not in why and "a plain pilot mixed" in why, why


def _rare_gate():
    """A coupled chain of booleans 1…40; variable 10 is 1 with probability ~1e-7 (a field of
    log-odds 16), and variable 0 can be 1 only when variable 10 is (log-odds 35 against it
    otherwise): P(x0 = 1) is ~1e-7, yet a few thousand draws give it the same conditional,
    ~1e-15, at every draw."""
    from pdbq.graph.builder import GraphBuilder  # noqa: PLC0415
    from pdbq.language.nodes import FactorFunction as F  # noqa: PLC0415

    rng = np.random.default_rng(5)
    b = GraphBuilder()
    xs = b.add_variables(41)
    for a, c in zip(xs[1:], xs[2:]):
        b.add_factor(F.TABLE, [a, c], table=list(0.8 * rng.normal(size=4)))
    b.add_factor(F.TABLE, [xs[10]], table=[0.0, -16.0])
    b.add_factor(F.TABLE, [xs[10], xs[0]], table=[0.0, -35.0, 0.0, 0.0])
    b.add_factor(F.TABLE, [xs[40], xs[0]], table=[0.0, 0.2, 0.0, -0.2])  # a loop: 0 is no tree root
    return b.build()


def test_a_value_independent_draws_never_met_is_not_a_frozen_chain():
    """Independent draws that never met the rare state that makes a value possible give that
    value the same ~0 conditional at every draw: that says the value is rare, not that a chain
    never moved it. No R-hat warning, and the sampler's resolution floor bounds its error (an
    interval of about ±2/draws, which holds the true ~1e-7). Teeth: the same draws judged as a
    Markov chain's are flagged as never moved."""
    g = _rare_gate()
    q = np.arange(g.n_vars)
    exact = exact_marginals(g).marginals
    sb = static_blocks(g, q)
    cfg = GibbsConfig(steps=DRAWS * q.size, seed=4)
    moves = static_moves(g, sb, q, upward(sb, g.n_vars))
    assert moves.independent and not moves.exact[0]
    r = run_gibbs(g, q, cfg, moves=moves)
    assert r.converged and not any("R-hat" in w for w in r.warnings), r.warnings
    assert _within(r, exact, q)
    assert r.stderr[0, 1] > 0 and abs(r.marginals[0, 1] - exact[0, 1]) <= 1.96 * r.stderr[0, 1]
    stuck = run_gibbs(g, q, cfg, moves=moves._replace(independent=False))
    assert np.isinf(stuck.rhat[0]) and any("never moved" in w for w in stuck.warnings), stuck.warnings
