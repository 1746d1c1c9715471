"""Query-aware selection: influence scores, trail Dijkstra, alias tables, options (issue 5, items 2–3)."""

from __future__ import annotations

import itertools
import math

import numba
import numpy as np
import pytest

from pdbq.errors import InferenceError, OptionError
from pdbq.graph.builder import GraphBuilder
from pdbq.inference.mcmc.alias import alias_draw, alias_probabilities, alias_table
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.inference.query_aware.influence import edge_influence, graph_distance, pair_tv, trail_scores
from pdbq.inference.query_aware.selection import (
    SELECTIONS,
    SelectionConfig,
    exact_influence,
    mix_scores,
    selection_distribution,
)
from pdbq.inference.mcmc.transition import check_kernel, gibbs_kernel, log_joint, marginal, state_table
from pdbq.language.nodes import FactorFunction, Semantics

T = FactorFunction.TABLE


def _log(ps):
    return np.log(np.asarray(ps, dtype=np.float64))


def three_chain(evidence_on_1: int | None = None):
    """x0 — x1 — x2 with potentials (probability space, row = first argument):
    ψ01 = [[2, 1], [1, 4]], ψ12 = [[1, 3], [3, 1]], plus a strong unary factor on x1 that must be
    ignored (it is no MUTUAL factor of any pair)."""
    b = GraphBuilder()
    x = b.add_variables(3)
    b.add_factor(T, [x[0], x[1]], table=_log([2, 1, 1, 4]))
    b.add_factor(T, [x[1], x[2]], table=_log([1, 3, 3, 1]))
    b.add_factor(T, [x[1]], table=_log([1, 50]))
    if evidence_on_1 is not None:
        b.set_evidence(x[1], evidence_on_1)
    return b.build()


# ------------------------------------------------------------------ influence by hand


def test_edge_influence_matches_hand_computation_on_three_chain():
    # Pair (0,1): φ = ψ01 / 8 = [[.25, .125], [.125, .5]]; φ(x0) = φ(x1) = [.375, .625].
    #   φ00 − φ(0)φ(0) = .25 − .140625 = .109375; the four cells differ by ±.109375,
    #   so ι = ½ · 4 · .109375 = .21875.
    # Pair (1,2): φ = ψ12 / 8 = [[.125, .375], [.375, .125]]; marginals [.5, .5];
    #   |.125 − .25| = .125 in every cell, ι = ½ · 4 · .125 = .25.
    inf = edge_influence(three_chain())
    got = {(int(u), int(v)): float(i) for u, v, i in zip(inf.u, inf.v, inf.iota)}
    assert got.keys() == {(0, 1), (1, 2)}
    assert got[(0, 1)] == pytest.approx(0.21875, abs=1e-12)
    assert got[(1, 2)] == pytest.approx(0.25, abs=1e-12)


def test_trail_scores_are_products_along_the_chain():
    g = three_chain()
    # query x0: x1 = .21875, x2 = .21875 · .25 = .0546875
    np.testing.assert_allclose(trail_scores(g, [0]), [1.0, 0.21875, 0.0546875], rtol=1e-12)
    # query x2: x1 = .25, x0 = .25 · .21875
    np.testing.assert_allclose(trail_scores(g, [2]), [0.0546875, 0.25, 1.0], rtol=1e-12)
    # two query variables: each scores 1, x1 takes the better trail (.25)
    np.testing.assert_allclose(trail_scores(g, [0, 2]), [1.0, 0.25, 1.0], rtol=1e-12)


def test_evidence_blocks_trails():
    g = three_chain(evidence_on_1=1)
    assert edge_influence(g).u.shape[0] == 0
    np.testing.assert_array_equal(trail_scores(g, [0]), [1.0, 0.0, 0.0])
    with pytest.raises(InferenceError, match="evidence"):
        trail_scores(g, [1])


