"""The shell's statement runner, dot commands, completion and command line (in-process and piped).

The pseudo-terminal session is in test_shell_pty.py.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from prompt_toolkit.document import Document

import pdbq
from pdbq.shell.completion import Names, PdbqCompleter, read_names
from pdbq.progress import CancelToken, ProgressBar
from pdbq.shell.cli import build_arg_parser, main
from pdbq.shell.repl import Shell, _execute_kwargs, history_path

LONG_QUERY = "SELECT sum(a.range * b.range) FROM range(100000000) a, range(1000000) b;"


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


def test_statements_run_in_order_and_print_tables(shell: Shell) -> None:
    shell.run_text("CREATE TABLE t(id INTEGER, name TEXT);\nINSERT INTO t VALUES (1, 'a;b'), (2, NULL);\n"
                   "SELECT *\nFROM t\nORDER BY id; SELECT count(*) AS n FROM t;")
    text = out(shell)
    assert "│  id   │  name   │\n│ int32 │ varchar │" in text
    assert "│     1 │ a;b     │\n│     2 │ NULL    │" in text
    assert text.endswith("2 rows\n┌───────┐\n│   n   │\n│ int64 │\n├───────┤\n│     2 │\n└───────┘\n1 row\n")
    assert err(shell) == "" and not shell.failed


def test_error_then_recovery(shell: Shell) -> None:
    shell.run_text("SELECT * FROM nowhere;\nSELECT 'still here' AS s;")
    assert "Error: Catalog Error" in err(shell) and "nowhere" in err(shell)
    assert "still here" in out(shell)
    assert shell.failed and shell.exit_code == 1


def test_parse_error_has_caret_at_script_position(shell: Shell) -> None:
    shell.run_text("SELECT 1;\n\nSELECT 'unterminated\n")
    message = err(shell)
    assert "unterminated string (line 3, column 8)" in message
    assert message.endswith("SELECT 'unterminated\n       ^\n")


def test_pdbq_parse_error_located_in_the_script(shell: Shell) -> None:
    shell.run_lines(["SELECT 1 AS one;\n", "\n", "  CREATE VARIABLE v(x INT) DOMAIN NOPE FROM (SELECT 1);\n"])
    message = err(shell)
    assert "(line 3, column 35)" in message
    assert message.endswith("  CREATE VARIABLE v(x INT) DOMAIN NOPE FROM (SELECT 1);\n" + " " * 34 + "^^^^\n")


def test_incomplete_statement_at_end_of_input_still_runs(shell: Shell) -> None:
    shell.run_lines(["SELECT 41 + 1 AS x\n", "-- no semicolon\n"])
    assert "│    42 │" in out(shell)
    shell.run_lines(["-- only a comment\n", "\n"])
    assert not shell.failed


def test_bail_stops_after_first_failure() -> None:
    db = pdbq.connect()
    sh = Shell(db, out=io.StringIO(), err=io.StringIO(), progress=False, bail=True)
    sh.run_text("SELECT 1 AS first;\nSELECT nope;\nSELECT 3 AS third;")
    assert "first" in out(sh) and "third" not in out(sh) and sh.exit_code == 1
    db.close()


def test_dot_commands(shell: Shell, tmp_path: Path) -> None:
    shell.run_text("CREATE TABLE movies(title TEXT, year INTEGER);\nCREATE VIEW recent AS SELECT * FROM movies WHERE year > 2000;\n"
                   "INSERT INTO movies VALUES ('Up', 2009);")
    shell.dot_command(".tables")
    assert out(shell).splitlines()[-1].split() == ["movies", "recent"]
    shell.dot_command(".schema movies")
    assert "CREATE TABLE movies(title VARCHAR, \"year\" INTEGER);" in out(shell)
    shell.dot_command(".mode csv")
    shell.run_text("SELECT * FROM movies;")
    assert out(shell).endswith("title,year\nUp,2009\n")
    shell.dot_command(".mode json")
    shell.run_text("SELECT * FROM movies;")
    assert out(shell).endswith('[{"title":"Up","year":2009}]\n')
    shell.dot_command(".mode markdown")
    shell.run_text("SELECT year FROM movies;")
    assert out(shell).endswith("| year |\n|-----:|\n| 2009 |\n")
    shell.dot_command(".mode")
    assert out(shell).endswith("markdown\n")
    shell.dot_command(".timer on")
    shell.run_text("SELECT 1;")
    assert "Run Time (s): real " in out(shell).splitlines()[-1]
    shell.dot_command(".timer off")
    shell.dot_command(".help")
    assert ".schema [NAME]" in out(shell)
    assert err(shell) == "" and not shell.failed


def test_dot_command_errors(shell: Shell) -> None:
    shell.run_text("CREATE TABLE movies(title TEXT);")
    shell.dot_command(".schema movie")
    assert "no table, view, variable relation or rule named 'movie'. Did you mean 'movies'?" in err(shell)
    shell.dot_command(".mode xml")
    assert "unknown mode 'xml'" in err(shell)
    shell.dot_command(".timer maybe")
    assert ".timer takes 'on' or 'off'" in err(shell)
    shell.dot_command(".tabels")
    assert "unknown command '.tabels'. Did you mean '.tables'?" in err(shell)
    shell.dot_command(".read /nonexistent/file.sql")
    assert "cannot read '/nonexistent/file.sql'" in err(shell)
    assert shell.failed and shell.mode == "table"


def test_read_open_and_quit(shell: Shell, tmp_path: Path) -> None:
    script = tmp_path / "s.sql"
    script.write_text("CREATE TABLE f AS SELECT 5 AS five;\n.mode csv\nSELECT * FROM f;\n")
    shell.dot_command(f".read {script}")
    assert out(shell).endswith("five\n5\n")
    dbfile = tmp_path / "other.db"
    shell.dot_command(f".open {dbfile}")
    shell.run_text("CREATE TABLE kept AS SELECT 1 AS one;")
    shell.dot_command(".open :memory:")
    shell.run_text("SELECT * FROM kept;")
    assert "Catalog Error" in err(shell)
    shell.dot_command(f".open {dbfile}")
    shell.run_text("SELECT * FROM kept;\n.quit\nSELECT 'after quit' AS x;")
    assert out(shell).endswith("one\n1\n") and "after quit" not in out(shell)


@pytest.fixture(autouse=True)
def _sigint_raises():
    """Python's Ctrl-C handler for each test: a runner started as a background job ignores SIGINT
    (and so would this process), and the Ctrl-C tests would wait for a statement that never ends."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def _ctrl_c_when_running(delay: float = 0.3) -> threading.Thread:
    """Send SIGINT to this process once a statement's worker thread has run for ``delay`` s."""

    def fire() -> None:
        for _ in range(1000):
            if any(t.name == "pdbq-statement" for t in threading.enumerate()):
                time.sleep(delay)
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.01)

    timer = threading.Thread(target=fire)
    timer.start()
    return timer


