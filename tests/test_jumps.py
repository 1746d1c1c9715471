"""Mode jumps (issue 18) and the path energy differences that swaps and jumps use."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from exact_graphs import random_graph, within
from pdbq.errors import InferenceError, OptionError
from pdbq.graph.builder import GraphBuilder
from pdbq.inference.mcmc.config import GibbsConfig, MixingConfig
from pdbq.inference.moves.energy_paths import energy_gap
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.inference.mcmc.gibbs import run_gibbs
from pdbq.inference.moves.jumps import ModePool, jump_kernel, jump_moves, jump_set, quench
from pdbq.inference.mcmc.kernels import log_score_kernel, prepare_kernel_graph
from pdbq.inference.moves.mixing import describe_moves, run_mixing
from pdbq.inference.moves.move_choice import choose_moves, run_auto
from pdbq.inference.mcmc.rng import chain_states
from pdbq.inference.mcmc.transition import check_kernel, log_joint, state_table
from pdbq.language.nodes import FactorFunction as F
from pdbq.language.nodes import Semantics as S

CASES = [
    (F.TABLE, S.LINEAR, True, False),
    (F.EQUAL, S.LINEAR, False, False),
    (F.IMPLY, S.LOGICAL, False, True),
    (F.OR, S.RATIO, True, False),
    (F.LINEAR, S.RATIO, False, True),
]


def _dtype(g):
    return np.uint8 if int(g.cardinality.max()) <= 2 else np.int32


def _random_state(rng, g):
    x = (rng.integers(0, 1 << 20, g.n_vars) % g.cardinality).astype(_dtype(g))
    ev = g.evidence >= 0
    x[ev] = g.evidence[ev]
    return x


def bipartite(n: int, scale: float, seed: int):
    """A complete bipartite n × n core of ±1 spins with random couplings (UAI DBN_11 in small):
    a few modes that differ in most variables, which single-site moves never cross."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder()
    xs = b.add_variables(2 * n)
    for v in xs:
        b.add_factor(F.TABLE, [v], table=[0.0, float(rng.normal(0, 1))])
    for i in range(n):
        for j in range(n):
            w = float(rng.normal(0, scale))
            b.add_factor(F.TABLE, [xs[i], xs[n + j]], table=[w, -w, -w, w])
    return b.build()


# ---------------------------------------------------------------------------------------------
# energy differences along a path


@pytest.mark.parametrize("function,semantics,categorical,evidence", CASES)
def test_energy_gap_is_the_score_difference(function, semantics, categorical, evidence):
    rng = np.random.default_rng(3)
    g = random_graph(rng, function, semantics, categorical, evidence, n_vars=7, n_factors=9)
    kg = prepare_kernel_graph(g)
    work = np.empty(g.n_vars, dtype=_dtype(g))
    work_gs = np.zeros(g.n_groups)
    path = np.empty(g.n_vars, dtype=np.int64)
    for _ in range(30):
        x, y = _random_state(rng, g), _random_state(rng, g)
        want = log_score_kernel(g, kg.tables, y) - log_score_kernel(g, kg.tables, x)
        assert energy_gap(g, kg, x, y, work, work_gs, path) == pytest.approx(want, abs=1e-9)


# ---------------------------------------------------------------------------------------------
# the jump move: exact transition matrices


def _modes(rng, g, r):
    out = []
    while len(out) < r:
        x = _random_state(rng, g)
        if not any(np.array_equal(x, m) for m in out):
            out.append(x)
    return out


@pytest.mark.parametrize("function,semantics,categorical,evidence", CASES)
def test_jump_kernel_satisfies_detailed_balance(function, semantics, categorical, evidence):
    rng = np.random.default_rng(21)
    g = random_graph(rng, function, semantics, categorical, evidence, n_vars=5, n_factors=6)
    logp = log_joint(g)
    states = state_table(g.cardinality)
    js = jump_set(_modes(rng, g, 3), g.evidence < 0)
    for beta in (1.0, 0.4):
        e = np.where(np.isfinite(logp), logp, -1e300)
        pi = np.exp(beta * logp - np.logaddexp.reduce(beta * logp))
        check_kernel(jump_kernel(e, states, js, beta), pi)
    # the acceptance read the wrong way round breaks balance
    with pytest.raises(InferenceError):
        check_kernel(jump_kernel(-logp, states, js), np.exp(logp))


def test_an_unanchored_jump_breaks_balance():
    """Anchoring needs step 3 (x' must be nearest its partner mode): without it the proposal is
    no longer symmetric. The matrix without step 3 must fail the check."""
    rng = np.random.default_rng(4)
    g = random_graph(rng, F.TABLE, S.LINEAR, False, False, n_vars=5, n_factors=6)
    logp = log_joint(g)
    states = state_table(g.cardinality)
    modes = [np.array([0, 0, 0, 0, 0]), np.array([1, 1, 1, 0, 0]), np.array([0, 1, 1, 1, 1])]
    js = jump_set(modes, np.ones(5, dtype=bool))
    check_kernel(jump_kernel(logp, states, js), np.exp(logp))
    with pytest.raises(InferenceError):
        check_kernel(jump_kernel(logp, states, js, anchored=False), np.exp(logp))


