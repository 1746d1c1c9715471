"""Every option that multiplies work is bounded, every loop honours the time limit, and tables are
checked against the memory left before they are allocated. Deadline tests assert the bound
generously (the limit plus a wide margin for a loaded machine): a run that ignored its limit
takes minutes, not seconds."""

from __future__ import annotations

import time

import pytest
from conftest import NAMES_CLUSTER_SQL

import pdbq
from pdbq.errors import InferenceError, LearningError, OptionError, ParseError, PdbqError, TimeLimitError

SLACK = 60.0  # seconds beyond the limit a loaded 2-core machine may need; unbounded runs take many minutes


@pytest.fixture(scope="module")
def learn_db():
    db = pdbq.connect()
    db.execute("CREATE TABLE p AS SELECT * FROM range(60) r(i); "
               "CREATE TABLE ev AS SELECT i, i % 3 = 0 AS v FROM range(45) r(i); "
               "CREATE TABLE e AS SELECT i AS a, i + 1 AS b FROM range(59) r(i)")
    db.execute("CREATE VARIABLE v(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM p) EVIDENCE (SELECT i, v FROM ev)")
    db.execute("CREATE RULE r WEIGHT ? FUNCTION ISTRUE AS v(i) :- p(i); "
               "CREATE RULE q WEIGHT ? FUNCTION EQUAL AS v(a) = v(b) :- e(a, b)")
    yield db
    db.close()


def _weights(db):
    return db.execute("SHOW WEIGHTS").fetchall()


HUGE = str(10**400)


@pytest.mark.parametrize("option", ["holdout", "epochs", "learning_rate", "decay", "reg", "time_limit", "average",
                                    "max_weight", "chains", "sweeps", "eval_steps", "seed", "margin"])
def test_learn_options_beyond_any_range_are_option_errors(learn_db, option):
    before = _weights(learn_db)
    with pytest.raises(OptionError, match=f"'{option}'"):
        learn_db.execute(f"LEARN WEIGHTS WITH ({option} = {HUGE})")
    assert _weights(learn_db) == before


@pytest.mark.parametrize("text, pattern", [
    ("threads = 100000", "threads.*at most 1,024"),
    ("chains = 100000", "chains.*at most 1,024"),
    ("epochs = 1e400", "epochs"),
    ("sweeps = 2.5", "whole number"),
    ("decay = 0", r"decay.*\(0, 1\]"),
])
def test_learn_options_out_of_range(learn_db, text, pattern):
    with pytest.raises(OptionError, match=pattern):
        learn_db.execute(f"LEARN WEIGHTS WITH ({text})")


def test_learn_parameter_without_a_value_is_a_parse_error(learn_db):
    with pytest.raises(ParseError, match="no values were given"):
        learn_db.execute("LEARN WEIGHTS WITH (reg = ?)")
    learn_db.execute("LEARN WEIGHTS WITH (reg = ?, epochs = 2)", [0.5])  # bound: accepted


@pytest.mark.parametrize("text", ["sweeps = 100000000", "sweeps = 20000, epochs = 1000000",
                                  "eval_steps = 1e12, holdout = 0.3, epochs = 2", "chains = 1024, sweeps = 2000"])
def test_learn_holds_its_time_limit_inside_epochs(learn_db, text):
    before = _weights(learn_db)
    t0 = time.perf_counter()
    try:
        r = learn_db.execute(f"LEARN WEIGHTS WITH ({text}, time_limit = 1)")
    except LearningError as e:  # no epoch finished in time: an error, the weights kept
        assert "before the first epoch finished" in str(e)
        assert _weights(learn_db) == before
    except TimeLimitError as e:  # a busy machine: the limit ran out while grounding, before any epoch
        assert "ran out while grounding the model to learn from" in str(e), str(e)
        assert _weights(learn_db) == before
    else:
        assert r.fetchall()
    assert time.perf_counter() - t0 < 1 + SLACK


