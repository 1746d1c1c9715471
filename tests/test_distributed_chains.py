"""Chains of marginal queries in groups and on Dask workers: pooled exactly as one in-process
run, refused where they cannot be, visible in the diagnostics, surviving a killed worker."""

from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np
import pytest
from conftest import MOVIES_MODEL, MOVIES_SQL, NAMES_CLUSTER_SQL, kill_busy_worker
from exact_graphs import random_graph, within

from pdbq.errors import InferenceError, OptionError
from pdbq.graph.builder import GraphBuilder
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.inference.mcmc.config import GibbsConfig, MixingConfig
from pdbq.inference.mcmc.gibbs import run_gibbs
from pdbq.inference.mcmc.pooling import chain_groups, pool_groups
from pdbq.language.nodes import FactorFunction as F
from pdbq.language.nodes import Semantics as S

SLACK = 10.0  # seconds beyond a time limit that a loaded 2-core machine may need (an unheld limit runs for ever)
STALL = 6.0  # seconds a stalled worker sleeps: a query that waited for it would take this long


def _chain(n: int, weight: float = 0.8):
    """x0 = x1 = … = x(n-1) softly, plus a field on x0: slow enough mixing for R-hat to matter."""
    b = GraphBuilder()
    xs = [b.add_variable() for _ in range(n)]
    w = b.add_weight(weight)
    for i in range(n - 1):
        b.add_factor(F.EQUAL, [xs[i], xs[i + 1]], weight=w)
    b.add_factor(F.ISTRUE, [xs[0]], weight=b.add_weight(0.4))
    return b.build()


def _groups(g, targets, cfg, cuts, **kw):
    return [run_gibbs(g, targets, dataclasses.replace(cfg, chains=n, first_chain=f, total_chains=cfg.chains), **kw)
            for f, n in cuts]


def _same(a, b) -> bool:
    return all(np.array_equal(getattr(a, k), getattr(b, k), equal_nan=True)
               for k in ("marginals", "stderr", "rhat", "ess")) and a.warnings == b.warnings and a.steps == b.steps


# ------------------------------------------------------------------------------- pooling (no Dask)


@pytest.mark.parametrize("cuts", [[(0, 2), (2, 2)], [(0, 1), (1, 3)], [(0, 1), (1, 1), (2, 1), (3, 1)]])
def test_chain_groups_pool_into_the_in_process_answer_bit_for_bit(cuts):
    g = random_graph(np.random.default_rng(7), F.EQUAL, S.LINEAR, categorical=True, evidence=True)
    targets = np.flatnonzero(g.evidence < 0)[:5]
    cfg = GibbsConfig(steps=6_000, chains=4, seed=11, threads=1)
    whole = run_gibbs(g, targets, cfg)
    pooled = pool_groups(g, cfg, _groups(g, targets, cfg, cuts))
    assert _same(pooled, whole)
    assert pooled.chains == 4 and pooled.batches.sums.shape[0] == 4


def test_groups_that_share_streams_do_not_pool_into_the_answer():
    """The check above can fail: two groups both claiming chains 0-1 repeat the same chains."""
    g = random_graph(np.random.default_rng(7), F.EQUAL, S.LINEAR, categorical=True, evidence=True)
    targets = np.flatnonzero(g.evidence < 0)[:5]
    cfg = GibbsConfig(steps=6_000, chains=4, seed=11, threads=1)
    wrong = [run_gibbs(g, targets, dataclasses.replace(cfg, chains=2, total_chains=4)) for _ in range(2)]
    assert not _same(pool_groups(g, cfg, wrong), run_gibbs(g, targets, cfg))


def test_pooled_estimates_of_a_selection_run_and_of_low_mixing_warn_as_one_run():
    g = _chain(40, weight=2.5)  # strong couplings: R-hat flags the dispersed starts
    targets = np.array([0, 39])
    sites = np.arange(40, dtype=np.int32)
    prob = np.full(40, 1.0)
    alias = np.arange(40, dtype=np.int32)
    cfg = GibbsConfig(steps=2_000, chains=4, seed=2, threads=1)
    whole = run_gibbs(g, targets, cfg, sites=sites, selection=(prob, alias))
    pooled = pool_groups(g, cfg, _groups(g, targets, cfg, chain_groups(4, 2), sites=sites, selection=(prob, alias)))
    assert _same(pooled, whole)
    assert any("R-hat" in w for w in pooled.warnings)


def test_chain_groups_and_bad_pools_are_refused():
    assert chain_groups(5, 2) == [(0, 2), (2, 3)]
    with pytest.raises(InferenceError, match="cannot be cut"):
        chain_groups(2, 3)
    g = _chain(5)
    cfg = GibbsConfig(steps=2_000, chains=2, seed=1, threads=1)
    a = run_gibbs(g, [0], dataclasses.replace(cfg, chains=1, total_chains=2))
    b = run_gibbs(g, [0], dataclasses.replace(cfg, chains=1, first_chain=1, total_chains=2, steps=4_000))
    with pytest.raises(InferenceError, match="different batches"):
        pool_groups(g, cfg, [a, b])
    with pytest.raises(OptionError):
        GibbsConfig(chains=2, first_chain=3, total_chains=4).check()


# ------------------------------------------------------------------------------- on Dask

needs_dask = pytest.mark.skipif(importlib.util.find_spec("distributed") is None,
                                reason="needs Dask: pip install 'pdbq[distributed]'")


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0")
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def test_chains_on_dask_are_the_in_process_chains(client):
    from pdbq.distributed.chains import run_chains

    g = _chain(30)
    sites = np.arange(30, dtype=np.int32)
    cfg = GibbsConfig(steps=20_000, chains=4, seed=5, threads=1)
    whole = run_gibbs(g, [0, 15, 29], cfg, sites=sites)
    pooled, parts, run = run_chains(g, np.array([0, 15, 29]), cfg, workers=2, sites=sites, client=client)
    assert _same(pooled, whole) and len(parts) == 2
    assert (run.groups, run.chains, run.dask_workers, run.rounds, run.reruns) == (2, 4, 2, 1, 0)
    assert 0 < run.compute_max <= run.compute_sum and run.bytes_scattered > 0 and run.bytes_gathered > 0


