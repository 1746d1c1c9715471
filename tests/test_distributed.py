"""Map/redistribute coreference rounds on Dask (seed 001): partitions, determinism, faults."""

from __future__ import annotations


import numpy as np
import pytest
from conftest import BLOCKED_CLUSTER_SQL, NAMES_CLUSTER_SQL, kill_busy_worker
from hypothesis import given, settings
from hypothesis import strategies as st

from pdbq.coref.contract import contract, subgraph, within
from pdbq.coref.layout import pair_graph
from pdbq.coref.metrics import b_cubed
from pdbq.coref.personx import person_x
from pdbq.distributed import DistributedConfig, resolve_distributed
from pdbq.distributed.runner import check_partition, deal_entities
from pdbq.distributed.tasks import PartitionResult, RoundTask, run_partition
from pdbq.errors import InferenceError, OptionError
from pdbq.inference.coreference.entity_moves import partition_score
from pdbq.inference.coreference.hierarchy import HierarchyConfig, resolve_hierarchical

distributed = pytest.importorskip("distributed")

EASY = person_x(1_200, per_name=60, noise=0.5, seed=4)


def _cfg(**kw):
    base = dict(workers=2, rounds=4, steps_per_round=15_000, greedy_rounds=2, seed=3)
    base.update(kw)
    return DistributedConfig(**base)


@pytest.fixture(scope="module")
def inprocess_client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0")
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


# ------------------------------------------------------------------------------- dealing


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 7), min_size=1, max_size=60), st.integers(1, 5), st.integers(0, 10**6), st.booleans())
def test_deal_keeps_entities_and_groups_whole(labels, workers, seed, grouped):
    labels = np.array(labels)
    groups = labels // 3 if grouped else None
    parts = deal_entities(labels, workers, np.random.default_rng(seed), groups)
    assert len(parts) == workers
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(labels.size))
    where = np.empty(labels.size, np.int64)
    for p, part in enumerate(parts):
        where[part] = p
    unit = labels if groups is None else groups
    for u in np.unique(unit):
        assert np.unique(where[unit == u]).size == 1


def test_check_partition_refuses_lost_or_duplicated_mentions():
    ok = [np.array([0, 2]), np.array([1])]
    res = [PartitionResult(0, np.array([0, 1]), np.zeros(4, np.int64), 0.0), PartitionResult(1, np.array([0]), np.zeros(4, np.int64), 0.0)]
    check_partition(3, ok, res)
    with pytest.raises(InferenceError, match="lost or duplicated mention 1"):
        check_partition(3, [np.array([0, 2]), np.array([2])], res)
    with pytest.raises(InferenceError, match="partition 0 returned 2 labels for 1 mentions"):
        check_partition(3, [np.array([0]), np.array([1, 2])], res)


# ------------------------------------------------------------------------------- derived graphs


def test_subgraph_within_and_contract_keep_the_score():
    g = EASY.graph
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 40, size=g.n_mentions)
    sub = np.sort(rng.choice(g.n_mentions, size=300, replace=False))
    lg, _ = subgraph(g, sub)
    local = labels[sub]
    assert partition_score(lg, local) == pytest.approx(partition_score(g, np.where(np.isin(np.arange(g.n_mentions), sub), labels, -1 - np.arange(g.n_mentions))))
    groups = rng.integers(0, 10, size=g.n_mentions)
    joined = labels * 10 + groups  # sub-groups nested in labels
    cg, _ = contract(g, np.unique(joined, return_inverse=True)[1])
    top = np.unique(joined, return_inverse=True)[0] // 10
    # ψ over mentions = ψ inside the groups + ψ of the contracted graph over the group labels
    inside = partition_score(within(g, joined)[0], joined)
    assert partition_score(g, labels) == pytest.approx(inside + partition_score(cg, top))


def test_hierarchical_map_recovers_planted_entities():
    res = resolve_hierarchical(EASY.graph, HierarchyConfig(rounds=8, seed=2))
    assert b_cubed(res.labels, EASY.truth).f1 > 0.95
    assert res.history and res.history[-1][0] == res.factor_evaluations


# ------------------------------------------------------------------------------- runs


def test_partition_round_keeps_entities_local():
    task = RoundTask(0, 0, np.arange(0, 1_200, 2), np.arange(0, 1_200, 2), 5_000, 1.0, 1, False, 0.5, 0.1, 0.1)
    a = run_partition(EASY.graph, task)
    b = run_partition(EASY.graph, task)
    assert np.array_equal(a.labels, b.labels)  # a re-run (after a worker died) gives the same labels
    assert a.labels.shape == (600,) and a.labels.max() < 600 and a.counters[1] == 5_000


def test_in_process_run_is_valid_deterministic_and_accurate(inprocess_client):
    runs = [resolve_distributed(EASY.graph, _cfg(), client=inprocess_client) for _ in range(2)]
    assert np.array_equal(runs[0].labels, runs[1].labels)
    labels = runs[0].labels
    assert labels.shape == (EASY.graph.n_mentions,) and np.all(labels <= np.arange(labels.size))
    assert b_cubed(labels, EASY.truth).f1 > 0.95
    assert runs[0].log_score == pytest.approx(float(partition_score(EASY.graph, labels)))
    assert len(runs[0].rounds) >= 4 and all(r.wall > 0 for r in runs[0].rounds)


