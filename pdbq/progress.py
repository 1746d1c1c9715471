"""Progress reports and cancellation for long statements (grounding, sampling).

The engine calls a progress callback with a `Progress` after each round and polls a
`CancelToken` between rounds; `ProgressBar` is the callback the shell (and ``progress=True`` in
Python) uses: one line on stderr, only on a terminal, only once a statement has run for about half
a second, erased when the statement ends.

>>> token = CancelToken()
>>> token.check()          # not cancelled: returns
>>> token.cancel()
>>> token.check()
Traceback (most recent call last):
...
pdbq.progress.Cancelled: statement cancelled
"""

from __future__ import annotations

import math
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from pdbq.errors import PdbqError

__all__ = ["Progress", "ProgressCallback", "ProgressBar", "CancelToken", "Cancelled", "format_progress"]

PHASES = ("grounding", "sampling")


class Cancelled(PdbqError):
    """The statement was cancelled (Ctrl-C in the shell, or `CancelToken.cancel`)."""


@dataclass(frozen=True)
class Progress:
    """One progress report.

    ``phase`` is ``"grounding"`` or ``"sampling"``; ``done`` and ``total`` count that phase's unit
    (ground rules, or samples per chain); ``total`` is ``None`` when the phase stops on a
    tolerance or time limit rather than a count. ``max_stderr`` is the largest standard error of the
    query's estimates so far and ``tolerance`` the target (both ``None`` when not known/asked).
    ``elapsed`` is seconds since the phase began.
    """

    phase: str
    done: int
    total: int | None = None
    max_stderr: float | None = None
    tolerance: float | None = None
    elapsed: float = 0.0

    @property
    def fraction(self) -> float | None:
        """How far along, in [0, 1]: by count, or (tolerance/stderr)² since stderr falls as 1/√n."""
        parts = []
        if self.total:
            parts.append(self.done / self.total)
        if self.tolerance and self.max_stderr and math.isfinite(self.max_stderr):
            parts.append((self.tolerance / self.max_stderr) ** 2)
        if not parts:
            return None
        return min(1.0, max(0.0, max(parts)))

    @property
    def eta(self) -> float | None:
        """Seconds left, extrapolated from the rate so far (``None`` when unknown)."""
        frac = self.fraction
        if frac is None or frac <= 0 or self.elapsed <= 0:
            return None
        return max(0.0, self.elapsed * (1.0 - frac) / frac)


ProgressCallback = Callable[[Progress], None]


class CancelToken:
    """A flag one thread sets and a running statement polls between rounds.

    The engine calls `check()` (raises `Cancelled`) or reads `cancelled` at safe points; the
    shell calls `cancel()` on Ctrl-C. A token is used for one statement.
    """

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise `Cancelled` if `cancel()` was called."""
        if self._event.is_set():
            raise Cancelled("statement cancelled")


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _count(n: int) -> str:
    return f"{n:,}"


def format_progress(info: Progress, width: int = 80, bar_width: int = 20) -> str:
    """The one-line text of a progress report, at most ``width`` characters.

    >>> format_progress(Progress("sampling", 500, 1000, 0.02, 0.01, 2.0), width=100)
    'sampling   [##########..........]  50%  500/1,000  stderr 0.0200/0.0100  2s  ETA 2s'
    """
    frac = info.fraction
    parts = [f"{info.phase:<9}"]
    if frac is not None:
        filled = int(frac * bar_width)
        parts.append(f"[{'#' * filled}{'.' * (bar_width - filled)}] {int(frac * 100):3d}%")
    parts.append(f"{_count(info.done)}/{_count(info.total)}" if info.total is not None else _count(info.done))
    if info.max_stderr is not None:
        se = f"stderr {info.max_stderr:.4f}"
        if info.tolerance is not None:
            se += f"/{info.tolerance:.4f}"
        parts.append(se)
    parts.append(_duration(info.elapsed))
    eta = info.eta
    if eta is not None and frac is not None and frac < 1:
        parts.append(f"ETA {_duration(eta)}")
    text = "  ".join(parts)
    return text[: max(0, width)]


class ProgressBar:
    """A progress callback drawing one line on ``stream`` (default: stderr).

    Draws only when the stream is a terminal (or ``force=True``), only after ``delay`` seconds
    from construction, and at most every ``interval`` seconds; `close()` erases the line. Safe
    to call from a worker thread.

    >>> import io
    >>> bar = ProgressBar(io.StringIO())        # not a terminal: never draws
    >>> bar(Progress("sampling", 10, 100)); bar.close()
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        delay: float = 0.5,
        interval: float = 0.1,
        force: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream if stream is not None else sys.stderr
        isatty = getattr(self._stream, "isatty", None)
        self.enabled = bool(force or (isatty is not None and isatty()))
        self._delay = delay
        self._interval = interval
        self._clock = clock
        self._start = clock()
        self._last_draw: float | None = None
        self._drawn = False
        self._lock = threading.Lock()
        self.last: Progress | None = None

    def __call__(self, info: Progress) -> None:
        self.last = info
        if not self.enabled:
            return
        now = self._clock()
        if now - self._start < self._delay:
            return
        if self._last_draw is not None and now - self._last_draw < self._interval:
            return
        width = shutil.get_terminal_size((80, 24)).columns - 1
        with self._lock:
            self._stream.write("\r\x1b[K" + format_progress(info, width))
            self._stream.flush()
            self._drawn = True
            self._last_draw = now

    def close(self) -> None:
        """Erase the line if one was drawn."""
        with self._lock:
            if self._drawn:
                self._stream.write("\r\x1b[K")
                self._stream.flush()
                self._drawn = False

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