def test_tempered_chains_on_dask_match_the_exact_marginals(client):
    from pdbq.distributed.chains import run_chains

    g = random_graph(np.random.default_rng(3), F.OR, S.LINEAR, categorical=False, evidence=True)
    exact = exact_marginals(g).marginals
    free = np.flatnonzero(g.evidence < 0)
    cfg = GibbsConfig(steps=20_000, chains=4, seed=8, threads=1)
    pooled, parts, _ = run_chains(g, free, cfg, workers=2, sites=free.astype(np.int32),
                                  mixing=MixingConfig(tempering=3).check(), client=client)
    ok, err = within(pooled, exact[free])
    assert ok, err
    assert pooled.betas.shape == (3,)


def _or_graph():
    return random_graph(np.random.default_rng(3), F.OR, S.LINEAR, categorical=False, evidence=True)


@pytest.mark.parametrize("moves", [dict(tempering=3), dict(tempering=2, jumps=4), dict(blocks="auto"),
                                   dict(clusters=True), dict(tempering=2, jumps=4, blocks="auto")])
def test_moves_on_dask_are_the_in_process_moves_bit_for_bit(client, moves):
    """A fixed-length run with each move family: the groups draw the moves' streams of their own
    chains of the whole run, and the ladder and mode pool are adapted from all chains between
    burn-in rounds, so estimates, errors, warnings and what the moves did are the in-process ones."""
    from pdbq.distributed.chains import run_chains
    from pdbq.inference.moves.mixing import run_mixing

    g = _or_graph()
    free = np.flatnonzero(g.evidence < 0)
    cfg = GibbsConfig(steps=4_000, chains=4, seed=8, threads=1)
    mixing = MixingConfig(**moves).check()
    here = run_mixing(g, free, cfg, mixing, sites=free.astype(np.int32))
    pooled, _, run = run_chains(g, free, cfg, workers=2, sites=free.astype(np.int32), mixing=mixing, client=client)
    assert _same(pooled, here) and pooled.burn_in == here.burn_in
    for k in ("betas", "swap_rates", "n_blocks", "cluster_bonds", "jump_modes", "jump_pairs", "jump_rate"):
        assert np.array_equal(getattr(pooled, k), getattr(here, k), equal_nan=True), k
    assert (run.rounds > 1) == ("tempering" in moves)  # adapting moves go segment by segment
    other = run_mixing(g, free, dataclasses.replace(cfg, seed=9), mixing, sites=free.astype(np.int32))
    assert not _same(other, here)  # the comparison can fail


def test_cutset_sweeps_on_dask_are_the_in_process_sweeps_bit_for_bit(client):
    from pdbq.distributed.chains import run_chains
    from pdbq.inference.moves.cutset import choose_cutset, cutset_plan, cutset_result, run_cutset

    g = _grid(4)
    cs = choose_cutset(g, max_table=8)
    targets = np.array([0, 5, 15])
    cfg = GibbsConfig(steps=3_000, chains=4, seed=3, threads=1)
    here = run_cutset(g, targets, cfg, cutset=cs)
    plan = cutset_plan(g, targets, cs)
    r, _, _ = run_chains(g, plan.sampled, cfg, workers=3, sites=np.arange(g.n_vars, dtype=np.int32), cutset=cs,
                         client=client)
    assert _same(cutset_result(g, plan, r), here)


def test_tempered_groups_lost_in_burn_in_replay_the_clients_ladders(client):
    """Both groups lost after the second burn-in round: rebuilt, they ask for the client's
    adaptations, replay burn-in with them and end as the in-process run."""
    import pdbq.distributed.chain_groups as cg
    from pdbq.inference.moves.mixing import run_mixing

    g = _or_graph()
    free = np.flatnonzero(g.evidence < 0)
    cfg = GibbsConfig(steps=4_000, chains=4, seed=8, threads=1)
    mixing = MixingConfig(tempering=3, jumps=4).check()
    here = run_mixing(g, free, cfg, mixing, sites=free.astype(np.int32))
    burned = []

    def lose_groups(info):
        burned.append(info.burn_in)
        if len(burned) == 2:
            with cg._LOCK:
                cg._HELD.clear()

    pooled, _, run = _rounds(g, free, cfg, client, mixing=mixing, on_round=lose_groups)
    assert burned[:2] == [True, True] and run.replayed > 0
    assert _same(pooled, here) and np.array_equal(pooled.betas, here.betas)


# ------------------------------------------------------------------------------- budget-governed runs on Dask


def _rounds(g, targets, cfg, client, **kw):
    from pdbq.distributed.chains import run_chains

    return run_chains(g, np.asarray(targets), cfg, workers=2, sites=np.flatnonzero(g.evidence < 0).astype(np.int32),
                      client=client, **kw)


def test_a_tolerance_stopped_run_on_dask_is_the_in_process_run(client):
    """The stopping rule on the pooled rounds between segments stops where one process stops:
    same rounds, same estimates, errors, R-hat, trace, bit for bit."""
    g = _chain(30)
    cfg = GibbsConfig(chains=4, seed=5, threads=1, tolerance=0.03)
    whole = run_gibbs(g, [0, 15, 29], cfg, sites=np.arange(30, dtype=np.int32))
    pooled, _, run = _rounds(g, [0, 15, 29], cfg, client)
    assert _same(pooled, whole) and pooled.burn_in == whole.burn_in and pooled.batches.stopped_by == "tolerance"
    assert np.array_equal(pooled.trace.estimates, whole.trace.estimates)
    assert run.rounds > 2 and run.groups == 2 and not run.late and "segment(s)" in run.describe()
    other, _, _ = _rounds(g, [0, 15, 29], dataclasses.replace(cfg, seed=6), client)
    assert not _same(other, whole)  # the check can fail: another seed is another run


def test_groups_lost_between_segments_are_rebuilt_and_replayed(client):
    import pdbq.distributed.chain_groups as cg

    g = _chain(30)
    cfg = GibbsConfig(chains=4, seed=5, threads=1, tolerance=0.03)
    first, _, _ = _rounds(g, [0, 15, 29], cfg, client)
    booked = []

    def lose_groups(info):
        booked.append(info.steps)
        if len(booked) == 17:  # as if both workers had died after the first check
            with cg._LOCK:
                cg._HELD.clear()

    again, _, run = _rounds(g, [0, 15, 29], cfg, client, on_round=lose_groups)
    assert _same(again, first) and run.replayed > 0
    assert not cg._HELD  # released at the end


