"""Sharded MAP rounds with each shard's rows shipped to its worker (a cluster that cannot read our files).

A worker killed mid-round with shipped shards: tests/test_distributed_chains.py
(`test_process_cluster_shards_survive_a_killed_worker`)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import BLOCKED_CLUSTER_SQL

distributed = pytest.importorskip("distributed")

from pdbq.coref.personx import person_x  # noqa: E402
from pdbq.distributed import DistributedConfig  # noqa: E402
import pdbq.distributed.shard_state as shard_state  # noqa: E402
import pdbq.distributed.shards as shards  # noqa: E402
from pdbq.distributed.shard_shipping import shard_payloads  # noqa: E402


@pytest.fixture(scope="module")
def tcp_cluster():
    """An in-process cluster reached by its tcp:// address, as a remote scheduler is."""
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp",
                                       dashboard_address=":0")
    client = distributed.Client(cluster)
    yield cluster.scheduler_address, client
    client.close()
    cluster.close()


@pytest.fixture(scope="module")
def blocked(tmp_path_factory):
    data = person_x(1_200, per_name=60, noise=0.5, seed=4)
    return data, shards.write_pairs(str(tmp_path_factory.mktemp("shipped")), data.graph, data.name)


def _no_files(monkeypatch):
    """Workers (threads of this process) must build their shards from what was shipped."""
    def refuse(*args, **kw):
        raise AssertionError("a worker read the Parquet files")

    monkeypatch.setattr(shard_state, "duckdb_connect", refuse)


def test_payloads_are_each_shards_rows_once(blocked):
    data, src = blocked
    plan = shards.plan_shards(src, 3)
    payloads = shard_payloads(src, plan)
    seen = []
    for s, p in enumerate(payloads):
        held, files = p.read_whole(), shard_state.read_whole(src, plan.blocks[s])
        assert np.array_equal(held.mentions, files.mentions) and np.array_equal(held.labels, files.labels)
        assert np.array_equal(held.graph.indptr, files.graph.indptr) and np.array_equal(held.graph.nbr, files.graph.nbr)
        assert held.graph.n_pairs == plan.pairs[s]
        seen.append(held.mentions)
    assert np.array_equal(np.sort(np.concatenate(seen)), np.arange(data.name.size))


def test_sql_map_with_a_scheduler_ships_the_shards(tcp_cluster, monkeypatch):
    """The same query on the in-process cluster (workers read the files) and on a cluster named by
    its address (nothing read from files by the workers): the same clustering, sharded both times."""
    import pdbq

    address, _ = tcp_cluster
    db = pdbq.connect()
    db.execute(BLOCKED_CLUSTER_SQL)
    q = "SELECT e.id, MAP(e) AS c FROM e ORDER BY e.id USING ANNEAL WITH (workers = 2, rounds = 3, seed = 4{})"
    local = db.execute(q.format(""))
    expected = local.fetchall()
    assert local.diagnostics["dask"]["source"] == "files"
    _no_files(monkeypatch)
    res = db.execute(q.format(f", scheduler = '{address}'"))
    assert res.fetchall() == expected
    d = res.diagnostics["dask"]
    assert d["mode"] == "sharded" and d["source"] == "shipped" and d["scheduler"] == address
    assert d["bytes_shipped"] > 0 and d["resent"] == 0


def test_payloads_lost_with_their_worker_are_sent_again(blocked, tcp_cluster, monkeypatch):
    """After round 1 every shard and its shipped rows are gone (as if the workers had died): the
    rows are sent again, the shards rebuilt and replayed, and the clustering is the undisturbed one."""
    _, client = tcp_cluster
    data, src = blocked
    cfg = DistributedConfig(workers=2, rounds=3, steps_per_round=10_000, greedy_rounds=1, seed=3)
    first = shards.resolve_sharded(src, cfg, client=client)
    _no_files(monkeypatch)
    shipped = shards.resolve_sharded(src, cfg, client=client, ship=True)
    assert np.array_equal(shipped.labels, first.labels) and shipped.resent == 0

    def lose_everything(stats, client):
        if stats.round == 1:
            with shards._LOCK:
                shards._HELD.clear()
            lost = [distributed.Future(k, client) for k in list(client.futures) if str(k).startswith("ShardPayload")]
            assert len(lost) == 2
            client.cancel(lost, force=True)

    again = shards.resolve_sharded(src, cfg, client=client, ship=True, on_round=lose_everything)
    assert np.array_equal(again.labels, first.labels)
    assert again.resent == 2 and again.rounds[2].replayed == 2


@pytest.fixture(scope="module")
def one_block(tmp_path_factory):
    """One name block of 400 mentions split over two shards: entities change shards."""
    data = person_x(400, per_name=400, entities_per_name=(6, 6), noise=0.5, seed=3)
    return data, shards.write_pairs(str(tmp_path_factory.mktemp("one_block_shipped")), data.graph, data.name)


def test_split_shards_shipped_are_the_split_shards_read_from_files(one_block, tcp_cluster, monkeypatch):
    """A group split over two shards, its cut pairs shipped to both: the same moves between shards
    and the same clustering as when the workers read the files; after every shard and its rows
    are lost, the replay takes the rows of the entities that arrived, sent from here."""
    _, client = tcp_cluster
    _, src = one_block
    cfg = DistributedConfig(workers=2, rounds=4, greedy_rounds=1, steps_per_round=1000, seed=2)
    files = shards.resolve_sharded(src, cfg, client=client)
    assert files.plan.cut_pairs > 0 and sum(r.moved for r in files.rounds[:2]) > 0
    _no_files(monkeypatch)
    shipped = shards.resolve_sharded(src, cfg, client=client, ship=True)
    assert np.array_equal(shipped.labels, files.labels)
    assert [r.moved for r in shipped.rounds] == [r.moved for r in files.rounds]

    def lose_everything(stats, client):
        if stats.round == 2:
            with shards._LOCK:
                shards._HELD.clear()
            lost = [distributed.Future(k, client) for k in list(client.futures) if str(k).startswith("ShardPayload")]
            client.cancel(lost, force=True)

    again = shards.resolve_sharded(src, cfg, client=client, ship=True, on_round=lose_everything)
    assert np.array_equal(again.labels, files.labels) and again.resent >= 2 and again.rounds[3].replayed > 0
