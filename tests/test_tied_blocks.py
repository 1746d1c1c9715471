"""AUTO on a Mendelian pedigree: deterministic inheritance ties each locus's alleles and selectors
together, single-site Gibbs cannot move them, and the global-order blocks split the tie; AUTO's
blocks over each tied group (`moves.tied`) reach the exact marginals, a broken draw does not."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from pedigree_graphs import pedigree

import pdbq.inference.moves.move_choice as mc
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.inference.mcmc.config import GibbsConfig
from pdbq.inference.mcmc.feasibility import forced_values
from pdbq.inference.mcmc.gibbs import ImpossibleStateError, run_gibbs
from pdbq.inference.moves.tied import split_components, tied_blocks, tied_components

# 8 individuals, 3 loci, 72 free variables, induced width 11: at a 64-entry block table the
# global-order blocks cannot hold a locus whole, as on the larger pedigrees at the default table
BLOCK_TABLE = 64
STEPS = 60_000


@pytest.fixture(scope="module")
def ped():
    p = pedigree(founders=4, generations=2, loci=3, seed=1)
    return p, exact_marginals(p.graph).marginals


def _within(r, exact, q, k: float = 4.0) -> bool:
    err = np.abs(r.marginals - exact[q][:, : r.marginals.shape[1]])
    return bool(np.all(err <= k * r.stderr + 1e-6))


def test_tied_groups_are_the_loci(ped):
    p, _ = ped
    comps = tied_components(p.graph)
    loci = p.alleles.shape[1]
    assert len(comps) == loci
    for c in comps:  # one locus each: its alleles and its selectors, nothing of another locus
        lc = [k for k in range(loci) if np.isin(c, p.alleles[:, k]).any()]
        assert len(lc) == 1
        locus = np.concatenate([p.alleles[:, lc[0]].ravel(), p.selectors[:, lc[0]].ravel()])
        assert np.isin(c, locus).all()
    assert len(tied_blocks(p.graph, comps, max_table=BLOCK_TABLE)) == loci


def test_forced_values_are_the_pinned_alleles(ped):
    p, exact = ped
    vars_, values = forced_values(p.graph)
    assert vars_.size > 0
    # every forced value is the exact marginal's point mass; nothing else is
    assert np.allclose(exact[vars_, values], 1.0)
    free = np.flatnonzero(p.graph.evidence < 0)
    pinned = np.isclose(exact[free].max(axis=1), 1.0)
    assert set(vars_.tolist()) <= set(free[pinned].tolist())


def test_auto_reaches_the_pedigree_where_single_site_gibbs_is_stuck(ped):
    p, exact = ped
    g = p.graph
    q = np.flatnonzero(g.evidence < 0)
    try:  # single-site chains stay where they started: a world the zeros forbid, or flagged, or off
        plain = run_gibbs(g, q, GibbsConfig(steps=STEPS, seed=3))
    except ImpossibleStateError:
        pass
    else:
        assert not plain.converged or not _within(plain, exact, q)
    d = mc.choose_moves(g, block_table=BLOCK_TABLE)
    assert d.walls and d.cutset is None
    r, why = mc.run_auto(g, q, GibbsConfig(steps=STEPS, seed=3), dataclasses.replace(d, static=False))
    assert "tie together" in why and "hold each tied group whole" in why
    assert r.converged, r.warnings
    assert _within(r, exact, q)
    assert np.abs(r.marginals - exact[q][:, : r.marginals.shape[1]]).max() < 0.15  # global-order blocks: 0.24-0.49


def test_a_broken_tied_block_fails_the_same_check(ped, monkeypatch):
    p, exact = ped
    g = p.graph
    q = np.flatnonzero(g.evidence < 0)
    made = tied_blocks

    def half_strength(*a, **kw):
        # every table of the blocks at half strength: the draw no longer follows p(x_B | rest)
        out = made(*a, **kw)
        out[:] = [dataclasses.replace(b, factors=tuple(tuple(f._replace(table=0.5 * f.table) for f in fs)
                                                       for fs in b.factors)) for b in out]
        return out

    monkeypatch.setattr(mc, "tied_blocks", half_strength)
    r, why = mc.run_auto(g, q, GibbsConfig(steps=STEPS, seed=3),
                         dataclasses.replace(mc.choose_moves(g, block_table=BLOCK_TABLE), static=False))
    assert "hold each tied group whole" in why
    assert not _within(r, exact, q)


def test_ordinary_blocks_that_hold_every_group_are_kept(ped):
    p, _ = ped
    g = p.graph
    comps = tied_components(g)
    whole = tied_blocks(g, comps, max_table=BLOCK_TABLE)
    assert split_components(list(whole), comps) == []
    assert mc._tied_instead(g, list(whole), mc.choose_moves(g, block_table=BLOCK_TABLE).mixing, None) is None
