"""The interactive shell through a real pseudo-terminal (pexpect).

Output markers use the table's box characters (``│ answer │``) because the echoed input also
contains the words typed.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import termios
import time
from pathlib import Path

import pytest

pexpect = pytest.importorskip("pexpect")

TIMEOUT = 30
LONG_QUERY = "SELECT sum(a.range * b.range) AS total FROM range(100000000) a, range(1000000) b;"


def _sigint_default() -> None:
    # a runner started as a background job ignores SIGINT, and an exec'd child inherits that:
    # the shell must see Ctrl-C as a terminal user's shell does
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _spawn(tmp_path: Path, *args: str):
    env = dict(
        os.environ,
        PROMPT_TOOLKIT_NO_CPR="1",
        HOME=str(tmp_path),
        PDBQ_HISTORY=str(tmp_path / "history"),
        TERM="xterm",
    )
    child = pexpect.spawn(
        sys.executable, ["-m", "pdbq", *args], env=env, encoding="utf-8", timeout=TIMEOUT,
        dimensions=(40, 160), preexec_fn=_sigint_default,
    )
    child.expect("pdbq>")
    return child


def _wait_mode(child, cooked: bool, limit: float = 10.0) -> None:
    """Wait until the terminal is in cooked mode (a statement runs: Ctrl-C is SIGINT) or in
    prompt_toolkit's raw mode (at the prompt: Ctrl-C and Ctrl-D are keys)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if bool(termios.tcgetattr(child.child_fd)[3] & termios.ISIG) == cooked:
            return
        time.sleep(0.02)
    raise AssertionError("the shell did not " + ("leave" if cooked else "reach") + " the prompt")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_busy(child, since: float, seconds: float = 0.3, limit: float = 20.0) -> None:
    """Wait until the shell has burnt ``seconds`` of CPU since ``since``: the query is running
    (a Ctrl-C sent while prompt_toolkit is still returning would only end the prompt)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if _cpu_seconds(child.pid) - since >= seconds:
            return
        time.sleep(0.05)
    raise AssertionError("the long query did not start")


def _at_prompt(child) -> None:
    child.expect("pdbq>")
    _wait_mode(child, cooked=False)


def _new_prompt(child) -> None:
    """After a Ctrl-C at the prompt: wait for the *next* prompt session, which announces itself by
    enabling bracketed paste. The old one redraws "pdbq>" too, and keys sent before it has exited
    can be read (and dropped) by it: a Ctrl-D sent then never reaches the new prompt."""
    child.expect("\x1b\\[\\?2004h")
    _at_prompt(child)


def test_interactive_session(tmp_path: Path) -> None:
    child = _spawn(tmp_path, str(tmp_path / "f.db"))
    try:
        # A statement spans lines until its ';'.
        child.sendline("SELECT 41 +")
        child.expect(r"\.\.\.>")
        child.sendline("1 AS answer;")
        child.expect("│ answer │")
        child.expect("│     42 │")
        child.expect("1 row")
        child.expect("pdbq>")

        # An error is printed and the session goes on.
        child.sendline("SELECT * FROM nowhere;")
        child.expect("Error: Catalog Error")
        child.sendline("CREATE TABLE movies(title TEXT, year INTEGER); INSERT INTO movies VALUES ('Up', 2009);"
                       " SELECT count(*) AS n_movies FROM movies;")
        child.expect("│ n_movies │")
        child.expect("pdbq>")

        # Dot commands.
        child.sendline(".tables")
        child.expect("movies\r\n")
        child.sendline(".schema movies")
        child.expect(r"CREATE TABLE movies\(title VARCHAR")
        child.sendline(".mode csv")
        child.sendline("SELECT title, year FROM movies;")
        child.expect("title,year\r\nUp,2009\r\n")
        child.sendline(".mode table")
        child.sendline(".timer on")
        child.sendline("SELECT 2 AS two;")
        child.expect("│ two   │|│  two  │")
        child.expect(r"Run Time \(s\): real \d+\.\d+")
        child.sendline(".timer off")

        # Tab completion of a column and a table.
        child.send("SELECT yea")
        child.send("\t")
        child.send(" AS y FROM movi")
        child.send("\t")
        child.send(";\r")
        child.expect("│   y   │")
        child.expect("│  2009 │")

        # Ctrl-C cancels a long query; the database is still usable afterwards.
        _at_prompt(child)
        have_proc = Path("/proc/self/stat").exists()
        before = _cpu_seconds(child.pid) if have_proc else 0.0
        child.sendline(LONG_QUERY)
        _wait_mode(child, cooked=True)
        if have_proc:
            _wait_busy(child, before)
        else:
            time.sleep(1.0)
        child.sendintr()
        child.expect("Interrupted")
        child.expect("pdbq>")
        child.sendline("SELECT 'after' AS still_ok, count(*) AS n FROM movies;")
        child.expect("│ still_ok │")
        child.expect("│ after    │")

        # Ctrl-C at the prompt clears the line.
        _at_prompt(child)
        child.send("SELECT 'junk")
        child.sendcontrol("c")
        _new_prompt(child)
        child.sendline("SELECT 'clean' AS c2;")
        child.expect("│ clean   │")
        _at_prompt(child)

        # Ctrl-D leaves with status 0 (errors at the prompt do not count).
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    history = (tmp_path / "history").read_text()
    assert "SELECT 41 +\n+1 AS answer;" in history
    assert (tmp_path / "f.db").exists()


SAMPLING_MODEL = (
    "CREATE TABLE nodes AS SELECT range AS i FROM range(2000); "
    "CREATE TABLE edges AS SELECT range AS a, range + 1 AS b FROM range(1999); "
    "CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM nodes); "
    "CREATE RULE link WEIGHT 1.5 FUNCTION EQUAL AS x(a) = x(b) :- edges(a, b);"
)
# a tolerance this small is never reached: the run lasts until the time limit unless cancelled
SAMPLING_QUERY = ("SELECT PROB(v) AS p FROM x v WHERE v.i = 1000 "
                  "USING GIBBS WITH (tolerance = 0.000000001, time_limit = 60, seed = 1);")


def test_sampling_query_shows_progress_and_ctrl_c_cancels_it(tmp_path: Path) -> None:
    child = _spawn(tmp_path)
    try:
        child.sendline(SAMPLING_MODEL)
        _at_prompt(child)
        started = time.monotonic()
        child.sendline(SAMPLING_QUERY)
        _wait_mode(child, cooked=True)
        # the bar appears after its delay, with the sampling phase and the standard error so far
        child.expect(r"sampling\s+.*stderr", timeout=TIMEOUT)
        # its ETA respects the 60 s budget (it used to extrapolate the tolerance: ETA 1h30m)
        child.expect(r"ETA (?:(\d+)m)?(\d+)s", timeout=TIMEOUT)
        minutes, seconds = child.match.group(1), child.match.group(2)
        assert int(minutes or 0) * 60 + int(seconds) <= 60
        child.sendintr()
        # the bar's line is erased before "Interrupted" is printed on it
        child.expect("\x1b\\[KInterrupted")
        _at_prompt(child)
        assert time.monotonic() - started < 45  # cancelled, not run to its 60 s limit
        # the database and the model are intact: a short query answers
        child.sendline("SELECT round(PROB(v), 1) AS p_again FROM x v WHERE v.i = 1 "
                       "USING QAM WITH (steps = 20000, seed = 2);")
        child.expect("│ p_again │")
        _at_prompt(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0  # as in the interactive session: interrupts at the prompt do not count


NEWCOMER_MODEL = (
    "CREATE TABLE nodes AS SELECT range AS i FROM range(30); "
    "CREATE TABLE edges AS SELECT range AS a, range + 1 AS b FROM range(29); "
    "CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM nodes); "
    "CREATE RULE link WEIGHT 0.7 FUNCTION EQUAL AS x(a) = x(b) :- edges(a, b);"
)


def test_newcomer_session_banner_warnings_last_saving_and_tab(tmp_path: Path) -> None:
    target = tmp_path / "answers.csv"
    child = _spawn(tmp_path, "--no-progress", str(tmp_path / "n.db"))
    try:
        # the banner came before the first prompt
        assert "Connected to '" in child.before and "(DuckDB " in child.before
        _wait_mode(child, cooked=False)
        child.sendline(NEWCOMER_MODEL)
        _at_prompt(child)
        # warnings are printed under the result, dim, one line each
        child.sendline("SELECT v.i, PROB(v) AS p_warn FROM x v WHERE v.i = 7 "
                       "USING GIBBS WITH (tolerance = 0.00001, time_limit = 4, seed = 3);")  # first query: planning ~1 s
        child.expect("p_warn +│")
        child.expect("1 row")
        child.expect("\x1b\\[2mWarning: tolerance 1e-05 not reached")
        _at_prompt(child)
        # .last: method, steps, R-hat, time of that query
        child.sendline(".last")
        child.expect("method +GIBBS \\(USING GIBBS\\)")
        child.expect("steps +[0-9,]+ per chain")
        child.expect("pdbq>")
        last = child.before
        _wait_mode(child, cooked=False)
        assert re.search(r"time +[0-9.]+ s", last)
        # the R-hat line, or (a short run) the warning that says why there is none
        assert re.search(r"R-hat +[0-9.]+, the largest", last) or "R-hat unavailable" in last
        # answers saved with CREATE TABLE AS and COPY ... TO, then read back
        child.sendline("CREATE TABLE saved AS SELECT v.i, PROB(v) AS p FROM x v WHERE v.i < 4 USING EXACT;")
        _at_prompt(child)
        child.sendline(f"COPY (SELECT * FROM saved) TO '{target}' (HEADER);")
        _at_prompt(child)
        child.sendline("SELECT count(*) AS n_saved FROM saved;")
        child.expect("│ n_saved │")
        child.expect("│       4 │")
        _at_prompt(child)
        assert target.read_text().splitlines()[0] == "i,p"
        # DuckDB's dot commands: .once sends one result to a file, .mode line, .headers, .describe
        once = tmp_path / "once.txt"
        child.sendline(f".once {once}")
        _at_prompt(child)
        child.sendline("SELECT 'to the file' AS where_to;")
        deadline = time.monotonic() + TIMEOUT
        while "to the file" not in (once.read_text() if once.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "│ to the file │" in once.read_text()
        _at_prompt(child)
        child.sendline(".mode line")
        _at_prompt(child)
        child.sendline("SELECT 7 AS lucky, 'x' AS letter;")
        child.expect("lucky = 7\r\n")
        child.expect("letter = x")
        _at_prompt(child)
        child.sendline(".mode duckbox")
        _at_prompt(child)
        child.sendline(".headers off")
        _at_prompt(child)
        child.sendline("SELECT 'no header' AS hidden_name;")
        child.expect("│ no header │")
        _at_prompt(child)
        assert "hidden_name │" not in child.before
        child.sendline(".headers on")
        _at_prompt(child)
        child.sendline(".describe saved")
        child.expect("column_name")
        child.expect("DOUBLE")
        _at_prompt(child)
        # Tab on an empty prefix offers names and keywords (a menu with their kinds)
        child.send("SELECT * FROM ")
        child.send("\t")
        child.expect("variable")
        child.expect("table")
        child.sendcontrol("c")
        _new_prompt(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
