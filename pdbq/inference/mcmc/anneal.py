"""MAP by simulated annealing (seeds 000/001): Gibbs at temperature τ, then a greedy finish.

A variable's new value is drawn from its conditional raised to 1/τ, i.e. a move y → y' is
taken with weight (p(y')/p(y))^(1/τ). τ falls geometrically per pass over the sites. Every chain
keeps its running log score relative to its start (each move adds its Δ, summed as a
double-double so that small weights stay resolved beside huge ones) and saves its best state at
pass boundaries; a final iterated-conditional-modes pass from that state climbs to a local optimum.
The best chain wins; its score is recomputed from scratch with the true tables.

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder(); x, y = b.add_variables(2)
>>> _ = b.add_factor(FactorFunction.EQUAL, [x, y], weight=b.add_weight(1.0))
>>> _ = b.add_factor(FactorFunction.ISTRUE, [x], weight=b.add_weight(0.5))
>>> r = anneal_map(b.build(), AnnealConfig(steps=2_000, seed=1))
>>> r.values.tolist(), r.log_score
([1, 1], 1.5)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from pdbq.errors import InferenceError
from pdbq.graph.layout import FactorGraph, validate
from pdbq.inference.mcmc.config import AnnealConfig
from pdbq.inference.mcmc.gibbs import RoundInfo, _Pool, _threads, check_sites, initial_states, make_schedule
from pdbq.inference.mcmc.kernels import (
    Accum,
    Best,
    anneal_chain,
    greedy_sweep,
    group_sums_into,
    log_score_kernel,
    factor_value,
    group_value,
    prepare_kernel_graph,
)

__all__ = ["anneal_map", "MapResult", "log_score", "score_difference", "best_chain", "score_terms"]

_MAX_ROUND = 1 << 20
_MAX_GREEDY_PASSES = 1000


@dataclass(frozen=True, eq=False)
class MapResult:
    """The best full assignment found (evidence at its values) and its unnormalised log score
    (docs/factors.md energy); ``chain_scores`` holds each chain's best."""

    values: np.ndarray
    log_score: float
    chain_scores: np.ndarray
    steps: int
    seconds: float
    warnings: tuple[str, ...]


def log_score(graph: FactorGraph, values: Sequence[int] | np.ndarray) -> float:
    """Unnormalised log-probability of a full assignment (numba; −inf where a table is 0)."""
    v = np.asarray(values)
    if v.shape != (graph.n_vars,):
        raise InferenceError(f"log_score needs one value per variable ({graph.n_vars}), got shape {v.shape}")
    if v.size and (not np.issubdtype(v.dtype, np.integer) or np.any(v < 0) or np.any(v >= graph.cardinality)):
        bad = int(np.flatnonzero((v < 0) | (v >= graph.cardinality))[0]) if np.issubdtype(v.dtype, np.integer) else 0
        raise InferenceError(f"log_score: value of variable {bad} is outside its domain")
    return float(log_score_kernel(graph, graph.tables, np.ascontiguousarray(v, dtype=np.int32)))


@njit(cache=True)
def score_terms(g, tables, values):
    """The terms of `log_score_kernel` one by one: w·φ_f of every factor outside head groups
    (0 for group members), then w·g(s) of every head group. Two states compared term by term
    agree exactly where their factors agree, so a huge weight both satisfy cancels exactly."""
    fn = g.function
    n_groups = g.semantics.shape[0]
    out = np.zeros(fn.shape[0] + n_groups)
    sums = np.zeros(n_groups)
    for f in range(fn.shape[0]):
        phi = factor_value(g, tables, values, f, -1, 0)
        gr = g.group[f]
        if gr >= 0:
            sums[gr] += phi
        else:
            w = g.weights[g.weight[f]]
            if w != 0.0:
                out[f] = w * phi
    for gr in range(n_groups):
        w = g.weights[g.group_weight[gr]]
        if w != 0.0:
            out[fn.shape[0] + gr] = w * group_value(g.semantics[gr], sums[gr])
    return out


