"""Exact blocks over what hard constraints tie together, so that chains cross them.

A hard constraint (a weight of magnitude `pdbq.inference.exact.hard.HARD_WEIGHT` or more,
rescaled so that breaking it costs at least `MARGIN` of log-probability) over two or more free
variables freezes single-site Gibbs: with ``a = b`` hard, neither variable can change alone, so
a chain stays in the world it started in and its standard errors say nothing about the other
worlds. Drawing each *tied component* (a connected component of the free variables under the
factors whose log-table spans at least half the margin: the hard ones, and soft ones as strong)
as one exact block from its conditional given the rest moves the whole component at once; it is
an exact Gibbs step, so the chains keep the same stationary distribution.

A component too wide for ``max_table`` entries per clique is left to single-site moves (and the
answer keeps its warning); `hard_tie_blocks` says how many tied variables no block holds.
"""

from __future__ import annotations

import numpy as np

from pdbq.graph.layout import FactorGraph
from pdbq.inference.exact.hard import MARGIN
from pdbq.inference.moves.blocks import BlockList, block_edges, scope_components
from pdbq.inference.moves.tied import tied_blocks

__all__ = ["TIE_SPREAD", "hard_tie_blocks"]

#: A factor whose log-table spans this much (e^-100 ≈ 4e-44) ties its free variables.
TIE_SPREAD = MARGIN / 2


def hard_tie_blocks(graph: FactorGraph, *, max_table: int, deadline: float | None = None) -> tuple[BlockList, int]:
    """(one exact block per tied component that fits ``max_table``, the tied free variables left
    outside every block)."""
    edges = block_edges(graph)
    scopes = [h.scope for h in edges
              if h.scope.shape[0] >= 2 and float(h.log_table.max() - h.log_table.min()) >= TIE_SPREAD]
    tied = np.zeros(graph.n_vars, dtype=bool)
    for s in scopes:
        tied[s] = True
    comps = scope_components(graph.n_vars, scopes, np.flatnonzero(tied & (graph.evidence < 0)))
    if not comps:
        return BlockList(), 0
    made = tied_blocks(graph, comps, max_table=max_table, edges=edges, deadline=deadline)
    held = sum(b.vars.shape[0] for b in made)
    return made, sum(c.shape[0] for c in comps) - held
