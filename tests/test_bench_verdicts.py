"""The headline benchmark's verdict rule (examples/bench/verdicts.py): a figure worse than its
recorded value by more than its noise band fails the run, one within the band passes. No
timing here: the rule is a pure function of (measured, recorded, direction, band)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "examples" / "bench"
sys.path.insert(0, str(BENCH))

from verdicts import BETTER, NEW, OK, REGRESSED, Band, exit_status, ratio, verdict  # noqa: E402


@pytest.mark.parametrize(
    ("measured", "recorded", "higher", "band", "expected"),
    [
        # speed-ups (higher is better), relative band ×/÷ 2
        (100.0, 100.0, True, Band(factor=2.0), OK),
        (51.0, 100.0, True, Band(factor=2.0), OK),
        (49.0, 100.0, True, Band(factor=2.0), REGRESSED),
        (18.0, 2660.0, True, Band(factor=3.0), REGRESSED),
        (210.0, 100.0, True, Band(factor=2.0), BETTER),
        # seconds (lower is better), relative band ×/÷ 2.5
        (0.40, 0.18, False, Band(factor=2.5), OK),
        (0.46, 0.18, False, Band(factor=2.5), REGRESSED),
        (5.0, 0.18, False, Band(factor=2.5), REGRESSED),
        (0.05, 0.18, False, Band(factor=2.5), BETTER),
        # F1 (higher is better), absolute band ± 0.005
        (0.966, 0.970, True, Band(plus=0.005), OK),
        (0.964, 0.970, True, Band(plus=0.005), REGRESSED),
        (0.976, 0.970, True, Band(plus=0.005), BETTER),
        # an error (lower is better), absolute band: recorded 0.0014 + 0.0086 = the tolerance 0.01
        (0.0099, 0.0014, False, Band(plus=0.0086), OK),
        (0.0101, 0.0014, False, Band(plus=0.0086), REGRESSED),
        # a yes/no figure with a zero band
        (1.0, 1.0, True, Band(plus=0.0), OK),
        (0.0, 1.0, True, Band(plus=0.0), REGRESSED),
    ],
)
def test_verdict_by_band_and_direction(measured, recorded, higher, band, expected):
    assert verdict(measured, recorded, higher, band) == expected


def test_the_direction_decides_which_side_fails():
    band = Band(factor=1.5)
    assert verdict(50.0, 100.0, True, band) == REGRESSED
    assert verdict(50.0, 100.0, False, band) == BETTER
    assert verdict(200.0, 100.0, True, band) == BETTER
    assert verdict(200.0, 100.0, False, band) == REGRESSED


def test_a_missing_answer_regresses_and_a_missing_record_is_new():
    assert verdict(None, 0.5, True, Band(factor=2.0)) == REGRESSED
    assert verdict(math.nan, 0.5, False, Band(plus=0.1)) == REGRESSED
    assert verdict(0.5, None, True, Band(factor=2.0)) == NEW
    assert verdict(math.inf, 0.002, False, Band(plus=0.0086)) == REGRESSED  # NULL answer: error inf


def test_exit_status_fails_only_on_a_regression():
    assert exit_status([OK, BETTER, NEW]) == 0
    assert exit_status([]) == 0
    assert exit_status([OK, REGRESSED, BETTER]) == 1


def test_ratio_and_band_checks():
    assert ratio(3.0, 2.0) == 1.5
    assert ratio(None, 2.0) is None and ratio(1.0, 0.0) is None and ratio(1.0, None) is None
    assert Band(factor=2.0).limits(10.0) == (5.0, 20.0)
    assert Band(plus=0.5).limits(1.0) == (0.5, 1.5)
    for bad in ({}, {"factor": 2.0, "plus": 0.1}, {"factor": 0.5}, {"plus": -1.0}):
        with pytest.raises(ValueError):
            Band(**bad)


def test_every_recorded_figure_belongs_to_a_claim():
    """A renamed or removed figure must not leave a stale record behind (nor a claim two figures
    with one key): the benchmark would silently stop comparing it."""
    import headlines

    keys = [f.key for c in headlines.CLAIMS for f in c.figures]
    assert len(keys) == len(set(keys))
    assert len({c.name for c in headlines.CLAIMS}) == len(headlines.CLAIMS)
    record = json.loads((BENCH / "headlines.json").read_text(encoding="utf-8"))
    assert set(record) >= {"full", "quick"}
    for mode in ("full", "quick"):
        for key, entry in record[mode].items():
            assert key in keys, f"{mode}: {key} is recorded but no claim reports it"
            assert {"value", "machine", "date", "source"} <= set(entry)
