"""Explicit random streams: one xorshift64* state per chain, seeded from a numpy SeedSequence.

The state is a plain ``uint64`` that kernels carry in a local variable and write back at the
end of a call, so no global generator exists and the same seed gives the same stream.

>>> states = chain_states(seed=3, chains=2)
>>> states.dtype.name, states.shape, bool(states.all())
('uint64', (2,), True)
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["chain_states", "chain_generators", "group_states", "group_generators", "next_state", "uniform", "bounded"]

_MULT = np.uint64(0x2545F4914F6CDD1D)
_S12 = np.uint64(12)
_S25 = np.uint64(25)
_S27 = np.uint64(27)
_S11 = np.uint64(11)
_S32 = np.uint64(32)
_INV53 = 1.0 / 9007199254740992.0  # 2**-53


def _children(seed: int, chains: int) -> list[np.random.SeedSequence]:
    return np.random.SeedSequence(seed).spawn(chains)


def chain_states(seed: int, chains: int) -> np.ndarray:
    """One non-zero xorshift64* state per chain (uint64[chains]), independent streams."""
    out = np.empty(chains, dtype=np.uint64)
    for c, child in enumerate(_children(seed, chains)):
        s = child.generate_state(1, dtype=np.uint64)[0]
        out[c] = s if s != 0 else np.uint64(0x9E3779B97F4A7C15)  # xorshift's one fixed point is 0
    return out


def chain_generators(seed: int, chains: int, stream: int = 1) -> list[np.random.Generator]:
    """numpy Generators for per-chain set-up work (initial states), distinct from `chain_states`."""
    return [np.random.default_rng(child.spawn(stream + 1)[stream]) for child in _children(seed, chains)]


def group_states(seed: int, first: int, chains: int, per_chain: int = 1) -> np.ndarray:
    """The `chain_states` of chains ``first .. first + chains - 1`` of a larger run, ``per_chain``
    streams each (chain c's are streams c·per_chain …): a chain's streams depend on its index in
    the run, never on the group it runs in."""
    lo, hi = first * per_chain, (first + chains) * per_chain
    return chain_states(seed, max(hi, 1))[lo:hi] if hi > lo else chain_states(seed, 1)


def group_generators(seed: int, first: int, chains: int, stream: int = 1) -> list[np.random.Generator]:
    """The `chain_generators` of chains ``first .. first + chains - 1`` of a larger run."""
    return chain_generators(seed, first + chains, stream)[first:]


@njit(cache=True)
def next_state(s):
    """Advance a xorshift64 state (the caller keeps it; 0 is never reached from non-zero)."""
    s ^= s >> _S12
    s ^= s << _S25
    s ^= s >> _S27
    return s


@njit(cache=True)
def uniform(s):
    """A float in [0, 1) from an advanced state (xorshift64* output, top 53 bits)."""
    return np.float64((s * _MULT) >> _S11) * _INV53


@njit(cache=True)
def bounded(s, n):
    """An integer in [0, n) from an advanced state (multiply-shift on the top 32 bits; n < 2**32)."""
    return np.int64((((s * _MULT) >> _S32) * np.uint64(n)) >> _S32)
