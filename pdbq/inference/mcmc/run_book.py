"""The books of a sampling run: its plan, its kept batches, running trace, stopping rule and
estimates, apart from the chains that fill them.

`RunBook` is what `gibbs.run_gibbs`'s driver keeps between rounds: every kept round's per-chain
Rao-Blackwellised sums go into a `BatchStore`; the trace, the tolerance check (on a fixed
schedule of rounds) and the final estimates and warnings are computed from it. The chains may
run in this process (`gibbs._Chains`) or in groups on other machines whose rounds come back one
by one (`pdbq.distributed.chain_rounds`): given the same rounds, the book answers the same.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from pdbq.graph.layout import FactorGraph
from pdbq.inference.mcmc.config import GibbsConfig
from pdbq.inference.mcmc.estimates import (JOINT_MISS, BatchStore, batch_statistics, batch_stderr,
                                           effective_sample_size, expected_misses, pooled_mean)

__all__ = ["RunBook", "RunPlan", "plan_run", "LiveEstimates", "ChainBatches", "batch_estimates", "diagnose",
           "BURN_IN_SHARE", "MIN_ESS", "MIN_ROUNDS_FOR_TOLERANCE", "TRACE_MAX_TARGETS", "no_estimates"]

MIN_ROUNDS_FOR_TOLERANCE = 16
BURN_IN_SHARE = 0.25  # of a run the budget ends (no explicit burn_in), dropped as burn-in
TRACE_MAX_TARGETS = 1000  # more targets than this: no running-estimate trace (time and memory)
# An estimate from fewer effective draws than MIN_ESS per chain carries a warning: below ~100 per
# chain the ESS and R-hat estimates themselves are unreliable (Vehtari et al. 2021), and the
# standard error with them (Segmentation_11: runs at ESS 120-240 whose slowly switching mode
# was under-visited had both the estimate and its error too small, z down to -3.9).
MIN_ESS = 100.0
# The tolerance stop is two-stage: when the half-width first meets the tolerance (with the R-hat
# and ESS checks), that moment was chosen by the data, and a run whose error estimate happens to
# be small there also tends to have a large error (on a chain with rare excursions, fewer
# excursions give both a biased estimate and a smaller batch variance: BN "sachs", unwarned at
# z = 3.6, coverage 0.86 over ten seeds). So the rounds so far are dropped and the run goes on
# until they are this share of it; the fresh rounds' estimate and error, independent of the
# choice of their length, decide and answer.
CONFIRM_SHARE = 0.5


class ChainBatches(NamedTuple):
    """The kept batches a run's estimates come from, so the chain groups of one answer run
    apart (`pdbq.distributed.chains`) pool into exactly the estimates of one run: chains are
    independent, the round schedule is the whole run's (`GibbsConfig.total_chains`), so the
    groups' batches line up chain by chain."""

    sums: np.ndarray  # float64[chains, batches, n_live, max_card]: Rao-Blackwellised sums
    counts: np.ndarray  # int64[chains, batches, n_live]
    live: np.ndarray  # int64[n_live]: the distinct non-evidence targets, sorted
    constant: np.ndarray  # bool[n_live]: conditional independent of every sampled variable
    kept: int  # updates per chain kept
    burned: int  # updates per chain of explicit burn-in run
    burn_in: int  # updates per chain of explicit burn-in planned
    stopped_by: str  # "steps" | "time" | "tolerance" | ""
    gibbs_warnings: tuple[str, ...]  # the warnings computed from these batches (not the moves')
    independent: bool = False  # every update an independent draw (`gibbs.Moves.independent`)


class RunPlan(NamedTuple):
    """A run's length, fixed before the first update (docs/inference.md "Run length and
    reproducibility"): ``steps`` kept updates per chain (None: the budget ends the run),
    ``burn_in`` explicit burn-in updates, ``share`` of the run dropped as burn-in at the end,
    ``fixed`` (exactly ``steps``), ``stop_at`` the `time.perf_counter()` deadline (or None)."""

    steps: int | None
    burn_in: int
    share: float
    fixed: bool
    stop_at: float | None


