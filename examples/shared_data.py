"""Where the shared data sets (UAI 2014, Cora, Fodors–Zagats, ...) and the reference kernels are:
the one place examples, benchmarks and tests look them up.

* data: ``$PDBQ_TEST_DATA`` when set, else ``shared/data`` beside the checkout, or one level further
  up (a git worktree kept in a folder beside the main checkout);
* reference kernels: ``$PDBQ_REF_BENCH`` when set, else ``shared/bench`` found the same way.

Scripts in subfolders import it after putting this folder on ``sys.path``; tests/conftest.py loads
it by file path.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DATA_ENV", "BENCH_ENV", "data_root", "data_dir", "bench_root"]

DATA_ENV = "PDBQ_TEST_DATA"
BENCH_ENV = "PDBQ_REF_BENCH"
_CHECKOUT = Path(__file__).resolve().parents[1]


def _beside(env: str, *parts: str) -> Path:
    value = os.environ.get(env)
    if value:
        return Path(value).expanduser()
    candidates = [_CHECKOUT.parent.joinpath(*parts), _CHECKOUT.parent.parent.joinpath(*parts)]
    return next((c for c in candidates if c.is_dir()), candidates[0])


def data_root() -> Path:
    """The shared data folder (it may not exist: callers say so and skip)."""
    return _beside(DATA_ENV, "shared", "data")


def data_dir(name: str) -> Path:
    """One data set's folder under `data_root`, e.g. ``data_dir("uai2014")``."""
    return data_root() / name


def bench_root() -> Path:
    """The folder of the reference kernels the benchmarks compare against."""
    return _beside(BENCH_ENV, "shared", "bench")
