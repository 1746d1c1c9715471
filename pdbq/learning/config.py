"""Typed, frozen settings of LEARN WEIGHTS (SGD and, where a ranking objective exists, SampleRank).

`LearnConfig.from_options` reads a statement's ``WITH (name = value, ...)`` pairs; `check()`
turns a bad value into an `OptionError` naming the option before any chain runs.

>>> LearnConfig().learning_rate, LearnConfig().decay, LearnConfig().reg
(0.01, 0.95, 0.01)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass

from pdbq.errors import OptionError, suggest
from pdbq.inference.mcmc.config import MAX_CHAINS, MAX_THREADS
from pdbq.option_values import MAX_COUNT, number, whole

__all__ = ["LearnConfig", "REGULARIZATIONS"]

REGULARIZATIONS = ("l2", "l1", "none")


# whole-number options: (lowest, highest, why the highest)
_WHOLE = {
    "epochs": (1, 10**7, "one weight update per epoch; each is kept in the history"),
    "chains": (1, MAX_CHAINS, "each chain keeps its own copy of the state in both worlds"),
    "sweeps": (1, MAX_COUNT, "counts are 64-bit integers inside the kernels"),
    "eval_steps": (1, MAX_COUNT, "counts are 64-bit integers inside the kernels"),
    "threads": (1, MAX_THREADS, "more threads than that only add scheduling overhead"),
    "seed": (0, MAX_COUNT, "seeds are 64-bit integers inside the kernels"),
}
# number options: (lowest, highest, lowest excluded)
_NUMBER = {
    "learning_rate": (0.0, math.inf, True),
    "decay": (0.0, 1.0, True),
    "reg": (0.0, math.inf, False),
    "average": (0.0, 1.0, False),
    "max_weight": (0.0, math.inf, True),
    "time_limit": (0.0, math.inf, True),
    "margin": (0.0, math.inf, False),
}


@dataclass(frozen=True)
class LearnConfig:
    """Settings of one learning run (docs/learning.md).

    epochs: passes of the persistent chains; one weight update per epoch.
    learning_rate: step per grounding, as in DeepDive/numbskull (default 0.01): a weight with n
        groundings moves by at most ``learning_rate · n`` times its mean gradient per epoch, and
        never further than the diagonal Newton step, where a batch update would start to
        overshoot.
    decay: the learning rate is multiplied by this after every epoch (0.95, DeepDive's default).
    regularization: ``'l2'`` (default), ``'l1'`` or ``'none'``; ``reg`` its strength per grounding
        (0.01, DeepDive's default): the objective is the log-likelihood minus
        ``reg · n_w · w² / 2`` (l2) or ``reg · n_w · |w|`` (l1) for each weight w with n_w groundings.
    holdout: fraction of the evidence variables hidden while learning and used for the
        calibration table, accuracy and log-loss afterwards (0 = none); or a SQL query whose rows
        (the keys of one variable relation, named in ``holdout_relation``) are held out.
    holdout_relation: the variable relation a holdout query's keys belong to (default: the only
        relation with evidence).
    chains: persistent chains per world (clamped and free); their feature counts are averaged.
    sweeps: Gibbs sweeps of every chain per epoch.
    threads: worker threads for the chains; None = CPU count.
    seed: root of every random stream (chains, holdout choice).
    time_limit: seconds after which learning stops (checked between sweeps, so within an
        epoch too; the weights of the last finished epoch are kept, and the holdout evaluation
        gets what is left of the limit).
    average: fraction of the final epochs whose weights are averaged into the result (Polyak
        averaging, 0 = the last iterate).
    eval_steps: Gibbs sweeps (over the region the held-out variables reach; 2 chains, at least
        1,000 updates) when the held-out evidence is predicted after learning.
    max_weight: a weight beyond ±max_weight (or NaN) is divergence: an error, weights kept.
    margin, optimizer, averaged, walk: SampleRank only (`pdbq.learning.samplerank`): the score
        margin (FACTORIE's 1), ``'adagrad'`` or ``'perceptron'``, averaged parameters, and whether
        the walk follows the model or the objective. SampleRank's ``learning_rate`` defaults to
        1 (its updates are not per grounding) and ``epochs`` counts proposals per labelled
        variable.
    gold, objective: cluster rules only (`pdbq.learning.coref_statement`): the table or query
        giving each mention's gold entity (first column the mention key, second the entity), and
        the ranking objective against it, ``'b3'`` (B³ F1, default) or ``'pairwise'`` (pairwise F1).
        There ``epochs`` counts proposals per training mention, ``holdout`` a fraction of the gold
        entities (or a query of mention keys), and ``optimizer``, ``learning_rate`` default to
        ``'perceptron'`` and 0.01 (measured on Cora and Fodors–Zagats, docs/learning.md).
    """

    epochs: int = 100
    learning_rate: float = 0.01
    decay: float = 0.95
    regularization: str = "l2"
    reg: float = 0.01
    holdout: float | str = 0.0
    holdout_relation: str | None = None
    chains: int = 1
    sweeps: int = 1
    threads: int | None = None
    seed: int = 0
    time_limit: float | None = None
    average: float = 0.5
    eval_steps: int = 200
    max_weight: float = 1.0e4
    margin: float = 1.0
    optimizer: str = "adagrad"
    averaged: bool = True
    walk: str = "model"
    gold: str | None = None
    objective: str = "b3"

    def check(self) -> LearnConfig:
        """Self, or an `OptionError` naming the first option of the wrong type or range."""
        for name, (low, high, why) in _WHOLE.items():
            if name == "threads" and self.threads is None:
                continue
            whole(name, getattr(self, name), low=low, high=high, why=why)
        for name, (low, high, low_open) in _NUMBER.items():
            if name == "time_limit" and self.time_limit is None:
                continue
            number(name, getattr(self, name), low=low, high=high, low_open=low_open)
        if self.regularization not in REGULARIZATIONS:
            raise OptionError(
                f"option 'regularization' must be one of {', '.join(map(repr, REGULARIZATIONS))}, got {self.regularization!r}"
            )
        if isinstance(self.holdout, str):
            if not self.holdout.strip():
                raise OptionError("option 'holdout' is an empty query")
        else:
            number("holdout", self.holdout, low=0.0, high=1.0, high_open=True)
        if self.optimizer not in ("adagrad", "perceptron"):
            raise OptionError(f"option 'optimizer' must be 'adagrad' or 'perceptron', got {self.optimizer!r}")
        if self.walk not in ("model", "objective"):
            raise OptionError(f"option 'walk' must be 'model' or 'objective', got {self.walk!r}")
        if not isinstance(self.averaged, bool):
            raise OptionError(f"option 'averaged' must be TRUE or FALSE, got {self.averaged!r}")
        if self.gold is not None and (not isinstance(self.gold, str) or not self.gold.strip()):
            raise OptionError(f"option 'gold' must be a table name or a query (text), got {self.gold!r}")
        if self.objective not in ("b3", "pairwise"):
            raise OptionError(f"option 'objective' must be 'b3' or 'pairwise', got {self.objective!r}")
        if self.holdout_relation is not None and not isinstance(self.holdout_relation, str):
            raise OptionError(f"option 'holdout_relation' must be a relation name, got {self.holdout_relation!r}")
        return self

    @classmethod
    def from_options(cls, pairs: Iterable[tuple[str, object]]) -> LearnConfig:
        """A config from WITH (name = value) pairs; unknown names are an OptionError."""
        names = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, object] = {}
        for name, value in pairs:
            key = name.lower()
            if key not in names:
                raise OptionError(f"unknown LEARN WEIGHTS option '{name}'.{suggest(key, names)}")
            if key in _NUMBER or (key == "holdout" and not isinstance(value, str)):
                if not (key == "time_limit" and value is None):
                    low, high, low_open = _NUMBER.get(key, (0.0, 1.0, False))
                    value = number(key, value, low=low, high=high, low_open=low_open)
            elif key in _WHOLE and not (key == "threads" and value is None):
                low, high, why = _WHOLE[key]
                value = whole(key, value, low=low, high=high, why=why)
            if key in ("regularization", "optimizer", "walk", "objective") and isinstance(value, str):
                value = value.lower()
            values[key] = value
        return cls(**values).check()  # type: ignore[arg-type]