def test_mutual_factors_multiply_and_higher_arity_is_averaged_at_uniform():
    b = GraphBuilder()
    x = b.add_variables(3)
    # two mutual factors on (0,1): ψ = [[2,1],[1,4]] · [[1,1],[1,2]] = [[2,1],[1,8]], Z = 12
    b.add_factor(T, [x[0], x[1]], table=_log([2, 1, 1, 4]))
    b.add_factor(T, [x[1], x[0]], table=_log([1, 1, 1, 2]))  # argument order reversed on purpose
    # ternary ψ(x0,x1,x2) = 5 when all are 1, else 1. Averaged over x1 at uniform it gives the
    # (0,2) potential [[1,1],[1,3]], Z = 6; and over x2 it gives (0,1) another [[1,1],[1,3]].
    tern = np.ones(8)
    tern[7] = 5.0
    b.add_factor(T, [x[0], x[1], x[2]], table=_log(tern))
    inf = edge_influence(b.build())
    got = {(int(u), int(v)): float(i) for u, v, i in zip(inf.u, inf.v, inf.iota)}

    def tv_of(psi):
        phi = np.asarray(psi, float) / np.sum(psi)
        return 0.5 * np.abs(phi - phi.sum(1, keepdims=True) * phi.sum(0, keepdims=True)).sum()

    # (0,2): φ = [[1,1],[1,3]]/6, marginals [1/3, 2/3]: |1/6 − 1/9| = 1/18 per cell, ι = 1/9.
    assert got[(0, 2)] == pytest.approx(1 / 9, abs=1e-12)
    # (0,1): [[2,1],[1,8]] · [[1,1],[1,3]] = [[2,1],[1,24]]
    assert got[(0, 1)] == pytest.approx(tv_of([[2, 1], [1, 24]]), abs=1e-12)
    assert got[(1, 2)] == pytest.approx(1 / 9, abs=1e-12)


def test_non_table_factors_and_head_groups_get_influence():
    b = GraphBuilder()
    x = b.add_variables(4)
    w = b.add_weight(1.0)
    b.add_factor(FactorFunction.EQUAL, [x[0], x[1]], weight=w)
    # EQUAL with weight 1: ψ = [[e, 1/e], [1/e, e]] → ι = tanh(1) / 2
    gw = b.add_weight(0.8)
    grp = b.add_group(Semantics.LOGICAL, gw)
    b.add_factor(FactorFunction.IMPLY, [x[1], x[3]], group=grp)
    b.add_factor(FactorFunction.IMPLY, [x[2], x[3]], group=grp)
    inf = edge_influence(b.build())
    got = {(int(u), int(v)): float(i) for u, v, i in zip(inf.u, inf.v, inf.iota)}
    assert got[(0, 1)] == pytest.approx(math.tanh(1.0) / 2, abs=1e-12)
    # the group couples every pair of its variables, x1–x2 included (they share the group)
    assert {(1, 3), (2, 3), (1, 2)} <= got.keys()
    assert all(0.0 < got[k] < 0.5 for k in [(1, 3), (2, 3), (1, 2)])


def test_pair_tv_bounds_and_independence():
    ind = np.add.outer(_log([1, 3]), _log([2, 5]))[None]  # a product table: independent
    assert pair_tv(ind)[0] == pytest.approx(0.0, abs=1e-15)
    hard = np.array([[[0.0, -np.inf], [-np.inf, 0.0]]])  # x = y exactly, uniform
    assert pair_tv(hard)[0] == pytest.approx(0.5)
    with pytest.raises(InferenceError):
        pair_tv(np.zeros((2, 2)))


# ------------------------------------------------------------------ trails: Dijkstra


def _pairwise_graph(n, edges):
    """Pairwise TABLE factors with prescribed TV influence: ψ = [[e^w, 1], [1, e^w]] has
    ι = tanh(w/2)/2, so w = 2·atanh(2ι)."""
    b = GraphBuilder()
    b.add_variables(n)
    for u, v, iota in edges:
        w = 2 * math.atanh(2 * iota)
        b.add_factor(T, [u, v], table=[w, 0.0, 0.0, w])
    return b.build()


