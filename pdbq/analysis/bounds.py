"""Theorem 2 of seed 004: a mixing-time bound from hierarchy width and maximum factor weight.

For a factor graph with n variables, at most s states per variable, e factors, maximum factor
weight M and hierarchy width h,

    t_mix ≤ (log 4 + n·log s + e·M) · n · exp(3·h·M)

(natural logarithms; t_mix counts single-variable Gibbs updates, Definition 1: total-variation
distance ≤ 1/4). pdbq applies it to the clamped hypergraph (n free variables, e hyperedges, head
groups as single factors). The bound increases with h, so an upper bound on the hierarchy width
gives a valid (looser) bound when the exact width is unknown.

>>> round(mixing_bound(n=3, s=2, e=2, m=1.0, h=2), 3)
6615.106
>>> mixing_bound_log10(n=10**6, s=2, e=10**6, m=2.0, h=1000) > 300     # astronomically large
True
"""

from __future__ import annotations

import math

__all__ = ["mixing_bound", "mixing_bound_log10"]


def mixing_bound_log10(*, n: int, s: int, e: int, m: float, h: int) -> float | None:
    """log10 of Theorem 2's bound (finite even when the bound overflows a float); None when n = 0
    (nothing to sample: the chain is mixed from the start)."""
    if n <= 0:
        return None
    if s < 1 or e < 0 or m < 0 or h < 0:
        raise ValueError(f"mixing bound needs s >= 1, e, M, h >= 0 (got s={s}, e={e}, M={m}, h={h})")
    prefactor = math.log(4.0) + n * math.log(s) + e * m
    return math.log10(prefactor) + math.log10(n) + 3.0 * h * m / math.log(10.0)


def mixing_bound(*, n: int, s: int, e: int, m: float, h: int) -> float | None:
    """Theorem 2's bound on t_mix, or None when it does not fit in a float (use the log10 form).

    0.0 when there is no free variable.
    """
    lg = mixing_bound_log10(n=n, s=s, e=e, m=m, h=h)
    if lg is None:
        return 0.0
    if lg > 307.0:
        return None
    return (math.log(4.0) + n * math.log(s) + e * m) * n * math.exp(3.0 * h * m)
