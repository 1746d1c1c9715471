"""Variables whose own factors force one value whatever their neighbours do.

For a variable X and a value x*, each factor f of X bounds the log-odds of x* against any
other value x' in every assignment of its other variables: gap_f = min over those assignments of
(t_f(x*, ·) − max_{x'≠x*} t_f(x', ·)) (evidence sliced in). Summed over X's factors this bounds
the log-odds in every state of X's Markov blanket, so P(x* | blanket) ≥ 1 / (1 + (k−1)·e^−gap)
always, and therefore also P(x*) and any Rao-Blackwellised estimate of it: both lie within
δ = (k−1)·e^−gap of 1. A chain that never moves such a variable has not failed to mix; its answer
is within δ. Factors of every function are bounded, those of head groups (RATIO/LOGICAL
aggregates over several factors) are not (their variables: not forced).

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.inference.exact.potentials import _phi_table
>>> import numpy as np
>>> b = GraphBuilder(); a, c = b.add_variables(2)
>>> _ = b.add_factor(FactorFunction.TABLE, [a, c], table=np.log([1e-15, 1.0, 1e-15, 1.0]))
>>> forced, delta = forced_within(b.build(), np.array([a, c]))
>>> forced.tolist(), float(delta[1]) < 1e-14
([-1, 1], True)
"""

from __future__ import annotations

import numpy as np

from pdbq.graph.layout import FactorGraph
from pdbq.inference.exact.potentials import _phi_table

__all__ = ["forced_within"]

_MAX_ENTRIES = 1 << 16  # larger tables are not bounded (the check stays cheap)


def forced_within(graph: FactorGraph, variables: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(value, delta) per variable given: the value its own factors force whatever the other
    variables do, and the bound δ on every other value's total probability (marginal and every
    conditional); value -1 and δ = 1 where no value is forced by a finite margin."""
    variables = np.asarray(variables, dtype=np.int64)
    value = np.full(variables.size, -1, dtype=np.int64)
    delta = np.ones(variables.size)
    for i, v in enumerate(variables.tolist()):
        k = int(graph.cardinality[v])
        gap = np.zeros(k)
        ok = True
        for f in graph.var_factors[graph.var_offsets[v] : graph.var_offsets[v + 1]].tolist():
            if int(graph.group[f]) >= 0:  # a head group's aggregate couples its factors: not bounded alone
                ok = False
                break
            scope = np.unique(graph.factor_vars[graph.factor_offsets[f] : graph.factor_offsets[f + 1]].astype(np.int64))
            shape = tuple(int(graph.cardinality[a]) for a in scope)
            if int(np.prod(shape)) > _MAX_ENTRIES:
                ok = False
                break
            t = np.broadcast_to(_phi_table(graph, f, scope), shape) * float(graph.weights[graph.weight[f]])
            index = tuple(int(graph.evidence[a]) if graph.evidence[a] >= 0 and a != v else slice(None) for a in scope)
            kept = [a for a in scope.tolist() if a == v or graph.evidence[a] < 0]
            t = np.asarray(t[index], dtype=np.float64)
            t = np.moveaxis(t, kept.index(v), 0).reshape(k, -1)  # [value of v, the others' assignments]
            for x in range(k):
                others = np.delete(t, x, axis=0).max(axis=0) if k > 1 else np.full(t.shape[1], -np.inf)
                with np.errstate(invalid="ignore"):
                    d = t[x] - others
                d = np.where(np.isnan(d), -np.inf, d)  # both impossible: no margin claimed
                gap[x] += float(d.min()) if d.size else 0.0
        if not ok or graph.var_offsets[v + 1] == graph.var_offsets[v]:
            continue
        best = int(np.argmax(gap))
        if np.isfinite(gap[best]) and gap[best] > 0:
            value[i] = best
            delta[i] = min(1.0, (k - 1) * float(np.exp(-gap[best])))
    return value, delta
