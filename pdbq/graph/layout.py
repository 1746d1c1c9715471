"""The one array layout every kernel reads: a factor graph as a NamedTuple of numpy arrays.

Variables are dense ids ``0 .. n_vars-1``; a variable's value is an integer in ``0 .. card-1``
(booleans: 0 = false, 1 = true). Factors are dense ids ``0 .. n_factors-1``.

Each factor argument (an *edge*) is a literal over one variable:
``literal[e] == -1`` means the argument stands for the variable's raw value; ``literal[e] == k``
(k >= 0) means the argument is the truth value ``[x == k]`` (so a negated boolean atom has
literal 0 and a positive one literal 1). docs/factors.md defines the value each function code
computes from its arguments; the head of IMPLY/IMPLY_MLN/VOTE/LINEAR/RATIO/LOGICAL is the LAST
argument.

Energy: ``log P(x) = Σ_{factor f, group[f] == -1} weights[weight[f]] * φ_f(x)
                  + Σ_{group g} weights[group_weight[g]] * g_sem(Σ_{f: group[f] == g} φ_f(x)) - log Z``
where g_sem is ``semantics[g]`` (LINEAR x, LOGICAL sgn x, RATIO sgn(x)·log(1+|x|)).
Every factor of a group shares the group's weight (``weight[f] == group_weight[group[f]]``).

Adjacency:
- factor → variables: ``factor_vars[factor_offsets[f]:factor_offsets[f+1]]`` with
  ``factor_literals`` alongside, in argument order.
- variable → factors: ``var_factors[var_offsets[v]:var_offsets[v+1]]``, sorted by
  (group, factor) so a kernel can accumulate one group's change from consecutive entries.
  A factor appears once per argument slot that holds the variable.

Bytes per edge: 4 (factor_vars) + 4 (factor_literals) + 4 (var_factors) = 12, plus per factor
1 + 4 + 4 + 8 + 8 = 25 and per variable 4 + 4 + 8 = 16; well under 48 per edge.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pdbq.errors import PdbqError
from pdbq.language.nodes import FactorFunction, Semantics

__all__ = ["FactorGraph", "GraphError", "validate", "writable", "NO_EVIDENCE", "NO_GROUP", "RAW_VALUE", "NO_TABLE"]

NO_EVIDENCE = -1
NO_GROUP = -1
RAW_VALUE = -1
NO_TABLE = -1


class GraphError(PdbqError):
    """A factor graph whose arrays are inconsistent (caught before any kernel runs)."""


class FactorGraph(NamedTuple):
    # --- variables (n_vars)
    cardinality: np.ndarray  # int32[n_vars], >= 2
    evidence: np.ndarray  # int32[n_vars], observed value or -1
    var_offsets: np.ndarray  # int64[n_vars + 1]
    var_factors: np.ndarray  # int32[n_edges]: factor ids, sorted by (group, factor) per variable
    # --- factors (n_factors)
    function: np.ndarray  # int8[n_factors]: FactorFunction code
    weight: np.ndarray  # int32[n_factors]: index into weights
    group: np.ndarray  # int32[n_factors]: head group id or -1
    factor_offsets: np.ndarray  # int64[n_factors + 1]
    factor_vars: np.ndarray  # int32[n_edges]: variable ids in argument order
    factor_literals: np.ndarray  # int32[n_edges]: -1 raw value, k >= 0 literal [x == k]
    table_offset: np.ndarray  # int64[n_factors]: start in `tables` for TABLE factors, else -1
    tables: np.ndarray  # float64[...]: log-potentials, last argument fastest (UAI order)
    # --- weights (n_weights)
    weights: np.ndarray  # float64[n_weights]
    learnable: np.ndarray  # bool[n_weights]
    # --- head groups (n_groups)
    semantics: np.ndarray  # int8[n_groups]: Semantics code
    group_weight: np.ndarray  # int32[n_groups]: index into weights

    @property
    def n_vars(self) -> int:
        return int(self.cardinality.shape[0])

    @property
    def n_factors(self) -> int:
        return int(self.function.shape[0])

    @property
    def n_edges(self) -> int:
        return int(self.factor_vars.shape[0])

    @property
    def n_groups(self) -> int:
        return int(self.semantics.shape[0])

    def factor_args(self, f: int) -> np.ndarray:
        return self.factor_vars[self.factor_offsets[f] : self.factor_offsets[f + 1]]

    def var_adjacent_factors(self, v: int) -> np.ndarray:
        return self.var_factors[self.var_offsets[v] : self.var_offsets[v + 1]]

    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in self))


_DTYPES = {
    "cardinality": np.int32,
    "evidence": np.int32,
    "var_offsets": np.int64,
    "var_factors": np.int32,
    "function": np.int8,
    "weight": np.int32,
    "group": np.int32,
    "factor_offsets": np.int64,
    "factor_vars": np.int32,
    "factor_literals": np.int32,
    "table_offset": np.int64,
    "tables": np.float64,
    "weights": np.float64,
    "learnable": np.bool_,
    "semantics": np.int8,
    "group_weight": np.int32,
}

_FUNCTION_CODES = np.array(sorted(int(f) for f in FactorFunction), dtype=np.int64)
# int8 function code (as uint8: a negative code lands above 127) -> known
_KNOWN_FUNCTION = np.zeros(256, dtype=bool)
_KNOWN_FUNCTION[_FUNCTION_CODES] = True
_SEMANTICS_CODES = np.array(sorted(int(s) for s in Semantics), dtype=np.int64)


def writable(g: FactorGraph) -> FactorGraph:
    """``g`` with every array writable (a read-only one copied; the others kept as they are).

    numba types a read-only array apart from a writable one, so a graph holding one (an Arrow
    buffer read without a copy) is another signature of every kernel it reaches: compiled during
    the query, outside the warm-up and past its deadline (seconds per kernel on a loaded machine).
    Every graph the kernels see is therefore writable, as the warm-up's is."""
    if all(a.flags.writeable for a in g):
        return g
    return g._replace(**{k: a.copy() for k, a in zip(g._fields, g) if not a.flags.writeable})


