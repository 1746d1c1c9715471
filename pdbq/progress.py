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
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from pdbq.errors import PdbqError

__all__ = ["Progress", "ProgressCallback", "ProgressBar", "CancelToken", "Cancelled", "format_progress",
           "CompileWatch", "CompileNotice", "watch_compiles", "expect_compiles"]

PHASES = ("grounding", "sampling", "compiling")


class Cancelled(PdbqError):
    """The statement was cancelled (Ctrl-C in the shell, or `CancelToken.cancel`)."""


class CompileNotice(UserWarning):
    """A Python caller's notice that pdbq is compiling its kernels for this machine (first use;
    tens of seconds, once: cached for later runs), issued when the compilation starts, before
    the wait. It says nothing about an answer (answer-quality warnings are in a result's
    ``diagnostics["warnings"]``): Python's default filter shows it once per message, and
    ``warnings.filterwarnings("ignore", category=pdbq.CompileNotice)`` silences it. A caller that
    passes a ``progress`` callback gets the same sentence there instead."""


@dataclass(frozen=True)
class Progress:
    """One progress report.

    ``phase`` is ``"grounding"`` or ``"sampling"``; ``done`` and ``total`` count that phase's unit
    (ground rules, or samples per chain); ``total`` is ``None`` when the phase stops on a
    tolerance or time limit rather than a count. ``max_stderr`` is the largest standard error of the
    query's estimates so far and ``tolerance`` the target (both ``None`` when not known/asked).
    ``elapsed`` is seconds since the phase began; ``time_limit`` the phase's time budget in
    seconds (``None``: none), which bounds both the fraction and the ETA.

    ``"compiling"`` reports a first use on a machine, while numba compiles pdbq's kernels:
    ``done`` counts kernel signatures compiled, ``detail`` names the kernels being prepared and
    ``notice`` (on the first report of a compilation, before the wait, and on its last) is a
    sentence to show once.
    """

    phase: str
    done: int
    total: int | None = None
    max_stderr: float | None = None
    tolerance: float | None = None
    elapsed: float = 0.0
    time_limit: float | None = None
    detail: str = ""
    notice: str | None = None

    @property
    def fraction(self) -> float | None:
        """How far along, in [0, 1]: by count, by (tolerance/stderr)² since stderr falls as 1/√n,
        or by time spent of the time limit, whichever is furthest (the first reached stops the run)."""
        parts = []
        if self.total:
            parts.append(self.done / self.total)
        if self.tolerance and self.max_stderr and math.isfinite(self.max_stderr):
            parts.append((self.tolerance / self.max_stderr) ** 2)
        if self.time_limit and self.time_limit > 0:
            parts.append(self.elapsed / self.time_limit)
        if not parts:
            return None
        return min(1.0, max(0.0, max(parts)))

    @property
    def eta(self) -> float | None:
        """Seconds left, extrapolated from the rate so far and never past the time limit
        (``None`` when unknown).

        >>> Progress("sampling", 10, None, 0.5, 0.001, elapsed=5.0, time_limit=60).eta
        55.0
        """
        frac = self.fraction
        if frac is None or frac <= 0 or self.elapsed <= 0:
            return None
        left = max(0.0, self.elapsed * (1.0 - frac) / frac)
        if self.time_limit is not None:
            left = min(left, max(0.0, self.time_limit - self.elapsed))
        return left


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
    """The one-line text of a progress report, at most ``width`` characters (a long step count
    is left out before the time and the ETA are cut).

    >>> format_progress(Progress("sampling", 500, 1000, 0.02, 0.01, 2.0), width=100)
    'sampling   [##########..........]  50%  500/1,000  stderr 0.0200/0.0100  2s  ETA 2s'
    """
    frac = info.fraction
    parts = [f"{info.phase:<9}"] + ([info.detail] if info.detail else [])
    if frac is not None:
        filled = int(frac * bar_width)
        parts.append(f"[{'#' * filled}{'.' * (bar_width - filled)}] {int(frac * 100):3d}%")
    count = f"{_count(info.done)}/{_count(info.total)}" if info.total is not None else _count(info.done)
    parts.append(count)
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
    if len(text) > width and frac is not None:  # the bar already says how far: the count goes first
        text = "  ".join(p for p in parts if p is not count)
    return text[: max(0, width)]


