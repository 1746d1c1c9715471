"""Zero-probability propagation looks first only at the factors that can change something
(`pdbq.inference.mcmc.feasibility._needs_a_look`): it finds a contradiction exactly when looking at
every factor first does, on random hard factors with random evidence."""

from __future__ import annotations

import numpy as np
import pytest

import pdbq.inference.mcmc.feasibility as fz


def _random_hard(rng: np.random.Generator, n_vars: int = 7, n_factors: int = 9) -> tuple[fz.HardFactors, np.ndarray]:
    card_of = rng.integers(1, 4, size=n_vars)
    offsets, vids, t_offsets, tables, cards = [0], [], [0], [], []
    for _ in range(n_factors):
        scope = rng.choice(n_vars, size=int(rng.integers(0, 4)), replace=False)
        size = int(np.prod(card_of[scope])) if scope.size else 1
        t = np.log(rng.random(size))
        t[rng.random(size) < 0.15] = -np.inf
        if rng.random() < 0.1:
            t[int(rng.integers(size))] = np.inf
        vids += scope.tolist()
        cards += card_of[scope].tolist()
        tables += t.tolist()
        offsets.append(len(vids))
        t_offsets.append(len(tables))
    hard = fz.HardFactors(np.array(offsets), np.array(vids, dtype=np.int64), np.array(t_offsets),
                          np.array(tables), np.array(cards, dtype=np.int64))
    return hard, card_of


@pytest.mark.parametrize("seed", range(40))
def test_screened_propagation_agrees_with_looking_at_every_factor(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    hard, card_of = _random_hard(rng)
    ev_vids = np.sort(rng.choice(card_of.size, size=int(rng.integers(0, 3)), replace=False)).astype(np.int64)
    ev_values = np.array([int(rng.integers(card_of[v])) for v in ev_vids], dtype=np.int64)
    screened = fz.propagate(hard, ev_vids, ev_values)
    monkeypatch.setattr(fz, "_needs_a_look", lambda h, e: np.ones(h.n_factors, dtype=bool))
    full = fz.propagate(hard, ev_vids, ev_values)
    assert (screened is None) == (full is None)
