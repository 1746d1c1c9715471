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


def _lse(a: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """log Σ exp over ``axes`` (dropped), -inf where every term is -inf."""
    if not axes:
        return a
    m = np.max(a, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):  # a message of an impossible value is log 0 = -inf
        out = np.log(np.sum(np.exp(a - m), axis=axes, keepdims=True)) + m
    return np.squeeze(out, axis=axes)


def _norm_rows(v: np.ndarray) -> np.ndarray:
    """Rows of log-values shifted to log-probabilities (a row of -inf stays uniform-free: -inf)."""
    m = np.max(v, axis=1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = v - m
        return out - np.log(np.sum(np.exp(out), axis=1, keepdims=True))


class _Group(NamedTuple):
    """Factors of one table shape: ``scope[F, a]``, ``tables[F, *shape]``, and per position i
    the messages to its variables ``msgs[i][F, shape[i]]`` (log, normalised)."""

    scope: np.ndarray
    tables: np.ndarray
    msgs: list


def loopy_marginals(graph: FactorGraph, *, max_iterations: int = 200, damping: float = 0.5, threshold: float = 1e-8,
                    deadline: float | None = None) -> BeliefResult | None:
    """Loopy BP marginals of every variable of ``graph`` (evidence clamped), flooding schedule
    (every message from the last iteration's beliefs), factors of one table shape updated
    together. None when a table holds more than `MAX_TABLE_ENTRIES` entries or ``deadline`` (a
    `time.perf_counter()` instant) passes first: the check then has nothing to say."""
    n = graph.n_vars
    kmax = int(graph.cardinality.max()) if n else 1
    card = graph.cardinality.astype(np.int64)
    try:
        edges = condition(hyperedges(graph, max_entries=MAX_TABLE_ENTRIES), graph.evidence)
    except Exception:  # noqa: BLE001 - a table too large for the check: no check
        return None
    by_shape: dict[tuple, list] = {}
    for h in edges:
        if h.scope.size:
            by_shape.setdefault(h.log_table.shape, []).append(h)
    groups = []
    for shape, hs in by_shape.items():
        scope = np.stack([h.scope for h in hs]).astype(np.int64)
        tables = np.stack([h.log_table for h in hs]).astype(np.float64)
        msgs = [np.full((len(hs), k), -np.log(k)) for k in shape]
        groups.append(_Group(scope, tables, msgs))
    pad = np.arange(kmax)[None, :] >= card[:, None]

    def beliefs() -> np.ndarray:
        b = np.zeros((n, kmax))
        for gr in groups:
            for i, m in enumerate(gr.msgs):
                np.add.at(b[:, : m.shape[1]], gr.scope[:, i], m)
        return np.where(pad, -np.inf, b)

    belief = beliefs()
    converged, it = False, 0
    log_keep, log_new = np.log(damping), np.log(1.0 - damping)
    for it in range(1, max_iterations + 1):
        if deadline is not None and time.perf_counter() > deadline:
            return None
        delta = 0.0
        for gr in groups:
            a = gr.scope.shape[1]
            incoming = [belief[gr.scope[:, i], : m.shape[1]] - m for i, m in enumerate(gr.msgs)]
            incoming = [np.where(np.isnan(x), -np.inf, x) for x in incoming]  # -inf - -inf: impossible
            full = gr.tables.copy()
            for i, x in enumerate(incoming):
                shape = [x.shape[0]] + [1] * a
                shape[i + 1] = x.shape[1]
                full += x.reshape(shape)
            for i, x in enumerate(incoming):
                shape = [x.shape[0]] + [1] * a
                shape[i + 1] = x.shape[1]
                with np.errstate(invalid="ignore"):
                    cavity = full - x.reshape(shape)
                cavity = np.where(np.isnan(cavity), -np.inf, cavity)
                new = _norm_rows(_lse(cavity, tuple(1 + j for j in range(a) if j != i)))
                old = gr.msgs[i]
                with np.errstate(divide="ignore", invalid="ignore"):
                    mixed = _norm_rows(np.logaddexp(log_new + new, log_keep + old))
                mixed = np.where(np.isnan(mixed), old, mixed)
                delta = max(delta, float(np.max(np.abs(np.exp(mixed) - np.exp(old)), initial=0.0)))
                gr.msgs[i] = mixed
        belief = beliefs()
        if delta < threshold:
            converged = True
            break
    out = np.full((n, kmax), np.nan)
    ev = np.flatnonzero(graph.evidence >= 0)
    out[ev] = 0.0
    out[ev, graph.evidence[ev]] = 1.0
    free = np.flatnonzero(graph.evidence < 0)
    if free.size:
        out[free] = np.exp(_norm_rows(belief[free]))
        out[free] = np.where(pad[free], 0.0, out[free])
    return BeliefResult(out, converged, it)
