"""The Gibbs sampler driver: chains, rounds, stopping rules and estimates.

`run_gibbs` checks its inputs, derives the kernel arrays once, starts ``chains`` chains from
dispersed states and runs them in *rounds* (every chain does the same number of single-variable
updates per round, chains in parallel on ``threads`` nogil threads). Between rounds it folds the
Rao-Blackwellised sums into per-chain batches, checks ``time_limit`` and ``tolerance``, calls
``on_round`` and lets Ctrl-C stop the run (the current round finishes, then KeyboardInterrupt
is re-raised; the graph is never modified).

Rao-Blackwellisation: every time a target variable is updated its full conditional
distribution (not its new value) is added to the chain's sums. Because each single-site Gibbs
update leaves the target distribution invariant and the site is chosen independently of the
state, the state just before an update is (at stationarity) a draw from p, so the average of the
conditionals is an unbiased estimate of the marginal with lower variance than counting values.

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder(); x = b.add_variable(); w = b.add_weight(1.0)
>>> _ = b.add_factor(FactorFunction.ISTRUE, [x], weight=w)
>>> r = run_gibbs(b.build(), [x], GibbsConfig(steps=20_000, seed=1))
>>> bool(abs(r.marginals[0, 1] - 1 / (1 + np.exp(-2.0))) < 1e-9)  # one variable: RB is exact
True
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from pdbq.errors import InferenceError
from pdbq.graph.layout import FactorGraph, validate
from pdbq.inference.mcmc.config import GibbsConfig
from pdbq.inference.mcmc.constant import constant_targets, forced_targets
from pdbq.inference.mcmc.feasibility import violated_table_factor
from pdbq.inference.mcmc.feasible_start import feasible_world
from pdbq.inference.mcmc.estimates import STORE_BYTES, BatchStore
from pdbq.inference.mcmc.kernels import (
    MODE_ALIAS,
    MODE_SWEEP,
    MODE_UNIFORM,
    Accum,
    Best,
    ChainState,
    KernelGraph,
    Schedule,
    group_sums_into,
    prepare_kernel_graph,
    run_chain,
    value_dtype,
)
from pdbq.inference.mcmc.rng import chain_generators, chain_states
from pdbq.memory import check_bytes
from pdbq.inference.mcmc.run_book import (  # noqa: F401 - BURN_IN_SHARE, MIN_ESS: re-exported, as before
    BURN_IN_SHARE,
    MIN_ESS,
    MIN_ROUNDS_FOR_TOLERANCE,
    ChainBatches,
    LiveEstimates,
    RunBook,
    RunPlan,
    batch_estimates,
    diagnose,
    no_estimates,
    plan_run,
)

_MIN_ROUNDS_FOR_TOLERANCE = MIN_ROUNDS_FOR_TOLERANCE

__all__ = [
    "run_gibbs",
    "GibbsResult",
    "GibbsTrace",
    "RoundInfo",
    "check_sites",
    "make_schedule",
    "initial_states",
    "Moves",
    "MoveContext",
    "ChainMoves",
    "check_targets",
    "ChainBatches",
    "batch_estimates",
    "start_chains",
    "StartedRun",
    "result_from_book",
]

_FIXED_ROUNDS = 64  # rounds of a run with an exact step count (batches for the error estimates)
_MAX_ROUND = 1 << 20
_MIN_ROUND = 1 << 12  # updates (~2 ms): a kernel call and the thread hand-off cost tens of µs
_CHUNK_SECONDS = 0.05  # with a deadline, kernel calls are cut into chunks of about this wall time
_FIRST_CHUNK = 1000  # the first call also compiles (or loads) the kernels
# With a deadline, explicit burn-in ends after this share of the run's time at most, so that the
# rest of it samples: a run the clock cuts answers from what it kept, with a warning, not NULL.
BURN_IN_TIME_SHARE = 0.5


@dataclass(frozen=True, eq=False)
class GibbsTrace:
    """Running estimates for plotting: ``estimates[i]`` after ``steps[i]`` updates per chain
    (burn-in excluded); at most `GibbsConfig.trace_points` points, evenly thinned."""

    steps: np.ndarray  # int64[points]
    estimates: np.ndarray  # float64[points, n_targets, max_card]
    # batch-means standard errors at each point (NaN while too few batches; 0 for evidence)
    stderr: np.ndarray | None = None  # float64[points, n_targets, max_card]


@dataclass(frozen=True, eq=False)
class GibbsResult:
    """Marginal estimates for ``targets`` (rows in the order given).

    marginals/stderr: float64[n_targets, max_card], 0 beyond a target's cardinality; evidence
    targets are point masses with stderr 0. rhat: split R-hat (NaN when too few batches);
    ess: effective sample size (see `estimates.effective_sample_size`); steps/burn_in: updates
    per chain; warnings: non-convergence and stopping notes.
    """

    targets: np.ndarray
    cardinality: np.ndarray
    marginals: np.ndarray
    stderr: np.ndarray
    rhat: np.ndarray
    ess: np.ndarray
    steps: int
    burn_in: int
    chains: int
    seconds: float
    warnings: tuple[str, ...]
    trace: GibbsTrace
    batches: ChainBatches | None = None  # what the estimates came from (pooling chain groups)

    @property
    def converged(self) -> bool:
        """True when no target's split R-hat exceeds the threshold (NaN counts as unknown: False)."""
        return not any("R-hat" in w for w in self.warnings)

    def max_halfwidth(self) -> float:
        """Largest 95% half-width (1.96 stderr) over all targets and values."""
        return float(1.96 * np.nanmax(self.stderr)) if self.stderr.size else 0.0


