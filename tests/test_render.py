"""Result renderings: golden strings for the boxed table and the csv/json/markdown modes."""

from __future__ import annotations

import datetime
import decimal
import json

import duckdb
import pyarrow as pa
import pytest

from pdbq.answers.render import (
    arrow_type_name,
    format_value,
    frame_from_arrow,
    render,
    render_csv,
    render_json,
    render_markdown,
    render_result,
    render_table,
)


@pytest.fixture()
def mixed() -> pa.Table:
    return pa.table(
        {
            "id": pa.array([1, 22, None], pa.int32()),
            "name": ["Up", None, "日本"],
            "p": [0.5, 1.0, None],
            "ok": [True, False, None],
        }
    )


def test_table_header_types_alignment_and_null(mixed: pa.Table) -> None:
    assert render_table(mixed) == (
        "┌───────┬─────────┬────────┬─────────┐\n"
        "│  id   │  name   │   p    │   ok    │\n"
        "│ int32 │ varchar │ double │ boolean │\n"
        "├───────┼─────────┼────────┼─────────┤\n"
        "│     1 │ Up      │    0.5 │ true    │\n"
        "│    22 │ NULL    │    1.0 │ false   │\n"
        "│  NULL │ 日本    │   NULL │ NULL    │\n"
        "└───────┴─────────┴────────┴─────────┘\n"
        "3 rows"
    )


def test_long_result_elided_in_the_middle() -> None:
    table = pa.table({"i": list(range(10))})
    assert render_table(table, max_rows=4) == (
        "┌───────┐\n"
        "│   i   │\n"
        "│ int64 │\n"
        "├───────┤\n"
        "│     0 │\n"
        "│     1 │\n"
        "│     · │\n"
        "│     · │\n"
        "│     · │\n"
        "│     8 │\n"
        "│     9 │\n"
        "└───────┘\n"
        "10 rows (4 shown)"
    )
    # Without a limit every row is printed.
    assert render_table(table, max_rows=None).count("\n") == 4 + 10 + 1


def test_elision_fetches_only_head_and_tail() -> None:
    frame = frame_from_arrow(pa.table({"i": list(range(1000))}), max_rows=40)
    assert frame.total_rows == 1000 and len(frame.rows) == 40 and frame.head == 20
    assert frame.rows[19] == (19,) and frame.rows[20] == (980,)


def test_empty_result_and_single_row_wording() -> None:
    assert render_table(pa.table({"i": pa.array([], pa.int64())})) == (
        "┌───────┐\n│   i   │\n│ int64 │\n├───────┤\n└───────┘\n0 rows"
    )
    assert render_table(pa.table({"i": [7]})).endswith("\n1 row")


def test_control_characters_are_escaped_in_cells() -> None:
    out = render_table(pa.table({"note": ["a\nb", "tab\there"]}))
    assert "│ a\\nb      │" in out and "│ tab\\there │" in out


def test_long_text_cut_to_terminal_width_numbers_kept() -> None:
    table = pa.table({"k": [123456], "text": ["a fairly long piece of text that will not fit"]})
    out = render_table(table, width=30)
    assert out == (
        "┌────────┬───────────────────┐\n"
        "│   k    │       text        │\n"
        "│ int64  │      varchar      │\n"
        "├────────┼───────────────────┤\n"
        "│ 123456 │ a fairly long pi… │\n"
        "└────────┴───────────────────┘\n"
        "1 row"
    )
    assert all(len(line) <= 30 for line in out.splitlines())


def test_wide_table_leaves_out_middle_columns() -> None:
    table = pa.table({f"col{i}": ["hello world value"] * 2 for i in range(12)})
    out = render_table(table, width=80)
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert lines[1].split("│")[1:-1] == ["   col0    ", "   col1    ", "   col2    ", " … ", "   col9    ", "   col10   ", "   col11   "]
    assert lines[-1] == "2 rows, 12 columns (6 shown)"
    # Wide enough: nothing is left out or cut.
    assert "…" not in render_table(table, width=400)


def test_type_names_follow_duckdb_cli() -> None:
    rel = duckdb.sql(
        "SELECT 1::BIGINT a, 1.5::DOUBLE b, 'x' c, DATE '2020-01-02' d, 1.50::DECIMAL(3,2) e, [1, 2] f, "
        "{'x': 'a'} g, TIMESTAMP '2020-01-02 03:04:05' h, true i"
    )
    table = rel.arrow()
    table = table.read_all() if hasattr(table, "read_all") else table
    names = [arrow_type_name(f.type) for f in table.schema]
    assert names == ["int64", "double", "varchar", "date", "decimal(3,2)", "int32[]", "struct(x varchar)", "timestamp", "boolean"]
    row = render_table(table).splitlines()[4]
    assert "2020-01-02 03:04:05" in row and "│         1.50 │" in row and "[1, 2]" in row and "{'x': 'a'}" in row


def test_format_value() -> None:
    assert format_value(None) == "NULL"
    assert format_value(2.0) == "2.0" and format_value(0.1) == "0.1" and format_value(1e20) == "1e+20"
    assert format_value(float("nan")) == "nan" and format_value(float("-inf")) == "-inf"
    assert format_value(decimal.Decimal("1.50")) == "1.50"
    assert format_value(["a", None]) == "['a', NULL]"
    assert format_value(b"a\x00") == "a\\x00"
    assert format_value(datetime.date(2020, 1, 2)) == "2020-01-02"


def test_csv(mixed: pa.Table) -> None:
    assert render_csv(mixed) == 'id,name,p,ok\n1,Up,0.5,true\n22,,1.0,false\n,日本,,'
    quoted = render_csv(pa.table({"s": ['a,b', 'say "hi"']}))
    assert quoted == 's\n"a,b"\n"say ""hi"""'


def test_json(mixed: pa.Table) -> None:
    out = render_json(mixed)
    assert out == (
        '[{"id":1,"name":"Up","p":0.5,"ok":true},\n'
        '{"id":22,"name":null,"p":1.0,"ok":false},\n'
        '{"id":null,"name":"日本","p":null,"ok":null}]'
    )
    assert json.loads(out)[2]["name"] == "日本"
    assert render_json(pa.table({"x": pa.array([], pa.int64())})) == "[]"
    assert json.loads(render_json(pa.table({"x": [float("nan")], "d": [datetime.date(2020, 1, 2)]}))) == [{"x": None, "d": "2020-01-02"}]


def test_markdown(mixed: pa.Table) -> None:
    assert render_markdown(mixed) == (
        "| id   | name | p    | ok    |\n"
        "|-----:|------|-----:|-------|\n"
        "|    1 | Up   |  0.5 | true  |\n"
        "|   22 | NULL |  1.0 | false |\n"
        "| NULL | 日本 | NULL | NULL  |"
    )
    assert render_markdown(pa.table({"s": ["a|b"]})).splitlines()[2] == "| a\\|b |"


def test_render_dispatch_and_sources(mixed: pa.Table) -> None:
    assert render(mixed, "csv") == render_csv(mixed)
    with pytest.raises(ValueError, match="unknown output mode 'xml'"):
        render(mixed, "xml")
    # Anything with .arrow() renders: a DuckDB relation here.
    out = render_result(duckdb.sql("SELECT 42 AS answer"), "table")
    assert "│ answer │" in out and "│     42 │" in out and out.endswith("1 row")
    # Non-table modes print every row.
    many = pa.table({"i": list(range(100))})
    assert render_result(many, "csv", max_rows=10).count("\n") == 100
