"""Fields that change together among matches: one joint distribution of a group's levels.

The Fellegi–Sunter model multiplies the fields' m-probabilities: a match disagrees on address,
city and postcode with probability m_addr · m_city · m_zip. When a person moves, the three change
*together*: one event, with probability P(move), not three independent ones. The product then
counts a move three times, and a model fitted by EM explains the people who moved as a second
kind of non-match (so agreeing on a date of birth and an e-mail but not on the place looks like
strong evidence against).

A `FieldGroup` replaces the product over its members with their joint distribution among
matches: `m[c]` = P(the members' levels are c | match, which members are non-NULL), over the
*codes* c of the members' level vectors (mixed radix over level + 1, so NULL is a digit). For a
pair with at least two members non-NULL, its correction

    log2 m_G[c] − Σ_{members non-NULL} log2 m_k[level_k]      bits

is added to the pair's match weight (`correction_bits`; spread evenly over the non-NULL members
in per-field contributions): the members' m are their marginals, so with the correction a
pair's match-class likelihood uses the joint. A group whose members are independent among
matches has m_G = Π m_k and adds nothing.

The same fields agree together among non-matches (one address has one postcode): `u_bits[T]`,
for each set T of two or more members (bit r = member r), is log2 u_T − Σ_{k∈T} log2 u_k0, with
u_T the share of record pairs equal on every member of T (counted from the values, as a
field's exact u is). A pair exact on exactly the members T loses u_bits[T] (`u_correction`):
agreeing on an address and its postcode is one coincidence, not two.

Layout: codes are int64, `code = Σ_r (level_r + 1) · place_r` with `place` the cumulative product
of `(n_levels_r + 1)`; m_G is float64[Π (n_levels_r + 1)], summing to 1 within every NULL mask
of two or more non-NULL members (elsewhere it is the product of the marginals).

Which fields form groups is estimated (`pdbq.coref.comoving`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "FieldGroup",
    "correction_bits",
    "correction_nats",
    "estimate_joint",
    "exact_subsets",
    "from_correction",
    "group_codes",
    "independent",
    "marginal",
    "together",
    "u_correction",
]


@dataclass(frozen=True, eq=False)
class FieldGroup:
    """Member field indices (ascending) and the joint m over their codes (module docstring)."""

    members: tuple[int, ...]
    m: np.ndarray
    u_bits: np.ndarray | None = None  # float64[2 ** len(members)]; None = no correction among non-matches


def _radix(n_levels: tuple[int, ...]) -> tuple[np.ndarray, int]:
    r = np.asarray(n_levels, np.int64) + 1
    place = np.concatenate([[1], np.cumprod(r[:-1])]).astype(np.int64)
    return place, int(np.prod(r))


def group_codes(levels: np.ndarray, members: tuple[int, ...], n_levels: tuple[int, ...]) -> np.ndarray:
    """The code of each row's member levels (`levels`: rows × fields, -1 = NULL)."""
    place, _ = _radix(n_levels)
    return (levels[:, list(members)].astype(np.int64) + 1) @ place


