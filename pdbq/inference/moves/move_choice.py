"""AUTO's choice of MCMC moves once exact elimination is out: single-site, blocks, tempering.

Read from the graph's arrays alone (no tables built, so a million-variable graph pays
microseconds): *walls* are zero entries in TABLE factors (single-site moves cannot cross them);
*strong couplings* are factor weights of magnitude at least `STRONG_WEIGHT` (a ±1-valued factor
then moves the log-odds of a flip by 2·|w| ≥ 4, enough to freeze single-site chains in clusters).
Either one asks for exact block moves where the graph is small enough to cut into blocks
(`MAX_BLOCK_VARS` free variables), else for replica exchange with `TEMPERING_COPIES` copies. Where
no exact block holds most of the variables and there are no walls (a dense, strongly coupled
core), mode jumps (`jumps`) plus replica exchange instead.

Cluster moves (Swendsen–Wang, `clusters`) instead, when no walls are found and bonds (equality
couplings) touch at least `CLUSTER_SHARE` of the free variables, and either the couplings are not
strong but reach the ordered regime (`clusters.cluster_coverage`'s Bethe indicator at least
`CLUSTER_ORDER`: near-critical lattices, where single-site chains decorrelate over ~L² sweeps) or
they are strong on a graph too large for exact blocks, and the one-variable fields are weak (mean
spread at most `CLUSTER_FIELD`: a field adds up over a cluster and pins large ones; Segmentation_11,
an ordered grid with strong fields, mixes worse with clusters than with single-site moves).

The moves cost throughput, and plain chains often mix anyway (zero entries that no chain ever
needs to cross, couplings that are strong but few), so `run_auto` first spends
`PILOT_SHARE` of the budget on plain chains and keeps them unless their split R-hat says they
do not mix (above `PILOT_RHAT` = 1.5: a short pilot's R-hat is noisy near 1.1, stuck chains
give thousands or infinity); only then does the rest of the budget go to the chosen moves.

Domain blocks (`domains`): an ordered model whose fields rule out cluster moves (bonds on at least
`CLUSTER_SHARE` of the free variables, Bethe indicator at least `CLUSTER_ORDER`, no walls, no
strong couplings: UAI Segmentation_11) gets a pilot too (`MoveDecision.ordered`). After any pilot
that mixed by R-hat (and after that one whatever its R-hat), the targets whose pilot ESS is under
1% of its kept draws form the slow set; exact blocks grown inside it (a domain that flips as one)
are drawn once per a few single-site sweeps for the rest of the budget. On an ordered model, when
blocks (their table budget doubled as needed) hold each connected patch of the slow set whole and
the budget affords enough draws of them, they are drawn instead and its variables are estimated by their exact marginals given the rest
(`domains.whole_domain_blocks`, `domain_chains`). Without a slow set the rest is plain single-site
moves.

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder(); x, y = b.add_variables(2)
>>> _ = b.add_factor(FactorFunction.TABLE, [x, y], table=[0.0, float("-inf"), float("-inf"), 0.0])
>>> d = choose_moves(b.build())
>>> d.mixing.blocks, d.mixing.tempering
('auto', 1)
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pdbq.errors import InferenceError, TimeLimitError
from pdbq.graph.layout import FactorGraph
from pdbq.inference.moves.clusters import cluster_coverage
from pdbq.inference.mcmc.config import GibbsConfig, MixingConfig
from pdbq.inference.moves.cutset import Cutset, choose_cutset, describe_cutset, run_cutset
from pdbq.inference.moves.domain_chains import domain_moves, draw_seconds
from pdbq.inference.moves.domains import (
    MIN_CYCLES,
    SLOW_ESS_RATIO,
    cycle_cost,
    describe_domains,
    describe_whole_domain,
    domain_blocks,
    exact_sweeps,
    slow_variables,
    split_patch_warning,
    split_patches,
    sweeps_per_cycle,
    whole_domain_blocks,
)
from pdbq.inference.mcmc.gibbs import BURN_IN_SHARE, GibbsResult, ImpossibleStateError, run_gibbs
from pdbq.inference.mcmc.run_book import MIN_ESS
from pdbq.inference.mcmc.kernels import prepare_kernel_graph
from pdbq.inference.moves.blocks import block_edges, build_blocks
from pdbq.inference.moves.mixing import MixingResult, block_set, describe_moves, run_mixing
from pdbq.inference.moves.static_blocks import describe_static, static_blocks, static_moves, upward
from pdbq.inference.moves.static_blocks import draw_seconds as static_draw_seconds
from pdbq.inference.moves.tied import split_components, tied_blocks, tied_components
from pdbq.language.nodes import FactorFunction

__all__ = ["MoveDecision", "choose_moves", "run_auto", "STRONG_WEIGHT", "MAX_BLOCK_VARS", "TEMPERING_COPIES",
           "PILOT_SHARE"]

PILOT_SHARE = 0.25
BLOCK_SHARE = 0.9  # without walls, blocks are used when one holds this share of the free variables
# A dense core (UAI DBN_11): replica exchange with HOT_COPIES copies plus mode jumps between
# JUMP_MODES local modes. Measured on DBN_11 (3 s, 3 seeds): 8 copies alone ESS ≈ 800–1000;
# 4 copies + jumps ≈ 1,900–3,000; jumps alone ≈ 8,000–11,000, but then only the modes the chains
# meet in burn-in are ever jumped to: the hot copies keep looking for others.
HOT_COPIES = 4
JUMP_MODES = 8
# A short pilot's R-hat is noisy: 1.1 flags mixing chains now and then, while chains stuck in
# different modes give R-hat in the thousands or infinity.
PILOT_RHAT = 1.5
BURN_IN_TAUS = 5  # burn-in of the domain blocks' run, in the pilot's longest autocorrelation times
# Static blocks (`static_blocks`): ordering the free graph, building its blocks and their upward
# pass may take this share of the time left. Their draws then cost microseconds, so the pass is
# worth whatever leaves MIN_ESS draws per chain; but a pass abandoned at this mark leaves the
# other moves only the rest, so it must not take most of it.
STATIC_FILL_SHARE = 0.5

STRONG_WEIGHT = 2.0
AUTO_CUTSET_VARS = 4  # at most 16 joint configurations of booleans: one group, independent draws
CUTSET_SCAN_VARS = 2_000  # free variables beyond which AUTO does not look for a cutset
MAX_BLOCK_VARS = 50_000
_INTERACTION_ENTRIES = 4_096  # larger tables count by their spread (an upper bound) in `_summed_coupling`
TEMPERING_COPIES = 4
CLUSTER_SHARE = 0.9
CLUSTER_ORDER = 1.0
CLUSTER_FIELD = 0.1


@dataclass(frozen=True)
class MoveDecision:
    """The moves AUTO adds to its chains and why."""

    mixing: MixingConfig
    reason: str
    walls: bool = False
    strong: bool = False
    cutset: Cutset | None = None
    without_cutset_reason: str = ""  # the reason of the same decision with cutset sampling ruled out
    # single-site moves, but an ordered model whose plain pilot may show a slow domain (`domains`)
    ordered: bool = False
    block_table: int = 2**10  # the clique table budget of domain blocks
    # after a pilot that did not mix, try static blocks first (`static_blocks`); False keeps the
    # other moves (to compare against them, or to test them on graphs small enough for one block)
    static: bool = True
    # the time limit stopped the search for a small cutset (`choose_moves`' ``should_stop``): a
    # decision of this query's clock only, not to be kept for later queries
    cut: bool = False

    @property
    def pilots(self) -> bool:
        """Whether `run_auto` runs a plain pilot first."""
        return self.mixing.active or self.ordered

    def without_cutset(self) -> MoveDecision:
        """The decision when the query says ``cutset = false``: block moves instead."""
        if self.cutset is None:
            return self
        return dataclasses.replace(self, cutset=None, reason=self.without_cutset_reason)


def _factor_spreads(graph: FactorGraph) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray]:
    """(any zero entry, the multi-variable TABLE factors, the spread max − min of each one's
    finite log-entries (0 where none is finite), each one's number of entries)."""
    # a one-variable table is a bias, not a coupling
    is_table = (graph.function == int(FactorFunction.TABLE)) & (np.diff(graph.factor_offsets) >= 2)
    f = np.flatnonzero(is_table)
    sizes = np.ones(f.shape[0], dtype=np.int64)
    if not is_table.any() or graph.tables.size == 0:
        return False, f, np.zeros(f.shape[0]), sizes
    arity = np.diff(graph.factor_offsets)[f]
    starts = graph.factor_offsets[f]
    card = graph.cardinality.astype(np.int64)
    for k in range(int(arity.max()) if arity.size else 0):
        has = arity > k
        sizes[has] *= card[graph.factor_vars[starts[has] + k]]
    t = np.where(np.isfinite(graph.tables), graph.tables, np.nan)
    offs = graph.table_offset[f]
    idx = np.repeat(offs, sizes) + (np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes))
    seg = np.repeat(np.arange(f.shape[0]), sizes)
    walls = bool(np.isneginf(graph.tables[idx]).any())
    vals = t[idx]
    ok = ~np.isnan(vals)
    hi = np.full(f.shape[0], -np.inf)
    lo = np.full(f.shape[0], np.inf)
    np.maximum.at(hi, seg[ok], vals[ok])
    np.minimum.at(lo, seg[ok], vals[ok])
    spread = hi - lo
    return walls, f, np.where(np.isfinite(spread), spread, 0.0), sizes