def test_a_time_limited_run_on_dask_stops_in_time_and_says_so(client):
    g = random_graph(np.random.default_rng(3), F.OR, S.LINEAR, categorical=False, evidence=True)
    free = np.flatnonzero(g.evidence < 0)
    exact = exact_marginals(g).marginals[free]
    cfg = GibbsConfig(chains=4, seed=8, threads=1, tolerance=1e-6, time_limit=0.6)
    import time

    t = time.perf_counter()
    r, _, run = _rounds(g, free, cfg, client)
    # held: without the limit a tolerance of 1e-6 runs for ever; the slack is for a busy machine
    assert time.perf_counter() - t < 0.6 + SLACK
    assert r.batches.stopped_by == "time" and any("stopped by the time limit" in w for w in r.warnings)
    ok, err = within(r, exact)
    assert ok, err
    # a tolerance that does not stop the run (AUTO's domain blocks): segments double, as without one
    easy = dataclasses.replace(cfg, tolerance=0.5, tolerance_stops=False, time_limit=0.4)
    r2, _, run2 = _rounds(g, free, easy, client)
    assert r2.batches.stopped_by == "time" and run2.rounds < 20


def test_workers_late_for_the_deadline_are_left_behind(client, monkeypatch):
    """A segment that has not come back by the deadline (plus the grace) is cancelled: the answer
    comes from the rounds booked before, flagged, and the query does not wait for the worker."""
    import time

    import pdbq.distributed.chain_groups as cg

    keep = cg._keep

    def stuck(group, lengths, stop_at):
        if group.kept >= 16 and group.run.config.first_chain == 2:
            time.sleep(STALL)  # a worker that stalls (swapping, a long GC, a noisy neighbour)
        return keep(group, lengths, stop_at)

    monkeypatch.setattr(cg, "_keep", stuck)
    g = _chain(30)
    cfg = GibbsConfig(chains=4, seed=5, threads=1, tolerance=1e-6, time_limit=0.8)
    t = time.perf_counter()
    r, _, run = _rounds(g, [0, 15, 29], cfg, client)
    # not waited for: the query ends well before the stalled worker would have answered
    assert time.perf_counter() - t < 0.8 + STALL - 1.5
    assert run.late and r.steps > 0 and any("had not answered" in w for w in r.warnings)
    assert np.all(np.abs(r.marginals[:, 1] - 0.5) < 0.45)  # an answer from what was booked, not NaN
    end = time.perf_counter() + 3
    while time.perf_counter() < end and not cg._RELEASED:
        time.sleep(0.05)
    time.sleep(STALL + 0.1)  # the stalled segment ends: its group is dropped, not kept for nobody
    assert not cg._HELD


def test_tempered_chains_stopped_by_tolerance_on_dask_match_the_exact_marginals(client):
    g = random_graph(np.random.default_rng(3), F.OR, S.LINEAR, categorical=False, evidence=True)
    free = np.flatnonzero(g.evidence < 0)
    cfg = GibbsConfig(chains=4, seed=8, threads=1, tolerance=0.03, time_limit=20)
    r, _, _ = _rounds(g, free, cfg, client, mixing=MixingConfig(tempering=3).check())
    ok, err = within(r, exact_marginals(g).marginals[free])
    assert ok, err
    assert r.betas.shape == (3,) and r.batches.stopped_by == "tolerance"


def _grid(side: int, weight: float = 0.6):
    b = GraphBuilder()
    xs = [b.add_variable() for _ in range(side * side)]
    w = b.add_weight(weight)
    for i in range(side):
        for j in range(side):
            if j + 1 < side:
                b.add_factor(F.EQUAL, [xs[i * side + j], xs[i * side + j + 1]], weight=w)
            if i + 1 < side:
                b.add_factor(F.EQUAL, [xs[i * side + j], xs[(i + 1) * side + j]], weight=w)
    b.add_factor(F.ISTRUE, [xs[0]], weight=b.add_weight(0.3))
    return b.build()


@pytest.mark.parametrize("budget", [dict(steps=3_000), dict(tolerance=0.02)])
def test_cutset_sampling_on_dask_matches_the_exact_marginals(client, budget):
    """Cutset sweeps in chain groups (their sweep streams are the group's, as tempering's ladder
    is): the exact answer within the errors, the same answer again for the same seed."""
    from pdbq.distributed.chains import run_chains
    from pdbq.inference.moves.cutset import choose_cutset, cutset_plan, cutset_result

    g = _grid(4)
    cs = choose_cutset(g, max_table=8)
    assert cs.size > 0
    targets = np.array([0, 5, 15])
    cfg = GibbsConfig(chains=4, seed=3, threads=1, **budget)
    plan = cutset_plan(g, targets, cs)

    def on_dask():
        r, _, run = run_chains(g, plan.sampled, cfg, workers=2, sites=np.arange(g.n_vars, dtype=np.int32),
                               cutset=cs, client=client)
        return cutset_result(g, plan, r), run

    pooled, run = on_dask()
    assert (run.rounds == 1) == ("steps" in budget) and pooled.cutset_size == cs.size and pooled.sweeps > 0
    ok, err = within(pooled, exact_marginals(g).marginals[targets])
    assert ok, err
    assert _same(on_dask()[0], pooled)


def _walled_chain(n: int):
    """x0 = x1 = … by hard TABLE walls, and a field on x0: plain chains from dispersed starts
    never cross, so AUTO's pilot does not mix and AUTO turns to its moves."""
    b = GraphBuilder()
    xs = [b.add_variable() for _ in range(n)]
    for i in range(n - 1):
        b.add_factor(F.TABLE, [xs[i], xs[i + 1]], table=[0.0, float("-inf"), float("-inf"), 0.0])
    b.add_factor(F.ISTRUE, [xs[0]], weight=b.add_weight(0.4))
    return b.build()


def test_auto_runs_its_pilot_and_its_moves_on_dask(client):
    from pdbq.inference.moves.move_choice import choose_moves, run_auto

    g = _walled_chain(12)
    exact = exact_marginals(g).marginals[[0, 11]]
    runs = []

    def chains(graph, targets, cfg, mixing=None, blocks=None, sweeps=1, deadline=None, **kw):
        r, _, run = _rounds(graph, targets, cfg, client, mixing=mixing, blocks=blocks, sweeps=sweeps, deadline=deadline)
        runs.append((mixing, run))
        return r

    # the pilot gets a quarter of the time limit, and stuck chains use all of it
    cfg = GibbsConfig(chains=4, seed=2, threads=1, tolerance=0.03, time_limit=2)
    moves = dataclasses.replace(choose_moves(g).without_cutset(), static=False)  # not one static block: the block moves
    r, why = run_auto(g, np.array([0, 11]), cfg, moves, chains=chains)
    assert "did not mix" in why and len(runs) == 2 and runs[0][0] is None and runs[1][0].active
    ok, err = within(r, exact)
    assert ok, err
    assert r.n_blocks > 0  # the chosen block moves ran in the groups on the workers


