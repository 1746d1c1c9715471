"""SampleRank (seed 002, Algorithm 1): learning weights from ranked pairs of MCMC neighbours.

Every step proposes a jump Y → Y' and compares the two configurations twice: by a *ranking
objective* F (e.g. accuracy against gold labels, B³ F1 against a gold clustering) and by the
model score Θ·φ. When the model ranks them differently from F by less than ``margin``, the
weights move towards the better one: Θ += η (φ(Y⁺) − φ(Y⁻)) (perceptron) or, per coordinate,
η / sqrt(Σ past squared updates) (AdaGrad, as FACTORIE's SampleRank uses with margin 1). The walk
then follows the model (Metropolis acceptance exp(Θ·Δφ / temperature)) or the objective.
The result is the averaged parameter vector (the mean of Θ over all steps, kept lazily), which
is what the convergence proof of seed 002 covers and what generalises.

The algorithm only needs a `RankingProblem`: propose a jump, tell its feature change and its
objective change, and accept it. `GraphRanking` is one for a pdbq `FactorGraph` with gold
labels: single-variable moves, objective = number of labelled variables equal to their gold
value. Coreference models provide their own problem (entity moves, B³/pairwise F1).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numba import njit

from pdbq.errors import LearningError, OptionError
from pdbq.graph.layout import FactorGraph, validate
from pdbq.inference.mcmc.kernels import _phi, group_value

__all__ = ["SampleRankConfig", "SampleRankResult", "RankingProblem", "GraphRanking", "samplerank"]

OPTIMIZERS = ("perceptron", "adagrad")
WALKS = ("model", "objective")


@dataclass(frozen=True)
class SampleRankConfig:
    """steps: proposals; margin: the score gap the model must put between the better and the
    worse configuration (FACTORIE: 1); learning_rate: η; optimizer: ``'perceptron'`` or
    ``'adagrad'``; averaged: return the mean of Θ over the steps (else the last Θ); walk:
    ``'model'`` (Metropolis on the current model, at ``temperature``) or ``'objective'``
    (accept a jump unless it lowers F); seed: the random stream; time_limit: seconds."""

    steps: int = 100_000
    margin: float = 1.0
    learning_rate: float = 1.0
    optimizer: str = "adagrad"
    averaged: bool = True
    walk: str = "model"
    temperature: float = 1.0
    seed: int = 0
    time_limit: float | None = None

    def check(self) -> SampleRankConfig:
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise OptionError(f"option 'steps' must be a positive integer, got {self.steps!r}")
        for name in ("margin", "learning_rate", "temperature"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 or (
                name != "margin" and v == 0
            ):
                raise OptionError(f"option '{name}' must be a {'non-negative' if name == 'margin' else 'positive'} number, got {v!r}")
        if self.optimizer not in OPTIMIZERS:
            raise OptionError(f"option 'optimizer' must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        if self.walk not in WALKS:
            raise OptionError(f"option 'walk' must be one of {', '.join(WALKS)}, got {self.walk!r}")
        if self.time_limit is not None and not (isinstance(self.time_limit, (int, float)) and self.time_limit > 0):
            raise OptionError(f"option 'time_limit' must be a positive number of seconds, got {self.time_limit!r}")
        return self


class RankingProblem(Protocol):
    """What SampleRank needs from a model and its proposer (one current configuration Y)."""

    n_weights: int

    def propose(self, rng: np.random.Generator) -> Any:
        """A jump from the current configuration (not applied)."""

    def feature_delta(self, move: Any) -> tuple[np.ndarray, np.ndarray]:
        """φ(Y') − φ(Y) as (distinct weight indices, values)."""

    def objective_delta(self, move: Any) -> float:
        """F(Y') − F(Y)."""

    def accept(self, move: Any) -> None:
        """Make Y' the current configuration."""


@dataclass(frozen=True, eq=False)
class SampleRankResult:
    weights: np.ndarray  # averaged (or last) parameters
    last: np.ndarray  # the final Θ
    steps: int
    updates: int  # steps whose ranking violated the margin
    accepted: int
    objective_gain: float  # Σ F changes of the accepted jumps: F(final) − F(start)
    seconds: float
    interrupted: bool = False  # stopped by KeyboardInterrupt (the steps done so far are kept)


def samplerank(
    problem: RankingProblem,
    config: SampleRankConfig = SampleRankConfig(),
    *,
    initial: np.ndarray | None = None,
    learn: np.ndarray | None = None,
    on_progress: Callable[[int], bool | None] | None = None,
    on_weights: Callable[[np.ndarray], None] | None = None,
    weights_every: int = 1000,
) -> SampleRankResult:
    """Run Algorithm 1 of seed 002 on ``problem``; ``learn`` masks the weights that may change
    (others keep their ``initial`` value, default 0). ``on_progress(steps)`` is called every
    10,000 steps; returning True stops. ``on_weights(Θ)`` is called at the start and every
    ``weights_every`` steps (a proposer that reads the current model, e.g. coreference splits)."""
    config = config.check()
    if isinstance(weights_every, bool) or not isinstance(weights_every, int) or weights_every < 1:
        raise OptionError(f"weights_every must be a positive integer, got {weights_every!r}")
    k = int(problem.n_weights)
    theta = np.zeros(k) if initial is None else np.asarray(initial, dtype=np.float64).copy()
    mask = np.ones(k, dtype=bool) if learn is None else np.asarray(learn, dtype=bool)
    if not mask.any():
        raise LearningError("nothing to learn: no weight may change")
    lazy = np.zeros(k)  # Σ_t t · update_t: the mean of Θ over T steps is Θ_T − lazy / T
    g2 = np.zeros(k)
    rng = np.random.default_rng(np.random.SeedSequence(config.seed))
    counts = np.zeros(4)  # updates, accepted, objective gain, steps completed
    t0 = time.perf_counter()
    if on_weights is not None:
        on_weights(theta)
    interrupted = False
    try:
        step = _loop(problem, config, theta, mask, lazy, g2, rng, t0, on_progress, on_weights, weights_every, counts)
    except _Interrupted as stop:  # Ctrl-C: keep the steps done so far
        step, interrupted = stop.step, True
    updates, accepted, gain = counts[0], counts[1], counts[2]
    if step == 0:
        raise LearningError("learning was interrupted before its first step; the previous weights are kept")
    avg = theta - lazy / step if config.averaged else theta.copy()
    avg[~mask] = theta[~mask]
    return SampleRankResult(avg, theta, step, int(updates), int(accepted), float(gain), time.perf_counter() - t0, interrupted)


class _Interrupted(Exception):
    def __init__(self, step: int):
        self.step = step


def _loop(problem, config, theta, mask, lazy, g2, rng, t0, on_progress, on_weights, weights_every, counts) -> int:
    """Algorithm 1's steps; updates theta, lazy, g2 and counts (updates, accepted, gain) in place
    and returns the steps done; a KeyboardInterrupt becomes `_Interrupted` (steps done so far)."""
    try:
        return _steps(problem, config, theta, mask, lazy, g2, rng, t0, on_progress, on_weights, weights_every, counts)
    except KeyboardInterrupt:
        raise _Interrupted(int(counts[3])) from None


def _steps(problem, config, theta, mask, lazy, g2, rng, t0, on_progress, on_weights, weights_every, counts) -> int:
    step = 0
    for step in range(1, config.steps + 1):
        if on_weights is not None and step % weights_every == 0:
            on_weights(theta)
        move = problem.propose(rng)
        d_f = float(problem.objective_delta(move))
        idx, val = problem.feature_delta(move)
        d_score = float(theta[idx] @ val) if len(idx) else 0.0
        if d_f != 0.0:
            sign = 1.0 if d_f > 0 else -1.0
            if sign * d_score < config.margin:  # Y⁺ must outscore Y⁻ by the margin
                u = sign * val * mask[idx]
                if config.optimizer == "adagrad":
                    g2[idx] += u * u
                    u = u / np.sqrt(np.maximum(g2[idx], 1e-12))
                u = config.learning_rate * u
                theta[idx] += u
                lazy[idx] += step * u
                counts[0] += 1
                d_score = float(theta[idx] @ val)
        if config.walk == "objective":
            take = d_f >= 0.0
        else:
            a = d_score / config.temperature
            take = a >= 0.0 or rng.random() < math.exp(a)
        if take:
            problem.accept(move)
            counts[1] += 1
            counts[2] += d_f
        counts[3] = step  # a step is complete: Θ and the lazy sums agree
        if step % 10_000 == 0:
            if on_progress is not None and on_progress(step):
                break
            if config.time_limit is not None and time.perf_counter() - t0 >= config.time_limit:
                break
    return step


# ---------------------------------------------------------------------------------------------
# a RankingProblem over a factor graph: single-variable moves, accuracy against gold labels


@njit(cache=True)
def _delta(fn, fo, to, fvars, lits, card, tables, weight, group, semantics, group_weight,
           var_offsets, var_factors, values, gsums, v, xn, out_idx, out_val, dense, mark):
    """φ(values with v = xn) − φ(values), per weight: fills out_idx/out_val with distinct weight
    indices and returns their count (``dense``/``mark``: zeroed scratch, one entry per weight,
    left zeroed)."""
    xc = values[v]
    n = 0
    j = var_offsets[v]
    end = var_offsets[v + 1]
    last = -1
    while j < end:
        f = var_factors[j]
        j += 1
        if f == last:  # a factor listed once per slot holding v
            continue
        last = f
        gr = group[f]
        new = _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, values, v, xn)
        old = _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, values, v, xc)
        if gr < 0:
            k = weight[f]
            if not mark[k]:
                mark[k] = True
                out_idx[n] = k
                n += 1
            dense[k] += new - old
        else:
            # the group's change: all of its factors touching v are consecutive (sorted by group)
            d = new - old
            while j < end and group[var_factors[j]] == gr:
                f2 = var_factors[j]
                j += 1
                if f2 == last:
                    continue
                last = f2
                d += _phi(fn[f2], fo[f2], fo[f2 + 1], to[f2], fvars, lits, card, tables, values, v, xn) - _phi(
                    fn[f2], fo[f2], fo[f2 + 1], to[f2], fvars, lits, card, tables, values, v, xc
                )
            s = gsums[gr]
            k = group_weight[gr]
            if not mark[k]:
                mark[k] = True
                out_idx[n] = k
                n += 1
            dense[k] += group_value(semantics[gr], s + d) - group_value(semantics[gr], s)
    for i in range(n):
        k = out_idx[i]
        out_val[i] = dense[k]
        dense[k] = 0.0
        mark[k] = False
    return n


