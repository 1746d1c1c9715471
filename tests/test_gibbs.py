"""Gibbs sampler: marginals against brute-force enumeration for every factor function, head-group
semantics, domain kind and evidence setting; the check's teeth; numerics; determinism; R-hat;
input errors and run control."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from numba import njit

from pdbq.errors import InferenceError, OptionError
from pdbq.graph.builder import GraphBuilder
from pdbq.inference.mcmc import gibbs as gibbs_mod
from pdbq.inference.mcmc.config import GibbsConfig
from pdbq.inference.mcmc.gibbs import run_gibbs
from pdbq.inference.mcmc.kernels import log_score_kernel
from pdbq.inference.exact.potentials import log_score as reference_log_score
from pdbq.language.nodes import FactorFunction as F
from pdbq.language.nodes import Semantics as S

FUNCTIONS = [F.IMPLY, F.OR, F.AND, F.EQUAL, F.ISTRUE, F.LINEAR, F.RATIO, F.LOGICAL, F.IMPLY_MLN, F.VOTE, F.TABLE]
SEMANTICS = [None, S.LINEAR, S.LOGICAL, S.RATIO]
FLOOR = 0.003  # absolute slack on top of 4 standard errors


# ------------------------------------------------------------------------------- references


@njit(cache=True)
def _scores(g, states):
    out = np.empty(states.shape[0])
    for i in range(states.shape[0]):
        out[i] = log_score_kernel(g, g.tables, states[i])
    return out


def brute_force_marginals(g) -> np.ndarray:
    """Exact marginals by enumerating every assignment of the non-evidence variables (≤ 12).

    Scores come from the numba `log_score_kernel` for speed; `test_kernel_log_score_matches_reference`
    ties it to the plain-Python reference of pdbq.inference.exact.potentials."""
    free = np.flatnonzero(g.evidence < 0)
    assert free.size <= 12
    kmax = int(g.cardinality.max())
    grid = np.array(list(itertools.product(*[range(int(g.cardinality[v])) for v in free])), dtype=np.int32)
    states = np.tile(np.where(g.evidence >= 0, g.evidence, 0).astype(np.int32), (grid.shape[0], 1))
    if free.size:
        states[:, free] = grid
    scores = _scores(g, states)
    p = np.exp(scores - scores.max())
    p /= p.sum()
    marg = np.zeros((g.n_vars, kmax))
    for v in range(g.n_vars):
        for x in range(int(g.cardinality[v])):
            marg[v, x] = p[states[:, v] == x].sum()
    return marg


def random_graph(function, semantics, categorical: bool, evidence: bool, seed: int, scale: float = 1.0, n: int = 7):
    """A small random graph exercising ``function`` (alone or in head groups)."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder()
    cards = rng.choice([2, 3, 4], size=n) if categorical else np.full(n, 2)
    if categorical:
        cards[0] = 3  # at least one genuinely categorical variable
    vs = [b.add_variable(int(k)) for k in cards]
    # mild priors so marginals are not all uniform
    for v in vs:
        k = int(cards[v])
        if k == 2:
            b.add_factor(F.ISTRUE, [v], weight=b.add_weight(float(rng.normal(0, 0.4))))
        else:
            b.add_factor(F.TABLE, [v], table=rng.normal(0, 0.4, size=k))

    def args(arity: int, head: int | None = None):
        others = [int(x) for x in rng.choice([u for u in vs if u != head], size=arity - (head is not None), replace=False)]
        if rng.random() < 0.15 and others:
            others.append(others[0])  # a variable filling two slots of one factor
        chosen = others + ([head] if head is not None else [])
        if function == F.TABLE:
            return chosen, None
        lits = []
        for u in chosen:
            k = int(cards[u])
            if function == F.EQUAL and (k > 2 or rng.random() < 0.5):
                lits.append(-1)
            elif k == 2:
                lits.append(int(rng.choice([-1, 0, 1])))
            else:
                lits.append(int(rng.integers(0, k)))
        return chosen, lits

    def add(chosen, lits, **kw):
        if function == F.TABLE:
            size = int(np.prod([cards[u] for u in chosen]))
            return b.add_factor(F.TABLE, chosen, table=rng.normal(0, scale, size=size), **kw)
        return b.add_factor(function, chosen, literals=lits, **kw)

    if semantics is None:
        for _ in range(6):
            lo = 2 if function in (F.EQUAL, F.TABLE) else 1
            chosen, lits = args(int(rng.integers(lo, 4)))
            add(chosen, lits, weight=b.add_weight(float(rng.uniform(-1.5, 1.5) * scale)))
    else:
        for head in rng.choice(vs, size=2, replace=False):
            grp = b.add_group(semantics, b.add_weight(float(rng.uniform(-1.5, 1.5) * scale)))
            for _ in range(3):
                chosen, lits = args(int(rng.integers(2, 4)), head=int(head))
                add(chosen, lits, group=grp)
    if evidence:
        for v in rng.choice(vs, size=2, replace=False):
            b.set_evidence(int(v), int(rng.integers(0, cards[v])))
    return b.build()