@pytest.mark.parametrize("text, pattern", [
    ("tempering = 4611686018427387904", "tempering.*at most 256"),
    ("tempering = 100000", "tempering.*at most 256"),
    ("chains = 1024, tempering = 64", "chains × tempering"),
    ("steps = 1e400", "steps"),
    ("epsilon = ?", "no values were given"),
])
def test_query_options_multiplying_work_are_bounded(text, pattern):
    with pdbq.connect() as db:
        db.execute("CREATE TABLE t AS SELECT * FROM range(3) r(i)")
        db.execute("CREATE VARIABLE v(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t)")
        db.execute("CREATE RULE b WEIGHT 0.5 FUNCTION ISTRUE AS v(i) :- t(i)")
        with pytest.raises((OptionError, ParseError), match=pattern):
            db.execute(f"SELECT PROB(x) FROM v x USING GIBBS WITH ({text})")


def _grid(db, n: int) -> None:
    db.execute(f"CREATE TABLE n AS SELECT * FROM range({n * n}) r(i); "
               f"CREATE TABLE e AS SELECT i AS a, i + 1 AS b FROM range({n * n}) r(i) WHERE i % {n} < {n - 1} "
               f"UNION ALL SELECT i, i + {n} FROM range({n * n - n}) r(i)")
    db.execute("CREATE VARIABLE v(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM n)")
    db.execute("CREATE RULE eq WEIGHT 0.3 FUNCTION EQUAL AS v(a) = v(b) :- e(a, b)")


@pytest.mark.parametrize("options, pattern", [
    ("USING EXACT WITH (max_table = 4611686018427387904)", "exact inference .* entries .* of memory is available"),
    ("USING GIBBS WITH (steps = 100, blocks = 'auto', block_table = 4611686018427387904)", "an exact block needs .* available"),
])
def test_tables_beyond_the_memory_left_are_refused_before_allocation(monkeypatch, options, pattern):
    import pdbq.memory

    monkeypatch.setattr(pdbq.memory, "available_bytes", lambda: 256 << 10)  # a machine with 256 KiB left
    with pdbq.connect() as db:
        _grid(db, 14)  # induced width about 14: 2^15-entry tables, 1 MiB each with working copies
        with pytest.raises(InferenceError, match=pattern):
            db.execute(f"SELECT PROB(x) FROM v x WHERE x.i < 2 {options}")


def test_block_tables_that_fit_once_but_not_once_per_chain_are_refused(monkeypatch):
    """A block table that fits in the memory left can still not fit once per chain (each chain fills
    its own copy): an InferenceError naming block_table, not numpy's MemoryError."""
    import pdbq.memory
    from pdbq.inference.moves import blocks

    monkeypatch.setattr(pdbq.memory, "available_bytes", lambda: 16 << 20)
    monkeypatch.setattr(blocks, "check_fits", lambda *a, **k: None)  # the block itself passed its own check
    with pdbq.connect() as db:
        _grid(db, 14)
        with pytest.raises(InferenceError, match="block moves for 16 chains.*block_table"):
            db.execute("SELECT PROB(x) FROM v x WHERE x.i < 2 USING GIBBS WITH (steps = 100, chains = 16, "
                       "blocks = 'auto', block_table = 4611686018427387904)")


def test_exact_within_memory_still_answers(monkeypatch):
    import pdbq.memory

    monkeypatch.setattr(pdbq.memory, "available_bytes", lambda: 256 << 10)
    with pdbq.connect() as db:
        _grid(db, 6)
        assert len(db.execute("SELECT PROB(x) FROM v x USING EXACT").fetchall()) == 36


@pytest.mark.parametrize("text, pattern", [
    ("scheduler = 'nonsense'", "scheduler.*address"),
    ("scheduler = 'tcp://a\x00b:1'", "scheduler.*address"),
    ("rounds = 100000000", "rounds.*at most"),
    ("workers = 100000", "workers.*at most"),
])
def test_distributed_options_are_checked_before_any_work(text, pattern):
    with pdbq.connect() as db:
        db.execute(NAMES_CLUSTER_SQL)
        with pytest.raises(OptionError, match=pattern):
            db.execute(f"SELECT MAP(e) FROM e USING ANNEAL WITH ({text})")


