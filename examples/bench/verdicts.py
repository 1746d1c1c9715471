"""The comparison behind examples/bench/headlines.py: a measured figure against its recorded one.

Pure functions, no timing and no pdbq import, so that tests/test_bench_verdicts.py can check the
rule that decides whether the headline benchmark fails.

A figure is better when higher (speed-ups, F1) or lower (seconds, errors). Its noise band says how
far a figure may move between runs of the same code on the same kind of machine before it counts
as a change: relative bands (``Band(factor=1.5)``: within a factor 1.5 either way) for speed,
absolute bands (``Band(plus=0.005)``: within ±0.005) for correctness figures such as F1 or an
error. Outside the band on the worse side is a regression; on the better side an improvement
(rerun with ``--record`` to keep it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

OK, BETTER, REGRESSED, NEW = "ok", "better", "REGRESSED", "new"


@dataclass(frozen=True)
class Band:
    """How far a figure may move by noise alone: a factor (speed) or an absolute amount (F1)."""

    factor: float | None = None
    plus: float | None = None

    def __post_init__(self) -> None:
        if (self.factor is None) == (self.plus is None):
            raise ValueError("a band is either a factor or an absolute amount, not both or neither")
        if self.factor is not None and not self.factor >= 1.0:
            raise ValueError(f"a relative band's factor must be >= 1, got {self.factor}")
        if self.plus is not None and not self.plus >= 0.0:
            raise ValueError(f"an absolute band must be >= 0, got {self.plus}")

    def limits(self, recorded: float) -> tuple[float, float]:
        """The interval around ``recorded`` that noise alone may reach."""
        if self.factor is not None:
            lo, hi = sorted((recorded / self.factor, recorded * self.factor))
            return lo, hi
        return recorded - self.plus, recorded + self.plus

    def __str__(self) -> str:
        return f"×/÷ {self.factor:g}" if self.factor is not None else f"± {self.plus:g}"


def verdict(measured: float | None, recorded: float | None, higher_is_better: bool, band: Band) -> str:
    """OK, BETTER, REGRESSED or NEW (nothing recorded yet).

    A missing or NaN measurement (the run answered NULL, or could not reach the criterion) is a
    regression against any recorded figure: the claim did not hold.
    """
    if recorded is None or (isinstance(recorded, float) and math.isnan(recorded)):
        return NEW
    if measured is None or math.isnan(measured):
        return REGRESSED
    lo, hi = band.limits(recorded)
    if lo <= measured <= hi:
        return OK
    worse = measured < lo if higher_is_better else measured > hi
    return REGRESSED if worse else BETTER


def ratio(measured: float | None, recorded: float | None) -> float | None:
    """measured / recorded, or None where either is missing or not finite, or the recorded figure is 0."""
    if measured is None or recorded is None or recorded == 0 or not math.isfinite(measured) or math.isnan(recorded):
        return None
    return measured / recorded


def exit_status(verdicts: list[str]) -> int:
    """1 when any figure regressed, else 0."""
    return 1 if REGRESSED in verdicts else 0
