"""Exact marginals of chosen variables only (`exact_marginals(..., variables=)`: the upward pass
plus the clique-tree paths to them): the same numbers as a full calibration, on random graphs
with evidence and isolated variables and on the UAI 2014 networks against their .MAR files."""

from __future__ import annotations

import numpy as np
import pytest

from exact_graphs import random_graph
from pdbq.inference.exact.elimination import _sum_keep, _sum_to, exact_marginals
from pdbq.io.uai import read_mar, read_uai_graph
from pdbq.language.nodes import FactorFunction as F
from pdbq.language.nodes import Semantics as S

from conftest import MISSING_DATA, UAI_DATA as DATA  # noqa: E402


@pytest.mark.parametrize("seed", range(6))
def test_chosen_variables_equal_the_full_calibration(seed):
    rng = np.random.default_rng(seed)
    g = random_graph(rng, [F.EQUAL, F.IMPLY, F.TABLE][seed % 3], S.LINEAR, categorical=seed % 2 == 1, evidence=True)
    full = exact_marginals(g)
    for v in range(g.n_vars):  # free, observed and isolated variables alike
        part = exact_marginals(g, variables=[v])
        assert part.marginals[v] == pytest.approx(full.marginals[v], abs=1e-12)
        assert part.log_z == pytest.approx(full.log_z, abs=1e-12)
        others = np.delete(np.arange(g.n_vars), v)
        assert not np.any(part.marginals[others])  # only the asked rows are filled
    both = exact_marginals(g, variables=[0, g.n_vars - 1])
    assert both.marginals[[0, g.n_vars - 1]] == pytest.approx(full.marginals[[0, g.n_vars - 1]], abs=1e-12)


def test_einsum_reduction_equals_the_numpy_one():
    rng = np.random.default_rng(3)
    e = rng.random((2, 3, 2, 4, 2, 5))
    for mask in ([1, 0, 0, 0, 0, 0], [1, 0, 1, 0, 0, 1], [1, 1, 1, 1, 1, 0], [0, 1, 0, 1, 0, 1]):
        keep = np.asarray(mask, dtype=bool)
        assert _sum_to(e, keep) == pytest.approx(_sum_keep(e, keep), rel=1e-13)


@pytest.mark.skipif(not DATA.is_dir(), reason=MISSING_DATA)
@pytest.mark.parametrize("name", ["Grids_12", "Promedus_24", "Alchemy_11"])
def test_one_variable_of_a_uai_network_matches_the_mar_file(name):
    model = read_uai_graph(DATA / f"{name}.uai", DATA / f"{name}.uai.evid")
    mar = read_mar(DATA / f"{name}.uai.MAR")
    free = np.flatnonzero(model.graph.evidence < 0)
    for v in (int(free[0]), int(free[free.size // 2]), int(free[-1])):
        r = exact_marginals(model.graph, variables=[v])
        assert np.max(np.abs(r.marginals[v, : mar[v].shape[0]] - mar[v])) < 5e-7