def test_trail_takes_the_best_product_not_the_fewest_hops():
    # direct 0–3 is weak (.01); 0–1–3 gives .4 · .4 = .16; 0–2–3 gives .3 · .45 = .135
    g = _pairwise_graph(4, [(0, 3, 0.01), (0, 1, 0.4), (1, 3, 0.4), (0, 2, 0.3), (2, 3, 0.45)])
    s = trail_scores(g, [0])
    np.testing.assert_allclose(s, [1.0, 0.4, 0.3, 0.16], rtol=1e-9)
    np.testing.assert_array_equal(graph_distance(g, [0]), [0, 1, 1, 1])


def test_trail_equals_brute_force_over_simple_paths():
    rng = np.random.default_rng(7)
    n = 8
    edges = [(u, v, float(rng.uniform(0.02, 0.45))) for u, v in itertools.combinations(range(n), 2)
             if rng.random() < 0.4]
    g = _pairwise_graph(n, edges)
    adj = {}
    for u, v, i in edges:
        adj.setdefault(u, {})[v] = i
        adj.setdefault(v, {})[u] = i
    best = np.zeros(n)

    def dfs(node, prod, seen):
        best[node] = max(best[node], prod)
        for nb, i in adj.get(node, {}).items():
            if nb not in seen:
                dfs(nb, prod * i, seen | {nb})

    dfs(0, 1.0, {0})
    np.testing.assert_allclose(trail_scores(g, [0]), best, rtol=1e-9)


# ------------------------------------------------------------------ alias tables


@numba.njit
def _draws(prob, alias, n, seed):
    np.random.seed(seed)  # numba's own per-call stream, only for this test
    out = np.zeros(prob.shape[0], dtype=np.int64)
    for _ in range(n):
        out[alias_draw(prob, alias, np.random.random(), np.random.random())] += 1
    return out


def _chi2_critical(df, z=3.29):
    # Wilson–Hilferty: upper 0.05% point of chi-square(df)
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def _chi2(counts, p):
    e = counts.sum() * p
    return float(((counts - e) ** 2 / e).sum())


def test_alias_table_is_exact_and_draws_match_p():
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.full(40, 0.5))
    p = 0.98 * p + 0.02 / 40
    prob, alias = alias_table(p)
    assert prob.dtype == np.float64 and alias.dtype == np.int32
    np.testing.assert_allclose(alias_probabilities(prob, alias), p, atol=1e-12)
    counts = _draws(prob, alias, 400_000, 11)
    crit = _chi2_critical(39)
    assert _chi2(counts, p) < crit
    # teeth: a table whose aliases were shuffled draws from another distribution, and fails
    broken = alias.copy()
    broken[:20] = broken[:20][::-1]
    assert np.abs(alias_probabilities(prob, broken) - p).max() > 1e-3
    assert _chi2(_draws(prob, broken, 400_000, 11), p) > crit


def test_alias_table_edge_cases():
    prob, alias = alias_table(np.array([1.0]))
    assert alias_draw(prob, alias, 0.99999, 0.5) == 0
    prob, alias = alias_table(np.array([0.0, 1.0, 0.0]))
    np.testing.assert_allclose(alias_probabilities(prob, alias), [0, 1, 0], atol=1e-15)
    for bad in ([], [0.5, 0.6], [-0.1, 1.1], [np.nan, 1.0]):
        with pytest.raises(InferenceError):
            alias_table(np.array(bad, dtype=float))


# ------------------------------------------------------------------ selection distributions


def small_model(n=5, seed=0, evidence=None):
    rng = np.random.default_rng(seed)
    b = GraphBuilder()
    x = b.add_variables(n)
    for i in range(n - 1):
        b.add_factor(T, [x[i], x[i + 1]], table=rng.normal(0, 1.0, 4))
    b.add_factor(T, [x[0], x[2], x[4 % n]], table=rng.normal(0, 0.5, 8))
    for i in range(n):
        b.add_factor(T, [x[i]], table=rng.normal(0, 0.5, 2))
    for v, val in (evidence or {}).items():
        b.set_evidence(v, val)
    return b.build()


