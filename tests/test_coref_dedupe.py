"""The front door end to end (CSV in, table and file out) and its bad-input errors."""

from __future__ import annotations

import csv

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdbq.coref.layout import CorefInputError
from pdbq.coref.model import Blocking, Comparison
from pdbq.linkage import dedupe, evaluate
from pdbq.linkage.cli import main as cli_main

from conftest import PEOPLE as ALL_PEOPLE

PEOPLE = ALL_PEOPLE[:7]  # the first seven of conftest's person records
TRUTH = [1, 1, 1, 4, 4, 6, 7]


@pytest.fixture
def people_csv(tmp_path):
    path = tmp_path / "people.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["pid", "name", "address", "born"])
        w.writerows(PEOPLE)
    return path


def test_csv_in_table_and_file_out(people_csv, tmp_path):
    out = tmp_path / "clusters.parquet"
    res = dedupe(people_csv, id="pid", fields=["name", "address", "born"], output=out)
    got = res.clusters.to_pydict()
    assert got["id"] == [p[0] for p in PEOPLE]
    assert got["cluster"] == TRUTH
    con = duckdb.connect()
    assert con.execute("SELECT cluster FROM read_parquet(?) ORDER BY pid", [str(out)]).fetchnumpy()["cluster"].tolist() == TRUTH
    assert res.diagnostics["factor_evaluations"] > 0 and res.diagnostics["candidate_pairs"] > 0
    b3, pw = evaluate(res.clusters, np.array([p[0] for p in PEOPLE]), np.array(TRUTH))
    assert b3.f1 == 1.0 and pw.f1 == 1.0


