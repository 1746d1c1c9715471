"""A world of positive probability to start chains from, when the zero entries of the tables leave
single-site chains stuck in impossible worlds.

The hard factors (`feasibility.hard_factors`: tables holding a zero) are constraints. The search
keeps every variable's domain generalised-arc-consistent (as `feasibility.propagate` does once
for the evidence) while it fixes variables one at a time, the one with the fewest values left
first, to a value drawn at random among them; a factor left without an allowed entry ends the
try, and a new one starts with other draws (no backtracking: on Bayesian networks, whose zeros
sit in conditional tables, arc consistency rarely lets a wrong choice through). Variables in no
hard factor take any value. The world found is only a start: it satisfies every hard factor,
so the chains begin where the zeros allow and single-site moves need not cross them.
"""

from __future__ import annotations

import copy
import time

import numpy as np

from pdbq.inference.mcmc.feasibility import HardFactors, _allowed, factors_touching, hard_factors, revise

__all__ = ["feasible_world"]


class _Search:
    """Domains (bool[card] per variable of a hard factor) and values left per variable of one try;
    what does not change between tries (the factors of each variable, their allowed entries) is
    shared by every copy (`fresh`)."""

    def __init__(self, hard: HardFactors, evidence: np.ndarray):
        self.hard = hard
        self.size = np.zeros(evidence.shape[0], dtype=np.int64)  # values left per variable
        self.touching = factors_touching(hard)
        self.card = {int(v): int(c) for v, c in zip(hard.vids.tolist(), hard.cardinality.tolist())}
        self.domains: dict[int, np.ndarray] = {}
        for v, c in self.card.items():
            d = np.ones(c, dtype=bool)
            if evidence[v] >= 0:
                d[:] = False
                d[int(evidence[v])] = True
            self.domains[v] = d
            self.size[v] = int(d.sum())
        self.allowed = [_allowed(hard.tables[hard.table_offsets[f]: hard.table_offsets[f + 1]])
                        for f in range(hard.n_factors)]

    def fresh(self) -> _Search:
        """A copy whose domains and sizes a try may narrow without touching these."""
        out = copy.copy(self)
        out.domains = {v: d.copy() for v, d in self.domains.items()}
        out.size = self.size.copy()
        return out

    def _narrowed(self, v: int, d: np.ndarray) -> None:
        self.size[v] = int(d.sum())

    def revise(self, queue: list[int]) -> bool:
        """Arc consistency from the factors in ``queue``; False when one is left without an entry."""
        queued = np.zeros(self.hard.n_factors, dtype=bool)
        queued[queue] = True
        return revise(self.hard, lambda v, c: self.domains[v], self.domains, self.touching, list(queue), queued,
                      allowed=self.allowed.__getitem__, narrowed=self._narrowed) is None


def feasible_world(graph, seed: int, tries: int = 8, deadline: float | None = None) -> np.ndarray | None:
    """Values (int64[n_vars], evidence kept) of a world that every hard factor of ``graph`` allows,
    or None (no hard factor to satisfy, no world found in ``tries`` tries, or the ``deadline``, a
    `time.perf_counter()` instant, passed)."""
    hard = hard_factors(graph)
    if hard is None:
        return None
    rng = np.random.default_rng(seed)
    card = graph.cardinality.astype(np.int64)
    base = _Search(hard, graph.evidence)
    if not base.revise(list(range(hard.n_factors))):
        return None  # the evidence itself is impossible as far as propagation tells
    for _ in range(tries):
        if deadline is not None and time.perf_counter() >= deadline:
            return None
        s = base.fresh()
        open_mask = np.zeros(graph.n_vars, dtype=bool)
        open_mask[[v for v in s.domains if graph.evidence[v] < 0]] = True
        failed = False
        while open_mask.any():
            if deadline is not None and time.perf_counter() >= deadline:
                return None
            # the most constrained open variable (fewest values left), ties at random
            sizes = np.where(open_mask, s.size, np.iinfo(np.int64).max)
            pick = np.flatnonzero(sizes == sizes.min())
            v = int(pick[rng.integers(pick.size)])
            open_mask[v] = False
            values = np.flatnonzero(s.domains[v])
            d = np.zeros_like(s.domains[v])
            d[values[rng.integers(values.size)]] = True
            s.domains[v] = d
            s.size[v] = 1
            if not s.revise(list(s.touching[v])):
                failed = True
                break
        if failed:
            continue
        out = rng.integers(0, card).astype(np.int64)
        ev = graph.evidence >= 0
        out[ev] = graph.evidence[ev]
        for v, d in s.domains.items():
            out[v] = int(np.flatnonzero(d)[0])
        return out
    return None