def plan_run(config: GibbsConfig, moves, n_sites: int, n_live: int, t0: float,
             deadline: float | None) -> RunPlan:
    """The `RunPlan` of a run of ``config`` over ``n_sites`` sites and ``n_live`` sampled targets
    (``moves``: the run's `gibbs.Moves`, for its ``unit`` and ``burn_in``)."""
    unit = max(int(moves.unit), 1)
    fixed = config.steps is not None and config.tolerance is None and config.time_limit is None and deadline is None
    steps_target = config.steps
    if steps_target is None and config.tolerance is None and config.time_limit is None and deadline is None:
        steps_target = max(config.default_sweeps * max(n_sites, unit), 10_000)
        fixed = True
    # Burn-in: an explicit count, steps/10 of a fixed run, or else (a run the budget ends) the
    # leading `BURN_IN_SHARE` of whatever was run, dropped at the end in whole batches.
    share = 0.0
    if config.burn_in is not None:
        burn_in = config.burn_in
    elif fixed:
        burn_in = steps_target // 10
    else:
        burn_in, share = int(moves.burn_in), BURN_IN_SHARE
    if n_sites == 0 or n_live == 0:
        steps_target, burn_in, fixed, share = 0, 0, True, 0.0
    stop_at = None
    if config.time_limit is not None:
        stop_at = t0 + config.time_limit
    if deadline is not None:
        stop_at = deadline if stop_at is None else min(stop_at, deadline)
    return RunPlan(steps_target, burn_in, share, fixed, stop_at)


class LiveEstimates(NamedTuple):
    """Per sampled target (rows of ``live``): estimate, stderr, R-hat, ESS (NaN where unknown)."""

    est: np.ndarray
    se: np.ndarray
    rhat: np.ndarray
    ess: np.ndarray


def no_estimates(n_live: int, kmax: int) -> LiveEstimates:
    return LiveEstimates(np.full((n_live, kmax), np.nan), np.full((n_live, kmax), np.nan), np.full(n_live, np.nan),
                         np.zeros(n_live))