def _table_spread(graph: FactorGraph) -> tuple[bool, float]:
    """(any zero entry, largest spread max − min of one TABLE factor's finite log-entries)."""
    walls, _, spread, _ = _factor_spreads(graph)
    return walls, float(spread.max()) if spread.size else 0.0


def _summed_coupling(graph: FactorGraph) -> tuple[float, int]:
    """(largest, at which variable) over the free variables of the summed strength of the factors
    that tie it to other free variables: a TABLE factor's spread, another factor's |weight|.

    Many weak couplings on one variable freeze it as one strong coupling does: a hub tied to 400
    neighbours at log-odds ~0.7 each is pinned by them, and they by it, though no single factor
    looks strong (measured: single-site chains off by 0.75 on such a hub)."""
    n_f = graph.function.shape[0]
    if n_f == 0 or graph.n_vars == 0:
        return 0.0, -1
    strength = np.zeros(n_f)
    not_table = graph.function != int(FactorFunction.TABLE)
    strength[not_table] = np.abs(graph.weights[graph.weight[not_table]])
    _, f, spread, sizes = _factor_spreads(graph)
    strength[f] = spread
    arity = np.diff(graph.factor_offsets)
    _interaction(graph, f, sizes, strength)
    owner = np.repeat(np.arange(n_f), arity)
    free = graph.evidence[graph.factor_vars] < 0
    n_free = np.bincount(owner, weights=free, minlength=n_f)
    couples = (n_free >= 2)[owner] & free
    total = np.bincount(graph.factor_vars[couples], weights=strength[owner[couples]], minlength=graph.n_vars)
    v = int(np.argmax(total))
    return float(total[v]), v


