"""One-to-one linking: cannot-link groups as a hard constraint of the clustering moves, and
`pdbq.link(..., one_to_one=True)` / `--one-to-one` on top of them."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pdbq.coref.layout import CorefInputError, pair_graph
from pdbq.coref.model import Comparison
from pdbq.errors import InferenceError
from pdbq.inference.coreference.posterior import clusters_csr, sample_posterior
from pdbq.inference.coreference.resolve import CorefConfig, group_clash, resolve_map, sample_pairs
from pdbq.linkage.link import link

# three records of source 0, two of source 1; candidate pairs only across sources
GROUP = np.array([0, 0, 0, 1, 1])
A = np.array([0, 0, 1, 1, 2, 2])
B = np.array([3, 4, 3, 4, 3, 4])
W = np.array([2.0, -1.0, 1.5, 0.5, -0.5, 1.0])
CFG = CorefConfig(sweeps=400, burn_in=20, chains=4, seed=3, temperature=1.0, p_split_merge=0.2)


def _partitions(n):
    out = [[0]]
    for _ in range(1, n):
        out = [p + [k] for p in out for k in range(max(p) + 2)]
    return np.array(out)


def _exact(qa, qb, restricted):
    """P(qa[k], qb[k] in one entity) by enumerating the partitions of the five mentions (only
    those without two mentions of one group when `restricted`)."""
    parts = _partitions(GROUP.size)
    if restricted:
        parts = np.array([p for p in parts if group_clash(p, GROUP) is None])
    logp = (parts[:, A] == parts[:, B]) @ W
    p = np.exp(logp - logp.max())
    p /= p.sum()
    return p @ (parts[:, qa] == parts[:, qb])


def _all_pairs():
    iu = np.triu_indices(GROUP.size, 1)
    return iu[0], iu[1]


@pytest.mark.parametrize("restricted", [True, False])
def test_sampler_targets_the_restricted_posterior(restricted):
    """With groups the sampled pair probabilities match the enumeration over clash-free
    partitions (same-source pairs exactly 0); without, they match the unrestricted one and
    same-source pairs are joined (the shared-partner error the constraint forbids)."""
    g = pair_graph(GROUP.size, A, B, W)
    qa, qb = _all_pairs()
    got = sample_pairs(g, qa, qb, CFG, cannot_link=GROUP if restricted else None)
    want = _exact(qa, qb, restricted)
    z = np.abs(got.prob - want) / np.maximum(got.stderr, 0.005)
    assert z.max() < 4.5, (got.prob, want)
    same = GROUP[qa] == GROUP[qb]
    if restricted:
        assert np.all(got.prob[same] == 0.0)
        # the wrong model (unrestricted) is far from the restricted answer: the test can fail
        assert np.abs(_exact(qa, qb, False) - want).max() > 0.1
    else:
        assert got.prob[same].max() > 0.1


def test_map_and_posterior_from_map_never_join_one_group():
    g = pair_graph(GROUP.size, A, B, W)
    free = resolve_map(g, CorefConfig(sweeps=30, seed=1, init="components"))
    assert group_clash(free.labels, GROUP) is not None  # 0-3 and 1-3 both score: joined through 3
    res = resolve_map(g, CorefConfig(sweeps=30, seed=1, init="components"), cannot_link=GROUP)
    assert group_clash(res.labels, GROUP) is None
    assert res.labels[0] == res.labels[3] and res.labels[2] == res.labels[4]  # the best matching
    qa, qb = _all_pairs()
    post = sample_posterior(g, qa, qb, clusters_csr(res.labels), CFG, start=res.labels, cannot_link=GROUP)
    assert np.all(post.pair_prob[GROUP[qa] == GROUP[qb]] == 0.0)
    with pytest.raises(InferenceError, match="cannot-link"):
        sample_posterior(g, qa, qb, clusters_csr(free.labels), CFG, start=free.labels, cannot_link=GROUP)
    with pytest.raises(CorefInputError, match="one group per mention"):
        resolve_map(g, CorefConfig(), cannot_link=GROUP[:3])


LEFT = pa.table({"id": [1, 2, 3], "name": ["John Smith", "Jon Smith", "Mary Jones"]})
RIGHT = pa.table({"rid": [7, 8], "name": ["John Smith", "Mary Jones"]})
JW = [Comparison("name", "jaro_winkler", 8.0)]  # five records: too few to estimate a model from


def _clusters(res):
    c = res.clusters.to_pydict()
    return {(s, i): k for s, i, k in zip(c["source"], c["id"], c["cluster"])}


def test_link_one_to_one_removes_the_shared_partner_error():
    free = _clusters(link(LEFT, RIGHT, id="id", right_id="rid", comparisons=JW, probabilities=True))
    # without the constraint both left Smiths join the right one
    assert free[("left", 1)] == free[("left", 2)] == free[("right", 7)]
    res = link(LEFT, RIGHT, id="id", right_id="rid", comparisons=JW, probabilities=True, one_to_one=True)
    got = _clusters(res)
    assert got[("left", 1)] == got[("right", 7)] != got[("left", 2)]
    assert got[("left", 3)] == got[("right", 8)]
    for side in ("left", "right"):
        ks = [k for (s, _), k in got.items() if s == side]
        assert len(ks) == len(set(ks))  # no cluster holds two records of one source
    assert not any("one_to_one violated" in w for w in res.warnings)
    p = {(a, b): q for a, b, q in zip(*[res.pairs.column(c).to_pylist() for c in ("id_l", "id_r", "match_probability")])}
    assert p[(1, 7)] > p[(2, 7)]


def test_one_to_one_refused_outside_link_only(tmp_path, capsys):
    with pytest.raises(CorefInputError, match="one_to_one needs mode='link_only'"):
        link(LEFT, RIGHT, id="id", right_id="rid", comparisons=JW, mode="link_and_dedupe", one_to_one=True)
    from pdbq.linkage.cli import main as cli_main

    a = tmp_path / "a.csv"
    a.write_text("pid,name\n1,John Smith\n2,Jon Smith\n3,Mary Jones\n")
    b = tmp_path / "b.csv"
    b.write_text("pid,name\n7,John Smith\n8,Mary Jones\n")
    assert cli_main([str(a), "--id", "pid", "--fields", "name", "--one-to-one"]) == 2
    assert "--one-to-one needs --link" in capsys.readouterr().err
    assert cli_main([str(a), "--id", "pid", "--fields", "name", "--link", str(b), "--link-mode", "link_and_dedupe",
                     "--one-to-one"]) == 2
    assert "link_only" in capsys.readouterr().err
    assert cli_main([str(a), "--id", "pid", "--fields", "name", "--link", str(b), "--one-to-one"]) == 0
    rows = [r.split(",") for r in capsys.readouterr().out.splitlines()[1:]]
    for side in ("left", "right"):
        ks = [k for s, _, k in rows if s == side]
        assert len(ks) == len(set(ks))
