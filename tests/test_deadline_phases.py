"""A query's time limit in every phase of a sampling run: burn-in that adapts the moves, each
move family's rounds, AUTO's pilot and the run after it, AUTO's exact branch, and the kernels'
one-time compilation (which is not the query's time).

Time bounds are the generous "within 10% + 1 s" a time limit promises; the rest asserts what load
cannot change (which phase ended the run, whether samples were kept, what the warnings say)."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest

from pdbq.answers import engine
from pdbq.answers.warmup import warm_up
from pdbq.graph.builder import GraphBuilder
from pdbq.inference.exact.auto import Decision
from pdbq.inference.mcmc.config import GibbsConfig, MixingConfig
from pdbq.inference.moves import move_choice
from pdbq.inference.moves.cutset import cutset_for, run_cutset
from pdbq.inference.moves.mixing import run_mixing
from pdbq.language.nodes import FactorFunction as F, Method
from pdbq.planning.options import QueryOptions


@pytest.fixture(scope="module", autouse=True)
def warm():
    # kernels loaded (or compiled) once, before any clock below starts
    warm_up("core")
    warm_up("moves")


def _held(seconds: float, limit: float) -> bool:
    return seconds <= 1.1 * limit + 1.0


def _grid(side: int, w: float):
    b = GraphBuilder()
    v = b.add_variables(side * side)
    rng = np.random.default_rng(0)
    for r in range(side):
        for c in range(side):
            i = r * side + c
            if c + 1 < side:
                b.add_factor(F.EQUAL, [v[i], v[i + 1]], weight=b.add_weight(w))
            if r + 1 < side:
                b.add_factor(F.EQUAL, [v[i], v[i + side]], weight=b.add_weight(w))
            b.add_factor(F.ISTRUE, [v[i]], weight=b.add_weight(float(rng.normal(0.0, 0.1))))
    return b.build()


def test_burn_in_the_clock_cuts_short_answers_from_the_kept_samples():
    g = _grid(5, 1.0)
    limit = 3.0
    t = time.perf_counter()
    r = run_mixing(g, np.arange(25), GibbsConfig(burn_in=10**12, time_limit=limit, seed=1, threads=1),
                   MixingConfig(tempering=3))
    assert _held(time.perf_counter() - t, limit)
    assert r.steps > 0 and not np.isnan(r.marginals).any()
    assert any("cut burn-in short" in w for w in r.warnings)
    assert not any("no estimates" in w for w in r.warnings)


MOVES = {
    "blocks": MixingConfig(blocks="auto"),
    "tempering": MixingConfig(tempering=4),
    "jumps and tempering": MixingConfig(tempering=4, jumps=8),
    "clusters": MixingConfig(clusters=True),
}


@pytest.mark.parametrize("name", sorted(MOVES))
def test_each_move_family_holds_a_tiny_time_limit(name):
    g = _grid(12, 3.0)  # strongly coupled: no move family reaches the tolerance in time
    limit = 0.5
    t = time.perf_counter()
    r = run_mixing(g, np.arange(g.n_vars), GibbsConfig(tolerance=1e-4, time_limit=limit, seed=1, threads=1),
                   MOVES[name])
    assert _held(time.perf_counter() - t, limit)
    _clock_ended(r)


def _clock_ended(r) -> None:
    """Estimates: the tolerance warning says the clock ended the run; too few kept samples for
    one: NULL with its reason, never a number."""
    if not np.isnan(r.marginals).any():
        assert r.steps > 0
        assert any("tolerance" in w and "time limit" in w for w in r.warnings), r.warnings
    else:
        assert any("too few updates" in w for w in r.warnings), r.warnings


def test_cutset_rounds_hold_a_tiny_time_limit():
    g = _grid(12, 3.0)
    limit = 0.5
    cs = cutset_for(g, True, 1 << 10)
    assert cs.size > 0
    t = time.perf_counter()
    r = run_cutset(g, np.arange(g.n_vars), GibbsConfig(tolerance=1e-5, time_limit=limit, seed=1, threads=1),
                   cutset=cs)
    assert _held(time.perf_counter() - t, limit)
    _clock_ended(r)


def test_auto_answers_from_the_pilot_when_the_clock_leaves_the_moves_nothing(monkeypatch):
    g = _grid(8, 3.0)  # strong couplings: the pilot does not mix and AUTO picks moves
    moves = dataclasses.replace(move_choice.choose_moves(g).without_cutset(), static=False)
    assert moves.pilots

    def starved(graph, targets, config, *a, **kw):
        r = run_mixing(graph, targets, dataclasses.replace(config, time_limit=None, tolerance=None, steps=64), *a,
                       **{k: v for k, v in kw.items() if k != "deadline"})
        return dataclasses.replace(r, steps=0, marginals=np.full_like(r.marginals, np.nan))

    monkeypatch.setattr(move_choice, "run_mixing", starved)
    cfg = GibbsConfig(tolerance=0.01, chains=2, seed=1, threads=1, steps=200_000)
    r, why = move_choice.run_auto(g, np.arange(g.n_vars), cfg, moves)
    assert r.steps > 0 and not np.isnan(r.marginals).any()
    assert "comes from the plain pilot" in r.warnings[0]


def test_a_pilot_that_kept_no_sample_is_not_taken_for_mixed_or_for_the_answer():
    # evidence rows report R-hat 1 by construction: counted, a pilot the clock cut before it kept
    # a sample passed as mixed and "at the tolerance", and came back as the answer, all NULL
    g = _grid(6, 3.0)
    ev = g.evidence.copy()
    ev[0] = 1
    g = g._replace(evidence=ev)
    moves = move_choice.choose_moves(g).without_cutset()
    assert moves.pilots
    calls = []

    def chains(graph, targets, config, mixing=None, blocks=None, sweeps=1, cutset=None, domain=False, deadline=None,
               **kw):
        fixed = dataclasses.replace(config, time_limit=None, tolerance=None, steps=2000, burn_in=500)
        if mixing is None:
            r = move_choice.run_gibbs(graph, targets, fixed, **kw)
        else:
            r = run_mixing(graph, targets, fixed, mixing, blocks=blocks, sweeps=sweeps, **kw)
        calls.append(r)
        if len(calls) > 1:
            return r
        live = graph.evidence[targets] < 0
        return dataclasses.replace(r, steps=0, marginals=np.where(live[:, None], np.nan, r.marginals),
                                   rhat=np.where(live, np.nan, 1.0),
                                   warnings=(f"{int(live.sum())} of {int(live.sum())} target(s) got too few updates",))

    cfg = GibbsConfig(tolerance=0.01, chains=2, seed=1, threads=1, time_limit=30.0)
    r, why = move_choice.run_auto(g, np.arange(g.n_vars), cfg, moves, chains=chains)
    assert "reached the tolerance" not in why
    assert len(calls) == 2 and r.steps > 0 and not np.isnan(r.marginals).any()


def test_auto_samples_when_exact_would_outlast_the_time_left(monkeypatch):
    g = _grid(4, 0.5)
    slow = Decision("EXACT", "exact: pretend it takes 100 s", 4, 16, 100.0)
    monkeypatch.setattr(engine, "auto_decision", lambda *a, **k: slow)
    opts = QueryOptions(time_limit=2.0, seed=1, exact_budget=1000.0)
    a = engine.answer(g, np.arange(4), Method.AUTO, opts)
    assert a.method == "QAM" and "stops at the deadline" in a.reason
    a = engine.answer(g, np.arange(4), Method.AUTO, dataclasses.replace(opts, time_limit=None))
    assert a.method == "EXACT"  # no time limit written: the exact branch as before


def test_warm_up_is_once_per_process():
    assert warm_up("core") is None  # the fixture did it
    with pytest.raises(ValueError):
        warm_up("everything")


def _signatures() -> int:
    """Kernel signatures this process has (compiled or loaded from numba's cache), over pdbq."""
    import sys

    from numba.core.dispatcher import Dispatcher

    return sum(len(v.signatures) for name, mod in list(sys.modules.items()) if name.startswith("pdbq.") and mod
               for v in list(vars(mod).values()) if isinstance(v, Dispatcher))


def _ring(cards, seed: int = 0):
    """A ring of TABLE factors over variables of the given domain sizes, evidence on the first."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder()
    v = [b.add_variable(int(k)) for k in cards]
    for i in range(len(v)):
        j = (i + 1) % len(v)
        b.add_factor(F.TABLE, [v[i], v[j]], table=rng.normal(0.0, 2.0, cards[i] * cards[j]).tolist())
    g = b.build()
    ev = g.evidence.copy()
    ev[0] = 0
    return g._replace(evidence=ev)


def test_the_warm_up_tiers_cover_what_a_query_runs_on_wide_domains_domain_blocks_and_joint_cutsets():
    # what a query compiles at its first use counts against its time_limit: a 300-value variable
    # (the chains' int32 value path), AUTO's exact blocks over slow domains and a cutset of one
    # joint group each compiled seconds of kernels inside the query, ending it NULL or late
    from pdbq.answers.warmup import NARROW_VALUES, tiers_for
    from pdbq.inference.mcmc.gibbs import run_gibbs
    from pdbq.inference.moves.blocks import build_blocks
    from pdbq.inference.moves.cutset import choose_cutset
    from pdbq.inference.moves.domain_chains import domain_moves

    wide = _ring([3, NARROW_VALUES + 44, 4, 2, 3])
    narrow = _ring([3, 2, 4, 2, 3, 2])
    assert tiers_for(narrow, False) == () and tiers_for(narrow, True) == ("moves",)
    assert tiers_for(wide, True) == ("moves", "wide", "wide-moves")
    for tier in tiers_for(wide, True):
        warm_up(tier)
    before = _signatures()
    cfg = GibbsConfig(steps=1_000, chains=2, threads=1, seed=0)
    for g in (wide, narrow):
        t = np.arange(g.n_vars)
        run_gibbs(g, t, cfg)
        run_mixing(g, t, cfg, MixingConfig(blocks="auto"))
        run_mixing(g, t, cfg, MixingConfig(tempering=2, jumps=2))
        run_cutset(g, t, cfg, cutset=choose_cutset(g, max_table=4 if g is narrow else 1 << 10, max_vars=4))
        sites = np.flatnonzero(g.evidence < 0)
        run_gibbs(g, t, cfg, moves=domain_moves(g, build_blocks(g, max_table=1 << 12), sites, 1))
    assert _signatures() == before


def test_choosing_blocks_stops_at_the_deadline_and_says_so():
    from pdbq.inference.moves.blocks import build_blocks

    g = _grid(12, 3.0)
    full = build_blocks(g, max_table=1 << 6)
    assert not full.cut and len(full) > 1
    cut = build_blocks(g, max_table=1 << 6, deadline=time.perf_counter())  # already past: no block grown
    assert cut.cut and len(cut) == 0
    r = run_mixing(g, np.arange(g.n_vars), GibbsConfig(steps=2_000, seed=1, threads=1),
                   MixingConfig(blocks="auto", block_table=1 << 6), deadline=time.perf_counter() + 30.0)
    assert not any("stopped choosing blocks" in w for w in r.warnings)
    r = run_mixing(g, np.arange(g.n_vars), GibbsConfig(tolerance=0.5, time_limit=1.0, seed=1, threads=1),
                   MixingConfig(blocks="auto", block_table=1 << 6), deadline=time.perf_counter())
    assert any("stopped choosing blocks after 0" in w for w in r.warnings)
