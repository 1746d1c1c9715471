"""The plan of sharded coreference MAP (`pdbq.distributed.shards`): the Parquet files a run reads
(`ShardSource`, `write_pairs`, `shard_by_components`) and which blocks each shard holds
(`plan_shards`), computed on the client from per-block counts and the links between blocks."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from pdbq.coref.contract import dense_groups
from pdbq.coref.layout import PairGraph, pair_graph

__all__ = ["ShardSource", "ShardPlan", "plan_shards", "write_pairs", "shard_by_components", "duckdb_connect"]


class ShardSource(NamedTuple):
    """Parquet files every worker can read: ``mentions`` with columns (mention BIGINT, block
    BIGINT), mentions numbered 0..n-1; ``pairs`` (a file or a glob) with columns (a BIGINT,
    b BIGINT, score DOUBLE), each candidate pair once, both mentions in one block."""

    mentions: str
    pairs: str


class ShardPlan(NamedTuple):
    blocks: list[np.ndarray]  # int64 block ids of each shard
    mentions: np.ndarray  # int64[shards]: mentions of each shard
    pairs: np.ndarray  # int64[shards]: pairs of each shard
    cross_pairs: int = 0  # candidate pairs across two blocks (their blocks share a shard)
    groups: int = 0  # groups of linked blocks dealt (the blocks, when no pair crosses two)


def write_pairs(directory: str, g: PairGraph, block: np.ndarray, init: np.ndarray | None = None) -> ShardSource:
    """Write a pair graph and its blocking key as a `ShardSource` under ``directory`` (for
    tests, benchmarks and SQL queries, `shard_by_components`; a real source is written by
    whatever made the pairs). ``init``: where the rounds start (an entity label per mention,
    equal labels only inside a block; default singletons)."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    n = g.indptr.shape[0] - 1
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(g.indptr))
    keep = src < g.nbr
    os.makedirs(directory, exist_ok=True)
    m_path, p_path = os.path.join(directory, "mentions.parquet"), os.path.join(directory, "pairs.parquet")
    cols = {"mention": np.arange(n, dtype=np.int64), "block": np.asarray(block, np.int64)}
    if init is not None:
        cols["init"] = np.asarray(init, np.int64)
    pq.write_table(pa.table(cols), m_path)
    pq.write_table(pa.table({"a": src[keep], "b": g.nbr[keep].astype(np.int64), "score": g.score[keep]}), p_path)
    return ShardSource(m_path, p_path)


def shard_by_components(directory: str, g: PairGraph, init: np.ndarray | None = None) -> ShardSource:
    """`write_pairs` with the connected components of the candidate pairs as blocks: no pair
    crosses two of them, so no entity gains from spanning two, and the sharded rounds are exact
    for any pair graph (one giant component is one block: it bounds the slowest shard)."""
    from pdbq.inference.coreference.resolve import candidate_components  # noqa: PLC0415

    return write_pairs(directory, g, candidate_components(g), init)


def duckdb_connect() -> Any:
    import duckdb  # noqa: PLC0415 - a worker imports it when it builds a shard

    return duckdb.connect()


def plan_shards(source: ShardSource, workers: int) -> ShardPlan:
    """Deal the blocks to ``workers`` shards, largest pair count first, each to the shard with
    the fewest pairs so far (ties: fewer mentions, then the lower shard). Blocks linked by a
    candidate pair across them travel together (a group: a connected component of blocks under
    those links), so no pair ever crosses two shards. Only per-block counts and the links between
    blocks reach the client."""
    con = duckdb_connect()
    try:
        rows = con.execute(
            "WITH m AS (SELECT mention, block FROM read_parquet(?)), "
            "c AS (SELECT block, count(*) AS n FROM m GROUP BY block), "
            "p AS (SELECT m.block, count(*) AS k FROM read_parquet(?) q JOIN m ON q.a = m.mention GROUP BY m.block) "
            "SELECT c.block, c.n, coalesce(p.k, 0) FROM c LEFT JOIN p USING (block) ORDER BY 1",
            [source.mentions, source.pairs]).fetchnumpy()
        links = con.execute(
            "WITH m AS (SELECT mention, block FROM read_parquet(?)) "
            "SELECT least(ma.block, mb.block) AS lo, greatest(ma.block, mb.block) AS hi, count(*) AS k "
            "FROM read_parquet(?) q JOIN m ma ON q.a = ma.mention JOIN m mb ON q.b = mb.mention "
            "WHERE ma.block <> mb.block GROUP BY 1, 2", [source.mentions, source.pairs]).fetchnumpy()
    finally:
        con.close()
    block, n, k = (np.asarray(rows[c], np.int64) for c in rows)
    group = _block_groups(block, np.asarray(links["lo"], np.int64), np.asarray(links["hi"], np.int64))
    gn = np.bincount(group, weights=n).astype(np.int64)
    gk = np.bincount(group, weights=k).astype(np.int64)
    first = np.full(gn.shape[0], np.iinfo(np.int64).max)
    np.minimum.at(first, group, block)
    pairs = np.zeros(workers, np.int64)
    mentions = np.zeros(workers, np.int64)
    owned: list[list[int]] = [[] for _ in range(workers)]
    members = np.split(block[np.argsort(group, kind="stable")], np.cumsum(np.bincount(group))[:-1])
    for gi in np.lexsort((first, -gn, -gk)).tolist():
        sh = min(range(workers), key=lambda i: (pairs[i], mentions[i], i))
        owned[sh].extend(members[gi].tolist())
        pairs[sh] += gk[gi]
        mentions[sh] += gn[gi]
    return ShardPlan([np.sort(np.array(o, np.int64)) for o in owned], mentions, pairs,
                     int(np.asarray(links["k"], np.int64).sum()), int(gn.shape[0]))


def _block_groups(block: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Dense group of each of the sorted ``block`` ids: connected components of the links lo–hi."""
    from pdbq.inference.coreference.resolve import candidate_components  # noqa: PLC0415

    if lo.size == 0:
        return np.arange(block.shape[0], dtype=np.int64)
    g = pair_graph(block.shape[0], np.searchsorted(block, lo), np.searchsorted(block, hi), np.ones(lo.shape[0]))
    return dense_groups(candidate_components(g))[0]
