"""A fresh install: with an empty numba cache the getting-started demo answers every row on its
first run, says that it compiles pdbq's kernels *before* the wait (not after it), and the
compilation does not eat the queries' time_limit (the demo's QAM query has time_limit = 5 s;
compiling takes longer than that)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTICE = "pdbq: compiling"


def timed_lines(cmd: list[str], cwd: Path, env: dict, timeout: float) -> tuple[int, list[tuple[float, str]], float]:
    """Run ``cmd`` with stdout and stderr merged; each line it prints with the second it arrived
    (from the start), the exit status and the time it ended."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[tuple[float, str]] = []

    def read() -> None:
        for line in p.stdout:
            lines.append((time.monotonic() - t0, line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    rc = p.wait(timeout=timeout)
    reader.join(timeout=60)
    return rc, lines, time.monotonic() - t0


def longest_silence(lines: list[tuple[float, str]], end: float) -> tuple[float, str]:
    """The longest time nothing was printed, and the line printed just before it."""
    best, before, last_t, last = 0.0, "(start)", 0.0, "(start)"
    for t, text in lines + [(end, "(end)")]:
        if t - last_t > best:
            best, before = t - last_t, last
        last_t, last = t, text
    return best, before


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_empty_numba_cache_first_run_answers_and_says_so_before_the_wait(tmp_path):
    (tmp_path / "numba").mkdir()
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    rc, lines, end = timed_lines([sys.executable, "-m", "pdbq", "-f", str(ROOT / "examples" / "movies.sql")],
                                 tmp_path, env, 1700)
    out = "\n".join(text for _, text in lines)
    assert rc == 0, out[-3000:]
    assert "NULL" not in out, out[-3000:]
    assert "ended the query before any sample" not in out
    # said when it starts, summed up once when it ends
    starts = [i for i, (_, text) in enumerate(lines) if text.startswith(NOTICE)]
    ends = [i for i, (_, text) in enumerate(lines) if "first use on this machine: compiled pdbq's kernels" in text]
    assert starts and ends and starts[0] < ends[0], out[-3000:]
    # the compilation is the long wait, and a notice precedes it: whatever the machine's load, the
    # longest time the shell printed nothing begins right after a compile notice
    silence, before = longest_silence(lines, end)
    assert before.startswith(NOTICE), f"{silence:.1f} s of silence after {before!r}\n{out[-3000:]}"
    assert any(f.suffix == ".nbi" for f in (tmp_path / "numba").rglob("*"))  # cached for the next run
