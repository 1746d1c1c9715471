"""The plan of sharded coreference MAP (`pdbq.distributed.shards`): the Parquet files a run reads
(`ShardSource`, `write_pairs`, `shard_by_components`) and which blocks each shard holds
(`plan_shards`), computed on the client from per-block counts and the links between blocks."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba import njit

from pdbq.coref.contract import dense_groups
from pdbq.coref.layout import PairGraph, pair_graph

__all__ = ["ShardSource", "ShardPlan", "plan_shards", "bfs_parts", "write_pairs", "shard_by_components", "duckdb_connect"]


class ShardSource(NamedTuple):
    """Parquet files every worker can read: ``mentions`` with columns (mention BIGINT, block
    BIGINT), mentions numbered 0..n-1; ``pairs`` (a file or a glob) with columns (a BIGINT,
    b BIGINT, score DOUBLE), each candidate pair once, both mentions in one block."""

    mentions: str
    pairs: str


class ShardPlan(NamedTuple):
    blocks: list[np.ndarray]  # int64 block ids each shard holds whole
    mentions: np.ndarray  # int64[shards]: mentions of each shard
    pairs: np.ndarray  # int64[shards]: pairs of each shard (a cut pair counts half on each side)
    cross_pairs: int = 0  # candidate pairs across two blocks
    groups: int = 0  # groups of linked blocks dealt (the blocks, when no pair crosses two)
    # per shard: the mentions of split groups it starts with (int64, sorted; empty when none)
    split: tuple[np.ndarray, ...] = ()
    cut_pairs: int = 0  # candidate pairs whose mentions start on two shards
    split_groups: int = 0  # groups of linked blocks too big for one shard, split by `bfs_parts`


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


def plan_shards(source: ShardSource, workers: int, *, split: bool = True) -> ShardPlan:
    """Deal the blocks to ``workers`` shards, largest pair count first, each to the shard with
    the fewest pairs so far (ties: fewer mentions, then the lower shard). Blocks linked by a
    candidate pair across them travel together (a group: a connected component of blocks under
    those links). A group with more pairs than a shard's share (all pairs ÷ ``workers``) would
    bound the slowest shard: with ``split`` it is cut into pieces of about a share each
    (`bfs_parts`, over its own pairs, read here once) and the pieces are dealt like groups; the
    pairs between pieces on two shards are the run's cut pairs. Otherwise only per-block counts
    and the links between blocks reach the client."""
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
        block, n, k = (np.asarray(rows[c], np.int64) for c in rows)
        group = _block_groups(block, np.asarray(links["lo"], np.int64), np.asarray(links["hi"], np.int64))
        gn = np.bincount(group, weights=n).astype(np.int64)
        gk = np.bincount(group, weights=k).astype(np.int64)
        big = (gk * workers > gk.sum()) if split and workers > 1 else np.zeros(gk.shape[0], bool)
        pieces = _split_groups(con, source, block, group, np.flatnonzero(big), gk, workers) if big.any() else []
    finally:
        con.close()
    first = np.full(gn.shape[0], np.iinfo(np.int64).max)
    np.minimum.at(first, group, block)
    members = np.split(block[np.argsort(group, kind="stable")], np.cumsum(np.bincount(group))[:-1])
    # dealing units: the whole groups, then the pieces of the split ones (mentions, pairs, first block)
    whole = np.flatnonzero(~big)
    un = np.concatenate([gn[whole], np.array([p[0].size for p in pieces], np.int64)])
    uk = np.concatenate([gk[whole], np.array([p[1] for p in pieces], np.int64)])
    uf = np.concatenate([first[whole], np.array([p[2] for p in pieces], np.int64)])
    pairs = np.zeros(workers, np.int64)
    mentions = np.zeros(workers, np.int64)
    owned: list[list[int]] = [[] for _ in range(workers)]
    extra: list[list[np.ndarray]] = [[] for _ in range(workers)]
    for u in np.lexsort((np.arange(un.size), uf, -un, -uk)).tolist():
        sh = min(range(workers), key=lambda i: (pairs[i], mentions[i], i))
        if u < whole.size:
            owned[sh].extend(members[whole[u]].tolist())
        else:
            extra[sh].append(pieces[u - whole.size][0])
        pairs[sh] += uk[u]
        mentions[sh] += un[u]
    split_ids = tuple(np.sort(np.concatenate(e)) if e else np.zeros(0, np.int64) for e in extra)
    return ShardPlan([np.sort(np.array(o, np.int64)) for o in owned], mentions, pairs,
                     int(np.asarray(links["k"], np.int64).sum()), int(gn.shape[0]), split_ids,
                     _cut_pairs(pieces, split_ids), int(big.sum()))


def _split_groups(con, source: ShardSource, block: np.ndarray, group: np.ndarray, big: np.ndarray, gk: np.ndarray,
                  workers: int) -> list[tuple[np.ndarray, int, int, np.ndarray, np.ndarray]]:
    """The pieces of the groups ``big``: (mention ids, pairs, first block, the group's pairs a, b
    as global ids) each, a group cut into ceil(its pairs ÷ a share) pieces by `bfs_parts`, whole
    entities of the ``init`` column kept in one piece."""
    import pyarrow as pa  # noqa: PLC0415

    share = max(1.0, float(gk.sum()) / workers)
    con.register("split_blocks", pa.table({"block": block[np.isin(group, big)], "grp": group[np.isin(group, big)]}))
    names = [d[0] for d in con.execute("SELECT * FROM read_parquet(?) LIMIT 0", [source.mentions]).description]
    init = ", m.init" if "init" in names else ", m.mention AS init"
    m = con.execute(f"SELECT m.mention, s.grp, m.block{init} FROM read_parquet(?) m JOIN split_blocks s USING (block) "
                    "ORDER BY m.mention", [source.mentions]).fetchnumpy()
    ids = np.asarray(m["mention"], np.int64)
    con.register("split_mentions", pa.table({"mention": ids}))
    p = con.execute("SELECT a, b FROM read_parquet(?) WHERE a IN (SELECT mention FROM split_mentions)",
                    [source.pairs]).fetchnumpy()
    a, b = np.asarray(p["a"], np.int64), np.asarray(p["b"], np.int64)
    grp, blk, ini = (np.asarray(m[c], np.int64) for c in ("grp", "block", "init"))
    out = []
    for gi in big.tolist():
        mine = ids[grp == gi]
        keep = np.isin(a, mine)
        ga, gb = a[keep], b[keep]  # shared by the group's pieces (`_cut_pairs` counts them once)
        la, lb = np.searchsorted(mine, ga), np.searchsorted(mine, gb)
        parts = int(min(workers, -(-int(gk[gi]) // int(np.ceil(share)))))
        part = bfs_parts(mine.size, la, lb, max(parts, 2), ini[grp == gi])
        deg = np.bincount(la, minlength=mine.size) + np.bincount(lb, minlength=mine.size)
        first = int(blk[grp == gi].min())
        for q in range(max(parts, 2)):
            sel = part == q
            out.append((mine[sel], int(deg[sel].sum() // 2), first, ga, gb))
    return out


def _cut_pairs(pieces, split_ids: tuple[np.ndarray, ...]) -> int:
    """Pairs of the split groups whose mentions start on two shards."""
    if not pieces:
        return 0
    ids = np.concatenate(split_ids)
    shard = np.repeat(np.arange(len(split_ids)), [s.size for s in split_ids])
    order = np.argsort(ids)
    ids, shard = ids[order], shard[order]
    seen: set[int] = set()
    cut = 0
    for piece in pieces:
        if id(piece[3]) in seen:  # the pieces of one group share its pair arrays
            continue
        seen.add(id(piece[3]))
        cut += int((shard[np.searchsorted(ids, piece[3])] != shard[np.searchsorted(ids, piece[4])]).sum())
    return cut


def bfs_parts(n: int, a: np.ndarray, b: np.ndarray, parts: int, unit: np.ndarray | None = None) -> np.ndarray:
    """A cheap balanced partition of the pair graph over mentions 0..n-1 (pairs a–b) into
    ``parts``: the mentions in breadth-first order (neighbours stay near each other, so few
    pairs cross two parts), cut into runs of equal pair count; mentions without pairs are dealt
    round-robin. ``unit`` (one label per mention): mentions with one label stay in one part (the
    part of the label's first mention in that order). Returns the part of each mention."""
    g = pair_graph(n, a, b, np.zeros(a.shape[0]))
    deg = np.diff(g.indptr)
    order = _bfs_order(g.indptr, g.nbr)
    part = np.empty(n, np.int64)
    before = np.cumsum(deg[order]) - deg[order]
    part[order] = np.minimum(before * parts // max(int(deg.sum()), 1), parts - 1)
    lone = np.flatnonzero(deg == 0)
    part[lone] = np.arange(lone.size) % parts
    if unit is not None and n:
        u = dense_groups(unit)[0]
        pos = np.empty(n, np.int64)
        pos[np.concatenate([order, lone])] = np.arange(n)
        head = np.full(int(u.max()) + 1, n, np.int64)
        np.minimum.at(head, u, pos)
        at = np.empty(n, np.int64)
        at[pos] = np.arange(n)
        part = part[at[head]][u]
    return part


@njit(cache=True)
def _bfs_order(indptr, nbr):
    """Mentions with pairs in breadth-first order, each component from its lowest mention."""
    n = indptr.shape[0] - 1
    seen = np.zeros(n, np.bool_)
    out = np.empty(n, np.int64)
    k = 0
    head = 0
    for s in range(n):
        if seen[s] or indptr[s + 1] == indptr[s]:
            continue
        seen[s] = True
        out[k] = s
        k += 1
        while head < k:
            x = out[head]
            head += 1
            for p in range(indptr[x], indptr[x + 1]):
                y = nbr[p]
                if not seen[y]:
                    seen[y] = True
                    out[k] = y
                    k += 1
    return out[:k]


def _block_groups(block: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Dense group of each of the sorted ``block`` ids: connected components of the links lo–hi."""
    from pdbq.inference.coreference.resolve import candidate_components  # noqa: PLC0415

    if lo.size == 0:
        return np.arange(block.shape[0], dtype=np.int64)
    g = pair_graph(block.shape[0], np.searchsorted(block, lo), np.searchsorted(block, hi), np.ones(lo.shape[0]))
    return dense_groups(candidate_components(g))[0]