class RunBook:
    """The kept rounds of one run of ``config.chains`` chains (all of them: the whole run's
    config) and what is computed from them: ``done`` kept updates per chain, ``burned`` explicit
    burn-in updates, ``stopped_by``, the trace, the stopping rule's ``max_se``."""

    def __init__(self, graph: FactorGraph, live: np.ndarray, config: GibbsConfig, plan: RunPlan,
                 constant: np.ndarray, store: BatchStore, round_len: int, *, independent: bool = False):
        self.graph, self.live, self.config, self.plan, self.constant = graph, live, config, plan, constant
        self.independent = independent  # `gibbs.Moves.independent`: no frozen-chain rule
        self.store, self.round_len = store, round_len
        self.keep_trace = live.shape[0] <= TRACE_MAX_TARGETS
        self.trace_every = 1
        self.trace_steps: list[int] = []
        self.trace_est: list[np.ndarray] = []
        self.trace_se: list[np.ndarray] = []
        self.rounds_done = 0
        self.next_check = MIN_ROUNDS_FOR_TOLERANCE
        self.max_se = float("nan")
        self.done = 0  # updates per chain after an explicit burn-in (share burn-in included)
        self.burned = 0
        self.stopped_by = ""
        self.cut_burn_in = False  # the time limit ended explicit burn-in early
        self.share = plan.share  # of the kept rounds dropped as burn-in
        self.confirm_at: int | None = None  # rounds at which the tolerance is checked on fresh rounds

    def burn_in_cut(self) -> None:
        """The time limit ended explicit burn-in early: the leading share of the kept rounds is
        dropped too, as in a run the budget ends."""
        self.cut_burn_in = True
        self.share = max(self.share, BURN_IN_SHARE)

    def keep_round(self, sums: np.ndarray, counts: np.ndarray, n: int) -> bool:
        """Book one kept round of ``n`` updates per chain (per-chain sums ``[chains, live, card]``
        and counts ``[chains, live]``); True when the stopping rule says the run may stop."""
        self.done += n
        self.rounds_done += 1
        self.store.add_round(sums, counts)
        self._record_trace()
        return self.tolerance_reached()

    def _record_trace(self) -> None:
        if not (self.keep_trace and self.rounds_done % self.trace_every == 0):
            return
        ks, kc, kd = self.store.kept(self.share)
        self.trace_steps.append(self.done - kd * self.round_len)
        self.trace_est.append(pooled_mean(ks, kc))
        self.trace_se.append(batch_stderr(ks, kc))
        if len(self.trace_steps) > self.config.trace_points:
            self.trace_steps, self.trace_est, self.trace_se = (self.trace_steps[1::2], self.trace_est[1::2],
                                                               self.trace_se[1::2])
            self.trace_every *= 2

    def tolerance_reached(self) -> bool:
        """The stopping rule, after a kept round: every target's 95% half-width within the
        tolerance and its split R-hat within the threshold (also sets ``max_se``)."""
        config = self.config
        if config.tolerance is None or not config.tolerance_stops or self.rounds_done < self.next_check:
            return False
        # checked on a fixed schedule of rounds (every round at first, then about every
        # 1/8 of the run) so a tolerance stop is reproducible and checks stay cheap
        self.next_check = max(self.rounds_done + 1, int(self.rounds_done * 1.125))
        ks, kc, _ = self.store.kept(self.share)
        est, se, rh = batch_statistics(ks, kc, self.constant, frozen=not self.independent)
        self.max_se = float(np.max(se)) if se.size else 0.0  # NaN propagates: not yet known
        if ks.shape[1] < MIN_ROUNDS_FOR_TOLERANCE // 2 or not 1.96 * self.max_se <= config.tolerance:
            return False
        # every answer within the tolerance jointly, not each at 95% alone: a query over many
        # targets near the tolerance would otherwise have some off by more (`expected_misses`)
        if not expected_misses(se, self.graph.cardinality[self.live], config.tolerance) <= JOINT_MISS:
            return False
        if not np.all(rh <= config.rhat_threshold):
            return False
        # the convergence checks the answer would warn about must pass too: an answer the
        # tolerance ends is an unwarned one (or the run goes on)
        ess = effective_sample_size(est, se, kc.sum(axis=(0, 1)), self.graph.cardinality[self.live], self.constant)
        if not np.all(ess >= MIN_ESS * config.chains):
            return False
        if self.confirm_at is None and CONFIRM_SHARE > 0:
            # met for the first time: the rounds that decided it are dropped and as many fresh
            # ones are run, whose estimate and error decide (see `CONFIRM_SHARE`)
            self.confirm_at = int(math.ceil(self.rounds_done / (1.0 - CONFIRM_SHARE)))
            self.share = max(self.share, CONFIRM_SHARE)
            self.next_check = self.confirm_at
            return False
        return True

    def kept(self) -> int:
        """Updates per chain the estimates come from (the share burn-in dropped)."""
        return self.done - self.store.kept(self.share)[2] * self.round_len

    def estimates(self) -> tuple[LiveEstimates, int, list[str], ChainBatches]:
        """Estimates from the kept batches, the updates per chain dropped as burn-in, warnings, and
        the batches themselves (`ChainBatches`: chain groups of one run pool them)."""
        graph, live, config = self.graph, self.live, self.config
        ks, kc, dropped_rounds = self.store.kept(self.share)
        dropped = dropped_rounds * self.round_len
        kept = self.done - dropped
        est, se, rhat, ess, unknown = batch_estimates(graph, live, ks, kc, self.constant, kept,
                                                      independent=self.independent)
        warnings = diagnose(live, est, se, rhat, ess, unknown, kept, config, self.stopped_by, self.burned,
                            self.plan.burn_in, graph.cardinality[live])
        if self.cut_burn_in and kept > 0:
            warnings.insert(0, f"the time limit cut burn-in short ({self.burned:,} of {self.plan.burn_in:,} updates per "
                               f"chain, then the leading {BURN_IN_SHARE:.0%} of the kept rounds dropped too): the "
                               "moves adapted less than planned; raise time_limit or lower burn_in")
        batches = ChainBatches(ks, kc, live, self.constant, int(kept), int(self.burned), int(self.plan.burn_in),
                               self.stopped_by, tuple(warnings), self.independent)
        return LiveEstimates(est, se, rhat, ess), dropped, warnings, batches


