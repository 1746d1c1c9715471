"""USING AUTO: exact elimination whenever it fits the table budget and the time budget (exact_budget).

The decision looks only at the interaction graph (no tables are built): a min-fill order gives
the induced width, the largest clique table and the sum of clique tables; the time estimate is
that sum times a measured cost per table entry (both passes of `exact_marginals`) plus a
per-clique and per-factor overhead. The search stops at the first clique beyond the budget, so
a hopeless graph is rejected quickly.

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder(); xs = b.add_variables(3); w = b.add_weight(0.5)
>>> for a, c in zip(xs, xs[1:]):
...     _ = b.add_factor(FactorFunction.EQUAL, [a, c], weight=w)
>>> d = choose_method(b.build())
>>> d.method, d.reason
('EXACT', 'exact: induced width 1, largest table 4 entries')
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from pdbq.graph.layout import FactorGraph
from pdbq.inference.exact.elimination_order import interaction_scopes, min_fill_order
from pdbq.inference.exact.elimination import DEFAULT_MAX_TABLE
from pdbq.inference.exact.potentials import evidence_array
from pdbq.memory import table_cap

__all__ = ["AutoConfig", "Decision", "choose_method", "estimate_exact_seconds", "exact_hint", "DEFAULT_EXACT_BUDGET"]

# Seconds of exact inference AUTO accepts by default (the ``exact_budget`` option): a user who
# asked for an answer would rather wait a few seconds for the exact one than get a sampled one
# that may be flagged (stuck chains on multi-modal models such as Grids_12 or DBN_11).
DEFAULT_EXACT_BUDGET = 5.0


@dataclass(frozen=True)
class AutoConfig:
    """Knobs of the AUTO rule.

    max_table: largest clique table exact inference may build (entries).
    max_seconds: exact is chosen whenever its estimated time is at most this (the query option
    ``exact_budget``; default `DEFAULT_EXACT_BUDGET`).
    ns_per_entry, us_per_clique, us_per_factor: the cost model of `exact_marginals`, measured
    on the UAI 2014 networks (2-core x86-64, 2026-11-21: DBN_11, 44M clique entries, 1.4 s;
    ObjectDetection_11, 92M entries, 3.0 s; Alchemy_11, 440 cliques and 860 factors, 0.25 s),
    checked on 15 networks on 2026-11-23 (examples/bench/auto_cost.py, docs/benchmarks.md):
    measured / estimated 0.86–1.21 on every network over a second.
    """

    max_table: int = DEFAULT_MAX_TABLE
    max_seconds: float = DEFAULT_EXACT_BUDGET
    ns_per_entry: float = 33.0
    us_per_clique: float = 300.0
    us_per_factor: float = 20.0


@dataclass(frozen=True)
class Decision:
    """The method AUTO picked ("EXACT" or "MCMC") and why, with the numbers behind it.

    ``width``/``table_size`` are those of the min-fill order (lower bounds when the search
    stopped at the first clique beyond the budget); ``estimated_seconds`` is None then.
    ``cut``: the search was stopped by its deadline (`choose_method`'s ``should_stop``) before
    it could tell: MCMC, a choice of this query's clock only (not to be kept for later queries).
    """

    method: str
    reason: str
    width: int
    table_size: int
    estimated_seconds: float | None
    cut: bool = False


def _pow2(n: int) -> str:
    e = math.log2(n) if n > 0 else 0.0
    return f"2^{int(e)}" if e == int(e) else f"{n:,}"


def estimate_exact_seconds(total_table_size: int, n_cliques: int, n_factors: int, config: AutoConfig = AutoConfig()) -> float:
    """Estimated wall time of `exact_marginals` from the order's sizes (see `AutoConfig`)."""
    return (
        total_table_size * config.ns_per_entry * 1e-9
        + n_cliques * config.us_per_clique * 1e-6
        + n_factors * config.us_per_factor * 1e-6
    )


def choose_method(
    graph: FactorGraph,
    *,
    max_table: int | None = None,
    max_seconds: float | None = None,
    evidence: Mapping[int, int] | np.ndarray | None = None,
    config: AutoConfig = AutoConfig(),
    should_stop: Callable[[], bool] | None = None,
) -> Decision:
    """EXACT when the min-fill elimination fits ``max_table`` and is estimated to finish within
    ``max_seconds`` (inclusive), else MCMC; the reason is a sentence naming width and table size.

    ``evidence`` replaces ``graph.evidence`` when given (observed variables drop out).
    ``should_stop()``: read during the order search (`min_fill_order`); True ends it with MCMC
    (`Decision.cut`).
    """
    max_table = config.max_table if max_table is None else int(max_table)
    max_seconds = config.max_seconds if max_seconds is None else float(max_seconds)
    ev = evidence_array(graph.n_vars, graph.evidence if evidence is None else evidence)
    info = min_fill_order(interaction_scopes(graph, ev), graph.cardinality, stop_above=min(max_table, table_cap()),
                          should_stop=should_stop)
    if info.stopped:
        return Decision(
            "MCMC",
            f"MCMC: the time limit stopped the elimination-order search after {info.order.shape[0]:,} variables "
            f"({info.describe()} so far), before it could tell whether exact inference fits",
            info.width,
            info.max_table_size,
            None,
            cut=True,
        )
    if not info.complete or info.max_table_size > max_table:
        size = info.max_table_size
        return Decision(
            "MCMC",
            f"MCMC: induced width {'at least ' if not info.complete else ''}{info.width} would need a "
            f"{_pow2(size)}-entry table (budget {_pow2(max_table)})",
            info.width,
            size,
            None,
        )
    secs = estimate_exact_seconds(info.total_table_size, len(info.cliques), graph.n_factors, config)
    sizes = f"induced width {info.width}, largest table {info.max_table_size:,} entries"
    if secs > max_seconds:
        return Decision(
            "MCMC",
            f"MCMC: exact elimination fits the table budget ({sizes}) but would take about {secs:.1f} s "
            f"(exact_budget {max_seconds:g} s)",
            info.width,
            info.max_table_size,
            secs,
        )
    return Decision("EXACT", f"exact: {sizes}", info.width, info.max_table_size, secs)


def exact_hint(decision: Decision, budget: float) -> str:
    """The note added to a flagged sampling answer of AUTO: why it sampled, and the option that
    gives the exact answer when there is one."""
    if decision.estimated_seconds is not None and decision.table_size >= 0:
        secs = decision.estimated_seconds
        return (
            f"AUTO sampled because exact inference was estimated at about {secs:.1f} s, over exact_budget = {budget:g} s; "
            f"for the exact answer write WITH (exact_budget = {max(math.ceil(secs * 2), 1)}) or USING EXACT"
        )
    if decision.estimated_seconds is not None:  # the free-variable floor: no order was computed
        return (
            f"AUTO sampled because exact inference would take at least {decision.estimated_seconds:.1f} s, over "
            f"exact_budget = {budget:g} s; a larger exact_budget or USING EXACT may give the exact answer"
        )
    return (
        f"AUTO sampled because exact inference needs a {_pow2(decision.table_size)}-entry table, over "
        f"max_table; raising max_table gives the exact answer only if memory allows"
    )
