"""Kernel warm-up: compile (or load from numba's cache) the kernels a query needs before its
``time_limit`` starts counting.

pdbq's numba kernels are compiled for the machine on first use and cached on disk (``cache=True``:
next to the modules, or under ``NUMBA_CACHE_DIR``); later processes load them in well under a
second. On a fresh install the first compilation takes tens of seconds, which is not the user's
query: `warm_up` runs every kernel of a tier once on a tiny built-in model, once per process,
before the caller takes the query's start time (or moves its deadline by the time spent). A
compilation is announced when it starts, through the caller's `pdbq.progress.watch_compiles`
(what is being prepared and about how long), reported while it runs and summed up once it ends
(the query's ``notices``, kept apart from its ``warnings``).

Tiers: ``"plan"`` is what planning any PROB/MAP query runs (graph arrays, reachability, AUTO's
exact-or-sample decision), warmed before the query's clock starts; ``"exact"`` (exact
elimination) and ``"sampling"`` (the Gibbs kernels and their estimates, query-aware selection)
are warmed once a query has chosen its method, so a query compiles only what it runs, and their
time is added to its deadline; ``"core"`` is the three together; ``"anneal"`` is annealed MAP
(``USING ANNEAL``), warmed when a query is about to run it; ``"moves"`` adds the moves
AUTO and the mixing options use (exact blocks, cutset conditioning with a joint group, exact
blocks over slow domains, Swendsen–Wang clusters, replica exchange, mode jumps), warmed only when
a query is about to use them. The chains hold their values as uint8 while no variable has more
than `NARROW_VALUES` values and as int32 beyond (another signature of every sampling kernel):
``"wide"`` and ``"wide-moves"`` are ``"core"`` and ``"moves"`` on such a model, warmed only for
a graph that has one (`tiers_for`).

A background thread at import was measured against this (docs/benchmarks.md, "Cold start"):
numba compiles under one process-wide lock, so a query that needs a kernel waits for the thread
anyway, and its waiting would still count against the limit.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import NamedTuple

import numpy as np

from pdbq.inference.mcmc.kernels import NARROW_VALUES
from pdbq.progress import current_watch, expect_compiles

__all__ = ["WarmUp", "warm_up", "tiers_for", "TIERS", "TIER_TEXT", "TIER_SECONDS", "NARROW_VALUES"]

TIERS = ("core", "plan", "exact", "sampling", "moves", "wide", "wide-moves", "anneal")
# a tier made of others: warming it warms (and marks) each of them
_PARTS = {"core": ("plan", "sampling", "exact")}
# What each tier prepares, for the notice said when its compilation starts, and about how long
# that takes on a fresh install (the CPU seconds measured on a 2-core machine: docs/benchmarks.md,
# "Cold start"; a slower or busier machine takes longer, the progress report shows the time spent).
TIER_TEXT = {
    "core": "pdbq's kernels (graph, Gibbs sampling, query-aware selection, exact inference)",
    "plan": "pdbq's graph kernels and AUTO's exact-or-sample decision",
    "exact": "pdbq's exact inference kernels",
    "sampling": "pdbq's sampling kernels (Gibbs sampling, query-aware selection)",
    "moves": "the kernels of AUTO's mixing moves",
    "wide": f"pdbq's kernels for variables of over {NARROW_VALUES} values",
    "wide-moves": f"the mixing moves' kernels for variables of over {NARROW_VALUES} values",
    "anneal": "the kernels of annealed MAP (USING ANNEAL)",
}
TIER_SECONDS = {"core": 30.0, "plan": 5.0, "exact": 5.0, "sampling": 20.0, "moves": 45.0, "wide": 15.0,
                "wide-moves": 35.0, "anneal": 20.0}
_lock = threading.RLock()
_done: dict[str, bool] = {}


class WarmUp(NamedTuple):
    """What one tier's warm-up did: ``seconds`` of wall time, ``compiled`` kernel signatures that
    were not in numba's cache (0: everything was loaded from the cache)."""

    tier: str
    seconds: float
    compiled: int


def _misses() -> int:
    """Kernel signatures compiled (not loaded from numba's cache) so far in this process, over
    pdbq's modules."""
    from numba.core.dispatcher import Dispatcher  # noqa: PLC0415

    n = 0
    for name, mod in list(sys.modules.items()):
        if not name.startswith("pdbq.") or mod is None:
            continue
        for v in list(vars(mod).values()):
            if isinstance(v, Dispatcher):
                n += sum(v.stats.cache_misses.values())
    return n


