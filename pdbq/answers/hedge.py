"""AUTO's hedge between exact elimination and sampling on a machine other programs share.

AUTO's cost model (`pdbq.inference.exact.auto`) estimates elimination's time on an idle core. On
a shared machine the query gets only a share of a core, and this machine may be slower or faster
than the one the model was measured on, so the idle estimate alone can start an elimination that
cannot end within the time limit, leaving no time to sample. The hedge:

* **calibration**: every elimination of all marginals AUTO runs (what the estimate is of)
  records the CPU seconds its thread used against the idle estimate (CPU time, not wall time:
  other programs slow the wall clock, not the work), and the median of the recent ratios scales
  later estimates (`Calibration`);
* **the CPU share now**: a short busy probe measures the share of a core this thread gets
  (thread CPU time ÷ wall time, `probe_share`), taken only when the estimate is large enough for
  the answer to matter;
* **the split**: exact runs only when its predicted wall time (estimate × calibration ÷ share)
  fits the budget less a sampling reserve (`SAMPLE_SHARE` of the time limit), and is stopped at
  that share's deadline; when it is stopped, the rest of the budget samples. A default query so
  never ends in `TimeLimitError` where a sampled answer was possible.

`plan_exact` returns the plan and the sentence the diagnostics show; `HedgeRecord` is what
happened (the exact try, its CPU seconds, the share, the sampling time left).
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections import deque
from dataclasses import dataclass

__all__ = [
    "SAMPLE_SHARE",
    "Calibration",
    "CALIBRATION",
    "ExactPlan",
    "HedgeRecord",
    "plan_exact",
    "probe_share",
    "measure_share",
]

# The share of AUTO's time budget kept for sampling when it tries exact elimination first: an
# elimination still running at the rest's end is stopped and this much is left to sample, which
# on the models measured (docs/benchmarks.md) gives an answer whose checks can judge it (a
# quarter of the default 5 s: 1.25 s, several hundred thousand updates per chain on 100-variable
# networks at a full core).
SAMPLE_SHARE = 0.25
# Seconds of busy work in the CPU-share probe: several scheduler slices (a few ms each on Linux),
# a small price next to an elimination it may save.
PROBE_SECONDS = 0.04
# No probe when the calibrated estimate is under this share of the exact share of the budget: at
# any CPU share the probe could measure (down to 1/20 of a core), the elimination's deadline
# would still stop it early enough to sample.
PROBE_ABOVE = 0.05
# Recent exact runs the calibration keeps (the median of their ratios scales the estimate).
_KEEP_RUNS = 16
# Runs whose idle estimate is under this (seconds) are not recorded: fixed costs (Python calls,
# the cache) dominate them and say nothing about the cost per table entry.
_RECORD_ABOVE = 0.05
_MIN_SHARE = 0.02  # a probe never reports less (a stalled probe is not a machine without CPU)

_now = time.perf_counter  # looked up at each call (tests replace them by fake clocks)
_cpu = time.thread_time


def measure_share(seconds: float = PROBE_SECONDS) -> float:
    """The share of one core this thread gets now: thread CPU time ÷ wall time over ``seconds``
    of busy work, in [`_MIN_SHARE`, 1]. On a crowded machine a few scheduler slices decide the
    ratio, so the probe goes on (up to 4 × ``seconds``) until it has run a quarter of ``seconds``
    on the CPU."""
    w0, c0 = _now(), _cpu()
    end, last = w0 + seconds, w0 + 4.0 * seconds
    x = 0
    while True:
        for _ in range(2000):
            x += 1
        t = _now()
        if t >= last or (t >= end and _cpu() - c0 >= 0.25 * seconds):
            break
    wall, cpu = _now() - w0, _cpu() - c0
    if wall <= 0:
        return 1.0
    return min(1.0, max(_MIN_SHARE, cpu / wall))


# What `plan_exact` calls (the test suite replaces it by a fixed share: a quiet machine, so that
# what AUTO chooses does not depend on the load of the machine running the tests).
probe_share = measure_share


class Calibration:
    """Measured CPU seconds of exact elimination ÷ the cost model's idle estimate, over the
    recent runs of this process (thread-safe). ``factor`` is their median, 1 before any run."""

    def __init__(self) -> None:
        self._ratios: deque[float] = deque(maxlen=_KEEP_RUNS)
        self._lock = threading.Lock()

    @property
    def factor(self) -> float:
        with self._lock:
            return statistics.median(self._ratios) if self._ratios else 1.0

    @property
    def runs(self) -> int:
        with self._lock:
            return len(self._ratios)

    def record(self, estimated: float, cpu_seconds: float, finished: bool = True) -> None:
        """One elimination: its idle estimate and the CPU seconds it used. An elimination stopped
        before its end used at least that much, so only a ratio above the current one counts."""
        if not estimated >= _RECORD_ABOVE or not cpu_seconds >= 0:
            return
        ratio = cpu_seconds / estimated
        if not finished and ratio <= self.factor:
            return
        with self._lock:
            self._ratios.append(ratio)

    def reset(self) -> None:
        with self._lock:
            self._ratios.clear()


CALIBRATION = Calibration()


@dataclass(frozen=True)
class ExactPlan:
    """Whether to try exact elimination, until when (``deadline``, perf_counter seconds), and why.

    ``predicted``: wall seconds the elimination is expected to take now (None when no estimate);
    ``share``: the CPU share used for it (None when not probed: the estimate was small)."""

    run_exact: bool
    deadline: float | None
    predicted: float | None
    share: float | None
    factor: float
    reason: str


def plan_exact(estimated: float | None, now: float, end: float | None, budget: float | None,
               calibration: Calibration | None = None) -> ExactPlan:
    """The exact try of AUTO: ``estimated`` idle seconds (AUTO's decision), the query's ``end``
    (perf_counter seconds; None: no limit) and its whole ``budget`` (seconds). Exact runs when the
    calibrated estimate at the CPU share it gets now fits before ``end`` less `SAMPLE_SHARE` of
    the budget, and is stopped there. ``calibration``: default `CALIBRATION`."""
    factor = (CALIBRATION if calibration is None else calibration).factor
    if end is None or budget is None:
        return ExactPlan(True, None, None, None, factor, "")
    reserve = SAMPLE_SHARE * budget
    exact_end = end - reserve
    room = exact_end - now
    if estimated is None:  # no estimate (should not happen for an EXACT decision): try within the share
        return ExactPlan(room > 0, exact_end, None, None, factor, "")
    cpu = estimated * factor
    share = None
    if cpu > PROBE_ABOVE * max(room, 0.0):
        share = probe_share()
        now = _now()
        room = exact_end - now
    predicted = cpu / (share if share is not None else 1.0)
    run = predicted <= room
    return ExactPlan(run, exact_end, predicted, share, factor, _plan_text(estimated, factor, share, predicted, room,
                                                                          reserve, run))


def _plan_text(estimated: float, factor: float, share: float | None, predicted: float, room: float, reserve: float,
               run: bool) -> str:
    cal = "" if abs(factor - 1.0) < 0.05 else f" (× {factor:.2g}, this machine's measured speed)"
    cpu = (f"; this query gets {share:.0%} of a CPU core now" + (" (other programs are busy)" if share < 0.9 else "")
           if share is not None else "")
    if run:
        return (f"exact elimination predicted at {predicted:.2g} s here (idle estimate {estimated:.2g} s{cal}{cpu}), "
                f"within the {max(room, 0.0):.2g} s exact share of the time limit ({reserve:.2g} s kept to sample if "
                "it runs over)")
    return (f"exact elimination predicted at {predicted:.2g} s here (idle estimate {estimated:.2g} s{cal}{cpu}), over "
            f"the {max(room, 0.0):.2g} s the time limit leaves it ({reserve:.2g} s kept to sample), so MCMC, which "
            "stops at the deadline")


@dataclass
class HedgeRecord:
    """What AUTO's hedge did, for the diagnostics."""

    plan: ExactPlan
    exact_seconds: float = 0.0  # wall seconds exact ran
    exact_cpu: float = 0.0  # its thread's CPU seconds
    stopped: bool = False  # exact was stopped at its share's deadline

    def hint(self) -> str:
        """The note on a flagged answer AUTO sampled after (or instead of) its exact try: why, and
        the time limit that would let the elimination finish at the CPU this query got."""
        p = self.plan
        if self.stopped:
            need = max(p.predicted or 0.0, 2.0 * self.exact_seconds)
            why = (f"its exact elimination ran over its share of the time limit (stopped after {self.exact_seconds:.2g} s, "
                   f"{self.exact_cpu:.2g} s of it on the CPU)")
        else:
            need = p.predicted or 0.0
            at = f" at the {p.share:.0%} of a CPU core this query got" if p.share is not None else ""
            why = f"exact elimination was predicted at {need:.2g} s{at}, more than the time limit left it"
        limit = math.ceil(need / (1.0 - SAMPLE_SHARE)) + 1
        return (f"AUTO sampled because {why}; for the exact answer write WITH (time_limit = {limit}), or USING EXACT "
                "(no time limit unless written), or run it when the machine is less busy")

    def as_dict(self) -> dict:
        p = self.plan
        return {"exact_tried": p.run_exact, "exact_stopped": self.stopped, "predicted_seconds": p.predicted,
                "cpu_share_probe": p.share, "calibration": p.factor, "exact_seconds": self.exact_seconds,
                "exact_cpu_seconds": self.exact_cpu, "exact_deadline_share": SAMPLE_SHARE}