@njit(cache=True)
def _apply(fn, fo, to, fvars, lits, card, tables, group, var_offsets, var_factors, values, gsums, v, xn):
    xc = values[v]
    last = -1
    for j in range(var_offsets[v], var_offsets[v + 1]):
        f = var_factors[j]
        if f == last:
            continue
        last = f
        gr = group[f]
        if gr >= 0:
            gsums[gr] += _phi(fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, values, v, xn) - _phi(
                fn[f], fo[f], fo[f + 1], to[f], fvars, lits, card, tables, values, v, xc
            )
    values[v] = xn


class GraphRanking:
    """Single-variable jumps on ``graph`` over ``sites`` (default: the variables with a gold
    label); objective: the number of variables equal to their gold label (``gold[v]``, -1 for
    none). Evidence in the graph stays clamped; sites must not be evidence."""

    def __init__(self, graph: FactorGraph, gold: np.ndarray, *, sites: np.ndarray | None = None, seed: int = 0):
        validate(graph)
        gold = np.asarray(gold, dtype=np.int64)
        if gold.shape != (graph.n_vars,):
            raise LearningError("gold needs one entry per variable (-1: no label)")
        if not (gold >= 0).any():
            raise LearningError("nothing to rank against: no variable has a gold label")
        self.g = graph
        self.gold = gold
        self.sites = np.flatnonzero(gold >= 0) if sites is None else np.asarray(sites, dtype=np.int64)
        if (graph.evidence[self.sites] >= 0).any():
            raise LearningError("a SampleRank site is evidence (clamped); unclamp the labelled variables")
        self.n_weights = graph.weights.shape[0]
        rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
        card = graph.cardinality
        self.values = np.where(graph.evidence >= 0, graph.evidence, rng.integers(0, card)).astype(np.int32)
        self.gsums = np.zeros(graph.n_groups)
        from pdbq.inference.mcmc.kernels import group_sums_into

        group_sums_into(graph, graph.tables, self.values, self.gsums)
        deg = int(np.diff(graph.var_offsets).max()) if graph.n_vars else 0
        self._idx = np.zeros(max(deg, 1), np.int64)
        self._val = np.zeros(max(deg, 1))
        self._dense = np.zeros(self.n_weights)
        self._mark = np.zeros(self.n_weights, dtype=np.bool_)

    def objective(self) -> int:
        lab = self.gold >= 0
        return int(np.sum(self.values[lab] == self.gold[lab]))

    def propose(self, rng: np.random.Generator) -> tuple[int, int]:
        v = int(self.sites[rng.integers(self.sites.shape[0])])
        k = int(self.g.cardinality[v])
        x = int(rng.integers(k - 1))
        return v, x + (x >= self.values[v])  # a different value, uniformly

    def feature_delta(self, move: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        g = self.g
        v, xn = move
        n = _delta(g.function, g.factor_offsets, g.table_offset, g.factor_vars, g.factor_literals, g.cardinality,
                   g.tables, g.weight, g.group, g.semantics, g.group_weight, g.var_offsets, g.var_factors,
                   self.values, self.gsums, v, xn, self._idx, self._val, self._dense, self._mark)
        return self._idx[:n].copy(), self._val[:n].copy()

    def objective_delta(self, move: tuple[int, int]) -> float:
        v, xn = move
        gv = self.gold[v]
        if gv < 0:
            return 0.0
        return float(xn == gv) - float(self.values[v] == gv)

    def accept(self, move: tuple[int, int]) -> None:
        g = self.g
        v, xn = move
        _apply(g.function, g.factor_offsets, g.table_offset, g.factor_vars, g.factor_literals, g.cardinality,
               g.tables, g.group, g.var_offsets, g.var_factors, self.values, self.gsums, v, xn)