def _interaction(graph: FactorGraph, f: np.ndarray, sizes: np.ndarray, strength: np.ndarray) -> None:
    """``strength[f]`` of multi-variable TABLE factors ``f`` (of ``sizes`` entries): the spread
    of the table's interaction (the log-table less its main effects: for each variable, the mean
    over the others), not of the table itself, whose main effects are fields on one variable and
    tie it to nothing. Tables with an infinite entry, or over `_INTERACTION_ENTRIES` entries,
    keep their spread."""
    f = f[sizes <= _INTERACTION_ENTRIES]
    if f.size == 0:
        return
    arity = np.diff(graph.factor_offsets)[f]
    # each factor's shape (its variables' cardinalities, 0-padded): one vectorised pass per shape
    width = int(arity.max())
    pos = np.arange(width)[None, :]
    inside = pos < arity[:, None]
    idx = np.where(inside, graph.factor_offsets[f][:, None] + pos, 0)
    shape_rows = np.where(inside, graph.cardinality[graph.factor_vars[idx]], 0)
    kinds, which = np.unique(shape_rows, axis=0, return_inverse=True)
    for s_i, row in enumerate(kinds):
        shp = tuple(int(c) for c in row if c > 0)
        sel = f[which.reshape(-1) == s_i]
        n = int(np.prod(shp))
        t = graph.tables[graph.table_offset[sel][:, None] + np.arange(n)[None, :]].reshape(-1, *shp)
        finite = np.isfinite(t).reshape(t.shape[0], -1).all(axis=1)
        if not finite.any():
            continue
        t = t[finite]
        axes = tuple(range(1, len(shp) + 1))
        grand = t.mean(axis=axes, keepdims=True)
        r = t + (len(shp) - 1) * grand
        for ax in axes:
            r = r - t.mean(axis=tuple(a for a in axes if a != ax), keepdims=True)
        flat = r.reshape(r.shape[0], -1)
        strength[sel[finite]] = flat.max(axis=1) - flat.min(axis=1)


def choose_moves(graph: FactorGraph, *, block_table: int = 2**10,
                 should_stop: Callable[[], bool] | None = None) -> MoveDecision:
    """Moves for AUTO's chains on ``graph`` (see the module docstring). ``should_stop``: read by
    the search for a small cutset (its order searches take seconds on two thousand strongly tied
    variables); True ends it without a cutset (`MoveDecision.cut`)."""
    return dataclasses.replace(_choose(graph, block_table, should_stop), block_table=block_table)


