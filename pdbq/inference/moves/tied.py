"""Exact blocks over what the hard zeros tie together (AUTO's block moves on deterministic models).

A factor holding a zero entry ties its variables: single-site moves cannot change one of them
without the others where the zero forbids it. Deterministic tables tie long chains of variables
this way: in a pedigree, a child's allele is its parent's allele picked by a selector, so a
founder's allele cannot change unless every descendant that carries it changes in the same move.
`build_blocks` grows blocks under the *global* elimination order's cliques, which on a
high-width graph stop a block short of such a chain; what is left outside stays frozen, since
the block is drawn given it and it cannot move on its own (the chains never mix, R-hat says so).

A *tied component* is a connected component of the free variables under the factors with a
zero entry (`tied_components`). Conditioned on the rest of the graph, a component often has a
small width of its own (a pedigree's component is one locus: width 4 at 26 individuals, when
the whole graph has width 17), so it can be one exact block, with its own elimination order
(`tied_blocks`, `build_blocks(within=...)`). `split_components` says which components the
ordinary blocks leave split; AUTO then draws the components whole instead (`move_choice`).

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder(); x, y, z = b.add_variables(3)
>>> _ = b.add_factor(FactorFunction.TABLE, [x, y], table=[0.0, float("-inf"), float("-inf"), 0.0])
>>> _ = b.add_factor(FactorFunction.TABLE, [y, z], table=[0.5, 0.0, 0.0, 0.5])
>>> [c.tolist() for c in tied_components(b.build())]
[[0, 1]]
"""

from __future__ import annotations

import time

import numpy as np

from pdbq.graph.layout import FactorGraph
from pdbq.inference.exact.potentials import Hyperedge
from pdbq.inference.mcmc.kernels import HARD
from pdbq.inference.moves.blocks import Block, BlockList, block_edges, build_blocks, scope_components

__all__ = ["tied_components", "split_components", "tied_blocks"]


def tied_components(graph: FactorGraph, edges: list[Hyperedge] | None = None) -> list[np.ndarray]:
    """Connected components (sorted variable ids, at least two each) of the free variables under
    the factors that hold a zero entry (after the evidence is sliced in)."""
    edges = block_edges(graph) if edges is None else edges
    hard = [h.scope for h in edges if h.scope.shape[0] >= 2 and h.log_table.min() <= -HARD / 2]
    tied = np.zeros(graph.n_vars, dtype=bool)
    for scope in hard:
        tied[scope] = True
    return scope_components(graph.n_vars, hard, np.flatnonzero(tied & (graph.evidence < 0)))


def split_components(blocks: list[Block], components: list[np.ndarray]) -> list[np.ndarray]:
    """The components that no single block holds whole."""
    return [c for c in components
            if not any(b.vars.shape[0] >= c.shape[0] and np.isin(c, b.vars).all() for b in blocks)]


def tied_blocks(graph: FactorGraph, components: list[np.ndarray], *, max_table: int,
                edges: list[Hyperedge] | None = None, deadline: float | None = None) -> BlockList:
    """One exact block per component whose own elimination (the rest conditioned) fits
    ``max_table`` entries per clique; components that do not fit are left out (to the other
    moves). ``deadline``: stop there with the blocks made so far (`BlockList.cut`)."""
    edges = block_edges(graph) if edges is None else edges
    out = BlockList()
    for c in components:
        if deadline is not None and time.perf_counter() >= deadline:
            out.cut = True
            break
        within = np.zeros(graph.n_vars, dtype=bool)
        within[c] = True
        made = build_blocks(graph, max_table=max_table, edges=edges, within=within, deadline=deadline)
        if len(made) == 1 and made[0].vars.shape[0] == c.shape[0]:
            out.append(made[0])
    return out
