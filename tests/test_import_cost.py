"""Importing pdbq, and asking its commands for help, loads only what they use: neither the
engine (numba and its kernels, DuckDB, Arrow) nor Dask, pandas or matplotlib, which the features
that need them import on first use. Checked by the modules a fresh interpreter holds afterwards
(not by timing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("numba", "llvmlite", "duckdb", "pyarrow", "pandas", "dask", "distributed", "matplotlib", "scipy",
         "sqlglot", "prompt_toolkit")
PROBE = """
import json, sys, io, contextlib
code = 0
with contextlib.redirect_stdout(io.StringIO()) as out:
    {body}
print(json.dumps({{"loaded": sorted(m for m in {heavy!r} if m in sys.modules), "code": code}}))
"""


def _loaded(body: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", PROBE.format(body=body, heavy=HEAVY)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.splitlines()[-1])


def test_import_pdbq_loads_no_heavy_module():
    got = _loaded("import pdbq; pdbq.PdbqError, pdbq.ParseError, pdbq.CorefInputError, pdbq.__version__")
    assert got["loaded"] == [], got


@pytest.mark.parametrize("argv", [["--help"], ["dedupe", "--help"], ["--version"]])
def test_help_does_not_import_the_engine(argv):
    body = ("from pdbq.shell.cli import main\n    try:\n        main(%r)\n    except SystemExit as e:\n"
            "        code = e.code" % (argv,))
    got = _loaded(body)
    assert got["code"] == 0 and got["loaded"] == [], got


def test_names_resolve_on_first_use():
    got = _loaded("import pdbq; pdbq.connect, pdbq.dedupe, pdbq.link, pdbq.FieldSpec")
    assert "duckdb" in got["loaded"] and "numba" in got["loaded"]
    assert not {"pandas", "dask", "distributed", "matplotlib"} & set(got["loaded"]), got


def test_every_public_name_resolves():
    import pdbq

    for name in pdbq.__all__:
        assert getattr(pdbq, name) is not None, name
    assert pdbq.coref.metrics.b_cubed is not None  # a subpackage used as an attribute
    with pytest.raises(AttributeError):
        pdbq.no_such_name  # noqa: B018


def test_a_small_dedupe_run_does_not_import_pandas(tmp_path):
    # pandas costs 35 MiB of a small run's peak memory: only Result.df() and the like need it
    path = tmp_path / "people.csv"
    from pdbq.linkage.warmup import _records  # the warm-up's 40 records: names with typos, cities, years

    path.write_text("id,name,city,born\n" + "".join(f"{i},{n},{c},{b}\n" for i, n, c, b in _records()))
    body = ("from pdbq.shell.cli import main\n    try:\n        code = main(['dedupe', %r, '--id', 'id', "
            "'--fields', 'name,city,born'])\n    except SystemExit as e:\n        code = e.code" % str(path))
    got = _loaded(body)
    assert got["code"] == 0 and "pandas" not in got["loaded"], got
