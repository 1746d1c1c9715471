"""The factor store's two registries (``pdbq_fs_relations``, ``pdbq_fs_rules``) read through a
cache addressed by their content.

Every grounding call reads both registries (the vid maps' and the rules' stored state) to decide
what is still current: two statements of ~0.4 ms each, most of them DuckDB's fixed cost per
statement. `pdbq.grounding.ground.prepare` fingerprints both tables in the one statement that
fingerprints the call's inputs anyway (`fingerprint_many`: row count and a 63-bit multiset hash of
every column of every row, ~0.15 ms more per table there). Equal fingerprints mean equal contents
(up to a collision of about 2^-63, the same guarantee as the staleness check of the user's data),
so rows read once under a fingerprint serve every later call that finds the same fingerprint —
on any connection, since the key is the content itself. A registry changed in any way, by pdbq or
by plain SQL, has another fingerprint and is read again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import duckdb

__all__ = ["REGISTRY_ITEMS", "registry_rows"]

_SQL = {
    "relations": (
        "SELECT relation, base, n, cardinality, per_row, def_hash, source_fp, evidence_fp, map_version, null_keys, ev_warnings "
        "FROM pdbq_fs_relations"
    ),
    "rules": "SELECT rule, def_hash, inputs_fp, complete, relations, n_factors, position FROM pdbq_fs_rules",
}

# registry -> its item for `fingerprint_many`
REGISTRY_ITEMS = {"relations": ("relation", "pdbq_fs_relations"), "rules": ("relation", "pdbq_fs_rules")}

_MAX = 32
_CACHE: OrderedDict[tuple[str, str], list[tuple]] = OrderedDict()
_LOCK = threading.Lock()  # grounding may run on several threads (one connection each)


def _copy(rows: list[tuple]) -> list[tuple]:
    # callers get their own lists (LIST columns), so nothing they do reaches the cache
    return [tuple(list(v) if isinstance(v, list) else v for v in r) for r in rows]


def registry_rows(con: duckdb.DuckDBPyConnection, which: str, fingerprint: str | None = None) -> list[tuple]:
    """The rows of registry ``which`` ("relations" or "rules"; columns as in ``_SQL``).
    ``fingerprint``: the registry's fingerprint taken in the caller's transaction before any write
    to it (`fingerprint_many` of ``REGISTRY_ITEMS[which]``); None reads the table."""
    if fingerprint is None:
        return con.execute(_SQL[which]).fetchall()
    key = (which, fingerprint)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
    if hit is not None:
        return _copy(hit)
    rows = con.execute(_SQL[which]).fetchall()
    with _LOCK:
        _CACHE[key] = _copy(rows)
        while len(_CACHE) > _MAX:
            _CACHE.popitem(last=False)
    return rows
