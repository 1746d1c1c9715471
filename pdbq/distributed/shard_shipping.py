"""Shards shipped to the workers: sharded MAP rounds on a cluster that cannot read our files.

`shards.resolve_sharded` normally lets every worker read its own blocks from the Parquet files,
which needs the files at the same path on every worker (a local cluster, shared storage). A
remote cluster reached by its scheduler address cannot read this machine's files, so with
``ship=True`` this process cuts the shards itself and sends each one's rows once, directly to the
worker that will hold it:

1. **cut** (this process, once): one DuckDB pass over the mentions and one over the pairs, each
   row tagged with the shard of its block (the plan's), split by shard; each shard's mentions
   (``mention`` and ``init`` when the source has one) and pairs (``a``, ``b``, ``score``) become
   Parquet bytes (`ShardPayload`);
2. **ship** (once per shard): the payload is scattered to the one worker that runs the shard's
   first round (``client.scatter(..., workers=[that worker])``): O(the shard's rows) to each worker,
   nothing to the others, and nothing again in later rounds;
3. **rounds**: each round task takes its shard's payload future as the source it reads from; on
   the worker that holds the shard the payload is already in its memory and unused; a task that
   lands where its shard is not held (its worker died) rebuilds the shard from the payload — Dask
   brings it there — and replays the rounds before it, as the file-reading path does. Groups of
   linked blocks stay whole (entities never change shards), so a shard's own rows are all a
   rebuild needs.

A worker that dies takes its payloads with it (scattered data has no lineage). The round then
fails as lost; `Shipment.reship` sends this process's copy of every lost payload again, to the
worker the shard's task will run on, and the round is submitted again (`shards`).
This process keeps every payload until the run ends: O(all shards' rows) here, as the pair graph
it was cut from.
"""

from __future__ import annotations

import io
from typing import Any, NamedTuple

import numpy as np

from pdbq.distributed.shard_plan import ShardPlan, ShardSource
from pdbq.distributed.shard_state import Held, whole_held

__all__ = ["ShardPayload", "Shipment", "shard_payloads", "ship_shards"]


class ShardPayload(NamedTuple):
    """One shard's rows as Parquet bytes: ``mentions`` (mention[, init]) sorted by mention,
    ``pairs`` (a, b, score) with every ``a`` among those mentions."""

    mentions: bytes
    pairs: bytes

    @property
    def nbytes(self) -> int:
        return len(self.mentions) + len(self.pairs)

    def read_whole(self) -> Held:
        """The shard, as `shard_state.read_whole` reads it from the files."""
        import pyarrow.parquet as pq  # noqa: PLC0415

        m = pq.read_table(io.BytesIO(self.mentions))
        p = pq.read_table(io.BytesIO(self.pairs))
        init = m.column("init").to_numpy() if "init" in m.column_names else None
        return whole_held(m.column("mention").to_numpy().astype(np.int64), init,
                          *(p.column(c).to_numpy() for c in ("a", "b", "score")))


def _parquet(table) -> bytes:
    import pyarrow.parquet as pq  # noqa: PLC0415

    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def shard_payloads(source: ShardSource, plan: ShardPlan) -> list[ShardPayload]:
    """Each shard's rows of ``source`` (files this process reads) as the ``plan`` deals the blocks."""
    import duckdb  # noqa: PLC0415
    import pyarrow as pa  # noqa: PLC0415

    sizes = [b.size for b in plan.blocks]
    owner = pa.table({"block": np.concatenate(plan.blocks) if plan.blocks else np.zeros(0, np.int64),
                      "shard": np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)})
    con = duckdb.connect()
    try:
        con.register("pdbq_owner", owner)
        names = [d[0] for d in con.execute("SELECT * FROM read_parquet(?) LIMIT 0", [source.mentions]).description]
        init = ", m.init" if "init" in names else ""
        # no ORDER BY: sorting by shard here is cheaper than DuckDB's sort of every pair
        m = con.sql(f"SELECT o.shard, m.mention{init} FROM read_parquet(?) m JOIN pdbq_owner o USING (block)",
                    params=[source.mentions]).to_arrow_table()
        p = con.sql("SELECT o.shard, q.a, q.b, q.score FROM read_parquet(?) q JOIN read_parquet(?) m "
                    "ON q.a = m.mention JOIN pdbq_owner o USING (block)",
                    params=[source.pairs, source.mentions]).to_arrow_table()
    finally:
        con.close()
    m_shard = m.column("shard").to_numpy()
    m = m.take(np.lexsort((m.column("mention").to_numpy(), m_shard)))  # by shard, then mention
    p_shard = p.column("shard").to_numpy()
    p = p.take(np.argsort(p_shard, kind="stable"))
    m_cut = np.concatenate(([0], np.cumsum(np.bincount(m_shard, minlength=len(sizes)))))
    p_cut = np.concatenate(([0], np.cumsum(np.bincount(p_shard, minlength=len(sizes)))))
    m, p = m.drop(["shard"]), p.drop(["shard"])
    return [ShardPayload(_parquet(m.slice(m_cut[s], m_cut[s + 1] - m_cut[s])),
                         _parquet(p.slice(p_cut[s], p_cut[s + 1] - p_cut[s]))) for s in range(len(sizes))]


class Shipment:
    """The payloads of one run, this process's copies and their futures on the workers."""

    def __init__(self, client: Any, payloads: list[ShardPayload]):
        self.client, self.payloads = client, payloads
        self.futures: list[Any] = [None] * len(payloads)
        self.shipped = 0  # bytes sent, re-sends included
        self.resent = 0  # payloads sent again after their worker was lost

    def _send(self, s: int, worker: str | None) -> None:
        where = dict(workers=[worker]) if worker else {}
        (self.futures[s],) = self.client.scatter([self.payloads[s]], hash=False, **where)
        self.shipped += self.payloads[s].nbytes

    def ship(self) -> None:
        """Each payload to the worker that runs its shard's first round (`shards` pins shard s's
        tasks round-robin over the sorted worker addresses until it knows where each shard is)."""
        addresses = sorted(self.client.scheduler_info()["workers"])
        for s in range(len(self.payloads)):
            self._send(s, addresses[s % len(addresses)] if addresses else None)

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
            self._send(s, target)
            sent += 1
        self.resent += sent
        return sent


def ship_shards(client: Any, source: ShardSource, plan: ShardPlan) -> Shipment:
    """Cut ``source`` by ``plan`` here and send each shard's rows to its first worker (module
    docstring)."""
    shipment = Shipment(client, shard_payloads(source, plan))
    shipment.ship()
    return shipment
