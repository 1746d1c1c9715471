"""Progress reports, the progress bar's drawing rules, and the cancel token."""

from __future__ import annotations

import io
import threading

import pytest

from pdbq.progress import CancelToken, Cancelled, Progress, ProgressBar, format_progress
from pdbq.errors import PdbqError


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_fraction_and_eta() -> None:
    assert Progress("sampling", 250, 1000, elapsed=1.0).fraction == 0.25
    assert Progress("sampling", 250, 1000, elapsed=1.0).eta == pytest.approx(3.0)
    # Standard errors fall as 1/sqrt(n): at twice the tolerance a quarter of the way there.
    by_tol = Progress("sampling", 100, None, max_stderr=0.02, tolerance=0.01, elapsed=2.0)
    assert by_tol.fraction == pytest.approx(0.25) and by_tol.eta == pytest.approx(6.0)
    # The run stops at whichever comes first.
    both = Progress("sampling", 900, 1000, max_stderr=0.02, tolerance=0.01, elapsed=9.0)
    assert both.fraction == pytest.approx(0.9)
    assert Progress("grounding", 5).fraction is None and Progress("grounding", 5).eta is None
    assert Progress("sampling", 1, None, max_stderr=0.005, tolerance=0.01).fraction == 1.0


def test_format_progress_lines() -> None:
    assert format_progress(Progress("sampling", 500, 1000, 0.02, 0.01, 2.0), width=100) == (
        "sampling   [##########..........]  50%  500/1,000  stderr 0.0200/0.0100  2s  ETA 2s"
    )
    assert format_progress(Progress("grounding", 12345, None, None, None, 75.0), width=100) == "grounding  12,345  1m15s"
    assert len(format_progress(Progress("sampling", 500, 1000, 0.02, 0.01, 2.0), width=30)) == 30


def test_bar_waits_half_a_second_throttles_and_erases() -> None:
    clock = _Clock()
    stream = _Tty()
    bar = ProgressBar(stream, clock=clock)
    bar(Progress("sampling", 10, 100, elapsed=0.1))
    assert stream.getvalue() == ""  # a fast statement never shows a bar
    clock.now += 0.6
    bar(Progress("sampling", 50, 100, elapsed=0.7))
    first = stream.getvalue()
    assert first.startswith("\r\x1b[K") and "50/100" in first
    clock.now += 0.01
    bar(Progress("sampling", 51, 100, elapsed=0.71))
    assert stream.getvalue() == first  # redrawn at most every 0.1 s
    clock.now += 0.2
    bar(Progress("sampling", 60, 100, elapsed=0.9))
    assert "60/100" in stream.getvalue()
    bar.close()
    assert stream.getvalue().endswith("\r\x1b[K")
    size = len(stream.getvalue())
    bar.close()  # nothing left to erase
    assert len(stream.getvalue()) == size


def test_bar_silent_when_not_a_terminal() -> None:
    clock = _Clock()
    stream = io.StringIO()
    with ProgressBar(stream, clock=clock) as bar:
        clock.now += 5
        bar(Progress("sampling", 10, 100))
    assert stream.getvalue() == "" and bar.last == Progress("sampling", 10, 100)


def test_cancel_token_across_threads() -> None:
    token = CancelToken()
    assert not token.cancelled
    token.check()
    seen = []

    def engine() -> None:
        try:
            while True:
                token.check()
        except Cancelled as exc:
            seen.append(exc)

    t = threading.Thread(target=engine)
    t.start()
    token.cancel()
    t.join(5)
    assert not t.is_alive() and isinstance(seen[0], PdbqError)
    assert token.cancelled