def _choose(graph: FactorGraph, block_table: int, should_stop: Callable[[], bool] | None = None) -> MoveDecision:
    free = int(np.count_nonzero(graph.evidence < 0))
    walls, spread = _table_spread(graph)
    used = np.zeros(graph.weights.shape[0], dtype=bool)
    not_table = graph.function != int(FactorFunction.TABLE)
    used[graph.weight[not_table]] = True
    used[graph.group_weight] = True
    wmax = float(np.abs(graph.weights[used]).max()) if used.any() else 0.0
    strong = wmax >= STRONG_WEIGHT or spread >= 2 * STRONG_WEIGHT
    if not walls:
        cov = cluster_coverage(graph)
        ordered = cov.order >= CLUSTER_ORDER and not strong
        if cov.share >= CLUSTER_SHARE and cov.field <= CLUSTER_FIELD and (ordered or (strong and free > MAX_BLOCK_VARS)):
            why = (f"couplings in the ordered regime (Bethe indicator {cov.order:.3g} >= {CLUSTER_ORDER:g})" if ordered
                   else f"strong couplings (largest |weight| {wmax:.3g}) on {free:,} free variables, too many for "
                        f"exact blocks (limit {MAX_BLOCK_VARS:,})")
            return MoveDecision(MixingConfig(clusters=True),
                                f"Swendsen–Wang cluster moves if plain chains do not mix: {why}; bonds on "
                                f"{cov.bonds:,} equality couplings touch {cov.share:.0%} of the free variables, "
                                f"mean field {cov.field:.3g}",
                                walls, strong)
    if not walls and not strong:
        plain = f"no zero entries; largest |weight| {wmax:.3g}, largest table spread {spread:.3g}"
        if cov.share >= CLUSTER_SHARE and cov.order >= CLUSTER_ORDER:
            # ordered, but fields too strong for clusters: domains of the weak-field minority flip
            # rarely under single-site moves while R-hat looks fine; the pilot's ESS finds them
            return MoveDecision(MixingConfig(block_table=block_table),
                                f"single-site moves, plus exact blocks around slow domains if a plain pilot shows "
                                f"them ({plain}; couplings in the ordered regime, Bethe indicator {cov.order:.3g} >= "
                                f"{CLUSTER_ORDER:g}, with fields too strong for cluster moves, mean field "
                                f"{cov.field:.3g} > {CLUSTER_FIELD:g})",
                                ordered=True)
        summed, hub = _summed_coupling(graph)
        if summed < 2 * STRONG_WEIGHT:
            return MoveDecision(MixingConfig(), f"single-site moves ({plain})")
        # no factor is strong, but one variable's many couplings add up to one that is: a pilot
        # tells whether single-site moves get it (and its neighbours) to move
        what = (f"many couplings on one variable (summed strength {summed:.3g} at variable {hub}; largest |weight| "
                f"{wmax:.3g}, table spread {spread:.3g})")
        strong = True
    else:
        what = f"strong couplings (largest |weight| {wmax:.3g}, table spread {spread:.3g})" if strong else ""
    if walls:
        what = "zero entries" + (" and " + what if what else "")
    if free > MAX_BLOCK_VARS:
        return MoveDecision(MixingConfig(tempering=TEMPERING_COPIES),
                            f"replica exchange ({TEMPERING_COPIES} copies) if plain chains do not mix: {what}; "
                            f"{free:,} free variables are too many to cut into exact blocks (limit {MAX_BLOCK_VARS:,})",
                            walls, strong)
    blocks_why = f"exact block moves if plain chains do not mix: {what}"
    cs = _small_cutset(graph, free, block_table, should_stop)
    if cs == "cut":
        return MoveDecision(MixingConfig(blocks="auto", block_table=block_table),
                            blocks_why + " (the time limit stopped the search for a small cutset)", walls, strong,
                            cut=True)
    if cs is not None:
        return MoveDecision(MixingConfig(blocks="auto", block_table=block_table),
                            f"cutset sampling if plain chains do not mix: {what}; conditioning on {cs.size} "
                            f"variable(s) (one joint group) leaves a remainder of induced width {cs.width} "
                            f"({cs.max_table:,}-entry tables), so each sweep draws the whole world exactly and independently",
                            walls, strong, cs, blocks_why)
    return MoveDecision(MixingConfig(blocks="auto", block_table=block_table), blocks_why, walls, strong)


def _with_moves(graph, targets, config: GibbsConfig, mixing: MixingConfig, blocks, deadline, kw, chains, sweeps: int = 1):
    """`run_mixing`, or the caller's ``chains`` (`run_auto`)."""
    if chains is None:
        return run_mixing(graph, targets, config, mixing, blocks=blocks, deadline=deadline, sweeps=sweeps, **kw)
    return chains(graph, targets, config, mixing=mixing, blocks=blocks, sweeps=sweeps, deadline=deadline, **kw)


def _domain_run(graph, targets, rest: GibbsConfig, moves: MoveDecision, pilot: GibbsResult, deadline, kw, chains=None):
    """Domain blocks from the pilot's ESS (`domains`) and the run with them, or None when the
    pilot shows no slow domain or no block fits."""
    t0 = time.perf_counter()
    sites = kw.get("sites")
    sites = np.flatnonzero(graph.evidence < 0) if sites is None else np.asarray(sites, dtype=np.int64)
    draws = (pilot.steps - pilot.burn_in) / max(sites.shape[0], 1) * pilot.chains
    slow = slow_variables(pilot.targets, pilot.ess, graph.evidence, draws)
    if slow.size == 0:
        return None
    ess_of = np.full(graph.n_vars, np.inf)
    ess_of[pilot.targets] = pilot.ess
    in_sites = np.zeros(graph.n_vars, dtype=bool)
    in_sites[sites] = True
    slow = slow[in_sites[slow]]  # only sampled sites may move
    if int(np.count_nonzero(graph.evidence < 0)) > MAX_BLOCK_VARS:
        return None  # as for block moves: too large to build the tables of (plain moves go on)
    kernel = kw.get("kernel")
    if kernel is None:
        kernel = prepare_kernel_graph(graph)
        kw = {**kw, "kernel": kernel}
    cut = SLOW_ESS_RATIO * draws
    if rest.time_limit is not None or deadline is not None:
        # the chains can all agree on one state of a domain for a while and meet the tolerance
        # with the other never drawn (Segmentation_11 under load: unwarned, off by 0.08 after
        # 226,000 updates per chain): a slow domain's run samples to its budget
        rest = dataclasses.replace(rest, tolerance_stops=False)
    try:
        whole = None
        # only on ordered models (a patch that flips as one against a fast outside); with zero
        # entries or strong couplings the outside can hold the patch's state too, and the exact
        # marginals given it were measured worse (pgmpy's alarm: tolerance-only coverage 0.75–0.99
        # against 0.86–0.94)
        if moves.ordered:
            def affordable(b) -> bool:
                return _kept_cycles(graph, b, kernel, sites, rest, deadline, t0) >= MIN_CYCLES

            whole = whole_domain_blocks(graph, slow, ess_of, base_table=moves.block_table, deadline=deadline,
                                        affordable=affordable)
        if whole is not None:
            sweeps = exact_sweeps(whole, kernel, sites)
            rest = _less_time(rest, t0)
            if np.isin(sites, pilot.targets).all():  # the pilot measured every sampled variable
                rest = _measured_burn_in(rest, deadline, sweeps, sites.shape[0] * sweeps + sum(b.size for b in whole))
            if chains is not None:  # the groups elsewhere (Dask) run the same cycle, blocks shipped from here
                r = chains(graph, targets, rest, blocks=whole, sweeps=sweeps, domain=True, deadline=deadline, **kw)
            else:
                r = run_gibbs(graph, targets, rest, deadline=deadline, moves=domain_moves(graph, whole, sites, sweeps),
                              **kw)
            return r, describe_whole_domain(whole, int(slow.size), cut, sweeps)
        blocks = domain_blocks(graph, slow, ess_of, max_table=moves.block_table, deadline=deadline)
    except InferenceError:
        return None  # a factor too large for a table (`potentials.hyperedges`): plain moves go on
    if not blocks:
        return None
    sweeps = sweeps_per_cycle(blocks, kernel, sites)
    rest = _less_time(rest, t0)
    mixing = MixingConfig(blocks="auto", block_table=moves.block_table, query_passes=0)
    r = _with_moves(graph, targets, rest, mixing, blocks, deadline, kw, chains, sweeps)
    # an ordered model's patch flips as one: part of it in a block leaves the rest holding its state
    split = split_patch_warning(*split_patches(graph, slow, blocks)) if moves.ordered else None
    if split is not None:
        r = dataclasses.replace(r, warnings=tuple(r.warnings) + (split,))
    return r, describe_domains(blocks, int(slow.size), cut, sweeps)