@dataclass(frozen=True)
class RoundInfo:
    """Passed to ``on_round`` after every round."""

    steps: int  # updates per chain so far, burn-in included
    burn_in: bool  # still burning in
    max_stderr: float  # NaN while burning in or while too few batches
    elapsed: float  # seconds since the run started


class MoveContext(NamedTuple):
    """What `run_gibbs` hands a `Moves.start`: the chains it made (rows of ``values``/``gsums``
    back ``states``; ``accs[c]`` collects chain c's Rao-Blackwellised sums and counts)."""

    graph: FactorGraph
    kernel: KernelGraph
    sched: Schedule
    states: list  # list[ChainState], one per chain
    accs: list  # list[Accum], one per chain
    seed: int
    # For a step whose one unit is long (many copies, a quench): call between its pieces, from
    # any thread. True once the round must end (its deadline passed): return early, the round is
    # discarded. Raises when the statement was cancelled (the run ends with that error).
    stop: Callable[[], bool] | None = None
    # states[0] is chain ``first`` of the whole run (`GibbsConfig.first_chain`): a move's own
    # streams are drawn by the run's chain index (`rng.group_states`), so a chain group on a Dask
    # worker draws what those chains draw in one process
    first: int = 0


class ChainMoves(NamedTuple):
    """One round's work, as `run_gibbs`'s round loop calls it.

    ``advance(c, n, collect)`` makes ``n`` updates (a multiple of `Moves.unit`) of chain ``c``,
    adding conditionals to ``accs[c]`` when ``collect``; chains run on separate threads, so it
    touches chain c's state only. ``end_round(phase)`` runs between rounds on the driver's
    thread: phase "burn_in" (a burn-in round), "kept" (its sums went into the estimates) or
    "cut" (the deadline cut it short; discarded)."""

    advance: Callable[[int, int, bool], None]
    end_round: Callable[[str], None] | None = None


class Moves(NamedTuple):
    """The move step of `run_gibbs`'s chains; the default is the single-site Gibbs kernel.

    ``unit``: updates per chain of one indivisible step (round and chunk lengths are multiples
    of it; also the "sweep" of the default run length when larger than the sites).
    ``burn_in``: updates per chain of explicit burn-in the moves need before any sum is kept
    when the run is budget-governed (e.g. tempering's ladder adapts in burn-in only).
    ``start(ctx)``: builds the `ChainMoves` once the chains exist.
    ``exact``: bool[n_vars], True where the moves add a target's exact conditional given the
    other sampled variables (cutset sampling): identical batch means of such a target are its
    answer, not a frozen chain (as for a target without neighbours).
    ``independent``: every step is an independent draw of the whole world (static blocks): a
    target whose draws all sit within 1e-6 of one value is a near-certain value, not a chain
    that never moved, so the frozen-chain rule of `estimates.batch_statistics` is off (its
    resolution floor stays)."""

    unit: int = 1
    burn_in: int = 0
    start: Callable[[MoveContext], ChainMoves] | None = None
    exact: np.ndarray | None = None
    independent: bool = False


def _single_site(ctx: MoveContext) -> ChainMoves:
    unused = Best(np.zeros(2), np.zeros(0, dtype=ctx.states[0].values.dtype), np.ones(1))
    g, kg, sched, states, accs = ctx.graph, ctx.kernel, ctx.sched, ctx.states, ctx.accs

    def advance(c: int, n: int, collect: bool) -> None:
        run_chain(g, kg, states[c], sched, accs[c], unused, n, collect)

    return ChainMoves(advance)


