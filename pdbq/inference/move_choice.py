"""AUTO's choice of MCMC moves once exact elimination is out: single-site, blocks, tempering.

Read from the graph's arrays alone (no tables built, so a million-variable graph pays
microseconds): *walls* are zero entries in TABLE factors (single-site moves cannot cross them);
*strong couplings* are factor weights of magnitude at least `STRONG_WEIGHT` (a ±1-valued factor
then moves the log-odds of a flip by 2·|w| ≥ 4, enough to freeze single-site chains in clusters).
Either one asks for exact block moves, where the graph is small enough to cut into blocks
(`MAX_BLOCK_VARS` free variables); strong couplings also ask for replica exchange with
`TEMPERING_COPIES` copies, which is what lets a whole cluster flip.

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder(); x, y = b.add_variables(2)
>>> _ = b.add_factor(FactorFunction.TABLE, [x, y], table=[0.0, float("-inf"), float("-inf"), 0.0])
>>> d = choose_moves(b.build())
>>> d.mixing.blocks, d.mixing.tempering
('auto', 1)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdbq.graph.layout import FactorGraph
from pdbq.inference.config import MixingConfig
from pdbq.language.nodes import FactorFunction

__all__ = ["MoveDecision", "choose_moves", "STRONG_WEIGHT", "MAX_BLOCK_VARS", "TEMPERING_COPIES"]

STRONG_WEIGHT = 2.0
MAX_BLOCK_VARS = 50_000
TEMPERING_COPIES = 4


@dataclass(frozen=True)
class MoveDecision:
    """The moves AUTO adds to its chains and why."""

    mixing: MixingConfig
    reason: str


def _table_spread(graph: FactorGraph) -> tuple[bool, float]:
    """(any zero entry, largest spread max − min of one TABLE factor's finite log-entries)."""
    # a one-variable table is a bias, not a coupling
    is_table = (graph.function == int(FactorFunction.TABLE)) & (np.diff(graph.factor_offsets) >= 2)
    if not is_table.any():
        return False, 0.0
    f = np.flatnonzero(is_table)
    sizes = np.ones(f.shape[0], dtype=np.int64)
    arity = np.diff(graph.factor_offsets)[f]
    starts = graph.factor_offsets[f]
    card = graph.cardinality.astype(np.int64)
    for k in range(int(arity.max()) if arity.size else 0):
        has = arity > k
        sizes[has] *= card[graph.factor_vars[starts[has] + k]]
    t = np.where(np.isfinite(graph.tables), graph.tables, np.nan)
    offs = graph.table_offset[f]
    if t.size == 0:
        return walls, 0.0
    idx = np.repeat(offs, sizes) + (np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes))
    seg = np.repeat(np.arange(f.shape[0]), sizes)
    walls = bool(np.isneginf(graph.tables[idx]).any())
    vals = t[idx]
    ok = ~np.isnan(vals)
    if not ok.any():
        return walls, 0.0
    hi = np.full(f.shape[0], -np.inf)
    lo = np.full(f.shape[0], np.inf)
    np.maximum.at(hi, seg[ok], vals[ok])
    np.minimum.at(lo, seg[ok], vals[ok])
    spread = hi - lo
    spread = spread[np.isfinite(spread)]
    return walls, float(spread.max()) if spread.size else 0.0


def choose_moves(graph: FactorGraph, *, block_table: int = 2**10) -> MoveDecision:
    """Moves for AUTO's chains on ``graph`` (see the module docstring)."""
    free = int(np.count_nonzero(graph.evidence < 0))
    walls, spread = _table_spread(graph)
    used = np.zeros(graph.weights.shape[0], dtype=bool)
    not_table = graph.function != int(FactorFunction.TABLE)
    used[graph.weight[not_table]] = True
    used[graph.group_weight] = True
    wmax = float(np.abs(graph.weights[used]).max()) if used.any() else 0.0
    strong = wmax >= STRONG_WEIGHT or spread >= 2 * STRONG_WEIGHT
    if not walls and not strong:
        return MoveDecision(MixingConfig(), f"single-site moves (no zero entries; largest |weight| {wmax:.3g}, "
                                            f"largest table spread {spread:.3g})")
    if free > MAX_BLOCK_VARS:
        why = "zero entries" if walls else "strong couplings"
        return MoveDecision(MixingConfig(), f"single-site moves: {why}, but {free:,} free variables are too many "
                                            f"to cut into exact blocks (limit {MAX_BLOCK_VARS:,})")
    if strong:
        what = f"strong couplings (largest |weight| {wmax:.3g}, table spread {spread:.3g})"
        if walls:
            what = "zero entries and " + what
        return MoveDecision(MixingConfig(blocks="auto", block_table=block_table, tempering=TEMPERING_COPIES),
                            f"exact block moves and replica exchange ({TEMPERING_COPIES} copies): {what}")
    return MoveDecision(MixingConfig(blocks="auto", block_table=block_table),
                        "exact block moves: zero entries in the tables freeze single-site moves")
