"""A statement's ``time_limit`` over planning and grounding: DuckDB statements stop at the deadline.

Planning runs DuckDB statements (vid maps, fingerprints, frontier rounds, full grounding, the
factor read) that no loop of ours can check while they run. `PlanningDeadline` watches the clock
from a thread: once the deadline passes it calls the connection's ``interrupt()`` (DuckDB
aborts the running statement with ``InterruptException`` and the open transaction), and keeps
doing so every few milliseconds until the block ends, so a statement started after the deadline
is stopped too (an ``interrupt()`` while no statement runs does nothing). Each planning stage runs
in its own transaction (`pdbq.catalog.store.transaction`), so the interrupted stage is rolled
back; stages that finished stay committed (the store is consistent after each one, and the next
query reuses them). The block then raises `pdbq.errors.TimeLimitError` naming the stage.

A query inside a transaction the user opened is never interrupted (that would abort the user's
transaction): the deadline is then checked only between stages.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType

import duckdb

from pdbq.catalog.store import in_transaction
from pdbq.errors import TimeLimitError
from pdbq.progress import Cancelled

__all__ = ["PlanningDeadline", "PREPARE_GRACE"]

# How often the watcher looks at the clock, and repeats the interrupt after the deadline (seconds).
_POLL = 0.05
_REPEAT = 0.01
# The first step (vid maps and fingerprints) is what gives a query's rows their keys: without it
# there is nothing to answer NULL for. It may overrun the deadline by this much before it is
# interrupted (well inside the "10% + 1 s" a time limit promises), so that a query whose budget
# was gone early still answers NULL with a warning rather than an error.
PREPARE_GRACE = 0.5


class PlanningDeadline:
    """Context manager: planning on ``con`` must end by ``started + limit`` (`time.perf_counter`
    instants; ``limit`` in seconds, as the user wrote it). Call `enter_stage` before each step
    (its name goes into the message; ``grace`` lets that step overrun the deadline). After the
    block, `fired` tells whether an interrupt was issued; a block that handled the time-out
    itself sets `handled`, otherwise an interrupted block raises `TimeLimitError`."""

    def __init__(self, con: duckdb.DuckDBPyConnection, *, started: float, limit: float, stage: str = "planning",
                 grace: float = 0.0, cancel: object = None):
        self.con = con
        self.started = started
        self.limit = limit
        self.deadline = started + limit
        self.stage = stage
        self.grace = grace
        self.fired = False
        self.handled = False
        # a `CancelToken`: once cancelled, the running statement is interrupted as at the deadline
        # (a long join does not wait for the next check between stages) and `Cancelled` is raised
        self.cancel = cancel
        self.cancelled = False
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._own = False  # no transaction of the caller's was open: interrupting is safe

    def __enter__(self) -> PlanningDeadline:
        self._own = not in_transaction(self.con)
        if self._own:
            self._thread = threading.Thread(target=self._watch, name="pdbq-deadline", daemon=True)
            self._thread.start()
        return self

    def enter_stage(self, what: str, grace: float = 0.0) -> None:
        with self._lock:
            self.stage = what
            self.grace = grace

    def expired(self) -> bool:
        return time.perf_counter() >= self.deadline

    def _watch(self) -> None:
        while True:
            with self._lock:
                if self._stop.is_set():
                    return
                left = self.deadline + self.grace - time.perf_counter()
                if self.cancel is not None and getattr(self.cancel, "cancelled", False):
                    self.cancelled = True
                    left = 0.0
                if left <= 0:
                    self.fired = True
                    self.con.interrupt()  # a no-op when no statement is running
            if self._stop.wait(_REPEAT if left <= 0 else min(left, _POLL)):
                return

    def message(self) -> str:
        elapsed = time.perf_counter() - self.started
        return (f"time_limit {self.limit:g} s ran out while {self.stage} ({elapsed:.2f} s into the query), before "
                "any sample; the unfinished step was interrupted and rolled back")

    def advice(self) -> str:
        return ("raise time_limit (or ground the model first with Database.ground(), so that queries only "
                "sample)")

    def error(self) -> TimeLimitError | Cancelled:
        if self.cancelled:
            return Cancelled(f"statement cancelled while {self.stage}; the unfinished step was interrupted and rolled back")
        return TimeLimitError(f"{self.message()}: nothing was answered; {self.advice()}", stage=self.stage,
                              elapsed=time.perf_counter() - self.started)

    def stop(self) -> None:
        """Stop watching (idempotent): no interrupt is issued after this returns, and a
        transaction an interrupt left open is rolled back."""
        with self._lock:
            self._stop.set()  # no interrupt can be issued after this
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        else:
            return
        if self._own and self.fired:
            # An interrupt may have aborted a transaction whose ROLLBACK was itself interrupted,
            # or a COMMIT of an aborted one may have failed: leave no transaction open.
            # (Not `in_transaction`: it fails on an aborted transaction.)
            try:
                self.con.execute("ROLLBACK")
            except duckdb.Error:
                pass  # none was open

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> bool:
        self.stop()
        if not self.fired or self.handled:
            return False
        if et is None:
            # an interrupted statement's error was handled somewhere below: the result cannot be
            # trusted, and the budget is spent anyway
            raise self.error()
        if isinstance(e, Exception):
            raise self.error() from e
        return False
