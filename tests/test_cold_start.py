"""A fresh install: with an empty numba cache the getting-started demo still answers every row on
its first run, the kernel compilation is said once, and it does not eat the queries' time_limit
(the demo's QAM query has time_limit = 5 s; compiling takes longer than that)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_empty_numba_cache_first_run_answers_and_says_so_once(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=str(ROOT))
    (tmp_path / "numba").mkdir()
    p = subprocess.run([sys.executable, "-m", "pdbq", "-f", str(ROOT / "examples" / "movies.sql")], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=1700)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    assert "NULL" not in out, out[-3000:]
    assert "ended the query before any sample" not in out
    assert out.count("first use on this machine: compiled pdbq's kernels") == 1, out[-3000:]
    assert any(f.suffix == ".nbi" for f in (tmp_path / "numba").rglob("*"))  # cached for the next run