# ---------------------------------------------------------------------------------------------
# input checks shared with annealing


def _int_array(name: str, arr: object) -> np.ndarray:
    a = np.asarray(arr)
    if a.ndim != 1:
        raise InferenceError(f"'{name}' must be a 1-d array of variable ids")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise InferenceError(f"'{name}' must hold integer variable ids, got dtype {a.dtype}")
    return a.astype(np.int64)


def check_sites(graph: FactorGraph, sites: object | None) -> np.ndarray:
    """The variables to update (int32): all non-evidence variables by default; otherwise
    distinct, in range, and not evidence (an error names the first offender)."""
    if sites is None:
        return np.flatnonzero(graph.evidence < 0).astype(np.int32)
    s = _int_array("sites", sites)
    bad = (s < 0) | (s >= graph.n_vars)
    if bad.any():
        raise InferenceError(f"sites: variable id {int(s[bad][0])} is out of range (graph has {graph.n_vars})")
    ev = graph.evidence[s] >= 0
    if ev.any():
        raise InferenceError(f"sites: variable {int(s[ev][0])} is evidence and cannot be sampled")
    seen = np.bincount(s, minlength=graph.n_vars)
    if (seen > 1).any():
        raise InferenceError(f"sites: variable {int(np.flatnonzero(seen > 1)[0])} is listed twice")
    return s.astype(np.int32)


class CheckedTargets(NamedTuple):
    targets: np.ndarray  # int64, as given
    sites: np.ndarray  # int32
    uniq: np.ndarray  # distinct targets, sorted
    inverse: np.ndarray  # targets = uniq[inverse]
    is_ev: np.ndarray  # bool per uniq
    live: np.ndarray  # non-evidence distinct targets


def check_targets(graph: FactorGraph, targets: object, sites: object | None) -> CheckedTargets:
    """Targets in range; every non-evidence target among the (checked) sites."""
    tg = _int_array("targets", targets)
    bad = (tg < 0) | (tg >= graph.n_vars)
    if bad.any():
        raise InferenceError(f"targets: variable id {int(tg[bad][0])} is out of range (graph has {graph.n_vars})")
    sites_arr = check_sites(graph, sites)
    uniq, inverse = np.unique(tg, return_inverse=True)
    is_ev = graph.evidence[uniq] >= 0
    live = uniq[~is_ev]
    in_sites = np.zeros(graph.n_vars, dtype=bool)
    in_sites[sites_arr] = True
    missing = live[~in_sites[live]]
    if missing.size:
        raise InferenceError(f"target variable {int(missing[0])} is neither evidence nor among the sampled sites")
    return CheckedTargets(tg, sites_arr, uniq, inverse, is_ev, live)


def make_schedule(sites: np.ndarray, scan: str, selection: tuple[np.ndarray, np.ndarray] | None) -> Schedule:
    """Site choice: a selection alias table (prob, alias) over ``sites`` wins over ``scan``."""
    if selection is not None:
        try:
            prob, alias = selection
        except (TypeError, ValueError):
            raise InferenceError("selection must be a pair (prob float64[], alias int32[])") from None
        prob = np.ascontiguousarray(prob, dtype=np.float64)
        alias = np.asarray(alias)
        if prob.shape != sites.shape or alias.shape != sites.shape:
            raise InferenceError(
                f"selection: prob and alias need one entry per site ({sites.shape[0]}), got {prob.shape[0]} and {alias.shape[0]}"
            )
        if not np.all((prob >= 0.0) & (prob <= 1.0)):
            raise InferenceError("selection: alias-table probabilities must lie in [0, 1]")
        if alias.size and (not np.issubdtype(alias.dtype, np.integer) or alias.min() < 0 or alias.max() >= sites.shape[0]):
            raise InferenceError("selection: alias entries must be indices into sites")
        return Schedule(sites, MODE_ALIAS, prob, np.ascontiguousarray(alias, dtype=np.int32))
    mode = MODE_SWEEP if scan == "sweep" else MODE_UNIFORM
    return Schedule(sites, mode, np.zeros(0), np.zeros(0, dtype=np.int32))


class ImpossibleStateError(InferenceError):
    """A chain ended in a world a hard constraint forbids (see `_check_hard`): its samples are no
    answer. AUTO's pilot catches it and moves on to block moves that cross such walls."""


