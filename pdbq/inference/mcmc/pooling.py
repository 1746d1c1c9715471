"""One answer from chain groups that ran apart (on Dask workers: `pdbq.distributed.chains`).

A run of C chains may be cut into groups, each a `run_gibbs` (or `run_mixing`) of its own
chains with ``GibbsConfig(first_chain=..., total_chains=C)``: every chain starts, draws and
batches as chain ``first_chain + c`` of the whole run would, so the groups' kept batches
(`GibbsResult.batches`) laid side by side are the whole run's, and `pool_groups` computes from
them the estimates, batch-means standard errors, R-hat across all chains, ESS and warnings with
the very function a single run uses (`gibbs.batch_estimates`). For single-site chains the pooled
answer is the in-process answer, bit for bit, and so with block, cluster or cutset moves; moves that adapt from all chains in
burn-in (tempering's ladder, the jumps' mode pool) need their groups adapted together between
rounds (`pdbq.distributed.chain_rounds`): pooled groups that adapted apart are as valid but
not identical.

>>> from dataclasses import replace
>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.inference.mcmc.gibbs import run_gibbs
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder(); x, y = b.add_variable(), b.add_variable(); w = b.add_weight(0.7)
>>> _ = b.add_factor(FactorFunction.EQUAL, [x, y], weight=w)
>>> g = b.build(); cfg = GibbsConfig(steps=4_000, chains=4, seed=3, threads=1)
>>> groups = [run_gibbs(g, [x], replace(cfg, chains=2, first_chain=f, total_chains=4)) for f in (0, 2)]
>>> bool(np.array_equal(pool_groups(g, cfg, groups).marginals, run_gibbs(g, [x], cfg).marginals))
True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from pdbq.errors import InferenceError
from pdbq.graph.layout import FactorGraph
from pdbq.inference.mcmc.config import GibbsConfig
from pdbq.inference.mcmc.gibbs import GibbsResult, GibbsTrace
from pdbq.inference.mcmc.run_book import batch_estimates, diagnose

__all__ = ["pool_groups", "chain_groups"]


def chain_groups(chains: int, groups: int) -> list[tuple[int, int]]:
    """(first chain, chains) of each of ``groups`` groups of about equal size (``groups`` ≤ ``chains``)."""
    if groups < 1 or groups > chains:
        raise InferenceError(f"{chains} chain(s) cannot be cut into {groups} group(s)")
    cuts = [g * chains // groups for g in range(groups + 1)]
    return [(cuts[g], cuts[g + 1] - cuts[g]) for g in range(groups)]


def _check(groups: Sequence[GibbsResult], config: GibbsConfig) -> None:
    if not groups:
        raise InferenceError("no chain group to pool")
    first = groups[0]
    if sum(r.chains for r in groups) != config.chains:
        raise InferenceError(f"the chain groups hold {sum(r.chains for r in groups)} chains, the run has {config.chains}")
    for r in groups:
        if not np.array_equal(r.targets, first.targets):
            raise InferenceError("chain groups answered different targets")
        if (r.batches is None) != (first.batches is None):
            raise InferenceError("some chain groups sampled, others did not")
        if r.batches is not None and (r.batches.sums.shape[1:] != first.batches.sums.shape[1:]
                                      or r.batches.kept != first.batches.kept):
            raise InferenceError("chain groups kept different batches: only runs of a fixed length pool "
                                 "(give steps or sweeps, no tolerance or time_limit)")


def _pooled_trace(groups: Sequence[GibbsResult], weights: np.ndarray) -> GibbsTrace:
    """The running estimates of the whole run: the chain-weighted mean of the groups' (every
    chain does the same updates), with the standard error of that mean of independent groups."""
    first = groups[0].trace
    if any(not np.array_equal(r.trace.steps, first.steps) for r in groups):
        return GibbsTrace(np.zeros(0, np.int64), first.estimates[:0], None if first.stderr is None else first.stderr[:0])
    est = sum(w * r.trace.estimates for w, r in zip(weights, groups))
    se = None
    if all(r.trace.stderr is not None for r in groups):
        se = np.sqrt(sum(w * w * r.trace.stderr ** 2 for w, r in zip(weights, groups)))
    return GibbsTrace(first.steps, est, se)


def pool_groups(graph: FactorGraph, config: GibbsConfig, groups: Sequence[GibbsResult]) -> GibbsResult:
    """The answer of the whole run of ``config.chains`` chains from its chain groups, in chain
    order (module docstring). ``config``: the whole run's settings (its ``chains`` the total).
    Warnings of the groups' moves (e.g. a low swap rate) are kept, once each; the warnings the
    batches decide (R-hat, ESS, tolerance, too few updates) are computed again over all chains."""
    _check(groups, config)
    first = groups[0]
    weights = np.array([r.chains for r in groups], dtype=np.float64) / config.chains
    seconds = max(r.seconds for r in groups)
    if first.batches is None:  # nothing sampled (no live target): every group says the same
        return dataclasses.replace(first, chains=config.chains, seconds=seconds, batches=None)
    b0 = first.batches
    ks = np.concatenate([r.batches.sums for r in groups], axis=0)
    kc = np.concatenate([r.batches.counts for r in groups], axis=0)
    live = b0.live
    est, se, rhat, ess, unknown = batch_estimates(graph, live, ks, kc, b0.constant, b0.kept, independent=b0.independent)
    warnings = diagnose(live, est, se, rhat, ess, unknown, b0.kept, config, b0.stopped_by, b0.burned, b0.burn_in,
                        graph.cardinality[live])
    moves_said: list[str] = []
    for r in groups:
        for w in r.warnings:
            if w not in r.batches.gibbs_warnings and w not in moves_said:
                moves_said.append(w)
    tg = first.targets
    rows = np.flatnonzero(graph.evidence[tg] < 0)
    at = np.searchsorted(live, tg[rows])
    marg, stderr, rh, es = first.marginals.copy(), first.stderr.copy(), first.rhat.copy(), first.ess.copy()
    marg[rows], stderr[rows], rh[rows], es[rows] = est[at], se[at], rhat[at], ess[at]
    pooled = b0._replace(sums=ks, counts=kc, gibbs_warnings=tuple(warnings))
    return GibbsResult(
        targets=tg, cardinality=first.cardinality, marginals=marg, stderr=stderr, rhat=rh, ess=es, steps=first.steps,
        burn_in=first.burn_in, chains=config.chains, seconds=seconds, warnings=tuple(warnings + moves_said),
        trace=_pooled_trace(groups, weights), batches=pooled,
    )