def _decode(n_levels: tuple[int, ...]) -> np.ndarray:
    """codes × members: each code's member levels (-1 = NULL)."""
    place, size = _radix(n_levels)
    c = np.arange(size, dtype=np.int64)
    return (c[:, None] // place[None, :]) % (np.asarray(n_levels, np.int64) + 1)[None, :] - 1


def independent(ms: list[np.ndarray]) -> np.ndarray:
    """Π of the members' marginals over the non-NULL ones, per code (`ms`: the members' m)."""
    lv = _decode(tuple(m.size for m in ms))
    out = np.ones(lv.shape[0])
    for r, m in enumerate(ms):
        g = lv[:, r]
        out *= np.where(g >= 0, m[np.maximum(g, 0)], 1.0)
    return out


def _masks(n_levels: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Per code: its NULL mask (bit r set = member r non-NULL) and how many members are non-NULL."""
    lv = _decode(n_levels)
    nonnull = lv >= 0
    mask = (nonnull * (1 << np.arange(lv.shape[1]))[None, :]).sum(axis=1)
    return mask, nonnull.sum(axis=1)


def correction_nats(joint: np.ndarray, ms: list[np.ndarray]) -> np.ndarray:
    """ln m_G[c] − Σ ln m_k per code; 0 where fewer than two members are non-NULL."""
    ind = independent(ms)
    _, k = _masks(tuple(m.size for m in ms))
    return np.where(k >= 2, np.log(joint) - np.log(ind), 0.0)


def correction_bits(group: FieldGroup, ms: list[np.ndarray], levels: np.ndarray) -> np.ndarray:
    """Bits per row of `levels` (rows × all fields) that the group adds (module docstring)."""
    corr = correction_nats(group.m, ms) / np.log(2.0)
    return corr[group_codes(levels, group.members, tuple(m.size for m in ms))]


def estimate_joint(weights: np.ndarray, ms: list[np.ndarray]) -> np.ndarray:
    """m_G from the expected matches per code (`weights`, float[codes]): per NULL mask of two or
    more non-NULL members, the counts plus half a pair per code spread as the product of the
    marginals (few matches leave the group near independence), normalised within the mask."""
    ind = independent(ms)
    mask, k = _masks(tuple(m.size for m in ms))
    out = ind.copy()
    for mk in np.unique(mask[k >= 2]):
        sel = mask == mk
        prior = 0.5 * sel.sum()
        x = weights[sel] + prior * ind[sel] / ind[sel].sum()
        out[sel] = x / x.sum()
    return out


def from_correction(corr: np.ndarray, ms: list[np.ndarray]) -> np.ndarray:
    """The joint m whose correction against the marginals `ms` is `corr` (nats per code), up to
    the normalisation within each NULL mask."""
    ind = independent(ms)
    mask, k = _masks(tuple(m.size for m in ms))
    out = ind.copy()
    for mk in np.unique(mask[k >= 2]):
        sel = mask == mk
        x = ind[sel] * np.exp(corr[sel])
        out[sel] = x / x.sum()
    return out


def exact_subsets(levels: np.ndarray, members: tuple[int, ...]) -> np.ndarray:
    """Per row, the set of members exact in it (bit r = member r)."""
    return ((levels[:, list(members)] == 0) * (1 << np.arange(len(members)))[None, :]).sum(axis=1)


def u_correction(group: FieldGroup, levels: np.ndarray) -> np.ndarray:
    """Per row of `levels`, the group's u_bits for the members exact in it (0 without u_bits)."""
    if group.u_bits is None:
        return np.zeros(levels.shape[0])
    return group.u_bits[exact_subsets(levels, group.members)]


def marginal(joint: np.ndarray, n_levels: tuple[int, ...], keep: tuple[int, ...]) -> np.ndarray:
    """The joint m of the members at positions `keep` (ascending): the others summed over their
    non-NULL levels (NULLs are independent of the levels)."""
    R = len(n_levels)
    t = joint.reshape(tuple(L + 1 for L in n_levels)[::-1])  # member r is axis R-1-r
    for r in sorted(set(range(R)) - set(keep), reverse=True):
        t = t.take(np.arange(1, n_levels[r] + 1), axis=R - 1 - r).sum(axis=R - 1 - r, keepdims=True)
    return np.ascontiguousarray(t.squeeze(axis=tuple(R - 1 - r for r in range(R) if r not in keep))).reshape(-1)


def together(ms: list[np.ndarray]) -> np.ndarray:
    """EM's start for a group's joint m: half the product of the marginals, half the members
    changing together (each member's last level, "else", only with the others'), within each
    NULL mask — the hypothesis that found the group, which EM then weighs against the data."""
    ind = independent(ms)
    lv = _decode(tuple(m.size for m in ms))
    mask, k = _masks(tuple(m.size for m in ms))
    last = np.asarray([m.size - 1 for m in ms])
    nonnull = lv >= 0
    same = np.all(~nonnull | (lv == last[None, :]), axis=1) | np.all(~nonnull | (lv < last[None, :]), axis=1)
    out = ind.copy()
    for mk in np.unique(mask[k >= 2]):
        sel = mask == mk
        x = ind[sel] * np.where(same[sel], 1.0, 0.0)
        x = 0.5 * ind[sel] + 0.5 * x / x.sum()
        out[sel] = x / x.sum()
    return out