def _check_hard(graph: FactorGraph, states) -> None:
    """A chain whose last state still breaks a hard constraint never reached a world of positive
    probability (its hard penalty outweighs every soft weight, so once there it stays): its
    estimates average impossible worlds. An error, not a number (issue 12)."""
    for c, st in enumerate(states):
        f = violated_table_factor(graph, st.values)
        if f >= 0:
            raise ImpossibleStateError(
                f"chain {c} found no world of positive probability: its last state still violates the hard "
                f"constraint of factor {f} (a 0 entry of an imported table); the evidence may be impossible. "
                "Use EXACT to decide, or start more chains"
            )


class SetupCut(Exception):
    """The run's deadline passed while its chains were set up (their states allocated and
    started, tempered copies made): the run samples nothing and says so."""


def state_bytes(graph: FactorGraph, dtype: np.dtype) -> int:
    """Bytes of one chain state: a value per variable and a sum per factor group."""
    return int(graph.n_vars) * np.dtype(dtype).itemsize + int(graph.n_groups) * 8


def initial_states(
    graph: FactorGraph, kg: KernelGraph, chains: int, seed: int, dispersed: bool, first: int = 0,
    feasible: bool = False, until: float | None = None, deadline: float | None = None,
) -> tuple[list[ChainState], np.ndarray, np.ndarray]:
    """Per-chain states (values, group sums, rng, sweep position) and the backing 2-d arrays.

    Dispersed starts: chain 0 takes every variable's lowest value, chain 1 its highest, other
    chains uniform at random; evidence is clamped in every chain. ``first``: these are chains
    ``first .. first + chains - 1`` of a larger run (each chain's start and stream depend on its
    index only). ``feasible``: each chain starts from its own world that every zero entry allows
    (`feasible_world`, seeded by the run's seed and the chain's index), where one is found
    before ``until`` (a `time.perf_counter()` instant; the others keep their dispersed starts).
    ``deadline``: `SetupCut` when it passes before every chain has its start (a thousand chains
    over a hundred thousand variables take seconds).
    """
    card = graph.cardinality
    dtype = value_dtype(kg.max_card)
    check_bytes(chains * state_bytes(graph, dtype),
                f"the states of {chains:,} chains over {graph.n_vars:,} variables", option="chains")
    values = np.empty((chains, graph.n_vars), dtype=dtype)
    gens = chain_generators(seed, first + chains)[first:]
    for c in range(chains):
        if deadline is not None and time.perf_counter() >= deadline:
            raise SetupCut(f"{c:,} of {chains:,} chain starts drawn")
        if dispersed and first + c == 0:
            values[c] = 0
        elif dispersed and first + c == 1:
            values[c] = card - 1
        else:
            values[c] = gens[c].integers(0, card) if graph.n_vars else 0
    ev = graph.evidence >= 0
    values[:, ev] = graph.evidence[ev]
    if feasible:
        for c in range(chains):
            world = feasible_world(graph, int(np.random.SeedSequence([seed, first + c]).generate_state(1)[0]),
                                   deadline=until)
            if world is not None:
                values[c] = world
    gsums = np.zeros((chains, graph.n_groups))
    rng = chain_states(seed, first + chains)[first:].copy()
    pos = np.zeros(chains, dtype=np.int64)
    states = [ChainState(values[c], gsums[c], rng[c : c + 1], pos[c : c + 1]) for c in range(chains)]
    return states, values, gsums


def _threads(requested: int | None, chains: int) -> int:
    return max(1, min(chains, requested if requested is not None else (os.cpu_count() or 1)))


class _Pool:
    """Runs one call per chain per round, on nogil threads when more than one is asked for."""

    def __init__(self, threads: int):
        self.ex = ThreadPoolExecutor(max_workers=threads) if threads > 1 else None

    def map(self, fn: Callable, args: Sequence[tuple]) -> list:
        if self.ex is None:
            return [fn(*a) for a in args]
        futures = [self.ex.submit(fn, *a) for a in args]
        return [f.result() for f in futures]

    def close(self) -> None:
        if self.ex is not None:
            self.ex.shutdown(wait=True, cancel_futures=True)


# ---------------------------------------------------------------------------------------------
# the driver