def score_difference(graph: FactorGraph, a: np.ndarray, b: np.ndarray) -> float:
    """log p(a) − log p(b) (unnormalised), summed term by term with `math.fsum`: factors on
    which the two states agree cancel exactly, so a weight of 1e300 that both satisfy does not
    hide a difference of 0.7 (the difference of the two totals would)."""
    ta = score_terms(graph, graph.tables, np.ascontiguousarray(a, dtype=np.int32))
    tb = score_terms(graph, graph.tables, np.ascontiguousarray(b, dtype=np.int32))
    with np.errstate(invalid="ignore"):
        d = ta - tb
    if not np.all(np.isfinite(d)):  # a hard factor: -inf on one side decides, on both it ties
        sa, sb = float(np.sum(ta)), float(np.sum(tb))
        return 0.0 if sa == sb else sa - sb
    return math.fsum(d.tolist())


def best_chain(graph: FactorGraph, finals: Sequence[np.ndarray], chain_scores: np.ndarray) -> int:
    """Index of the chain whose final state scores highest, compared by `score_difference`
    (the totals in ``chain_scores`` can tie where the states differ by a small weight)."""
    best = int(np.argmax(chain_scores))
    for c in range(len(finals)):
        if c != best and score_difference(graph, finals[c], finals[best]) > 0.0:
            best = c
    return best


def anneal_map(
    graph: FactorGraph,
    config: AnnealConfig = AnnealConfig(),
    *,
    sites: Sequence[int] | np.ndarray | None = None,
    selection: tuple[np.ndarray, np.ndarray] | None = None,
    on_round: Callable[[RoundInfo, int | None, float | None], None] | None = None,
) -> MapResult:
    """Annealed MAP over ``sites`` (default: all non-evidence variables; others keep their
    evidence or, if not sampled, their chain's starting value). ``on_round(info, total, None)``
    is called after every round (progress; raising from it, e.g. a cancelled token, stops the
    run)."""
    config = config.check()
    validate(graph)
    t0 = time.perf_counter()
    sites_arr = check_sites(graph, sites)
    sched = make_schedule(sites_arr, config.scan, selection)
    n_sites = sites_arr.shape[0]
    chains = config.chains
    kg = prepare_kernel_graph(graph)
    states, values, gsums = initial_states(graph, kg, chains, config.seed, dispersed=True)
    steps = config.steps if config.steps is not None else config.default_sweeps * max(n_sites, 1)
    if n_sites == 0:
        steps = 0
    bests = []
    for c in range(chains):
        group_sums_into(graph, kg.tables, states[c].values, gsums[c])
        # running scores relative to the chain's start, kept as hi + lo pairs (see `Best`)
        bests.append(Best(np.zeros(4), states[c].values.copy(), np.array([float(config.temperature)])))
    acc = Accum(np.full(0, -1, dtype=np.int32), np.zeros((0, 1)), np.zeros(0, dtype=np.int64))
    round_len = max(1, min(_MAX_ROUND // max(n_sites, 1), 1 << 30)) * max(n_sites, 1)
    warnings: list[str] = []
    done = 0
    pool = _Pool(_threads(config.threads, chains))
    try:
        while done < steps:
            n = min(round_len, steps - done)
            for c in range(chains):  # exact sums each round: no drift from incremental updates
                group_sums_into(graph, kg.tables, states[c].values, gsums[c])
            pool.map(
                anneal_chain,
                [(graph, kg, states[c], sched, acc, bests[c], n, float(config.cooling), float(config.min_temperature)) for c in range(chains)],
            )
            done += n
            if on_round is not None:
                on_round(RoundInfo(done, False, float("nan"), time.perf_counter() - t0), steps, None)
            if config.time_limit is not None and time.perf_counter() - t0 >= config.time_limit:
                if done < steps:
                    warnings.append(f"time limit reached after {done} of {steps} updates per chain")
                break
    finally:
        pool.close()

    chain_scores = np.empty(chains)
    finals = []
    for c in range(chains):
        st = states[c]
        st.values[:] = bests[c].values
        if config.greedy_final and n_sites:
            group_sums_into(graph, kg.tables, st.values, st.group_sums)
            for _ in range(_MAX_GREEDY_PASSES):
                changed, _gain = greedy_sweep(graph, kg, st, sites_arr)
                if changed == 0:
                    break
        chain_scores[c] = log_score_kernel(graph, graph.tables, st.values)
        finals.append(st.values.astype(np.int64))
    best = best_chain(graph, finals, chain_scores)
    if not np.isfinite(chain_scores[best]):
        warnings.append("no state of positive probability was found (every chain's best has log score -inf)")
    return MapResult(
        values=finals[best],
        log_score=float(chain_scores[best]),
        chain_scores=chain_scores,
        steps=int(done),
        seconds=time.perf_counter() - t0,
        warnings=tuple(warnings),
    )
