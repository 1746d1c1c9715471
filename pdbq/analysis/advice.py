"""Warnings about models Gibbs sampling will mix slowly on (seed 004, Theorem 1).

A LINEAR-semantics rule stores each grounding as its own factor, so a head with k groundings is
the centre of a k-voter star: the voting model with linear semantics, whose mixing time is
2^Θ(k) (Theorem 1; hierarchy width 2k + 1, Lemma 3). RATIO and LOGICAL semantics put the k votes
into one head group: hierarchy width 3 and Θ(n log n) mixing.

Detection on a graph (the layout keeps no rule names): standalone head/body factors (VOTE, IMPLY,
IMPLY_MLN) with a non-zero weight, a free head and at least one free body variable, counted per
(rule, head variable). Factors whose body is all evidence only shift the head's own odds and do
not couple anything, so they are not counted. The rule of a factor is ``factor_rule[f]`` when the
caller has it, else the factor's weight index (one constant weight per rule).

Default threshold, 10 coupled votes: to change its value against k agreeing voters a head must
overcome an energy of 2|w|k; at the paper's w = 0.5 and k = 10 that is a factor e^10 ≈ 2·10^4
per attempt, already too slow for interactive answers, and the barrier (hence the time) grows
exponentially from there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from pdbq.graph.layout import FactorGraph
from pdbq.language.nodes import FactorFunction

__all__ = ["semantics_warnings", "linear_vote_counts", "candidate_factors", "DEFAULT_VOTE_THRESHOLD"]

DEFAULT_VOTE_THRESHOLD = 10

_HEAD_BODY = (int(FactorFunction.VOTE), int(FactorFunction.IMPLY), int(FactorFunction.IMPLY_MLN))


def candidate_factors(graph: FactorGraph) -> np.ndarray:
    """Standalone head/body factors (VOTE, IMPLY, IMPLY_MLN outside head groups): the only ones
    `linear_vote_counts` looks at (int64 ids; often none, and then nothing else is computed)."""
    if graph.n_factors == 0:
        return np.zeros(0, np.int64)
    fn = graph.function
    hb = (fn == _HEAD_BODY[0]) | (fn == _HEAD_BODY[1]) | (fn == _HEAD_BODY[2])
    hb &= graph.group < 0
    return np.flatnonzero(hb)


def linear_vote_counts(graph: FactorGraph, factor_rule: np.ndarray | None = None) -> dict[int, tuple[int, int, int]]:
    """Per rule key: (the most coupled standalone votes on one head, that head variable, the number
    of heads with two or more such votes)."""
    nf, nv = graph.n_factors, max(graph.n_vars, 1)
    if nf == 0:
        return {}
    if factor_rule is not None and np.shape(factor_rule) != (nf,):
        raise ValueError(f"factor_rule needs one entry per factor ({nf}), got shape {np.shape(factor_rule)}")
    # Only the candidate factors' arrays are built (a query on a graph of millions of factors
    # computes this after sampling, while the graph and the chains are still in memory).
    f = candidate_factors(graph)
    lo = graph.factor_offsets[f]
    arity = graph.factor_offsets[f + 1] - lo
    keep = (arity >= 2) & (graph.weights[graph.weight[f]] != 0)
    f, lo, arity = f[keep], lo[keep], arity[keep]
    head_var = graph.factor_vars[lo + arity - 1].astype(np.int64)
    keep = graph.evidence[head_var] < 0
    f, lo, arity, head_var = f[keep], lo[keep], arity[keep], head_var[keep]
    if f.size == 0:
        return {}
    # a free body variable: edges lo .. lo + arity - 2 of each candidate
    n_body = arity - 1
    owner = np.repeat(np.arange(f.size), n_body)
    starts = np.cumsum(n_body) - n_body
    edge = np.repeat(lo, n_body) + (np.arange(owner.size) - np.repeat(starts, n_body))
    free_body = np.bincount(owner[graph.evidence[graph.factor_vars[edge]] < 0], minlength=f.size) > 0
    key = graph.weight[f].astype(np.int64) if factor_rule is None else np.asarray(factor_rule, dtype=np.int64)[f]
    f, key, head_var = f[free_body], key[free_body], head_var[free_body]
    if f.size == 0:
        return {}
    pairs, counts = np.unique(key * nv + head_var, return_counts=True)
    out: dict[int, tuple[int, int, int]] = {}
    for p, c in zip(pairs.tolist(), counts.tolist()):
        k, v = divmod(p, nv)
        best, head, heads = out.get(k, (0, -1, 0))
        if c > best:
            best, head = c, v
        out[k] = (best, head, heads + (c >= 2))
    return out


def semantics_warnings(
    graph: FactorGraph,
    rule_names: Mapping[int, str] | None = None,
    *,
    factor_rule: np.ndarray | None = None,
    threshold: int = DEFAULT_VOTE_THRESHOLD,
    var_label: Callable[[int], str] | None = None,
) -> list[str]:
    """Warnings naming each LINEAR-semantics rule with a head that has ``threshold`` or more
    coupled votes (see the module docstring); empty when there is none.

    ``rule_names`` maps a rule key — ``factor_rule``'s values, or weight indices when
    ``factor_rule`` is None — to the rule's name; ``var_label(v)`` names graph variable ``v``
    (e.g. by its relation and key), by default ``variable v``.

    >>> from pdbq.graph.builder import GraphBuilder
    >>> b = GraphBuilder(); q = b.add_variable(); w = b.add_weight(0.5)
    >>> for t in b.add_variables(12):
    ...     _ = b.add_factor(FactorFunction.VOTE, [t, q], weight=w, literals=[1, 1])
    >>> print(semantics_warnings(b.build(), {w: "fans_vote"})[0][:77])
    rule 'fans_vote' (weight 0.5) has LINEAR semantics and a head with 12 coupled
    """
    if threshold < 2:
        raise ValueError(f"threshold must be at least 2 votes, got {threshold}")
    out = []
    for key, (count, head, heads) in sorted(linear_vote_counts(graph, factor_rule).items()):
        if count < threshold:
            continue
        name = rule_names.get(key) if rule_names else None
        what = f"rule '{name}'" if name else (f"rule {key}" if factor_rule is not None else f"the rule with weight {key}")
        if factor_rule is None:
            weight = f" (weight {float(graph.weights[key]):g})"
        else:
            weight = ""
        label = var_label(head) if var_label is not None else f"variable {head}"
        out.append(
            f"{what}{weight} has LINEAR semantics and a head with {count} coupled votes ({label}; "
            f"{heads} head(s) with several): Gibbs sampling can take time exponential in the number of "
            f"votes to mix, so the answer may be far off within any time limit; SEMANTICS RATIO or LOGICAL "
            f"combine a head's votes into one factor and mix quickly (docs/semantics.md)"
        )
    return out