def _measured_burn_in(rest: GibbsConfig, deadline: float | None, sweeps: int, per_cycle: int) -> GibbsConfig:
    """``rest`` with an explicit burn-in of `BURN_IN_TAUS` autocorrelation times in whole cycles,
    for a run the budget ends (else unchanged). Such a run drops the leading `BURN_IN_SHARE` of
    whatever it ran, a guard for chains whose mixing is unknown; here the pilot measured it: every
    variable outside the domain blocks had an ESS of at least `SLOW_ESS_RATIO` of its draws, an
    autocorrelation time under 1 / `SLOW_ESS_RATIO` sweeps, and the blocks are drawn exactly every
    cycle."""
    if rest.burn_in is not None or (rest.time_limit is None and deadline is None):
        return rest
    cycles = max(1, math.ceil(BURN_IN_TAUS / SLOW_ESS_RATIO / max(sweeps, 1)))
    return dataclasses.replace(rest, burn_in=cycles * per_cycle)


def _less_time(rest: GibbsConfig, t0: float) -> GibbsConfig:
    """``rest`` with the time since ``t0`` (choosing the blocks) taken out of its time limit."""
    if rest.time_limit is None:
        return rest
    return dataclasses.replace(rest, time_limit=max(rest.time_limit - (time.perf_counter() - t0), 1e-3))


def _kept_cycles(graph: FactorGraph, blocks, kernel, sites: np.ndarray, rest: GibbsConfig, deadline: float | None,
                 t0: float) -> float:
    """Cycles per chain of `domain_chains` with ``blocks`` that the rest of the budget keeps (after
    the burn-in share): from the steps left, or from the time left at the pace of one draw timed on
    this machine now (`domain_chains.draw_seconds`; the cycle's sweeps priced against it by the
    work model), the chains sharing the CPUs."""
    sweeps = exact_sweeps(blocks, kernel, sites)
    out = math.inf
    if rest.steps is not None:
        out = rest.steps / (sites.shape[0] * sweeps + sum(b.size for b in blocks))
    left = [] if rest.time_limit is None else [rest.time_limit - (time.perf_counter() - t0)]
    if deadline is not None:
        left.append(deadline - time.perf_counter())
    if left:
        draw = cycle_cost(blocks, kernel, sites, 0)  # one draw of every block, in sweeps
        cycle = draw_seconds(graph, blocks, kernel) * cycle_cost(blocks, kernel, sites, sweeps) / max(draw, 1e-12)
        parallel = min(rest.chains, rest.threads or rest.chains, os.cpu_count() or 1)
        out = min(out, max(min(left), 0.0) * parallel / (rest.chains * max(cycle, 1e-12)))
    return out * (1 - BURN_IN_SHARE)


