"""Pruned query graphs kept between queries, so that a repeated query only samples.

Planning a query grounds what it reaches, loads that region's factors from DuckDB and builds the
graph arrays; inference then derives kernel arrays and a selection table from the graph. On a
large model that is seconds of work, repeated identically by every run of the same question
while nothing changed. `GraphCache` keeps the result:

- **key**: (store token, seeds, evidence, grounding config). The store token
  (`pdbq.grounding.ground.store_token`) is a digest of every input of the graph as `prepare` just
  found it — definitions, fingerprints of the data (recomputed on every query, a few ms per
  million rows), weights, imported models — so any change, including one made through plain
  DuckDB SQL, is a different key: a stale graph is never served.
- **value**: a `CachedGraph` — the graph, its global vids, its rules' weight ranges — and
  ``derived``, a dict in which the layers above keep what they compute from the graph (kernel
  arrays, selection tables, AUTO's decision). Derived values are immutable once stored and
  live and die with their entry.
- **bound**: least recently used entries are dropped once the numpy arrays of the graphs and
  their derived values exceed ``max_bytes``; an entry larger than the bound is not kept.
  ``max_bytes=0`` turns the cache off.

The cache belongs to one `pdbq.Database` (one connection); it is thread-safe (DuckDB may call
pdbq's UDFs from several threads).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

import numpy as np

from pdbq.errors import OptionError
from pdbq.graph.layout import FactorGraph

__all__ = ["GraphCache", "CachedGraph", "Memo", "graph_key", "nbytes", "DEFAULT_CACHE_BYTES"]

# Enough for a few models of millions of variables (a 1M-variable chain with its kernel arrays
# and selection table is ~150 MB) and small next to the 24 GiB of the machines we target.
DEFAULT_CACHE_BYTES = 1 << 30


@dataclass(eq=False)
class CachedGraph:
    """One query graph and what was derived from it."""

    graph: FactorGraph
    vids: np.ndarray
    weight_rules: tuple[tuple[str, int, int], ...]
    derived: dict[Any, Any] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Memo:
    """Values derived from one cached graph, kept as long as its entry (see `GraphCache.memo`)."""

    cache: GraphCache
    derived: dict[Any, Any]

    def get(self, key: Any) -> Any:
        return self.derived.get(key)

    def put(self, key: Any, value: Any, *, keep: int | None = None) -> Any:
        """Keep ``value`` (immutable from now on) and return it. ``keep``: ``key`` is a tuple
        whose first item names a kind of value; only the ``keep`` most recent values of that
        kind stay."""
        if keep is not None:
            same = [k for k in self.derived if isinstance(k, tuple) and k and k[0] == key[0]]
            for k in same[: max(len(same) - keep + 1, 0)]:
                self.derived.pop(k, None)
        return self.cache.remember(self.derived, key, value)

    def get_or_make(self, key: Any, make: Any, *, keep: int | None = None) -> Any:
        value = self.derived.get(key)
        return value if value is not None else self.put(key, make(), keep=keep)


def nbytes(obj: Any, _depth: int = 0) -> int:
    """Bytes held in numpy arrays reachable from ``obj`` through tuples, lists, dicts and
    dataclasses (what the cache bounds; Python object overhead is small beside it)."""
    if _depth > 6:
        return 0
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, (tuple, list)):
        return sum(nbytes(x, _depth + 1) for x in obj)
    if isinstance(obj, dict):
        return sum(nbytes(v, _depth + 1) for v in obj.values())
    if is_dataclass(obj) and not isinstance(obj, type):
        return sum(nbytes(getattr(obj, f.name), _depth + 1) for f in fields(obj))
    return 0


def _digest(h: hashlib._Hash, a: np.ndarray) -> None:
    a = np.ascontiguousarray(a)
    h.update(f"{a.dtype.str}{a.shape}".encode())
    h.update(a.tobytes())


def graph_key(token: str, seeds: np.ndarray | None, evidence: tuple[np.ndarray, np.ndarray], config: object) -> str:
    """The cache key of a query graph: store token, seed vids (sorted; None for the whole
    model's graph), evidence (vids, values) and the grounding config (its repr: a frozen
    dataclass)."""
    h = hashlib.blake2b(digest_size=20)
    h.update(token.encode())
    if seeds is None:
        h.update(b"whole model")
    else:
        _digest(h, np.asarray(seeds, dtype=np.int64))
    ev, val = evidence
    ev = np.asarray(ev, dtype=np.int64)
    val = np.asarray(val, dtype=np.int64)
    order = np.argsort(ev, kind="stable")
    _digest(h, ev[order])
    _digest(h, val[order])
    h.update(repr(config).encode())
    return h.hexdigest()


class GraphCache:
    """LRU cache of query graphs bounded by bytes (see the module docstring).

    >>> cache = GraphCache(max_bytes=1 << 20)
    >>> cache.get("k") is None
    True
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES):
        if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 0:
            raise OptionError(f"cache_bytes must be a non-negative integer, got {max_bytes!r}")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, CachedGraph] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self._alias: dict[str, str] = {}  # key -> key of the entry it shares
        self._lock = threading.RLock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> CachedGraph | None:
        with self._lock:
            primary = self._alias.get(key, key)
            entry = self._entries.get(primary)
            if entry is None:
                self._alias.pop(key, None)  # its entry was evicted
                self.misses += 1
                return None
            self._entries.move_to_end(primary)
            self.hits += 1
            return entry

    def put(self, key: str, entry: CachedGraph) -> CachedGraph:
        """Keep ``entry`` under ``key`` (when it fits) and return it. An entry already kept under
        another key is shared, not copied: e.g. when a query's region is the whole model graph,
        the query's key and the model's lead to one graph and one set of derived arrays."""
        with self._lock:
            if self.max_bytes == 0:
                return entry
            for k, e in self._entries.items():
                if e is entry and k != key:
                    self._alias[key] = k
                    self._entries.move_to_end(k)
                    return entry
            self._alias.pop(key, None)
            self._entries[key] = entry
            self._entries.move_to_end(key)
            self._sizes[key] = nbytes(entry)
            self._evict()
            return entry

    def memo(self, graph: FactorGraph) -> Memo | None:
        """The `Memo` of the cached entry holding exactly this graph object (None when the
        graph is not cached: then nothing derived from it is kept)."""
        with self._lock:
            for entry in self._entries.values():
                if entry.graph is graph:
                    return Memo(self, entry.derived)
            return None

    def remember(self, derived: dict[Any, Any], key: Any, value: Any) -> Any:
        """Store ``value`` in an entry's ``derived`` dict and re-apply the byte bound."""
        with self._lock:
            derived[key] = value
            for k, entry in self._entries.items():
                if entry.derived is derived:
                    self._sizes[k] = nbytes(entry)
                    break
            self._evict()
            return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._sizes.clear()
            self._alias.clear()

    @property
    def bytes(self) -> int:
        with self._lock:
            return sum(self._sizes.values())

    def __len__(self) -> int:
        return len(self._entries)

    def _evict(self) -> None:
        total = sum(self._sizes.values())
        while self._entries and total > self.max_bytes:
            k, _ = self._entries.popitem(last=False)
            total -= self._sizes.pop(k)