@pytest.mark.parametrize("rule", SELECTIONS)
def test_every_rule_gives_a_valid_distribution(rule):
    g = small_model()
    sites = np.arange(5)
    sel = selection_distribution(g, [1], sites, SelectionConfig(selection=rule, epsilon=0.1))
    assert sel.p.shape == (5,) and sel.p.sum() == pytest.approx(1.0)
    assert np.all(sel.p >= 0.1 / 5 - 1e-15)  # the ε floor
    np.testing.assert_allclose(alias_probabilities(sel.prob, sel.alias), sel.p, atol=1e-12)
    np.testing.assert_array_equal(sel.sites, sites)
    if rule != "uniform":
        assert int(np.argmax(sel.p)) == 1  # the query variable is the most selected
    # with ε = 0 the p is exactly the normalised score
    sel0 = selection_distribution(g, [1], sites, SelectionConfig(selection=rule, epsilon=0.0))
    np.testing.assert_allclose(sel0.p, sel0.scores / sel0.scores.sum(), rtol=1e-12)


def test_rule_values():
    g = small_model()
    sites = np.arange(5)

    def scores(rule, **kw):
        return selection_distribution(g, [0], sites, SelectionConfig(selection=rule, **kw)).scores

    np.testing.assert_array_equal(scores("uniform"), np.ones(5))
    np.testing.assert_array_equal(scores("query_only"), [1, 0, 0, 0, 0])
    # hops from x0: x1, x2, x4 share a factor with it (chain + the ternary); x3 is two hops away
    np.testing.assert_allclose(scores("distance", power=2.0), [1, 1 / 4, 1 / 4, 1 / 9, 1 / 4])
    np.testing.assert_allclose(scores("trail"), trail_scores(g, [0]))


def brute_force_influence(g, q, measure):
    """ι(x_q, x_i) from the enumerated joint (independent of exact.py)."""
    pi = np.exp(log_joint(g))
    states = state_table(g.cardinality)
    out = []
    for i in range(g.n_vars):
        joint = np.zeros((2, 2))
        np.add.at(joint, (states[:, q], states[:, i]), pi)
        pa, pb = joint.sum(1, keepdims=True), joint.sum(0, keepdims=True)
        if measure == "tv":
            out.append(0.5 * np.abs(joint - pa * pb).sum())
        else:
            nz = joint > 0
            out.append(float((joint[nz] * np.log(joint[nz] / (pa * pb)[nz])).sum()))
    return np.array(out)


@pytest.mark.parametrize("measure", ["tv", "mi"])
def test_exact_influences_match_enumeration(measure):
    g = small_model(seed=4)
    got = exact_influence(g, [2], np.arange(5), measure)
    np.testing.assert_allclose(got, brute_force_influence(g, 2, measure), atol=1e-10)
    # the query's own: tv 1 − Σπ², mi the entropy
    pq = exact_marginals(g).marginals[2, :2]
    own = 1 - (pq**2).sum() if measure == "tv" else -(pq * np.log(pq)).sum()
    assert got[2] == pytest.approx(own, abs=1e-10)


def test_exact_influences_respect_evidence():
    g = small_model(seed=4, evidence={3: 1})
    sites = np.array([0, 1, 2, 4])
    got = exact_influence(g, [2], sites, "tv")
    want = brute_force_influence(g, 2, "tv")[sites]
    np.testing.assert_allclose(got, want, atol=1e-10)


def test_option_errors_name_the_valid_choices():
    with pytest.raises(OptionError, match=r"trail.*Did you mean 'trail'"):
        SelectionConfig(selection="trial")
    with pytest.raises(OptionError, match="query_only"):
        SelectionConfig(selection="bogus")
    for eps in (-0.1, 1.5, "0.1", True):
        with pytest.raises(OptionError, match="epsilon"):
            SelectionConfig(epsilon=eps)
    for pw in (0, -1, float("inf"), "2"):
        with pytest.raises(OptionError, match="power"):
            SelectionConfig(power=pw)
    with pytest.raises(OptionError, match="max_exact_vars"):
        SelectionConfig(max_exact_vars=0)


def test_exact_rules_are_refused_on_big_graphs():
    g = small_model(n=8)
    for rule in ("tv", "mi"):
        with pytest.raises(InferenceError, match=r"max_exact_vars = 5.*'trail'"):
            selection_distribution(g, [0], np.arange(8), SelectionConfig(selection=rule, max_exact_vars=5))


