"""Factor values and log-potential tables: the reference for docs/factors.md.

Three views of the same energy:

- `factor_value(graph, f, values)`: φ_f for one full assignment (a plain reference: every kernel,
  exact or sampled, is tested against it);
- `log_score(graph, values)`: the unnormalised log-probability of a full assignment
  (standalone factors weighted, head groups through their semantics);
- `hyperedges(graph)`: the energy as a sum of log-tables, one per standalone factor and one per
  head group, vectorised with numpy. Exact inference and exact analyses work on these.

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder()
>>> a, c = b.add_variables(2)
>>> _ = b.add_factor(FactorFunction.EQUAL, [a, c], weight=b.add_weight(0.5))
>>> g = b.build()
>>> log_score(g, [1, 1]), log_score(g, [0, 1])
(0.5, -0.5)
>>> [h.log_table.tolist() for h in hyperedges(g)]
[[[0.5, -0.5], [-0.5, 0.5]]]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import math

import numpy as np

from pdbq.errors import InferenceError
from pdbq.graph.layout import FactorGraph
from pdbq.language.nodes import FactorFunction, Semantics

__all__ = [
    "Hyperedge",
    "shifted",
    "shift_edge",
    "shift_edges",
    "factor_value",
    "group_function",
    "log_score",
    "hyperedges",
    "condition",
    "evidence_array",
    "DEFAULT_MAX_ENTRIES",
]

DEFAULT_MAX_ENTRIES = 2**26

_F = FactorFunction


@dataclass(frozen=True, eq=False)
class Hyperedge:
    """A log-potential table over a set of variables.

    ``scope``: int64 variable ids, sorted and unique; ``log_table``: float64 array shaped by the
    scope's cardinalities (axis i ↔ ``scope[i]``), holding the term's contribution to log P.
    ``source`` says where it came from ("factor 3", "group 1") for error messages.
    A scope of length 0 is a constant (a 0-d table).
    """

    scope: np.ndarray
    log_table: np.ndarray
    source: str = ""
    # log-potential removed by max-shifting (`shift_edge`): the table's true values are
    # log_table + offset. Exact inference adds it to log Z once instead of to every entry, so a
    # weight of 1e16 next to one of 0.7 keeps the 0.7. `hyperedges` leaves tables unshifted.
    offset: float = 0.0
    # a finite entry fell to -inf when shifted: the weights differ by more than a double holds
    saturated: bool = False

    @property
    def size(self) -> int:
        return int(self.log_table.size)


# ---------------------------------------------------------------- φ for one assignment


def _truth(lit: int, x: int) -> int:
    return int(x) if lit < 0 else int(x == lit)


def _val(lit: int, x: int) -> int:
    return int(x) if lit < 0 else int(x == lit)


def factor_value(graph: FactorGraph, f: int, values: Sequence[int] | np.ndarray) -> float:
    """φ_f (docs/factors.md) for a full assignment ``values`` (one value per variable).

    >>> from pdbq.graph.builder import GraphBuilder
    >>> b = GraphBuilder(); x, y = b.add_variables(2)
    >>> f = b.add_factor(FactorFunction.IMPLY, [x, y], weight=b.add_weight(1.0))
    >>> g = b.build()
    >>> [factor_value(g, f, v) for v in ([0, 0], [1, 0], [1, 1])]
    [0.0, -1.0, 1.0]
    """
    lo, hi = int(graph.factor_offsets[f]), int(graph.factor_offsets[f + 1])
    vars_ = graph.factor_vars[lo:hi]
    lits = graph.factor_literals[lo:hi]
    xs = [int(values[v]) for v in vars_]
    code = int(graph.function[f])
    if code == _F.TABLE:
        idx = 0
        for v, x in zip(vars_, xs):
            idx = idx * int(graph.cardinality[v]) + x
        return float(graph.tables[int(graph.table_offset[f]) + idx])
    t = [_truth(k, x) for k, x in zip(lits, xs)]
    if code == _F.OR:
        return 1.0 if any(t) else -1.0
    if code in (_F.AND, _F.ISTRUE):
        return 1.0 if all(t) else -1.0
    if code == _F.EQUAL:
        vals = [_val(k, x) for k, x in zip(lits, xs)]
        return 1.0 if all(v == vals[0] for v in vals) else -1.0
    if not t:
        return 0.0  # a head function with no arguments says nothing (as in the Gibbs kernel)
    head, body = t[-1], t[:-1]
    if code == _F.IMPLY:
        return float(2 * head - 1) if all(body) else 0.0
    if code == _F.IMPLY_MLN:
        return float(head) if all(body) else 1.0
    if code == _F.VOTE:
        s = 2 * head - 1 if int(graph.cardinality[vars_[-1]]) == 2 else head
        return float(s) if all(body) else 0.0
    if code in (_F.LINEAR, _F.RATIO, _F.LOGICAL):
        return float(_aggregate_phi(code, np.asarray(head), [np.asarray(b) for b in body]))
    raise InferenceError(f"factor {f}: unknown factor function code {code}")


def _aggregate_phi(code: int, head, body: list):
    """DeepDive's single-factor aggregates (DimmWitted factor.h), elementwise over arrays.

    With ``n = Σ_i [¬t(b_i) ∨ t(h)]`` over the body (``n = t(h)`` when the body is empty):
    LINEAR ``n``, RATIO ``log2(1 + n)``, LOGICAL ``[n > 0]``.
    """
    head = np.asarray(head, dtype=np.float64)
    if not body:
        if code == _F.RATIO:
            return np.log2(1.0 + head)
        return head
    n = np.zeros(np.broadcast_shapes(head.shape, *[np.shape(b) for b in body]))
    for b in body:
        n = n + np.logical_or(np.logical_not(b), head)
    if code == _F.LINEAR:
        return n
    if code == _F.RATIO:
        return np.log2(1.0 + n)
    return (n > 0).astype(np.float64)


def group_function(semantics: int, s):
    """The semantics function g of a head group: LINEAR s, LOGICAL sgn s, RATIO sgn(s)·log(1+|s|)."""
    if semantics == Semantics.LINEAR:
        return s
    if semantics == Semantics.LOGICAL:
        return np.sign(s)
    if semantics == Semantics.RATIO:
        return np.sign(s) * np.log1p(np.abs(s))
    raise InferenceError(f"unknown semantics code {semantics}")


def _weighted(w: float, phi, what: str):
    """``w · φ`` where 0 · (-inf) is 0 (a zero-weighted impossible entry constrains nothing)."""
    with np.errstate(invalid="ignore"):
        out = w * np.asarray(phi, dtype=np.float64)
    if np.ndim(out) == 0:
        if np.isnan(out):
            return 0.0
        if out == np.inf:
            raise InferenceError(f"{what}: weight {w} times a -inf log-potential gives +inf")
        return float(out)
    if w == 0.0:
        out[np.isnan(out)] = 0.0
    elif w < 0.0 and np.any(np.isposinf(out)):
        raise InferenceError(f"{what}: weight {w} times a -inf log-potential gives +inf")
    return out


def shifted(table: np.ndarray, what: str = "table") -> tuple[np.ndarray, float, bool]:
    """``(table - max, max, saturated)``: a log-table with its largest entry at 0.

    Entries far below the maximum then keep their exact difference from it, which is all a
    probability depends on. ``+inf`` entries are hard "must" constraints: they become 0 and every
    finite entry of the table -inf (the limit of a weight growing without bound). A table whose
    entries are all -inf is kept (its configurations are impossible). NaN is refused.
    ``saturated``: a finite entry overflowed to -inf (differences beyond ±1.8e308).
    """
    t = np.asarray(table, dtype=np.float64)
    if t.size == 0:
        return t, 0.0, False
    if np.isnan(t).any():
        raise InferenceError(f"{what}: a log-potential is NaN")
    top = float(t.max())
    if top == np.inf:
        return np.where(t == np.inf, 0.0, -np.inf), 0.0, False
    if top == -np.inf:
        return t, 0.0, False
    with np.errstate(over="ignore"):
        out = t - top
    saturated = bool(np.any(np.isneginf(out) & np.isfinite(t)))
    return out, top, saturated


def shift_edge(h: Hyperedge) -> Hyperedge:
    """``h`` with its table max-shifted (`shifted`); the shift moves into ``offset``."""
    out, top, saturated = shifted(h.log_table, h.source)
    return Hyperedge(h.scope, out, h.source, h.offset + top, h.saturated or saturated)


def shift_edges(edges: Sequence[Hyperedge]) -> list[Hyperedge]:
    """`shift_edge` of every hyperedge, the same results from a few array operations over all
    tables at once (issue 20: one numpy call per small table was most of exact inference's cost
    on small networks). A table with a NaN or a +inf entry, or an empty one, goes through
    `shift_edge` (its error or its hard-constraint rule)."""
    edges = list(edges)
    if len(edges) < 8:
        return [shift_edge(h) for h in edges]
    tables = [np.asarray(h.log_table, dtype=np.float64) for h in edges]
    sizes = np.array([t.size for t in tables], dtype=np.int64)
    if np.any(sizes == 0):
        return [shift_edge(h) for h in edges]
    flat = np.concatenate([t.ravel() for t in tables])
    starts = np.cumsum(sizes) - sizes
    top = np.maximum.reduceat(flat, starts)
    odd = np.isnan(top) | (top == np.inf)
    shift = np.where(np.isfinite(top), top, 0.0)  # an all -inf table is kept as it is
    with np.errstate(over="ignore", invalid="ignore"):
        out = flat - np.repeat(shift, sizes)
    saturated = np.logical_or.reduceat(np.isneginf(out) & np.isfinite(flat), starts)
    pieces = np.split(out, starts[1:].tolist())
    res = []
    for k, h in enumerate(edges):
        if odd[k]:
            res.append(shift_edge(h))
            continue
        res.append(Hyperedge(h.scope, pieces[k].reshape(tables[k].shape), h.source, h.offset + float(shift[k]),
                             h.saturated or bool(saturated[k])))
    return res


def log_score(graph: FactorGraph, values: Sequence[int] | np.ndarray) -> float:
    """Unnormalised log-probability of a full assignment (the energy of docs/factors.md).

    Evidence is not checked: pass the evidence values in ``values`` to score a state that
    respects it.
    """
    values = np.asarray(values)
    if values.shape != (graph.n_vars,):
        raise InferenceError(f"log_score needs one value per variable ({graph.n_vars}), got shape {values.shape}")
    total = 0.0
    group_sum = np.zeros(graph.n_groups, dtype=np.float64)
    for f in range(graph.n_factors):
        phi = factor_value(graph, f, values)
        g = int(graph.group[f])
        if g < 0:
            total += _weighted(float(graph.weights[graph.weight[f]]), phi, f"factor {f}")
        else:
            group_sum[g] += phi
    for g in range(graph.n_groups):
        w = float(graph.weights[graph.group_weight[g]])
        total += _weighted(w, group_function(int(graph.semantics[g]), group_sum[g]), f"group {g}")
    return float(total)


# ---------------------------------------------------------------- tables


def _table_size(cards: np.ndarray) -> int:
    return int(np.prod(cards.astype(object))) if cards.size else 1


def _phi_table(graph: FactorGraph, f: int, scope: np.ndarray) -> np.ndarray:
    """φ_f over every assignment of ``scope`` (sorted ids containing f's variables), broadcastable
    to the scope's table shape."""
    lo, hi = int(graph.factor_offsets[f]), int(graph.factor_offsets[f + 1])
    vars_ = graph.factor_vars[lo:hi]
    lits = graph.factor_literals[lo:hi]
    ndim = scope.shape[0]
    axes = np.searchsorted(scope, vars_)
    # one broadcastable grid per argument: the variable's raw value along its own axis.
    grids = []
    for v, ax in zip(vars_, axes):
        shape = [1] * ndim
        shape[ax] = int(graph.cardinality[v])
        grids.append(np.arange(int(graph.cardinality[v]), dtype=np.int64).reshape(shape))
    code = int(graph.function[f])
    if code == _F.TABLE:
        idx = np.zeros([1] * ndim, dtype=np.int64)
        for v, grid in zip(vars_, grids):
            idx = idx * int(graph.cardinality[v]) + grid
        return graph.tables[int(graph.table_offset[f]) + idx]
    truth = [grid if k < 0 else (grid == k).astype(np.int64) for k, grid in zip(lits, grids)]
    if code == _F.OR:
        any_t = np.zeros([1] * ndim, dtype=bool)
        for t in truth:
            any_t = any_t | (t != 0)
        return np.where(any_t, 1.0, -1.0)
    if code in (_F.AND, _F.ISTRUE):
        all_t = np.ones([1] * ndim, dtype=bool)
        for t in truth:
            all_t = all_t & (t != 0)
        return np.where(all_t, 1.0, -1.0)
    if code == _F.EQUAL:
        same = np.ones([1] * ndim, dtype=bool)
        for t in truth[1:]:
            same = same & (t == truth[0])
        return np.where(same, 1.0, -1.0)
    if not truth:
        return np.zeros([1] * ndim)
    head, body = truth[-1], truth[:-1]
    body_all = np.ones([1] * ndim, dtype=bool)
    for t in body:
        body_all = body_all & (t != 0)
    if code == _F.IMPLY:
        return np.where(body_all, 2.0 * head - 1.0, 0.0)
    if code == _F.IMPLY_MLN:
        return np.where(body_all, head.astype(np.float64), 1.0)
    if code == _F.VOTE:
        s = 2.0 * head - 1.0 if int(graph.cardinality[vars_[-1]]) == 2 else head.astype(np.float64)
        return np.where(body_all, s, 0.0)
    if code in (_F.LINEAR, _F.RATIO, _F.LOGICAL):
        return _aggregate_phi(code, head, body)
    raise InferenceError(f"factor {f}: unknown factor function code {code}")


def _scope_of(graph: FactorGraph, factors: Sequence[int] | np.ndarray) -> np.ndarray:
    parts = [graph.factor_vars[graph.factor_offsets[f] : graph.factor_offsets[f + 1]] for f in factors]
    if not parts:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.concatenate(parts)).astype(np.int64)


