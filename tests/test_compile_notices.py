"""The kernels' one-time compilation is said before the wait, reported while it runs, and summed
up in a query's ``notices`` (never in its ``warnings``, which say what is wrong with an answer).

Each test compiles a function of its own (a new numba dispatcher, never in numba's cache), so a
compilation happens however warm the machine's cache is."""

from __future__ import annotations

import io
import random

import numba
import numpy as np
import pytest

import pdbq
from pdbq import progress as progress_module
from pdbq.planning import execute as execute_module
from pdbq.progress import CompileWatch, Progress, ProgressBar, format_progress, kernel_family, watch_compiles


@pytest.fixture
def at_once(monkeypatch):
    """Announce every compilation as it starts (these tests' kernels compile in a blink)."""
    monkeypatch.setattr(progress_module, "ANNOUNCE_AFTER", 0.0)


def _fresh_kernel():
    """A numba function nobody compiled yet (a new dispatcher: no cache, no earlier overload)."""
    k = random.randrange(1, 1 << 30)

    @numba.njit(cache=False)
    def kernel(x):
        s = 0.0
        for i in range(x.size):
            s += x[i] * k
        return s

    return kernel


def test_compilation_is_announced_before_it_ends_and_summed_up_after(at_once):
    kernel = _fresh_kernel()
    seen: list[tuple[Progress, int]] = []
    with watch_compiles(lambda p: seen.append((p, len(kernel.overloads)))) as watch:
        assert kernel(np.ones(3)) > 0
    notices = [(p, compiled) for p, compiled in seen if p.notice]
    assert len(notices) == 2, seen
    first, compiled_then = notices[0]
    assert compiled_then == 0, "the first notice came after the compilation, not before it"
    assert first.phase == "compiling" and "compiling" in first.notice and "cached for later runs" in first.notice
    assert "first use on this machine: compiled pdbq's kernels" in notices[1][0].notice
    assert watch.notices == [notices[1][0].notice]
    with watch_compiles(seen.append) as again:  # compiled now: nothing to say
        kernel(np.ones(3))
    assert again.notices == []


def test_nested_watches_make_one_summary(at_once):
    kernel = _fresh_kernel()
    with watch_compiles() as outer:
        with watch_compiles() as inner:
            kernel(np.ones(2))
        assert inner is outer
    assert len(outer.notices) == 1


def test_a_compilation_shorter_than_the_threshold_is_not_worth_a_line(monkeypatch):
    monkeypatch.setattr(progress_module, "ANNOUNCE_AFTER", 600.0)
    kernel = _fresh_kernel()
    seen: list[Progress] = []
    with watch_compiles(seen.append) as watch:
        kernel(np.ones(3))
    assert [p for p in seen if p.notice] == [] and watch.notices == []


def test_a_long_compilation_is_announced_while_it_runs(monkeypatch):
    # the ticker says it once the threshold has passed, before the compilation ends (polled: a
    # loaded machine may run the ticker late, but never after the end it has not seen yet)
    import time

    monkeypatch.setattr(progress_module, "ANNOUNCE_AFTER", 0.05)
    seen: list[Progress] = []
    w = CompileWatch(seen.append)
    w.expect("the test's kernels", 3.0)
    w._begin("graph")
    give_up = time.monotonic() + 120
    while not any(p.notice for p in seen) and time.monotonic() < give_up:
        time.sleep(0.05)
    notices = [p.notice for p in seen if p.notice]
    assert notices and notices[0].startswith("pdbq: compiling the test's kernels") and "about 3 s" in notices[0]
    w._end("graph", "m.k")
    summary = w.settle()
    assert summary is not None and "graph" in summary and w.notices == [summary]
    assert w.kernels and list(w.kernels) == ["m.k"]


def test_notice_lines_reach_a_stream_that_is_not_a_terminal():
    out = io.StringIO()
    bar = ProgressBar(out)  # not a terminal: no bar is drawn
    bar(Progress("sampling", 5, 10))
    bar(Progress("compiling", 0, notice="pdbq: compiling X ..."))
    assert out.getvalue() == "pdbq: compiling X ...\n"
    quiet = ProgressBar(io.StringIO(), notices=False)
    quiet(Progress("compiling", 0, notice="x"))
    assert quiet._stream.getvalue() == ""
    assert "Gibbs sampling kernels" in format_progress(Progress("compiling", 3, detail="Gibbs sampling kernels"))


