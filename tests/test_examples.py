"""The README demo and the examples run and give sensible answers."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pdbq
from pdbq.shell import main as shell_main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
UAI_DATA = ROOT.parent / "shared" / "data" / "uai2014"

# one row of a rendered table: │ name │ number │ [number │]
ROW = re.compile(r"^│\s*(\w+)\s*│\s*([-0-9.e]+)\s*│(?:\s*([-0-9.e]+)\s*│)?\s*$")


def _table_rows(text: str) -> list[list[tuple[str, float, float | None]]]:
    """The (name, number[, number]) rows of every rendered table, per table (a table ends at
    its row count); tables of other shapes give no rows and are left out."""
    tables, current = [], []
    for line in text.splitlines():
        m = ROW.match(line.strip())
        if m:
            current.append((m.group(1), float(m.group(2)), None if m.group(3) is None else float(m.group(3))))
        elif re.match(r"^\d+ rows?$", line.strip()):
            if current:
                tables.append(current)
            current = []
    return tables


def _pdbq_command() -> list[str]:
    """`pdbq` as the README runs it: the console script next to this Python, else `python -m pdbq`."""
    script = Path(sys.executable).with_name("pdbq")
    if script.exists() and os.access(script, os.X_OK):
        return [str(script)]
    found = shutil.which("pdbq")
    return [found] if found else [sys.executable, "-m", "pdbq"]


def test_readme_demo_prints_probabilities_with_standard_errors():
    out = subprocess.run(
        [*_pdbq_command(), "-f", str(EXAMPLES / "movies.sql")],
        capture_output=True, text=True, timeout=180, cwd=ROOT, stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr
    assert "Error" not in out.stderr, out.stderr
    (movies,) = [t for t in _table_rows(out.stdout) if any(r[0] == "Twilight" for r in t)]
    by_title = {name: (p, se) for name, p, se in movies}
    assert set(by_title) == {"Up", "Heat", "Twilight", "Amelie", "Cars"}  # WHERE title <> 'Avengers'
    for p, se in by_title.values():
        assert 0.0 < p < 1.0 and se is not None and 0.0 <= se < 0.01, out.stdout
    # the model says something: four tweeting fans beat one bot, and the bot does not count
    assert by_title["Up"][0] > by_title["Twilight"][0] > by_title["Cars"][0]
    assert [p for _, p, _ in movies] == sorted((p for _, p, _ in movies), reverse=True)  # ORDER BY p DESC
    assert "query variables |x_q|" in out.stdout  # the EXPLAIN ran


def test_smokers_through_the_shell(capsys):
    script = EXAMPLES / "smokers.sql"
    assert shell_main(["--no-progress", "-f", str(script)]) == 0
    out = capsys.readouterr().out
    tables = _table_rows(out)
    gibbs = {name: (p, se) for name, p, se in tables[0]}  # query 1: who smokes
    assert gibbs["Anna"] == (1.0, 0.0) and gibbs["Helen"] == (0.0, 0.0)  # evidence
    # the sampled answers agree with exact inference within their standard errors
    with pdbq.connect() as db:
        db.execute(script.read_text())
        exact = dict(db.execute("SELECT s.person, PROB(s) FROM smokes s USING EXACT").fetchall())
    for person, (p, se) in gibbs.items():
        assert abs(p - exact[person]) <= 5 * se + 0.0015, (person, p, se, exact[person])  # + printed rounding
    assert len({round(p, 2) for p, _ in gibbs.values()}) >= 5  # friends differ: not a flat answer
    # learning that Bob has cancer makes his smoking more likely
    (bob_given,) = [p for t in tables for name, p, se in t if name == "Bob" and len(t) == 1]
    assert bob_given > exact["Bob"] + 0.05


@pytest.mark.skipif(not UAI_DATA.is_dir(), reason=f"UAI test data not found at {UAI_DATA}")
def test_uai_example_matches_the_published_marginals(capsys):
    spec = importlib.util.spec_from_file_location("uai_example", EXAMPLES / "uai.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["CSP_12", "--seconds", "0.5", "--data", str(UAI_DATA)]) == 0
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines()[2:]]
    errors = {r[3].strip(): float(r[5]) for r in rows}
    assert errors["EXACT"] < 1e-5
    assert errors["GIBBS"] < 0.1