class ProgressBar:
    """A progress callback drawing one line on ``stream`` (default: stderr).

    Draws only when the stream is a terminal (or ``force=True``), only after ``delay`` seconds
    from construction, and at most every ``interval`` seconds; `close()` erases the line. Safe
    to call from a worker thread. A report's ``notice`` (the kernels' one-time compilation) is
    written as a line of its own on any stream unless ``notices=False``.

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
        notices: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._notices = notices
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
        if info.notice and self._notices:
            # said on any stream, terminal or not: a wait of many seconds follows (or just ended)
            with self._lock:
                self._stream.write(("\r\x1b[K" if self._drawn else "") + info.notice + "\n")
                self._stream.flush()
                self._drawn = False
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


# --- the kernels' one-time compilation -------------------------------------------------------
# numba compiles a kernel signature on its first call in a process unless numba's on-disk cache
# has it. A compilation on a fresh install takes seconds per kernel family, so it is announced
# when it starts (numba's "numba:compile" event, in the compiling thread), reported while it
# runs (a ticker thread), and summed up once it ends.

# What a module's kernels are called in notices: the first prefix that matches.
_FAMILIES = (
    ("pdbq.graph.", "graph"),
    ("pdbq.analysis.", "graph"),
    ("pdbq.inference.exact.", "exact inference"),
    ("pdbq.inference.query_aware.", "query-aware selection"),
    ("pdbq.inference.mcmc.anneal", "annealing"),
    ("pdbq.inference.mcmc.", "Gibbs sampling"),
    ("pdbq.inference.moves.", "mixing moves"),
    ("pdbq.inference.coreference.", "entity resolution"),
    ("pdbq.coref.", "entity resolution"),
    ("pdbq.linkage.", "entity resolution"),
    ("pdbq.learning.", "learning"),
)
_TICK = 0.25  # seconds between progress reports while compiling
# A compilation is announced once it has run this long: shorter ones are not worth a line, and a
# long one is still said within a second of its start.
ANNOUNCE_AFTER = 0.5
_local = threading.local()
_installed = False
_install_lock = threading.Lock()


def kernel_family(module: str) -> str:
    """The family a kernel of ``module`` belongs to in notices.

    >>> kernel_family("pdbq.inference.mcmc.kernels")
    'Gibbs sampling'
    """
    for prefix, family in _FAMILIES:
        if module.startswith(prefix) or module == prefix.rstrip("."):
            return family
    return "other"


class CompileWatch:
    """What numba compiled in one thread while this watch was active: announced through
    ``progress`` once a compilation has run `ANNOUNCE_AFTER` seconds (a kernel that compiles in
    a blink is not worth a line; a wait of seconds is said before most of it), reported every
    quarter second while it runs, and summed up in `notices` (one sentence per compilation that
    was announced) when it ends."""

    def __init__(self, progress: ProgressCallback | None = None, clock: Callable[[], float] = time.perf_counter) -> None:
        self.progress = progress
        self.notices: list[str] = []
        self.seconds: dict[str, float] = {}  # family -> seconds compiling, this compilation
        self.signatures = 0
        self.kernels: dict[str, float] = {}  # "module.function" -> seconds compiling, over the watch's life
        self._clock = clock
        self._started: float | None = None
        self._announced = False
        self._current = ""
        self._expected: tuple[str, float] | None = None
        self._ticker: threading.Thread | None = None
        self._lock = threading.Lock()
        self._since: float | None = None

    def expect(self, what: str, seconds: float) -> None:
        """Name what the next compilation prepares and about how long it takes (a warm-up knows)."""
        self._expected = (what, seconds)

    def _say(self, notice: str | None = None, elapsed: float | None = None) -> None:
        if self.progress is None:
            return
        if elapsed is None:
            elapsed = self._clock() - self._started if self._started is not None else 0.0
        self.progress(Progress("compiling", self.signatures, None, elapsed=elapsed,
                               detail=f"{self._current} kernels" if self._current else "", notice=notice))

    def _announce(self) -> None:
        """The notice said when a compilation has gone on long enough (under the lock): through
        ``progress``, or, with no callback (a Python caller), as a `CompileNotice` warning."""
        self._announced = True
        if self._expected is not None:
            what, secs = self._expected
        else:
            what, secs = f"pdbq's {self._current} kernels", None
        about = f"about {secs:.0f} s, " if secs else ""
        notice = f"pdbq: compiling {what} for this machine (first use; {about}once: cached for later runs) ..."
        if self.progress is not None:
            self._say(notice)
            return
        try:
            warnings.warn(notice, CompileNotice, stacklevel=2)
        except Exception:  # noqa: BLE001 - a caller's "error" filter must not stop the compilation's thread
            pass

    def _begin(self, family: str) -> None:
        now = self._clock()
        with self._lock:
            first = self._started is None
            if first:
                self._started = now
                self._announced = False
            self._current = family
            self._since = now
            if first and ANNOUNCE_AFTER <= 0:
                self._announce()
        # the ticker also runs without a callback: it says the notice (as a warning) once the
        # compilation has gone on for `ANNOUNCE_AFTER` seconds
        if first and (self._ticker is None or not self._ticker.is_alive()):
            self._ticker = threading.Thread(target=self._tick, name="pdbq-compile-progress", daemon=True)
            self._ticker.start()

    def _end(self, family: str, kernel: str = "") -> None:
        now = self._clock()
        with self._lock:
            if self._since is not None:
                self.seconds[family] = self.seconds.get(family, 0.0) + now - self._since
                if kernel:
                    self.kernels[kernel] = self.kernels.get(kernel, 0.0) + now - self._since
            self._since = None
            self.signatures += 1

    def _tick(self) -> None:
        while True:
            with self._lock:
                announced = self._announced
            time.sleep(_TICK if announced else min(_TICK, max(ANNOUNCE_AFTER / 5, 0.01)))
            with self._lock:
                if self._started is None:
                    return
                if not self._announced:
                    if self._clock() - self._started >= ANNOUNCE_AFTER:
                        self._announce()
                else:
                    self._say()

    def settle(self, counted: bool = False) -> str | None:
        """End the compilation in progress (if any): its one sentence (None when it was too
        short to announce), also kept in `notices`. ``counted``: whether its time counted
        against the query's time limit."""
        with self._lock:
            if self._started is None:
                return None
            total = self._clock() - self._started
            self._started = None
            said = self._announced or total >= ANNOUNCE_AFTER
            self._announced = False
        parts = ", ".join(f"{f} {s:.1f} s" for f, s in sorted(self.seconds.items(), key=lambda kv: -kv[1]))
        n = self.signatures
        self.seconds = {}
        self.signatures = 0
        self._expected = None
        self._current = ""
        if not said:
            return None
        limit = "" if counted else "; not counted against time_limit"
        notice = (f"first use on this machine: compiled pdbq's kernels in {total:.1f} s ({parts}; "
                  f"{n} signatures; cached for later runs{limit})")
        self.notices.append(notice)
        self._say(notice, total)
        return notice


