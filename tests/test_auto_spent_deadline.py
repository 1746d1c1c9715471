"""AUTO sets up no mixing move once the query's deadline has passed.

On a crowded machine (a few per cent of a core) the steps before AUTO's plain pilot can spend
the whole time limit; building blocks, cutsets or feasible starts after it samples nothing and
only runs past the deadline (Promedus_26 under load: 4.9–7.2 s for a 3 s limit). The deadline
here is simply in the past, so nothing depends on the machine's speed."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hard_families import grid

from pdbq.inference.mcmc.config import GibbsConfig
from pdbq.inference.moves import move_choice

_SET_UP = ("_static_run", "_domain_run", "_with_moves", "run_cutset", "run_mixing", "_tied_instead")


def _grid(rng, side: int):
    return grid(rng, side, lambda r: float(r.uniform(0.6, 1.2)))


@pytest.fixture
def no_set_up(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a mixing move was set up after the query's deadline")

    for name in _SET_UP:
        if hasattr(move_choice, name):
            monkeypatch.setattr(move_choice, name, refuse)


@given(seed=st.integers(0, 2**32 - 1), side=st.integers(4, 8), chains=st.integers(1, 4))
@settings(max_examples=5, deadline=None, print_blob=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_no_move_is_set_up_after_the_deadline(no_set_up, seed, side, chains):
    g = _grid(np.random.default_rng(seed), side)
    moves = move_choice.choose_moves(g)
    assert moves.pilots, "a strongly coupled grid gets a pilot"
    targets = np.arange(g.n_vars)
    cfg = GibbsConfig(chains=chains, threads=1, seed=seed % 1000, time_limit=1.0)
    r, why = move_choice.run_auto(g, targets, cfg, moves, deadline=time.perf_counter() - 1.0)
    assert "time limit ended the query with the plain pilot" in why
    assert any("before any mixing move was set up" in w for w in r.warnings)


@given(seed=st.integers(0, 2**32 - 1), side=st.integers(3, 6))
@settings(max_examples=5, deadline=None, print_blob=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_cutset_is_not_built_once_the_time_is_up(monkeypatch, seed, side):
    from pdbq.errors import TimeLimitError
    from pdbq.inference.moves import cutset

    def refuse(*a, **k):
        raise AssertionError("the cutset's blocks were built after the time was up")

    monkeypatch.setattr(cutset, "_build", refuse)
    searched = cutset._remainder_order
    # the order searches end on their own (as on a graph they finish before a look at the clock);
    # the time is up when the blocks would be built
    monkeypatch.setattr(cutset, "_remainder_order", lambda scopes, in_c, card, stop: searched(scopes, in_c, card, None))
    g = _grid(np.random.default_rng(seed), side)
    with pytest.raises(TimeLimitError):
        cutset.choose_cutset(g, max_table=4, max_vars=g.n_vars, should_stop=lambda: True)
