"""Where exact elimination may stop: a query's deadline and a statement's cancel poll, checked
between cliques (the compiled passes run over ranges of cliques, `chunks`), so one elimination
cannot outlive its deadline by more than one chunk of work.

One clique of the numpy path (large tables) is not interrupted, and under load it can take
seconds (a 2^24-entry clique: about 0.25 s idle). So before each such clique the clock also
predicts its end from the speed measured so far in this call (seconds per table entry, which
load slows as much as the clique itself) and stops at once when even at twice that speed the
clique would end past the deadline: its answer could not arrive in time anyway."""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable

import numpy as np

from pdbq.errors import TimeLimitError

__all__ = ["CHUNK_ENTRIES", "EliminationClock", "chunks"]

# Table entries the compiled passes visit between two checks: a few ms of work per chunk (the
# kernels do roughly 1e8 entry-part reads a second), so a check costs nothing next to the work
# and the deadline is overrun by at most a chunk, even on a loaded machine.
CHUNK_ENTRIES = 1 << 20
_POLL_EVERY = 0.05  # seconds between calls of the cancel poll (it may take a lock)
_now = time.perf_counter  # looked up at each check (tests replace it by a fake clock)
_OVERHEAD = 1024  # a clique's fixed cost (Python calls, small arrays) in table entries
_RATE_AFTER = 1 << 20  # entries timed before the speed is trusted for a prediction
# Seconds per table entry expected before any clique was timed (set by the caller that knows the
# machine: AUTO's calibrated cost model at the CPU share it measured), so that a first large
# clique that cannot end by the deadline is not started either. None: no prediction until timed.
PRIOR_SECONDS_PER_ENTRY: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "pdbq_exact_prior_seconds_per_entry", default=None)


class EliminationClock:
    """``check(done, total)`` raises `TimeLimitError` once ``time.perf_counter()`` passes
    ``deadline``, and calls ``poll()`` (which raises for a cancelled statement) at most every
    50 ms. ``what`` names the computation in the message (e.g. "exact marginals"), ``where`` the
    pass."""

    def __init__(self, deadline: float | None = None, poll: Callable[[], None] | None = None,
                 what: str = "exact elimination"):
        self.deadline = deadline
        self.poll = poll
        self.what = what
        self._polled = -np.inf
        self._start: float | None = None  # the first timed clique began
        self._work = 0  # table entries (plus overheads) of the timed cliques since then
        self._prior = PRIOR_SECONDS_PER_ENTRY.get()

    @property
    def active(self) -> bool:
        return self.deadline is not None or self.poll is not None

    def should_stop(self) -> bool:
        """For loops that end early rather than raise (`min_fill_order`'s ``should_stop``): True
        once the deadline passed; ``poll()`` called at most every 50 ms (a cancel raises from it)."""
        if not self.active:
            return False
        now = _now()
        if self.poll is not None and now - self._polled >= _POLL_EVERY:
            self._polled = now
            self.poll()
        return self.deadline is not None and now >= self.deadline

    def order_search(self) -> Callable[[], bool] | None:
        """`should_stop` for `min_fill_order`, or None when nothing is watched (the order then
        runs in one piece)."""
        return self.should_stop if self.active else None

    def stopped_error(self, where: str) -> TimeLimitError:
        """The error for a search `should_stop` ended (``where``: what it was doing)."""
        return TimeLimitError(f"the deadline passed during {self.what} ({where})", stage=self.what)

    def check(self, done: int, total: int, where: str = "upward pass", work: int = 0) -> None:
        """Before the next clique (``done`` of ``total`` done); ``work``: its table entries, when
        the speed measured so far should predict whether it can end by the deadline."""
        if not self.active:
            return
        now = _now()
        if self.poll is not None and now - self._polled >= _POLL_EVERY:
            self._polled = now
            self.poll()
        if self.deadline is None:
            return
        if now >= self.deadline:
            raise TimeLimitError(f"the deadline passed during {self.what} ({where}: {done:,} of {total:,} cliques "
                                 "done)", stage=self.what)
        if not work:
            return
        if self._start is None:
            self._start = now
        ahead, speed = None, "measured so far"
        if self._work >= _RATE_AFTER:
            ahead = (now - self._start) / self._work * (work + _OVERHEAD)
        elif self._prior is not None:
            ahead, speed = self._prior * (work + _OVERHEAD), "expected on this machine now"
        if ahead is not None:
            if now + 0.5 * ahead > self.deadline:
                raise TimeLimitError(
                    f"{self.what} stopped before its deadline ({where}: {done:,} of {total:,} cliques done): the next "
                    f"clique ({work:,} table entries) would end about {ahead:.2g} s from now at the speed {speed}, "
                    f"past the deadline {self.deadline - now:.2g} s away", stage=self.what)
        self._work += work + _OVERHEAD


def chunks(sizes: np.ndarray, limit: int | None = None) -> list[tuple[int, int]]:
    """``[(lo, hi), ...]`` covering ``range(len(sizes))`` in order, each range's summed ``sizes``
    at most ``limit`` (default `CHUNK_ENTRIES`) unless it is a single item."""
    limit = CHUNK_ENTRIES if limit is None else limit
    out: list[tuple[int, int]] = []
    lo, acc = 0, 0
    for i, s in enumerate(np.asarray(sizes, dtype=np.int64).tolist()):
        if acc and acc + s > limit:
            out.append((lo, i))
            lo, acc = i, 0
        acc += s
    if lo < len(sizes):
        out.append((lo, len(sizes)))
    return out
