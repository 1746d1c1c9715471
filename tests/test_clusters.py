"""Cluster moves (Swendsen–Wang / Edwards–Sokal, issue 18).

The pass is checked on the exact transition-matrix checker (rows, detailed balance, πK = π) on
small graphs with fields, non-eligible factors, Potts tables, head groups and evidence; broken
variants (a bond probability without the 1 − e^(−w), a relabelling that ignores the field) must
fail it. The chains reach the exact marginals of a strongly coupled grid where single-site Gibbs
sticks, and the same broken variants fail that statistical check.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pdbq.errors import InferenceError, OptionError
from pdbq.graph.builder import GraphBuilder
from pdbq.inference.moves.cluster_kernels import cluster_pass, make_scratch, pair_tables
from pdbq.inference.moves.clusters import bond_terms, check_cluster_inputs, cluster_coverage, cluster_kernel, prepare_clusters
from pdbq.inference.mcmc.config import GibbsConfig, MixingConfig
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.inference.mcmc.gibbs import run_gibbs
from pdbq.inference.mcmc.kernels import group_sums_into, hard_tables
from pdbq.inference.moves.mixing import run_mixing
from pdbq.inference.moves.move_choice import choose_moves, run_auto
from pdbq.inference.mcmc.rng import chain_states
from pdbq.inference.mcmc.transition import check_kernel, log_joint
from pdbq.language.nodes import FactorFunction as F
from pdbq.language.nodes import Semantics as S


def ising(n: int, coupling: float, field: float):
    b = GraphBuilder()
    xs = b.add_variables(n * n)
    w = b.add_weight(coupling)
    h = b.add_weight(field)
    for r in range(n):
        for c in range(n):
            v = xs[r * n + c]
            if field:
                b.add_factor(F.ISTRUE, [v], weight=h)
            if c + 1 < n:
                b.add_factor(F.EQUAL, [v, xs[r * n + c + 1]], weight=w)
            if r + 1 < n:
                b.add_factor(F.EQUAL, [v, xs[(r + 1) * n + c]], weight=w)
    return b.build()


def mixed_binary(field: bool = True):
    """Booleans: EQUAL ferro links, an anti-ferro EQUAL, a negated-literal EQUAL, a binary TABLE,
    an OR (no bond) and a field."""
    b = GraphBuilder()
    xs = b.add_variables(5)
    for a, c in zip(xs, xs[1:3]):
        b.add_factor(F.EQUAL, [a, c], weight=b.add_weight(0.7))
    b.add_factor(F.EQUAL, [xs[0], xs[4]], weight=b.add_weight(-0.6))
    b.add_factor(F.EQUAL, [xs[3], xs[4]], literals=[0, 1], weight=b.add_weight(0.9))
    if field:
        b.add_factor(F.ISTRUE, [xs[1]], weight=b.add_weight(0.5))
        b.add_factor(F.ISTRUE, [xs[3]], weight=b.add_weight(-0.4))
    b.add_factor(F.OR, [xs[0], xs[3]], weight=b.add_weight(0.8))
    b.add_factor(F.TABLE, [xs[2], xs[4]], table=[0.1, -0.5, 0.3, 0.9])
    return b.build()


def potts(evidence: bool):
    """Three-valued variables: raw EQUAL (Potts), a Potts TABLE, a non-Potts table (no bond), a
    unary table field, optional evidence."""
    b = GraphBuilder()
    xs = b.add_variables(4, cardinality=3)
    b.add_factor(F.EQUAL, [xs[0], xs[1]], weight=b.add_weight(0.6))
    pt = np.full((3, 3), -0.2)
    np.fill_diagonal(pt, 0.7)
    b.add_factor(F.TABLE, [xs[1], xs[2]], table=pt.ravel().tolist())
    b.add_factor(F.TABLE, [xs[2], xs[3]], table=[0.1, 0.1, -0.4, 0.0, 0.5, 0.2, -0.1, 0.0, 0.6])
    b.add_factor(F.TABLE, [xs[0]], table=[0.4, -0.3, 0.0])
    b.add_factor(F.EQUAL, [xs[3], xs[0]], weight=b.add_weight(0.4))
    if evidence:
        b.set_evidence(xs[3], 2)
    return b.build()


def grouped():
    """A LOGICAL head group over two IMPLY groundings next to EQUAL bonds."""
    b = GraphBuilder()
    xs = b.add_variables(4)
    for a, c in zip(xs, xs[1:]):
        b.add_factor(F.EQUAL, [a, c], weight=b.add_weight(0.5))
    w = b.add_weight(1.1)
    g = b.add_group(S.LOGICAL, w)
    b.add_factor(F.IMPLY, [xs[0], xs[3]], weight=w, group=g)
    b.add_factor(F.IMPLY, [xs[2], xs[3]], weight=w, group=g)
    b.add_factor(F.ISTRUE, [xs[1]], weight=b.add_weight(-0.3))
    return b.build()


# ---------------------------------------------------------------------------------------------
# which factors carry bonds


def test_bond_terms_follow_the_factor_conventions():
    t = bond_terms(mixed_binary())
    by_factor = {int(f): (int(a), float(w)) for f, a, w in zip(t.factor, t.anti, t.w)}
    # EQUAL ±1-valued: the term is 2|W|·1[...]; negative weight or one negated literal: x_u ≠ x_v
    assert by_factor[0] == (0, 1.4) and by_factor[1] == (0, 1.4)
    assert by_factor[2] == (1, 1.2)
    assert by_factor[3] == (1, 1.8)
    # the binary table's interaction (t00 + t11 − t01 − t10) / 2
    tab = [f for f in by_factor if f not in (0, 1, 2, 3)]
    assert len(tab) == 1 and by_factor[tab[0]] == (0, pytest.approx(0.6))
    # Potts tables carry min diag − max off-diagonal; other tables and raw EQUAL < 0 carry none
    tp = bond_terms(potts(False))
    assert sorted(np.round(tp.w, 9).tolist()) == [0.8, 0.9, 1.2]
    b = GraphBuilder()
    xs = b.add_variables(3, cardinality=3)
    b.add_factor(F.EQUAL, [xs[0], xs[1]], weight=b.add_weight(-1.0))  # anti-ferro Potts
    b.add_factor(F.EQUAL, [xs[0], xs[1], xs[2]], weight=b.add_weight(1.0))  # three arguments
    b.add_factor(F.TABLE, [xs[1], xs[2]], table=[0.0, -np.inf, -np.inf, -np.inf, 0.0, -np.inf, -np.inf, -np.inf, 0.0])
    assert bond_terms(b.build()).factor.size == 0
    assert bond_terms(grouped()).factor.tolist() == [0, 1, 2]  # grouped IMPLYs carry none


# ---------------------------------------------------------------------------------------------
# exact transition matrices


@pytest.mark.parametrize("make", [mixed_binary, lambda: potts(False), lambda: potts(True), grouped],
                         ids=["binary", "potts", "potts-evidence", "head-group"])
@pytest.mark.parametrize("beta", [1.0, 0.6])
def test_cluster_pass_satisfies_detailed_balance(make, beta):
    g = make()
    cg = prepare_clusters(g, np.flatnonzero(g.evidence < 0))
    assert cg.bond_u.size >= 3
    logp = beta * log_joint(g)
    pi = np.exp(logp - np.logaddexp.reduce(logp))
    check_kernel(cluster_kernel(g, cg, beta), pi)


def test_broken_cluster_passes_fail_the_check():
    g = mixed_binary()
    pi = np.exp(log_joint(g))
    cg = prepare_clusters(g, np.arange(g.n_vars))
    check_kernel(cluster_kernel(g, cg), pi)
    # a bond on with probability 1 whenever its relation holds (no 1 − e^(−w))
    with pytest.raises(InferenceError):
        check_kernel(cluster_kernel(g, cg._replace(bond_w=np.full_like(cg.bond_w, 60.0))), pi)
    # a relabelling scored without the field
    no_field = prepare_clusters(mixed_binary(field=False), np.arange(g.n_vars))
    with pytest.raises(InferenceError):
        check_kernel(cluster_kernel(g, no_field), pi)
    # a residual that forgets to take the bond term out (the coupling counted twice)
    _, twice, inv = pair_tables(g.function, g.factor_offsets, g.table_offset, g.factor_vars, g.factor_literals,
                                g.cardinality, cg.tables, cg.fweight, g.group, np.zeros_like(cg.res_w), cg.res_anti)
    with pytest.raises(InferenceError):
        check_kernel(cluster_kernel(g, cg._replace(pair_tab=twice, shift_inv=inv)), pi)


def test_evidence_pins_its_cluster_and_the_pass_keeps_bonds():
    g = potts(True)
    cg = prepare_clusters(g, np.flatnonzero(g.evidence < 0))
    rng = chain_states(1, 1)
    sc = make_scratch(cg)
    on = np.zeros(cg.bond_u.shape[0], dtype=np.uint8)
    values = np.array([2, 2, 2, 2], dtype=np.uint8)
    gs = np.zeros(0)
    for _ in range(300):
        cluster_pass(cg, values, gs, 1.0, rng, on, sc)
        assert values[3] == 2
        for b in np.flatnonzero(on):  # bonded variables agree after the relabelling
            assert values[cg.bond_u[b]] == values[cg.bond_v[b]]


def test_group_sums_stay_in_step():
    g = grouped()
    cg = prepare_clusters(g, np.arange(g.n_vars))
    tables = hard_tables(g)
    rng = chain_states(2, 1)
    sc = make_scratch(cg)
    on = np.zeros(cg.bond_u.shape[0], dtype=np.uint8)
    values = np.zeros(4, dtype=np.uint8)
    gs = np.zeros(g.n_groups)
    group_sums_into(g, tables, values, gs)
    fresh = np.zeros_like(gs)
    for _ in range(200):
        cluster_pass(cg, values, gs, 1.0, rng, on, sc)
        group_sums_into(g, tables, values, fresh)
        assert np.allclose(gs, fresh)


# ---------------------------------------------------------------------------------------------
# statistics: exact marginals where single-site Gibbs sticks


def _within(est, se, exact, slack=0.01):
    err = np.abs(est - exact)
    return bool(np.all(err <= 4 * se + slack)), float(err.max())


def _cluster_only(g, cg, passes: int, chains: int = 4, seed: int = 0):
    """P(x_v = 1) from ``passes`` cluster passes per chain (values counted, no single-site moves),
    with a standard error from the spread of 8 batch means per chain."""
    rngs = chain_states(seed, chains)
    per = []
    for c in range(chains):
        values = (np.zeros if c % 2 == 0 else np.ones)(g.n_vars, dtype=np.uint8)
        sc = make_scratch(cg)
        on = np.zeros(max(cg.bond_u.shape[0], 1), dtype=np.uint8)
        gs = np.zeros(g.n_groups)
        counts = np.zeros((8, g.n_vars))
        for t in range(passes):
            cluster_pass(cg, values, gs, 1.0, rngs[c : c + 1], on, sc)
            counts[t * 8 // passes] += values
        per.append(counts / (passes / 8))
    batches = np.concatenate(per)
    return batches.mean(axis=0), batches.std(axis=0, ddof=1) / np.sqrt(batches.shape[0])


def test_clusters_reach_the_exact_marginals_of_a_strong_grid_where_gibbs_sticks():
    g = ising(4, 2.0, 0.05)  # a flip of the whole grid needs a boundary of weight ≥ 2·2·4
    exact = exact_marginals(g).marginals
    assert 0.7 < exact[0, 1] < 0.95
    r = run_mixing(g, np.arange(g.n_vars), GibbsConfig(steps=20_000, seed=1), MixingConfig(clusters=True))
    ok, err = _within(r.marginals[:, :2], np.nan_to_num(r.stderr[:, :2]), exact)
    assert ok, err
    assert r.converged and r.cluster_bonds == 24
    plain = run_gibbs(g, np.arange(g.n_vars), GibbsConfig(steps=20_000, seed=1))
    _, err_plain = _within(plain.marginals[:, :2], np.nan_to_num(plain.stderr[:, :2]), exact)
    assert err_plain > 0.1 and not plain.converged

    # the cluster pass alone gets there; a relabelling that ignores the field does not
    cg = prepare_clusters(g, np.arange(g.n_vars))
    est, se = _cluster_only(g, cg, 4000)
    ok, err = _within(est, se, exact[:, 1])
    assert ok, err
    blind = prepare_clusters(ising(4, 2.0, 0.0), np.arange(g.n_vars))
    est, se = _cluster_only(g, blind, 4000)
    ok, err = _within(est, se, exact[:, 1])
    assert not ok and err > 0.2


def test_a_bond_probability_without_the_exponential_fails_statistically():
    g = ising(4, 0.35, 0.15)
    exact = exact_marginals(g).marginals[:, 1]
    cg = prepare_clusters(g, np.arange(g.n_vars))
    est, se = _cluster_only(g, cg, 4000, seed=3)
    ok, err = _within(est, se, exact)
    assert ok, err
    est, se = _cluster_only(g, cg._replace(bond_w=np.full_like(cg.bond_w, 60.0)), 4000, seed=3)
    ok, err = _within(est, se, exact)
    assert not ok, err


def test_auto_uses_clusters_on_an_ordered_lattice_when_the_pilot_sticks():
    g = ising(6, 0.7, 0.0)  # ordered phase: every marginal is 1/2, single-site chains keep their sign
    d = dataclasses.replace(choose_moves(g), static=False)  # a lattice this small fits one static block
    assert d.mixing.clusters and "Swendsen–Wang" in d.reason and "ordered regime" in d.reason
    r, why = run_auto(g, np.arange(g.n_vars), GibbsConfig(steps=40_000, seed=2), d)
    assert "did not mix" in why and "Swendsen–Wang cluster moves over 60 bond(s)" in why, why
    ok, err = _within(r.marginals[:, 1], np.nan_to_num(r.stderr[:, 1]), np.full(g.n_vars, 0.5))
    assert ok, err
    # weak couplings: single-site moves; strong couplings on a small graph: still exact blocks
    assert not choose_moves(ising(6, 0.2, 0.1)).mixing.active
    assert choose_moves(ising(6, 3.0, 0.1)).mixing.uses_blocks
    cov = cluster_coverage(ising(6, 0.7, 0.0))
    assert cov.share == 1.0 and cov.bonds == 60 and cov.order > 1.0 and cov.field == 0.0
    # strong fields pin large clusters: single-site moves (fields spread 2·0.5 per variable)
    assert cluster_coverage(ising(6, 0.7, 0.5)).field == pytest.approx(1.0)
    assert not choose_moves(ising(6, 0.7, 0.5)).mixing.clusters


# ---------------------------------------------------------------------------------------------
# inputs


def test_bad_inputs_raise_before_the_kernel():
    g = mixed_binary()
    cg = prepare_clusters(g, np.arange(g.n_vars))
    ok = np.zeros(g.n_vars, dtype=np.uint8)
    rng = chain_states(0, 1)
    check_cluster_inputs(cg, ok, np.zeros(0), rng, 1.0)
    with pytest.raises(InferenceError, match="one entry per variable"):
        check_cluster_inputs(cg, ok[:3], np.zeros(0), rng, 1.0)
    with pytest.raises(InferenceError, match="rng"):
        check_cluster_inputs(cg, ok, np.zeros(0), np.zeros(1, dtype=np.uint64), 1.0)
    with pytest.raises(InferenceError, match="beta"):
        check_cluster_inputs(cg, ok, np.zeros(0), rng, 1.5)
    with pytest.raises(InferenceError, match="domain"):
        check_cluster_inputs(cg, ok + 2, np.zeros(0), rng, 1.0)
    with pytest.raises(OptionError, match="clusters"):
        run_mixing(g, [0], GibbsConfig(steps=100), MixingConfig(clusters="yes"))
    # no bond anywhere: a warning says the pass only relabels single variables
    b = GraphBuilder()
    xs = b.add_variables(3)
    b.add_factor(F.OR, [xs[0], xs[1]], weight=b.add_weight(0.5))
    b.add_factor(F.IMPLY, [xs[1], xs[2]], weight=b.add_weight(0.5))
    r = run_mixing(b.build(), [0, 2], GibbsConfig(steps=2_000, seed=0), MixingConfig(clusters=True))
    assert r.cluster_bonds == 0 and any("no factor can carry a bond" in w for w in r.warnings)


def test_same_seed_same_answer_on_threads():
    g = ising(5, 1.0, 0.1)
    cfg = GibbsConfig(steps=5_000, seed=9, threads=2)
    m = MixingConfig(clusters=True, tempering=2)
    a = run_mixing(g, [0, 7], cfg, m)
    b = run_mixing(g, [0, 7], cfg, m)
    assert np.array_equal(a.marginals, b.marginals)


# ---------------------------------------------------------------------------------------------
# SQL


def test_clusters_option_explain_and_errors_through_sql():
    import pdbq  # noqa: PLC0415

    with pdbq.connect() as d:
        d.execute("""
            CREATE TABLE ids AS SELECT * FROM range(4) r(i);
            CREATE VARIABLE a(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM ids);
            CREATE VARIABLE b(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM ids);
            CREATE RULE wall WEIGHT 12 FUNCTION EQUAL AS a(i) = b(i) :- ids(i);
            CREATE RULE prior WEIGHT 0.6 FUNCTION ISTRUE AS a(i) :- ids(i);
            CREATE RULE link WEIGHT 0.4 FUNCTION EQUAL AS b(i) = a(j) :- ids(i), ids(j), j = i + 1;
        """)
        q = "SELECT v.i, PROB(v), STDERR(v) FROM a v ORDER BY v.i "
        exact = np.array([p for _, p, _ in d.execute(q + "USING EXACT").fetchall()])
        r = d.execute(q + "USING GIBBS WITH (clusters = true, seed = 3, steps = 20000)")
        rows = r.fetchall()
        p, se = np.array([x[1] for x in rows]), np.array([x[2] for x in rows])
        assert np.all(np.abs(p - exact) <= 4 * se + 0.01), (p, exact)
        assert "Swendsen–Wang cluster moves over 7 bond(s)" in r.diagnostics["method_reason"]
        rows = dict(d.execute("EXPLAIN SELECT PROB(v) FROM a v USING GIBBS WITH (clusters = true)").fetchall())
        assert rows["moves"].startswith("Swendsen–Wang cluster moves")
        for bad in ("clusters = 3", "clusters = 'maybe'", "clusters = NULL"):
            with pytest.raises(OptionError, match="clusters"):
                d.execute(f"SELECT PROB(v) FROM a v USING GIBBS WITH ({bad})")