class _Chains:
    """The chains of one `run_gibbs` call and its steps: `burn_in`, `sample` (the kept rounds
    with the stopping rule, booked in ``book``, a `RunBook`), `estimates`. Built by
    `start_chains` after the input checks."""

    def __init__(self, graph: FactorGraph, kg: KernelGraph, sched: Schedule, live: np.ndarray, kmax: int,
                 config: GibbsConfig, plan: RunPlan, moves: Moves, t0: float,
                 on_round: Callable[[RoundInfo], None] | None, poll: Callable[[], None] | None = None,
                 cut_setup: bool = True):
        self.graph, self.kg, self.config, self.plan, self.t0, self.on_round = graph, kg, config, plan, t0, on_round
        self.poll = poll
        self._round_stop: float | None = None  # the deadline of the round under way
        self._stopped_early = False  # a move step returned early at it (`stop_now`)
        self.live, self.kmax = live, kmax
        chains = config.chains
        n_live = live.shape[0]
        unit = max(int(moves.unit), 1)
        self.unit = unit
        constant = constant_targets(graph, kg, live) | forced_targets(graph, live)
        if moves.exact is not None:
            constant = constant | moves.exact[live]
        # the search for feasible starts gets at most a quarter of the time left
        until = None if plan.stop_at is None else time.perf_counter() + 0.25 * max(plan.stop_at - time.perf_counter(), 0.0)
        self.states, _, self.gsums = initial_states(graph, kg, chains, config.seed, config.init != "random",
                                                    config.first_chain, feasible=config.init == "feasible",
                                                    until=until, deadline=plan.stop_at if cut_setup else None)
        tix = np.full(graph.n_vars, -1, dtype=np.int32)
        tix[live] = np.arange(n_live, dtype=np.int32)
        # the per-chain estimate sums and the batch store (`BatchStore`: at least 4 batch pairs)
        per_target = chains * max(n_live, 1) * (kmax + 1) * 8
        slots = max(4, min(32, STORE_BYTES * chains // config.all_chains // max(2 * per_target, 1)))
        check_bytes(per_target + 2 * slots * per_target,
                    f"the estimates of {chains:,} chains for {n_live:,} variables of up to {kmax:,} values",
                    option="chains")
        self.rsums = np.zeros((chains, n_live, kmax))
        self.rcounts = np.zeros((chains, n_live), dtype=np.int64)
        self.accs = [Accum(tix, self.rsums[c], self.rcounts[c]) for c in range(chains)]
        # the moves' set-up (tempered copies of every chain) reads the deadline through stop_now
        self._round_stop = plan.stop_at if cut_setup else None
        self.step = (moves.start or _single_site)(
            MoveContext(graph, kg, sched, self.states, self.accs, config.seed, self.stop_now, config.first_chain))
        self._round_stop, self._stopped_early = None, False
        # sized as the whole run's store (a group of its chains batches as the whole run does)
        store = BatchStore(chains, n_live, kmax, max_bytes=STORE_BYTES * chains // config.all_chains)
        self.pool = _Pool(_threads(config.threads, chains))
        # The round schedule depends on the graph and the options alone, never on the clock, so
        # the sample sequence is a function of the seed; the clock only decides after which
        # round a run stops (a round cut short by the deadline is discarded).
        self.round_len = _whole(_round_length(plan.fixed, plan.steps, _sweep_equivalent(sched, live), n_live,
                                              2 * store.slots), unit)
        # chunks follow the clock when something must be checked within a round: a deadline, or
        # a statement that may be cancelled (a fixed run's round can take minutes)
        self.clocked = plan.stop_at is not None or poll is not None
        self.chunk = _whole(min(self.round_len, _FIRST_CHUNK), unit) if self.clocked else self.round_len
        self.book = RunBook(graph, live, config, plan, constant, store, self.round_len, independent=moves.independent)

    def _past_deadline(self) -> bool:
        return self.plan.stop_at is not None and time.perf_counter() >= self.plan.stop_at

    def stop_now(self) -> bool:
        """`MoveContext.stop`: polls a cancel (raises) and tells whether the round's deadline passed."""
        if self.poll is not None:
            self.poll()
        if self._round_stop is not None and time.perf_counter() >= self._round_stop:
            self._stopped_early = True
            return True
        return False

    def run_round(self, n: int, collect: bool, stop_at: float | None = None) -> int:
        """n updates of every chain; returns the updates made, fewer than n when the deadline
        (``stop_at``, default the run's) came first (round incomplete). ``poll`` is called
        between chunks (about every `_CHUNK_SECONDS`): a cancel ends the run there."""
        graph, chains = self.graph, self.config.chains
        stop_at = self.plan.stop_at if stop_at is None else stop_at
        self._round_stop, self._stopped_early = stop_at, False
        if graph.n_groups:  # re-derived each round: no drift from incremental updates
            for c in range(chains):
                group_sums_into(graph, self.kg.tables, self.states[c].values, self.gsums[c])
        if collect:
            self.rsums[:] = 0.0
            self.rcounts[:] = 0
        left = n
        while left > 0:
            m = min(left, self.chunk)
            tr = time.perf_counter()
            self.pool.map(self.step.advance, [(c, m, collect) for c in range(chains)])
            now = time.perf_counter()
            if self._stopped_early:  # a move step stopped inside this chunk: the round is incomplete
                return n - left
            left -= m
            if self.poll is not None:
                self.poll()
            if self.clocked:
                dt = now - tr
                # chunks (not rounds) follow the clock, to check the deadline every ~50 ms
                self.chunk = min(_whole(int(min(max(m * _CHUNK_SECONDS / max(dt, 1e-9), 1000), self.round_len)),
                                        self.unit), self.round_len)
            if stop_at is not None and now >= stop_at and left > 0:
                return n - left
        return n

    def end_round(self, phase: str) -> None:
        """Tell the moves a round ended (`ChainMoves.end_round`)."""
        _end_round(self.step, phase)

    def burn_in(self) -> None:
        """The explicit burn-in rounds (none when burn-in is a share of the run). With a deadline,
        burn-in gets at most `BURN_IN_TIME_SHARE` of the time left: then it ends early (`cut_burn_in`)
        and the rest of the time samples, so a run the clock ends in burn-in still answers."""
        book, stop_at = self.book, self.plan.stop_at
        until = None if stop_at is None else self.t0 + BURN_IN_TIME_SHARE * max(stop_at - self.t0, 0.0)
        while book.burned < self.plan.burn_in:
            n = _whole(min(self.round_len, self.plan.burn_in - book.burned), self.unit)
            if self._past_deadline():
                book.stopped_by = "time"
                return
            if until is not None and time.perf_counter() >= until:
                book.burn_in_cut()
                return
            made = self.run_round(n, False, until)
            self.end_round("burn_in")  # a cut burn-in round still adapts: nothing was kept
            book.burned += made
            if made < n:
                book.burn_in_cut()
                return
            if self.on_round is not None:
                self.on_round(RoundInfo(steps=book.burned, burn_in=True, max_stderr=float("nan"),
                                        elapsed=time.perf_counter() - self.t0))
            if self._past_deadline():
                book.stopped_by = "time"
                return

    def sample(self) -> None:
        """Kept rounds until the step count, the deadline or the tolerance ends the run."""
        book, steps_target = self.book, self.plan.steps
        while not book.stopped_by:
            n = self.round_len if steps_target is None else _whole(min(self.round_len, steps_target - book.done),
                                                                   self.unit)
            if n <= 0:
                book.stopped_by = "steps"
                return
            if self._past_deadline():
                book.stopped_by = "time"  # e.g. planning or the kernel arrays spent the budget
                return
            if self.run_round(n, True) < n:
                self.end_round("cut")
                book.stopped_by = "time"
                return
            self.end_round("kept")
            reached = book.keep_round(self.rsums, self.rcounts, n)
            if self.on_round is not None:
                self.on_round(RoundInfo(steps=book.burned + book.done, burn_in=False, max_stderr=book.max_se,
                                        elapsed=time.perf_counter() - self.t0))
            if reached:
                book.stopped_by = "tolerance"
            elif self._past_deadline():
                book.stopped_by = "time"

    def check_hard(self) -> None:
        """`ImpossibleStateError` when a chain's state breaks a hard constraint (`_check_hard`)."""
        _check_hard(self.graph, self.states)

    def close(self) -> None:
        self.pool.close()

    def estimates(self) -> tuple[LiveEstimates, int, list[str], ChainBatches]:
        """`RunBook.estimates`, after the hard-constraint check of the chains' states."""
        if self.book.kept() > 0:
            # only a chain that ran can be blamed for its state (no kept sample: NaN and a warning)
            self.check_hard()
        return self.book.estimates()


def _assemble(graph: FactorGraph, checked: CheckedTargets, kmax: int, live_est: LiveEstimates,
              trace: tuple[list[int], list[np.ndarray], list[np.ndarray]]) -> tuple[np.ndarray, ...]:
    """Rows per requested target (duplicates and evidence included) and the trace over them:
    (marginals, stderr, rhat, ess, `GibbsTrace`)."""
    uniq, inverse, is_ev, live = checked.uniq, checked.inverse, checked.is_ev, checked.live
    trace_steps, trace_est, trace_se = trace
    T = uniq.shape[0]
    marg = np.zeros((T, kmax))
    se = np.zeros((T, kmax))
    rhat = np.ones(T)
    ess = np.full(T, np.inf)
    ev_rows = np.flatnonzero(is_ev)
    marg[ev_rows, graph.evidence[uniq[ev_rows]]] = 1.0
    live_rows = np.flatnonzero(~is_ev)
    marg[live_rows] = live_est.est
    se[live_rows] = live_est.se
    rhat[live_rows] = live_est.rhat
    ess[live_rows] = live_est.ess
    if trace_steps:
        tr_live = np.stack(trace_est)
        tr = np.broadcast_to(marg, (len(trace_steps), T, kmax)).copy()
        tr[:, live_rows] = tr_live
        tse = np.zeros_like(tr)
        beyond = np.arange(kmax)[None, :] >= graph.cardinality[live][:, None]
        tse[:, live_rows] = np.where(beyond[None], 0.0, np.stack(trace_se))
    else:
        tr = np.zeros((0, T, kmax))
        tse = np.zeros_like(tr)
    trace_out = GibbsTrace(np.asarray(trace_steps, dtype=np.int64), tr[:, inverse], tse[:, inverse])
    return marg[inverse], se[inverse], rhat[inverse], ess[inverse], trace_out


def run_gibbs(
    graph: FactorGraph,
    targets: Sequence[int] | np.ndarray,
    config: GibbsConfig = GibbsConfig(),
    *,
    sites: Sequence[int] | np.ndarray | None = None,
    selection: tuple[np.ndarray, np.ndarray] | None = None,
    on_round: Callable[[RoundInfo], None] | None = None,
    kernel: KernelGraph | None = None,
    deadline: float | None = None,
    moves: Moves = Moves(),
    poll: Callable[[], None] | None = None,
) -> GibbsResult:
    """Estimate the marginals of ``targets`` by single-site Gibbs sampling.

    ``sites``: variables to update (default: all non-evidence variables); every non-evidence
    target must be among them. ``selection``: an alias table ``(prob, alias)`` over ``sites``
    for query-aware site choice (O(1) draws); without it ``config.scan`` decides.
    ``on_round(info: RoundInfo)`` is called after each round. ``kernel``: the arrays
    `prepare_kernel_graph` derived from this very graph in an earlier run (a query engine keeps
    them with a cached graph); the graph was validated when they were made. ``deadline``: a
    `time.perf_counter()` instant the whole run (burn-in included) must end by, like
    ``config.time_limit`` but set by a caller that already spent part of the budget.
    ``moves``: what one step of a chain is (`Moves`; default single-site Gibbs updates);
    `mixing.run_mixing` passes block moves and replica exchange here, so rounds, stopping,
    estimates and warnings are the same for every move.
    ``poll()``: called about every 50 ms of sampling (between chunks of a round, and by long
    move steps); whatever it raises (a cancelled statement) ends the run. The sample sequence
    does not depend on it.
    """
    started = start_chains(graph, targets, config, sites=sites, selection=selection, on_round=on_round, kernel=kernel,
                           deadline=deadline, moves=moves, poll=poll)
    run = started.chains
    if run is None:
        return result_from_book(graph, started, None, None)
    try:
        run.burn_in()
        run.sample()
    finally:
        run.close()
    return result_from_book(graph, started, run.book, run.estimates())


class StartedRun(NamedTuple):
    """A run's checked inputs, plan and chains (None: nothing to sample), from `start_chains`."""

    config: GibbsConfig  # checked
    checked: CheckedTargets
    kmax: int  # largest cardinality of a target
    plan: RunPlan
    chains: _Chains | None
    t0: float  # time.perf_counter() at the start
    note: str = ""  # why there are no chains when the deadline cut their set-up


def start_chains(graph: FactorGraph, targets, config: GibbsConfig, *, sites=None, selection=None, on_round=None,
                 kernel: KernelGraph | None = None, deadline: float | None = None, moves: Moves = Moves(),
                 poll: Callable[[], None] | None = None, cut_setup: bool = True) -> StartedRun:
    """The checks and set-up of `run_gibbs` (same arguments): the chains made, started from
    their initial states, nothing run yet. Chain groups on Dask workers drive theirs round by
    round (`pdbq.distributed.chain_rounds`); their client keeps the deadline, so their set-up
    is not cut at it (``cut_setup`` False)."""
    config = config.check()
    if kernel is None:
        validate(graph)
    t0 = time.perf_counter()
    checked = check_targets(graph, targets, sites)
    sites_arr, uniq, live = checked.sites, checked.uniq, checked.live
    sched = make_schedule(sites_arr, config.scan, selection)
    kmax_t = int(graph.cardinality[uniq].max()) if uniq.size else 2
    n_sites = sites_arr.shape[0]
    plan = plan_run(config, moves, n_sites, live.shape[0], t0, deadline)
    chains, note = None, ""
    if n_sites and live.shape[0]:
        kg = kernel if kernel is not None else prepare_kernel_graph(graph)
        try:
            chains = _Chains(graph, kg, sched, live, kmax_t, config, plan, moves, t0, on_round, poll, cut_setup)
        except SetupCut as e:
            note = (f"the time limit ended the run while it set up {config.chains:,} chains over {graph.n_vars:,} "
                    f"variables ({e}, {time.perf_counter() - t0:.2f} s): its {live.shape[0]:,} target(s) got too few "
                    "updates for an estimate (none): their estimates are NULL (NaN); lower chains (or tempering), "
                    "or raise time_limit")
    return StartedRun(config, checked, kmax_t, plan, chains, t0, note)


def result_from_book(graph: FactorGraph, started: StartedRun, book: RunBook | None,
                     estimates: tuple[LiveEstimates, int, list[str], ChainBatches] | None) -> GibbsResult:
    """The `GibbsResult` of a run from its books (None: nothing was sampled) and their
    ``estimates`` (`RunBook.estimates`)."""
    checked, kmax_t, config = started.checked, started.kmax, started.config
    live_est, dropped, warnings, batches = (estimates if estimates is not None
                                            else (no_estimates(checked.live.shape[0], kmax_t), 0, [], None))
    if started.note:
        warnings = [started.note, *warnings]
    done = book.done if book is not None else 0
    burned = book.burned if book is not None else 0
    trace = (book.trace_steps, book.trace_est, book.trace_se) if book is not None else ([], [], [])
    marg, se, rhat, ess, gtrace = _assemble(graph, checked, kmax_t, live_est, trace)
    tg = checked.targets
    return GibbsResult(
        targets=tg,
        cardinality=graph.cardinality[tg].astype(np.int64),
        marginals=marg,
        stderr=se,
        rhat=rhat,
        ess=ess,
        steps=int(done - dropped),
        burn_in=int(burned + dropped),
        chains=config.chains,
        seconds=time.perf_counter() - started.t0,
        warnings=tuple(warnings),
        trace=gtrace,
        batches=batches,
    )


def _whole(n: int, unit: int) -> int:
    """n rounded up to a positive multiple of unit (0 stays 0: nothing left to do)."""
    return 0 if n <= 0 else -(-n // unit) * unit


def _end_round(step: ChainMoves, phase: str) -> None:
    if step.end_round is not None:
        step.end_round(phase)


def _round_length(fixed: bool, steps: int | None, per_target: int, n_live: int, batches: int) -> int:
    """Updates per chain per round: a function of the run's shape only (never of the clock).
    A fixed run has as many rounds as the batch store holds batches (at most `_FIXED_ROUNDS`), so
    it never merges batches. A run a budget ends: about one update of every target per round
    (``per_target``, `_sweep_equivalent`), so the batches, and with them the stopping rule's
    error and R-hat, come as fast as the targets are updated, whatever the number of sites."""
    if fixed:
        return int(min(max(math.ceil(steps / min(_FIXED_ROUNDS, batches)), 1), _MAX_ROUND))
    # enough updates per round that the per-round bookkeeping over the targets and the kernel
    # call's start-up stay small next to the sampling
    return int(min(max(per_target, 8 * n_live, _MIN_ROUND), _MAX_ROUND))


def _sweep_equivalent(sched: Schedule, live: np.ndarray) -> int:
    """Updates per chain in which the least often chosen target is chosen once on average: the
    number of sites for a sweep or uniform scan; 1 / (smallest target selection probability)
    with a selection table (query-aware: far fewer than the sites when the targets hold most of
    the selection mass)."""
    n = sched.sites.shape[0]
    if sched.mode != MODE_ALIAS or n == 0 or live.size == 0:
        return n
    # probability of each site under the alias table: its own column's kept share plus the
    # columns that alias to it
    p = sched.prob.copy()
    np.add.at(p, sched.alias, 1.0 - sched.prob)
    pos = np.full(int(max(sched.sites.max(), live.max())) + 1, -1, dtype=np.int64)
    pos[sched.sites] = np.arange(n)
    at = pos[live]
    pt = p[at[at >= 0]] / n
    if pt.size == 0 or not pt.min() > 0:
        return n
    return int(min(math.ceil(1.0 / float(pt.min())), n))