def _tied_instead(graph: FactorGraph, cached: list, mixing: MixingConfig, deadline) -> tuple[list, str] | None:
    """Blocks that hold every tied component whole (`tied`), when the ordinary blocks split one
    (variables a zero entry ties to a block's but left outside it cannot move: the block is drawn
    given them) and every split one fits ``block_table`` under its own elimination order; the
    free variables outside every component get ordinary blocks among themselves. None: keep
    ``cached``."""
    edges = block_edges(graph)
    comps = tied_components(graph, edges)
    split = split_components(cached, comps)
    if not split:
        return None
    made = tied_blocks(graph, comps, max_table=mixing.block_table, edges=edges, deadline=deadline)
    if len(split_components(made, split)) or getattr(made, "cut", False):
        return None  # some split component does not fit whole: the ordinary blocks stay
    rest = graph.evidence < 0
    for b in made:
        rest[b.vars] = False
    others = list(build_blocks(graph, max_table=mixing.block_table, edges=edges, within=rest,
                               deadline=deadline)) if rest.any() else []
    held = sum(b.size for b in made)
    why = (f"the blocks of the global elimination order split {len(split)} group(s) of variables that zero entries "
           f"tie together, which single-site moves cannot move on their own; {len(made)} exact block(s) hold "
           f"each tied group whole ({held} variables, largest clique table "
           f"{max(b.max_table for b in made):,} entries under its own elimination order)")
    return made + others, why


def _verdict(pilot: GibbsResult | None, rhat: float) -> str:
    if pilot is None:
        return "ended in a world a hard constraint forbids (a zero-probability wall)"
    if not np.isnan(rhat):
        return f"did not mix (split R-hat {rhat:.3g})"
    return "gave no split R-hat (too few updates in its share of the budget)"


def _static_run(graph, targets, rest: GibbsConfig, deadline, kw, chains) -> tuple[GibbsResult, str] | None:
    """Static blocks (`static_blocks`: one exact block over every free variable, its messages
    computed once, each draw a backward pass) and the run with them, or None:
    when they do not fit in memory, when ordering, building and the upward pass are not done
    within `STATIC_FILL_SHARE` of the time left, or when the time then left, at the pace of
    one draw timed here, affords fewer than `MIN_ESS` draws per chain (the ESS check's minimum:
    fewer warn anyway, and the other moves keep their budget). A run without a time limit or
    deadline (a number of steps) never reads the clock, so that its samples stay a function of
    the seed: it takes the blocks whenever they fit in memory and its steps pay for `MIN_ESS`
    draws per chain (it asked for updates, not seconds; the pass is bounded by memory alone)."""
    t0 = time.perf_counter()
    sites = kw.get("sites")
    sites = np.flatnonzero(graph.evidence < 0) if sites is None else np.asarray(sites, dtype=np.int64)

    def left() -> float | None:
        out = [] if rest.time_limit is None else [rest.time_limit - (time.perf_counter() - t0)]
        if deadline is not None:
            out.append(deadline - time.perf_counter())
        return max(min(out), 0.0) if out else None

    budget = left()
    until = None if budget is None else t0 + STATIC_FILL_SHARE * budget
    sb = static_blocks(graph, sites, deadline=until)
    if sb is None:
        return None
    try:
        psi = upward(sb, graph.n_vars, until)
    except InferenceError:
        return None
    if psi is None:
        return None
    filled = time.perf_counter() - t0
    draw = static_draw_seconds(graph, sb, psi)
    per_cycle = sum(b.size for b in sb.blocks)
    cycles = math.inf if rest.steps is None else rest.steps / per_cycle
    now = left()
    if now is not None:
        parallel = min(rest.chains, rest.threads or rest.chains, os.cpu_count() or 1)
        cycles = min(cycles, now * parallel / (rest.chains * max(draw, 1e-9)))
    if cycles < MIN_ESS:
        return None
    rest = _less_time(rest, t0)
    if rest.burn_in is None:  # every draw is independent of the chain's state: nothing to burn in
        rest = dataclasses.replace(rest, burn_in=0)
    if chains is not None:  # the groups elsewhere (Dask) make the same upward pass (sweeps = 0: `domain_moves`)
        r = chains(graph, targets, rest, blocks=sb.blocks, sweeps=0, domain=True, deadline=deadline, **kw)
    else:
        r = run_gibbs(graph, targets, rest, deadline=deadline, moves=static_moves(graph, sb, sites, psi), **kw)
    return r, describe_static(sb, filled, draw)


def _small_cutset(graph: FactorGraph, free: int, block_table: int,
                  should_stop: Callable[[], bool] | None = None) -> Cutset | str | None:
    """A cutset of at most `AUTO_CUTSET_VARS` variables, None, or "cut" (``should_stop`` ended the search)."""
    if free > CUTSET_SCAN_VARS:
        return None
    try:
        cs = choose_cutset(graph, max_table=block_table, max_vars=AUTO_CUTSET_VARS, should_stop=should_stop)
    except TimeLimitError:
        return "cut"
    except InferenceError:
        return None
    return cs if cs.size >= 1 and cs.n_groups == 1 else None


def _ordered_pilot(pilot: GibbsConfig) -> GibbsConfig:
    """The pilot of an ordered model: no burn-in, no tolerance stop.

    An ordered model's slow domain: chains from the dispersed starts (all lowest, all highest)
    begin in both of its states and leave the rarer one only after many sweeps. Once all have
    left, every within-run check passes, so a pilot whose leading share is dropped as burn-in
    can show no slow variable and even reach the tolerance with the rarer state never sampled
    (UAI Segmentation_11, one seed in five: unwarned, off by 0.08). Keeping the start, a domain
    that took long to settle shows as low ESS; such a pilot only chooses the moves, it is never
    the answer."""
    return dataclasses.replace(pilot, burn_in=0, tolerance=None)