def test_auto_whose_moves_keep_no_sample_answers_from_its_pilot():
    """The time limit can end the run with the moves before it keeps a sample, and a caller's
    chains (Dask's rounds) then give back a plain result: AUTO answers from its pilot and says
    why (this raised AttributeError on a loaded machine)."""
    import time

    from pdbq.inference.moves.move_choice import choose_moves, run_auto

    g = _walled_chain(12)

    def chains(graph, targets, cfg, mixing=None, blocks=None, sweeps=1, deadline=None, **kw):
        if mixing is None:  # the pilot
            return run_gibbs(graph, targets, cfg, deadline=deadline, **kw)
        return run_gibbs(graph, targets, cfg, deadline=time.perf_counter(), **kw)  # no time left: no sample

    cfg = GibbsConfig(chains=4, seed=2, threads=1, steps=2_000)
    moves = dataclasses.replace(choose_moves(g).without_cutset(), static=False)
    r, why = run_auto(g, np.array([0, 11]), cfg, moves, chains=chains)
    assert "did not mix" in why and "kept no sample" in why, why
    assert r.steps > 0 and any("from the plain pilot" in w for w in r.warnings), r.warnings


@pytest.mark.parametrize("graph", ["walled", "grid"])
def test_auto_on_dask_is_auto_in_process_bit_for_bit(client, graph):
    """AUTO's pilot, its choice (exact blocks on hard walls, cluster moves on a strongly coupled
    grid) and its moves, run by chain groups on Dask at a fixed length: the in-process answer."""
    from pdbq.inference.moves.move_choice import choose_moves, run_auto

    g = _walled_chain(12) if graph == "walled" else _grid(6, weight=1.2)
    targets = np.array([0, 11])
    cfg = GibbsConfig(chains=4, seed=2, threads=1, steps=6_000)
    moves = dataclasses.replace(choose_moves(g), static=False)  # a graph this small fits one static block (below)
    here, why = run_auto(g, targets, cfg, moves)

    def chains(graph, targets, cfg, mixing=None, blocks=None, sweeps=1, deadline=None, **kw):
        return _rounds(graph, targets, cfg, client, mixing=mixing, blocks=blocks, sweeps=sweeps, deadline=deadline)[0]

    there, why_there = run_auto(g, targets, cfg, moves, chains=chains)
    assert ("block" if graph == "walled" else "cluster") in why and why_there == why
    assert _same(there, here)



def _on_dask(client):
    """`run_auto`'s ``chains`` hook: the pilot and the moves as chain groups on ``client``."""

    def chains(graph, targets, cfg, mixing=None, blocks=None, sweeps=1, deadline=None, domain=False, **kw):
        return _rounds(graph, targets, cfg, client, mixing=mixing, blocks=blocks, sweeps=sweeps, deadline=deadline,
                       domain=domain)[0]

    return chains

@pytest.mark.parametrize("budget", [dict(steps=60_000), dict(steps=2_000_000, tolerance=0.02)])
def test_auto_static_blocks_on_dask_are_auto_in_process_bit_for_bit(client, budget):
    """AUTO's static blocks (one exact block over every free variable, its upward pass made once,
    each draw a backward pass): the groups on Dask make the same pass from the blocks shipped from
    here and draw chain c's stream c: the in-process answer bit for bit, at a fixed length and
    stopped by the tolerance after the same rounds."""
    from pedigree_graphs import pedigree

    from pdbq.inference.moves.move_choice import choose_moves, run_auto

    g = pedigree(founders=4, generations=2, loci=3, seed=1).graph
    targets = np.flatnonzero(g.evidence < 0)
    cfg = GibbsConfig(chains=4, seed=1, threads=1, **budget)
    here, why = run_auto(g, targets, cfg, choose_moves(g))

    there, why_there = run_auto(g, targets, cfg, choose_moves(g), chains=_on_dask(client))
    assert "hold every free variable" in why
    # the reason names the measured pass and draw times, which differ from call to call
    assert why_there.split(": their upward")[0] == why.split(": their upward")[0]
    assert _same(there, here) and there.burn_in == here.burn_in
    assert there.batches.stopped_by == here.batches.stopped_by == ("tolerance" if "tolerance" in budget else "steps")


@pytest.mark.parametrize("budget", [dict(steps=40_000), dict(steps=400_000, tolerance=0.02)])
def test_auto_domain_chains_on_dask_are_auto_in_process_bit_for_bit(client, budget):
    """On an ordered model AUTO's pilot finds a patch that flips as one and runs whole-domain
    blocks estimated by their exact marginals (`domain_chains`); the groups on Dask run that
    very cycle, the blocks shipped from here: the in-process answer bit for bit, at a fixed
    length and stopped by the tolerance after the same rounds."""
    from test_domains import domain_grid

    from pdbq.inference.moves.move_choice import choose_moves, run_auto

    g = domain_grid(6, 4)
    targets = np.arange(g.n_vars)
    cfg = GibbsConfig(chains=4, seed=1, threads=1, **budget)
    here, why = run_auto(g, targets, cfg, choose_moves(g))

    there, why_there = run_auto(g, targets, cfg, choose_moves(g), chains=_on_dask(client))
    assert "hold each slow patch whole" in why and why_there == why
    assert _same(there, here) and there.burn_in == here.burn_in
    assert there.batches.stopped_by == here.batches.stopped_by == ("tolerance" if "tolerance" in budget else "steps")


@pytest.fixture(scope="module")
def movies():
    import pdbq

    db = pdbq.connect()
    db.execute(MOVIES_SQL)
    db.execute(MOVIES_MODEL)
    return db


@needs_dask
def test_sql_workers_give_the_in_process_answer_and_say_where_they_ran(movies):
    from pdbq.shell.diag import format_diagnostics

    db = movies
    q = "SELECT movie, PROB(is_popular) AS p, STDERR(is_popular) AS se FROM is_popular ORDER BY movie USING QAM WITH ({})"
    here = db.execute(q.format("sweeps = 2000, seed = 3")).fetchall()
    reports = []
    res = db.execute(q.format("sweeps = 2000, seed = 3, workers = 2"), progress=reports.append)
    assert res.fetchall() == here
    assert [p for p in reports if p.phase == "sampling"], "no progress report from the Dask run"
    d = res.diagnostics
    assert d["dask"]["groups"] == 2 and d["dask"]["chains"] == 4 and "chains on Dask" in d["method_reason"]
    assert "dask" in format_diagnostics(d)
    rows = dict(db.execute("EXPLAIN " + q.format("sweeps = 2000, seed = 3, workers = 2")).fetchall())
    assert "4 chains in 2 group(s)" in rows["runs on"]
    assert "this process" in dict(db.execute("EXPLAIN " + q.format("sweeps = 2000")).fetchall())["runs on"]
    auto = db.execute(q.replace("QAM", "AUTO").format("sweeps = 200, workers = 2"))
    assert auto.diagnostics["method"] == "EXACT" and "workers/scheduler unused" in auto.diagnostics["method_reason"]