def _tiny_graph():
    """Booleans, a categorical, evidence, every factor function the kernels specialise on, a
    head group and a TABLE factor (with a zero entry): small enough that running it costs
    milliseconds once compiled."""
    from pdbq.graph.builder import GraphBuilder  # noqa: PLC0415
    from pdbq.language.nodes import FactorFunction as F, Semantics  # noqa: PLC0415

    b = GraphBuilder()
    x = b.add_variables(6)
    c = b.add_variable(3)
    e = b.add_variable(2, evidence=1)
    w = b.add_weight(0.7)
    s = b.add_weight(2.5)
    b.add_factor(F.ISTRUE, [x[0]], weight=w)
    b.add_factor(F.EQUAL, [x[0], x[1]], weight=s)
    b.add_factor(F.EQUAL, [x[1], x[2]], weight=s)
    b.add_factor(F.IMPLY, [x[2], x[3]], weight=w)
    b.add_factor(F.AND, [x[3], x[4]], weight=w)
    b.add_factor(F.OR, [x[4], e], weight=w)
    b.add_factor(F.IMPLY_MLN, [x[5], x[0]], weight=w)
    for sem in (Semantics.RATIO, Semantics.LOGICAL, Semantics.LINEAR):
        g = b.add_group(sem, w)
        b.add_factor(F.IMPLY, [x[1], x[5]], group=g)
        b.add_factor(F.IMPLY, [x[2], x[5]], group=g)
    b.add_factor(F.TABLE, [x[4], c], table=[0.0, 0.5, -np.inf, 0.3, 0.0, 1.0])
    b.add_factor(F.TABLE, [c], table=[0.2, 0.0, -0.4])
    return b.build(), np.array([x[0], x[3], c], dtype=np.int64)


def _wide_graph():
    """A chain of booleans and a categorical of `NARROW_VALUES` + 1 values (TABLE factors, a
    zero entry, evidence): the int32 value path of every sampling kernel."""
    from pdbq.graph.builder import GraphBuilder  # noqa: PLC0415
    from pdbq.language.nodes import FactorFunction as F  # noqa: PLC0415

    k = NARROW_VALUES + 1
    b = GraphBuilder()
    x = b.add_variables(4)
    c = b.add_variable(k)
    e = b.add_variable(2, evidence=0)
    s = b.add_weight(2.5)
    b.add_factor(F.EQUAL, [x[0], x[1]], weight=s)
    b.add_factor(F.EQUAL, [x[1], x[2]], weight=s)
    b.add_factor(F.EQUAL, [x[2], x[3]], weight=s)
    b.add_factor(F.OR, [x[3], e], weight=b.add_weight(0.7))
    table = np.linspace(-1.0, 1.0, 2 * k)
    table[1] = -np.inf
    b.add_factor(F.TABLE, [x[0], c], table=table.tolist())
    b.add_factor(F.TABLE, [c, x[3]], table=np.linspace(0.5, -0.5, 2 * k).tolist())
    return b.build(), np.array([x[0], x[2], c], dtype=np.int64)


def tiers_for(graph, moves: bool) -> tuple[str, ...]:
    """The tiers a sampling run on ``graph`` needs beyond ``"core"``: ``"moves"`` when it may use
    the mixing moves, and the wide tiers when a variable has more than `NARROW_VALUES` values."""
    wide = graph.n_vars > 0 and int(np.max(graph.cardinality)) > NARROW_VALUES
    return (("moves",) if moves else ()) + (("wide",) if wide else ()) + (("wide-moves",) if wide and moves else ())


def _plan(graph, targets) -> None:
    from pdbq.graph.from_store import _var_csr_fast, reachable  # noqa: PLC0415
    from pdbq.inference.exact.auto import choose_method  # noqa: PLC0415

    for two_pass in (False, True):
        _var_csr_fast(graph.factor_offsets, graph.factor_vars, graph.n_vars, two_pass=two_pass)
    reachable(graph, targets[:1])
    choose_method(graph, max_table=1 << 20, max_seconds=1.0)


def _exact(graph, targets) -> None:
    from pdbq.inference.exact.elimination import exact_map, exact_marginals  # noqa: PLC0415

    exact_marginals(graph)
    exact_marginals(graph, variables=targets)
    exact_map(graph)


