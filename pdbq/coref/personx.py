"""Person-X-style synthetic coreference data (seed 001's evaluation) as a `PairGraph`.

Seed 001 evaluates on mentions of ambiguous person names: several true people share one name
string, and the system must split each name's mentions by context. This generator makes that
directly: mentions come in name blocks of about ``per_name`` mentions, each name shared by a few
true entities (mention counts skewed, so one person dominates a name); every mention's context is
its entity's unit centroid plus Gaussian noise; blocking is by name, so the candidate pairs are
all pairs inside a name (O(mentions · per_name), never all pairs of the data set); a pair's
score is cos(context_i, context_j) − ``bias``.

>>> data = person_x(2_000, seed=1)
>>> data.graph.n_mentions, data.truth.shape[0], int(data.name.max()) + 1
(2000, 2000, 20)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pdbq.coref.layout import PairGraph, pair_graph

__all__ = ["PersonX", "person_x"]


class PersonX(NamedTuple):
    """A synthetic data set: the pair graph, the true entity of each mention, its name id."""

    graph: PairGraph
    truth: np.ndarray  # int64[n] true entity id
    name: np.ndarray  # int64[n] name string id (the blocking key)


def person_x(n_mentions: int, *, per_name: int = 100, entities_per_name: tuple[int, int] = (2, 6), dim: int = 16,
             noise: float = 0.8, bias: float = 0.45, seed: int = 0) -> PersonX:
    """Generate ``n_mentions`` mentions (module docstring)."""
    rng = np.random.default_rng(seed)
    names = max(1, n_mentions // per_name)
    lo, hi = entities_per_name
    per = rng.integers(lo, hi + 1, size=names)
    n_ent = int(per.sum())
    ent_name = np.repeat(np.arange(names), per)
    centroids = rng.normal(size=(n_ent, dim))
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    name = np.sort(rng.integers(0, names, size=n_mentions))
    first_ent = np.concatenate([[0], np.cumsum(per)[:-1]])
    # within a name, entity k is drawn with weight 1/(k+1): one person dominates each name
    u = rng.random(n_mentions)
    k_of = per[name]
    w_cum = np.cumsum(1.0 / np.arange(1, hi + 1))
    k = np.minimum(np.searchsorted(w_cum, u * w_cum[k_of - 1], side="right"), k_of - 1)
    truth = first_ent[name] + k
    ctx = centroids[truth] + noise * rng.normal(size=(n_mentions, dim)) / np.sqrt(dim)
    ctx /= np.linalg.norm(ctx, axis=1, keepdims=True)
    starts = np.searchsorted(name, np.arange(names))
    ends = np.searchsorted(name, np.arange(names), side="right")
    a_parts, b_parts = [], []
    for s, e in zip(starts.tolist(), ends.tolist()):
        i, j = np.triu_indices(e - s, 1)
        a_parts.append(i + s)
        b_parts.append(j + s)
    a = np.concatenate(a_parts) if a_parts else np.zeros(0, np.int64)
    b = np.concatenate(b_parts) if b_parts else np.zeros(0, np.int64)
    score = np.einsum("ij,ij->i", ctx[a], ctx[b]) - bias
    return PersonX(pair_graph(n_mentions, a, b, score), truth.astype(np.int64), name.astype(np.int64))