def test_cli_writes_csv(people_csv, tmp_path, capsys):
    out = tmp_path / "c.csv"
    gold = tmp_path / "gold.csv"
    gold.write_text("id,entity\n" + "".join(f"{p[0]},{t}\n" for p, t in zip(PEOPLE, TRUTH)))
    assert cli_main([str(people_csv), "--id", "pid", "--fields", "name,address,born", "--out", str(out), "--gold", str(gold)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [int(r["cluster"]) for r in rows] == TRUTH
    assert "B3 P 1.0000" in capsys.readouterr().err


def test_explicit_comparisons_and_blocking_from_a_duckdb_table():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (1, 'acme corp'), (2, 'acme corporation'), (3, 'zenith')) v(k, name)")
    res = dedupe("t", id="k", comparisons=[Comparison("name", "jaro_winkler", 4.0, 0.8)],
                 blocking=["substr(name, 1, 3)"], con=con)
    assert res.clusters.column("cluster").to_pylist() == [1, 1, 3]
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 3  # the input is untouched


def test_bad_input_errors(people_csv, tmp_path):
    with pytest.raises(CorefInputError, match="id column 'id' is not a column.*'pid'"):
        dedupe(people_csv, id="id", fields=["name"])
    with pytest.raises(CorefInputError, match="field 'nam' is not a column.*'name'"):
        dedupe(people_csv, id="pid", fields=["nam"])
    dup = tmp_path / "dup.csv"
    dup.write_text("pid,name\n1,a\n1,b\n")
    with pytest.raises(CorefInputError, match="not unique: 1 appears 2 times"):
        dedupe(dup, id="pid", fields=["name"])
    nul = tmp_path / "nul.csv"
    nul.write_text("pid,name\n1,alpha beta\n,alpha beta\n")
    with pytest.raises(CorefInputError, match="1 NULL value"):
        dedupe(nul, id="pid", fields=["name"])
    nf = tmp_path / "nf.csv"
    nf.write_text("pid,name\n1,alpha beta\n2,\n3,alpha betas\n")
    with pytest.raises(CorefInputError, match="field 'name' has 1 NULL"):
        dedupe(nf, id="pid", fields=["name"], nulls="error")
    res = dedupe(nf, id="pid", fields=["name"])
    assert any("NULL" in w for w in res.warnings)
    with pytest.raises(CorefInputError, match="yields 21 candidate pairs.*max_pairs = 10"):
        dedupe(people_csv, id="pid", fields=["name"], blocking=[Blocking("1")], max_pairs=10)
    with pytest.raises(CorefInputError, match="unknown column 'nme'"):
        dedupe(people_csv, id="pid", fields=["name"], blocking=["lower(nme)"])
    res = dedupe(people_csv, id="pid", fields=["name"])
    with pytest.raises(CorefInputError, match="not among the records"):
        evaluate(res.clusters, np.array([1, 2, 3, 4, 5, 6, 7, 99]), np.arange(8))
    assert cli_main([str(people_csv), "--id", "nope", "--fields", "name"]) == 2


def test_pdbq_entry_point_dispatches_dedupe(people_csv, capsys):
    from pdbq.shell import main as pdbq_main

    assert pdbq_main(["dedupe", str(people_csv), "--id", "pid", "--fields", "name,address,born"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "pid,cluster"
    assert [int(line.split(",")[1]) for line in out[1:]] == TRUTH


def test_printing_a_result_gives_a_summary_not_its_arrays(people_csv):
    res = dedupe(people_csv, id="pid", fields=["name", "address", "born"])
    text = str(res)
    assert repr(res) == text and len(text.splitlines()) <= 6, text
    assert "array(" not in text and "pyarrow" not in text
    first = text.splitlines()[0]
    assert first == (f"DedupeResult: 7 records, {res.diagnostics['candidate_pairs']} candidate pairs, 4 clusters "
                     "(largest 3)")
    assert "pair model: estimated without labels" in text and "blocking:" in text and "warnings: 0" in text


def test_the_written_clusters_name_the_id_column_as_the_records_do(people_csv, tmp_path, capsys):
    out = tmp_path / "c.csv"
    assert cli_main([str(people_csv), "--id", "pid", "--fields", "name,address,born", "--out", str(out)]) == 0
    assert out.read_text().splitlines()[0] == '"pid","cluster"'
    assert cli_main([str(people_csv), "--id", "pid", "--fields", "name,address,born"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "pid,cluster"
    res = dedupe(people_csv, id="pid", fields=["name", "address", "born"], output=tmp_path / "c.parquet")
    assert duckdb.sql(f"SELECT * FROM '{tmp_path / 'c.parquet'}'").columns == ["pid", "cluster"]
    assert res.clusters.column_names == ["id", "cluster"]  # the Python table keeps its documented names


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 10**6), min_size=4, max_size=40), st.sampled_from([1, 2]), st.data())
def test_decimal_numbers_are_compared_as_numbers(cents, places, data):
    """Prices and measures with a fraction are `number` fields (relative difference), never digit
    codes compared by edits, whatever the column type the reader gave them."""
    from pdbq.coref.levels import sniff_fields

    scale = 10 ** places
    cents[0] = cents[0] * scale + 1  # at least one value with a fraction
    values = [f"{c // scale}.{c % scale:0{places}d}" for c in cents]
    typ = data.draw(st.sampled_from(["VARCHAR", "DOUBLE", f"DECIMAL(18,{places})"]))
    con = duckdb.connect()
    con.execute(f"CREATE TABLE r AS SELECT CAST(v AS {typ}) AS price FROM unnest(?) t(v)", [values])
    (fl,) = sniff_fields(con, "r", {"price": typ}, ["price"])
    assert fl.kind == "number", (values, typ, fl)


def test_the_recall_estimate_carries_its_standard_error(tmp_path, capsys):
    """A 4-record file expects one or two matching pairs: its recall estimate is shown with an
    error of ± 0.3 or more (it said 'estimated recall 0.2000' alone); conftest's people, more."""
    four = tmp_path / "four.csv"
    four.write_text("id,name,city\n1,anna smith,york\n2,anna smith,york\n3,bob jones,leeds\n4,carl white,hull\n")
    res = dedupe(four, id="id", fields=["name", "city"])
    assert res.blocking.recall_stderr >= 0.3 and f"± {res.blocking.recall_stderr:.2g}" in str(res)
    assert cli_main([str(four), "--id", "id", "--fields", "name,city"]) == 0
    assert f"estimated recall {res.blocking.recall:.4f} ± {res.blocking.recall_stderr:.2g}" in capsys.readouterr().err
    con = duckdb.connect()
    big = dedupe(con.from_arrow(pa.table({"pid": [p[0] for p in ALL_PEOPLE], "name": [p[1] for p in ALL_PEOPLE],
                                          "address": [p[2] for p in ALL_PEOPLE]})),
                 id="pid", fields=["name", "address"], con=con)
    if big.blocking.expected_matches > 4:
        assert big.blocking.recall_stderr < res.blocking.recall_stderr