def test_kernel_families_name_the_modules():
    assert kernel_family("pdbq.inference.exact.elimination") == "exact inference"
    assert kernel_family("pdbq.inference.mcmc.anneal") == "annealing"
    assert kernel_family("pdbq.coref.tokens") == "entity resolution"
    assert kernel_family("somebody.else") == "other"


@pytest.fixture
def db():
    d = pdbq.connect()
    d.execute("""
        CREATE TABLE people(name TEXT); INSERT INTO people VALUES ('a'), ('b'), ('c');
        CREATE TABLE friends(a TEXT, b TEXT); INSERT INTO friends VALUES ('a', 'b'), ('b', 'c');
        CREATE VARIABLE smokes(name TEXT) DOMAIN BOOLEAN FROM (SELECT name FROM people);
        CREATE RULE s WEIGHT 0.8 FUNCTION EQUAL AS smokes(a) = smokes(b) :- friends(a, b);
    """)
    yield d
    d.close()


def test_a_query_that_compiles_says_so_in_notices_not_warnings(db, monkeypatch, at_once):
    kernel = _fresh_kernel()
    real = execute_module.warm_up

    def warm_up(tier):  # a warm-up that has something to compile, as on a fresh install
        kernel(np.ones(2))
        return real(tier)

    monkeypatch.setattr(execute_module, "warm_up", warm_up)
    seen: list[Progress] = []
    r = db.execute("SELECT s.name, PROB(s) FROM smokes AS s USING EXACT", progress=seen.append)
    assert r.diagnostics["warnings"] == []
    assert len(r.diagnostics["notices"]) == 1 and "compiled pdbq's kernels" in r.diagnostics["notices"][0]
    assert [p.notice is not None for p in seen if p.phase == "compiling"][0], "no notice before compiling"
    again = db.execute("SELECT s.name, PROB(s) FROM smokes AS s USING EXACT")
    assert again.diagnostics["notices"] == [] and again.diagnostics["warnings"] == []


LOADED = """
import json, sys
import pdbq
from numba.core.registry import CPUDispatcher
db = pdbq.connect()
db.execute('''CREATE TABLE t(i INT); INSERT INTO t VALUES (1), (2), (3), (4);
CREATE VARIABLE x(i INT) DOMAIN BOOLEAN FROM (SELECT i FROM t);
CREATE RULE r WEIGHT 0.5 FUNCTION EQUAL AS x(a) = x(b) :- t(a), t(b), a < b;''')
db.execute(sys.argv[1])
loaded = sorted(f"{m}.{k}" for m, mod in list(sys.modules.items()) if m.startswith("pdbq.")
                for k, v in vars(mod).items() if isinstance(v, CPUDispatcher) and v.overloads)
print(json.dumps(loaded))
"""


def _kernels_loaded(query: str) -> list[str]:
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    p = subprocess.run([sys.executable, "-c", LOADED, query], env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.splitlines()[-1])


@pytest.mark.timeout(1800)
def test_a_query_loads_only_the_kernels_of_the_method_it_runs():
    exact = _kernels_loaded("SELECT v.i, PROB(v) FROM x AS v USING EXACT")
    assert exact and not [k for k in exact if k.startswith(("pdbq.inference.mcmc.", "pdbq.inference.query_aware."))], exact
    gibbs = _kernels_loaded("SELECT v.i, PROB(v) FROM x AS v USING GIBBS WITH (steps = 2000, seed = 1)")
    assert any(k.startswith("pdbq.inference.mcmc.kernels.") for k in gibbs), gibbs
    assert not [k for k in gibbs if k.startswith("pdbq.inference.exact.upward_kernel.")], gibbs


def _compile_notices(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, pdbq.CompileNotice)]


