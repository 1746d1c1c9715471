"""Cutset sampling (issue 18 item 3): collapsed Gibbs on a cutset, the remainder answered exactly."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_mixing_query import db  # noqa: F401  (its module fixture: walled pairs a(i) = b(i), a prior, soft links)

from pdbq.errors import InferenceError, OptionError
from pdbq.graph.builder import GraphBuilder
from pdbq.inference.mcmc.config import GibbsConfig
from pdbq.inference.moves.cutset import choose_cutset, cutset_kernel, run_cutset
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.inference.mcmc.gibbs import run_gibbs
from pdbq.inference.mcmc.transition import check_kernel, log_joint
from pdbq.language.nodes import FactorFunction as F


def _random_graph(n: int, seed: int, p: float = 0.4, cards=None, scale: float = 1.0):
    rng = np.random.default_rng(seed)
    cards = [2] * n if cards is None else cards
    b = GraphBuilder()
    x = [b.add_variable(cardinality=int(c)) for c in cards]
    for u in range(n):
        for v in range(u + 1, n):
            if rng.random() < p:
                b.add_factor(F.TABLE, [x[u], x[v]], table=list(np.exp(rng.normal(0, scale, cards[u] * cards[v]))))
        b.add_factor(F.TABLE, [x[u]], table=list(np.exp(rng.normal(0, 0.5, cards[u]))))
    # a three-variable table with a zero entry (a wall)
    t = np.exp(rng.normal(0, scale, cards[0] * cards[1] * cards[2]))
    t[0] = 0.0
    b.add_factor(F.TABLE, [x[0], x[1], x[2]], table=list(t))
    return b.build()


@pytest.mark.parametrize("seed,cards", [(5, [2, 3, 2, 2, 3, 2, 2, 2]), (11, [2] * 9)])
def test_kernel_is_in_detailed_balance_and_the_naive_one_is_not(seed, cards):
    g = _random_graph(len(cards), seed, cards=cards, scale=1.5)
    cs = choose_cutset(g, max_table=6)
    assert 1 <= cs.size < g.n_vars and len(cs.blocks) >= 1
    pi = np.exp(log_joint(g))
    p = np.full(cs.n_groups, 1.0 / cs.n_groups)
    check_kernel(cutset_kernel(g, cs, p), pi)
    # ignoring the remainder in the cutset's conditionals breaks detailed balance
    with pytest.raises(InferenceError, match="detailed balance"):
        check_kernel(cutset_kernel(g, cs, p, naive=True), pi)


def test_cutset_choice_meets_the_table_budget_or_says_why():
    g = _random_graph(12, 3, p=0.6)
    for budget in (4, 16, 64):
        cs = choose_cutset(g, max_table=budget)
        assert cs.max_table <= budget
        assert not np.isin(cs.vars, np.concatenate([b.vars for b in cs.blocks])).any()
    with pytest.raises(InferenceError, match="cutset: 1 variables leave a remainder"):
        choose_cutset(g, max_table=4, max_vars=1)


def _walled_pairs(n: int = 5, w: float = 9.0):
    """Pairs a_i = b_i held by a near-hard EQUAL (flipping one costs 2w), weak links between
    neighbouring pairs and a field: single-site Gibbs cannot flip a pair, so dispersed chains
    stay where they started; with the b's summed out, a cutset of a's moves freely."""
    b = GraphBuilder()
    a = b.add_variables(n)
    bb = b.add_variables(n)
    wall, link, field = b.add_weight(w), b.add_weight(0.4), b.add_weight(0.5)
    for i in range(n):
        b.add_factor(F.EQUAL, [a[i], bb[i]], weight=wall)
        b.add_factor(F.ISTRUE, [a[i]], weight=field)
        if i + 1 < n:
            b.add_factor(F.EQUAL, [bb[i], a[i + 1]], weight=link)
    return b.build()


def test_reaches_exact_marginals_where_single_site_gibbs_sticks():
    g = _walled_pairs()
    exact = exact_marginals(g).marginals
    targets = np.arange(g.n_vars)
    cfg = GibbsConfig(steps=20_000, seed=2)
    r = run_cutset(g, targets, cfg, max_table=2)
    assert r.cutset_size >= 1 and r.remainder_table <= 2
    err = np.abs(r.marginals - exact)
    assert np.all(err <= 4 * r.stderr + 1e-9), (err.max(), r.stderr.max())
    assert err.max() < 0.03 and not any("R-hat" in w for w in r.warnings)
    # single-site Gibbs: the dispersed chains stay in their modes, flagged as not mixing
    s = run_gibbs(g, targets, cfg)
    assert np.abs(s.marginals - exact).max() > 0.1 and any("R-hat" in w for w in s.warnings)
    # the broken sampler (cutset conditionals without the remainder) is off by many errors
    bad = run_cutset(g, targets, cfg, max_table=2, naive=True)
    assert np.abs(bad.marginals - exact).max() > 10 * max(float(bad.stderr.max()), 1e-3)


@pytest.mark.parametrize("seed", [1])
def test_estimates_are_within_their_errors_on_a_random_graph(seed):
    g = _random_graph(30, seed, p=0.15)
    exact = exact_marginals(g).marginals
    r = run_cutset(g, np.arange(g.n_vars), GibbsConfig(steps=30_000, seed=seed), max_table=8)
    assert r.cutset_size >= 1
    live = r.stderr.max(axis=1) > 1e-9
    assert live.any()
    assert np.max(np.abs(r.marginals - exact)[~live], initial=0.0) < 1e-9  # exact components
    # 1e-3 absorbs batch means that understate the error of near-deterministic targets (a
    # conditional that moves only in rare cutset states): a bias would show at any floor
    ok = np.abs(r.marginals - exact)[live] <= 3.0 * r.stderr[live] + 1e-3
    assert ok.mean() >= 0.9 and np.abs(r.marginals - exact).max() < 0.02


def test_evidence_and_the_target_set_are_respected():
    g0 = _random_graph(10, 4, p=0.5)
    ev = np.full(g0.n_vars, -1, dtype=g0.evidence.dtype)
    ev[[1, 6]] = [1, 0]
    g = g0._replace(evidence=ev)
    exact = exact_marginals(g).marginals
    targets = np.array([6, 3, 3, 9, 1])
    r = run_cutset(g, targets, GibbsConfig(steps=40_000, seed=7), max_table=4)
    assert r.marginals.shape[0] == 5 and list(r.targets) == list(targets)
    assert r.marginals[0, 0] == 1.0 and r.marginals[4, 1] == 1.0 and r.stderr[0].max() == 0.0
    np.testing.assert_allclose(r.marginals[1], r.marginals[2])
    err = np.abs(r.marginals - exact[targets, : r.marginals.shape[1]])
    # 1e-5: a target whose conditional moves only in rare cutset states (batch means see none)
    assert np.all(err <= 4 * r.stderr + 1e-5)



def test_cutset_option_through_sql(db):
    exact = np.array([p for _, p in db.execute("SELECT v.i, PROB(v) FROM a v ORDER BY v.i USING EXACT").fetchall()])
    r = db.execute("SELECT v.i, PROB(v), STDERR(v) FROM a v ORDER BY v.i "
                   "USING GIBBS WITH (cutset = true, cutset_table = 2, seed = 1, steps = 20000)")
    rows = r.fetchall()
    p, se = np.array([x for _, x, _ in rows]), np.array([s for *_, s in rows])
    assert np.all(np.abs(p - exact) <= 4 * se + 1e-6)
    assert "cutset sampling: collapsed Gibbs on" in r.diagnostics["method_reason"]
    rows = dict(db.execute("EXPLAIN SELECT PROB(v) FROM a v USING GIBBS WITH (cutset = 6, cutset_table = 2)").fetchall())
    assert "cutset variable(s)" in rows["moves"] and "induced width" in rows["moves"]


@pytest.mark.parametrize("opts,fragment", [("cutset = 0", "cutset"), ("cutset = 'maybe'", "cutset"),
                                            ("cutset_table = 1", "cutset_table")])
def test_bad_cutset_options(db, opts, fragment):
    with pytest.raises(OptionError, match=fragment):
        db.execute(f"SELECT PROB(v) FROM a v USING GIBBS WITH ({opts})")


def _ring_of_walls(n: int = 8, w: float = 9.0):
    """A ring with links to the next and next-but-one variable at weight 9: two modes (all 0,
    all 1) that single-site Gibbs cannot cross."""
    b = GraphBuilder()
    x = b.add_variables(n)
    strong = b.add_weight(w)
    for i in range(n):
        b.add_factor(F.EQUAL, [x[i], x[(i + 1) % n]], weight=strong)
        b.add_factor(F.EQUAL, [x[i], x[(i + 2) % n]], weight=strong)
    b.add_factor(F.ISTRUE, [x[0]], weight=b.add_weight(0.3))
    return b.build()


def test_auto_picks_a_one_group_cutset_when_the_pilot_is_stuck():
    from pdbq.inference.moves.move_choice import choose_moves, run_auto  # noqa: PLC0415

    g = _ring_of_walls()
    exact = exact_marginals(g).marginals
    d = dataclasses.replace(choose_moves(g, block_table=4), static=False)  # a graph this small fits one static block
    assert d.cutset is not None and d.cutset.n_groups == 1 and "cutset sampling" in d.reason
    r, why = run_auto(g, np.arange(g.n_vars), GibbsConfig(steps=20_000, seed=4), d)
    assert "did not mix" in why and "cutset sampling: collapsed Gibbs on" in why
    assert np.all(np.abs(r.marginals - exact) <= 4 * r.stderr + 1e-6)
    assert np.abs(r.marginals - exact).max() < 0.03
    # where the graph fits the table budget whole, no cutset is needed and AUTO keeps blocks
    assert choose_moves(g, block_table=2**10).cutset is None


def test_auto_respects_cutset_false():
    from pdbq.inference.moves.move_choice import choose_moves  # noqa: PLC0415

    d = choose_moves(_ring_of_walls(), block_table=4)
    assert d.cutset is not None
    plain = d.without_cutset()
    assert plain.cutset is None and plain.reason.startswith("exact block moves") and plain.mixing == d.mixing