def check_against_exact(g, result, exact) -> float:
    """Largest violation of |mcmc − exact| ≤ 4·se + FLOOR (≤ 0 means the check passes)."""
    worst = -np.inf
    for row, v in enumerate(result.targets):
        k = int(g.cardinality[v])
        err = np.abs(result.marginals[row, :k] - exact[v, :k])
        allowed = 4 * result.stderr[row, :k] + FLOOR
        worst = max(worst, float(np.max(err - allowed)))
    return worst


CFG = GibbsConfig(steps=40_000, chains=4, seed=11, threads=1)


# ------------------------------------------------------------------------------- correctness


@pytest.mark.parametrize("evidence", [False, True], ids=["free", "evid"])
@pytest.mark.parametrize("categorical", [False, True], ids=["bool", "cat"])
@pytest.mark.parametrize("semantics", SEMANTICS, ids=["alone", "linear", "logical", "ratio"])
@pytest.mark.parametrize("function", FUNCTIONS, ids=[f.name for f in FUNCTIONS])
def test_marginals_match_enumeration(function, semantics, categorical, evidence):
    seed = 1000 * int(function) + 10 * (SEMANTICS.index(semantics)) + 2 * categorical + evidence
    g = random_graph(function, semantics, categorical, evidence, seed)
    exact = brute_force_marginals(g)
    targets = np.arange(g.n_vars)
    r = run_gibbs(g, targets, CFG)
    assert check_against_exact(g, r, exact) <= 0, (r.marginals, exact, r.stderr)
    np.testing.assert_allclose(r.marginals.sum(axis=1), 1.0, atol=1e-9)
    assert np.all(r.rhat[g.evidence < 0] < 1.1)


def test_kernel_log_score_matches_reference():
    for seed, fn in enumerate(FUNCTIONS):
        for sem in SEMANTICS:
            g = random_graph(fn, sem, categorical=bool(seed % 2), evidence=False, seed=seed)
            rng = np.random.default_rng(seed)
            for _ in range(5):
                x = np.array([rng.integers(0, k) for k in g.cardinality], dtype=np.uint8)
                assert log_score_kernel(g, g.tables, x) == pytest.approx(reference_log_score(g, x), abs=1e-9)


def test_random_scan_and_alias_selection_match_enumeration():
    g = random_graph(F.IMPLY, S.LOGICAL, categorical=True, evidence=True, seed=5)
    exact = brute_force_marginals(g)
    sites = np.flatnonzero(g.evidence < 0)
    r = run_gibbs(g, sites, GibbsConfig(steps=60_000, seed=3, scan="random", threads=1))
    assert check_against_exact(g, r, exact) <= 0
    # a skewed selection distribution (Vose alias table built here by hand for 2 levels)
    n = sites.size
    p = np.linspace(1.0, 3.0, n)
    p /= p.sum()
    prob, alias = _vose(p)
    r = run_gibbs(g, sites, GibbsConfig(steps=60_000, seed=3, threads=1), selection=(prob, alias))
    assert check_against_exact(g, r, exact) <= 0


def _vose(p):
    n = p.size
    q = p * n
    prob = np.zeros(n)
    alias = np.zeros(n, dtype=np.int32)
    small = [i for i in range(n) if q[i] < 1]
    large = [i for i in range(n) if q[i] >= 1]
    while small and large:
        s, l_ = small.pop(), large.pop()
        prob[s], alias[s] = q[s], l_
        q[l_] -= 1 - q[s]
        (small if q[l_] < 1 else large).append(l_)
    for i in small + large:
        prob[i], alias[i] = 1.0, i
    return prob, alias


# ------------------------------------------------------------------------------- teeth


