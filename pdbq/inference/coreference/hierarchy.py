"""Seed 001's hierarchical coreference: sub-entities inside entities, super-entities over them.

The model is the pairwise one, ψ(y) = Σ over within-entity candidate pairs of their score, with
two latent levels that make moves of whole groups cheap (seed 001 §3.2):

- **sub-entities** group similar mentions inside an entity. The sub-entity level samples
  mention moves restricted to the mention's entity (`pdbq.coref.contract.within`) under a
  higher bias (each pair's score minus ``sub_bias``), so sub-entities are tighter than entities;
- **entities** are sampled by moving whole sub-entities: the graph contracted by sub-entity
  (`pdbq.coref.contract.contract`) has one node per sub-entity and the summed pair scores
  between them, so a node move changes ψ by exactly what moving its mentions one by one would;
- **super-entities** group similar entities under a lower bias (each pair's score plus
  ``super_bias``), contracted by entity. They do not change the clustering: they guide the
  distributed runner's redistribution (`pdbq.distributed`), which keeps a super-entity's
  entities on one worker.

Inference is round-robin over the levels (the other levels fixed), annealed across rounds from
``temperature`` to ``min_temperature``; each level's moves are `pdbq.inference.coreference.entity_moves`
(mention moves and split/merge with exact proposal ratios). Factor evaluations count the
kernels' pair reads plus the pairs read when a level's graph is rebuilt.

>>> import numpy as np
>>> from pdbq.coref.layout import pair_graph
>>> g = pair_graph(4, np.array([0, 2, 0]), np.array([1, 3, 2]), np.array([3.0, 3.0, -3.0]))
>>> resolve_hierarchical(g, HierarchyConfig(rounds=6, seed=1)).labels.tolist()
[0, 0, 2, 2]
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from pdbq.coref.contract import contract, dense_groups, within
from pdbq.coref.layout import PairGraph, validate_pair_graph
from pdbq.errors import OptionError
from pdbq.inference.coreference.entity_moves import C_ACCEPTED, C_EVALS, C_PROPOSALS, new_scratch, partition_score, run_moves, state_from_labels
from pdbq.inference.mcmc.rng import chain_states

__all__ = ["HierarchyConfig", "HierarchyResult", "LevelMoves", "resolve_hierarchical", "run_level", "super_entities"]


@dataclass(frozen=True)
class LevelMoves:
    """How one level's moves run: ``sweeps`` passes over the level's nodes per round, with
    ``p_new`` (new-singleton proposals) and ``p_split_merge`` (split/merge steps)."""

    sweeps: float = 2.0
    p_new: float = 0.1
    p_split_merge: float = 0.1

    def check(self, name: str) -> LevelMoves:
        if isinstance(self.sweeps, bool) or not isinstance(self.sweeps, (int, float)) or not self.sweeps > 0:
            raise OptionError(f"{name}: sweeps must be a positive number, got {self.sweeps!r}")
        for what in ("p_new", "p_split_merge"):
            v = getattr(self, what)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
                raise OptionError(f"{name}: {what} must be in [0, 1], got {v!r}")
        if self.p_new == 0.0:
            raise OptionError(f"{name}: p_new must be > 0 (otherwise a node can never leave its group)")
        return self


@dataclass(frozen=True)
class HierarchyConfig:
    """Settings of a hierarchical MAP run (module docstring).

    rounds: round-robin cycles (sub-entity level, then entity level).
    sub_bias: added to the bias at the sub-entity level (each pair's score minus it); > 0.
    super_bias: taken from the bias at the super-entity level (each pair's score plus it); > 0.
    temperature / min_temperature: annealing start and end, geometric over the rounds.
    seed: root of the stream (one stream; levels draw from it in turn).
    sub / entity: how each level's moves run (`LevelMoves`).
    greedy_rounds: zero-temperature rounds at the end, stopping early when nothing is accepted.
    """

    rounds: int = 12
    sub_bias: float = 0.5
    super_bias: float = 0.3
    temperature: float = 1.0
    min_temperature: float = 0.02
    seed: int = 0
    sub: LevelMoves = LevelMoves(sweeps=1.0)
    entity: LevelMoves = LevelMoves(sweeps=3.0)
    greedy_rounds: int = 4

    def check(self) -> HierarchyConfig:
        for name in ("rounds", "seed", "greedy_rounds"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (1 if name == "rounds" else 0):
                raise OptionError(f"option '{name}' must be a {'positive' if name == 'rounds' else 'non-negative'} integer, got {v!r}")
        for name in ("sub_bias", "super_bias", "temperature", "min_temperature"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0 and math.isfinite(v)):
                raise OptionError(f"option '{name}' must be a positive number, got {v!r}")
        if self.min_temperature > self.temperature:
            raise OptionError("option 'min_temperature' must not exceed 'temperature'")
        self.sub.check("sub-entity level")
        self.entity.check("entity level")
        return self


@dataclass(frozen=True, eq=False)
class HierarchyResult:
    """The MAP clustering (``labels[m]``: smallest mention index of m's entity), the sub-entities
    it ended with, ψ, counts, and per round (cumulative factor evaluations, ψ, seconds)."""

    labels: np.ndarray
    sub_labels: np.ndarray
    log_score: float
    factor_evaluations: int
    proposals: int
    accepted: int
    seconds: float
    history: list[tuple[int, float, float]] = field(default_factory=list)


def run_level(g: PairGraph, labels: np.ndarray, moves: LevelMoves, temp: float, rng: np.ndarray,
              counters: np.ndarray) -> np.ndarray:
    """One level's moves on ``g`` from ``labels`` (any integers); returns the new dense labels.
    ``rng`` is the caller's uint64[1] stream, advanced in place; ``counters`` as in entity_moves."""
    n = g.indptr.shape[0] - 1
    if n == 0:
        return np.zeros(0, np.int64)
    st = state_from_labels(labels)
    log = np.zeros(1)
    steps = max(1, int(round(moves.sweeps * n)))
    run_moves(g, st, new_scratch(g), rng, steps, temp, moves.p_new, moves.p_split_merge, counters, log)
    return st.label.astype(np.int64)


def _nested(sub: np.ndarray, ent: np.ndarray) -> np.ndarray:
    """Sub-entity ids made unique per (entity, sub-entity), so sub-entities nest in entities."""
    key = ent.astype(np.int64) * (int(sub.max()) + 1 if sub.size else 1) + sub
    return dense_groups(key)[0]


def super_entities(g: PairGraph, labels: np.ndarray, super_bias: float, moves: LevelMoves, temp: float,
                   rng: np.ndarray, counters: np.ndarray) -> tuple[np.ndarray, int]:
    """Super-entity of each mention's entity: entities grouped by moves on the entity-contracted
    graph with each pair's score plus ``super_bias``; the second value is the pairs read."""
    groups, _ = dense_groups(labels)
    cg, reads = contract(g, groups, shift=super_bias)
    sup = run_level(cg, np.arange(cg.indptr.shape[0] - 1), moves, temp, rng, counters)
    return sup[groups], reads


def resolve_hierarchical(g: PairGraph, config: HierarchyConfig = HierarchyConfig(),
                         labels: np.ndarray | None = None) -> HierarchyResult:
    """Annealed round-robin MAP over sub-entities and entities (module docstring), from
    ``labels`` (default: all singletons)."""
    from pdbq.inference.coreference.resolve import stable_labels  # noqa: PLC0415 - one relabelling rule for all drivers

    validate_pair_graph(g)
    config.check()
    n = g.indptr.shape[0] - 1
    t0 = time.perf_counter()
    ent = np.arange(n, dtype=np.int64) if labels is None else dense_groups(labels)[0]
    sub = ent.copy()
    rng = chain_states(config.seed, 1)
    counters = np.zeros(4, np.int64)
    reads = 0
    history: list[tuple[int, float, float]] = []
    cooling = (config.min_temperature / config.temperature) ** (1.0 / max(config.rounds - 1, 1))
    temp = config.temperature
    total = config.rounds + config.greedy_rounds
    for r in range(total):
        greedy = r >= config.rounds
        t = 0.0 if greedy else temp
        before = counters[C_ACCEPTED]
        gs, k = within(g, ent, shift=-config.sub_bias)
        reads += k
        sub = _nested(run_level(gs, sub, config.sub, t, rng, counters), ent)
        cg, k = contract(g, sub)
        reads += k
        first = np.full(cg.indptr.shape[0] - 1, -1, np.int64)
        first[sub[::-1]] = np.arange(n - 1, -1, -1)  # a member of each sub-entity
        ent_of_sub = run_level(cg, ent[first], config.entity, t, rng, counters)
        ent = ent_of_sub[sub]
        history.append((int(counters[C_EVALS]) + reads, float(partition_score(g, ent)), time.perf_counter() - t0))
        if greedy and counters[C_ACCEPTED] == before:
            break
        temp = max(temp * cooling, config.min_temperature)
    return HierarchyResult(
        stable_labels(ent), stable_labels(sub), float(partition_score(g, ent)), int(counters[C_EVALS]) + reads,
        int(counters[C_PROPOSALS]), int(counters[C_ACCEPTED]), time.perf_counter() - t0, history,
    )
