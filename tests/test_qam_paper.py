"""The paper's experiment (seed 003, §5) at small size: its qualitative claims, and its checks."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from pdbq.errors import InferenceError
from pdbq.inference.mcmc import transition

_PATH = Path(__file__).resolve().parent.parent / "examples" / "qam_paper.py"
_spec = importlib.util.spec_from_file_location("qam_paper", _PATH)
qam = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("qam_paper", qam)  # dataclasses look their module up there
_spec.loader.exec_module(qam)

METHODS = ("uniform", "query_only", "trail")


@pytest.fixture(scope="module")
def fig1():
    return {f: qam.family_curves(f, 9, 2, 20, METHODS, qam.SEED) for f in qam.FAMILIES}


def test_models_have_the_paper_structure():
    rng = np.random.default_rng(0)
    sizes = {f: len(qam.family_scopes(f, 9)) for f in qam.FAMILIES}
    assert sizes == {"independent": 0, "chain": 8, "hoop": 9, "grid": 12, "fc_pairwise": 36, "fc_single": 1}
    g = qam.build_model("grid", 9, rng)
    assert g.n_vars == 9 and g.n_factors == 12 + 9
    arity = np.diff(g.factor_offsets)
    # one shared template for every non-unary factor; its entries are logs of Beta(2,2) draws
    tabs = np.stack([g.tables[g.table_offset[f] : g.table_offset[f] + 4] for f in np.flatnonzero(arity == 2)])
    assert np.all(tabs == tabs[0]) and np.all(tabs < 0)
    unary = np.stack([g.tables[g.table_offset[f] : g.table_offset[f] + 2] for f in np.flatnonzero(arity == 1)])
    assert len({tuple(u) for u in unary}) == 9 and np.all(unary > np.log(1.0) / 2 - 10)


def test_query_aware_beats_uniform_early_on_every_family(fig1):
    for fam, curves in fig1.items():
        for t in (1, 5, 10):
            assert curves["trail"][t] < curves["uniform"][t], (fam, t)
        # query-only is best at the very start, then stalls at its biased answer
        assert curves["query_only"][1] < curves["uniform"][1], fam
        assert curves["uniform"][0] == pytest.approx(curves["trail"][0])  # same uniform start


def test_query_only_converges_to_the_wrong_answer_where_latents_matter(fig1):
    for fam in ("chain", "hoop", "grid", "fc_pairwise", "fc_single"):
        qo = fig1[fam]["query_only"]
        assert qo[20] == pytest.approx(qo[1], abs=1e-12) and qo[20] > 1e-4  # stuck, biased
    for fam in ("hoop", "grid", "fc_pairwise"):
        assert fig1[fam]["query_only"][20] > 1.2 * fig1[fam]["trail"][20], fam
    assert fig1["independent"]["query_only"][1] == pytest.approx(0.0, abs=1e-12)  # exact there


def _ahead_until(adv):
    behind = np.flatnonzero(adv[1:] <= 0.0)
    return int(behind[0]) + 1 if behind.shape[0] else adv.shape[0]


def test_advantage_over_uniform_grows_with_the_hoop():
    cfg = qam.RunConfig(models=2, hoop_steps=40, hoop_sizes=(3, 8), methods=("uniform", "trail"))
    adv = qam.run_figure2(cfg)
    small, big = adv[3]["trail"], adv[8]["trail"]
    assert big[8] > small[3] > 0  # after one sweep
    assert big.max() > small.max() > 0
    assert _ahead_until(big) > _ahead_until(small)


def test_every_kernel_is_checked_so_a_broken_sampler_fails(monkeypatch):
    g = qam.build_model("chain", 5, np.random.default_rng(1))
    qam.model_curves(g, 3, ("uniform", "trail"))  # the real kernels pass

    def tempered(graph, logp, p):  # Gibbs on the wrong model: rows sum to 1, wrong π
        return transition.gibbs_kernel(graph, 0.7 * logp, p)

    monkeypatch.setattr(qam, "gibbs_kernel", tempered)
    with pytest.raises(InferenceError, match="detailed balance"):
        qam.model_curves(g, 3, ("uniform",))

    def leaky(graph, logp, p):  # loses mass
        k = transition.gibbs_kernel(graph, logp, p)
        return k._replace(vals=k.vals * 0.999)

    monkeypatch.setattr(qam, "gibbs_kernel", leaky)
    with pytest.raises(InferenceError, match="sums to"):
        qam.model_curves(g, 3, ("uniform",))


def test_tables_and_plots(fig1, tmp_path):
    table = qam.figure1_table(fig1, checkpoints=(1, 5, 10))
    assert table.count("\n") == 2 + len(qam.FAMILIES) * len(METHODS) - 1
    assert "| chain | trail |" in table
    fig2 = {3: {"trail": np.linspace(0.1, 0.0, 11)}}
    assert "| 3 | +0.0700 / +0.1000 / 10 |" in qam.figure2_table(fig2)
    pytest.importorskip("matplotlib")
    paths = qam.plot(fig1, fig2, tmp_path)
    assert [p.name for p in paths] == ["qam_fig1.png", "qam_fig2.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)