def _perturbed(kind):
    real = gibbs_mod.prepare_kernel_graph

    def prepare(graph):
        kg = real(graph)
        if kind == "sign":  # a wrong sign in the pairwise fast path
            return kg._replace(bb_b=-kg.bb_b, pt_tab=-kg.pt_tab)
        if kind == "groups":  # head-group semantics forgotten: grouped factors summed plainly
            return kg._replace(gen_group=np.full_like(kg.gen_group, -1))
        if kind == "off_by_one":  # each pair entry reads its neighbour's partner variable
            return kg._replace(bb_other=np.roll(kg.bb_other, 1))
        raise AssertionError(kind)

    return prepare


@pytest.mark.parametrize(
    "kind,function,semantics",
    [("sign", F.EQUAL, None), ("sign", F.TABLE, None), ("groups", F.IMPLY, S.LOGICAL), ("groups", F.VOTE, S.RATIO), ("off_by_one", F.EQUAL, None)],
)
def test_a_perturbed_kernel_fails_the_same_check(monkeypatch, kind, function, semantics):
    g = random_graph(function, semantics, categorical=False, evidence=False, seed=77, scale=2.0)
    exact = brute_force_marginals(g)
    r_ok = run_gibbs(g, np.arange(g.n_vars), CFG)
    assert check_against_exact(g, r_ok, exact) <= 0
    monkeypatch.setattr(gibbs_mod, "prepare_kernel_graph", _perturbed(kind))
    r_bad = run_gibbs(g, np.arange(g.n_vars), CFG)
    assert check_against_exact(g, r_bad, exact) > 0


# ------------------------------------------------------------------------------- numerics & rng


@pytest.mark.parametrize("function", FUNCTIONS, ids=[f.name for f in FUNCTIONS])
def test_huge_weights_stay_finite(function):
    for sem in (None, S.RATIO):
        g = random_graph(function, sem, categorical=True, evidence=False, seed=3, scale=1000.0)
        g = g._replace(weights=np.sign(g.weights) * 1000.0)
        r = run_gibbs(g, np.arange(g.n_vars), GibbsConfig(steps=5000, seed=1, threads=1))
        assert np.all(np.isfinite(r.marginals)) and np.all(np.isfinite(r.stderr))
        np.testing.assert_allclose(r.marginals.sum(axis=1), 1.0, atol=1e-9)


def test_zero_probability_tables_do_not_break_sampling():
    b = GraphBuilder()
    x, y = b.add_variables(2)
    z = b.add_variable(3)
    with np.errstate(divide="ignore"):
        b.add_factor(F.TABLE, [x, y], table=np.log([1.0, 0.0, 0.0, 2.0]))  # x == y, P(1,1) = 2/3
        b.add_factor(F.TABLE, [y, z], table=np.log([1, 0, 0, 0, 1, 1.0]))
    g = b.build()
    exact = brute_force_marginals(g)
    r = run_gibbs(g, [x, y, z], GibbsConfig(steps=20_000, seed=2, threads=1))
    assert check_against_exact(g, r, exact) <= 0


def test_same_seed_same_answer_and_threads_do_not_matter():
    g = random_graph(F.OR, S.RATIO, categorical=True, evidence=True, seed=9)
    t = np.arange(g.n_vars)
    a = run_gibbs(g, t, GibbsConfig(steps=7_000, seed=4, threads=1))
    b = run_gibbs(g, t, GibbsConfig(steps=7_000, seed=4, threads=2))
    c = run_gibbs(g, t, GibbsConfig(steps=7_000, seed=5, threads=1))
    np.testing.assert_array_equal(a.marginals, b.marginals)
    np.testing.assert_array_equal(a.stderr, b.stderr)
    np.testing.assert_array_equal(a.trace.estimates, b.trace.estimates)
    assert not np.array_equal(a.marginals, c.marginals)


def test_exact_step_count_and_single_variable_rao_blackwell_is_exact():
    b = GraphBuilder()
    x = b.add_variable()
    b.add_factor(F.ISTRUE, [x], weight=b.add_weight(0.8))
    r = run_gibbs(b.build(), [x, x], GibbsConfig(steps=12_345, burn_in=100, seed=0))
    assert r.steps == 12_345 and r.burn_in == 100
    assert r.marginals[0, 1] == pytest.approx(1 / (1 + np.exp(-1.6)), abs=1e-12)
    np.testing.assert_array_equal(r.marginals[0], r.marginals[1])


# ------------------------------------------------------------------------------- diagnostics


