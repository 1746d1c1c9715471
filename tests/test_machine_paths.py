"""No file of the repository names an absolute path of a development machine: data paths go through
examples/shared_data.py (``$PDBQ_TEST_DATA`` or ``shared/data`` beside the checkout)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Built from parts so that this file does not name what it looks for.
_MACHINE = re.compile("(?<![\\w.~])/(" + "|".join(["wo" + "rk", "ro" + "ot", "ho" + "me/[a-z]"]) + ")/")


def _tracked() -> list[Path]:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / name for name in out.stdout.decode().split("\0") if name]


def test_no_tracked_file_names_a_machine_path() -> None:
    found = []
    for path in _tracked():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary (images) or removed in the work tree
        for number, line in enumerate(text.splitlines(), 1):
            if _MACHINE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not found, "absolute machine paths:\n" + "\n".join(found)


def test_the_check_sees_a_machine_path() -> None:
    assert _MACHINE.search("data in /" + "work/shared/data") and _MACHINE.search("see /" + "root/x")
    assert not _MACHINE.search("docs/work/x and ../shared/data and https://example.org/home/x")
