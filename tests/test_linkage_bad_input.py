"""Bad input to the front door against a database holding a stored pair model: each case is a
clear `CorefInputError` or a warning, and the stored models (and the input) are left as they were."""

from __future__ import annotations

import csv

import pytest
from conftest import PEOPLE, PEOPLE_FIELDS

import pdbq
from pdbq.coref.estimate import EmSettings
from pdbq.coref.layout import CorefInputError
from pdbq.linkage import dedupe
from pdbq.linkage.cli import main as cli_main


def _csv(path, header, rows):
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def _stored(db):
    """Everything the catalog holds about pair models, in a comparable form."""
    con = db.duckdb
    return (con.execute("SELECT * FROM pdbq_pair_models ORDER BY ALL").fetchall(),
            con.execute("SELECT * FROM pdbq_pair_model_levels ORDER BY ALL").fetchall())


@pytest.fixture
def db(tmp_path):
    with pdbq.connect(tmp_path / "m.duckdb") as d:
        dedupe(_csv(tmp_path / "people.csv", ["pid", *PEOPLE_FIELDS], PEOPLE), id="pid", fields=PEOPLE_FIELDS, con=d,
               model_name="people")
        d.duckdb.execute("CREATE TABLE people AS SELECT * FROM read_csv(?)", [str(tmp_path / "people.csv")])
        yield d


def test_each_bad_input_is_an_error_and_changes_nothing_stored(db, tmp_path):
    cases = [
        ("all_null", [(p, n, a, None) for p, n, a, _ in PEOPLE], "field 'born' has fewer than two non-NULL values"),
        ("constant", [(p, n, a, "1980") for p, n, a, _ in PEOPLE], "field 'born' holds one value in every record:"),
        ("constant_and_nulls", [(p, n, a, "1980" if p % 2 else None) for p, n, a, _ in PEOPLE],
         r"field 'born' holds one value in every record that has one \(4 are NULL\)"),
        ("one_record", PEOPLE[:1], "1 record"),
        ("duplicate_ids", PEOPLE + [PEOPLE[3]], "id column 'pid' is not unique: 4 appears 2 times"),
    ]
    before = _stored(db)
    for name, rows, message in cases:
        src = _csv(tmp_path / f"{name}.csv", ["pid", *PEOPLE_FIELDS], rows)
        with pytest.raises(CorefInputError, match=message):
            dedupe(src, id="pid", fields=PEOPLE_FIELDS, con=db, model_name="people")
        assert _stored(db) == before, name
    with pytest.raises(CorefInputError, match=r"field 'name' is listed twice in fields=\['name', 'born', 'name'\]"):
        dedupe("people", id="pid", fields=["name", "born", "name"], con=db, model_name="people")
    for labels, message in (
        (_csv(tmp_path / "gold.csv", ["pid", "entity"], [(1, "a"), (2, "a"), (99, "b")]), "not among the records, e.g. 99$"),
        (_csv(tmp_path / "pairs.csv", ["left", "right"], [(1, 2), (4, 77)]), "not among the records, e.g. 77$"),
        (_csv(tmp_path / "twice.csv", ["pid", "entity"], [(1, "a"), (1, "b")]), "lists a record more than once"),
        (_csv(tmp_path / "alone.csv", ["pid", "entity"], [(1, "a"), (2, "b")]), "no matching pair"),
    ):
        with pytest.raises(CorefInputError, match=message):
            dedupe("people", id="pid", fields=PEOPLE_FIELDS, con=db, model_name="people", train=labels)
        assert _stored(db) == before
    assert db.duckdb.execute("SELECT count(*) FROM people").fetchone()[0] == len(PEOPLE)  # the input is untouched


def test_em_that_does_not_converge_is_said_and_keeps_the_stored_weights(db):
    before = _stored(db)
    shown = db.execute("SHOW WEIGHTS").arrow().to_pylist()
    res = dedupe("people", id="pid", fields=PEOPLE_FIELDS, con=db, model_name="people", em=EmSettings(max_iter=1))
    assert any("EM did not converge in 1 iterations" in w for w in res.warnings)
    assert any("pair model 'people' was not stored" in w for w in res.warnings)
    assert "stored_model" not in res.diagnostics
    assert _stored(db) == before and db.execute("SHOW WEIGHTS").arrow().to_pylist() == shown
    again = dedupe("people", id="pid", con=db, model="people")  # the previous version is the one used
    assert again.diagnostics["used_model"] == {"name": "people", "version": 1}


def test_cli_checks_the_gold_file_before_clustering_or_storing(db, tmp_path, capsys):
    path = str(tmp_path / "m.duckdb")
    data = _csv(tmp_path / "in.csv", ["pid", *PEOPLE_FIELDS], PEOPLE)
    gold = _csv(tmp_path / "gold.csv", ["pid", "entity"], [(1, "a"), (99, "b")])
    db.close()
    out = tmp_path / "clusters.csv"
    rc = cli_main([str(data), "--id", "pid", "--fields", ",".join(PEOPLE_FIELDS), "--gold", str(gold), "--database", path,
                   "--model", "people", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "--gold: 1 id(s) are not among the records, e.g. 99" in err
    assert "pair model" not in err and not out.exists()  # nothing was estimated, written or stored
    with pdbq.connect(path) as again:
        assert again.duckdb.execute("SELECT max(version) FROM pdbq_pair_models").fetchone()[0] == 1