def _two_stuck_variables(weight=20.0):
    b = GraphBuilder()
    x, y = b.add_variables(2)
    b.add_factor(F.EQUAL, [x, y], weight=b.add_weight(weight))
    return b.build()


def test_rhat_flags_a_stuck_bimodal_model():
    r = run_gibbs(_two_stuck_variables(), [0, 1], GibbsConfig(steps=20_000, seed=0, threads=1))
    assert np.all(r.rhat > 1.1)
    assert not r.converged
    assert any("R-hat" in w and "not converged" in w for w in r.warnings)
    # the same model with a weak coupling mixes and is not flagged
    ok = run_gibbs(_two_stuck_variables(0.5), [0, 1], GibbsConfig(steps=20_000, seed=0, threads=1))
    assert np.all(ok.rhat < 1.1) and ok.converged and not ok.warnings


def test_trace_is_bounded_and_ends_at_the_estimate():
    g = random_graph(F.AND, None, categorical=False, evidence=False, seed=1)
    r = run_gibbs(g, [0, 1], GibbsConfig(steps=100_000, seed=0, trace_points=20, threads=1))
    assert 2 <= r.trace.steps.size <= 20
    assert np.all(np.diff(r.trace.steps) > 0)
    assert r.trace.estimates.shape == (r.trace.steps.size, 2, 2)
    if r.trace.steps[-1] == r.steps:
        np.testing.assert_allclose(r.trace.estimates[-1], r.marginals)


def test_evidence_targets_are_point_masses():
    g = random_graph(F.IMPLY, None, categorical=True, evidence=True, seed=4)
    ev = int(np.flatnonzero(g.evidence >= 0)[0])
    r = run_gibbs(g, [ev], GibbsConfig(steps=1000))
    assert r.marginals[0, g.evidence[ev]] == 1.0 and r.stderr[0].max() == 0.0


# ------------------------------------------------------------------------------- run control


def test_tolerance_time_limit_and_progress():
    g = random_graph(F.EQUAL, None, categorical=False, evidence=False, seed=2)
    infos = []
    r = run_gibbs(g, [0, 1, 2], GibbsConfig(tolerance=0.02, seed=1, threads=1), on_round=infos.append)
    assert r.max_halfwidth() <= 0.02 and not any("tolerance" in w for w in r.warnings)
    assert infos and infos[-1].steps == r.steps + r.burn_in
    r = run_gibbs(g, [0], GibbsConfig(tolerance=1e-9, time_limit=0.3, seed=1, threads=1))
    # what load cannot change: the clock, not the tolerance or a step count, ended the run
    assert any("tolerance" in w and "stopped by the time limit" in w for w in r.warnings)


def test_keyboard_interrupt_between_rounds_is_reraised():
    g = random_graph(F.OR, None, categorical=False, evidence=False, seed=2)
    calls = []

    def stop(info):
        calls.append(info)
        if len(calls) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_gibbs(g, [0], GibbsConfig(steps=100_000, seed=1, threads=2), on_round=stop)
    assert len(calls) == 3
    r = run_gibbs(g, [0], GibbsConfig(steps=1000, seed=1))  # nothing left broken
    assert r.steps == 1000


def test_bad_inputs_raise_clear_errors():
    g = random_graph(F.OR, None, categorical=False, evidence=True, seed=2)
    ev = int(np.flatnonzero(g.evidence >= 0)[0])
    free = np.flatnonzero(g.evidence < 0)
    with pytest.raises(InferenceError, match="out of range"):
        run_gibbs(g, [99], GibbsConfig(steps=10))
    with pytest.raises(InferenceError, match="evidence"):
        run_gibbs(g, [free[0]], GibbsConfig(steps=10), sites=[ev, free[0]])
    with pytest.raises(InferenceError, match="twice"):
        run_gibbs(g, [free[0]], GibbsConfig(steps=10), sites=[free[0], free[0]])
    with pytest.raises(InferenceError, match="neither evidence nor among"):
        run_gibbs(g, [free[0]], GibbsConfig(steps=10), sites=[free[1]])
    with pytest.raises(InferenceError, match="one entry per site"):
        run_gibbs(g, [free[0]], GibbsConfig(steps=10), selection=(np.ones(1), np.zeros(1, np.int32)))
    with pytest.raises(OptionError, match="chains"):
        run_gibbs(g, [free[0]], GibbsConfig(chains=0))
    with pytest.raises(OptionError, match="scan"):
        run_gibbs(g, [free[0]], GibbsConfig(scan="zigzag"))
