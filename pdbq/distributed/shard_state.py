"""One shard's state on its worker (`pdbq.distributed.shards`), and what changes it between
rounds when shards share candidate pairs (a group of linked blocks too big for one shard was
split by the plan).

A shard holds whole entities: its mentions, their labels, the pairs with both mentions held (the
local pair graph its moves score, exactly, since every member of an entity is held) and its
**cut pairs**: pairs from a held mention to a mention another shard holds. Between rounds:

- `boundary` sums each held entity's cut pairs by the mention across (what the client needs to
  decide which entities should meet: the merge gain of two entities on two shards is the sum of
  the cut pairs between them, since no other pair joins them);
- `export` takes the entities the client sends away out of the shard, each mention with every
  one of its pairs (a `Package`: the receiver needs nothing else, and nothing else moves);
- `admit` takes packages in: pairs to mentions now held become local, the others stay cut.

Entities are named across shards by their **key**, the smallest global mention id they hold.
Every step is a pure function of the state and its arguments, with the mentions kept sorted by
global id, so a shard rebuilt from the files and replayed through the same steps is the same.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pdbq.coref.contract import dense_groups
from pdbq.coref.layout import PairGraph, pair_graph
from pdbq.distributed.shard_plan import ShardSource, duckdb_connect
from pdbq.errors import InferenceError

__all__ = ["Held", "Package", "Boundary", "ShardLost", "assemble", "read_rows", "read_whole", "whole_held", "entity_keys",
           "export", "admit", "boundary", "package_from_rows"]


class ShardLost(InferenceError):
    """A shard's state is not on the worker a task runs on (its worker died, or the task ran
    elsewhere) and the task has no history to rebuild it: the client replays the run."""


class Held(NamedTuple):
    mentions: np.ndarray  # int64 global ids, sorted
    labels: np.ndarray  # int64 local entity labels
    graph: PairGraph  # the pairs with both mentions held (local indices)
    ext_a: np.ndarray  # int64 local index of the held mention of each cut pair (sorted with ext_b)
    ext_b: np.ndarray  # int64 global id of its other mention, held by another shard
    ext_w: np.ndarray  # float64 its score


class Package(NamedTuple):
    """Entities in transit: their mentions (global ids, sorted), each one's entity key, and each
    mention's pairs as CSR over ``ids`` (the other mention's global id, the score)."""

    ids: np.ndarray
    keys: np.ndarray
    indptr: np.ndarray
    nbr: np.ndarray
    score: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(sum(x.nbytes for x in self))


class Boundary(NamedTuple):
    """A shard's cut pairs summed by (held entity key, mention across); the links between its
    own entities of which one has a cut pair (their pairs' summed score plus the lower bias,
    when positive: the super-entity level's links); the entities of either: their keys and
    sizes; and which key each mention with a cut pair has."""

    key: np.ndarray  # int64 entity key of each row
    across: np.ndarray  # int64 global id of the mention across
    score: np.ndarray  # float64 sum of the cut pairs' scores
    count: np.ndarray  # int64 cut pairs summed
    mention: np.ndarray  # int64 held boundary mentions (sorted) ...
    mention_key: np.ndarray  # ... and their entity keys
    entity: np.ndarray  # int64 keys of the entities above (sorted) ...
    size: np.ndarray  # ... and their sizes
    link_a: np.ndarray = np.zeros(0, np.int64)  # int64 keys of two entities of this shard ...
    link_b: np.ndarray = np.zeros(0, np.int64)
    link_gain: np.ndarray = np.zeros(0)  # ... and their positive summed (score + bias)

    @property
    def nbytes(self) -> int:
        return int(sum(x.nbytes for x in self))


def assemble(mentions: np.ndarray, labels: np.ndarray, a: np.ndarray, b: np.ndarray, w: np.ndarray) -> Held:
    """The state holding ``mentions`` (sorted global ids) labelled ``labels``, from the directed
    pair rows a → b of every held mention (a pair between two held mentions appears in both
    directions; it becomes one local pair)."""
    n = mentions.size
    ia = np.searchsorted(mentions, a)
    ib = np.minimum(np.searchsorted(mentions, b), max(n - 1, 0))
    held_b = (mentions[ib] == b) if n else np.zeros(b.size, bool)
    inner = held_b & (a < b)
    g = pair_graph(n, ia[inner], ib[inner], w[inner])
    out = ~held_b
    ea, eb, ew = ia[out], b[out], w[out]
    order = np.lexsort((eb, ea))
    return Held(mentions, np.asarray(labels, np.int64), g, ea[order], eb[order], ew[order])


def directed(held: Held) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair of every held mention as a row a → b (global ids, score)."""
    g = held.graph
    src = np.repeat(np.arange(held.mentions.size, dtype=np.int64), np.diff(g.indptr))
    return (np.concatenate([held.mentions[src], held.mentions[held.ext_a]]),
            np.concatenate([held.mentions[g.nbr], held.ext_b]), np.concatenate([g.score, held.ext_w]))


def entity_keys(held: Held) -> np.ndarray:
    """The key (smallest global mention id) of each held mention's entity."""
    if held.labels.size == 0:
        return np.zeros(0, np.int64)
    low = np.full(int(held.labels.max()) + 1, np.iinfo(np.int64).max)
    np.minimum.at(low, held.labels, held.mentions)
    return low[held.labels]


def package_from_rows(ids: np.ndarray, keys: np.ndarray, a: np.ndarray, b: np.ndarray, w: np.ndarray) -> Package:
    """The package of mentions ``ids`` (sorted) with their ``keys``, from directed rows a → b
    that include every pair of theirs (rows of other mentions are ignored)."""
    pos = np.minimum(np.searchsorted(ids, a), max(ids.size - 1, 0))
    mine = (ids[pos] == a) if ids.size else np.zeros(a.size, bool)
    order = np.lexsort((b[mine], a[mine]))
    pa, pb, pw = a[mine][order], b[mine][order], w[mine][order]
    indptr = np.zeros(ids.size + 1, np.int64)
    indptr[1:] = np.cumsum(np.bincount(np.searchsorted(ids, pa), minlength=ids.size))
    return Package(ids, keys, indptr, pb, pw)


def export(held: Held, shard: int, sends: tuple[tuple[int, np.ndarray], ...]) -> tuple[Held, tuple[Package, ...]]:
    """Take the entities ``sends`` names ((destination, entity keys) each) out of the shard:
    the shard that stays, and one package per destination in the order of ``sends``."""
    keys = entity_keys(held)
    dest = np.full(held.mentions.size, -1, np.int64)
    for i, (_, want) in enumerate(sends):
        hit = np.isin(keys, want)
        found = np.unique(keys[hit])
        if found.size != np.unique(want).size:
            missing = np.setdiff1d(want, found)
            raise InferenceError(f"shard {shard} was asked to send entity {int(missing[0])}, which it does not hold")
        dest[hit] = i
    a, b, w = directed(held)
    packages = tuple(package_from_rows(held.mentions[dest == i], keys[dest == i], a, b, w) for i in range(len(sends)))
    stay = dest < 0
    kept = held.mentions[stay]
    row_kept = np.isin(a, kept)
    return assemble(kept, dense_groups(held.labels[stay])[0], a[row_kept], b[row_kept], w[row_kept]), packages


def admit(held: Held, packages: tuple[Package, ...]) -> Held:
    """The shard with the packages' entities added (their keys keep them apart from the held
    entities and from each other), mentions sorted again by global id."""
    if not packages:
        return held
    a, b, w = directed(held)
    ids = [held.mentions] + [p.ids for p in packages]
    base = int(held.labels.max()) + 1 if held.labels.size else 0
    new_keys = np.concatenate([p.keys for p in packages])
    lab = [held.labels, base + dense_groups(new_keys)[0]] if new_keys.size else [held.labels]
    a = np.concatenate([a] + [np.repeat(p.ids, np.diff(p.indptr)) for p in packages])
    b = np.concatenate([b] + [p.nbr for p in packages])
    w = np.concatenate([w] + [p.score for p in packages])
    mentions = np.concatenate(ids)
    labels = np.concatenate(lab)
    order = np.argsort(mentions, kind="stable")
    mentions, labels = mentions[order], labels[order]
    if mentions.size > 1 and np.any(mentions[1:] == mentions[:-1]):
        dup = int(mentions[1:][mentions[1:] == mentions[:-1]][0])
        raise InferenceError(f"mention {dup} arrived at a shard that already holds it")
    return assemble(mentions, dense_groups(labels)[0], a, b, w)


def boundary(held: Held, bias: float) -> Boundary:
    """The shard's cut pairs summed by (entity key, mention across), and the links of ``bias``
    between its entities that reach one with a cut pair (`Boundary`)."""
    keys = entity_keys(held)
    ka = keys[held.ext_a]
    if ka.size:
        order = np.lexsort((held.ext_b, ka))
        ka, xb, xw = ka[order], held.ext_b[order], held.ext_w[order]
        start = np.flatnonzero(np.concatenate([[True], (ka[1:] != ka[:-1]) | (xb[1:] != xb[:-1])]))
        score = np.add.reduceat(xw, start)
        count = np.diff(np.concatenate([start, [ka.size]]))
        ka, xb = ka[start], xb[start]
    else:
        xb, score, count = ka, np.zeros(0), np.zeros(0, np.int64)
    mention = np.unique(held.ext_a)
    ent, k = dense_groups(held.labels)
    key_of = np.zeros(k, np.int64)
    key_of[ent] = keys
    on_edge = np.zeros(k, bool)
    on_edge[ent[mention]] = True
    # only the rows of mentions of an entity with a cut pair are read (few, in a shard that is
    # mostly inside): a pair between two such mentions is read from its lower one
    g = held.graph
    rows = np.flatnonzero(on_edge[ent])
    deg = np.diff(g.indptr)[rows]
    src = np.repeat(rows, deg)
    at = np.repeat(g.indptr[rows] - np.cumsum(deg) + deg, deg) + np.arange(int(deg.sum()))
    dst = g.nbr[at].astype(np.int64)
    es, ed = ent[src], ent[dst]
    near = (es != ed) & (~on_edge[ed] | (src < dst))
    lo, hi = np.minimum(es[near], ed[near]), np.maximum(es[near], ed[near])
    link_id, inverse = np.unique(lo * k + hi, return_inverse=True)
    sums = np.bincount(inverse.reshape(-1), weights=g.score[at][near] + bias, minlength=link_id.size)
    pos = sums > 0
    la, lb, lg = key_of[link_id[pos] // max(k, 1)], key_of[link_id[pos] % max(k, 1)], sums[pos]
    entity = np.unique(np.concatenate([ka, la, lb]))
    sizes = np.bincount(ent, minlength=k)
    size_of_key = sizes[ent[np.searchsorted(held.mentions, entity)]].astype(np.int64)  # a key is a member's id
    return Boundary(ka, xb, score, count.astype(np.int64), held.mentions[mention], keys[mention], entity, size_of_key,
                    la, lb, lg)


def read_rows(source: ShardSource, blocks: np.ndarray, split: np.ndarray, also: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray, np.ndarray]:
    """From the Parquet files, by this process: the mentions of ``blocks`` and ``split`` (sorted
    global ids), their ``init`` labels (None without that column), and the directed pair rows
    a → b of those mentions and of ``also`` (mentions that will arrive during a replay).

    A pair from a mention of a whole block to a mention outside the shard is an
    `InferenceError`: the plan kept every pair of a whole block on its shard, so the files
    changed after the shards were planned."""
    import pyarrow as pa  # noqa: PLC0415

    if hasattr(source, "read_rows"):  # rows shipped to this worker (`shard_shipping.ShardPayload`)
        return source.read_rows(also)
    con = duckdb_connect()
    try:
        whole, init = _block_mentions(con, source, blocks)
        split = np.asarray(split, np.int64)
        if split.size and init is not None:
            con.register("split_mentions", pa.table({"mention": split}))
            si = con.execute("SELECT mention, init FROM read_parquet(?) WHERE mention IN (SELECT mention FROM "
                             "split_mentions) ORDER BY mention", [source.mentions]).fetchnumpy()
            init = np.concatenate([init, np.asarray(si["init"], np.int64)])
        mentions = np.concatenate([whole, split])
        order = np.argsort(mentions, kind="stable")
        mentions = mentions[order]
        init = None if init is None else init[order]
        want = np.union1d(mentions, np.asarray(also, np.int64))
        con.register("want", pa.table({"mention": want}))
        p = con.execute("SELECT a, b, score, a IN (SELECT mention FROM want) AS ha, b IN (SELECT mention FROM want) AS hb "
                        "FROM read_parquet(?) WHERE a IN (SELECT mention FROM want) OR b IN (SELECT mention FROM want)",
                        [source.pairs]).fetchnumpy()
    finally:
        con.close()
    pa_, pb, pw = (np.asarray(p[c]) for c in ("a", "b", "score"))
    ha, hb = np.asarray(p["ha"], bool), np.asarray(p["hb"], bool)
    a = np.concatenate([pa_[ha], pb[hb]]).astype(np.int64)
    b = np.concatenate([pb[ha], pa_[hb]]).astype(np.int64)
    w = np.concatenate([pw[ha], pw[hb]]).astype(np.float64)
    if whole.size:
        pos = np.minimum(np.searchsorted(whole, a), whole.size - 1)
        from_whole = whole[pos] == a
        pos_m = np.minimum(np.searchsorted(mentions, b), mentions.size - 1)
        bad = from_whole & (mentions[pos_m] != b)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise InferenceError(f"pair ({int(a[k])}, {int(b[k])}) has its second mention outside its shard: the "
                                 "Parquet files changed after the shards were planned")
    return mentions, init, a, b, w


def _block_mentions(con, source: ShardSource, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The mentions of ``blocks`` in the mentions file (sorted) and their ``init`` labels (None
    when the file has no such column)."""
    import pyarrow as pa  # noqa: PLC0415

    con.register("shard_blocks", pa.table({"block": np.asarray(blocks, np.int64)}))
    names = [d[0] for d in con.execute("SELECT * FROM read_parquet(?) LIMIT 0", [source.mentions]).description]
    init_col = ", init" if "init" in names else ""
    m = con.execute(f"SELECT mention{init_col} FROM read_parquet(?) WHERE block IN (SELECT block FROM shard_blocks) "
                    "ORDER BY mention", [source.mentions]).fetchnumpy()
    return np.asarray(m["mention"], np.int64), (np.asarray(m["init"], np.int64) if init_col else None)


def read_whole(source: ShardSource, blocks: np.ndarray) -> Held:
    """A shard of whole blocks that never exchanges entities, from the Parquet files by this
    process: each pair read once (a run without cut pairs keeps no directed rows, so building
    a shard costs what its pair graph does). A pair whose second mention lies outside the
    shard is an `InferenceError` as in `read_rows`."""
    import pyarrow as pa  # noqa: PLC0415

    if hasattr(source, "read_whole"):  # rows shipped to this worker (`shard_shipping.ShardPayload`)
        return source.read_whole()
    con = duckdb_connect()
    try:
        mentions, init = _block_mentions(con, source, blocks)
        con.register("shard_mentions", pa.table({"mention": mentions}))
        p = con.execute("SELECT a, b, score FROM read_parquet(?) WHERE a IN (SELECT mention FROM shard_mentions)",
                        [source.pairs]).fetchnumpy()
    finally:
        con.close()
    return whole_held(mentions, init, *(np.asarray(p[c]) for c in ("a", "b", "score")))


def whole_held(mentions: np.ndarray, init: np.ndarray | None, a: np.ndarray, b: np.ndarray, w: np.ndarray) -> Held:
    """`read_whole`'s shard from its rows: its sorted global mention ids, their ``init`` labels
    (None: singletons) and its pairs (a, b, score), each once, every ``a`` among the mentions."""
    init = dense_groups(np.asarray(init, np.int64))[0] if init is not None else np.arange(mentions.size, dtype=np.int64)
    ia = np.searchsorted(mentions, a)
    ib = np.searchsorted(mentions, b)
    if b.size:
        outside = mentions[np.minimum(ib, mentions.size - 1)] != b
        if outside.any():
            k = int(np.flatnonzero(outside)[0])
            raise InferenceError(f"pair ({int(a[k])}, {int(b[k])}) has its second mention outside its shard: the "
                                 "Parquet files changed after the shards were planned")
    none = np.zeros(0, np.int64)
    return Held(mentions, init, pair_graph(mentions.size, ia, ib, np.asarray(w, np.float64)), none, none, np.zeros(0))