def test_ctrl_c_cancels_duckdb_statement_and_session_continues(shell: Shell) -> None:
    timer = _ctrl_c_when_running()
    shell.run_text(LONG_QUERY + " SELECT 'skipped' AS s;")
    timer.join()
    assert err(shell).strip() == "Interrupted"
    assert "skipped" not in out(shell) and shell.interrupted and shell.exit_code == 130
    shell.interrupted = False  # what the interactive loop does before the next input
    shell.run_text("SELECT 'usable' AS s;")
    assert "usable" in out(shell)


def test_ctrl_c_reaches_the_engine_through_the_cancel_token() -> None:
    import duckdb

    from pdbq.progress import Progress

    class Engine:
        """Stands in for the inference engine: reports progress and polls the token per round."""

        def __init__(self) -> None:
            self.duckdb = duckdb.connect()
            self.rounds = 0
            self.bars: list[object] = []

        def execute(self, script, *, cancel=None, progress=None):
            self.bars.append(progress)
            while True:
                cancel.check()
                self.rounds += 1
                progress(Progress("sampling", self.rounds, None, 0.1, 0.01, 0.0))
                time.sleep(0.005)

        def close(self) -> None:
            self.duckdb.close()

    engine = Engine()
    sh = Shell(engine, out=io.StringIO(), err=io.StringIO())
    timer = _ctrl_c_when_running()
    sh.run_text("SELECT PROB(x) FROM v AS x;")
    timer.join()
    assert err(sh).strip() == "Interrupted" and sh.interrupted and engine.rounds > 0
    assert isinstance(engine.bars[0], ProgressBar)
    engine.close()


def test_execute_kwargs_follow_the_signature() -> None:
    class Takes:
        def execute(self, script, *, cancel=None, progress=None):
            return None

    class Plain:
        def execute(self, script):
            return None

    token, bar = CancelToken(), ProgressBar(io.StringIO())
    assert _execute_kwargs(Takes(), token, bar) == {"cancel": token, "progress": bar}
    assert _execute_kwargs(Takes(), token, None) == {"cancel": token}
    assert _execute_kwargs(Plain(), token, bar) == {}


def test_seed_becomes_the_default_option() -> None:
    db = pdbq.connect()
    Shell(db, out=io.StringIO(), err=io.StringIO(), seed=11)
    assert db.default_options["seed"] == 11
    db.close()


def test_completion_reads_names_from_the_database(shell: Shell) -> None:
    shell.run_text("CREATE TABLE movies(title TEXT, year INTEGER);")
    names = read_names(shell.db)
    assert "movies" in names.tables and names.columns["movies"] == ("title", "year")
    completer = PdbqCompleter(lambda: read_names(shell.db))

    def complete(text: str) -> list[str]:
        return [c.text for c in completer.get_completions(Document(text), None)]

    assert complete("SELECT * FROM mov") == ["movies"]
    assert complete("SELECT m.ti") == ["title"] or complete("SELECT movies.ti") == ["title"]
    assert complete("SELECT movies.") == ["title", "year"]
    assert complete("sel") == ["select"] and complete("SEL") == ["SELECT"]
    assert "GIVEN" in complete("GIV") and "PROB" in complete("PRO")
    assert complete(".ta") == [".tables"]
    assert complete(".schema mo") == ["movies"]
    # Names are cached until invalidated (the shell does it after each statement).
    shell.db.execute("CREATE TABLE moods(x INTEGER)")
    assert complete("FROM moo") == []
    completer.invalidate()
    assert complete("FROM moo") == ["moods"]


