"""A cancelled statement ends promptly on every Dask and coreference path (no tight timing:
each run would take minutes or hours uncancelled; the check is "within the cancel + slack")."""

from __future__ import annotations

import threading
import time

import pytest
from conftest import BLOCKED_CLUSTER_SQL, NAMES_CLUSTER_SQL

import pdbq
from pdbq.progress import CancelToken, Cancelled

SLACK = 10.0  # seconds: generous for a loaded 2-core machine, far below the uncancelled runs


def _cancelled_within(db, sql: str, after: float = 1.0) -> float:
    """Run ``sql`` with a cancel ``after`` seconds; assert it raised `Cancelled`; its seconds."""
    token = CancelToken()
    timer = threading.Timer(after, token.cancel)
    t0 = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(Cancelled):
            db.execute(sql, cancel=token)
    finally:
        timer.cancel()
    return time.perf_counter() - t0


@pytest.mark.parametrize("budget", ["", ", tolerance = 0.0000001"])
def test_cancel_stops_chains_on_dask(budget):
    # a fixed-length run is one task per group (the groups poll a Dask event the client sets);
    # a budget-governed one goes segment by segment (the client polls while waiting on them)
    pytest.importorskip("distributed")
    from fuzz_corpus import fresh_db

    db = fresh_db()
    try:
        sql = f"SELECT PROB(s) FROM smokes s USING GIBBS WITH (seed = 5, workers = 2, steps = 99999999999{budget})"
        assert _cancelled_within(db, sql) < 1 + SLACK
    finally:
        db.close()


# each of these would run for hours: a billion passes over the mentions
_HUGE = "sweeps = 1000000000"


@pytest.mark.parametrize("query", [
    f"SELECT MAP(e) FROM e USING ANNEAL WITH ({_HUGE})",
    f"SELECT PROB(e = 1) FROM e USING GIBBS WITH ({_HUGE})",
    f"SELECT a.id, b.id, PROB(a = b) FROM e a, e b WHERE a.id < b.id USING GIBBS WITH ({_HUGE})",
    f"SELECT DIST(e) FROM e USING GIBBS WITH ({_HUGE})",
    f"SELECT MAP(e) FROM e USING ANNEAL WITH (workers = 2, {_HUGE})",
])
def test_cancel_stops_a_cluster_relation_query(query):
    if "workers" in query:
        pytest.importorskip("distributed")
    with pdbq.connect() as db:
        db.execute(NAMES_CLUSTER_SQL)
        assert _cancelled_within(db, query) < 1 + SLACK



def test_sharded_rounds_hold_the_time_limit_inside_a_round_and_stop_on_cancel():
    # six blocks of candidate pairs: sharded rounds; one round of 10^9 passes takes hours
    pytest.importorskip("distributed")
    with pdbq.connect() as db:
        db.execute(BLOCKED_CLUSTER_SQL)
        q = f"SELECT e.id, MAP(e) FROM e USING ANNEAL WITH (workers = 2, rounds = 3, {_HUGE}{{}})"
        t0 = time.perf_counter()
        r = db.execute(q.format(", time_limit = 1"))
        assert time.perf_counter() - t0 < 1 + SLACK
        assert r.diagnostics["dask"]["mode"] == "sharded"
        assert len(r.fetchall()) == 36
        assert any("before the first of" in w and "starting one" in w for w in r.diagnostics["warnings"])
        assert _cancelled_within(db, q.format("")) < 1 + SLACK
