"""Shared fixtures. Keep this small: fixtures used by one file belong in that file."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import pdbq

ROOT = Path(__file__).resolve().parents[1]


def _shared_data():
    """examples/shared_data.py, the one place data paths are looked up (loaded by path: putting
    examples/ on sys.path would let its scripts shadow other modules)."""
    spec = importlib.util.spec_from_file_location("pdbq_examples_shared_data", ROOT / "examples" / "shared_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_SHARED = _shared_data()
DATA_ENV = _SHARED.DATA_ENV
DATA_ROOT = _SHARED.data_root()
UAI_DATA = DATA_ROOT / "uai2014"
#: The skip reason of every test that needs the shared data (counted in the summary).
MISSING_DATA = f"test data not found at {DATA_ROOT} (set {DATA_ENV})"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line saying how many tests skipped because the shared data is missing."""
    skipped = terminalreporter.stats.get("skipped", [])
    n = sum(1 for r in skipped if MISSING_DATA in str(getattr(r, "longrepr", "")))
    if n:
        terminalreporter.write_line(
            f"{n} test{'s' if n != 1 else ''} skipped: test data not found at {DATA_ROOT}; "
            f"set {DATA_ENV}=/path/to/shared/data to run them", yellow=True,
        )

# A small movie model's data: three movies, people who tweet about them, one known fan.
MOVIES_SQL = """
CREATE TABLE movies AS SELECT * FROM (VALUES ('Up'), ('Twilight'), ('Avengers')) t(movie);
CREATE TABLE tweets AS SELECT * FROM (VALUES
    ('Up', 'bart'), ('Twilight', 'lisa'), ('Up', 'bot'), ('Avengers', 'lisa')) t(movie, person);
CREATE TABLE people AS SELECT DISTINCT person FROM tweets;
CREATE TABLE labels AS SELECT * FROM (VALUES ('bart', TRUE)) t(person, fan);
"""

# The model over MOVIES_SQL: two boolean variable relations and one rule.
MOVIES_MODEL = """
CREATE VARIABLE is_popular(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies);
CREATE VARIABLE is_fan(person TEXT) DOMAIN BOOLEAN
    FROM (SELECT person FROM people)
    EVIDENCE (SELECT person, fan FROM labels);
CREATE RULE fans_vote WEIGHT 0.8 SEMANTICS RATIO AS is_popular(^m) :- tweets(m, p), is_fan(p), p <> 'bot';
"""

# Tokens and their words: the data of the categorical (tag) and entity models of the catalog tests.
TOKENS_SQL = """
CREATE TABLE tokens AS SELECT * FROM range(4) t(id);
CREATE TABLE words AS SELECT * FROM (VALUES (0, 'Bart'), (1, 'Simpson'), (2, 'in'), (3, 'Springfield')) t(token, word);
"""

# Five names, two near-duplicate pairs: a DOMAIN CLUSTER relation whose MAP clustering is
# {1, 2}, {3, 4}, {5} (cluster queries, subsampling, distributed rounds).
NAMES_CLUSTER_SQL = """
CREATE TABLE r AS SELECT * FROM (VALUES (1, 'anna smith'), (2, 'anna smyth'), (3, 'bob jones'),
    (4, 'bob jonas'), (5, 'carl')) t(id, name);
CREATE TABLE p AS SELECT a.id AS a, b.id AS b, jaro_winkler_similarity(a.name, b.name) AS sim
    FROM r a JOIN r b ON a.id < b.id;
CREATE VARIABLE e(id BIGINT) DOMAIN CLUSTER FROM (SELECT id FROM r);
CREATE RULE aff WEIGHT = 10 * (sim - 0.85) FUNCTION EQUAL AS e(a) = e(b) :- p(a, b, sim);
"""


BLOCKED_CLUSTER_SQL = """
CREATE TABLE r AS SELECT i AS id, ['anna', 'bob', 'carl', 'dora', 'emil', 'fay'][i % 6 + 1] || ' ' ||
    ['smith', 'smyth', 'jones'][i // 6 % 3 + 1] AS name FROM range(36) t(i);
CREATE TABLE p AS SELECT a.id AS a, b.id AS b, jaro_winkler_similarity(a.name, b.name) AS sim
    FROM r a JOIN r b ON a.id < b.id AND a.id % 6 = b.id % 6;
CREATE VARIABLE e(id BIGINT) DOMAIN CLUSTER FROM (SELECT id FROM r);
CREATE RULE aff WEIGHT = 10 * (sim - 0.9) FUNCTION EQUAL AS e(a) = e(b) :- p(a, b, sim);
"""
# 36 records in six blocks of candidate pairs (id % 6): separate components, so sharded rounds apply

