"""A file-writing command killed (SIGKILL) mid-write leaves the previous file intact: every file
pdbq writes goes through one atomic writer (temporary file in the same folder, fsync, rename).

Each case runs a child that first writes a reference copy of the new content, then writes the
target over and over; the parent reads the target back-to-back meanwhile (a reader must only
ever see the old or the complete new content), then kills the child mid-loop and checks that
the target holds either the old content or the complete new content, never a truncation."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pdbq.files import TMP_MARK, atomic_path, atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
OLD = "previous content\n"
_WATCH_SECONDS = 3.0  # the target is read back-to-back this long while the child rewrites it
_FIRST_WRITE_WAIT = 200.0  # seconds a busy machine may take before the child first writes (60 s ran out at load 20)

_MODEL = """
import sys, pdbq
db = pdbq.connect()
db.execute("CREATE TABLE t AS SELECT * FROM range(4000) r(i); CREATE TABLE p AS SELECT i a, i + 1 b FROM range(3999) r(i)")
db.execute("CREATE VARIABLE v(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t)")
db.execute("CREATE RULE e WEIGHT 0.4 FUNCTION EQUAL AS v(a) = v(b) :- p(a, b); CREATE RULE u WEIGHT 0.2 FUNCTION ISTRUE AS v(i) :- t(i)")
"""

CASES = {
    "export_uai": ("model.uai", _MODEL + """
def write(path):
    db.execute(f"EXPORT UAI v TO '{path}'")
"""),
    "copy": ("answer.csv", _MODEL + """
def write(path):
    db.execute(f"COPY (SELECT x.i, PROB(x) AS p FROM v x USING EXACT) TO '{path}' (HEADER)")
"""),
    "dedupe_out": ("clusters.csv", """
import sys
from pdbq.linkage.cli import main
def write(path):
    assert main([sys.argv[3], "--id", "id", "--fields", "name", "--out", path]) == 0
"""),
}

_DRIVER = """
ref, target = sys.argv[1], sys.argv[2]
write(ref)
print("ready", flush=True)
for _ in range(200):
    write(target)
"""


def _records(tmp_path: Path) -> Path:
    rows = ["id,name"] + [f"{i},name{i % 700}" for i in range(3000)]
    p = tmp_path / "records.csv"
    p.write_text("\n".join(rows) + "\n")
    return p


def _kill_mid_write(tmp_path: Path, case: str) -> tuple[str, str, list[int]]:
    """(the target after the kill, the complete new content, sizes of any partial target seen
    while the child was rewriting it: a reader must never see one)."""
    name, body = CASES[case]
    target = tmp_path / name
    ref = tmp_path / ("ref-" + name)
    target.write_text(OLD)
    script = textwrap.dedent(body) + textwrap.dedent(_DRIVER)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    child = subprocess.Popen([sys.executable, "-c", script, str(ref), str(target), str(_records(tmp_path))],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    partial: list[int] = []
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        new = ref.read_text()
        writes = 0
        start = time.monotonic()
        while child.poll() is None and time.monotonic() < start + _FIRST_WRITE_WAIT and (
                time.monotonic() < start + _WATCH_SECONDS or not writes):
            seen = target.read_text()
            if seen not in (OLD, new):
                partial.append(len(seen))
            writes += any(TMP_MARK in p.name for p in tmp_path.iterdir()) or seen == new
        os.kill(child.pid, signal.SIGKILL)
        assert writes, "the child never began writing the target"
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL
    return target.read_text(), new, partial


@pytest.mark.timeout(600)  # a busy machine: two full writes before the kill can take minutes
@pytest.mark.parametrize("case", sorted(CASES))
def test_killed_write_leaves_the_previous_file(tmp_path, case):
    got, new, partial = _kill_mid_write(tmp_path, case)
    assert len(new) > 10_000  # big enough that a write takes a while
    assert not partial, f"{case}: a reader saw a partial target ({partial[:5]} chars of {len(new)})"
    assert got in (OLD, new), f"{case}: target holds {len(got)} chars, neither the old file nor the new one"


def test_atomic_path_keeps_the_target_when_the_writer_fails(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text(OLD)
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("writer failed")
    assert target.read_text() == OLD
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]  # no temporary file left
    atomic_write_text(target, "new")
    assert target.read_text() == "new"
