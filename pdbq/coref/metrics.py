"""Clustering quality against a gold clustering: B³ and pairwise precision / recall / F1.

B³ (Bagga & Baldwin 1998): for each mention m with predicted cluster C(m) and gold entity G(m),
precision |C(m) ∩ G(m)| / |C(m)| and recall |C(m) ∩ G(m)| / |G(m)|, averaged over mentions.
Pairwise: precision and recall of the set of unordered mention pairs placed in one cluster.
Both are computed from the contingency table of (cluster, entity) counts, O(n log n).
The same definitions are DuckDB table macros `coref_b3(pred, gold)` and
`coref_pairwise(pred, gold)` (``sql/coref_metrics.sql``, installed by `register_sql`).

>>> s = b_cubed([1, 1, 3], [1, 2, 2])
>>> round(s.precision, 4), round(s.recall, 4)
(0.6667, 0.6667)
>>> pairwise([1, 1, 3], [1, 2, 2]).f1
0.0
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import numpy as np

from pdbq.coref.layout import CorefInputError

__all__ = ["Scores", "b_cubed", "pairwise", "labels_from_pairs", "align_gold", "register_sql"]


@dataclass(frozen=True)
class Scores:
    precision: float
    recall: float

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def _contingency(pred, gold):
    pred = np.asarray(pred)
    gold = np.asarray(gold)
    if pred.shape != gold.shape or pred.ndim != 1:
        raise CorefInputError(f"pred and gold must be aligned 1-d label arrays, got {pred.shape} and {gold.shape}")
    _, p = np.unique(pred, return_inverse=True)
    _, g = np.unique(gold, return_inverse=True)
    p = p.reshape(-1).astype(np.int64)
    g = g.reshape(-1).astype(np.int64)
    _, cell = np.unique(p * (g.max(initial=0) + 1) + g, return_inverse=True)
    return p, g, cell.reshape(-1)


def b_cubed(pred, gold) -> Scores:
    """B³ precision and recall of predicted labels against gold labels (aligned by position)."""
    p, g, cell = _contingency(pred, gold)
    if p.size == 0:
        return Scores(1.0, 1.0)
    n_cell = np.bincount(cell)[cell].astype(np.float64)
    n_p = np.bincount(p)[p].astype(np.float64)
    n_g = np.bincount(g)[g].astype(np.float64)
    return Scores(float(np.mean(n_cell / n_p)), float(np.mean(n_cell / n_g)))


def pairwise(pred, gold) -> Scores:
    """Pairwise precision and recall (1.0 where there is no pair to get wrong)."""
    p, g, cell = _contingency(pred, gold)

    def pairs(labels):
        c = np.bincount(labels).astype(np.float64)
        return float(np.sum(c * (c - 1) / 2))

    tp, pp, gp = pairs(cell), pairs(p), pairs(g)
    return Scores(tp / pp if pp else 1.0, tp / gp if gp else 1.0)


def labels_from_pairs(ids, a, b) -> np.ndarray:
    """Gold labels per id (aligned with `ids`) from matching pairs, closed transitively: each
    entity is named by its smallest id. Raises `CorefInputError` for a pair naming an unknown id."""
    ids = np.asarray(ids)
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]

    def locate(x, side):
        x = np.asarray(x)
        pos = np.searchsorted(sorted_ids, x)
        bad = (pos >= sorted_ids.size) | (sorted_ids[np.minimum(pos, sorted_ids.size - 1)] != x)
        if np.any(bad):
            raise CorefInputError(
                f"gold pairs name {int(bad.sum())} unknown id(s) in column {side}, e.g. {x[bad][0]!r}"
            )
        return order[pos]

    ia, ib = locate(a, "1"), locate(b, "2")
    parent = np.arange(ids.size)

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for u, v in zip(ia.tolist(), ib.tolist()):
        ru, rv = find(u), find(v)
        if ru != rv:
            if ids[ru] < ids[rv]:
                parent[rv] = ru
            else:
                parent[ru] = rv
    roots = np.array([find(x) for x in range(ids.size)], dtype=np.int64)
    return ids[roots]


def align_gold(ids, gold_ids, gold_entity) -> np.ndarray:
    """Gold entity per id in `ids` from a gold table (gold_ids, gold_entity). Every id must
    appear in the gold table exactly once and every gold id must be known."""
    ids = np.asarray(ids)
    gold_ids = np.asarray(gold_ids)
    gold_entity = np.asarray(gold_entity)
    uniq, counts = np.unique(gold_ids, return_counts=True)
    if np.any(counts > 1):
        raise CorefInputError(f"gold table lists id {uniq[counts > 1][0]!r} more than once")
    known = np.isin(gold_ids, ids)
    if not known.all():
        raise CorefInputError(
            f"gold table names {int((~known).sum())} id(s) not among the records, e.g. {gold_ids[~known][0]!r}"
        )
    order = np.argsort(gold_ids)
    pos = np.searchsorted(gold_ids[order], ids)
    pos = np.minimum(pos, max(gold_ids.size - 1, 0))
    missing = gold_ids.size == 0 or np.any(gold_ids[order][pos] != ids)
    if missing:
        raise CorefInputError("gold table does not cover every record id")
    return gold_entity[order][pos]


def register_sql(con) -> None:
    """Install the `coref_b3` and `coref_pairwise` table macros on a DuckDB connection."""
    text = (resources.files("pdbq") / "sql" / "coref_metrics.sql").read_text(encoding="utf-8")
    for stmt in text.split(";"):
        body = "\n".join(line for line in stmt.splitlines() if not line.lstrip().startswith("--")).strip()
        if body:
            con.execute(body)