def _sampling(graph, targets) -> None:
    from pdbq.inference.mcmc.config import GibbsConfig  # noqa: PLC0415
    from pdbq.inference.mcmc.gibbs import run_gibbs  # noqa: PLC0415
    from pdbq.inference.mcmc.kernels import prepare_kernel_graph  # noqa: PLC0415
    from pdbq.inference.query_aware.influence import edge_influence  # noqa: PLC0415
    from pdbq.inference.query_aware.selection import SelectionConfig, selection_distribution  # noqa: PLC0415

    kernel = prepare_kernel_graph(graph)
    sites = np.flatnonzero(graph.evidence < 0).astype(np.int32)
    influence = edge_influence(graph)
    sel = selection_distribution(graph, targets, sites, SelectionConfig(), influence=influence)
    # a budget-governed run (deadline, tolerance, share burn-in) and a fixed one (sweep scan)
    cfg = GibbsConfig(tolerance=0.2, chains=2, threads=1, seed=0, steps=40_000)
    run_gibbs(graph, targets, cfg, sites=sites, selection=(sel.prob, sel.alias), kernel=kernel,
              deadline=time.perf_counter() + 5.0)
    run_gibbs(graph, targets, GibbsConfig(steps=2_000, chains=2, threads=1, seed=0), kernel=kernel)


def _core(graph, targets) -> None:
    _plan(graph, targets)
    _sampling(graph, targets)
    _exact(graph, targets)


def _moves(graph, targets) -> None:
    from pdbq.inference.mcmc.config import GibbsConfig, MixingConfig  # noqa: PLC0415
    from pdbq.inference.mcmc.gibbs import run_gibbs  # noqa: PLC0415
    from pdbq.inference.moves.blocks import build_blocks  # noqa: PLC0415
    from pdbq.inference.moves.cutset import choose_cutset, cutset_for, run_cutset  # noqa: PLC0415
    from pdbq.inference.moves.domain_chains import domain_moves  # noqa: PLC0415
    from pdbq.inference.moves.mixing import run_mixing  # noqa: PLC0415
    from pdbq.inference.moves.static_blocks import draw_seconds as static_draw_seconds  # noqa: PLC0415
    from pdbq.inference.moves.static_blocks import static_blocks, static_moves, upward  # noqa: PLC0415

    cfg = GibbsConfig(steps=2_000, chains=2, threads=1, seed=0)
    for mixing in (MixingConfig(blocks="auto"), MixingConfig(tempering=2, jumps=2), MixingConfig(clusters=True),
                   MixingConfig(blocks="auto", clusters=True)):
        run_mixing(graph, targets, cfg, mixing)
    run_cutset(graph, targets, cfg, cutset=cutset_for(graph, True, 1 << 10))
    # a remainder table of 4 entries needs a cutset of two variables: one joint group, whose
    # collapsed sweep the cutset above (empty on this graph) never reaches
    run_cutset(graph, targets, cfg, cutset=choose_cutset(graph, max_table=4, max_vars=4))
    # AUTO's exact blocks over the slow domains a pilot shows (their own draw, over the chains'
    # value arrays)
    sites = np.flatnonzero(graph.evidence < 0)
    run_gibbs(graph, targets, cfg, moves=domain_moves(graph, build_blocks(graph, max_table=1 << 6), sites, 1))
    # AUTO's static blocks (one block over every free variable, each draw a backward pass)
    sb = static_blocks(graph, sites)
    if sb is not None:
        static_draw_seconds(graph, sb, upward(sb, graph.n_vars))
        run_gibbs(graph, targets, cfg, moves=static_moves(graph, sb, sites))


def _anneal(graph) -> None:
    from pdbq.inference.mcmc.anneal import anneal_map  # noqa: PLC0415
    from pdbq.inference.mcmc.config import AnnealConfig  # noqa: PLC0415

    sites = np.flatnonzero(graph.evidence < 0)
    anneal_map(graph, AnnealConfig(steps=400, chains=2, threads=1, seed=0), sites=sites)
    anneal_map(graph, AnnealConfig(steps=400, chains=2, threads=1, seed=0, time_limit=5.0), sites=sites)


def warm_up(tier: str = "core") -> WarmUp | None:
    """Run ``tier``'s kernels once in this process (compiling those not in numba's cache);
    None when this process already did (then it costs nothing). Thread-safe. A compilation is
    announced when it starts through this thread's `pdbq.progress.watch_compiles` (if any)."""
    if tier not in TIERS:
        raise ValueError(f"warm_up: tier must be one of {TIERS}, got {tier!r}")
    if _done.get(tier):
        return None
    with _lock:
        if _done.get(tier):
            return None
        t0 = time.perf_counter()
        before = _misses()
        expect_compiles(TIER_TEXT[tier], TIER_SECONDS[tier])
        graph, targets = _wide_graph() if tier.startswith("wide") else _tiny_graph()
        run = {"core": _core, "wide": _core, "plan": _plan, "exact": _exact, "sampling": _sampling,
               "anneal": lambda g, t: _anneal(g)}.get(tier, _moves)
        run(graph, targets)
        for part in (tier,) + _PARTS.get(tier, ()):
            _done[part] = True
        watch = current_watch()
        if watch is not None:
            watch.settle()
        return WarmUp(tier, time.perf_counter() - t0, _misses() - before)
