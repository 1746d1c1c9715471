"""Settings of a distributed coreference MAP run (`pdbq.distributed.resolve_distributed`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pdbq.errors import OptionError
from pdbq.inference.coreference.hierarchy import LevelMoves

__all__ = ["DistributedConfig", "REDISTRIBUTIONS", "MAX_ROUNDS", "MAX_PARTITIONS"]

REDISTRIBUTIONS = ("random", "super", "super_mcmc")
# Each round costs the coordinator a dealing pass and Dask tens of milliseconds; beyond this many
# a run is overhead, not annealing.
MAX_ROUNDS = 100_000
# One task per partition and round; the coordinator deals and gathers them all every round.
MAX_PARTITIONS = 4096


def _int(name: str, v: object, low: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise OptionError(f"option '{name}' must be an integer >= {low}, got {v!r}")


def _positive(name: str, v: object) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0 and math.isfinite(v)):
        raise OptionError(f"option '{name}' must be a positive number, got {v!r}")


@dataclass(frozen=True)
class DistributedConfig:
    """How the map/redistribute rounds run (docs/distributed.md).

    workers: partitions per round, one task each (the cluster may have more or fewer workers;
        the answer depends on this number and the seed only).
    rounds: map/redistribute rounds (annealed from ``temperature`` to ``min_temperature``),
        followed by up to ``greedy_rounds`` zero-temperature rounds that stop once no move is
        accepted anywhere.
    steps_per_round: MH steps each partition runs per round. A count, not a duration, so the
        run is a function of the seed and ``workers`` alone; pick it so a round takes ≥ 1 s
        (the per-round overhead of Dask is tens of milliseconds; the benchmark prints the split).
    redistribution: ``'random'`` (entities dealt to partitions at random), ``'super'``
        (super-entities — groups of similar entities, seed 001 §3.2 — stay on one partition; a
        super-entity is a connected component of entities linked by a pair whose score +
        ``super_bias`` is positive, one pass over the pairs), or ``'super_mcmc'`` (super-entities
        sampled by entity moves on the entity-contracted graph under the lower bias, seed 001's
        own level: faithful but it costs the coordinator a contraction per round).
    hierarchy: run seed 001's sub-entity/entity levels inside each partition instead of flat
        mention moves (`pdbq.inference.coreference.hierarchy`).
    super_bias: the super-entity level's lower bias (each pair's score plus it).
    sub_bias: the sub-entity level's higher bias (each pair's score minus it), with hierarchy.
    p_new / p_split_merge: the entity moves' proposal mixture (`pdbq.inference.coreference.entity_moves`).
    seed: root of every stream (per round and partition).
    retries: times a partition's task is re-run when its worker dies (the task is a pure
        function of its inputs, so a re-run gives the same answer).
    time_limit: seconds after which no new round starts (None: run every round); connecting
        to a scheduler also gives up by then.
    """

    workers: int = 2
    rounds: int = 10
    steps_per_round: int = 1_000_000
    temperature: float = 1.0
    min_temperature: float = 0.02
    greedy_rounds: int = 3
    redistribution: str = "super"
    hierarchy: bool = False
    super_bias: float = 0.3
    sub_bias: float = 0.5
    p_new: float = 0.1
    p_split_merge: float = 0.1
    seed: int = 0
    retries: int = 3
    time_limit: float | None = None

    def check(self) -> DistributedConfig:
        _int("workers", self.workers, 1)
        if self.workers > MAX_PARTITIONS:
            raise OptionError(f"option 'workers' is {self.workers}; at most {MAX_PARTITIONS} partitions are supported")
        _int("rounds", self.rounds, 1)
        if self.rounds > MAX_ROUNDS:
            raise OptionError(f"option 'rounds' must be at most {MAX_ROUNDS:,} (each round costs a dealing pass "
                              f"and a Dask round trip), got {self.rounds if self.rounds < 10**15 else 'a huge number'}")
        if self.time_limit is not None:
            _positive("time_limit", self.time_limit)
        _int("steps_per_round", self.steps_per_round, 1)
        _int("greedy_rounds", self.greedy_rounds, 0)
        _int("seed", self.seed, 0)
        _int("retries", self.retries, 0)
        for name in ("temperature", "min_temperature", "super_bias", "sub_bias"):
            _positive(name, getattr(self, name))
        if self.min_temperature > self.temperature:
            raise OptionError("option 'min_temperature' must not exceed 'temperature'")
        if self.redistribution not in REDISTRIBUTIONS:
            raise OptionError(f"option 'redistribution' must be one of {', '.join(REDISTRIBUTIONS)}, got {self.redistribution!r}")
        if not isinstance(self.hierarchy, bool):
            raise OptionError(f"option 'hierarchy' must be true or false, got {self.hierarchy!r}")
        LevelMoves(1.0, self.p_new, self.p_split_merge).check("entity moves")
        defaults = DistributedConfig()
        if not self.hierarchy and self.sub_bias != defaults.sub_bias:
            raise OptionError("option 'sub_bias' has no effect without hierarchy = True (it is the sub-entity level's bias)")
        if self.redistribution == "random" and self.super_bias != defaults.super_bias:
            raise OptionError("option 'super_bias' has no effect with redistribution = 'random' (it groups the "
                              "super-entities that 'super' and 'super_mcmc' keep together)")
        return self