@pytest.mark.parametrize("categorical,evidence", [(False, False), (True, True)])
def test_numba_jumps_follow_the_transition_matrix(categorical, evidence):
    """`jump_moves` (what the chains run) against `jump_kernel` (what the check verifies):
    from every state, the empirical distribution of one jump matches the matrix row."""
    rng = np.random.default_rng(9)
    g = random_graph(rng, F.TABLE, S.LINEAR, categorical, evidence, n_vars=5, n_factors=6)
    kg = prepare_kernel_graph(g)
    states = state_table(g.cardinality)
    logp = log_joint(g)
    js = jump_set(_modes(rng, g, 4), g.evidence < 0)
    k = jump_kernel(logp, states, js).dense()
    stream = chain_states(5, 1)
    reps = 1500
    ok = np.all(states[:, g.evidence >= 0] == g.evidence[g.evidence >= 0], axis=1) if evidence else np.ones(len(states), bool)
    index = {tuple(int(v) for v in row): i for i, row in enumerate(states)}
    worst = 0.0
    for s in np.flatnonzero(ok):
        counts = np.zeros(states.shape[0])
        for _ in range(reps):
            x = states[s].astype(_dtype(g))
            jump_moves(g, kg, x, np.zeros(g.n_groups), 1.0, js, stream, 1)
            counts[index[tuple(int(v) for v in x)]] += 1
        p = k[s]
        se = np.sqrt(np.maximum(p * (1 - p), 1e-12) / reps)
        z = np.abs(counts / reps - p) / se
        worst = max(worst, float(z.max()))
    assert worst < 5.0, worst


# ---------------------------------------------------------------------------------------------
# pool, quench, options


def test_quench_reaches_a_fixed_point_and_the_pool_keeps_the_best_distinct_modes():
    g = bipartite(4, 2.0, 1)
    kg = prepare_kernel_graph(g)
    sites = np.arange(g.n_vars, dtype=np.int32)
    rng = np.random.default_rng(0)
    pool = ModePool(3)
    seen = {}
    for _ in range(40):
        m, e = quench(g, kg, rng.integers(0, 2, g.n_vars).astype(np.uint8), sites)
        again, e2 = quench(g, kg, m, sites)
        assert np.array_equal(again, m) and e2 == e  # a local mode: ICM does not move it
        assert e == pytest.approx(log_score_kernel(g, kg.tables, m))
        seen[m.tobytes()] = e
        pool.offer(m, e)
        pool.offer(m, e)  # duplicates are kept once
    pool.offer(np.zeros(g.n_vars, dtype=np.uint8), float("-inf"))
    best = sorted(seen.values(), reverse=True)[:3]
    kept = [log_score_kernel(g, kg.tables, m) for m in pool.modes()]
    assert len(pool) == min(3, len(seen)) and kept == pytest.approx(best)


def test_jump_options_are_checked():
    with pytest.raises(OptionError, match="jumps"):
        MixingConfig(jumps=1).check()
    with pytest.raises(OptionError, match="jumps"):
        MixingConfig(jumps=65).check()
    with pytest.raises(OptionError, match="jumps"):
        MixingConfig(jumps=-2).check()
    with pytest.raises(OptionError, match="tempering"):
        MixingConfig(jumps=8).check()  # jumps alone could miss a mode silently (next test)
    with pytest.raises(InferenceError):
        ModePool(1)
    assert MixingConfig(jumps=8, tempering=2).check().active


def test_why_jumps_need_hot_copies(monkeypatch):
    """Pairs a_i = b_i held by a wall single-site moves never cross: 4 chains freeze in 4 of the
    16 pair configurations, and jumps among those 4 alone would answer confidently and wrongly.
    With hot copies every configuration is reached, and the jumps still help."""
    b = GraphBuilder()
    a, c = b.add_variables(4), b.add_variables(4)
    wall, prior, link = b.add_weight(12.0), b.add_weight(0.6), b.add_weight(0.4)
    for i in range(4):
        b.add_factor(F.EQUAL, [a[i], c[i]], weight=wall)
        b.add_factor(F.ISTRUE, [a[i]], weight=prior)
        if i < 3:
            b.add_factor(F.EQUAL, [c[i], a[i + 1]], weight=link)
    g = b.build()
    exact = exact_marginals(g).marginals
    r = run_mixing(g, np.arange(g.n_vars), GibbsConfig(steps=100_000, seed=3), MixingConfig(tempering=2, jumps=8))
    ok, err = within(r, exact)
    assert ok, err
    assert r.jump_rate > 0.05
    # what the option check refuses: without hot copies the answer is far off while R-hat sees nothing
    monkeypatch.setattr(MixingConfig, "check", lambda self: self)
    alone = run_mixing(g, np.arange(g.n_vars), GibbsConfig(steps=100_000, seed=3), MixingConfig(jumps=8))
    ok, err = within(alone, exact)
    assert not ok and err > 0.1 and alone.converged


