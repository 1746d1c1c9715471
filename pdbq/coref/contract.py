"""Derived pair graphs: a subset of mentions, the pairs inside groups, groups contracted to nodes.

These are the pieces of seed 001's hierarchy and of its distributed rounds, all over the
`PairGraph` layout (`pdbq.coref.layout`):

- `subgraph(g, mentions)`: the pairs with both ends in ``mentions`` (a worker's partition: its
  factors are exactly the partition-local ones), re-indexed 0..k-1 in the order given;
- `within(g, labels, shift)`: only the pairs inside one group of ``labels``, each score plus
  ``shift`` (the sub-entity level: mentions regroup inside their entity, with a higher bias b,
  i.e. a negative shift);
- `contract(g, groups, shift)`: one node per group, the score of two groups the sum over their
  members' cross pairs of (score + ``shift``) (entity level over sub-entities with shift 0;
  super-entity level over entities with a lower bias, i.e. a positive shift per pair). Moving a node of the contracted graph moves the whole group,
  and its score change is exactly the change of ψ over the mentions, since ψ is a sum over pairs.

Each function also returns how many pair scores it read (a pair stored twice counts once where
one direction suffices), so that factor evaluations are counted honestly when a level is rebuilt.

>>> import numpy as np
>>> from pdbq.coref.layout import pair_graph
>>> g = pair_graph(4, np.array([0, 0, 1, 2]), np.array([1, 2, 2, 3]), np.array([1.0, 2.0, 3.0, 4.0]))
>>> c, reads = contract(g, np.array([0, 0, 1, 1]))
>>> c.indptr.tolist(), c.nbr.tolist(), c.score.tolist(), reads
([0, 1, 2], [1, 0], [5.0, 5.0], 4)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pdbq.coref.layout import CorefInputError, PairGraph, pair_graph

__all__ = ["subgraph", "within", "contract", "dense_groups", "affine_groups", "find_root"]


def _rows(g: PairGraph) -> np.ndarray:
    """The row (first mention) of every stored entry."""
    n = g.indptr.shape[0] - 1
    return np.repeat(np.arange(n, dtype=np.int64), np.diff(g.indptr))


def dense_groups(labels: np.ndarray) -> tuple[np.ndarray, int]:
    """Labels renumbered 0..k-1 in order of first appearance, and k."""
    labels = np.asarray(labels)
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(first.shape[0], np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.shape[0])
    return rank[inverse.reshape(-1)], int(first.shape[0])


def subgraph(g: PairGraph, mentions: np.ndarray) -> tuple[PairGraph, int]:
    """The candidate pairs with both mentions in ``mentions`` (distinct indices), re-indexed by
    position in ``mentions``; the second value is the number of stored entries read (the rows of
    ``mentions``, scanned whole)."""
    n = g.indptr.shape[0] - 1
    mentions = np.asarray(mentions, dtype=np.int64)
    local = np.full(n, -1, np.int64)
    local[mentions] = np.arange(mentions.shape[0])
    if np.count_nonzero(local >= 0) != mentions.shape[0]:
        raise CorefInputError("subgraph(): the mention list repeats a mention")
    starts, ends = g.indptr[mentions], g.indptr[mentions + 1]
    counts = ends - starts
    idx = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) + np.arange(int(counts.sum()))
    src = np.repeat(np.arange(mentions.shape[0], dtype=np.int64), counts)
    dst = local[g.nbr[idx]]
    keep = (dst >= 0) & (src < dst)
    return pair_graph(mentions.shape[0], src[keep], dst[keep], g.score[idx][keep]), int(idx.shape[0])


def within(g: PairGraph, labels: np.ndarray, shift: float = 0.0) -> tuple[PairGraph, int]:
    """The pairs whose mentions share a label, scores plus ``shift``; pairs read."""
    labels = np.asarray(labels)
    src = _rows(g)
    dst = g.nbr.astype(np.int64)
    keep = (src < dst) & (labels[src] == labels[dst])
    return pair_graph(g.indptr.shape[0] - 1, src[keep], dst[keep], g.score[keep] + shift), int(g.nbr.shape[0] // 2)


def contract(g: PairGraph, groups: np.ndarray, shift: float = 0.0) -> tuple[PairGraph, int]:
    """One node per group of ``groups`` (dense ids 0..k-1), edge scores the summed (cross pair
    score + ``shift``); pairs read."""
    groups = np.asarray(groups, dtype=np.int64)
    k = int(groups.max()) + 1 if groups.size else 0
    src = groups[_rows(g)]
    dst = groups[g.nbr]
    keep = src < dst
    key = src[keep] * k + dst[keep]
    if key.size == 0:
        return pair_graph(k, key, key, np.zeros(0)), int(g.nbr.shape[0] // 2)
    uniq, inverse = np.unique(key, return_inverse=True)
    inverse = inverse.reshape(-1)
    sums = np.bincount(inverse, weights=g.score[keep], minlength=uniq.shape[0])
    if shift:
        sums = sums + shift * np.bincount(inverse, minlength=uniq.shape[0])
    return pair_graph(k, uniq // k, uniq % k, sums), int(g.nbr.shape[0] // 2)


@njit(cache=True)
def find_root(parent, x):
    """The root of x in a union-find forest (path halving)."""
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@njit(cache=True)
def _affine_union(indptr, nbr, score, ent, shift, parent):
    n = indptr.shape[0] - 1
    for m in range(n):
        for e in range(indptr[m], indptr[m + 1]):
            j = nbr[e]
            if j > m and ent[j] != ent[m] and score[e] + shift > 0.0:
                a = find_root(parent, ent[m])
                b = find_root(parent, ent[j])
                if a != b:
                    parent[max(a, b)] = min(a, b)
    for x in range(parent.shape[0]):
        parent[x] = find_root(parent, x)


def affine_groups(g: PairGraph, labels: np.ndarray, shift: float, max_size: int | None = None) -> tuple[np.ndarray, int]:
    """Super-entities in one pass: the connected components of entities linked by a cross pair
    whose score + ``shift`` is positive (a pair the lower-bias super-entity level would join).
    A component over ``max_size`` mentions is left as its separate entities (it could not stay on
    one partition anyway). Returns a group id per mention (constant over each entity) and the
    pairs read."""
    ent, k = dense_groups(labels)
    parent = np.arange(k, dtype=np.int64)
    _affine_union(g.indptr, g.nbr, g.score, ent, float(shift), parent)
    group = parent[ent]
    if max_size is not None and group.size:
        sizes = np.bincount(group, minlength=k)
        big = sizes[group] > max_size
        group = np.where(big, k + ent, group)
    return group, int(g.nbr.shape[0] // 2)
