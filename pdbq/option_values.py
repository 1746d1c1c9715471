"""One validator for option values, shared by query options (``USING ... WITH``) and LEARN
WEIGHTS: a value of the wrong type, beyond a double, non-finite or outside its range is an
`OptionError` naming the option — never an OverflowError from a 400-digit literal, a NumPy
ValueError from an array that size, or a numba TypingError from an int beyond 64 bits.

>>> whole("chains", 4.0, high=1024)
4
>>> number("decay", 10**400, high=1.0)
Traceback (most recent call last):
    ...
pdbq.errors.OptionError: option 'decay' is beyond the range of a double, got a 401-digit number
"""

from __future__ import annotations

import math

from pdbq.errors import OptionError

__all__ = ["whole", "number", "shown", "MAX_COUNT"]

# Counts are int64 inside the kernels.
MAX_COUNT = 2**62


def shown(value: object) -> str:
    """``value`` for a message: huge integers by their number of digits, not all of them."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        return f"a {len(str(abs(value)))}-digit number"
    if isinstance(value, float):
        return f"{value:.6g}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _unbound(name: str, value: object) -> None:
    if value is None:
        raise OptionError(f"option '{name}' has no value (a '?' with no parameter bound to it, or NULL)")


def whole(name: str, value: object, *, low: int = 1, high: int = MAX_COUNT, why: str = "") -> int:
    """``value`` as an int in [low, high]; integral floats (``1e6``) are accepted."""
    _unbound(name, value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OptionError(f"option '{name}' takes a whole number, got {shown(value)}")
    if isinstance(value, float) and not value.is_integer():
        raise OptionError(f"option '{name}' takes a whole number, got {shown(value)}")
    if value < low:
        raise OptionError(f"option '{name}' must be at least {low:,}, got {shown(value)}")
    if value > high:
        reason = f" ({why})" if why else ""
        raise OptionError(f"option '{name}' must be at most {high:,}{reason}, got {shown(value)}")
    return int(value)


def number(name: str, value: object, *, low: float = -math.inf, high: float = math.inf, low_open: bool = False,
           high_open: bool = False) -> float:
    """``value`` as a finite float in the range (each end closed unless ``*_open``)."""
    _unbound(name, value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OptionError(f"option '{name}' takes a number, got {shown(value)}")
    try:
        v = float(value)
    except OverflowError:  # a Python int beyond a double (a 310-digit literal)
        raise OptionError(f"option '{name}' is beyond the range of a double, got {shown(value)}") from None
    if not math.isfinite(v):
        raise OptionError(f"option '{name}' must be finite, got {shown(value)}")
    if v < low or (low_open and v == low) or v > high or (high_open and v == high):
        lo = "(" if low_open else "["
        hi = ")" if high_open else "]"
        raise OptionError(f"option '{name}' must lie in {lo}{low:g}, {high:g}{hi}, got {shown(value)}")
    return v