def _check_size(graph: FactorGraph, scope: np.ndarray, max_entries: int, what: str) -> tuple[int, ...]:
    cards = graph.cardinality[scope].astype(np.int64)
    size = _table_size(cards)
    if size > max_entries:
        raise InferenceError(
            f"{what} spans {scope.shape[0]} variables: its table would need {size:,} entries "
            f"(budget {max_entries:,})"
        )
    return tuple(int(c) for c in cards)


def hyperedges(graph: FactorGraph, *, max_entries: int = DEFAULT_MAX_ENTRIES) -> list[Hyperedge]:
    """The energy as log-tables: one per standalone factor (``w_f · φ_f``) and one per head group
    (``w_G · g(Σ_{f∈G} φ_f)`` over the union of its factors' variables).

    Evidence is ignored here (see `condition`). A factor or group whose table would hold more
    than ``max_entries`` entries raises `InferenceError` naming it.
    """
    out: list[Hyperedge] = []
    grouped: list[list[int]] = [[] for _ in range(graph.n_groups)]
    cards, fvars, offs = graph.cardinality.tolist(), graph.factor_vars.tolist(), graph.factor_offsets.tolist()
    func, wid, wvals, toff = graph.function.tolist(), graph.weight.tolist(), graph.weights.tolist(), graph.table_offset.tolist()
    table_code, groups = int(_F.TABLE), graph.group.tolist()
    for f in range(graph.n_factors):
        g = groups[f]
        if g >= 0:
            grouped[g].append(f)
            continue
        w = wvals[wid[f]]
        if func[f] == table_code and w == 1.0:
            args = fvars[offs[f] : offs[f + 1]]
            ascending = all(a < b for a, b in zip(args, args[1:]))
            if ascending or len(set(args)) == len(args):
                # common case (UAI imports): the stored table already is the log-table over
                # the arguments (transposed to sorted order when they are not); plain Python
                # ints here, numpy calls cost more than the work
                shape = tuple(cards[a] for a in args)
                size = math.prod(shape)
                if size > max_entries:
                    _check_size(graph, np.array(sorted(args), dtype=np.int64), max_entries, f"factor {f}")
                off = toff[f]
                table = graph.tables[off : off + size].reshape(shape)
                if not ascending:
                    perm = sorted(range(len(args)), key=args.__getitem__)
                    args = [args[k] for k in perm]
                    table = table.transpose(perm)
                out.append(Hyperedge(np.array(args, dtype=np.int64), table.copy(order="C"), f"factor {f}"))
                continue
        scope = _scope_of(graph, [f])
        shape = _check_size(graph, scope, max_entries, f"factor {f}")
        phi = np.broadcast_to(_phi_table(graph, f, scope), shape)
        table = np.array(_weighted(w, np.array(phi, dtype=np.float64), f"factor {f}"), dtype=np.float64)
        out.append(Hyperedge(scope, table.reshape(shape), f"factor {f}"))
    for g, members in enumerate(grouped):
        if not members:
            continue
        scope = _scope_of(graph, members)
        shape = _check_size(graph, scope, max_entries, f"head group {g} ({len(members)} factors)")
        s = np.zeros(shape, dtype=np.float64)
        for f in members:
            s += _phi_table(graph, f, scope)
        w = float(graph.weights[graph.group_weight[g]])
        table = _weighted(w, group_function(int(graph.semantics[g]), s), f"group {g}")
        out.append(Hyperedge(scope, np.asarray(table, dtype=np.float64).reshape(shape), f"group {g}"))
    return out