@needs_dask
@pytest.mark.parametrize("moves", ["tempering = 3", "tempering = 2, jumps = 4", "blocks = 'auto'", "clusters = true"])
def test_sql_moves_on_dask_give_the_in_process_answer(movies, moves):
    q = ("SELECT movie, PROB(is_popular) AS p, STDERR(is_popular) AS se FROM is_popular ORDER BY movie "
         f"USING GIBBS WITH (sweeps = 300, seed = 3, {moves}{{}})")
    assert movies.execute(q.format(", workers = 2")).fetchall() == movies.execute(q.format("")).fetchall()


@needs_dask
def test_sql_auto_domain_chains_on_dask_give_the_in_process_answer():
    import pdbq
    from test_domains import GRID

    with pdbq.connect() as db:
        db.execute(GRID)  # an ordered grid whose corner patch flips as one
        q = ("SELECT v.r, v.c, PROB(v), STDERR(v) FROM x v ORDER BY v.r, v.c "
             "USING AUTO WITH (max_table = 2, seed = 1, steps = 40000{})")
        here = db.execute(q.format("")).fetchall()
        res = db.execute(q.format(", workers = 2"))
        assert res.fetchall() == here
        why = res.diagnostics["method_reason"]
        assert "hold each slow patch whole" in why and "chains on Dask" in why and res.diagnostics["dask"]["runs"] == 2


@needs_dask
def test_sql_tolerance_and_time_limit_run_on_dask_as_in_process(movies):
    q = "SELECT movie, PROB(is_popular) AS p, STDERR(is_popular) AS se FROM is_popular ORDER BY movie USING {} WITH ({})"
    here = movies.execute(q.format("QAM", "tolerance = 0.02, seed = 3")).fetchall()
    res = movies.execute(q.format("QAM", "tolerance = 0.02, seed = 3, workers = 2"))
    assert res.fetchall() == here and res.diagnostics["dask"]["rounds"] > 1
    rows = dict(movies.execute("EXPLAIN " + q.format("QAM", "tolerance = 0.02, workers = 2")).fetchall())
    assert "stopping rule (tolerance, time_limit) evaluated on all chains" in rows["runs on"]
    auto = movies.execute(q.format("AUTO", "exact_budget = 0.000001, time_limit = 3, seed = 3, workers = 2"))
    assert auto.diagnostics["method"] == "QAM" and "chains on Dask" in auto.diagnostics["method_reason"]
    assert "single-site moves" in auto.diagnostics["method_reason"]


def test_sql_scheduler_alone_runs_one_group_per_chain_on_that_cluster(movies, client):
    q = "SELECT movie, PROB(is_popular) AS p FROM is_popular ORDER BY movie USING GIBBS WITH ({})"
    here = movies.execute(q.format("sweeps = 1000, seed = 5")).fetchall()
    res = movies.execute(q.format(f"sweeps = 1000, seed = 5, scheduler = '{client.scheduler.address}'"))
    assert res.fetchall() == here
    d = res.diagnostics["dask"]
    assert (d["scheduler"], d["groups"], d["chains"], d["dask_workers"]) == (client.scheduler.address, 4, 4, 2)


@pytest.mark.parametrize("method, options, message", [
    ("EXACT", "steps = 5", "'steps' has no effect with USING EXACT"),
    ("EXACT", "workers = 2", "'workers' has no effect with USING EXACT"),
    ("GIBBS", "temperature = 2", "'temperature' has no effect with USING GIBBS"),
    ("QAM", "exact_budget = 3", "'exact_budget' has no effect with USING QAM"),
    ("GIBBS", "epsilon = 0.1", "'epsilon' has no effect with USING GIBBS"),
    ("GIBBS", "workers = 8, chains = 4, steps = 100", "at least as many chains"),
    ("GIBBS", "scheduler = 3, steps = 100", "must be an address"),
    ("GIBBS", "workers = 0, steps = 100", "'workers' must be >= 1"),
])
def test_options_without_effect_are_refused(movies, method, options, message):
    db = movies
    q = f"SELECT PROB(is_popular) FROM is_popular USING {method} WITH ({options})"
    for text in (q, "EXPLAIN " + q):
        with pytest.raises(OptionError, match=message):
            db.execute(text)


@needs_dask
def test_cluster_prob_refuses_dask_options_and_map_reports_the_run():
    import pdbq

    db = pdbq.connect()
    db.execute(NAMES_CLUSTER_SQL)
    for opt in ("workers = 2", "scheduler = 'tcp://127.0.0.1:1'", "rounds = 3"):
        with pytest.raises(OptionError, match="no effect on PROB/DIST"):
            db.execute(f"SELECT e.id, PROB(e = 1) FROM e USING GIBBS WITH ({opt})")
    res = db.execute("SELECT e.id, MAP(e) AS c FROM e USING ANNEAL WITH (workers = 2, rounds = 3, seed = 4)")
    d = res.diagnostics["dask"]
    assert d["groups"] == 2 and d["rounds"] >= 3 and d["dask_workers"] == 2 and d["scheduler"]
    # options of an in-process MAP that the distributed rounds would not read
    for opt in ("chains = 3", "greedy_sweeps = 4", "burn_in = 2", "subsample = 0.5"):
        with pytest.raises(OptionError, match=f"'{opt.split()[0]}' has no effect with workers, scheduler or rounds"):
            db.execute(f"SELECT e.id, MAP(e) FROM e USING ANNEAL WITH (rounds = 2, {opt})")
        db.execute(f"SELECT e.id, MAP(e) FROM e USING ANNEAL WITH ({opt})")  # read in this process


