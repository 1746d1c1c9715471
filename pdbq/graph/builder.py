"""Build a `FactorGraph` from Python without SQL: for tests, UAI import and experiments.

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder()
>>> a, c = b.add_variables(2)
>>> w = b.add_weight(0.7)
>>> _ = b.add_factor(FactorFunction.EQUAL, [a, c], weight=w)
>>> g = b.build()
>>> (g.n_vars, g.n_factors, g.n_edges)
(2, 1, 2)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pdbq.graph.layout import NO_EVIDENCE, NO_GROUP, NO_TABLE, RAW_VALUE, FactorGraph, GraphError, validate
from pdbq.language.nodes import FactorFunction, Semantics

__all__ = ["GraphBuilder", "csr_from_edges"]


def csr_from_edges(
    factor_offsets: np.ndarray, factor_vars: np.ndarray, group: np.ndarray, n_vars: int
) -> tuple[np.ndarray, np.ndarray]:
    """Variable → factor CSR from factor → variable CSR, each row sorted by (group, factor)."""
    n_factors = factor_offsets.shape[0] - 1
    edge_factor = np.repeat(np.arange(n_factors, dtype=np.int64), np.diff(factor_offsets))
    # groups sort as themselves; ungrouped (-1) first.
    order = np.lexsort((edge_factor, group[edge_factor] if n_factors else edge_factor, factor_vars))
    var_factors = edge_factor[order].astype(np.int32)
    counts = np.bincount(factor_vars, minlength=n_vars) if factor_vars.size else np.zeros(n_vars, np.int64)
    var_offsets = np.zeros(n_vars + 1, dtype=np.int64)
    np.cumsum(counts, out=var_offsets[1:])
    return var_offsets, var_factors


class GraphBuilder:
    """Accumulates variables, weights, groups and factors; `build()` returns a validated graph."""

    def __init__(self) -> None:
        self._card: list[int] = []
        self._evidence: list[int] = []
        self._weights: list[float] = []
        self._learnable: list[bool] = []
        self._group_sem: list[int] = []
        self._group_weight: list[int] = []
        self._function: list[int] = []
        self._fweight: list[int] = []
        self._fgroup: list[int] = []
        self._fvars: list[Sequence[int]] = []
        self._flits: list[Sequence[int]] = []
        self._table_offset: list[int] = []
        self._tables: list[np.ndarray] = []
        self._table_len = 0

    # -- variables
    def add_variable(self, cardinality: int = 2, evidence: int | None = None) -> int:
        if cardinality < 2:
            raise GraphError(f"cardinality must be at least 2, got {cardinality}")
        if evidence is not None and not 0 <= evidence < cardinality:
            raise GraphError(f"evidence {evidence} outside domain of size {cardinality}")
        self._card.append(int(cardinality))
        self._evidence.append(NO_EVIDENCE if evidence is None else int(evidence))
        return len(self._card) - 1

    def add_variables(self, n: int, cardinality: int = 2) -> list[int]:
        return [self.add_variable(cardinality) for _ in range(n)]

    def set_evidence(self, var: int, value: int | None) -> None:
        if value is not None and not 0 <= value < self._card[var]:
            raise GraphError(f"evidence {value} outside domain of variable {var}")
        self._evidence[var] = NO_EVIDENCE if value is None else int(value)

    # -- weights and groups
    def add_weight(self, value: float, learnable: bool = False) -> int:
        self._weights.append(float(value))
        self._learnable.append(bool(learnable))
        return len(self._weights) - 1

    def add_group(self, semantics: Semantics, weight: int) -> int:
        self._group_sem.append(int(semantics))
        self._group_weight.append(int(weight))
        return len(self._group_sem) - 1

    # -- factors
    def add_factor(
        self,
        function: FactorFunction,
        variables: Sequence[int],
        *,
        weight: int | None = None,
        literals: Sequence[int] | None = None,
        group: int | None = None,
        table: Sequence[float] | np.ndarray | None = None,
    ) -> int:
        """Add one factor. ``literals`` default to raw values (-1). For a grouped factor the weight
        is the group's. ``table`` (TABLE only) holds log-potentials, last argument fastest."""
        function = FactorFunction(function)
        variables = [int(v) for v in variables]
        if any(not 0 <= v < len(self._card) for v in variables):
            raise GraphError(f"factor names an unknown variable: {variables}")
        lits = [RAW_VALUE] * len(variables) if literals is None else [int(x) for x in literals]
        if len(lits) != len(variables):
            raise GraphError("literals must match variables one to one")
        if group is not None:
            gw = self._group_weight[group]
            if weight is not None and weight != gw:
                raise GraphError("a grouped factor uses its group's weight")
            weight = gw
        if function == FactorFunction.TABLE:
            if table is None:
                raise GraphError("a TABLE factor needs its table")
            arr = np.asarray(table, dtype=np.float64).ravel()
            size = int(np.prod([self._card[v] for v in variables])) if variables else 1
            if arr.shape[0] != size:
                raise GraphError(f"TABLE factor over {variables} needs {size} entries, got {arr.shape[0]}")
            if weight is None:
                weight = self._unit_weight()
            self._table_offset.append(self._table_len)
            self._tables.append(arr)
            self._table_len += size
        else:
            if table is not None:
                raise GraphError("only TABLE factors take a table")
            if weight is None:
                raise GraphError("a factor needs a weight index")
            self._table_offset.append(NO_TABLE)
        self._function.append(int(function))
        self._fweight.append(int(weight))
        self._fgroup.append(NO_GROUP if group is None else int(group))
        self._fvars.append(variables)
        self._flits.append(lits)
        return len(self._function) - 1

    def _unit_weight(self) -> int:
        if not hasattr(self, "_unit"):
            self._unit = self.add_weight(1.0)
        return self._unit

    # -- result
    def build(self) -> FactorGraph:
        n_vars = len(self._card)
        arity = np.array([len(v) for v in self._fvars], dtype=np.int64)
        factor_offsets = np.zeros(len(self._fvars) + 1, dtype=np.int64)
        np.cumsum(arity, out=factor_offsets[1:])
        factor_vars = np.fromiter((v for vs in self._fvars for v in vs), dtype=np.int32, count=int(factor_offsets[-1]))
        factor_lits = np.fromiter((x for ls in self._flits for x in ls), dtype=np.int32, count=int(factor_offsets[-1]))
        group = np.array(self._fgroup, dtype=np.int32)
        var_offsets, var_factors = csr_from_edges(factor_offsets, factor_vars, group, n_vars)
        g = FactorGraph(
            cardinality=np.array(self._card, dtype=np.int32),
            evidence=np.array(self._evidence, dtype=np.int32),
            var_offsets=var_offsets,
            var_factors=var_factors,
            function=np.array(self._function, dtype=np.int8),
            weight=np.array(self._fweight, dtype=np.int32),
            group=group,
            factor_offsets=factor_offsets,
            factor_vars=factor_vars,
            factor_literals=factor_lits,
            table_offset=np.array(self._table_offset, dtype=np.int64),
            tables=np.concatenate(self._tables) if self._tables else np.zeros(0, dtype=np.float64),
            weights=np.array(self._weights, dtype=np.float64),
            learnable=np.array(self._learnable, dtype=np.bool_),
            semantics=np.array(self._group_sem, dtype=np.int8),
            group_weight=np.array(self._group_weight, dtype=np.int32),
        )
        return validate(g)