def test_unreachable_scheduler_fails_within_the_time_limit():
    pytest.importorskip("distributed")
    with pdbq.connect() as db:
        db.execute(NAMES_CLUSTER_SQL)
        t0 = time.perf_counter()
        with pytest.raises(PdbqError, match="could not reach the Dask scheduler"):
            db.execute("SELECT MAP(e) FROM e USING ANNEAL WITH (scheduler = 'tcp://127.0.0.1:1', time_limit = 1)")
        assert time.perf_counter() - t0 < 1 + SLACK


def test_cancel_stops_anneal_of_a_huge_fixed_length():
    import threading

    from pdbq.progress import CancelToken, Cancelled

    with pdbq.connect() as db:
        db.execute("CREATE TABLE t AS SELECT * FROM range(50) r(i)")
        db.execute("CREATE VARIABLE v(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t)")
        db.execute("CREATE RULE b WEIGHT 0.5 FUNCTION ISTRUE AS v(i) :- t(i)")
        token = CancelToken()
        timer = threading.Timer(1.0, token.cancel)
        timer.start()
        t0 = time.perf_counter()
        try:
            with pytest.raises(Cancelled):
                db.execute("SELECT MAP(x) FROM v x USING ANNEAL WITH (seed = 1, steps = 4611686018427387904)", cancel=token)
        finally:
            timer.cancel()
        assert time.perf_counter() - t0 < 1 + SLACK


@pytest.mark.parametrize("stop", ["cancel", "time_limit"])
def test_a_huge_fixed_tempered_run_with_jumps_and_blocks_ends_promptly(stop):
    # a cycle of this tiny model is a dozen updates, so one round (up to 2^20 updates) is ~10^5
    # cycles of Python: minutes, with the cancel checked only between rounds (found by the fuzzer)
    import threading

    from fuzz_corpus import fresh_db

    from pdbq.progress import CancelToken, Cancelled

    moves = "tempering = 2, jumps = 2, blocks = 'auto'"
    db = fresh_db()
    try:
        db.execute(f"SELECT PROB(s) FROM smokes s USING GIBBS WITH (seed = 5, steps = 200, {moves})")  # compiled
        token = CancelToken()
        timer = threading.Timer(1.0, token.cancel)
        t0 = time.perf_counter()
        if stop == "cancel":
            timer.start()
            with pytest.raises(Cancelled):
                db.execute(f"SELECT PROB(s) FROM smokes s USING GIBBS WITH (seed = 5, steps = 99999999999, {moves})",
                           cancel=token)
        else:
            rows = db.execute(f"SELECT PROB(s) FROM smokes s USING GIBBS WITH (seed = 5, steps = 99999999999, "
                              f"time_limit = 1, {moves})").fetchall()
            assert len(rows) == 5
        timer.cancel()
        assert time.perf_counter() - t0 < 1 + SLACK
    finally:
        db.close()


def test_an_in_process_cluster_runs_at_most_64_tasks_per_core(monkeypatch):
    pytest.importorskip("distributed")
    import os

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    with pdbq.connect() as db:
        db.execute(NAMES_CLUSTER_SQL)
        with pytest.raises(OptionError, match="workers.*at most 128 .*in-process.*got 1,024"):
            db.execute("SELECT MAP(e) FROM e USING ANNEAL WITH (workers = 1024, time_limit = 5)")


def test_a_distributed_round_running_at_the_time_limit_is_cancelled():
    # one round of 10^9 sweeps takes many minutes: the limit must end it, not wait for it
    pytest.importorskip("distributed")
    with pdbq.connect() as db:
        db.execute(NAMES_CLUSTER_SQL)
        t0 = time.perf_counter()
        r = db.execute("SELECT MAP(e) FROM e USING ANNEAL WITH (workers = 2, sweeps = 1000000000, time_limit = 1)")
        assert time.perf_counter() - t0 < 1 + SLACK
        assert len(r.fetchall()) == 5
        assert any("before the first of" in w and "starting one" in w for w in r.diagnostics["warnings"]), r.diagnostics