def test_python_dask_arguments_without_effect_are_refused(client):
    from pdbq.distributed import DistributedConfig
    from pdbq.distributed.chains import run_chains
    from pdbq.distributed.cluster import open_client

    with pytest.raises(OptionError, match="scheduler has no effect with a client"):
        open_client(client, "tcp://127.0.0.1:1", False, 2)
    with pytest.raises(OptionError, match="processes has no effect with a scheduler"):
        open_client(None, "tcp://127.0.0.1:1", True, 2)
    with pytest.raises(OptionError, match="'sub_bias' has no effect without hierarchy"):
        DistributedConfig(sub_bias=0.7).check()
    with pytest.raises(OptionError, match="'super_bias' has no effect with redistribution = 'random'"):
        DistributedConfig(redistribution="random", super_bias=0.1).check()
    DistributedConfig(hierarchy=True, sub_bias=0.7, super_bias=0.1).check()
    from pdbq.distributed import ShardSource, resolve_sharded

    with pytest.raises(OptionError, match="'super_bias'"):
        resolve_sharded(ShardSource("m.parquet", "p.parquet"), DistributedConfig(super_bias=0.1), client=client,
                        split=False)
    g = _chain(6)
    sites = np.arange(6, dtype=np.int32)
    cfg = GibbsConfig(steps=500, chains=2, threads=1)
    for kw, message in ((dict(sweeps=2), "sweeps"), (dict(blocks=[]), "blocks have no effect"),
                        (dict(cutset=object(), mixing=MixingConfig(tempering=2).check()), "mixing has no effect with cutset"),
                        (dict(domain=True), "need the whole-domain blocks"),
                        (dict(domain=True, blocks=[object()], mixing=MixingConfig(tempering=2).check()),
                         "neither mixing nor cutset")):
        with pytest.raises(OptionError, match=message):
            run_chains(g, np.array([0]), cfg, workers=2, sites=sites, client=client, **kw)


@pytest.mark.slow
def test_process_cluster_chains_survive_a_killed_worker(process_client):
    """A worker killed while it runs a chain group: Dask re-runs the group elsewhere and the
    answer is the undisturbed one (here: the in-process one, bit for bit)."""
    from pdbq.distributed.chains import run_chains

    g = _chain(400)
    sites = np.arange(400, dtype=np.int32)
    cfg = GibbsConfig(steps=400_000, chains=2, seed=9, threads=1)
    whole = run_gibbs(g, [0, 399], cfg, sites=sites)
    t, killed = kill_busy_worker(process_client, "pdbq-chains")
    pooled, _, run = run_chains(g, np.array([0, 399]), cfg, workers=2, sites=sites, client=process_client)
    t.join(timeout=1)
    assert killed, "no worker was running a chain group when the kill fired"
    assert _same(pooled, whole)


@pytest.mark.slow
def test_process_cluster_tolerance_run_survives_a_killed_worker(process_client):
    """A worker process killed (SIGKILL) in the middle of a run the tolerance ends: its group is
    rebuilt on the other worker and its history replayed, and the answer is the undisturbed one
    (the in-process one, bit for bit)."""
    import os
    import signal

    g = _chain(100)
    sites = np.arange(100, dtype=np.int32)
    cfg = GibbsConfig(chains=2, seed=9, threads=1, tolerance=0.03)
    whole = run_gibbs(g, [0, 99], cfg, sites=sites)
    pids = process_client.run(os.getpid)
    killed = []

    def held_groups():
        from pdbq.distributed import chain_groups

        return len(chain_groups._HELD)

    def kill_one(info):
        if not killed and info.steps >= 17 * 4096:  # after the first check: a history to replay
            # the scheduler may have put both groups on one worker: kill one that holds a group
            holding = [w for w, n in process_client.run(held_groups).items() if n > 0]
            if not holding:  # a segment is in flight: try again after the next round
                return
            victim = sorted(holding)[0]
            killed.append(victim)
            os.kill(pids[victim], signal.SIGKILL)

    pooled, _, run = _rounds(g, [0, 99], cfg, process_client, on_round=kill_one)
    assert killed and _same(pooled, whole) and run.replayed > 0


# ------------------------------------------------------------------------------- sharded coreference


@pytest.fixture(scope="module")
def blocked(tmp_path_factory):
    from pdbq.coref.personx import person_x
    from pdbq.distributed.shards import write_pairs

    data = person_x(2_400, per_name=60, noise=0.5, seed=4)
    return data, write_pairs(str(tmp_path_factory.mktemp("shards")), data.graph, data.name)


@needs_dask
def test_shard_plan_covers_every_block_once_and_balances_pairs(blocked):
    from pdbq.distributed.shards import plan_shards

    data, src = blocked
    plan = plan_shards(src, 3)
    blocks = np.concatenate(plan.blocks)
    assert np.array_equal(np.sort(blocks), np.unique(data.name))
    assert plan.mentions.sum() == data.name.size and plan.pairs.sum() == data.graph.n_pairs
    assert plan.pairs.max() - plan.pairs.min() <= np.bincount(data.name).max() ** 2  # within one block's pairs


@needs_dask
def test_sharded_rounds_are_deterministic_accurate_and_survive_lost_shards(blocked, client):
    import pdbq.distributed.shards as shards
    from pdbq.coref.metrics import b_cubed
    from pdbq.distributed import DistributedConfig

    data, src = blocked
    cfg = DistributedConfig(workers=2, rounds=4, steps_per_round=25_000, greedy_rounds=2, seed=3)
    first = shards.resolve_sharded(src, cfg, client=client)
    assert b_cubed(first.labels, data.truth).f1 > 0.95
    assert all(r.replayed == 0 for r in first.rounds) and not shards._HELD  # released at the end

    def lose_every_shard(stats, client):
        if stats.round == 1:  # as if the workers had died: their shards must be rebuilt and replayed
            with shards._LOCK:
                shards._HELD.clear()

    again = shards.resolve_sharded(src, cfg, client=client, on_round=lose_every_shard)
    assert np.array_equal(again.labels, first.labels)
    assert again.rounds[2].replayed == 2


@needs_dask
def test_blocks_linked_by_a_pair_share_a_shard(tmp_path, client):
    """A candidate pair across two blocks ties them to one shard, so its factor is never lost:
    the pair (1, 2) joins blocks {0, 1} and {2, 3}, and 0-1-2 end up as one entity (no group has
    more pairs than a shard's share, so none is split)."""
    from pdbq.coref.layout import pair_graph
    from pdbq.distributed import DistributedConfig
    from pdbq.distributed.shards import plan_shards, resolve_sharded, write_pairs

    g = pair_graph(7, np.array([0, 1, 4, 5]), np.array([1, 2, 5, 6]), np.array([1.0, 1.0, 1.0, 1.0]))
    src = write_pairs(str(tmp_path), g, np.array([0, 0, 1, 1, 2, 2, 2]))
    plan = plan_shards(src, 2)
    assert (plan.cross_pairs, plan.groups, plan.cut_pairs, plan.split_groups) == (1, 2, 0, 0)
    assert sorted(map(list, plan.blocks)) == [[0, 1], [2]]
    res = resolve_sharded(src, DistributedConfig(workers=2, rounds=2, steps_per_round=200, seed=1), client=client)
    assert res.labels.tolist() == [0, 0, 0, 3, 4, 4, 4]