def test_site_errors():
    g = small_model(evidence={3: 0})
    cfg = SelectionConfig()
    cases = [
        ([0], [0, 1, 1], "listed twice"),
        ([0], [0, 3], "evidence"),
        ([2], [0, 1], "query variable 2 is not among the sites"),
        ([0], [0, 9], "site 9"),
        ([], [0, 1], "at least one query"),
        ([0], [], "non-empty"),
    ]
    for q, sites, msg in cases:
        with pytest.raises(InferenceError, match=msg):
            selection_distribution(g, q, np.array(sites, dtype=np.int64), cfg)


def test_mixing_and_unreachable_sites():
    # x3 is in no factor with the others: unreachable, score 0, only the ε floor.
    b = GraphBuilder()
    x = b.add_variables(4)
    b.add_factor(T, [x[0], x[1]], table=_log([2, 1, 1, 4]))
    b.add_factor(T, [x[1], x[2]], table=_log([1, 3, 3, 1]))
    g = b.build()
    sel = selection_distribution(g, [0], np.arange(4), SelectionConfig(epsilon=0.2))
    assert sel.scores[3] == 0.0
    total = 1 + 0.21875 + 0.0546875
    np.testing.assert_allclose(sel.p, 0.8 * np.array([1, 0.21875, 0.0546875, 0]) / total + 0.05, rtol=1e-12)
    np.testing.assert_allclose(mix_scores(np.zeros(3), 0.0), np.full(3, 1 / 3))
    with pytest.raises(InferenceError):
        mix_scores(np.array([1.0, -1.0]), 0.1)


# ------------------------------------------------------------------ §3: query-only convergence


def test_query_only_converges_to_the_conditional_given_the_frozen_latent_state():
    """Paper §3 / Prop. 1: with ε = 0 and p on the query only, the latent variables keep their
    initial values, so the chain's query marginal converges to π(x_q | x_l = v_l), not π(x_q)."""
    g = small_model(n=4, seed=5)
    q = 1
    logp = log_joint(g)
    pi = np.exp(logp)
    states = state_table(g.cardinality)
    p = selection_distribution(g, [q], np.arange(4), SelectionConfig(selection="query_only", epsilon=0.0)).p
    np.testing.assert_array_equal(p, [0, 1, 0, 0])
    kernel = gibbs_kernel(g, logp, p)
    check_kernel(kernel, pi)  # π is invariant (but the chain is not irreducible)
    true_q = marginal(pi, g.cardinality, q)
    gaps = []
    for latent in itertools.product([0, 1], repeat=3):
        v0, v2, v3 = latent
        start = ((states[:, 0] == v0) & (states[:, 2] == v2) & (states[:, 3] == v3)).astype(float)
        start /= start.sum()  # latent state frozen at v_l, query uniform
        dist = kernel.run(start, 30)[-1]
        got = marginal(dist, g.cardinality, q)
        want = exact_marginals(g, evidence={0: v0, 2: v2, 3: v3}).marginals[q, :2]
        np.testing.assert_allclose(got, want, atol=1e-12)
        gaps.append(0.5 * np.abs(got - true_q).sum())
    # the frozen-latent answers differ from the true marginal: the bias of Prop. 1, and its
    # π(x_l)-weighted average is exactly the TV influence of x_l on x_q
    assert max(gaps) > 0.05
    joint = np.zeros((8, 2))
    lat_index = states[:, 0] * 4 + states[:, 2] * 2 + states[:, 3]
    np.add.at(joint, (lat_index, states[:, q]), pi)
    pl = joint.sum(1)
    iota = 0.5 * np.abs(joint - pl[:, None] * true_q[None, :]).sum()
    weights = np.array([pl[a * 4 + b * 2 + c] for a, b, c in itertools.product([0, 1], repeat=3)])
    assert float(np.dot(weights, gaps)) == pytest.approx(iota, abs=1e-12)
    # while the ε-mixed trail chain converges to the true marginal
    p_eps = selection_distribution(g, [q], np.arange(4), SelectionConfig(epsilon=0.05)).p
    dist = gibbs_kernel(g, logp, p_eps).run(start, 4000)[-1]
    np.testing.assert_allclose(marginal(dist, g.cardinality, q), true_q, atol=1e-6)


