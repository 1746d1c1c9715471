"""Rules the evidence satisfies: a weighted clause whose every grounding the query reaches is
true whatever its free variables are (an MLN clause ``body => head`` with the head observed true,
an OR with an argument observed true). Such a rule is a constant: correct semantics, but the
evidence on its body then has no effect through it, which a user who observed the head to learn
about the body does not expect (docs/semantics.md)."""

from __future__ import annotations

import numpy as np

from pdbq.graph.layout import FactorGraph
from pdbq.language.nodes import FactorFunction

__all__ = ["rules_satisfied_by_evidence"]


def rules_satisfied_by_evidence(graph: FactorGraph, factor_rule: np.ndarray) -> list[int]:
    """Rules (values of ``factor_rule``, -1 = none) all of whose factors in ``graph`` are satisfied
    by the evidence for every value of their free variables, among rules with at least one factor
    that has a free variable (a rule over evidence only is no news)."""
    n = graph.n_factors
    if n == 0:
        return []
    sizes = np.diff(graph.factor_offsets)
    ev = graph.evidence[graph.factor_vars]
    lit = graph.factor_literals
    true = (ev >= 0) & np.where(lit >= 0, ev == lit, ev == 1)  # an argument the evidence makes true
    free = np.zeros(n, bool)
    holds = np.zeros(n, bool)
    nonempty = sizes > 0
    starts = graph.factor_offsets[:-1][nonempty]
    free[nonempty] = np.logical_or.reduceat(ev < 0, starts)
    mln = nonempty & (graph.function == int(FactorFunction.IMPLY_MLN))
    holds[mln] = true[graph.factor_offsets[1:][mln] - 1]  # the head is the last argument
    disj = nonempty & (graph.function == int(FactorFunction.OR))
    holds[disj] = np.logical_or.reduceat(true, starts)[disj[nonempty]]
    found = []
    for r in np.unique(factor_rule[factor_rule >= 0]).tolist():
        mine = factor_rule == r
        if holds[mine].all() and free[mine].any():
            found.append(int(r))
    return found