@pytest.mark.slow
def test_process_cluster_shards_survive_a_killed_worker(blocked, client, process_client):
    """A worker killed mid-round, the shards' rows shipped to the workers (`shard_shipping`): the
    rows it held are lost with it and sent again, its shard is rebuilt from them and replayed on
    the other worker, and the clustering is the undisturbed one (here: the in-process cluster's,
    whose workers read the files; the lost-shard replay from files is the test above)."""
    from pdbq.distributed import DistributedConfig
    from pdbq.distributed.shards import resolve_sharded

    _, src = blocked
    cfg = DistributedConfig(workers=2, rounds=2, steps_per_round=30_000, greedy_rounds=0, seed=5)
    reference = resolve_sharded(src, cfg, client=client)
    t, killed = kill_busy_worker(process_client, "-r1-t", delay=0.05)  # in round 1: a replay is needed
    res = resolve_sharded(src, cfg, client=process_client, ship=True)
    t.join(timeout=1)
    assert killed, "no worker was running a shard round when the kill fired"
    assert np.array_equal(res.labels, reference.labels) and res.resent >= 1
    # the killed worker's shard was rebuilt and replayed (in round 1, or when its labels were read
    # if the kill came just after round 1's result: no round stat shows that one)
    assert killed[0] not in process_client.scheduler_info()["workers"]


# ------------------------------------------------------- sharded coreference: a component split in two


@pytest.fixture(scope="module")
def one_block(tmp_path_factory):
    """One name block of 400 mentions (six people, 79,800 candidate pairs): one component, too
    big for one of two shards; the plan cuts it in mention order, so every person straddles."""
    from pdbq.coref.personx import person_x
    from pdbq.distributed.shards import write_pairs

    data = person_x(400, per_name=400, entities_per_name=(6, 6), noise=0.5, seed=3)
    return data, write_pairs(str(tmp_path_factory.mktemp("one_block")), data.graph, data.name)


def _split_cfg(seed: int):
    from pdbq.distributed import DistributedConfig

    # 40 sweeps over the mentions in all, as the in-process reference below
    return DistributedConfig(workers=2, rounds=6, greedy_rounds=2, steps_per_round=1000, seed=seed)


@needs_dask
def test_a_component_split_over_two_shards_reaches_the_in_process_map(one_block, client, monkeypatch):
    """The sharded rounds with pairs across shards find the in-process MAP clustering (B³ and
    score within tolerance) although every true entity starts on both shards: entities linked
    across the cut meet on one shard. Measured over seeds 1-3: in-process B³ 1.000 (score
    7325.8) on each; sharded 0.985-0.998 (7273-7318); never co-locating 0.648-0.650
    (3620-3631), which fails the same check."""
    import pdbq.distributed.shards as shards
    from pdbq.coref.metrics import b_cubed
    from pdbq.inference.coreference.entity_moves import partition_score
    from pdbq.inference.coreference.resolve import CorefConfig, resolve_map

    data, src = one_block
    plan = shards.plan_shards(src, 2)
    assert plan.split_groups == 1 and plan.mentions.tolist() == [200, 200] and plan.blocks[0].size == 0
    assert plan.cut_pairs == 200 * 200  # a clique cut in two halves
    on0 = np.isin(np.arange(400), plan.split[0])
    assert all(on0[data.truth == t].any() and (~on0[data.truth == t]).any() for t in np.unique(data.truth))
    here = resolve_map(data.graph, CorefConfig(sweeps=40, chains=1, greedy_sweeps=2, seed=2)).labels

    def close_to_here(labels) -> bool:
        ref = partition_score(data.graph, here)
        return (b_cubed(labels, data.truth).f1 >= b_cubed(here, data.truth).f1 - 0.03
                and partition_score(data.graph, labels) >= ref - 0.02 * abs(ref))

    res = shards.resolve_sharded(src, _split_cfg(2), client=client)
    assert close_to_here(res.labels)
    assert sum(r.moved for r in res.rounds) > 0 and res.summary()["cut_pairs"] == plan.cut_pairs
    monkeypatch.setattr(shards, "colocate", lambda bounds, loads, *a: ({}, np.asarray(loads)))
    never = shards.resolve_sharded(src, _split_cfg(2), client=client)
    assert sum(r.moved for r in never.rounds) == 0 and not close_to_here(never.labels)


@needs_dask
def test_split_shards_are_deterministic_and_replayed_after_lost_shards(one_block, client):
    """Same seed, same clustering; shards lost after round 2 are rebuilt from the files and the
    booked moves between shards, and the clustering is the undisturbed one."""
    import pdbq.distributed.shards as shards

    _, src = one_block
    first = shards.resolve_sharded(src, _split_cfg(5), client=client)
    assert sum(r.moved for r in first.rounds[:3]) > 0  # entities changed shards before the loss
    assert all(r.replayed == 0 and r.reruns == 0 for r in first.rounds)  # no shard was lost undisturbed

    def lose_every_shard(stats, client):
        if stats.round == 2:
            with shards._LOCK:
                shards._HELD.clear()

    again = shards.resolve_sharded(src, _split_cfg(5), client=client, on_round=lose_every_shard)
    assert np.array_equal(again.labels, first.labels)
    assert again.rounds[3].replayed > 0 and again.rounds[3].reruns == 1 and not shards._HELD
    assert np.array_equal(shards.resolve_sharded(src, _split_cfg(5), client=client).labels, first.labels)


@pytest.mark.slow
def test_process_cluster_split_shards_survive_a_killed_worker(one_block, client, process_client):
    """A worker killed mid-round while entities move between shards: every shard is rebuilt and
    replayed, and the clustering is the undisturbed one (here: the in-process cluster's)."""
    from pdbq.distributed import DistributedConfig
    from pdbq.distributed.shards import resolve_sharded

    _, src = one_block
    cfg = DistributedConfig(workers=2, rounds=2, steps_per_round=20_000, greedy_rounds=0, seed=5)
    reference = resolve_sharded(src, cfg, client=client)
    assert reference.rounds[1].moved > 0
    t, killed = kill_busy_worker(process_client, "-r1-t", delay=0.05)  # after entities moved
    res = resolve_sharded(src, cfg, client=process_client)
    t.join(timeout=1)
    assert killed, "no worker was running a shard round when the kill fired"
    assert np.array_equal(res.labels, reference.labels)
    assert killed[0] not in process_client.scheduler_info()["workers"]


