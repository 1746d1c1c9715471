"""Gibbs on the UAI 2014 networks with exact answers (../shared/data/uai2014, see its README).

Mixing instances must come within the issue's error bounds of the .MAR marginals; on Grids_12
and DBN_11 plain single-site Gibbs stays in one mode per chain, which the diagnostics must flag.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdbq.inference.mcmc.config import GibbsConfig
from pdbq.inference.mcmc.gibbs import run_gibbs

from conftest import MISSING_DATA, UAI_DATA as DATA  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not DATA.is_dir(), reason=MISSING_DATA),
]


def _load(name):
    uai = pytest.importorskip("pdbq.io.uai", reason="pdbq.io.uai (UAI reader) not available")
    model = uai.read_uai_graph(DATA / f"{name}.uai", DATA / f"{name}.uai.evid")
    return model.graph, uai.read_mar(DATA / f"{name}.uai.MAR")


def _errors(g, result, mar):
    return np.array([np.abs(result.marginals[v, : len(mar[v])] - mar[v]).max() for v in range(g.n_vars)])


@pytest.mark.parametrize(
    "name,sweeps,bound",
    [
        ("CSP_12", 10_000, 0.01),
        ("ObjectDetection_11", 10_000, 0.01),
        ("Alchemy_11", 3_000, 0.01),
        # Segmentation_11 switches modes rarely: at this length the error is variance-limited
        # (~1–2 stderr); the seed is fixed, and every variable must also be within 4 stderr.
        ("Segmentation_11", 100_000, 0.02),
    ],
)
def test_mixing_instances_match_the_exact_marginals(name, sweeps, bound):
    g, mar = _load(name)
    r = run_gibbs(g, np.arange(g.n_vars), GibbsConfig(steps=sweeps * g.n_vars, seed=0))
    err = _errors(g, r, mar)
    assert err.max() <= bound, (name, err.max(), int(err.argmax()))
    k = np.array([len(m) for m in mar])
    se = np.array([r.stderr[v, : k[v]].max() for v in range(g.n_vars)])
    assert np.all(err <= 4 * se + 0.003)


@pytest.mark.parametrize("name", ["Grids_12", "DBN_11"])
def test_stuck_instances_are_flagged(name):
    g, mar = _load(name)
    r = run_gibbs(g, np.arange(g.n_vars), GibbsConfig(steps=2_000 * g.n_vars, seed=0))
    assert _errors(g, r, mar).max() > 0.1  # plain Gibbs really is wrong here ...
    assert np.nanmax(r.rhat) > 1.1  # ... and says so
    assert not r.converged
    assert any("not converged" in w for w in r.warnings)


@pytest.mark.parametrize("name", ["CSP_12", "ObjectDetection_11"])
def test_unwarned_intervals_cover_per_value(name):
    # issue 12, item 4: 95% intervals (1.96 stderr, per value) of unwarned runs cover the exact
    # marginals (to the .MAR files' 5e-7). Values of one run are correlated, so the pooled
    # coverage of 4 fixed seeds scatters by a few percent around its mean (≥ 93% over more seeds,
    # examples/bench/interval_coverage.py); 0.9 fails a stderr 25% too small (88% here; 94.7% and 95.5% with the real one).
    g, mar = _load(name)
    free = np.flatnonzero(g.evidence < 0)
    hit = total = 0
    for seed in range(4):
        r = run_gibbs(g, free, GibbsConfig(steps=1000 * free.size, seed=seed))
        assert not r.warnings, r.warnings
        for i, v in enumerate(free):
            k = len(mar[v])
            hit += int((np.abs(r.marginals[i, :k] - mar[v]) <= 1.96 * r.stderr[i, :k] + 5e-7).sum())
            total += k
    assert hit / total >= 0.9, hit / total