def validate(g: FactorGraph) -> FactorGraph:
    """Check dtypes, shapes and references; raise `GraphError` naming the first problem.

    Kernels assume a validated graph and check nothing themselves.
    """
    for name, dtype in _DTYPES.items():
        arr = getattr(g, name)
        if not isinstance(arr, np.ndarray) or arr.dtype != dtype or arr.ndim != 1:
            raise GraphError(f"graph array '{name}' must be a 1-d {np.dtype(dtype).name} array")
        if not arr.flags.c_contiguous:
            raise GraphError(f"graph array '{name}' must be contiguous")
    nv, nf, ne, nw, ng = g.n_vars, g.n_factors, g.n_edges, g.weights.shape[0], g.n_groups
    if g.var_offsets.shape[0] != nv + 1 or g.factor_offsets.shape[0] != nf + 1:
        raise GraphError("offset arrays must have one more entry than their rows")
    for name in ("evidence",):
        if getattr(g, name).shape[0] != nv:
            raise GraphError(f"'{name}' must have one entry per variable")
    for name in ("weight", "group", "table_offset"):
        if getattr(g, name).shape[0] != nf:
            raise GraphError(f"'{name}' must have one entry per factor")
    if g.var_factors.shape[0] != ne or g.factor_literals.shape[0] != ne:
        raise GraphError("var_factors and factor_literals must have one entry per edge")
    if g.learnable.shape[0] != nw or g.group_weight.shape[0] != ng:
        raise GraphError("learnable needs one entry per weight, group_weight one per group")
    if nv and g.cardinality.min() < 2:
        raise GraphError(f"variable {int(np.argmin(g.cardinality))} has cardinality < 2")
    for name, offs, total in (("var_offsets", g.var_offsets, ne), ("factor_offsets", g.factor_offsets, ne)):
        # comparisons of shifted views: bools only (np.diff would allocate 8 bytes per row)
        if offs[0] != 0 or offs[-1] != total or np.any(offs[1:] < offs[:-1]):
            raise GraphError(f"'{name}' must rise from 0 to the number of edges")
    if ne:
        if g.factor_vars.min() < 0 or g.factor_vars.max() >= nv:
            raise GraphError("factor_vars holds a variable id out of range")
        if g.var_factors.min() < 0 or g.var_factors.max() >= nf:
            raise GraphError("var_factors holds a factor id out of range")
        card_e = g.cardinality[g.factor_vars]
        if np.any(g.factor_literals < -1) or np.any(g.factor_literals >= card_e):
            bad = int(np.flatnonzero((g.factor_literals < -1) | (g.factor_literals >= card_e))[0])
            raise GraphError(f"edge {bad}: literal value outside its variable's domain")
    bad_ev = (g.evidence < -1) | (g.evidence >= g.cardinality)
    if np.any(bad_ev):
        raise GraphError(f"variable {int(np.flatnonzero(bad_ev)[0])}: evidence outside its domain")
    if nf:
        if not np.all(_KNOWN_FUNCTION[g.function.view(np.uint8)]):  # a lookup: 1 byte per factor
            raise GraphError("unknown factor function code")
        if g.weight.min() < 0 or g.weight.max() >= nw:
            raise GraphError("factor weight index out of range")
        if g.group.min() < -1 or g.group.max() >= ng:
            raise GraphError("factor group index out of range")
        grouped = g.group >= 0
        if np.any(g.weight[grouped] != g.group_weight[g.group[grouped]]):
            raise GraphError("every factor of a head group must use the group's weight")
        is_table = g.function == int(FactorFunction.TABLE)
        if np.any((g.table_offset < 0) & is_table) or np.any((g.table_offset != NO_TABLE) & ~is_table):
            raise GraphError("table_offset must be set for TABLE factors only")
        if np.any(is_table):
            # Table sizes as a segmented product of log-cardinalities: one pass, no loop per factor.
            edge_factor = np.repeat(np.arange(nf), np.diff(g.factor_offsets))
            log_card = np.log(g.cardinality[g.factor_vars].astype(np.float64))
            sizes = np.rint(np.exp(np.bincount(edge_factor, weights=log_card, minlength=nf))).astype(np.int64)
            over = is_table & (g.table_offset + sizes > g.tables.shape[0])
            if np.any(over):
                raise GraphError(f"factor {int(np.flatnonzero(over)[0])}: its table runs past the end of 'tables'")
            raw_bad = is_table[edge_factor] & (g.factor_literals != RAW_VALUE)
            if np.any(raw_bad):
                raise GraphError(f"factor {int(edge_factor[np.flatnonzero(raw_bad)[0]])}: TABLE arguments must be raw values")
    if ng:
        if not np.all(np.isin(g.semantics.astype(np.int64), _SEMANTICS_CODES)):
            raise GraphError("unknown semantics code")
        if g.group_weight.min() < 0 or g.group_weight.max() >= nw:
            raise GraphError("group weight index out of range")
    if not np.all(np.isfinite(g.weights)):
        raise GraphError("weights must be finite")
    if g.tables.size and np.any(np.isnan(g.tables)):
        raise GraphError("tables hold NaN")
    return g
