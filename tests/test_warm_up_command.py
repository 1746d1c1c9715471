"""``pdbq warm-up``: compiles (or loads) the kernels of the tasks asked and of those they build on,
in worker processes, says what each did, and refuses a task it does not know."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pdbq.shell.cli import main
from pdbq.shell.warm import TASKS, _closure

ROOT = Path(__file__).resolve().parents[1]


def test_a_task_brings_what_it_builds_on_in_order():
    assert _closure(["wide-moves"]) == ["core", "wide", "wide-moves"]
    assert _closure(["dedupe"]) == ["dedupe"]
    for task, (_, needs) in TASKS.items():
        order = _closure([task])
        assert all(order.index(n) < order.index(task) for n in needs)


@pytest.mark.parametrize("argv, message", [(["--only", "core,everything"], "everything: not a warm-up task"),
                                           (["--jobs", "0"], "--jobs 0")])
def test_bad_arguments_are_refused_before_any_work(argv, message, capsys):
    assert main(["warm-up", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_warm_up_fills_the_cache_it_is_given(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "pdbq", "warm-up", "--only", "anneal", "--jobs", "2"], env=env,
                       capture_output=True, text=True, timeout=1700)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = p.stderr.splitlines()
    assert lines[0].startswith("pdbq warm-up: compiling pdbq's kernels") and "2 tasks" in lines[0]
    for task in ("core", "anneal"):
        assert any(line.split()[:1] == [task] and "compiled" in line for line in lines), p.stderr
    assert lines[-1].startswith("pdbq warm-up: done")
    assert "CompileNotice" not in p.stderr  # the command's own lines say it, not a Python warning
    assert any(f.suffix == ".nbi" for f in tmp_path.rglob("*"))
    again = subprocess.run([sys.executable, "-m", "pdbq", "warm-up", "--only", "anneal"], env=env,
                           capture_output=True, text=True, timeout=1700)
    assert again.returncode == 0 and again.stderr.count("already in the cache") == 2, again.stderr