# ---------------------------------------------------------------------------------------------
# chains


def test_jumps_reach_the_exact_marginals_of_a_dense_core_where_gibbs_sticks():
    g = bipartite(6, 2.5, 7)
    exact = exact_marginals(g).marginals
    cfg = GibbsConfig(steps=40_000, seed=3)
    r = run_mixing(g, np.arange(g.n_vars), cfg, MixingConfig(tempering=2, jumps=8))
    ok, err = within(r, exact)
    assert ok, err
    assert r.converged and r.jump_modes >= 2 and r.jump_rate > 0.01
    assert "mode jumps between" in describe_moves(r)
    plain = run_gibbs(g, np.arange(g.n_vars), cfg)
    _, err_plain = within(plain, exact)
    assert err_plain > 0.1 and not plain.converged
    again = run_mixing(g, np.arange(g.n_vars), cfg, MixingConfig(tempering=2, jumps=8))
    assert np.array_equal(r.marginals, again.marginals)  # same seed, same answer


def test_auto_jumps_on_a_dense_core_too_wide_for_blocks():
    g = bipartite(6, 2.5, 7)
    exact = exact_marginals(g).marginals
    # no block may hold the core (and no cutset: that is AUTO's choice on a graph this small)
    moves = dataclasses.replace(choose_moves(g, block_table=16).without_cutset(), static=False)  # not one static block
    r, why = run_auto(g, np.arange(g.n_vars), GibbsConfig(steps=60_000, seed=1), moves)
    assert "mode jumps" in why and "did not mix" in why, why
    ok, err = within(r, exact)
    assert ok, err
    assert r.converged


def test_jumps_without_burn_in_say_so():
    g = bipartite(4, 2.5, 2)
    r = run_mixing(g, np.arange(g.n_vars), GibbsConfig(steps=4_000, burn_in=0, seed=1),
                   MixingConfig(tempering=2, jumps=4))
    assert r.jump_modes == 0 and any("no jump was tried" in w for w in r.warnings)


def test_too_few_accepted_jumps_per_chain_warn():
    # the modes' weights come from the switches between them: under 100 accepted jumps per chain
    # (46 here) the answer says so; 200,000 updates give a few hundred and no such warning
    g = bipartite(6, 2.5, 7)
    mixing = MixingConfig(tempering=2, jumps=8)
    short = run_mixing(g, np.arange(g.n_vars), GibbsConfig(steps=40_000, seed=3), mixing)
    assert any("accepted mode jump(s) per chain" in w for w in short.warnings), short.warnings
    longer = run_mixing(g, np.arange(g.n_vars), GibbsConfig(steps=200_000, seed=3), mixing)
    assert not any("accepted mode jump" in w for w in longer.warnings), longer.warnings


def _jump_set_by_pairs(modes, movable):
    """The jump set's rows written out pair by pair, as the module docstring defines them."""
    r = len(modes)
    rows = [np.flatnonzero((modes[a] != modes[b]) & movable) if a < b else np.zeros(0, np.int64)
            for a in range(r) for b in range(r)]
    return np.concatenate(rows), np.cumsum([0] + [x.size for x in rows])


def test_jump_set_rows_are_checked_against_the_memory_left(monkeypatch):
    import pdbq.memory

    rng = np.random.default_rng(3)
    modes = [rng.integers(0, 3, 20_000).astype(np.int32) for _ in range(64)]
    movable = rng.random(20_000) < 0.9
    js = jump_set(modes, movable)
    var, off = _jump_set_by_pairs(modes, movable)
    assert np.array_equal(js.var, var) and np.array_equal(js.off, off)
    assert js.longest == int(np.diff(off).max()) and np.array_equal(js.movable, np.flatnonzero(movable))
    # 2,016 pairs differing in about 2/3 of 18,000 sampled variables: ~95 MiB of rows
    monkeypatch.setattr(pdbq.memory, "available_bytes", lambda: 32 << 20)
    with pytest.raises(InferenceError, match=r"mode jumps between 64 local modes \(2,016 pairs.*MiB of memory.*"
                                             r"only 32 MiB is available; lower jumps"):
        jump_set(modes, movable)
    monkeypatch.setattr(pdbq.memory, "available_bytes", lambda: 1 << 20)  # not even the modes themselves
    with pytest.raises(InferenceError, match="mode jumps between 64 local modes of 20,000 variables needs"):
        jump_set(modes, movable)