def test_a_python_query_that_compiles_warns_before_the_wait(db, monkeypatch, at_once):
    # no progress callback (a plain Python caller): the notice is a CompileNotice warning issued
    # when the compilation starts, before the kernel exists; the answer's warnings stay empty
    import warnings

    kernel = _fresh_kernel()
    real = execute_module.warm_up
    overloads_when_warned: list[int] = []

    def warm_up(tier):
        kernel(np.ones(2))
        return real(tier)

    def record(message, category, *args, **kwargs):
        overloads_when_warned.append(len(kernel.overloads))
        caught.append(warnings.WarningMessage(message, category, *args, **kwargs))

    monkeypatch.setattr(execute_module, "warm_up", warm_up)
    caught: list = []
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        monkeypatch.setattr(warnings, "showwarning", record)
        r = db.execute("SELECT s.name, PROB(s) FROM smokes AS s USING EXACT")
    notices = _compile_notices(caught)
    assert len(notices) == 1 and notices[0].startswith("pdbq: compiling"), [str(w.message) for w in caught]
    assert overloads_when_warned[0] == 0, "the notice came after the compilation, not before it"
    assert r.diagnostics["warnings"] == [] and len(r.diagnostics["notices"]) == 1


def test_the_python_notice_is_filterable_and_not_said_twice_with_a_callback(db, monkeypatch, at_once):
    import warnings

    real = execute_module.warm_up
    kernels = [_fresh_kernel() for _ in range(2)]

    def warm_up(tier):
        kernels[0 if calls else 1](np.ones(2))
        calls.append(tier)
        return real(tier)

    calls: list[str] = []
    monkeypatch.setattr(execute_module, "warm_up", warm_up)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=pdbq.CompileNotice)
        db.execute("SELECT s.name, PROB(s) FROM smokes AS s USING EXACT")
    assert _compile_notices(caught) == []
    seen: list[Progress] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        db.execute("SELECT s.name, PROB(s) FROM smokes AS s USING EXACT", progress=seen.append)
    assert _compile_notices(caught) == [] and [p for p in seen if p.notice], "the callback, not a warning"


def test_without_a_callback_a_long_compilation_warns_while_it_runs(monkeypatch):
    # the ticker issues the warning once the threshold has passed, while the compilation runs
    # (polled: a loaded machine may run the ticker late, but the compilation has not ended)
    import time
    import warnings

    monkeypatch.setattr(progress_module, "ANNOUNCE_AFTER", 0.05)
    caught: list = []
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        monkeypatch.setattr(warnings, "showwarning", lambda message, category, *a, **k: caught.append((message, category)))
        w = CompileWatch()
        w.expect("the test's kernels", 3.0)
        w._begin("graph")
        give_up = time.monotonic() + 120
        while not caught and time.monotonic() < give_up:
            time.sleep(0.05)
        w._end("graph", "m.k")
        summary = w.settle()
    assert [c for _, c in caught] == [pdbq.CompileNotice]
    assert str(caught[0][0]).startswith("pdbq: compiling the test's kernels") and "about 3 s" in str(caught[0][0])
    assert summary is not None and w.notices == [summary]


def test_a_terminal_bar_is_redrawn_while_a_compilation_runs(monkeypatch):
    # what keeps the shell from a silent pause: reports reach the bar every tick during the
    # compilation, not only its two notices (counted, not timed: we wait for three redraws)
    import time

    monkeypatch.setattr(progress_module, "ANNOUNCE_AFTER", 0.0)
    seen: list[Progress] = []
    w = CompileWatch(seen.append)
    w._begin("graph")
    give_up = time.monotonic() + 120
    while len([p for p in seen if p.notice is None]) < 3 and time.monotonic() < give_up:
        time.sleep(0.05)
    w._end("graph", "m.k")
    w.settle()
    ticks = [p for p in seen if p.notice is None]
    assert len(ticks) >= 3 and all(p.phase == "compiling" and p.detail == "graph kernels" for p in ticks)
    assert seen[0].notice and seen[0].notice.startswith("pdbq: compiling")


def test_a_python_dedupe_that_compiles_warns_before_the_wait(monkeypatch, tmp_path, at_once):
    import warnings

    from pdbq.linkage import front

    kernel = _fresh_kernel()
    real = front.load_records

    def load_records(*a, **k):  # something to compile inside the call, as on a fresh install
        kernel(np.ones(2))
        return real(*a, **k)

    monkeypatch.setattr(front, "load_records", load_records)
    path = tmp_path / "people.csv"
    path.write_text("id,name\n1,ann smith\n2,ann smith\n3,bob jones\n4,carl white\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = pdbq.dedupe(str(path), id="id", fields=["name"])
    assert len(_compile_notices(caught)) == 1, [str(w.message) for w in caught]
    assert "entity resolution kernels" in _compile_notices(caught)[0]
    assert not [w for w in res.warnings if "compil" in w]
