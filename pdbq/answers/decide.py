"""The share of a query's time left that its searches before sampling may take (AUTO's
elimination-order search, AUTO's moves, the cutset choice), and the ``should_stop`` they read:
the query and its EXPLAIN cut them at the same instant."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["DECIDE_SHARE", "decision_stop", "stop_after"]

# a search before sampling may take this share of the time left; sampling gets the rest
DECIDE_SHARE = 0.5


def stop_after(until: float | None, poll: Callable[[], None] | None) -> Callable[[], bool] | None:
    """``should_stop`` for an order search (`min_fill_order`): ``poll()`` (a cancel raises), then
    whether ``until`` (a `time.perf_counter` instant) passed; None when neither is set."""
    if until is None and poll is None:
        return None

    def should_stop() -> bool:
        if poll is not None:
            poll()
        return until is not None and time.perf_counter() >= until

    return should_stop


def decision_stop(deadline: float | None, poll: Callable[[], None] | None) -> Callable[[], bool] | None:
    """``should_stop`` of a search that may take `DECIDE_SHARE` of the time left before
    ``deadline`` (None: no deadline, only ``poll``)."""
    now = time.perf_counter()
    until = None if deadline is None else now + DECIDE_SHARE * max(deadline - now, 0.0)
    return stop_after(until, poll)