@needs_dask
def test_split_shards_hold_the_time_limit_and_stop_on_cancel(one_block, client):
    """A round of 10^12 proposals is cut at the time limit (the answer: the starting clustering,
    ``stopped_by_time``); a cancel after entities moved stops the run, and no shard is left."""
    import time

    import pdbq.distributed.shards as shards
    from pdbq.distributed import DistributedConfig
    from pdbq.progress import Cancelled

    _, src = one_block
    t0 = time.perf_counter()
    cut = shards.resolve_sharded(src, DistributedConfig(workers=2, steps_per_round=10**12, time_limit=1.0),
                                 client=client)
    assert time.perf_counter() - t0 < 1 + 10 and cut.stopped_by_time and not cut.rounds
    assert np.array_equal(cut.labels, np.arange(400))
    moved = []

    def poll():
        if moved:
            raise Cancelled("cancelled")

    with pytest.raises(Cancelled):
        shards.resolve_sharded(src, _split_cfg(2), client=client, poll=poll,
                               on_round=lambda st, c: moved.append(st.moved) if st.moved else None)
    assert moved and not shards._HELD


@needs_dask
def test_a_task_still_running_when_its_run_ends_keeps_no_shard(one_block):
    """A cancel (or a cut round) leaves tasks running on the workers after the client released the
    run's shards; when such a task ends it must not hold its shard again for nobody. Here the
    task runs after the end, as the late one did: nothing stays held. A retried round's release
    (not the end of the run) still lets the run's next tasks hold their shards."""
    import pdbq.distributed.shard_tasks as tasks
    from pdbq.distributed import DistributedConfig
    from pdbq.distributed.shard_plan import plan_shards

    _, src = one_block
    plan = plan_shards(src, 2)
    task = tasks.ShardRound("late-run", 0, plan.blocks[0], 0, (1.0,), 10, DistributedConfig(workers=2),
                            split=plan.split[0] if plan.split else None)
    tasks.shard_rebuild(src, task)
    assert ("late-run", 0) in tasks._HELD
    assert tasks.release("late-run") == 1  # a retry's release: the run goes on
    tasks.shard_rebuild(src, task)
    assert tasks.release("late-run", finished=True) == 1 and ("late-run", 0) not in tasks._HELD
    tasks.shard_rebuild(src, task)  # the task that was still running ends now
    assert ("late-run", 0) not in tasks._HELD


@needs_dask
def test_a_cancel_while_a_slow_round_runs_leaves_no_shard_held(one_block, client, monkeypatch):
    """The race behind the cancel test's 1-in-4 failure, made wide: every shard's moves take 0.5 s
    more, so the cancel's release of the run's shards comes while its round still runs on the
    workers. Whenever those tasks end, they must hold nothing for the ended run."""
    import time

    import pdbq.distributed.shard_tasks as tasks
    import pdbq.distributed.shards as shards
    from pdbq.progress import Cancelled

    _, src = one_block
    moves = tasks._moves

    def slow(*args, **kwargs):
        out = moves(*args, **kwargs)
        time.sleep(0.5)
        return out

    monkeypatch.setattr(tasks, "_moves", slow)
    rounds = []

    def poll():
        if rounds:
            raise Cancelled("cancelled")

    with pytest.raises(Cancelled):
        shards.resolve_sharded(src, _split_cfg(3), client=client, poll=poll,
                               on_round=lambda st, c: rounds.append(st.round))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(f.status == "pending" for f in client.futures.values()):
        time.sleep(0.1)  # the cancelled round's tasks run to their end on the workers
    time.sleep(1.0)
    assert rounds and not shards._HELD


def test_boundary_summaries_decide_which_entities_meet_and_packages_carry_their_pairs():
    """Shard 0 holds {0, 1} (one entity) and {2}; shard 1 holds {3} and {4, 5}. The cut pair
    0-3 (score 1.0) makes entities 0 and 3 worth merging, 1-4 (-1.0) does not: entity 3 moves to
    shard 0 (which holds more of the group), with its pair to 0 now inside shard 0; the pair
    1-4 stays cut on both sides."""
    from pdbq.distributed.shard_colocate import colocate
    from pdbq.distributed.shard_state import admit, assemble, boundary, export

    pairs = {(0, 3): 1.0, (1, 4): -1.0, (0, 1): 0.5, (4, 5): 2.0}

    def shard(ids, labels):
        rows = [(a, b, w) for (x, y), w in pairs.items() for a, b in ((x, y), (y, x)) if a in ids]
        a, b, w = (np.array(c) for c in zip(*rows))
        return assemble(np.array(ids, np.int64), np.array(labels, np.int64), a.astype(np.int64), b.astype(np.int64),
                        w.astype(float))

    s0, s1 = shard([0, 1, 2], [0, 0, 1]), shard([3, 4, 5], [0, 1, 1])
    b0, b1 = boundary(s0, 0.3), boundary(s1, 0.3)
    assert b0.key.tolist() == [0, 0] and b0.across.tolist() == [3, 4] and b0.score.tolist() == [1.0, -1.0]
    assert b0.entity.tolist() == [0] and b0.size.tolist() == [2] and b1.entity.tolist() == [3, 4]
    sends, after = colocate([b0, b1], np.array([3, 3]), 0.3, max_group=3, max_load=4)
    assert list(sends) == [1] and sends[1][0][0] == 0 and sends[1][0][1].tolist() == [3] and after.tolist() == [4, 2]
    assert colocate([b0, b1], np.array([3, 3]), 0.3, max_group=3, max_load=3)[0] == {}  # shard 0 would be too full
    s1b, (package,) = export(s1, 1, sends[1])
    s0b = admit(s0, (package,))
    assert s0b.mentions.tolist() == [0, 1, 2, 3] and s0b.graph.n_pairs == 2  # 0-1 and 0-3 now inside
    assert s0b.ext_b.tolist() == [4] and s1b.mentions.tolist() == [4, 5] and s1b.ext_b.tolist() == [1]
    assert len(set(s0b.labels.tolist())) == 3  # the arriving entity keeps apart until the moves merge it
