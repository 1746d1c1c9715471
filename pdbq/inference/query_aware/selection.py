"""Query-aware variable selection: the distribution p over sites that QAM draws updates from.

Sites are the variables a query's chain may update, x_q ∪ x_l (seed 003, §2.2). Each site gets
a non-negative *score* from the chosen ``selection`` rule; the selection distribution mixes the
normalised scores with a uniform floor

    p = (1 − ε) · score / Σ score + ε / n_sites

so every site keeps positive probability whenever ε > 0 and a single-site Gibbs chain that draws
its site from p keeps the exact stationary distribution (each site update leaves π invariant, and
a positive p makes the mixture irreducible wherever uniform-scan Gibbs is). With ε = 0 a site of
score 0 is never updated; ``query_only`` with ε = 0 then converges to π(x_q | x_l frozen), the
biased baseline of the paper's §3 analysis. When every score is 0 the distribution is uniform.

Rules (``SelectionConfig.selection``):

- ``trail`` (default): influence trail scores (eq. 9, `pdbq.inference.query_aware.influence.trail_scores`).
- ``uniform``: every site scores 1 (plain random-scan Gibbs).
- ``query_only``: query variables score 1, the rest 0.
- ``distance``: ``(1 + d)^−power`` with ``d`` the hop distance from the nearest query variable
  through non-evidence neighbours (QAM-Poly of §5, ``p ∝ d^−N``, shifted by one because the
  paper's form is undefined at the query itself, d = 0): query variables score 1, their
  neighbours 2^−power; unreachable sites 0.
- ``tv``: ι_TV(x_q, x_i) = ‖π(x_q, x_i) − π(x_q)π(x_i)‖_TV, exact (§3, Prop. 1), maximised over
  the query variables when there are several. For the query variable itself this is
  ``1 − Σ π(x_q)²``, which by Prop. 1 is exactly the expected error of never updating it.
- ``mi``: exact mutual information I(x_q; x_i) in nats (max over query variables; I(x_q; x_q) is
  the entropy of x_q).

``tv`` and ``mi`` need the exact pairwise marginals π(x_q, x_i) and are meant for small graphs:
they are refused (`InferenceError`) beyond ``max_exact_vars`` non-evidence variables.

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder()
>>> x = b.add_variables(3)
>>> _ = b.add_factor(FactorFunction.TABLE, [x[0], x[1]], table=[1.0, 0.0, 0.0, 1.0])
>>> s = selection_distribution(b.build(), [0], [0, 1, 2], SelectionConfig(epsilon=0.0))
>>> [round(float(v), 4) for v in s.p]
[0.8123, 0.1877, 0.0]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from pdbq.arrays import unique
from pdbq.errors import InferenceError, OptionError, suggest
from pdbq.graph.layout import FactorGraph
from pdbq.inference.mcmc.alias import alias_draw, alias_table
from pdbq.inference.query_aware.influence import DEFAULT_MAX_TABLE, EdgeInfluence, edge_influence, graph_distance, trail_scores

__all__ = [
    "SELECTIONS",
    "SelectionConfig",
    "Selection",
    "selection_distribution",
    "site_scores",
    "mix_scores",
    "exact_influence",
    "alias_table",
    "alias_draw",
]

SELECTIONS = ("trail", "uniform", "query_only", "distance", "tv", "mi")


@dataclass(frozen=True)
class SelectionConfig:
    """How QAM chooses which site to update.

    selection: one of `SELECTIONS` (module docstring).
    epsilon: uniform mixing weight in [0, 1]; > 0 keeps every site reachable (default 0.05).
    power: the exponent N of ``distance`` (score d^−N), > 0.
    max_exact_vars: the most non-evidence variables ``tv``/``mi`` accept (exact inference).
    max_table: the largest hyperedge table the trail influences tabulate (see `edge_influence`).
    """

    selection: str = "trail"
    epsilon: float = 0.05
    power: float = 1.0
    max_exact_vars: int = 20
    max_table: int = DEFAULT_MAX_TABLE

    def __post_init__(self) -> None:
        if not isinstance(self.selection, str) or self.selection not in SELECTIONS:
            raise OptionError(
                f"unknown selection {self.selection!r}; valid: {', '.join(SELECTIONS)}."
                + suggest(str(self.selection), SELECTIONS)
            )
        eps = self.epsilon
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0.0 <= float(eps) <= 1.0:
            raise OptionError(f"epsilon must be a number in [0, 1], got {eps!r}")
        pw = self.power
        if isinstance(pw, bool) or not isinstance(pw, (int, float)) or not np.isfinite(pw) or pw <= 0:
            raise OptionError(f"power must be a positive number, got {pw!r}")
        for name in ("max_exact_vars", "max_table"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise OptionError(f"{name} must be a positive integer, got {v!r}")


class Selection(NamedTuple):
    """A selection distribution over ``sites`` with its alias table (for `alias_draw`).

    ``scores`` are the rule's raw scores per site (before mixing); ``p`` the mixed distribution.
    """

    sites: np.ndarray  # int32[n_sites]
    p: np.ndarray  # float64[n_sites]
    prob: np.ndarray  # float64[n_sites]
    alias: np.ndarray  # int32[n_sites]
    scores: np.ndarray  # float64[n_sites]


def _check_sites(graph: FactorGraph, query_vars, sites) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(sites)
    if s.ndim != 1 or s.shape[0] == 0 or not np.issubdtype(s.dtype, np.integer):
        raise InferenceError("sites must be a non-empty 1-d array of variable ids")
    s = s.astype(np.int64)
    if s.min() < 0 or s.max() >= graph.n_vars:
        bad = int(s[(s < 0) | (s >= graph.n_vars)][0])
        raise InferenceError(f"site {bad} is not a variable id (0..{graph.n_vars - 1})")
    counts = np.bincount(s, minlength=graph.n_vars)
    if np.any(counts > 1):
        raise InferenceError(f"site {int(np.flatnonzero(counts > 1)[0])} is listed twice")
    ev = s[graph.evidence[s] >= 0]
    if ev.shape[0]:
        raise InferenceError(f"site {int(ev[0])} is an evidence variable: it cannot be sampled")
    q = np.asarray(query_vars).astype(np.int64).ravel()
    if q.shape[0] == 0:
        raise InferenceError("a query needs at least one query variable")
    if q.min() < 0 or q.max() >= graph.n_vars:
        raise InferenceError(f"query variable id out of range 0..{graph.n_vars - 1}")
    missing = q[counts[q] == 0]
    if missing.shape[0]:
        raise InferenceError(f"query variable {int(missing[0])} is not among the sites")
    return np.unique(q), s


def mix_scores(scores: np.ndarray, epsilon: float) -> np.ndarray:
    """``(1 − ε) · score / Σ score + ε / n`` (uniform when every score is 0)."""
    scores = np.asarray(scores, dtype=np.float64)
    n = scores.shape[0]
    if not np.all(np.isfinite(scores)) or np.any(scores < 0):
        raise InferenceError("selection scores must be finite and non-negative")
    total = float(scores.sum())
    if total <= 0.0:
        return np.full(n, 1.0 / n)
    p = (1.0 - epsilon) * (scores / total) + epsilon / n
    return p / p.sum()


def site_scores(
    graph: FactorGraph, query_vars, sites, config: SelectionConfig = SelectionConfig(), *,
    influence: EdgeInfluence | None = None,
) -> np.ndarray:
    """The raw score of each site under ``config.selection`` (float64[n_sites]). ``influence``:
    the graph's `edge_influence` at ``config.max_table``, when the caller keeps it (it does not
    depend on the query variables)."""
    q, s = _check_sites(graph, query_vars, sites)
    rule = config.selection
    q_mask = np.zeros(graph.n_vars, dtype=bool)
    q_mask[q] = True
    is_q = q_mask[s]
    if rule == "uniform":
        return np.ones(s.shape[0])
    if rule == "query_only":
        return is_q.astype(np.float64)
    if rule == "trail":
        return trail_scores(graph, q, influence=influence, max_table=config.max_table)[s]
    if rule == "distance":
        inf = influence if influence is not None else edge_influence(graph, max_table=config.max_table)
        d = graph_distance(graph, q, influence=inf)[s]
        out = np.zeros(s.shape[0])
        hit = np.isfinite(d)
        out[hit] = np.power(1.0 + d[hit], -float(config.power))
        return out
    return exact_influence(graph, q, s, rule, max_exact_vars=config.max_exact_vars)


def exact_influence(graph: FactorGraph, query_vars, sites, measure: str, *, max_exact_vars: int = 20) -> np.ndarray:
    """Exact ``tv`` or ``mi`` influence of each site on the query (module docstring).

    Pairwise marginals come from exact inference on the graph with the query variable clamped
    to each of its values in turn. Refused beyond ``max_exact_vars`` non-evidence variables.
    """
    if measure not in ("tv", "mi"):
        raise OptionError(f"unknown exact influence {measure!r}; valid: tv, mi")
    q = unique(np.asarray(query_vars, dtype=np.int64))
    s = np.asarray(sites, dtype=np.int64)
    free = int(np.count_nonzero(graph.evidence < 0))
    if free > max_exact_vars:
        raise InferenceError(
            f"selection '{measure}' needs exact inference; this graph has {free} non-evidence "
            f"variables, more than max_exact_vars = {max_exact_vars} (use 'trail' instead)"
        )
    from pdbq.inference.exact.elimination import exact_marginals  # noqa: PLC0415 - heavy, only for tv/mi

    out = np.zeros(s.shape[0])
    for xq in q:
        pq = _marginals(exact_marginals, graph, graph.evidence)[int(xq)]
        # π(x_q = a, x_i = b) = π(x_q = a) · π(x_i = b | x_q = a)
        cond = []
        for a in range(int(graph.cardinality[xq])):
            if pq[a] <= 0.0:
                cond.append(None)
                continue
            ev = graph.evidence.copy()
            ev[xq] = a
            cond.append(_marginals(exact_marginals, graph, ev))
        for k, xi in enumerate(s):
            ci = int(graph.cardinality[xi])
            joint = np.zeros((int(graph.cardinality[xq]), ci))
            for a, m in enumerate(cond):
                if m is None:
                    continue
                joint[a] = pq[a] * (np.eye(ci)[a] if xi == xq else m[int(xi)])
            pa = joint.sum(axis=1, keepdims=True)
            pb = joint.sum(axis=0, keepdims=True)
            if measure == "tv":
                val = 0.5 * float(np.abs(joint - pa * pb).sum())
            else:
                nz = joint > 0
                val = float(np.sum(joint[nz] * np.log(joint[nz] / (pa * pb)[nz])))
            out[k] = max(out[k], max(val, 0.0))
    return out


def _marginals(exact_marginals, graph: FactorGraph, evidence: np.ndarray) -> list[np.ndarray]:
    """Per-variable marginals (a list of float64 vectors) from the exact engine, with evidence
    variables given as a point mass on their value."""
    m = exact_marginals(graph, evidence=evidence.astype(np.int64)).marginals
    return [np.asarray(m[v, : int(graph.cardinality[v])], dtype=np.float64) for v in range(graph.n_vars)]


def selection_distribution(
    graph: FactorGraph, query_vars, sites, config: SelectionConfig = SelectionConfig(), *,
    influence: EdgeInfluence | None = None,
) -> Selection:
    """The selection distribution over ``sites`` (x_q ∪ x_l, non-evidence, unique; must contain
    every query variable) and its alias table. See the module docstring for the rules.
    ``influence``: as in `site_scores`."""
    scores = site_scores(graph, query_vars, sites, config, influence=influence)
    p = mix_scores(scores, float(config.epsilon))
    prob, alias = alias_table(p)
    return Selection(np.asarray(sites, dtype=np.int32), p, prob, alias, scores)
