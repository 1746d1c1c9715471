"""`pdbq dedupe` answers bad input with `error: ...` and exit status 2 (never a traceback),
checks --out before clustering, and writes proper CSV to stdout."""

from __future__ import annotations

import csv
import io

import pytest

from pdbq.linkage.cli import main


@pytest.fixture
def records(tmp_path):
    p = tmp_path / "r.csv"
    p.write_text('id,name\n"a,1",ann\n"b""2",ann\n"c\nx",bob\nd,bob\n')
    return p


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("content, pattern", [
    (b"\xff\xfe\x00\x01binary\x00", "not a text CSV"),
    (b"id,name\n1,caf\xe9\n2,cafe\n", "not UTF-8"),
    (b"", "is empty"),
])
def test_unreadable_input_is_an_error_not_a_traceback(tmp_path, capsys, content, pattern):
    p = tmp_path / "bad.csv"
    p.write_bytes(content)
    code, _out, err = _run(capsys, p, "--id", "id", "--fields", "name")
    assert code == 2 and err.startswith("error:") and pattern in err and "Traceback" not in err


def test_out_into_a_missing_folder_is_refused_before_clustering(records, tmp_path, capsys, monkeypatch):
    import pdbq.linkage

    monkeypatch.setattr(pdbq.linkage, "dedupe", lambda *a, **k: pytest.fail("clustered before checking --out"))
    code, _out, err = _run(capsys, records, "--id", "id", "--fields", "name", "--out", tmp_path / "nope" / "x.csv")
    assert code == 2 and "does not exist" in err


def test_gold_with_other_columns_and_missing_database(records, tmp_path, capsys):
    gold = tmp_path / "gold.csv"
    gold.write_text("x,y\n1,2\n")
    code, _out, err = _run(capsys, records, "--id", "id", "--fields", "name", "--gold", gold, "--sweeps", "2")
    assert code == 2 and err.startswith("error: --gold") and "Traceback" not in err  # checked before clustering
    code, _out, err = _run(capsys, "people", "--id", "id", "--fields", "name", "--database", tmp_path / "missing.db")
    assert code == 2 and "no such file" in err


def test_stdout_is_proper_csv(records, capsys):
    code, out, _err = _run(capsys, records, "--id", "id", "--fields", "name", "--sweeps", "2")
    assert code == 0
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["id", "cluster"]
    assert sorted(r[0] for r in rows[1:]) == ['a,1', 'b"2', "c\nx", "d"]