def _or_pilot(r: GibbsResult, pilot: GibbsResult | None) -> GibbsResult:
    """The run after the pilot, or the pilot itself when the time limit ended that run before it
    kept a sample while the pilot kept some: an answer from what the query has, with a warning,
    rather than NULL."""
    if r.steps > 0 or pilot is None or pilot.steps == 0:
        return r
    note = ("the time limit ended the run with the chosen moves before it kept a sample: the answer comes from "
            f"the plain pilot ({pilot.steps:,} updates per chain), whose chains may not mix; raise time_limit")
    return dataclasses.replace(pilot, warnings=(note,) + tuple(pilot.warnings))


def _pilot_rhat(graph: FactorGraph, targets: np.ndarray, pilot: GibbsResult) -> float:
    """The pilot's largest split R-hat over its free targets; NaN when it kept no sample or had
    too few batches. Evidence rows are 1 by construction: counted, a pilot that kept nothing
    would pass as mixed (and be returned as the answer, every estimate NULL)."""
    live = graph.evidence[np.asarray(targets, dtype=np.int64)] < 0
    r = np.asarray(pilot.rhat)[live] if pilot.rhat.size == live.size else np.asarray(pilot.rhat)
    if pilot.steps == 0 or not r.size or np.all(np.isnan(r)):
        return float("nan")
    return float(np.nanmax(r))


