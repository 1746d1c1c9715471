"""Shards shipped to the workers: sharded MAP rounds on a cluster that cannot read our files.

`shards.resolve_sharded` normally lets every worker read its own blocks from the Parquet files,
which needs the files at the same path on every worker (a local cluster, shared storage). A
remote cluster reached by its scheduler address cannot read this machine's files, so with
``ship=True`` this process cuts the shards itself and sends each one's rows once, directly to the
worker that will hold it:

1. **cut** (this process, once): one DuckDB read of the mentions and one of the pairs, each
   mention given the shard the plan starts it on; each shard's mentions (``mention`` and
   ``init`` when the source has one) and the pairs of its mentions (``a``, ``b``, ``score``; a
   cut pair of a split group goes to both its shards) become Parquet bytes (`ShardPayload`);
2. **ship** (once per shard): the payload is scattered to the one worker that runs the shard's
   first round (``client.scatter(..., workers=[that worker])``): O(the shard's rows) to each worker,
   nothing to the others, and nothing again in later rounds;
3. **rounds**: each round task takes its shard's payload future as the source it reads from
   (`shard_state.read_whole` / `read_rows` ask the payload instead of the files); on the worker
   that holds the shard the payload is already in its memory and unused; entities that change
   shards travel worker to worker with their pairs, as with files.

A worker that dies takes its payloads with it (scattered data has no lineage). The round then
fails as lost; `Shipment.reship` sends this process's copy of every lost payload again, to the
worker the shard's task will run on, and the round is submitted again (`shards`); the shard is
rebuilt from it and replayed. A replay that takes in entities (a split group) gets its rows plus
the pairs of the mentions that arrive during it, cut here for that task (`Shipment.for_replay`).
This process keeps every payload until the run ends: O(all shards' rows) here, as the pair graph
it was cut from.
"""

from __future__ import annotations

import io
from typing import Any, NamedTuple

import numpy as np

from pdbq.distributed.shard_plan import ShardPlan, ShardSource
from pdbq.distributed.shard_state import Held, whole_held
from pdbq.errors import InferenceError

__all__ = ["ShardPayload", "Shipment", "shard_payloads", "ship_shards"]


class ShardPayload(NamedTuple):
    """One shard's rows as Parquet bytes: ``mentions`` (mention[, init]) sorted by mention,
    ``pairs`` (a, b, score), each pair once, with a mention among ``covers`` (the shard's
    mentions, and for a replay the mentions that arrive during it)."""

    mentions: bytes
    pairs: bytes
    covers: np.ndarray  # int64, sorted: the mentions all of whose pairs are here

    @property
    def nbytes(self) -> int:
        return len(self.mentions) + len(self.pairs) + int(self.covers.nbytes)

    def _tables(self):
        import pyarrow.parquet as pq  # noqa: PLC0415

        m = pq.read_table(io.BytesIO(self.mentions))
        p = pq.read_table(io.BytesIO(self.pairs))
        init = m.column("init").to_numpy().astype(np.int64) if "init" in m.column_names else None
        return (m.column("mention").to_numpy().astype(np.int64), init,
                *(p.column(c).to_numpy() for c in ("a", "b", "score")))

    def read_whole(self) -> Held:
        """The shard, as `shard_state.read_whole` reads it from the files."""
        mentions, init, a, b, w = self._tables()
        return whole_held(mentions, init, a, b, w)

    def read_rows(self, also: np.ndarray):
        """As `shard_state.read_rows` from the files: the shard's mentions, their ``init`` labels
        and the directed pair rows of those mentions and of ``also``."""
        mentions, init, pa_, pb, pw = self._tables()
        want = np.union1d(mentions, np.asarray(also, np.int64))
        if not np.isin(want, self.covers).all():
            missing = int(want[~np.isin(want, self.covers)][0])
            raise InferenceError(f"the shipped rows of this shard do not hold the pairs of mention {missing}")
        ha, hb = np.isin(pa_, want), np.isin(pb, want)
        a = np.concatenate([pa_[ha], pb[hb]]).astype(np.int64)
        b = np.concatenate([pb[ha], pa_[hb]]).astype(np.int64)
        w = np.concatenate([pw[ha], pw[hb]]).astype(np.float64)
        return mentions, init, a, b, w


def _parquet(table) -> bytes:
    import pyarrow.parquet as pq  # noqa: PLC0415

    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


class _Rows(NamedTuple):
    """Every mention and pair of a source, read once by this process, with each mention's shard."""

    mention: np.ndarray  # int64, sorted (0..n-1)
    init: np.ndarray | None
    shard: np.ndarray  # int64 per mention: the shard it starts on
    a: np.ndarray
    b: np.ndarray
    w: np.ndarray

    def payload(self, mine: np.ndarray, covers: np.ndarray, both_ends: bool) -> ShardPayload:
        """The payload of the mentions ``mine`` (bool per mention) with the pairs of ``covers``
        (sorted ids): by their first mention, or with ``both_ends`` by either."""
        import pyarrow as pa  # noqa: PLC0415

        cols = {"mention": self.mention[mine]}
        if self.init is not None:
            cols["init"] = self.init[mine]
        hit = np.zeros(self.mention.size, bool)
        hit[covers] = True
        rows = hit[self.a] | hit[self.b] if both_ends else hit[self.a]
        return ShardPayload(_parquet(pa.table(cols)),
                            _parquet(pa.table({"a": self.a[rows], "b": self.b[rows], "score": self.w[rows]})), covers)