def test_one_and_two_partitions_agree_and_random_redistribution_works(inprocess_client):
    one = resolve_distributed(EASY.graph, _cfg(workers=1, steps_per_round=30_000), client=inprocess_client)
    two = resolve_distributed(EASY.graph, _cfg(redistribution="random"), client=inprocess_client)
    hier = resolve_distributed(EASY.graph, _cfg(hierarchy=True), client=inprocess_client)
    f = [b_cubed(r.labels, EASY.truth).f1 for r in (one, two, hier)]
    assert min(f) > 0.93 and max(f) - min(f) < 0.04


def test_bad_options_are_option_errors():
    for bad in (dict(workers=0), dict(redistribution="nearest"), dict(steps_per_round=1.5), dict(min_temperature=5.0)):
        with pytest.raises(OptionError):
            resolve_distributed(EASY.graph, _cfg(**bad))


@pytest.mark.slow
def test_process_cluster_same_answer_and_survives_a_killed_worker(inprocess_client, process_client):
    """A worker killed mid-round: the round's task is re-run elsewhere and the answer is the one
    of an undisturbed run (and of the in-process cluster) for the same seed and partitions."""
    data = person_x(4_000, per_name=80, noise=0.5, seed=5)
    cfg = _cfg(rounds=2, greedy_rounds=0, steps_per_round=150_000)
    reference = resolve_distributed(data.graph, cfg, client=inprocess_client)
    t, killed = kill_busy_worker(process_client, "-r1-t", delay=0.05)  # a round-1 partition
    res = resolve_distributed(data.graph, cfg, client=process_client)
    t.join(timeout=1)
    assert killed, "no worker was busy with a round when the kill fired"
    assert np.array_equal(res.labels, reference.labels)


def test_sql_map_query_runs_distributed_rounds():
    import pdbq

    db = pdbq.connect()
    db.execute(NAMES_CLUSTER_SQL)
    q = "SELECT e.id, MAP(e) AS c FROM e ORDER BY e.id USING ANNEAL WITH (workers = 2, rounds = 3, seed = 4)"
    first = db.execute(q).fetchall()
    assert first == db.execute(q).fetchall() == [(1, 1), (2, 1), (3, 3), (4, 3), (5, 5)]
    for bad in ("workers = 0", "rounds = 'many'", "scheduler = 3"):
        with pytest.raises(OptionError):
            db.execute(f"SELECT MAP(e) FROM e USING ANNEAL WITH ({bad})")



def test_sql_map_over_separate_components_runs_sharded_rounds():
    """Candidate pairs inside six blocks: the SQL MAP query runs the sharded rounds (the workers
    build their shards from files), finds the in-process clustering, and says so; one component
    (every pair) is split over the two shards and still finds it."""
    import pdbq

    db = pdbq.connect()
    db.execute(BLOCKED_CLUSTER_SQL)
    q = "SELECT e.id, MAP(e) AS c FROM e ORDER BY e.id USING ANNEAL WITH ({})"
    here = db.execute(q.format("seed = 4")).fetchall()
    res = db.execute(q.format("workers = 2, rounds = 3, seed = 4"))
    rows = res.fetchall()
    d = res.diagnostics
    assert d["dask"]["mode"] == "sharded" and d["dask"]["groups"] == 2 and d["dask"]["shard_mentions_max"] == 18
    assert rows == here and len({c for _, c in rows}) == 12  # first name x (smith/smyth | jones)
    assert d["e.proposals"] > 0 and d["e.factor_evaluations"] > 0
    from pdbq.shell.diag import format_diagnostics

    assert "sharded rounds" in format_diagnostics(d)
    again = db.execute(q.format("workers = 2, rounds = 3, seed = 4"))
    assert again.fetchall() == rows
    one = pdbq.connect()
    one.execute(NAMES_CLUSTER_SQL)
    q1 = "SELECT e.id, MAP(e) AS c FROM e ORDER BY e.id USING ANNEAL WITH ({})"
    split = one.execute(q1.format("workers = 2, rounds = 3, seed = 4"))
    d1 = split.diagnostics["dask"]
    assert d1["mode"] == "sharded" and d1["split_groups"] == 1 and d1["cut_pairs"] > 0
    assert split.fetchall() == one.execute(q1.format("seed = 4")).fetchall()


def test_affine_groups_join_entities_linked_by_attractive_pairs_and_cap_their_size():
    from pdbq.coref.contract import affine_groups

    # 0-1 strongly linked, 2-3 weakly (score -0.2: joined only with shift > 0.2), 4 alone
    g = pair_graph(5, np.array([0, 2, 1]), np.array([1, 3, 4]), np.array([1.0, -0.2, -0.9]))
    groups, reads = affine_groups(g, np.arange(5), 0.3)
    assert reads == 3
    assert groups[0] == groups[1] and groups[2] == groups[3] and len({groups[0], groups[2], groups[4]}) == 3
    tight, _ = affine_groups(g, np.arange(5), 0.1)
    assert tight[2] != tight[3]
    capped, _ = affine_groups(g, np.arange(5), 0.3, max_size=1)
    assert len(set(capped.tolist())) == 5  # groups over the cap fall back to their entities
    ent, _ = affine_groups(g, np.array([0, 0, 2, 2, 0]), 0.0)
    assert ent[0] == ent[1] == ent[4]  # a group is constant over each entity


def test_super_mcmc_redistribution(inprocess_client):
    res = resolve_distributed(EASY.graph, _cfg(redistribution="super_mcmc"), client=inprocess_client)
    assert b_cubed(res.labels, EASY.truth).f1 > 0.93