def _install() -> None:
    """Listen to numba's compile events (once per process; imports numba)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        from numba.core import event  # noqa: PLC0415

        class _Listener(event.Listener):
            def on_start(self, ev) -> None:
                depth = getattr(_local, "depth", 0)
                _local.depth = depth + 1
                watch = getattr(_local, "watch", None)
                if depth == 0 and watch is not None:
                    func = getattr((ev.data or {}).get("dispatcher"), "py_func", None)
                    module = getattr(func, "__module__", "") or ""
                    _local.family = kernel_family(module)
                    _local.kernel = f"{module}.{getattr(func, '__name__', '?')}"
                    watch._begin(_local.family)

            def on_end(self, ev) -> None:
                _local.depth = max(0, getattr(_local, "depth", 1) - 1)
                watch = getattr(_local, "watch", None)
                if _local.depth == 0 and watch is not None:
                    watch._end(getattr(_local, "family", "other"), getattr(_local, "kernel", ""))

        event.register("numba:compile", _Listener())
        _installed = True


class watch_compiles:
    """``with watch_compiles(progress) as w:`` — compilations in this thread inside the block are
    announced through ``progress`` when they start; `CompileWatch.notices` holds their summary.
    Nested watches share the outer one (one statement, one summary)."""

    def __init__(self, progress: ProgressCallback | None = None) -> None:
        self._progress = progress
        self._outer: CompileWatch | None = None
        self.watch: CompileWatch | None = None

    def __enter__(self) -> CompileWatch:
        _install()
        self._outer = getattr(_local, "watch", None)
        if self._outer is not None:
            if self._outer.progress is None and self._progress is not None:
                self._outer.progress = self._progress
            self.watch = self._outer
        else:
            self.watch = _local.watch = CompileWatch(self._progress)
        return self.watch

    def __exit__(self, *exc: object) -> None:
        if self._outer is None:
            _local.watch = None
            self.watch.settle(counted=True)


def expect_compiles(what: str, seconds: float) -> None:
    """Tell this thread's active watch (if any) what the next compilation prepares."""
    watch = getattr(_local, "watch", None)
    if watch is not None:
        watch.expect(what, seconds)


def current_watch() -> CompileWatch | None:
    """This thread's active `CompileWatch`, if any."""
    return getattr(_local, "watch", None)