def batch_estimates(graph: FactorGraph, live: np.ndarray, ks: np.ndarray, kc: np.ndarray, constant: np.ndarray,
                    kept: int, *, independent: bool = False
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(estimates, standard errors, split R-hat, ESS, unknown) of the ``live`` targets from the
    kept batches ``ks``/``kc`` (`BatchStore.kept`) of all chains; ``kept``: updates per chain
    they hold. A target with too few updates (none, or fewer than two batches per chain) gets
    no estimate at all (NaN, flagged unknown), never a made-up number."""
    n_live = live.shape[0]
    kmax_t = ks.shape[-1]
    est_live = np.full((n_live, kmax_t), np.nan)
    se_live = np.full((n_live, kmax_t), np.nan)
    rhat_live = np.full(n_live, np.nan)
    ess_live = np.zeros(n_live)
    counts = kc.sum(axis=(0, 1))
    if kept > 0:
        est_live, se_live, rhat_live = batch_statistics(ks, kc, constant, frozen=not independent)
        ess_live = effective_sample_size(est_live, se_live, counts, graph.cardinality[live], constant)
        # beyond a target's cardinality there is nothing to estimate
        mask = np.arange(kmax_t)[None, :] >= graph.cardinality[live][:, None]
        se_live = np.where(mask, 0.0, se_live)
    per_chain = (kc > 0).sum(axis=1).min(axis=0) if kc.shape[1] else np.zeros(n_live, dtype=np.int64)
    unknown = (counts == 0) | (per_chain < 2) | np.isnan(se_live).any(axis=1)
    est_live[unknown] = np.nan
    se_live[unknown] = np.nan
    ess_live[unknown] = np.nan
    ess_live[np.isinf(rhat_live)] = 0.0  # a frozen chain carries no information
    return est_live, se_live, rhat_live, ess_live, unknown


def diagnose(live, est, se, rhat, ess, unknown, kept, config: GibbsConfig, stopped_by: str, burned: int,
             burn_in: int, cardinality: np.ndarray) -> list[str]:
    """The warnings the kept batches decide (``cardinality``: of each ``live`` target)."""
    out: list[str] = []
    if live.size == 0:
        return out
    if burned < burn_in and kept <= 0:
        out.append(f"the time limit ended the run during burn-in ({burned:,} of {burn_in:,} updates per chain): "
                   "no estimates; raise time_limit or lower burn_in")
    if unknown.any():
        first = int(live[np.flatnonzero(unknown)[0]])
        out.append(
            f"{int(unknown.sum())} of {live.size} target(s) got too few updates for an estimate and its error "
            f"(first: variable {first}; {kept:,} updates per chain kept): their estimates are NULL (NaN); "
            "raise time_limit or steps/sweeps"
        )
    ok = ~unknown
    bad = np.flatnonzero(ok & (rhat > config.rhat_threshold))
    if bad.size:
        worst = int(bad[np.argmax(rhat[bad])])
        what = ("a chain never moved it (not mixing)" if np.isinf(rhat[worst])
                else "the chains (or the halves of one chain) disagree")
        out.append(
            f"not converged: {bad.size} of {int(ok.sum())} target(s) have split R-hat > {config.rhat_threshold:g} "
            f"(worst {rhat[worst]:.3g} for variable {int(live[worst])}: {what}), so the estimates "
            "are unreliable: run longer or use exact inference"
        )
    elif ok.any() and np.isnan(rhat[ok]).any():
        out.append("R-hat unavailable: too few batches per chain to compare chain halves; run more steps")
    min_ess = MIN_ESS * config.chains
    low = np.flatnonzero(ok & (ess < min_ess))
    if low.size and not bad.size:
        worst = int(low[np.argmin(ess[low])])
        out.append(
            f"{low.size} target(s) have an effective sample size below {min_ess:g} ({MIN_ESS:g} per chain; worst "
            f"{ess[worst]:.3g} for "
            f"variable {int(live[worst])}): their standard errors are themselves uncertain; run longer"
        )
    if config.tolerance is not None and ok.any():
        hw = 1.96 * float(np.nanmax(se[ok])) if not np.all(np.isnan(se[ok])) else float("nan")
        if not hw <= config.tolerance:
            why = {"time": " (stopped by the time limit)",
                   "steps": " (stopped at the run's step count: steps/sweeps, or the share of them AUTO gave this "
                            "part of the run)"}.get(stopped_by, "")
            out.append(f"tolerance {config.tolerance:g} not reached: largest 95% half-width {hw:.3g} after {kept:,} "
                       "updates per chain" + why)
        else:
            misses = expected_misses(np.where(ok[:, None], se, 0.0), cardinality, config.tolerance)
            if not misses <= JOINT_MISS:
                why = {"time": " (stopped by the time limit)",
                       "steps": " (stopped at the run's step count)"}.get(stopped_by, "")
                out.append(f"tolerance {config.tolerance:g} not reached for the answers jointly: every 95% half-width is "
                           f"within it (largest {hw:.3g}), but so many are close to it that about {misses:.2g} of the "
                           f"{int(ok.sum())} answers may be off by more (at most {JOINT_MISS:g} expected) after {kept:,} "
                           "updates per chain" + why + "; raise time_limit for all of them within the tolerance")
    if stopped_by == "time" and config.steps is not None and not any("time limit" in w for w in out):
        # a run length the user asked for, cut by the clock: the answer may be within its
        # tolerance, but it is not the run asked for, and says so
        out.append(f"the time limit ended the run before the {config.steps:,} updates per chain asked (steps/sweeps): "
                   f"the estimates come from {kept:,} kept updates per chain; raise time_limit for the whole run")
    return out
