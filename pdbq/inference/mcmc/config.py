"""Typed, frozen settings for the MCMC engine (Gibbs sampling and annealed MAP).

Both are passed explicitly to `run_gibbs` / `anneal_map`; `check()` turns a bad value into an
`OptionError` naming the field before any kernel runs.

>>> GibbsConfig(steps=20_000, chains=2, seed=7).steps
20000
"""

from __future__ import annotations

from dataclasses import dataclass

from pdbq.errors import OptionError

__all__ = ["GibbsConfig", "AnnealConfig", "MixingConfig", "SCANS", "INITS", "BLOCK_MODES", "MAX_CHAINS", "MAX_THREADS", "MAX_COUNT",
           "MAX_TEMPERING", "MAX_CHAIN_COPIES"]

SCANS = ("sweep", "random")
INITS = ("dispersed", "random", "feasible")


# Each chain keeps its own state, group sums, random stream and estimate sums: memory and
# set-up grow linearly, and diagnostics gain nothing from thousands of chains.
MAX_CHAINS = 1024
# Threads beyond this only add scheduling overhead on any machine pdbq targets.
MAX_THREADS = 1024
# Replica exchange: a ladder of this many temperatures already spans β from 1 to ~0 finely;
# copies × chains is bounded by MAX_CHAIN_COPIES (each copy is a chain state swept every cycle).
MAX_TEMPERING = 256
MAX_CHAIN_COPIES = 4096
# Step and seed counts are int64 inside the kernels.
MAX_COUNT = 2**62

_MAXIMA = {
    "chains": (MAX_CHAINS, "each chain keeps its own copy of the state and estimates"),
    "threads": (MAX_THREADS, "more threads than that only add scheduling overhead"),
    "workers": (MAX_CHAINS, "each worker runs whole chains"),
    "jumps": (64, "every pair of kept modes is a jump, so the jump set grows with its square"),
    "tempering": (MAX_TEMPERING, "each tempered copy is a full chain state swept every cycle"),
}


def _positive_int(name: str, value: object, *, allow_none: bool = False, allow_zero: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if allow_zero else 1):
        bound = "a non-negative" if allow_zero else "a positive"
        raise OptionError(f"option '{name}' must be {bound} integer, got {value!r}")
    check_maximum(name, value)


def check_maximum(name: str, value: int | float) -> None:
    """`OptionError` when an integer option is beyond what inference can represent or use."""
    top, why = _MAXIMA.get(name, (MAX_COUNT, "counts are 64-bit integers inside the kernels"))
    if value > top:
        shown = f"{value:.3g}" if isinstance(value, float) else (str(value) if value < 10**15 else f"a {len(str(value))}-digit number")
        raise OptionError(f"option '{name}' must be at most {top:,} ({why}), got {shown}")