def run_auto(
    graph: FactorGraph,
    targets: np.ndarray,
    config: GibbsConfig,
    moves: MoveDecision,
    *,
    blocks: Callable[[MixingConfig], list] | None = None,
    deadline: float | None = None,
    chains: Callable[..., GibbsResult] | None = None,
    **kw,
) -> tuple[GibbsResult, str]:
    """AUTO's sampling run: plain chains, or a plain pilot then the moves of ``moves`` when the
    pilot's R-hat flags non-mixing (module docstring). The budget (``time_limit`` and the
    ``deadline`` instant of `run_gibbs`, else ``steps``) is split, never exceeded: the pilot
    gets `PILOT_SHARE` of what is left of it, the moves the rest. Returns the result and a
    sentence on what was done. ``blocks(mixing)`` supplies cached blocks; ``kw`` go to `run_gibbs` / `run_mixing`.
    ``chains(graph, targets, config, mixing=None, blocks=None, sweeps=1, cutset=None, domain=False,
    deadline=…, **kw)`` runs the pilot and the moves elsewhere (chain groups on Dask workers) instead of
    `run_gibbs` / `run_mixing` / `run_cutset`."""
    plain = chains if chains is not None else run_gibbs
    if not moves.pilots:
        return plain(graph, targets, config, deadline=deadline, **kw), moves.reason
    pilot_cfg, pilot_deadline = config, None
    if config.time_limit is not None:
        pilot_cfg = dataclasses.replace(pilot_cfg, time_limit=PILOT_SHARE * config.time_limit)
    if deadline is not None:
        now = time.perf_counter()
        pilot_deadline = now + PILOT_SHARE * max(deadline - now, 0.0)
    timed = config.time_limit is not None or deadline is not None
    total = config.steps if config.steps is not None else 10_000
    if config.steps is not None or not timed:
        pilot_cfg = dataclasses.replace(pilot_cfg, steps=max(1, math.ceil(PILOT_SHARE * total)))
    if moves.ordered and config.burn_in is None:
        pilot_cfg = _ordered_pilot(pilot_cfg)
    t_pilot = time.perf_counter()
    try:
        pilot = plain(graph, targets, pilot_cfg, deadline=pilot_deadline, **kw)
    except ImpossibleStateError:
        pilot = None  # a plain chain stuck behind a zero-probability wall: the moves must cross it
    pilot_seconds = pilot.seconds if pilot is not None else time.perf_counter() - t_pilot
    rest = config
    if config.time_limit is not None:
        rest = dataclasses.replace(rest, time_limit=max(config.time_limit - pilot_seconds, 1e-3))
    if config.steps is not None or not timed:
        rest = dataclasses.replace(rest, steps=max(1, total - pilot_cfg.steps))
    if pilot is not None and deadline is not None and time.perf_counter() >= deadline:
        # the query's time is spent (on a crowded machine the steps before the pilot can take it
        # all): setting up moves (blocks, cutsets, feasible starts: seconds at a few per cent of a
        # core, none of them sampling) would only run past the deadline; the pilot is the answer
        note = ("the time limit ended the query with the plain pilot, before any mixing move was set up "
                f"({pilot.steps:,} updates per chain); raise time_limit")
        return (dataclasses.replace(pilot, warnings=(note,) + tuple(pilot.warnings)),
                f"{moves.reason}; the time limit ended the query with the plain pilot")
    if pilot is None:
        rhat = float("inf")
        # the plain chains never reached a world the zero entries allow: the moves' chains start
        # in such worlds (found by search) instead of at the lowest, highest and random values
        rest = dataclasses.replace(rest, init="feasible")
    else:
        rhat = _pilot_rhat(graph, targets, pilot)
    if np.isfinite(rhat) and rhat <= PILOT_RHAT:
        if pilot_cfg.tolerance is not None and pilot.converged and not any("tolerance" in w for w in pilot.warnings):
            # the pilot mixed and already reached the tolerance: it is the answer
            return pilot, f"{moves.reason}; plain chains mixed (split R-hat {rhat:.3g}) and reached the tolerance"
        if moves.static and not moves.ordered and rhat > config.rhat_threshold:
            # mixed by the pilot's lenient test, but its R-hat would warn the answer: chains that
            # drift slowly (a long, strongly coupled chain: 1.25), where independent draws of the
            # whole world, when they fit the time, beat more of the same moves. Not on an ordered
            # model: its pilot keeps its dispersed starts (no burn-in), so its R-hat is raised by
            # design, and its slow domains have their own blocks (`_domain_run`)
            found = _static_run(graph, targets, rest, deadline, kw, chains)
            if found is not None:
                r, what = found
                return _or_pilot(r, pilot), (f"{moves.reason}; a plain pilot mixed by split R-hat ({rhat:.3g} <= "
                                             f"{PILOT_RHAT:g}) but not by the answer's {config.rhat_threshold:g}: {what}")
        found = _domain_run(graph, targets, rest, moves, pilot, deadline, kw, chains)
        if found is not None:
            r, what = found
            return _or_pilot(r, pilot), f"{moves.reason}; a plain pilot mixed by split R-hat ({rhat:.3g}) but {what}"
        r = plain(graph, targets, rest, deadline=deadline, **kw)
        return _or_pilot(r, pilot), (f"{moves.reason}; a plain pilot mixed (split R-hat {rhat:.3g}), so single-site moves only")
    if not moves.mixing.active:  # an ordered model whose pilot did not mix: domain blocks if any
        found = _domain_run(graph, targets, rest, moves, pilot, deadline, kw, chains) if pilot is not None else None
        verdict = (f"did not mix (split R-hat {rhat:.3g})" if not np.isnan(rhat)
                   else "gave no split R-hat (too few updates in its share of the budget)")
        if found is not None:
            r, what = found
            return _or_pilot(r, pilot), f"{moves.reason}; a plain pilot {verdict} and {what}"
        r = plain(graph, targets, rest, deadline=deadline, **kw)
        return _or_pilot(r, pilot), f"{moves.reason}; a plain pilot {verdict} and showed no slow domain"
    # before cutset sampling: a cutset sweep is as independent as a static draw but costs an
    # upward pass of the remainder per cutset configuration, a static draw a backward pass alone
    found = _static_run(graph, targets, rest, deadline, kw, chains) if moves.static else None
    if found is not None:
        r, what = found
        return _or_pilot(r, pilot), f"{moves.reason}; a plain pilot {_verdict(pilot, rhat)}: {what}"
    if moves.cutset is not None:
        if chains is not None:
            r = chains(graph, targets, rest, cutset=moves.cutset, deadline=deadline, **kw)
        else:
            r = run_cutset(graph, targets, rest, cutset=moves.cutset, deadline=deadline, kernel=kw.get("kernel"),
                           on_round=kw.get("on_round"), poll=kw.get("poll"))
        verdict = ("ended in a world a hard constraint forbids (a zero-probability wall)" if pilot is None
                   else f"did not mix (split R-hat {rhat:.3g})")
        return _or_pilot(r, pilot), f"{moves.reason}; a plain pilot {verdict}: {describe_cutset(r)}"
    mixing = moves.mixing
    cached = None
    why = ""
    if mixing.uses_blocks:
        try:
            cached = blocks(mixing) if blocks is not None else block_set(graph, mixing, targets, deadline)
        except InferenceError as e:
            mixing = MixingConfig(tempering=TEMPERING_COPIES)
            why = f"no exact blocks ({e}); replica exchange instead"
        else:
            free = max(int(np.count_nonzero(graph.evidence < 0)), 1)
            largest = max((b.size for b in cached), default=0)
            t_tied = time.perf_counter()
            tied = _tied_instead(graph, cached, mixing, deadline) if moves.walls else None
            if tied is not None:
                cached, why = tied
                if rest.time_limit is not None:  # choosing the blocks comes out of the budget
                    rest = dataclasses.replace(rest, time_limit=max(rest.time_limit - (time.perf_counter() - t_tied), 1e-3))
            elif not moves.walls and largest < BLOCK_SHARE * free:
                # strong couplings across every block boundary (a dense bipartite core): blocks
                # cannot flip a whole mode; jumps between the local modes met in burn-in can, and
                # hot copies find modes no chain started in
                mixing, cached = MixingConfig(tempering=HOT_COPIES, jumps=JUMP_MODES), None
                why = (f"the largest exact block holds {largest} of {free} variables (< {BLOCK_SHARE:.0%}), "
                       f"so mode jumps ({JUMP_MODES} local modes) and replica exchange ({HOT_COPIES} copies) instead")
    r = _with_moves(graph, targets, rest, mixing, cached, deadline, kw, chains)
    # a run the time limit ended before it kept a sample may come back as a plain result
    # (Dask's rounds): it has no moves to describe
    said = describe_moves(r) if isinstance(r, MixingResult) else "the moves kept no sample before the time limit"
    return _or_pilot(r, pilot), (f"{moves.reason}; a plain pilot {_verdict(pilot, rhat)}: "
               + (why + "; " if why else "") + said)
