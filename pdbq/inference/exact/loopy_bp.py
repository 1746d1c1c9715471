"""Loopy belief propagation: a cheap deterministic approximation of the marginals, the
cross-check of sampled answers.

Sum-product messages on the factor graph of `potentials.hyperedges` (evidence sliced in by
`condition`), in log space, damped, in a fixed order: no random numbers, so it cannot share the
chains' blind spots (a mode no chain started in). On a tree it is exact; on loopy graphs it is an
approximation that is typically overconfident, pushing small probabilities smaller, rarely the
other way, which is why its use as a check (`pdbq.answers.engine`) flags only values the chains
found much rarer than it does.

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder(); xs = b.add_variables(3); w = b.add_weight(0.8)
>>> for a, c in zip(xs, xs[1:]):
...     _ = b.add_factor(FactorFunction.EQUAL, [a, c], weight=w)
>>> _ = b.add_factor(FactorFunction.ISTRUE, [xs[0]], weight=b.add_weight(1.0))
>>> r = loopy_marginals(b.build())
>>> r.converged, [round(float(p), 4) for p in r.marginals[:, 1]]
(True, [0.8808, 0.7529, 0.6679])
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from pdbq.graph.layout import FactorGraph
from pdbq.inference.exact.potentials import condition, hyperedges

__all__ = ["BeliefResult", "loopy_marginals", "MAX_TABLE_ENTRIES"]

MAX_TABLE_ENTRIES = 1 << 16  # larger tables: no check (their messages cost too much for a check)


class BeliefResult(NamedTuple):
    """``marginals[n_vars, max_card]`` (evidence rows are point masses; NaN where not computed),
    ``converged`` (the largest message change fell under the threshold), ``iterations``."""

    marginals: np.ndarray
    converged: bool
    iterations: int


def _logsumexp(a: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    if not axes:
        return a
    m = np.max(a, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):  # a message of an impossible value is log 0 = -inf
        out = np.log(np.sum(np.exp(a - m), axis=axes, keepdims=True)) + m
    return np.squeeze(out, axis=axes)


def _normalise(v: np.ndarray) -> np.ndarray:
    m = np.max(v)
    if not np.isfinite(m):
        return np.zeros_like(v)
    v = v - m
    with np.errstate(divide="ignore"):
        return v - np.log(np.sum(np.exp(v)))


def loopy_marginals(graph: FactorGraph, *, max_iterations: int = 200, damping: float = 0.5, threshold: float = 1e-8,
                    deadline: float | None = None) -> BeliefResult | None:
    """Loopy BP marginals of every variable of ``graph`` (evidence clamped). None when a table
    holds more than `MAX_TABLE_ENTRIES` entries or ``deadline`` (a `time.perf_counter()` instant)
    passes first: the check then has nothing to say."""
    n = graph.n_vars
    kmax = int(graph.cardinality.max()) if n else 1
    card = graph.cardinality.astype(np.int64)
    try:
        edges = condition(hyperedges(graph, max_entries=MAX_TABLE_ENTRIES), graph.evidence)
    except Exception:  # noqa: BLE001 - a table too large for the check: no check
        return None
    edges = [h for h in edges if h.scope.size]
    out = np.full((n, kmax), np.nan)
    ev = np.flatnonzero(graph.evidence >= 0)
    out[ev] = 0.0
    out[ev, graph.evidence[ev]] = 1.0
    # messages factor → variable, per (edge, position); variable beliefs are unary sums of them
    msgs = [[np.full(card[v], -np.log(card[v])) for v in h.scope] for h in edges]
    tables = [np.where(np.isfinite(h.log_table), h.log_table, -np.inf) for h in edges]
    belief = np.zeros((n, kmax))
    for v in range(n):
        belief[v, card[v]:] = -np.inf
    for e, h in enumerate(edges):
        for i, v in enumerate(h.scope):
            belief[v, : card[v]] += msgs[e][i]
    converged, it = False, 0
    for it in range(1, max_iterations + 1):
        if deadline is not None and time.perf_counter() > deadline:
            return None
        delta = 0.0
        for e, h in enumerate(edges):
            k = h.scope.size
            t = tables[e]
            incoming = []
            for i, v in enumerate(h.scope):
                incoming.append(belief[v, : card[v]] - msgs[e][i])  # variable → factor
            full = t.copy()
            for i in range(k):
                shape = [1] * k
                shape[i] = -1
                full = full + incoming[i].reshape(shape)
            for i, v in enumerate(h.scope):
                shape = [1] * k
                shape[i] = -1
                new = _logsumexp(full - incoming[i].reshape(shape), tuple(a for a in range(k) if a != i))
                new = _normalise(np.asarray(new, dtype=np.float64))
                old = msgs[e][i]
                with np.errstate(divide="ignore"):
                    mixed = _normalise(np.logaddexp(np.log(1 - damping) + new, np.log(damping) + old))
                change = float(np.max(np.abs(np.exp(mixed) - np.exp(old)), initial=0.0))
                delta = max(delta, change)
                belief[v, : card[v]] += mixed - old
                msgs[e][i] = mixed
        if delta < threshold:
            converged = True
            break
    free = np.flatnonzero(graph.evidence < 0)
    for v in free.tolist():
        b = _normalise(belief[v, : card[v]])
        out[v, :] = 0.0
        out[v, : card[v]] = np.exp(b)
    return BeliefResult(out, converged, it)