def test_learn_interrupts_a_grounding_still_running_at_its_time_limit():
    # a million groundings take seconds to ground: the limit interrupts the grounding statement
    from pdbq.errors import TimeLimitError

    with pdbq.connect() as db:
        db.execute("CREATE TABLE p AS SELECT * FROM range(1000000) r(i); "
                   "CREATE TABLE ev AS SELECT i, i % 3 = 0 AS v FROM range(500000) r(i); "
                   "CREATE TABLE e AS SELECT i AS a, i + 1 AS b FROM range(999999) r(i)")
        db.execute("CREATE VARIABLE v(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM p) EVIDENCE (SELECT i, v FROM ev)")
        db.execute("CREATE RULE r WEIGHT ? FUNCTION ISTRUE AS v(i) :- p(i); "
                   "CREATE RULE q WEIGHT ? FUNCTION EQUAL AS v(a) = v(b) :- e(a, b)")
        before = _weights(db)
        t0 = time.perf_counter()
        with pytest.raises(TimeLimitError, match="while grounding the model.*previous weights are kept"):
            db.execute("LEARN WEIGHTS WITH (time_limit = 0.2, epochs = 1)")
        assert time.perf_counter() - t0 < 0.2 + SLACK
        assert _weights(db) == before
        assert db.execute("SELECT count(*) FROM p").fetchone() == (1000000,)  # usable after the interrupt


def test_a_holdout_evaluation_cut_by_the_time_limit_is_warned(learn_db):
    r = learn_db.execute("LEARN WEIGHTS WITH (eval_steps = 1e12, holdout = 0.3, epochs = 2, time_limit = 1)")
    assert r.fetchall()
    assert any("holdout evaluation was cut short by time_limit" in w for w in r.diagnostics["warnings"]), \
        r.diagnostics["warnings"]


def test_choosing_blocks_on_a_large_grid_ends_at_the_time_limit_and_on_cancel():
    # the global elimination order of a 110 x 110 grid (Python sets) takes minutes
    import threading

    from pdbq.progress import CancelToken, Cancelled

    with pdbq.connect() as db:
        _grid(db, 110)
        db.execute("SELECT PROB(x) FROM v x WHERE x.i < 2 USING GIBBS WITH (steps = 10)")  # grounded and cached
        t0 = time.perf_counter()
        r = db.execute("SELECT PROB(x) FROM v x WHERE x.i < 2 USING GIBBS WITH (tempering = 2, blocks = 'auto', "
                       "time_limit = 1)")
        assert len(r.fetchall()) == 2
        assert time.perf_counter() - t0 < 1 + SLACK
        assert any("stopped choosing blocks" in w for w in r.diagnostics["warnings"]), r.diagnostics["warnings"]
        token = CancelToken()
        timer = threading.Timer(1.0, token.cancel)
        timer.start()
        t0 = time.perf_counter()
        try:
            with pytest.raises(Cancelled):
                db.execute("SELECT PROB(x) FROM v x WHERE x.i < 2 USING GIBBS WITH (steps = 1000, blocks = 'auto')",
                           cancel=token)
        finally:
            timer.cancel()
        assert time.perf_counter() - t0 < 1 + SLACK


@pytest.mark.parametrize("options, available, pattern", [
    # the remainder's 2^12-entry tables fit once (32 KiB) but not once per chain for 64 chains
    ("cutset = true, cutset_table = 4096, chains = 64", 1 << 20, "cutset sampling for 64 chains.*cutset_table"),
    # a cluster pass keeps per-chain scratch over every variable and factor
    ("clusters = true, chains = 1024", 8 << 20, "cluster moves for 1,024 chains.*lower chains"),
])
def test_per_chain_scratch_beyond_the_memory_left_is_refused(monkeypatch, options, available, pattern):
    import pdbq.memory

    monkeypatch.setattr(pdbq.memory, "available_bytes", lambda: available)
    with pdbq.connect() as db:
        _grid(db, 14)
        with pytest.raises(InferenceError, match=pattern):
            db.execute(f"SELECT PROB(x) FROM v x WHERE x.i < 2 USING GIBBS WITH (steps = 100, {options})")
