"""Which sampled targets have a constant full conditional, or a value the evidence forces: their
Rao-Blackwellised estimate is exact (standard error 0, R-hat 1) instead of being held to the
sampler's resolution floor or read as a frozen chain (`pdbq.inference.mcmc.estimates`)."""

from __future__ import annotations

import numpy as np

from pdbq.graph.layout import FactorGraph
from pdbq.inference.mcmc.feasibility import forced_values
from pdbq.inference.mcmc.kernels import KernelGraph

__all__ = ["constant_targets", "forced_targets"]


def constant_targets(graph: FactorGraph, kg: KernelGraph, live: np.ndarray) -> np.ndarray:
    """True where a target's full conditional depends on no other non-evidence variable: no pair
    factor with a free variable, and no general factor (a head group's, or one over several
    variables) whose group holds a free variable other than the target (e.g. a head's votes
    from observed voters only)."""
    pair = (kg.bb_off[live + 1] - kg.bb_off[live]) + (kg.pt_off[live + 1] - kg.pt_off[live])
    n_gen = (kg.gen_off[live + 1] - kg.gen_off[live]).astype(np.int64)
    out = (pair == 0) & (n_gen == 0)
    check = np.flatnonzero((pair == 0) & (n_gen > 0))
    if check.size == 0:
        return out
    owner = np.repeat(np.arange(check.size), n_gen[check])
    factors = kg.gen_factor[_ranges(kg.gen_off[live[check]], n_gen[check])]
    lo, hi = _free_span(graph, factors)
    v = live[check][owner]
    only_self = (lo < 0) | ((lo == v) & (hi == v))
    out[check] = np.bincount(owner, weights=~only_self, minlength=check.size) == 0
    return out


def forced_targets(graph: FactorGraph, live: np.ndarray) -> np.ndarray:
    """True where the evidence and the hard factors leave a target one possible value
    (`feasibility.forced_values`): its marginal is that point mass, so batch means that never
    move are its answer, not a frozen chain (a pedigree's alleles that the markers pin down).
    A chain in a world the hard factors forbid is still caught (the samplers' final-state
    check), and one that visited other values shows them in its batch means."""
    forced, _ = forced_values(graph)
    return np.isin(live, forced) if forced.size else np.zeros(live.shape[0], dtype=bool)


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The indices start, start + 1, ... of each (start, count), concatenated."""
    counts = np.asarray(counts, dtype=np.int64)
    firsts = np.cumsum(counts) - counts
    return np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(firsts, counts) + np.repeat(
        np.asarray(starts, dtype=np.int64), counts)


def _free_span(graph: FactorGraph, factors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Smallest and largest non-evidence variable of each factor given, over its whole head group
    when it has one (-1, -1: none)."""
    groups = np.unique(graph.group[factors])
    groups = groups[groups >= 0]
    wanted = np.unique(np.concatenate([factors, np.flatnonzero(np.isin(graph.group, groups))]))
    size = graph.factor_offsets[wanted + 1] - graph.factor_offsets[wanted]
    edges = _ranges(graph.factor_offsets[wanted], size)
    var = graph.factor_vars[edges].astype(np.int64)
    slot = np.repeat(np.arange(wanted.size), size)
    free = graph.evidence[var] < 0
    lo = np.full(wanted.size, np.iinfo(np.int64).max)
    hi = np.full(wanted.size, -1, dtype=np.int64)
    np.minimum.at(lo, slot[free], var[free])
    np.maximum.at(hi, slot[free], var[free])
    grouped = graph.group[wanted] >= 0
    if grouped.any():  # merge each head group's spans
        gid = np.searchsorted(groups, graph.group[wanted][grouped])
        glo = np.full(groups.size, np.iinfo(np.int64).max)
        ghi = np.full(groups.size, -1, dtype=np.int64)
        np.minimum.at(glo, gid, lo[grouped])
        np.maximum.at(ghi, gid, hi[grouped])
        lo[grouped], hi[grouped] = glo[gid], ghi[gid]
    at = np.searchsorted(wanted, factors)
    return np.where(hi[at] < 0, -1, lo[at]), hi[at]
