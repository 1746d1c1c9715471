"""Random small factor graphs over every function × semantics × domain kind, for the exact and
potential tests (small enough to enumerate)."""

from __future__ import annotations

import itertools

import numpy as np

from pdbq.graph.builder import GraphBuilder
from pdbq.graph.layout import FactorGraph
from pdbq.inference.exact.potentials import hyperedges
from pdbq.language.nodes import FactorFunction as F
from pdbq.language.nodes import Semantics as S

FUNCTIONS = [F.IMPLY, F.OR, F.AND, F.EQUAL, F.ISTRUE, F.IMPLY_MLN, F.VOTE, F.TABLE, F.LINEAR, F.RATIO, F.LOGICAL]


def random_graph(
    rng: np.random.Generator,
    function: F,
    semantics: S,
    categorical: bool,
    evidence: bool,
    n_vars: int = 8,
    n_factors: int = 9,
) -> FactorGraph:
    """Factors of one function (plus a few unary tables so marginals are not symmetric);
    with LOGICAL/RATIO semantics the factors fall into 2–3 head groups. One variable stays
    isolated; with ``evidence`` two variables are observed."""
    b = GraphBuilder()
    cards = rng.integers(2, 4, size=n_vars) if categorical else np.full(n_vars, 2)
    for c in cards:
        b.add_variable(int(c))
    linked = n_vars - 1  # the last variable is in no factor
    groups = []
    if semantics != S.LINEAR:
        for _ in range(int(rng.integers(2, 4))):
            groups.append(b.add_group(semantics, b.add_weight(float(rng.uniform(-1.5, 1.5)))))
    for _ in range(n_factors):
        lo = 1 if function in (F.ISTRUE, F.IMPLY, F.IMPLY_MLN, F.VOTE, F.LINEAR, F.RATIO, F.LOGICAL, F.TABLE) else 2
        arity = int(rng.integers(lo, 4))
        vs = [int(v) for v in rng.choice(linked, size=arity, replace=False)]
        if function == F.TABLE:
            size = int(np.prod(cards[vs]))
            kw = {"table": rng.normal(0, 1, size)}
            lits = None
        else:
            raw_ok = function == F.EQUAL
            lits = []
            for v in vs:
                if raw_ok and (not categorical or rng.random() < 0.5):
                    lits.append(-1)
                else:
                    lits.append(int(rng.integers(cards[v])))
            kw = {}
        if groups:
            b.add_factor(function, vs, literals=lits, group=int(rng.choice(groups)), **kw)
        else:
            if function != F.TABLE:
                kw["weight"] = b.add_weight(float(rng.uniform(-1.5, 1.5)))
            b.add_factor(function, vs, literals=lits, **kw)
    for v in rng.choice(linked, size=3, replace=False):
        b.add_factor(F.TABLE, [int(v)], table=rng.normal(0, 0.7, int(cards[v])))
    if evidence:
        for v in rng.choice(linked, size=2, replace=False):
            b.set_evidence(int(v), int(rng.integers(cards[v])))
    return b.build()


def brute_force(g: FactorGraph):
    """Joint log-table over all variables (evidence applied as -inf elsewhere) by summing the
    hyperedges; returns (marginals, log_z, map_score, joint)."""
    card = [int(c) for c in g.cardinality]
    joint = np.zeros(card)
    for h in hyperedges(g):
        shape = [1] * len(card)
        for v, n in zip(h.scope, h.log_table.shape):
            shape[int(v)] = n
        joint = joint + h.log_table.reshape(shape)
    for v, x in enumerate(g.evidence):
        if x >= 0:
            mask = np.full(card[v], -np.inf)
            mask[x] = 0.0
            shape = [1] * len(card)
            shape[v] = card[v]
            joint = joint + mask.reshape(shape)
    top = joint.max()
    p = np.exp(joint - top)
    z = p.sum()
    marg = np.zeros((len(card), max(card)))
    for v in range(len(card)):
        axes = tuple(a for a in range(len(card)) if a != v)
        marg[v, : card[v]] = p.sum(axis=axes) / z
    return marg, float(np.log(z) + top), float(top), joint


def all_assignments(g: FactorGraph):
    return itertools.product(*[range(int(c)) for c in g.cardinality])


def within(r, exact, slack=0.01):
    """(every estimate of result ``r`` within 4 standard errors + ``slack`` of the exact marginal,
    the largest error): the sampler tests' check against exact answers."""
    k = exact.shape[1]
    err = np.abs(r.marginals[:, :k] - exact)
    se = np.nan_to_num(r.stderr[:, :k], nan=0.0)
    return bool(np.all(err <= 4 * se + slack)), float(err.max())