def test_broken_kernels_are_caught():
    g = small_model(n=4, seed=5)
    logp = log_joint(g)
    pi = np.exp(logp)
    p = np.full(4, 0.25)
    good = gibbs_kernel(g, logp, p)
    check_kernel(good, pi)
    np.testing.assert_allclose(good.dense().sum(1), 1.0)
    # rows not summing to 1
    with pytest.raises(InferenceError, match="sums to"):
        check_kernel(good._replace(vals=good.vals * 0.99), pi)
    # a Gibbs sampler with the wrong conditionals (tempered model): stochastic, wrong stationary π
    wrong = gibbs_kernel(g, logp * 0.5, p)
    with pytest.raises(InferenceError, match="detailed balance"):
        check_kernel(wrong, pi)


def test_hyperedges_wider_than_max_table():
    b = GraphBuilder()
    x = b.add_variables(6)
    grp = b.add_group(Semantics.LOGICAL, b.add_weight(0.9))
    for body in (x[0], x[1], x[2]):
        b.add_factor(FactorFunction.IMPLY, [body, x[3]], group=grp)
    b.add_factor(FactorFunction.OR, [x[3], x[4], x[5]], weight=b.add_weight(0.5))
    g = b.build()
    full = edge_influence(g)
    assert (0, 1) in set(zip(full.u.tolist(), full.v.tolist()))  # the group couples its bodies
    small = edge_influence(g, max_table=4)
    got = {(int(u), int(v)): float(i) for u, v, i in zip(small.u, small.v, small.iota)}
    # the group (16 entries) is linearised: three standalone IMPLY factors, weight 0.9
    b2 = GraphBuilder()
    y = b2.add_variables(2)
    b2.add_factor(FactorFunction.IMPLY, [y[0], y[1]], weight=b2.add_weight(0.9))
    alone = float(edge_influence(b2.build()).iota[0])
    for body in (0, 1, 2):
        assert got[(body, 3)] == pytest.approx(alone, abs=1e-12)
    assert (0, 1) not in got
    # the OR factor (8 entries) cannot be tabulated: its pairs are forced to influence 1
    assert got[(3, 4)] == got[(3, 5)] == got[(4, 5)] == 1.0
    with pytest.raises(InferenceError, match="max_table"):
        edge_influence(g, max_table=2)


def test_categorical_pairs_keep_their_orientation():
    rng = np.random.default_rng(9)
    b = GraphBuilder()
    y = b.add_variable(2)
    x = b.add_variable(3)  # x > y: the factor over [x, y] is stored transposed
    t1 = rng.normal(size=(3, 2))
    t2 = rng.normal(size=(2, 3))
    b.add_factor(T, [x, y], table=t1.ravel())
    b.add_factor(T, [y, x], table=t2.ravel())
    inf = edge_influence(b.build())
    assert (int(inf.u[0]), int(inf.v[0])) == (y, x)
    want = pair_tv((t1.T + t2)[None])[0]
    assert inf.iota[0] == pytest.approx(want, abs=1e-12)
    assert want != pytest.approx(pair_tv((t1.T + t2.T.T[::-1])[None])[0], abs=1e-6)  # order matters


def test_evidence_inside_a_wider_factor_is_sliced_not_averaged():
    rng = np.random.default_rng(2)
    tern = rng.normal(size=(2, 2, 2))
    b = GraphBuilder()
    x = b.add_variables(3)
    b.add_factor(T, x, table=tern.ravel())
    b.set_evidence(x[1], 1)
    inf = edge_influence(b.build())
    assert [(int(u), int(v)) for u, v in zip(inf.u, inf.v)] == [(0, 2)]
    assert inf.iota[0] == pytest.approx(pair_tv(tern[:, 1, :][None])[0], abs=1e-12)