def _positive_float(name: str, value: object, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise OptionError(f"option '{name}' must be a positive number, got {value!r}")


@dataclass(frozen=True)
class GibbsConfig:
    """Settings of one Gibbs run.

    steps: single-variable updates per chain after burn-in. With no `tolerance`/`time_limit` the
        run does exactly this many; ``None`` means ``default_sweeps`` passes over the sites (at
        least 10,000 updates) unless a tolerance or time limit ends the run.
    burn_in: updates per chain discarded first; ``None`` means ``steps // 10`` for a fixed run and,
        for a run a budget (tolerance, time limit) ends, the leading quarter of what it ran.
    chains: independent chains, started from dispersed states (chain 0 all lowest values,
        chain 1 all highest, the rest uniform at random) so a stuck chain shows in R-hat.
    threads: worker threads; ``None`` means min(chains, CPU count).
    seed: root of `numpy.random.SeedSequence`; one spawned stream per chain.
    time_limit: seconds (burn-in included) by which the run stops; a round the clock cuts short is
        discarded (docs/inference.md, "Run length and burn-in").
    tolerance: stop once every target's 95% half-width (1.96 standard errors) is at most this and
        the answers are within it jointly: the expected number off by more is at most
        `estimates.JOINT_MISS` (0.05; with one target the same rule).
    tolerance_stops: False keeps sampling to the budget (steps, time limit) even once the
        tolerance is met; a tolerance not met at the end is still a warning (AUTO's domain
        blocks: chains that all agree on one state of a slow domain meet it too early).
    scan: ``"sweep"`` (systematic, in `sites` order) or ``"random"`` (uniform); ignored when a
        selection distribution (alias table) is given.
    init: ``"dispersed"`` (see `chains`), ``"random"`` (every chain uniform at random) or
        ``"feasible"`` (every chain from its own world that the zero entries of the tables allow,
        `feasible_start.feasible_world`, else as ``"dispersed"``: AUTO after a plain pilot stuck
        in impossible worlds).
    trace_points: at most this many running-estimate points are kept for plotting.
    rhat_threshold: split R-hat above this adds a non-convergence warning.
    first_chain / total_chains: when the chains of one answer run as separate groups (on Dask
        workers, `pdbq.distributed.chains`), this run's chain c is chain ``first_chain + c`` of a
        run of ``total_chains`` chains (None: ``chains``): its start, its random stream and the
        round lengths are that chain's, so the groups' batches pool into exactly the estimates
        of one run of ``total_chains`` chains.
    """

    steps: int | None = None
    burn_in: int | None = None
    chains: int = 4
    threads: int | None = None
    seed: int = 0
    time_limit: float | None = None
    tolerance: float | None = None
    tolerance_stops: bool = True
    scan: str = "sweep"
    init: str = "dispersed"
    default_sweeps: int = 200
    trace_points: int = 200
    rhat_threshold: float = 1.1
    first_chain: int = 0
    total_chains: int | None = None

    def check(self) -> GibbsConfig:
        _positive_int("steps", self.steps, allow_none=True)
        _positive_int("burn_in", self.burn_in, allow_none=True, allow_zero=True)
        _positive_int("chains", self.chains)
        _positive_int("threads", self.threads, allow_none=True)
        _positive_int("seed", self.seed, allow_zero=True)
        _positive_float("time_limit", self.time_limit, allow_none=True)
        _positive_float("tolerance", self.tolerance, allow_none=True)
        _positive_int("default_sweeps", self.default_sweeps)
        _positive_int("trace_points", self.trace_points)
        _positive_float("rhat_threshold", self.rhat_threshold)
        if self.scan not in SCANS:
            raise OptionError(f"option 'scan' must be one of {', '.join(SCANS)}; got {self.scan!r}")
        if self.init not in INITS:
            raise OptionError(f"option 'init' must be one of {', '.join(INITS)}; got {self.init!r}")
        if self.trace_points < 2:
            raise OptionError("option 'trace_points' must be at least 2")
        _positive_int("first_chain", self.first_chain, allow_zero=True)
        _positive_int("total_chains", self.total_chains, allow_none=True)
        if self.first_chain + self.chains > self.all_chains:
            raise OptionError(f"chains {self.first_chain}..{self.first_chain + self.chains - 1} are not among the "
                              f"{self.all_chains} chains of the run")
        return self

    @property
    def all_chains(self) -> int:
        """Chains of the whole run this one is a group of (``chains`` when it is the whole run)."""
        return self.chains if self.total_chains is None else self.total_chains


@dataclass(frozen=True)
class AnnealConfig:
    """Settings of simulated annealing for MAP (seeds 000/001: accept with (p(y')/p(y))^(1/τ)).

    Single-site Gibbs at temperature τ: a variable's new value is drawn from its conditional
    raised to 1/τ. τ starts at `temperature` and is multiplied by `cooling` after every pass
    over the sites (len(sites) updates), never going below `min_temperature`. A final greedy
    pass (τ → 0: each variable takes its best value) runs until nothing changes.

    steps: updates per chain (``None``: `default_sweeps` passes over the sites).
    chains/threads/seed/scan: as in `GibbsConfig`; the best state over all chains wins.
    time_limit: seconds after which the run stops at the end of a round.
    """

    temperature: float = 2.0
    cooling: float = 0.95
    min_temperature: float = 0.01
    steps: int | None = None
    chains: int = 4
    threads: int | None = None
    seed: int = 0
    time_limit: float | None = None
    scan: str = "sweep"
    default_sweeps: int = 200
    greedy_final: bool = True

    def check(self) -> AnnealConfig:
        _positive_float("temperature", self.temperature)
        _positive_float("min_temperature", self.min_temperature)
        if isinstance(self.cooling, bool) or not isinstance(self.cooling, (int, float)) or not 0 < self.cooling <= 1:
            raise OptionError(f"option 'cooling' must be in (0, 1], got {self.cooling!r}")
        _positive_int("steps", self.steps, allow_none=True)
        _positive_int("chains", self.chains)
        _positive_int("threads", self.threads, allow_none=True)
        _positive_int("seed", self.seed, allow_zero=True)
        _positive_float("time_limit", self.time_limit, allow_none=True)
        _positive_int("default_sweeps", self.default_sweeps)
        if self.scan not in SCANS:
            raise OptionError(f"option 'scan' must be one of {', '.join(SCANS)}; got {self.scan!r}")
        return self


BLOCK_MODES = ("auto", "off")


@dataclass(frozen=True)
class MixingConfig:
    """Moves that cross modes, added to Gibbs chains (pdbq/inference/moves/mixing.py, docs/inference.md).

    tempering: copies per chain for replica exchange (1: off); estimates come from the β = 1 copy.
    beta_min: the initial ladder's lowest inverse temperature (geometric in between); the ladder
        adapts to the swap rate during burn-in (never below beta_min / 2) and is fixed afterwards.
    blocks: ``"off"``; ``"auto"`` (blocks as large as `block_table` allows); or an integer N
        (at most N variables per block). Each block is resampled exactly from its conditional.
    block_table: the largest clique table (entries) a block's elimination may need.
    query_passes: extra moves per round of every block holding a query target.
    clusters: add a Swendsen–Wang cluster pass to every cycle (pdbq/inference/moves/clusters.py): bonds
        on the pairwise equality couplings, clusters relabelled exactly given everything else.
    jumps: 0 (off) or the number of local modes kept for mode jumps (pdbq/inference/moves/jumps.py):
        states met in burn-in, quenched to local modes; every cycle, each copy tries a Metropolis
        jump that exchanges the values of two stored modes where they differ. Needs tempering >= 2
        (the hot copies find the modes no chain starts in).
    """

    tempering: int = 1
    beta_min: float = 0.1
    blocks: str | int = "off"
    block_table: int = 2**10
    query_passes: int = 1
    clusters: bool = False
    jumps: int = 0

    @property
    def uses_blocks(self) -> bool:
        return self.blocks != "off"

    @property
    def active(self) -> bool:
        return self.tempering > 1 or self.uses_blocks or self.clusters or self.jumps > 0

    def check(self) -> MixingConfig:
        _positive_int("tempering", self.tempering)
        if isinstance(self.beta_min, bool) or not isinstance(self.beta_min, (int, float)) or not 0 < self.beta_min < 1:
            raise OptionError(f"option 'beta_min' must lie in (0, 1), got {self.beta_min!r}")
        if isinstance(self.blocks, str):
            if self.blocks not in BLOCK_MODES:
                raise OptionError(f"option 'blocks' must be 'auto', 'off' or a number of variables; got {self.blocks!r}")
        else:
            _positive_int("blocks", self.blocks)
            if self.blocks < 2:
                raise OptionError(f"option 'blocks' must be at least 2 variables per block, got {self.blocks!r}")
        _positive_int("block_table", self.block_table)
        if self.block_table < 2:
            raise OptionError(f"option 'block_table' must be at least 2 entries, got {self.block_table!r}")
        _positive_int("query_passes", self.query_passes, allow_zero=True)
        if not isinstance(self.clusters, bool):
            raise OptionError(f"option 'clusters' must be true or false, got {self.clusters!r}")
        _positive_int("jumps", self.jumps, allow_zero=True)
        if self.jumps == 1:
            raise OptionError("option 'jumps' must be 0 (off) or at least 2 modes to jump between, got 1")
        if self.jumps and self.tempering < 2:
            raise OptionError(
                "option 'jumps' needs replica exchange (tempering >= 2): jumps reach only the local modes the "
                "chains met in burn-in, and without hot copies a mode no chain met would never be sampled and "
                "no diagnostic would notice")
        return self
