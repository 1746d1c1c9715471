"""Match probabilities from the clustering posterior: calibration on a generative model where
the pair weights are the true log-likelihood ratios (and a miscalibrated scorer must fail),
agreement with exact enumeration, and the front door's tables, explanations and link modes."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from pdbq.coref.layout import CorefInputError, pair_graph
from pdbq.inference.coreference.posterior import clusters_csr, sample_posterior
from pdbq.inference.coreference.resolve import CorefConfig
from pdbq.linkage import dedupe
from pdbq.linkage.calibration import calibrate, pair_outcomes
from pdbq.coref.model import Comparison
from pdbq.linkage.explain import CONSTANT
from pdbq.linkage.link import link

N = 6  # mentions per trial: all 203 partitions are enumerated
TRIALS = 300
BETA = -1.0  # log prior odds per within-entity pair: P(y) ∝ exp(BETA · #within pairs)
# per field: P(level | same entity) and P(level | different entities), levels agree/partial/none
M = np.array([[0.70, 0.20, 0.10], [0.60, 0.25, 0.15], [0.50, 0.30, 0.20]])
U = np.array([[0.05, 0.15, 0.80], [0.10, 0.20, 0.70], [0.20, 0.30, 0.50]])
CFG = CorefConfig(sweeps=100, burn_in=10, chains=4, seed=11, temperature=1.0, p_split_merge=0.2)


def _partitions(n):
    out = [[0]]
    for m in range(1, n):
        out = [p + [k] for p in out for k in range(max(p) + 2)]
    return np.array(out)


PARTS = _partitions(N)
IU = np.triu_indices(N, 1)
SAME = PARTS[:, IU[0]] == PARTS[:, IU[1]]  # partitions × pairs


def _world(seed):
    """Trials of N mentions: a true partition from the prior, each pair's field levels drawn from
    M (same entity) or U (different); weights = BETA + Σ log M/U, the exact log posterior odds
    of a pair that is alone, so the clustering posterior is the true posterior."""
    rng = np.random.default_rng(seed)
    prior = np.exp(BETA * SAME.sum(axis=1))
    truth = PARTS[rng.choice(len(PARTS), size=TRIALS, p=prior / prior.sum())]
    same = truth[:, IU[0]] == truth[:, IU[1]]  # trials × pairs
    llr = np.log(M / U)
    w = np.full(same.shape, BETA)
    for f in range(M.shape[0]):
        u = rng.random(same.shape)
        lvl = np.where(same, (u[..., None] > np.cumsum(M[f])).sum(-1), (u[..., None] > np.cumsum(U[f])).sum(-1))
        w += llr[f][lvl]
    return truth, same, w


def _exact(w):
    """Exact pair posteriors and the MAP partition per trial by enumeration."""
    logp = w @ SAME.T  # trials × partitions
    logp -= logp.max(axis=1, keepdims=True)
    p = np.exp(logp)
    p /= p.sum(axis=1, keepdims=True)
    return p @ SAME, PARTS[np.argmax(p, axis=1)]


def _graph(w):
    base = np.arange(TRIALS)[:, None] * N
    a = (base + IU[0]).reshape(-1)
    b = (base + IU[1]).reshape(-1)
    return pair_graph(TRIALS * N, a, b, w.reshape(-1)), a, b


def _max_z(pred, outcome, trial, bins=5):
    """Largest |z| over probability bins of Σ(outcome − pred), the trial as the independent unit
    (pairs of one trial are dependent through transitivity)."""
    b = np.minimum((pred * bins).astype(int), bins - 1)
    worst = 0.0
    for k in range(bins):
        sel = b == k
        if sel.sum() < 30:
            continue
        d = np.bincount(trial[sel], weights=(outcome[sel] - pred[sel]), minlength=trial.max() + 1)
        worst = max(worst, abs(d.sum()) / np.sqrt((d ** 2).sum()))
    return worst


def _posterior(w):
    g, a, b = _graph(w)
    _, map_part = _exact(w)
    labels = (map_part + np.arange(TRIALS)[:, None] * N).reshape(-1)
    return sample_posterior(g, a, b, clusters_csr(labels), CFG), labels


@pytest.fixture(scope="module")
def world():
    """(true partitions, pair outcomes, true weights, {scale: (posterior, MAP labels)}): the
    posteriors are sampled once for the module (the true weights and the ×3 scorer)."""
    truth, same, w = _world(5)
    return truth, same, w, {s: _posterior(s * w) for s in (1.0, 3.0)}


@pytest.mark.parametrize("scale,calibrated", [(1.0, True), (3.0, False)])
def test_pair_posteriors_calibrated_on_the_generative_model(world, scale, calibrated):
    _, same, _, posts = world
    trial = np.repeat(np.arange(TRIALS), IU[0].size)
    z = _max_z(posts[scale][0].pair_prob, same.reshape(-1).astype(float), trial)
    assert (z < 3.0) if calibrated else (z > 5.0), z


@pytest.mark.parametrize("scale,calibrated", [(1.0, True), (3.0, False)])
def test_cluster_confidence_calibrated(world, scale, calibrated):
    truth, _, _, posts = world
    post, labels = posts[1.0]
    ptr, mem = clusters_csr(labels)
    true_lab = (truth + np.arange(TRIALS)[:, None] * N).reshape(-1)
    size = np.bincount(true_lab, minlength=true_lab.size)
    exact = np.array([np.all(true_lab[mem[ptr[c]:ptr[c + 1]]] == true_lab[mem[ptr[c]]])
                      and size[true_lab[mem[ptr[c]]]] == ptr[c + 1] - ptr[c] for c in range(ptr.size - 1)])
    # the ×3 scorer is asked about the same clusters (the true MAP's)
    post = post if calibrated else sample_posterior(_graph(scale * world[2])[0], np.zeros(0, np.int64),
                                                    np.zeros(0, np.int64), (ptr, mem), CFG)
    z = _max_z(post.cluster_prob, exact.astype(float), mem[ptr[:-1]] // N)
    assert (z < 3.0) if calibrated else (z > 5.0), z


def test_sampled_pair_posteriors_match_enumeration(world):
    _, _, w, posts = world
    exact = _exact(w)[0].reshape(-1)
    assert np.mean(np.abs(posts[1.0][0].pair_prob - exact)) < 0.015
    # a posterior of other weights is not this model's: the same check fails
    assert np.mean(np.abs(posts[3.0][0].pair_prob - exact)) > 0.025


def test_calibrate_table_and_ece():
    pairs = pa.table({"id_l": [1, 1, 2, 4], "id_r": [2, 3, 3, 5], "match_probability": [0.95, 0.15, 0.15, 0.55]})
    cal = calibrate(pairs, gold_ids=[1, 2, 3, 4, 5], gold_entity=[7, 7, 8, 9, 9])
    t = cal.table.to_pydict()
    assert t["pairs"][1] == 2 and t["matches"][1] == 0 and t["observed_rate"][1] == 0.0
    assert cal.ece == pytest.approx((2 * 0.15 + 1 * 0.45 + 1 * 0.05) / 4)
    with pytest.raises(CorefInputError, match="no gold entity"):
        calibrate(pairs, gold_ids=[1, 2, 3], gold_entity=[1, 1, 2])
    with pytest.raises(CorefInputError, match="no column 'p'"):
        calibrate(pairs, [1], [1], probability="p")
    assert pair_outcomes([1, 1], [2, 3], [1, 2, 3], [0, 0, 1]).tolist() == [True, False]


PEOPLE = pa.table({
    "pid": [1, 2, 3, 4, 5, 6],
    "name": ["John Smith", "Jon Smith", "John Smyth", "Mary Jones", "Mary Jones", "Peter Brown"],
    "city": ["Leeds", "Leeds", "Leeds", "York", "York", "Hull"],
})


def test_dedupe_probabilities_and_explanations(tmp_path):
    con = duckdb.connect()
    res = dedupe(con.from_arrow(PEOPLE), id="pid", fields=["name", "city"], probabilities=True, con=con)
    pairs = res.pairs.to_pydict()
    assert set(res.pairs.column_names) == {"id_l", "id_r", "match_probability", "se"}
    assert len(pairs["id_l"]) == res.diagnostics["candidate_pairs"]
    assert all(0.0 <= p <= 1.0 for p in pairs["match_probability"])
    conf = res.cluster_confidence.to_pydict()
    assert conf["probability"] == sorted(conf["probability"])  # least certain first
    assert sum(conf["size"]) == 6 and set(conf["cluster"]) == set(res.clusters.column("cluster").to_pylist())
    ex = res.explain()
    assert ex.schema.metadata[b"unit"] == b"bits"
    got = ex.group_by(["id_l", "id_r"]).aggregate([("contribution", "sum")]).to_pydict()
    assert sorted(got["contribution_sum"]) == pytest.approx(sorted(res.scores.match_weight))
    names = [f.field for f in res.pair_model.fields]
    lin = dedupe(con.from_arrow(PEOPLE), id="pid", comparisons=[Comparison("name", "jaro_winkler")], con=con)
    lx = lin.explain().group_by(["id_l", "id_r"]).aggregate([("contribution", "sum")]).to_pydict()
    assert sorted(lx["contribution_sum"]) == pytest.approx(sorted(lin.model.scores(lin.features.x)))
    # a candidate pair, given in the other order (which pairs blocking keeps out of six records
    # depends on the fitted model)
    a0, b0 = int(res.ids[res.scores.a[0]]), int(res.ids[res.scores.b[0]])
    one = res.explain(id_l=[b0], id_r=[a0])
    assert one.num_rows == len(names) + 1 and one.column("term").to_pylist()[-1] == CONSTANT
    with pytest.raises(CorefInputError, match="not a candidate pair"):
        res.explain(id_l=[1], id_r=[6])
    pytest.importorskip("matplotlib")
    from pdbq.linkage.explain import waterfall

    waterfall(one, tmp_path / "w.png", probability=0.5)
    assert (tmp_path / "w.png").stat().st_size > 1000
    with pytest.raises(CorefInputError, match="one pair"):
        waterfall(lin.explain(), tmp_path / "x.png")  # several pairs


def test_link_only_never_pairs_within_a_source():
    left = pa.table({"id": [1, 2, 3], "name": ["John Smith", "Jon Smith", "Mary Jones"]})
    right = pa.table({"rid": [1, 2], "name": ["John Smith", "Mary Jones"]})
    jw = [Comparison("name", "jaro_winkler")]  # five records: too few to estimate a model from
    res = link(left, right, id="id", right_id="rid", comparisons=jw, probabilities=True)
    assert res.pairs.column_names == ["id_l", "id_r", "match_probability", "se"]
    assert res.diagnostics["candidate_pairs"] == res.pairs.num_rows == 3  # (1,1) (2,1) (3,2); never (1,2)
    c = res.clusters.to_pydict()
    assert c["source"] == ["left"] * 3 + ["right"] * 2
    both = link(left, right, id="id", right_id="rid", comparisons=jw, probabilities=True, mode="link_and_dedupe")
    assert both.pairs.num_rows == 4 and "source_l" in both.pairs.column_names
    with pytest.raises(CorefInputError, match="mode must be"):
        link(left, right, id="id", fields=["name"], mode="dedupe")
    dup = pa.table({"id": [1, 1], "name": ["a", "b"]})
    with pytest.raises(CorefInputError, match="right source is not unique"):
        link(left, dup, id="id", fields=["name"])


def test_cli_pairs_confidence_explain_link_and_calibration(tmp_path, capsys):
    from pdbq.linkage.cli import main as cli_main

    a = tmp_path / "a.csv"
    a.write_text("pid,name,city\n1,John Smith,Leeds\n2,Jon Smith,Leeds\n3,Mary Jones,York\n4,Mary Jones,York\n")
    b = tmp_path / "b.csv"
    b.write_text("pid,name,city\n1,John Smith,Leeds\n9,Mary Jones,York\n")
    gold = tmp_path / "gold.csv"
    gold.write_text("id,entity\n1,1\n2,1\n3,3\n4,3\n")
    out = {k: tmp_path / f"{k}.csv" for k in ("pairs", "conf", "expl")}
    assert cli_main([str(a), "--id", "pid", "--fields", "name,city", "--pairs", str(out["pairs"]),
                     "--cluster-confidence", str(out["conf"]), "--explain", str(out["expl"])]) == 0
    assert out["pairs"].read_text().splitlines()[0] == '"id_l","id_r","match_probability","se"'
    assert out["conf"].read_text().splitlines()[0] == '"cluster","size","probability","se"'
    assert '"term"' in out["expl"].read_text().splitlines()[0]
    capsys.readouterr()
    assert cli_main([str(a), "--id", "pid", "--fields", "name,city", "--link", str(b)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "source,pid,cluster" and len(lines) == 7  # the sources' own id column name
    linked = tmp_path / "linked.csv"
    assert cli_main([str(a), "--id", "pid", "--fields", "name,city", "--link", str(b), "--out", str(linked)]) == 0
    assert linked.read_text().splitlines()[0].replace('"', "") == "source,pid,cluster"
    c = tmp_path / "c.csv"
    c.write_text("ref,name,city\n1,John Smith,Leeds\n9,Mary Jones,York\n")
    assert cli_main([str(a), "--id", "pid", "--link-id", "ref", "--fields", "name,city", "--link", str(c),
                     "--out", str(linked)]) == 0  # two names for one column: a neutral one
    assert linked.read_text().splitlines()[0].replace('"', "") == "source,id,cluster"
    assert cli_main([str(a), "--id", "pid", "--fields", "name", "--gold", str(gold), "--calibration", "x.png"]) == 2
    assert "--calibration needs --gold" in capsys.readouterr().err
    pytest.importorskip("matplotlib")
    png = tmp_path / "cal.png"
    assert cli_main([str(a), "--id", "pid", "--fields", "name,city", "--gold", str(gold), "--pairs",
                     str(out["pairs"]), "--calibration", str(png)]) == 0
    assert "ECE" in capsys.readouterr().err and png.stat().st_size > 1000


def test_sampler_budget_one_chain_and_bad_input_are_said():
    from pdbq.errors import InferenceError

    g = pair_graph(3, np.array([0, 1]), np.array([1, 2]), np.array([1.0, -1.0]))
    cl = clusters_csr(np.array([0, 0, 2]))
    one = sample_posterior(g, np.array([0]), np.array([1]), cl, CorefConfig(sweeps=50, burn_in=1, chains=1))
    assert np.isnan(one.pair_stderr[0]) and any("one chain" in w for w in one.warnings)
    cut = sample_posterior(g, np.array([0]), np.array([1]), cl,
                           CorefConfig(sweeps=10**6, burn_in=0, chains=3, time_limit=0.05))
    assert any("time_limit" in w for w in cut.warnings) and cut.samples < 3 * 10**6
    with pytest.raises(InferenceError, match="mention indices"):
        sample_posterior(g, np.array([0]), np.array([3]), cl, CorefConfig())
    with pytest.raises(InferenceError, match="CSR"):
        sample_posterior(g, np.array([0]), np.array([1]), (np.array([0, 2]), np.array([0, 1, 2])), CorefConfig())
    with pytest.raises(CorefInputError, match="probabilities must be"):
        dedupe("x.csv", id="id", fields=["a"], probabilities="yes")


def test_charts_name_the_missing_extra(monkeypatch):
    import sys

    from pdbq.errors import PdbqError
    from pdbq.linkage.explain import waterfall

    one = pa.table({"id_l": [1, 1], "id_r": [2, 2], "term": ["name", CONSTANT], "level": ["exact", None],
                    "contribution": [3.0, -1.0], "match_weight": [2.0, 2.0]})
    cal = calibrate(pa.table({"id_l": [1], "id_r": [2], "match_probability": [0.9]}), [1, 2], [5, 5])
    # every matplotlib module, or one imported by an earlier test would still be found
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")] + ["matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(PdbqError, match=r"pdbq\[plot\]"):
        waterfall(one)
    with pytest.raises(PdbqError, match=r"pdbq\[plot\]"):
        cal.plot()


def _people(n, seed):
    """Two sources of synthetic person records: every person in the left one, 80% of them again
    in the right one with a typo in one field; ids overlap across the sources on purpose."""
    rng = np.random.default_rng(seed)
    first = np.array(["anna", "bruno", "carla", "dieter", "elena", "felix", "greta", "hugo", "ines", "jonas",
                      "katja", "lukas", "maria", "nils", "olga", "paul"])
    last = np.array([f"{a}{b}" for a in ("schm", "kra", "wein", "berg", "holz", "lind", "stein", "hof")
                     for b in ("idt", "mer", "ert", "ler", "ner", "auer")])
    city = np.array(["berlin", "bonn", "essen", "kiel", "mainz", "ulm", "trier", "jena"])
    f, l, c = rng.choice(first, n), rng.choice(last, n), rng.choice(city, n)
    born = np.array([f"19{y:02d}{m:02d}{d:02d}" for y, m, d in zip(rng.integers(30, 99, n), rng.integers(1, 13, n),
                                                                       rng.integers(1, 29, n))])
    left = pa.table({"id": np.arange(n), "first": f, "last": l, "born": born, "city": c})
    keep = np.flatnonzero(rng.random(n) < 0.8)

    def typo(s):
        i = int(rng.integers(len(s)))
        return s[:i] + "x" + s[i + 1:]

    cols = {"first": f[keep].copy(), "last": l[keep].copy(), "born": born[keep].copy(), "city": c[keep].copy()}
    which = rng.integers(0, 4, keep.size)
    for k, name in enumerate(cols):
        cols[name] = np.array([typo(v) if w == k else v for v, w in zip(cols[name], which)])
    right = pa.table({"id": np.arange(keep.size) + n // 2, **cols})
    return left, right, keep


def test_link_only_with_the_estimated_model():
    left, right, keep = _people(400, 3)
    res = link(left, right, id="id", fields=["first", "last", "born", "city"], probabilities=True)
    c = res.clusters.to_pydict()
    key = {(s, i): k for s, i, k in zip(c["source"], c["id"], c["cluster"])}
    # a person's two records share a cluster; records of different persons do not
    truth_pairs = {(int(p), int(r)) for p, r in zip(keep, right.column("id").to_numpy())}
    found = {(i, j) for (s, i), k in key.items() if s == "left" for (t, j), m in key.items() if t == "right" and m == k}
    tp = len(found & truth_pairs)
    assert tp / len(truth_pairs) > 0.9 and tp / max(len(found), 1) > 0.9, (tp, len(found), len(truth_pairs))
    # every compared pair crosses the sources: id_l a left id, id_r a right id, as the pairs table says
    assert res.pairs.num_rows == res.diagnostics["candidate_pairs"]
    p = res.pairs.to_pydict()
    right_ids = set(right.column("id").to_pylist())
    assert all(j in right_ids for j in p["id_r"]) and all(0 <= i < 400 for i in p["id_l"])
    ex = res.explain(id_l=[f"left:{p['id_l'][0]}"], id_r=[f"right:{p['id_r'][0]}"])
    assert ex.num_rows == 5 and ex.schema.metadata[b"unit"] == b"bits"
    every = res.explain()  # ids repeat across the sources, so they are written source:id
    assert set(s.split(":")[0] for s in every.column("id_l").to_pylist()) == {"left"}
    assert set(s.split(":")[0] for s in every.column("id_r").to_pylist()) == {"right"}
    both = link(left, right, id="id", fields=["first", "last", "born", "city"], mode="link_and_dedupe")
    assert both.diagnostics["candidate_pairs"] > res.diagnostics["candidate_pairs"]


def test_front_door_sampler_is_calibrated_and_matches_enumeration(world):
    """The front door's sampler (`sample_mention_moves`) on the same generative world: calibrated
    at the true weights, not at 3× them, and within its own standard errors of enumeration."""
    from pdbq.inference.coreference.posterior import sample_mention_moves

    _, same, w, _ = world
    trial = np.repeat(np.arange(TRIALS), IU[0].size)
    exact = _exact(w)[0].reshape(-1)
    for scale, calibrated in ((1.0, True), (3.0, False)):
        g, a, b = _graph(scale * w)
        _, map_part = _exact(scale * w)
        labels = (map_part + np.arange(TRIALS)[:, None] * N).reshape(-1)
        post = sample_mention_moves(g, a, b, clusters_csr(labels), CFG, start=labels)
        z = _max_z(post.pair_prob, same.reshape(-1).astype(float), trial)
        assert (z < 3.0) if calibrated else (z > 5.0), (scale, z)
        if calibrated:
            assert np.mean(np.abs(post.pair_prob - exact)) < 0.015
            assert np.mean(np.abs(post.pair_prob - exact) <= 3 * post.pair_stderr + 1e-12) > 0.95


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(50, 2000))
def test_overconfidence_warning_fires_on_01_answers_and_not_on_the_pair_model(seed, n):
    """A posterior written as 0/1 (the MAP, say) over pairs the pair model is unsure about is
    warned of as soon as the pair model expects a confident error; the pair model's own
    probabilities, or a posterior that follows them, never are."""
    from pdbq.linkage.posterior import overconfidence_warning

    rng = np.random.default_rng(seed)
    pm = rng.uniform(0.0, 1.0, n)
    assert overconfidence_warning(pm, pm) is None
    assert overconfidence_warning(np.clip(pm + rng.normal(0, 0.01, n), 0, 1), pm) is None
    as01 = (pm > 0.5).astype(float)
    mid = (pm > 0.05) & (pm < 0.95)
    expected = pm[mid & (as01 == 0)].sum() + (1 - pm[mid & (as01 == 1)]).sum()
    note = overconfidence_warning(as01, pm)
    if max(pm[mid & (as01 == 0)].sum(), (1 - pm[mid & (as01 == 1)]).sum()) >= 1.0:
        assert note is not None and "pair model" in note, (seed, expected)
    else:
        assert note is None, seed
