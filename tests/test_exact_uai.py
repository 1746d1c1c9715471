"""EXACT on the UAI 2014 networks with exact answers (../shared/data/uai2014, see its README):
marginals vs .MAR to 1e-6, log Z vs .PR and the manifest (log10), MAP score vs the manifest."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pdbq.inference.exact.elimination import exact_map, exact_marginals
from pdbq.inference.exact.potentials import log_score
from pdbq.io.uai import read_mar, read_pr, read_uai_graph

from conftest import MISSING_DATA, UAI_DATA as DATA  # noqa: E402
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=MISSING_DATA)

FAST = ["Grids_12", "CSP_12", "Promedus_24", "Promedus_26", "Segmentation_11", "Alchemy_11"]
SLOW = ["DBN_11", "ObjectDetection_11"]  # 44M and 92M clique-table entries
NETWORKS = FAST + [pytest.param(n, marks=pytest.mark.slow) for n in SLOW]
LN10 = np.log(10.0)


def _manifest(name: str) -> dict:
    return {e["file"]: e for e in json.loads((DATA / "manifest.json").read_text())}[name + ".uai"]


def _model(name: str):
    return read_uai_graph(DATA / f"{name}.uai", DATA / f"{name}.uai.evid")


@pytest.mark.parametrize("name", NETWORKS)
def test_marginals_and_log_z(name):
    model = _model(name)
    r = exact_marginals(model.graph)
    mar = read_mar(DATA / f"{name}.uai.MAR")
    assert len(mar) == model.n_vars
    err = max(float(np.max(np.abs(r.marginals[v, : p.shape[0]] - p))) for v, p in enumerate(mar))
    assert err < 1e-6
    for v, x in model.evidence.items():
        assert r.marginals[v, x] == 1.0
    man = _manifest(name)
    assert r.log_z / LN10 == pytest.approx(man["log10Z_exact"], abs=2e-6)
    pr = read_pr(DATA / f"{name}.uai.PR")
    assert r.log_z / LN10 == pytest.approx(pr, abs=5e-4, rel=1e-5)  # .PR keeps ~6 digits
    assert r.width <= man["induced_width"] + 2


@pytest.mark.parametrize("name", NETWORKS)
def test_map_score(name):
    model = _model(name)
    m = exact_map(model.graph)
    assert m.log_score / LN10 == pytest.approx(_manifest(name)["map_exact_log10_score"], abs=2e-6)
    assert log_score(model.graph, m.values) == pytest.approx(m.log_score, abs=1e-8)
    for v, x in model.evidence.items():
        assert m.values[v] == x
