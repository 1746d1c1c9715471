"""Labels for the front door: gold/training files read by their own columns.

A label source (a .csv/.parquet path, a DuckDB table name or relation) is either

* **clusters**: an id column (named like the records' id column, or `id`) and one entity column
  (`entity`, `cluster`, or the only other column): records with one entity value are one entity;
* **pairs**: exactly two columns whose values are record ids: each row a matching pair.

`read_labels` says which columns it needs when neither shape fits, and names ids that are not
records (`CorefInputError`, never a raw binder error).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdbq.coref.layout import CorefInputError
from pdbq.coref.metrics import labels_from_pairs
from pdbq.coref.model import source_relation

__all__ = ["Labels", "read_labels"]

_ENTITY_NAMES = ("entity", "cluster", "cluster_id", "entity_id", "label")


@dataclass(frozen=True, eq=False)
class Labels:
    """Labelled records as dense record indices `index` with entity labels `entity` (pairs are
    closed transitively); `shape` is "clusters" or "pairs"."""

    index: np.ndarray
    entity: np.ndarray
    shape: str


def _positions(record_ids: np.ndarray, values: np.ndarray, what: str) -> np.ndarray:
    order = np.argsort(record_ids, kind="stable")
    srt = record_ids[order]
    try:
        vals = values.astype(srt.dtype)
    except (ValueError, TypeError):
        vals = values.astype(str)
        srt = srt.astype(str)
    pos = np.searchsorted(srt, vals)
    pos = np.minimum(pos, srt.size - 1)
    bad = srt[pos] != vals
    if np.any(bad):
        k = int(np.flatnonzero(bad)[0])
        example = values[k].item() if isinstance(values[k], np.generic) else values[k]  # 99, not np.int64(99)
        raise CorefInputError(f"{what}: {int(bad.sum())} id(s) are not among the records, e.g. {example!r}")
    return order[pos]


def read_labels(con, source, record_ids: np.ndarray, id_column: str, what: str = "labels") -> Labels:
    """Read a clusters or pairs label source (module docstring) against the records' ids."""
    rel = source_relation(con, source, file_noun="label file", name_noun="label file, table or view")
    cols = list(rel.columns)
    lower = {c.lower(): c for c in cols}
    idc = id_column if id_column in cols else lower.get("id")
    if idc is not None and len(cols) >= 2:
        rest = [c for c in cols if c != idc]
        ent = next((lower[n] for n in _ENTITY_NAMES if n in lower and lower[n] != idc), None)
        if ent is None and len(rest) == 1:
            ent = rest[0]
        if ent is not None:
            d = rel.select(f'"{idc.replace(chr(34), chr(34) * 2)}" AS i, "{ent.replace(chr(34), chr(34) * 2)}" AS e').fetchnumpy()
            ids = np.asarray(d["i"])
            if np.unique(ids).size != ids.size:
                raise CorefInputError(f"{what}: the id column {idc!r} lists a record more than once")
            idx = _positions(np.asarray(record_ids), ids, what)
            _, entity = np.unique(np.asarray(d["e"]).astype(str), return_inverse=True)
            return Labels(idx, entity.reshape(-1), "clusters")
    if len(cols) == 2:
        d = rel.fetchnumpy()
        a = _positions(np.asarray(record_ids), np.asarray(d[cols[0]]), what)
        b = _positions(np.asarray(record_ids), np.asarray(d[cols[1]]), what)
        idx = np.unique(np.concatenate([a, b]))
        ent = labels_from_pairs(idx, a, b)
        return Labels(idx, np.asarray(ent), "pairs")
    raise CorefInputError(
        f"{what}: expected either the id column {id_column!r} (or 'id') and one entity column "
        f"({', '.join(_ENTITY_NAMES)}), or exactly two columns of matching record ids; the file has columns {cols}")