def _read_rows(source: ShardSource, plan: ShardPlan) -> _Rows:
    import duckdb  # noqa: PLC0415

    con = duckdb.connect()
    try:
        names = [d[0] for d in con.execute("SELECT * FROM read_parquet(?) LIMIT 0", [source.mentions]).description]
        init = ", init" if "init" in names else ""
        m = con.execute(f"SELECT mention, block{init} FROM read_parquet(?) ORDER BY mention",
                        [source.mentions]).fetchnumpy()
        p = con.execute("SELECT a, b, score FROM read_parquet(?)", [source.pairs]).fetchnumpy()
    finally:
        con.close()
    mention = np.asarray(m["mention"], np.int64)
    if not np.array_equal(mention, np.arange(mention.size)):
        raise InferenceError("the mentions file must number its mentions 0..n-1, each once")
    blocks = np.concatenate(plan.blocks) if plan.blocks else np.zeros(0, np.int64)
    owner = np.repeat(np.arange(len(plan.blocks), dtype=np.int64), [b.size for b in plan.blocks])
    block = np.asarray(m["block"], np.int64)
    shard = np.full(mention.size, -1, np.int64)
    if blocks.size:  # a whole block's mentions start on its shard
        order = np.argsort(blocks, kind="stable")
        sb, so = blocks[order], owner[order]
        at = np.minimum(np.searchsorted(sb, block), sb.size - 1)
        hit = sb[at] == block
        shard[hit] = so[at[hit]]
    for s, ids in enumerate(plan.split):
        shard[np.asarray(ids, np.int64)] = s
    if (shard < 0).any():
        raise InferenceError(f"mention {int(np.flatnonzero(shard < 0)[0])} is on no shard of the plan")
    return _Rows(mention, np.asarray(m["init"], np.int64) if init else None, shard,
                 np.asarray(p["a"], np.int64), np.asarray(p["b"], np.int64), np.asarray(p["score"], np.float64))


def shard_payloads(source: ShardSource, plan: ShardPlan) -> list[ShardPayload]:
    """Each shard's rows of ``source`` (files this process reads) as the ``plan`` deals them."""
    rows = _read_rows(source, plan)
    return _payloads(rows, plan)


def _payloads(rows: _Rows, plan: ShardPlan) -> list[ShardPayload]:
    mobile = plan.cut_pairs > 0  # a pair across two shards goes to both
    out = []
    for s in range(len(plan.blocks)):
        mine = rows.shard == s
        out.append(rows.payload(mine, np.flatnonzero(mine).astype(np.int64), mobile))
    return out


class Shipment:
    """The payloads of one run, this process's copies and their futures on the workers."""

    def __init__(self, client: Any, rows: _Rows, plan: ShardPlan):
        self.client, self.rows = client, rows
        self.payloads = _payloads(rows, plan)
        self.futures: list[Any] = [None] * len(self.payloads)
        self.shipped = 0  # bytes sent, re-sends included
        self.resent = 0  # payloads sent again after their worker was lost
        self.replays: dict = {}  # (shard, mentions arriving in the replay) -> future of its rows

    def _send(self, payload: ShardPayload, worker: str | None) -> Any:
        where = dict(workers=[worker]) if worker else {}
        (future,) = self.client.scatter([payload], hash=False, **where)
        self.shipped += payload.nbytes
        return future

    def ship(self) -> None:
        """Each payload to the worker that runs its shard's first round (`shards` pins shard s's
        tasks round-robin over the sorted worker addresses until it knows where each shard is)."""
        addresses = sorted(self.client.scheduler_info()["workers"])
        for s, payload in enumerate(self.payloads):
            self.futures[s] = self._send(payload, addresses[s % len(addresses)] if addresses else None)

    def reship(self, where: list[str | None]) -> int:
        """Send again every payload whose future was lost with its worker, to the shard's worker
        in ``where`` if it is alive, else where the round will run it (round-robin over the sorted
        addresses); the next tasks take the new futures. Returns how many were sent."""
        addresses = sorted(self.client.scheduler_info()["workers"])
        alive = set(addresses)
        sent = 0
        for s, fut in enumerate(self.futures):
            if fut is not None and fut.status == "finished":
                continue
            target = where[s] if s < len(where) and where[s] in alive else (
                addresses[s % len(addresses)] if addresses else None)
            self.futures[s] = self._send(self.payloads[s], target)
            sent += 1
        self.resent += sent
        return sent

    def for_replay(self, shard: int, also: np.ndarray) -> Any:
        """A future of shard ``shard``'s rows plus the pairs of ``also`` (the mentions that arrive
        during a replay of a run whose entities change shards): sent from here, for that task."""
        also = np.unique(np.asarray(also, np.int64))
        key = (shard, also.tobytes())
        if key not in self.replays:  # a shard's export and its round task take the same rows
            mine = self.rows.shard == shard
            covers = np.union1d(np.flatnonzero(mine), also)
            self.resent += 1
            self.replays[key] = self._send(self.rows.payload(mine, covers, True), None)
        return self.replays[key]


def ship_shards(client: Any, source: ShardSource, plan: ShardPlan) -> Shipment:
    """Cut ``source`` by ``plan`` here and send each shard's rows to its first worker (module
    docstring)."""
    shipment = Shipment(client, _read_rows(source, plan), plan)
    shipment.ship()
    return shipment
