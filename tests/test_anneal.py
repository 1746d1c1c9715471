"""Annealed MAP: finds the brute-force MAP score on small graphs; log_score and its checks."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

from pdbq.errors import InferenceError, OptionError
from pdbq.graph.builder import GraphBuilder
from pdbq.inference.mcmc.anneal import anneal_map, log_score
from pdbq.inference.mcmc.config import AnnealConfig
from pdbq.inference.exact.potentials import log_score as reference_log_score
from pdbq.language.nodes import FactorFunction as F
from pdbq.language.nodes import Semantics as S

sys.path.insert(0, str(Path(__file__).parent))
from test_gibbs import FUNCTIONS, SEMANTICS, random_graph  # noqa: E402


def brute_force_map(g):
    free = np.flatnonzero(g.evidence < 0)
    values = np.where(g.evidence >= 0, g.evidence, 0).astype(np.int64)
    best = -np.inf
    for combo in itertools.product(*[range(int(g.cardinality[v])) for v in free]):
        values[free] = combo
        best = max(best, reference_log_score(g, values))
    return best


@pytest.mark.parametrize("semantics", SEMANTICS, ids=["alone", "linear", "logical", "ratio"])
@pytest.mark.parametrize("function", FUNCTIONS, ids=[f.name for f in FUNCTIONS])
def test_anneal_finds_the_exact_map_score(function, semantics):
    seed = 31 * int(function) + SEMANTICS.index(semantics)
    g = random_graph(function, semantics, categorical=bool(seed % 2), evidence=bool(seed % 3 == 0), seed=seed, scale=2.0, n=6)
    r = anneal_map(g, AnnealConfig(steps=3_000, seed=seed, threads=1))
    assert r.log_score == pytest.approx(brute_force_map(g), abs=1e-9)
    assert r.log_score == pytest.approx(reference_log_score(g, r.values), abs=1e-9)
    ev = g.evidence >= 0
    np.testing.assert_array_equal(r.values[ev], g.evidence[ev])


def test_frustrated_model_and_determinism():
    # an antiferromagnetic triangle plus fields: several local optima
    b = GraphBuilder()
    xs = b.add_variables(9)
    rng = np.random.default_rng(0)
    for i, j in itertools.combinations(xs, 2):
        if rng.random() < 0.6:
            b.add_factor(F.EQUAL, [i, j], weight=b.add_weight(float(rng.normal(0, 2))))
    for i in xs:
        b.add_factor(F.ISTRUE, [i], weight=b.add_weight(float(rng.normal(0, 1))))
    g = b.build()
    a = anneal_map(g, AnnealConfig(steps=5_000, seed=2))
    c = anneal_map(g, AnnealConfig(steps=5_000, seed=2, threads=1))
    assert a.log_score == pytest.approx(brute_force_map(g))
    np.testing.assert_array_equal(a.values, c.values)


def test_zero_tables_and_groups():
    b = GraphBuilder()
    x, y = b.add_variables(2)
    z = b.add_variable(3)
    with np.errstate(divide="ignore"):
        b.add_factor(F.TABLE, [x, y, z], table=np.log(np.r_[np.zeros(11), 1.0]))  # only (1,1,2) allowed
    grp = b.add_group(S.RATIO, b.add_weight(-1.0))
    b.add_factor(F.IMPLY, [x, y], group=grp)
    r = anneal_map(b.build(), AnnealConfig(steps=500, seed=0))
    assert r.values.tolist() == [1, 1, 2] and np.isfinite(r.log_score)


def test_log_score_checks_its_input():
    g = random_graph(F.AND, None, categorical=False, evidence=False, seed=1)
    with pytest.raises(InferenceError, match="one value per variable"):
        log_score(g, [0, 1])
    with pytest.raises(InferenceError, match="outside its domain"):
        log_score(g, [2] * g.n_vars)
    x = np.zeros(g.n_vars, dtype=np.int64)
    assert log_score(g, x) == pytest.approx(reference_log_score(g, x))
    with pytest.raises(OptionError, match="cooling"):
        anneal_map(g, AnnealConfig(cooling=1.5))
