"""Exact single-site Gibbs transition matrices for small graphs (seed 003, §2.3–§5).

For analyses and tests that must not carry sampling error: the whole state space is enumerated,
``π`` is computed exactly from `potentials.hyperedges`, and the random-scan Gibbs kernel with
selection distribution ``p`` over the variables

    K = Σ_i p_i K_i,   K_i(s, s') = π(x_i = s'_i | s_−i)  for s' equal to s off variable i

is built as an explicit matrix (stored by rows: every row has one entry per (variable, value),
Σ_i card_i entries, some of them the diagonal). Gibbs is Metropolis–Hastings whose proposal is
the full conditional, so every proposal is accepted. ``π_t = π_0 K^t`` is computed by `step`.

`check_kernel` verifies what every correct kernel must satisfy — rows summing to 1, detailed
balance π(s)K(s,s') = π(s')K(s',s), hence πK = π — and raises `InferenceError` otherwise.

States are numbered in row-major order over the variables (variable 0 most significant).

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder(); x = b.add_variables(2)
>>> _ = b.add_factor(FactorFunction.TABLE, x, table=[1.0, 0.0, 0.0, 1.0])
>>> g = b.build()
>>> logp = log_joint(g)
>>> k = gibbs_kernel(g, logp, [0.5, 0.5])
>>> check_kernel(k, np.exp(logp))
>>> k.dense().shape
(4, 4)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pdbq.errors import InferenceError
from pdbq.graph.layout import FactorGraph
from pdbq.inference.exact.potentials import hyperedges

__all__ = ["MAX_STATES", "Kernel", "state_table", "log_joint", "gibbs_kernel", "check_kernel", "marginal"]

MAX_STATES = 1 << 16


class Kernel(NamedTuple):
    """A transition matrix by rows: ``K[s, cols[s, k]] += vals[s, k]`` for every k."""

    cols: np.ndarray  # int64[n_states, m]
    vals: np.ndarray  # float64[n_states, m]

    @property
    def n_states(self) -> int:
        return int(self.cols.shape[0])

    def step(self, dist: np.ndarray) -> np.ndarray:
        """One transition of a distribution over states: ``dist @ K``."""
        return np.bincount(
            self.cols.ravel(), weights=(dist[:, None] * self.vals).ravel(), minlength=self.n_states
        )

    def run(self, dist: np.ndarray, steps: int) -> np.ndarray:
        """``[dist K^0, dist K^1, …, dist K^steps]`` as float64[steps + 1, n_states]."""
        out = np.empty((steps + 1, self.n_states))
        out[0] = dist
        for t in range(steps):
            out[t + 1] = self.step(out[t])
        return out

    def dense(self) -> np.ndarray:
        s = self.n_states
        k = np.zeros(s * s)
        np.add.at(k, (np.arange(s)[:, None] * s + self.cols).ravel(), self.vals.ravel())
        return k.reshape(s, s)


def _check_size(graph: FactorGraph) -> tuple[int, ...]:
    cards = tuple(int(c) for c in graph.cardinality)
    size = int(np.prod(np.array(cards, dtype=object))) if cards else 1
    if size > MAX_STATES:
        raise InferenceError(
            f"an explicit transition matrix needs the whole state space: {size:,} states here, "
            f"more than {MAX_STATES:,}"
        )
    return cards


def state_table(cards) -> np.ndarray:
    """Every joint state as int64[n_states, n_vars], row-major (variable 0 most significant)."""
    cards = [int(c) for c in cards]
    grids = np.indices(cards).reshape(len(cards), -1)
    return grids.T.astype(np.int64)


def log_joint(graph: FactorGraph) -> np.ndarray:
    """Normalised log π over every state (float64[n_states]); states contradicting the graph's
    evidence get −inf."""
    cards = _check_size(graph)
    states = state_table(cards)
    logp = np.zeros(states.shape[0])
    for h in hyperedges(graph):
        if h.scope.shape[0] == 0:
            continue
        idx = np.ravel_multi_index(tuple(states[:, h.scope].T), h.log_table.shape)
        logp += h.log_table.ravel()[idx]
    ev = graph.evidence
    for v in np.flatnonzero(ev >= 0):
        logp[states[:, v] != ev[v]] = -np.inf
    top = logp.max()
    if not np.isfinite(top):
        raise InferenceError("every state has probability zero")
    logp -= top + np.log(np.exp(logp - top).sum())
    return logp


def gibbs_kernel(graph: FactorGraph, logp: np.ndarray, p) -> Kernel:
    """Random-scan Gibbs kernel with selection probabilities ``p`` (one per variable, summing to
    1; evidence variables must get 0) over the normalised ``logp`` of `log_joint`."""
    cards = _check_size(graph)
    p = np.asarray(p, dtype=np.float64)
    if p.shape != (graph.n_vars,) or np.any(p < 0) or abs(p.sum() - 1.0) > 1e-9:
        raise InferenceError("p needs one non-negative probability per variable, summing to 1")
    if np.any(p[graph.evidence >= 0] > 0):
        raise InferenceError("evidence variables cannot be selected")
    n_states = logp.shape[0]
    shape = tuple(cards)
    lp = logp.reshape(shape)
    cols, vals = [], []
    base = np.arange(n_states).reshape(shape)
    for i, c in enumerate(cards):
        # conditional of x_i given the rest, for every state
        m = lp.max(axis=i, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        w = np.exp(lp - m)
        z = w.sum(axis=i, keepdims=True)
        cond = np.divide(w, z, out=np.zeros_like(w), where=z > 0)
        stride = int(np.prod(cards[i + 1 :])) if i + 1 < len(cards) else 1
        xi = np.indices(shape)[i]
        for v in range(c):
            target = base + (v - xi) * stride  # the state with x_i set to v
            cols.append(target.ravel())
            cv = np.take(cond, [v], axis=i)  # π(x_i = v | rest), broadcast over x_i
            vals.append(p[i] * np.broadcast_to(cv, shape).ravel())
    return Kernel(np.stack(cols, axis=1).astype(np.int64), np.stack(vals, axis=1))


def check_kernel(kernel: Kernel, pi: np.ndarray, *, atol: float = 1e-10) -> None:
    """Raise `InferenceError` unless every row of ``kernel`` sums to 1, ``kernel`` is in detailed
    balance with ``pi`` and leaves it invariant (πK = π), all within ``atol``."""
    pi = np.asarray(pi, dtype=np.float64)
    if pi.shape != (kernel.n_states,) or abs(pi.sum() - 1.0) > atol * kernel.n_states:
        raise InferenceError("pi must be a distribution over the kernel's states")
    if np.any(kernel.vals < -atol):
        raise InferenceError("transition matrix has a negative entry")
    rows = kernel.vals.sum(axis=1)
    bad = np.flatnonzero(np.abs(rows - 1.0) > atol)
    if bad.shape[0]:
        raise InferenceError(f"transition matrix row {int(bad[0])} sums to {rows[bad[0]]!r}, not 1")
    s = kernel.n_states
    src = np.repeat(np.arange(s), kernel.cols.shape[1])
    key = src * s + kernel.cols.ravel()
    flow = pi[src] * kernel.vals.ravel()
    keys, inv = np.unique(key, return_inverse=True)
    flows = np.bincount(inv.ravel(), weights=flow)
    rev = (keys % s) * s + keys // s
    pos = np.searchsorted(keys, rev)
    pos_ok = (pos < keys.shape[0]) & (keys[np.minimum(pos, keys.shape[0] - 1)] == rev)
    rflow = np.where(pos_ok, flows[np.minimum(pos, keys.shape[0] - 1)], 0.0)
    off = np.abs(flows - rflow) > atol
    if np.any(off):
        k = int(np.flatnonzero(off)[0])
        a, b = int(keys[k] // s), int(keys[k] % s)
        raise InferenceError(
            f"detailed balance fails between states {a} and {b}: "
            f"π(a)K(a,b) = {flows[k]!r}, π(b)K(b,a) = {rflow[k]!r}"
        )
    drift = np.abs(kernel.step(pi) - pi).max()
    if drift > atol:
        raise InferenceError(f"π is not stationary: |πK − π| reaches {drift!r}")


def marginal(dists: np.ndarray, cards, var: int) -> np.ndarray:
    """Marginal of ``var`` from distributions over states (float64[..., n_states])."""
    cards = tuple(int(c) for c in cards)
    lead = dists.shape[:-1]
    t = dists.reshape(lead + cards)
    axes = tuple(len(lead) + k for k in range(len(cards)) if k != var)
    return t.sum(axis=axes)