def evidence_array(n_vars: int, evidence: Mapping[int, int] | Sequence[int] | np.ndarray | None) -> np.ndarray:
    """Evidence as int64[n_vars] with -1 for unobserved, from a mapping or a per-variable array."""
    if evidence is None:
        return np.full(n_vars, -1, dtype=np.int64)
    if isinstance(evidence, Mapping):
        arr = np.full(n_vars, -1, dtype=np.int64)
        for v, x in evidence.items():
            if not 0 <= int(v) < n_vars:
                raise InferenceError(f"evidence names variable {v}, outside 0..{n_vars - 1}")
            arr[int(v)] = int(x)
        return arr
    arr = np.asarray(evidence, dtype=np.int64)
    if arr.shape != (n_vars,):
        raise InferenceError(f"evidence needs one entry per variable ({n_vars}), got shape {arr.shape}")
    return arr


def condition(edges: Sequence[Hyperedge], evidence: Mapping[int, int] | Sequence[int] | np.ndarray) -> list[Hyperedge]:
    """Slice observed values into the tables: each evidence variable's axis is fixed at its value
    and dropped from the scope. Tables left with no variables become constants (0-d).

    ``evidence``: a mapping var → value, or an int array over all variables with -1 = unobserved
    (then it must be long enough for every scope).
    """
    if isinstance(evidence, Mapping):
        ev_map = {int(v): int(x) for v, x in evidence.items()}

        def observed(v: int) -> int:
            return ev_map.get(v, -1)

    else:
        ev_arr = np.asarray(evidence, dtype=np.int64)

        def observed(v: int) -> int:
            return int(ev_arr[v])

        if len(edges) > 8:
            # nothing to slice (edges conditioned before): one look at every scope at once
            scopes = [h.scope for h in edges if h.scope.size]
            if scopes:
                every = np.concatenate(scopes)
                if every.size and every.max() < ev_arr.shape[0] and every.min() >= 0 and np.all(ev_arr[every] < 0):
                    return list(edges)

    out = []
    for h in edges:
        obs = [observed(int(v)) for v in h.scope]
        if all(x < 0 for x in obs):
            out.append(h)
            continue
        index = tuple(slice(None) if x < 0 else x for x in obs)
        for v, x, n in zip(h.scope, obs, h.log_table.shape):
            if x >= n:
                raise InferenceError(f"evidence {x} for variable {int(v)} lies outside its domain of size {n}")
        keep = np.array([x < 0 for x in obs], dtype=bool)
        out.append(Hyperedge(h.scope[keep], np.array(h.log_table[index], dtype=np.float64), h.source, h.offset, h.saturated))
    return out