PEOPLE = [
    (1, "John Smith", "12 Oak Street", "1980"),
    (2, "Jon Smith", "12 Oak St", "1980"),
    (3, "John Smyth", "12 Oak Street", "1980"),
    (4, "Mary Jones", "7 Elm Road", "1975"),
    (5, "Mary Jones", "7 Elm Rd", "1975"),
    (6, "Peter Brown", "99 Pine Avenue", "1990"),
    (7, "Mary Johnson", "300 Lake Drive", "1962"),
    (8, "Peter Browne", "99 Pine Ave", "1990"),
    (9, "Anna Lee", "5 Birch Lane", "2001"),
]
PEOPLE_FIELDS = ["name", "address", "born"]
# nine person records (id, name, address, born) for the linkage front door's stored-model tests


@pytest.fixture
def movies_db():
    """An in-memory database holding the movie tables (no model yet)."""
    with pdbq.connect() as db:
        db.execute(MOVIES_SQL)
        yield db


@pytest.fixture
def movies_model(movies_db):
    """``movies_db`` with MOVIES_MODEL defined."""
    movies_db.execute(MOVIES_MODEL)
    return movies_db


class _ProcessCluster:
    """A local cluster of 2 worker processes, started again whenever a killed worker has not
    come back (a nanny does not always restart it)."""

    def __init__(self) -> None:
        self.cluster = self.client = None

    def get(self):
        distributed = pytest.importorskip("distributed")
        if self.client is not None:
            try:
                self.client.wait_for_workers(2, timeout=20)
                return self.client
            except Exception:  # noqa: BLE001 - a worker stayed dead: start afresh
                self.close()
        self.cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
        self.client = distributed.Client(self.cluster)
        self.client.wait_for_workers(2, timeout=60)
        return self.client

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.cluster.close()
        self.cluster = self.client = None


@pytest.fixture(scope="session")
def _process_cluster():
    holder = _ProcessCluster()
    yield holder
    holder.close()


@pytest.fixture
def process_client(_process_cluster):
    """A Dask client of a local cluster of 2 worker processes, shared by the tests that kill a
    worker: one cluster start for all of them unless a killed worker does not come back."""
    return _process_cluster.get()


def kill_busy_worker(client, key_part: str, delay: float = 0.3, within: float = 60.0):
    """Start a thread that kills (SIGKILL) the first worker process seen running a task whose key
    contains ``key_part``, ``delay`` seconds after it is seen; returns (thread, killed list)."""
    import os
    import signal
    import threading
    import time

    pids = client.run(os.getpid)
    killed: list[str] = []

    def run() -> None:
        end = time.monotonic() + within
        while time.monotonic() < end:
            try:
                processing = client.processing()
            except Exception:  # noqa: BLE001 - the scheduler's view can be missing while a worker restarts
                time.sleep(0.02)
                continue
            for worker, keys in processing.items():
                if worker in pids and any(key_part in str(k) for k in keys):
                    time.sleep(delay)  # mid-task, not before it started
                    killed.append(worker)
                    os.kill(pids[worker], signal.SIGKILL)
                    return
            time.sleep(0.02)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, killed


@pytest.fixture(autouse=True)
def _quiet_machine_for_auto(monkeypatch):
    """AUTO's hedge sees a quiet machine of the cost model's speed in every test (its CPU-share
    probe reads a full core, its calibration is fresh), so what AUTO chooses never depends on
    the load of the machine running the tests; tests of the hedge inject their own share and
    calibration (tests/test_auto_hedge.py)."""
    from pdbq.answers import engine, hedge  # noqa: PLC0415

    fresh = hedge.Calibration()
    monkeypatch.setattr(hedge, "probe_share", lambda seconds=hedge.PROBE_SECONDS: 1.0)
    monkeypatch.setattr(hedge, "CALIBRATION", fresh)
    monkeypatch.setattr(engine, "CALIBRATION", fresh)