def test_completer_offers_variables_and_rules() -> None:
    completer = PdbqCompleter(lambda: Names(tables=("pdbq_rules", "people"), columns={"pdbq_rules": ("definition",)},
                                            variables=("is_popular",), rules=("fans_vote",)))
    assert [c.text for c in completer.get_completions(Document("SELECT p"), None)] == ["people", "prob", "primary"]
    assert [c.text for c in completer.get_completions(Document("SELECT pdbq_"), None)] == ["pdbq_rules"]
    assert [c.text for c in completer.get_completions(Document("SELECT defin"), None)] == []
    metas = {c.text: c.display_meta_text for c in completer.get_completions(Document("SELECT PROB(is_p"), None)}
    assert metas == {"is_popular": "variable"}
    assert [c.text for c in completer.get_completions(Document("DROP RULE fan"), None)] == ["fans_vote"]


def test_highlighting_knows_pdbq_keywords() -> None:
    from pygments.token import Keyword

    from pdbq.shell.highlight import PdbqLexer

    tokens = [(t, v) for t, v in PdbqLexer().get_tokens("SELECT PROB(m) FROM r GIVEN f('x') = TRUE USING QAM;") if v.strip()]
    keywords = [v for t, v in tokens if t in Keyword]
    assert keywords == ["SELECT", "PROB", "FROM", "GIVEN", "TRUE", "USING", "QAM"]
    assert ("m", Keyword) not in [(v, t) for t, v in tokens]


def test_history_path_honours_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PDBQ_HISTORY", str(tmp_path / "h"))
    assert history_path() == tmp_path / "h"
    monkeypatch.delenv("PDBQ_HISTORY")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert history_path() == tmp_path / ".pdbq_history"


def test_arguments() -> None:
    args = build_arg_parser().parse_args(["x.db", "-f", "a.sql", "-c", "SELECT 1", "--seed", "3", "--no-progress"])
    assert args.database == "x.db" and args.actions == [("file", "a.sql"), ("sql", "SELECT 1")]
    assert args.seed == 3 and args.no_progress
    assert build_arg_parser().parse_args([]).database == ":memory:"


def test_main_in_process(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["-c", "SELECT 6 * 7 AS answer;"]) == 0
    assert "│     42 │" in capsys.readouterr().out
    assert main(["-c", "SELECT nope;"]) == 1
    assert "Error:" in capsys.readouterr().err
    assert main(["-f", str(tmp_path / "missing.sql")]) == 1
    assert main([str(tmp_path / "no_such_dir" / "x.db")]) == 2


# ---------------------------------------------------------------------------------------------
# as a subprocess (piped standard input, -c, -f)


def _pdbq(*args: str, stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PDBQ_HISTORY=os.devnull)
    return subprocess.run(
        [sys.executable, "-m", "pdbq", *args], input=stdin, capture_output=True, text=True,
        timeout=60, env=env, cwd=cwd,
    )


def test_piped_stdin_runs_statements_and_dot_commands() -> None:
    proc = _pdbq(stdin="CREATE TABLE t AS SELECT range AS i FROM range(3);\nSELECT\n  max(i) AS total\nFROM t;\n"
                        ".mode csv\nSELECT i FROM t ORDER BY i;\n")
    assert proc.returncode == 0, proc.stderr
    assert "│ total │\n│ int64 │" in proc.stdout and "│     2 │" in proc.stdout
    assert proc.stdout.endswith("i\n0\n1\n2\n")
    assert proc.stderr == ""


def test_failed_script_exits_non_zero(tmp_path: Path) -> None:
    script = tmp_path / "bad.sql"
    script.write_text("SELECT 1 AS ok;\nSELECT * FROM missing_table;\nSELECT 2 AS after;\n")
    piped = _pdbq(stdin=script.read_text())
    assert piped.returncode == 1 and "missing_table" in piped.stderr and "after" in piped.stdout
    from_file = _pdbq("-f", str(script), "--bail")
    assert from_file.returncode == 1 and "ok" in from_file.stdout and "after" not in from_file.stdout


def test_dash_c_and_database_file(tmp_path: Path) -> None:
    dbfile = tmp_path / "x.db"
    made = _pdbq(str(dbfile), "-c", "CREATE TABLE k AS SELECT 'kept' AS v;")
    assert made.returncode == 0, made.stderr
    read = _pdbq(str(dbfile), "-c", ".mode csv", "-c", "SELECT v FROM k;")
    assert read.returncode == 0 and read.stdout == "v\nkept\n"
