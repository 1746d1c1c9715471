"""The shell's dot commands that match the duckdb CLI: .import, .dump, .show, .print, .system,
.separator, .maxwidth, .indexes, .changes, the list/tabs/html modes, and what .last says after a
query that gave no answer."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import pdbq
from pdbq.shell.repl import Shell

MODEL = """
CREATE TABLE people AS SELECT * FROM (VALUES ('ann', 1), ('bob', 0)) v(name, smoker);
CREATE VARIABLE smokes(name TEXT) DOMAIN BOOLEAN FROM (SELECT name FROM people);
CREATE RULE habit WEIGHT 0.5 AS smokes(name) :- people(name, smoker), smoker = 1;
CREATE VIEW smokers AS SELECT name FROM smokes;
"""


@pytest.fixture()
def shell():
    db = pdbq.connect()
    sh = Shell(db, out=io.StringIO(), err=io.StringIO(), progress=False)
    yield sh
    sh.db.close()


def out(sh: Shell) -> str:
    return sh.out.getvalue()


def err(sh: Shell) -> str:
    return sh.err.getvalue()


def test_import_creates_then_appends(shell: Shell, tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text("title,year\nUp,2009\nHer,2013\n")
    shell.dot_command(f".import {path} movies")
    shell.dot_command(f".import {path} movies")
    shell.dot_command(".mode list")
    shell.run_text("SELECT title, count(*) AS n FROM movies GROUP BY title ORDER BY title;")
    assert out(shell).endswith("title|n\nHer|2\nUp|2\n")
    semi = tmp_path / "s.csv"
    semi.write_text("a;b\n1;x\n")
    shell.dot_command(".separator ;")
    shell.dot_command(f".import {semi} t")
    shell.run_text("SELECT * FROM t;")
    assert out(shell).endswith("a;b\n1;x\n")
    assert err(shell) == "" and not shell.failed
    shell.dot_command(".import only-one-argument")
    assert ".import takes a file and a table" in err(shell)


def test_dump_rebuilds_the_database(shell: Shell, tmp_path: Path) -> None:
    shell.run_text(MODEL + "CREATE INDEX people_name ON people(name);")
    shell.dot_command(".dump")
    script = out(shell)
    lines = script.splitlines()
    assert lines[0] == "BEGIN TRANSACTION;" and lines[-1] == "COMMIT;"
    # tables with rows, then variable relations and rules, then views that read them
    order = [next(i for i, ln in enumerate(lines) if ln.startswith(p)) for p in
             ("CREATE TABLE people", "INSERT INTO people", "CREATE VARIABLE smokes", "CREATE RULE habit",
              "CREATE VIEW smokers")]
    assert order == sorted(order)
    with pdbq.connect() as fresh:
        copy = Shell(fresh, out=io.StringIO(), err=io.StringIO(), progress=False)
        copy.run_text(script)
        assert err(copy) == ""
        want = shell.db.execute("SELECT a.name, PROB(a) FROM smokes a ORDER BY 1 USING EXACT").fetchall()
        assert fresh.execute("SELECT a.name, PROB(a) FROM smokes a ORDER BY 1 USING EXACT").fetchall() == want
        assert fresh.execute("SELECT * FROM smokers ORDER BY 1").fetchall() == [("ann",), ("bob",)]
    shell.dot_command(".dump nothing_here")
    assert "no table, view, variable relation or rule named 'nothing_here'" in err(shell)


def test_settings_print_system_indexes_changes(shell: Shell) -> None:
    shell.run_text("CREATE TABLE t(i INTEGER); CREATE INDEX t_i ON t(i);")
    shell.dot_command(".indexes")
    assert out(shell).endswith("t_i\n")
    shell.dot_command(".changes on")
    shell.run_text("INSERT INTO t VALUES (1), (2); DELETE FROM t WHERE i = 1;")
    assert out(shell).endswith("changes: 2   total_changes: 2\nchanges: 1   total_changes: 3\n")
    shell.dot_command(".print 'hello there' world")
    assert out(shell).endswith("hello there world\n")
    shell.dot_command(".system echo from-the-shell")
    assert out(shell).endswith("from-the-shell\n")
    shell.dot_command(".maxwidth 30")
    shell.dot_command(".mode box")
    shell.dot_command(".show")
    settings = dict(line.split(": ", 1) for line in out(shell).splitlines()[-13:])
    assert settings["     mode"] == "table" and settings[" maxwidth"] == "30" and settings["  changes"] == "on"
    shell.run_text("SELECT repeat('x', 100) AS wide;")
    assert max(len(line) for line in out(shell).splitlines()[-6:]) <= 30
    assert err(shell) == "" and not shell.failed
    shell.dot_command(".columns")
    assert ".mode line" in err(shell)


def test_html_and_tabs_modes(shell: Shell) -> None:
    shell.dot_command(".mode tabs")
    shell.run_text("SELECT 1 AS a, 'x' AS b;")
    assert out(shell).endswith("a\tb\n1\tx\n")
    shell.dot_command(".mode html")
    shell.run_text("SELECT '<b>' AS a;")
    assert out(shell).endswith("<table>\n<tr><th>a</th></tr>\n<tr><td>&lt;b&gt;</td></tr>\n</table>\n")


def test_last_after_a_failed_query_does_not_describe_the_one_before(shell: Shell) -> None:
    shell.run_text(MODEL + "SELECT a.name, PROB(a) FROM smokes a USING EXACT;")
    shell.dot_command(".last")
    assert "method     EXACT" in out(shell)
    shell.run_text("SELECT a.name, PROB(a) FROM smokes a WHERE a.nope = 1 USING EXACT;")
    shell.dot_command(".last")
    assert out(shell).splitlines()[-1].startswith("the last probabilistic query failed: SELECT a.name")
    shell.run_text("SELECT 1;")  # plain SQL does not change what .last describes
    shell.dot_command(".last")
    assert out(shell).splitlines()[-1].startswith("the last probabilistic query failed")


def test_completion_after_from_offers_only_relations() -> None:
    from prompt_toolkit.document import Document

    from pdbq.shell.completion import Names, PdbqCompleter

    completer = PdbqCompleter(lambda: Names(tables=("sensors",), columns={"sensors": ("sensor", "reading")},
                                            variables=("sensor_ok",), rules=("sensor_rule",)))

    def complete(text: str) -> list[str]:
        return [c.text for c in completer.get_completions(Document(text), None)]

    assert complete("SELECT * FROM sen") == ["sensor_ok", "sensors"]
    assert complete("SELECT * FROM sensors s, sen") == ["sensor_ok", "sensors"]
    assert complete("SELECT * FROM sensors s JOIN sen") == ["sensor_ok", "sensors"]
    assert complete("SELECT sen") == ["sensor_ok", "sensor_rule", "sensors", "sensor"]
    assert complete("DROP RULE sen") == ["sensor_ok", "sensor_rule", "sensors", "sensor"]


def test_help_names_the_dedupe_command() -> None:
    from pdbq.shell.cli import build_arg_parser

    text = build_arg_parser().format_help()
    assert "pdbq dedupe INPUT --id COL --fields" in text and "pdbq dedupe --help" in " ".join(text.split())


def test_a_long_separator_is_for_list_mode(shell: Shell) -> None:
    shell.dot_command(".mode list")
    shell.dot_command(".separator ' :: '")
    shell.run_text("SELECT 1 AS a, 2 AS b;")
    assert out(shell).endswith("a :: b\n1 :: 2\n")
    shell.dot_command(".mode csv")
    shell.run_text("SELECT 1 AS a, 2 AS b;")
    assert "csv output needs a one-character field separator" in err(shell)
    assert "Internal error" not in err(shell)


def test_import_of_a_missing_file_says_so_without_pdbq_sql(shell: Shell, tmp_path: Path) -> None:
    shell.dot_command(f".import {tmp_path / 'nofile.csv'} x")
    text = err(shell)
    assert shell.failed and text.startswith(f"Error: cannot import {tmp_path / 'nofile.csv'} into x: ")
    assert "nofile.csv" in text.splitlines()[0] and "READ_CSV" not in text.upper() and "LINE 1" not in text
    assert len(text.strip().splitlines()) == 1


def test_last_says_what_its_r_hat_means() -> None:
    from pdbq.shell.diag import format_diagnostics

    import re

    assert re.search(r"^R-hat +1, the largest: the chains agree \(at most 1\.1\)$", format_diagnostics({"rhat_max": 1.0}))
    assert re.search(r"^R-hat +1\.25, the largest: the chains disagree \(above 1\.1\)$",
                     format_diagnostics({"rhat_max": 1.25}))
    assert "not measured" in format_diagnostics({"rhat_max": float("nan")})


_CELLS = {
    "VARCHAR": st.text(max_size=8),
    "BIGINT": st.integers(-2**63, 2**63 - 1),
    "DOUBLE": st.floats(allow_nan=True, allow_infinity=True),
    "BOOLEAN": st.booleans(),
    "DATE": st.dates(min_value=__import__("datetime").date(1, 1, 1)),
    "DECIMAL(12,3)": st.decimals(min_value=-10**8, max_value=10**8, places=3, allow_nan=False),
    "INTEGER[]": st.lists(st.integers(-2**31, 2**31 - 1), max_size=3),
}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(sorted(_CELLS)), min_size=1, max_size=4).flatmap(
    lambda types: st.tuples(st.just(types), st.lists(st.tuples(*[st.none() | _CELLS[t] for t in types]), max_size=4))))
# a string holding a character str.splitlines splits at (record separator, form feed, U+2028)
@example((["BIGINT", "VARCHAR"], [(None, "\x1e"), (1, "a\x0cb\u2028c")]))
def test_dump_writes_plain_literals_and_rebuilds_every_value(table) -> None:
    """Rows of random types and values: the dumped INSERT rebuilds them exactly (NaN, infinities,
    quotes and NULLs too), and strings, numbers and booleans are written as plain literals."""
    import math

    types, rows = table
    with pdbq.connect() as db:
        cols = ", ".join(f"c{i} {t}" for i, t in enumerate(types))
        db.duckdb.execute(f"CREATE TABLE r({cols})")
        if rows:
            db.duckdb.executemany(f"INSERT INTO r VALUES ({', '.join('?' for _ in types)})", [list(r) for r in rows])
        sh = Shell(db, out=io.StringIO(), err=io.StringIO(), progress=False)
        sh.dot_command(".dump r")
        script = out(sh)
        assert "AS TEXT)" not in script and "AS VARCHAR)" not in script and "AS BIGINT)" not in script, script
        want = db.duckdb.execute("SELECT * FROM r").fetchall()
    with pdbq.connect() as fresh:
        copy = Shell(fresh, out=io.StringIO(), err=io.StringIO(), progress=False)
        copy.run_text(script)
        assert err(copy) == "", (script, err(copy))
        got = fresh.duckdb.execute("SELECT * FROM r").fetchall()

    def same(a, b):
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
            return math.isnan(b)
        return a == b

    assert len(got) == len(want) and all(same(a, b) for gr, wr in zip(got, want) for a, b in zip(gr, wr)), (script, got, want)


def test_dump_keeps_sequences_macros_and_enum_types() -> None:
    """A table whose default reads a sequence, macros (scalar and table) and a named ENUM type:
    the dump rebuilds them, so its single transaction does not fail at that table (and lose all)."""
    with pdbq.connect() as db:
        db.duckdb.execute("CREATE SEQUENCE seq1 START 5; SELECT nextval('seq1'); CREATE TYPE mood AS ENUM ('sad', 'ok');"
                          "CREATE TABLE w (id INT DEFAULT nextval('seq1'), m mood, note TEXT);"
                          "INSERT INTO w (m, note) VALUES ('ok', 'a'), ('sad', 'b');"
                          "CREATE MACRO twice(a) AS a * 2; CREATE MACRO rows_of(k) AS TABLE SELECT * FROM w WHERE id > k;"
                          "CREATE VIEW doubled AS SELECT twice(id) AS d FROM w")
        sh = Shell(db, out=io.StringIO(), err=io.StringIO(), progress=False)
        sh.dot_command(".dump")
        script = out(sh)
        want = [db.duckdb.execute(q).fetchall() for q in (
            "SELECT * FROM w ORDER BY id", "SELECT * FROM doubled ORDER BY d", "SELECT * FROM rows_of(6)")]
        next_id = db.duckdb.execute("SELECT nextval('seq1')").fetchall()
    with pdbq.connect() as fresh:
        copy = Shell(fresh, out=io.StringIO(), err=io.StringIO(), progress=False)
        copy.run_text(script)
        assert err(copy) == "", (script, err(copy))
        got = [fresh.duckdb.execute(q).fetchall() for q in (
            "SELECT * FROM w ORDER BY id", "SELECT * FROM doubled ORDER BY d", "SELECT * FROM rows_of(6)")]
        assert got == want
        assert fresh.duckdb.execute("SELECT nextval('seq1')").fetchall() == next_id  # at its current value
        assert fresh.duckdb.execute("SELECT count(*) FROM duckdb_types() WHERE type_name = 'mood'").fetchall() == [(1,)]


@settings(max_examples=15, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=6))
@example('a"b')
def test_dump_rebuilds_a_table_of_any_name(name) -> None:
    with pdbq.connect() as db:
        quoted = '"' + name.replace('"', '""') + '"'
        try:
            db.duckdb.execute(f"CREATE TABLE {quoted} (x INT); INSERT INTO {quoted} VALUES (1), (2)")
        except Exception:  # noqa: BLE001  a name DuckDB itself refuses (or folds onto another)
            return
        sh = Shell(db, out=io.StringIO(), err=io.StringIO(), progress=False)
        sh.dot_command(".dump")
        script = out(sh)
        assert not sh.failed and err(sh) == "", (name, err(sh))
    with pdbq.connect() as fresh:
        copy = Shell(fresh, out=io.StringIO(), err=io.StringIO(), progress=False)
        copy.run_text(script)
        assert err(copy) == "", (name, script, err(copy))
        assert fresh.duckdb.execute(f"SELECT * FROM {quoted} ORDER BY x").fetchall() == [(1,), (2,)]
