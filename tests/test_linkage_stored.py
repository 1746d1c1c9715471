"""Pair models stored in the catalog by the front door: versions, SHOW WEIGHTS, re-use, errors."""

from __future__ import annotations

import csv
import json

import duckdb
import pytest
from conftest import PEOPLE, PEOPLE_FIELDS

import pdbq
from pdbq.coref.layout import CorefInputError
from pdbq.errors import CatalogError, PdbqError
from pdbq.linkage import dedupe
from pdbq.linkage.cli import main as cli_main


@pytest.fixture
def people_csv(tmp_path):
    path = tmp_path / "people.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["pid", *PEOPLE_FIELDS])
        w.writerows(PEOPLE)
    return path


def _stored(db) -> list[tuple]:
    return [(r["rule"], r["version"], r["tie"], r["value"], r["weight"]) for r in db.execute("SHOW WEIGHTS").arrow().to_pylist()]


def test_store_reopen_show_and_reuse(people_csv, tmp_path):
    path = tmp_path / "m.duckdb"
    with pdbq.connect(path) as db:
        fit = dedupe(people_csv, id="pid", fields=PEOPLE_FIELDS, con=db, model_name="People")
    assert fit.diagnostics["stored_model"] == {"name": "people", "version": 1}
    with pdbq.connect(path, read_only=True) as db:
        shown = _stored(db)
        # the prior row, then one row per field and level, in the model's order
        assert [r[0] for r in shown] == ["people"] * (1 + sum(f.levels.n_levels for f in fit.pair_model.fields))
        assert {r[1] for r in shown} == {1}
        assert shown[0][2] is None and shown[0][3] == pytest.approx(fit.pair_model.prior_bits)
        levels = [(json.loads(t)["field"], json.loads(t)["level"], v) for _, _, t, v, _ in shown[1:]]
        want = [(f.field, i, float(w)) for f in fit.pair_model.fields for i, w in enumerate(f.weights())]
        assert [(f, i) for f, i, _ in levels] == [(f, i) for f, i, _ in want]
        assert [v for *_, v in levels] == pytest.approx([w for *_, w in want])
        m0, u0 = fit.pair_model.fields[0].m[0], fit.pair_model.fields[0].u[0]
        assert shown[1][4] == f"= log2({m0:.6g} / {u0:.6g})"
        # re-use from a read-only database: nothing re-estimated, the same clustering
        again = dedupe(people_csv, id="pid", con=db, model="people")
    assert again.diagnostics["used_model"] == {"name": "people", "version": 1}
    assert again.pair_model.prior == fit.pair_model.prior
    assert again.clusters.to_pydict() == fit.clusters.to_pydict()
    assert again.scores.match_weight.tolist() == pytest.approx(fit.scores.match_weight.tolist())


def test_second_fit_is_version_2_and_keeps_version_1(people_csv, tmp_path):
    path = tmp_path / "m.duckdb"
    with pdbq.connect(path) as db:
        one = dedupe(people_csv, id="pid", fields=PEOPLE_FIELDS, con=db, model_name="people")
        two = dedupe(people_csv, id="pid", fields=["name", "born"], con=db, model_name="people")
        assert two.diagnostics["stored_model"]["version"] == 2
        assert {r[1] for r in _stored(db)} == {2}  # SHOW WEIGHTS: the latest version
        assert {json.loads(r[2])["field"] for r in _stored(db)[1:]} == {"name", "born"}
        v1 = dedupe(people_csv, id="pid", con=db, model="people@1")
        assert [f.field for f in v1.pair_model.fields] == PEOPLE_FIELDS
        assert v1.clusters.to_pydict() == one.clusters.to_pydict()
        assert db.duckdb.execute("SELECT version FROM pdbq_pair_models ORDER BY version").fetchall() == [(1,), (2,)]


