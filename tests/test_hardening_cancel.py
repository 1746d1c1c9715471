"""A cancelled statement ends promptly on every Dask and coreference path (no tight timing:
each run would take minutes or hours uncancelled; the check is "within the cancel + slack")."""

from __future__ import annotations

import threading
import time

import pytest
from conftest import NAMES_CLUSTER_SQL

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
