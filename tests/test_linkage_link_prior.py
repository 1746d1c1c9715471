"""link_only re-estimates the match prior over the cross-source pairs, and stored pair models work
with links (pdbq.link(model_name=/model=), pdbq dedupe --link --model/--use-model)."""

from __future__ import annotations

import csv

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import pdbq
from pdbq.coref.layout import CorefInputError
from pdbq.linkage.cli import main as cli_main
from pdbq.linkage.link import link

FIELDS = ["first", "last", "city", "born"]
N_LEFT, N_MATCHED, N_OTHER = 300, 200, 100


def _typo(s: str, rng) -> str:
    i = int(rng.integers(1, len(s)))
    return s[:i] + "xq"[int(rng.integers(2))] + s[i + 1:]


def _people(rng, n, start):
    first = [f"fn{k:02d}a" for k in range(40)]
    last = [f"surname{k:03d}" for k in range(80)]
    return [{"id": start + i, "first": first[int(rng.integers(40))], "last": last[int(rng.integers(80))],
             "city": f"city{int(rng.integers(30))}",
             "born": f"{int(rng.integers(1940, 2000))}{int(rng.integers(1, 13)):02d}{int(rng.integers(1, 29)):02d}"}
            for i in range(n)]


@pytest.fixture(scope="module")
def sources():
    """Two sources without duplicates: the right one holds N_MATCHED of the left's people (a typo
    in one field) and N_OTHER others."""
    rng = np.random.default_rng(5)
    left = _people(rng, N_LEFT, 0)
    right = []
    for k, p in enumerate(left[:N_MATCHED]):
        q = dict(p, id=1000 + k)
        f = FIELDS[int(rng.integers(3))]
        q[f] = _typo(q[f], rng)
        right.append(q)
    right += _people(rng, N_OTHER, 2000)
    table = lambda rows: pa.Table.from_pylist(rows)  # noqa: E731
    return table(left), table(right)


def test_link_only_prior_counts_cross_source_matches(sources):
    left, right = sources
    # one_to_one=False: the prior over independent cross-source pairs (a one-to-one link, detected
    # by default here, moves the scores to the matching prior instead: test_linkage_products.py)
    res = link(left, right, id="id", fields=FIELDS, mode="link_only", one_to_one=False)
    pm = res.pair_model
    n = N_LEFT + N_MATCHED + N_OTHER
    # both priors estimate the same number of matching pairs, over their own population of pairs
    cross = pm.prior * N_LEFT * (N_MATCHED + N_OTHER)
    everything = pm.diagnostics["prior_all_pairs"] * n * (n - 1) / 2
    assert 0.75 * N_MATCHED < cross < 1.3 * N_MATCHED, cross
    assert 0.75 * N_MATCHED < everything < 1.3 * N_MATCHED, everything
    assert pm.prior > 1.8 * pm.diagnostics["prior_all_pairs"]  # the dedupe-style prior is about half
    # the scores carry the cross-source prior
    assert res.scores.prior_bits == pytest.approx(pm.prior_bits)
    c = res.clusters.to_pydict()
    cluster = {(s, i): k for s, i, k in zip(c["source"], c["id"], c["cluster"])}
    found = sum(cluster[("left", k)] == cluster[("right", 1000 + k)] for k in range(N_MATCHED))
    assert found >= 0.95 * N_MATCHED


def test_link_stores_and_reuses_models(sources, tmp_path):
    left, right = sources
    path = tmp_path / "m.duckdb"
    with pdbq.connect(path) as db:
        fit = link(left, right, id="id", fields=FIELDS, con=db, model_name="people")
        assert fit.diagnostics["stored_model"] == {"name": "people", "version": 1}
        again = link(left, right, id="id", con=db, model="people")  # the stored model's fields
        assert again.diagnostics["used_model"] == {"name": "people", "version": 1}
        assert again.pair_model.prior == pytest.approx(fit.pair_model.prior)  # scored as stored
        assert again.clusters.to_pydict() == fit.clusters.to_pydict()
    with pytest.raises(CorefInputError, match=r"model_name='people' names a stored pair model: give the database"):
        link(left, right, id="id", fields=FIELDS, model_name="people")
    with pytest.raises(CorefInputError, match=r"model='people' names a stored pair model"):
        link(left, right, id="id", model="people")


def test_cli_link_with_models(sources, tmp_path, capsys):
    left, right = sources
    db_path = tmp_path / "people.duckdb"
    with duckdb.connect(str(db_path)) as con:
        con.register("l", left)
        con.register("r", right)
        con.execute("CREATE TABLE lefts AS SELECT * FROM l")
        con.execute("CREATE TABLE rights AS SELECT * FROM r")
    out = tmp_path / "clusters.csv"
    rc = cli_main(["lefts", "--link", "rights", "--id", "id", "--fields", ",".join(FIELDS), "--database", str(db_path),
                   "--model", "people", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "stored pair model 'people' version 1" in err and "P(a record of one source and one of the other match)" in err
    rc = cli_main(["lefts", "--link", "rights", "--id", "id", "--database", str(db_path), "--use-model", "people@1",
                   "--out", str(tmp_path / "again.csv")])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "scored with stored pair model 'people' version 1" in err
    with out.open() as fh, (tmp_path / "again.csv").open() as gh:
        assert list(csv.reader(fh)) == list(csv.reader(gh))