def test_a_failing_fit_stores_nothing(people_csv, tmp_path):
    path = tmp_path / "m.duckdb"
    with pdbq.connect(path) as db:
        with pytest.raises(CorefInputError, match="field 'nme'"):
            dedupe(people_csv, id="pid", fields=["nme"], con=db, model_name="people")
        assert _stored(db) == []
        dedupe(people_csv, id="pid", fields=PEOPLE_FIELDS, con=db, model_name="people")
        before = db.duckdb.execute("SELECT * FROM pdbq_pair_model_levels ORDER BY ALL").fetchall()
        # fails after the fit (no blocking key keeps the pairs under max_pairs): nothing stored
        with pytest.raises(CorefInputError, match="max_pairs"):
            dedupe(people_csv, id="pid", fields=PEOPLE_FIELDS, con=db, model_name="people", blocking=["1"], max_pairs=3)
        assert db.duckdb.execute("SELECT count(*) FROM pdbq_pair_models").fetchone()[0] == 1
        assert db.duckdb.execute("SELECT * FROM pdbq_pair_model_levels ORDER BY ALL").fetchall() == before


def test_read_only_and_bad_references_are_clear_errors(people_csv, tmp_path):
    path = tmp_path / "m.duckdb"
    with pdbq.connect(path) as db:
        dedupe(people_csv, id="pid", fields=PEOPLE_FIELDS, con=db, model_name="people")
    with pdbq.connect(path, read_only=True) as db:
        # checked before any work: the bad field would only be found when the records load
        with pytest.raises(PdbqError, match="cannot store pair model 'people': the database is open read-only"):
            dedupe(people_csv, id="pid", fields=["nme"], con=db, model_name="people")
        with pytest.raises(CorefInputError, match=r"compares fields \['name', 'address', 'born'\], but fields=\['name'\]"):
            dedupe(people_csv, id="pid", fields=["name"], con=db, model="people")
        with pytest.raises(CatalogError, match="no pair model 'nobody'; stored: people"):
            dedupe(people_csv, id="pid", con=db, model="nobody")
        with pytest.raises(CatalogError, match="has no version 7; stored versions: 1"):
            dedupe(people_csv, id="pid", con=db, model="people@7")
    with pytest.raises(CorefInputError, match="give the database"):
        dedupe(people_csv, id="pid", fields=PEOPLE_FIELDS, model_name="people")
    with pytest.raises(CatalogError, match="stores no pair models"):
        dedupe(people_csv, id="pid", con=duckdb.connect(), model="people")


def test_cli_stores_and_reuses(people_csv, tmp_path, capsys):
    path = tmp_path / "plain.duckdb"
    duckdb.connect(str(path)).close()  # a plain DuckDB file, no pdbq catalog
    out1, out2 = tmp_path / "a.csv", tmp_path / "b.csv"
    base = [str(people_csv), "--id", "pid", "--database", str(path)]
    assert cli_main([*base, "--fields", ",".join(PEOPLE_FIELDS), "--model", "people", "--out", str(out1)]) == 0
    assert "stored pair model 'people' version 1" in capsys.readouterr().err
    assert cli_main([*base, "--use-model", "people@1", "--out", str(out2)]) == 0
    assert "scored with stored pair model 'people' version 1" in capsys.readouterr().err
    assert out1.read_text() == out2.read_text()
    with pdbq.connect(path) as db:
        assert {r[0] for r in _stored(db)} == {"people"}
    assert cli_main([str(people_csv), "--id", "pid", "--fields", "name", "--model", "people"]) == 2
    assert "--model needs --database" in capsys.readouterr().err
    assert cli_main([*base, "--fields", "name", "--use-model", "people"]) == 2
    assert "compares fields" in capsys.readouterr().err


def test_unconverged_em_keeps_the_stored_version(people_csv, tmp_path):
    from pdbq.coref.estimate import EmSettings

    with pdbq.connect(tmp_path / "m.duckdb") as db:
        dedupe(people_csv, id="pid", fields=PEOPLE_FIELDS, con=db, model_name="people")
        before = _stored(db)
        res = dedupe(people_csv, id="pid", fields=PEOPLE_FIELDS, con=db, model_name="people", em=EmSettings(max_iter=1))
        assert "stored_model" not in res.diagnostics
        assert any("pair model 'people' was not stored" in w for w in res.warnings)
        assert _stored(db) == before
