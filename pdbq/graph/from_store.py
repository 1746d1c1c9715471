"""FactorGraph arrays from the DuckDB factor store (Arrow + numpy, no per-row Python).

Entry points for the query engine and ``Database.ground()``:

- `query_graph(con, variables, rules, seeds, evidence)` → ``(graph, vids, stats)``: ground what
  the seeds reach (stopping at evidence) and build its graph; ``vids[i]`` is the global vid of the
  graph's variable ``i``.
- `full_graph(con, variables, rules, evidence=None)` → ``(graph, vids, stats)``: everything.
- `graph_from_store(con, region=None, evidence=None)` → ``(graph, vids, weight_rules)``: arrays
  from what is stored, without grounding.

``weight_rules`` (also ``stats.weight_rules``) names the rule behind each weight index: the layout
keeps no rule names, but each rule's weights are one contiguous range of ``graph.weights`` (which
`subgraph` keeps unchanged), so `factor_rules` maps factors back to rules for messages.

Factor order: rules in `rule_order` (ungrouped rules first, then grouped ones sorted by group),
factors of a rule in stored order; so a stable sort of the edges by variable sorts each
variable's factors by (group, factor), as the layout requires.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field

import duckdb
import numba
import numpy as np
import sqlglot.expressions as exp

from pdbq.arrays import union, unique
from pdbq.errors import GroundingError
from pdbq.graph.layout import NO_EVIDENCE, NO_GROUP, NO_TABLE, RAW_VALUE, FactorGraph, GraphError, validate, writable
from pdbq.graph.subgraph import subgraph
from pdbq.graph.cache import CachedGraph, GraphCache, graph_key
from pdbq.grounding.ground import GroundingStats, Prepared, ground_all, model_size_bound, prepare, store_token, tie_json, transaction
from pdbq.grounding.imported import ImportInfo, import_arrays, live_imports
from pdbq.grounding.limits import GroundingConfig
from pdbq.grounding.reach import REGION_TABLE, expand, region_factor_select
from pdbq.grounding.store import col, factor_table, ident, sql_text, table_ref
from pdbq.grounding.variables import cardinalities, stored_evidence
from pdbq.language.nodes import CreateRule, CreateVariable, FactorFunction

__all__ = ["query_graph", "full_graph", "graph_from_store", "reachable", "factor_rules", "Evidence", "WeightRules"]

Evidence = Mapping[int, int] | tuple[np.ndarray, np.ndarray]
# (rule name, first weight index, end weight index) per grounded rule, in weight order
WeightRules = tuple[tuple[str, int, int], ...]


def factor_rules(graph: FactorGraph, weight_rules: WeightRules) -> tuple[np.ndarray, dict[int, str]]:
    """``(factor_rule, names)``: ``factor_rule[f]`` is the position in ``weight_rules`` of factor
    ``f``'s rule (-1 for imported factors, which belong to no rule) and ``names`` maps that
    position to the rule's name."""
    if not weight_rules:
        return np.full(graph.n_factors, -1, dtype=np.int64), {}
    starts = np.asarray([s for _, s, _ in weight_rules], dtype=np.int64)
    ends = np.asarray([e for _, _, e in weight_rules], dtype=np.int64)
    w = graph.weight.astype(np.int64)
    pos = np.searchsorted(starts, w, side="right") - 1
    ok = (pos >= 0) & (w < ends[np.maximum(pos, 0)])
    return np.where(ok, pos, -1), {i: name for i, (name, _, _) in enumerate(weight_rules)}


@numba.njit(cache=True)
def _csr_by_var(factor_vars, n_vars):  # pragma: no cover - compiled
    """var_offsets: a count of edges per variable (int32 counters: half the cache footprint)."""
    counts = np.zeros(n_vars + 1, np.int32)
    for e in range(factor_vars.shape[0]):
        counts[factor_vars[e] + 1] += 1
    offsets = np.empty(n_vars + 1, np.int64)
    total = 0
    for v in range(n_vars + 1):
        total += counts[v]
        offsets[v] = total
    return offsets


@numba.njit(cache=True)
def _fill_csr(factor_offsets, factor_vars, var_offsets, var_factors):  # pragma: no cover - compiled
    """One-pass stable scatter of factor ids by variable: for graphs that fit in cache."""
    # int32 cursors: half the cache footprint (edges are capped below 2^31 by graph_from_store)
    pos = var_offsets[:-1].astype(np.int32)
    for f in range(factor_offsets.shape[0] - 1):
        for e in range(factor_offsets[f], factor_offsets[f + 1]):
            v = factor_vars[e]
            var_factors[pos[v]] = f
            pos[v] += 1


@numba.njit(cache=True, inline="always")
def _bucket_edge(e, f, factor_vars, cursor, shift, mask, var_factors, low):  # pragma: no cover
    v = factor_vars[e]
    k = cursor[v >> shift]
    var_factors[k] = f
    low[k] = v & mask
    cursor[v >> shift] = k + 1


@numba.njit(cache=True)
def _bucket_pass(factor_offsets, factor_vars, var_offsets, shift, arity, var_factors, low):  # pragma: no cover
    """Pass 1 of 2: stable scatter of (factor, low bits of vid) into buckets of 2^shift variables.
    Bucket b's edges land where the final CSR puts them (var_offsets[b << shift] on), so there
    are only as many write streams as buckets (a few hundred, all in cache). ``arity`` > 0: every
    factor has that arity, so factor_offsets need not be read (one stream less)."""
    n_vars = var_offsets.shape[0] - 1
    nb = ((n_vars - 1) >> shift) + 1
    cursor = np.empty(nb, np.int64)
    for b in range(nb):
        cursor[b] = var_offsets[b << shift]
    mask = (1 << shift) - 1
    n_factors = factor_offsets.shape[0] - 1
    if arity > 0:
        e = 0
        for f in range(n_factors):
            for _ in range(arity):
                _bucket_edge(e, f, factor_vars, cursor, shift, mask, var_factors, low)
                e += 1
    else:
        for f in range(n_factors):
            for e in range(factor_offsets[f], factor_offsets[f + 1]):
                _bucket_edge(e, f, factor_vars, cursor, shift, mask, var_factors, low)


@numba.njit(cache=True)
def _local_pass(var_offsets, shift, var_factors, low):  # pragma: no cover - compiled
    """Pass 2 of 2: inside each bucket's region (cache-sized), move each factor id to its
    variable's slot, keeping the bucket order (so factor order within a variable)."""
    n_vars = var_offsets.shape[0] - 1
    nb = ((n_vars - 1) >> shift) + 1
    pos = np.empty(1 << shift, np.int64)
    scratch = np.empty(0, np.int32)
    for b in range(nb):
        v0 = b << shift
        v1 = min(v0 + (1 << shift), n_vars)
        start = var_offsets[v0]
        end = var_offsets[v1]
        if end - start > scratch.shape[0]:
            scratch = np.empty(2 * (end - start), np.int32)
        for k in range(start, end):
            scratch[k - start] = var_factors[k]
        for v in range(v0, v1):
            pos[v - v0] = var_offsets[v]
        for k in range(start, end):
            j = low[k]
            var_factors[pos[j]] = scratch[k - start]
            pos[j] += 1


# Below this many edges the one-pass scatter's writes stay in cache anyway.
_TWO_PASS_MIN_EDGES = 1 << 20
# Target edges per bucket of the two-pass scatter: its region (4 B ids + 2 B low bits + 4 B
# scratch per edge, about 1.3 MiB) stays in a core's L2 (measured best here: 2^12 variables per bucket at 20 edges per variable).
_BUCKET_EDGES = 1 << 17


def _bucket_shift(n_vars: int, n_edges: int) -> int:
    """log2 of the variables per bucket: about _BUCKET_EDGES edges per bucket, 2^6 .. 2^16
    variables (the low bits are stored as uint16)."""
    per_var = max(n_edges / max(n_vars, 1), 1.0)
    return int(min(max(np.floor(np.log2(_BUCKET_EDGES / per_var)), 6), 16))


def _var_csr_fast(
    factor_offsets: np.ndarray,
    factor_vars: np.ndarray,
    n_vars: int,
    *,
    two_pass: bool | None = None,
    arity: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Variable → factor CSR, each variable's factors in factor order (a stable counting sort).

    A one-pass scatter writes each edge to a random place of an array many times the cache;
    large graphs instead scatter into cache-sized buckets of variables first, then sort each
    bucket locally (two passes over the edges, each with its writes in cache). ``two_pass``
    forces the choice (tests); by default it is taken from 2^20 edges on. ``arity`` > 0 promises
    that every factor has that many arguments (the caller knows: one rule, one arity).
    """
    var_offsets = _csr_by_var(factor_vars, n_vars)
    var_factors = np.empty(factor_vars.shape[0], np.int32)
    if not (factor_vars.shape[0] >= _TWO_PASS_MIN_EDGES if two_pass is None else two_pass):
        _fill_csr(factor_offsets, factor_vars, var_offsets, var_factors)
        return var_offsets, var_factors
    shift = _bucket_shift(n_vars, factor_vars.shape[0])
    low = np.empty(factor_vars.shape[0], np.uint16)
    _bucket_pass(factor_offsets, factor_vars, var_offsets, shift, arity, var_factors, low)
    _local_pass(var_offsets, shift, var_factors, low)
    return var_offsets, var_factors


def _evidence_arrays(evidence: Evidence | None) -> tuple[np.ndarray, np.ndarray]:
    if evidence is None:
        return np.zeros(0, np.int64), np.zeros(0, np.int32)
    if isinstance(evidence, tuple):
        return np.asarray(evidence[0], dtype=np.int64), np.asarray(evidence[1], dtype=np.int32)
    keys = np.fromiter(evidence.keys(), dtype=np.int64, count=len(evidence))
    vals = np.fromiter(evidence.values(), dtype=np.int32, count=len(evidence))
    return keys, vals


def _stored_rules(con) -> list[tuple]:
    return con.execute(
        "SELECT rule, function, semantics, arity, literals, weight_kind FROM pdbq_fs_rules ORDER BY position"
    ).fetchall()


def _column(table, name: str, dtype) -> np.ndarray:
    return np.ascontiguousarray(table.column(name).to_numpy(), dtype=dtype)


def graph_from_store(
    con: duckdb.DuckDBPyConnection,
    *,
    region: str | None = None,
    extra_vids: np.ndarray | None = None,
    evidence: Evidence | None = None,
    check: bool = True,
    imports: list[ImportInfo] | None = None,
) -> tuple[FactorGraph, np.ndarray, WeightRules]:
    """Build graph arrays from the stored factors.

    region: name of a table of vids (column ``vid``): only factors touching one of them (whole
        head groups) are read, and the graph's variables are their variables plus ``extra_vids``,
        renumbered densely in vid order. Without it, every stored factor and every variable
        (graph ids = global vids).
    evidence: {vid: value} or (vids, values); defaults to the stored evidence for a full graph.
    imports: the imported models to include (`live_imports(con, variables)`); default: every
        import whose relation has a vid map. Their TABLE factors come first, in relation then
        file order (ungrouped, so before any grouped rule, as the factor order requires).
    Returns ``(graph, vids, weight_rules)`` with ``vids[i]`` the global vid of graph variable ``i``
    and ``weight_rules`` each rule's range of weight indices.
    """
    parts = _Parts()
    for info in live_imports(con) if imports is None else imports:
        parts.add_import(import_arrays(con, info, region))
    for name, function, semantics, arity, literals, weight_kind in _stored_rules(con):
        parts.add_rule(con, region, name, function, semantics, arity, literals, weight_kind)
    factor_vars = _cat(parts.fv, np.int32)
    factor_offsets = _factor_offsets(parts.arities)
    n_factors = factor_offsets.shape[0] - 1
    table_offset = np.full(n_factors, NO_TABLE, dtype=np.int64)
    if parts.tab_off:
        k = sum(p.shape[0] for p in parts.tab_off)
        table_offset[:k] = np.concatenate(parts.tab_off)
    card_all = cardinalities(con)
    if region is None:
        vids = np.arange(card_all.shape[0], dtype=np.int64)
        card = card_all
        if evidence is None:
            evidence = stored_evidence(con)
    else:
        extra = np.zeros(0, np.int64) if extra_vids is None else np.asarray(extra_vids, dtype=np.int64)
        vids = union(factor_vars, extra)
        card = card_all[vids]
        factor_vars = np.searchsorted(vids, factor_vars).astype(np.int32)
    ev = _evidence_on(vids, evidence)
    if factor_vars.shape[0] >= 2**31 - 1:
        raise GraphError(f"{factor_vars.shape[0]:,} factor edges: more than int32 ids allow")
    arities = {a for a, _ in parts.arities if not isinstance(a, np.ndarray)}
    uniform = len(arities) == 1 and len(parts.arities) == len([1 for a, _ in parts.arities if not isinstance(a, np.ndarray)])
    var_offsets, var_factors = _var_csr_fast(
        factor_offsets, factor_vars, int(vids.shape[0]), arity=arities.pop() if uniform else 0
    )
    graph = FactorGraph(
        cardinality=np.ascontiguousarray(card, dtype=np.int32),
        evidence=ev,
        var_offsets=var_offsets,
        var_factors=var_factors,
        function=_cat(parts.fn, np.int8),
        weight=_cat(parts.w, np.int32),
        group=_cat(parts.g, np.int32),
        factor_offsets=factor_offsets,
        factor_vars=factor_vars,
        factor_literals=_cat(parts.lit, np.int32),
        table_offset=table_offset,
        tables=_cat(parts.tables, np.float64),
        weights=_cat(parts.weights, np.float64),
        learnable=_cat(parts.learnable, np.bool_),
        semantics=_cat(parts.sem, np.int8),
        group_weight=_cat(parts.gw, np.int32),
    )
    graph = writable(graph)
    return (validate(graph) if check else graph), vids, tuple(parts.spans)


def _cat(parts, dtype):
    if len(parts) == 1:  # the common one-rule case: no copy
        return np.ascontiguousarray(parts[0], dtype=dtype)
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype=dtype)


@dataclass
class _Parts:
    """The graph's arrays as per-source pieces (imports first, then rules), concatenated at the end.

    ``arities`` holds, per piece, ``(arity, n_factors)`` for a rule (fixed arity) or
    ``(offsets, n_factors)`` for an import (arities vary)."""

    fv: list = field(default_factory=list)
    lit: list = field(default_factory=list)
    fn: list = field(default_factory=list)
    w: list = field(default_factory=list)
    g: list = field(default_factory=list)
    arities: list = field(default_factory=list)
    weights: list = field(default_factory=list)
    learnable: list = field(default_factory=list)
    sem: list = field(default_factory=list)
    gw: list = field(default_factory=list)
    tables: list = field(default_factory=list)
    tab_off: list = field(default_factory=list)
    spans: list = field(default_factory=list)  # (rule, first weight, end)
    n_w: int = 0
    n_g: int = 0
    n_entries: int = 0

    def add_import(self, ia) -> None:
        """One unit weight per import; literals -1 (TABLE arguments are raw values)."""
        nf = ia.n_factors
        self.fv.append(ia.vids.astype(np.int32))
        self.lit.append(np.full(ia.vids.shape[0], RAW_VALUE, dtype=np.int32))
        self.fn.append(np.full(nf, int(FactorFunction.TABLE), dtype=np.int8))
        self.arities.append((ia.offsets, nf))
        self.weights.append(np.ones(1, dtype=np.float64))
        self.learnable.append(np.zeros(1, dtype=np.bool_))
        self.w.append(np.full(nf, self.n_w, dtype=np.int32))
        self.n_w += 1
        self.g.append(np.full(nf, NO_GROUP, dtype=np.int32))
        self.tables.append(ia.tables)
        self.tab_off.append(self.n_entries + ia.table_offsets[:-1])
        self.n_entries += int(ia.tables.shape[0])

    def add_rule(self, con, region, name, function, semantics, arity, literals, weight_kind) -> None:
        """Read one rule's factor table (restricted to ``region``) and its weights."""
        ft = factor_table(name)
        cols = [d[0] for d in con.execute(f"SELECT * FROM {sql_text(table_ref(ft))} LIMIT 0").description]
        heads = tuple(c for c in cols if c.startswith("h_"))
        sel = _rule_factor_select(name, ft, arity, weight_kind, tuple(c for c in cols if c.startswith("t_")), heads, region)
        t = con.sql(sql_text(sel)).to_arrow_table()
        n = t.num_rows
        fv = np.empty(n * arity, dtype=np.int32)
        for i in range(arity):
            fv[i::arity] = _column(t, f"v{i}", np.int32)
        self.fv.append(fv)
        self.lit.append(np.tile(np.asarray(literals, dtype=np.int32), n))
        self.fn.append(np.full(n, function, dtype=np.int8))
        self.arities.append((arity, n))
        if weight_kind == "expression":
            self.weights.append(_column(t, "w", np.float64))
            self.learnable.append(np.zeros(n, dtype=np.bool_))
            fw = self.n_w + np.arange(n, dtype=np.int64)
            k = n
        else:
            d = con.execute("SELECT wid, value, learnable FROM pdbq_fs_weights WHERE rule = ? ORDER BY wid", [name]).fetchnumpy()
            k = int(d["wid"].shape[0])
            if k and not np.array_equal(d["wid"], np.arange(k)):
                raise RuntimeError(f"weights of rule '{name}' are not numbered 0 .. {k - 1}")
            self.weights.append(np.asarray(d["value"], dtype=np.float64))
            self.learnable.append(np.asarray(d["learnable"], dtype=np.bool_))
            fw = (self.n_w + _column(t, "wid", np.int32)) if weight_kind == "tied" else np.full(n, self.n_w, dtype=np.int32)
        w0 = self.n_w
        self.n_w += k
        if self.n_w > w0:  # empty ranges would shadow their neighbour in factor_rules' search
            self.spans.append((name, w0, self.n_w))
        self.w.append(fw.astype(np.int32, copy=False))
        if heads:
            g = _column(t, "g", np.int64)
            ng = int(g[-1]) + 1 if n else 0
            first = np.searchsorted(g, np.arange(ng))
            self.g.append((self.n_g + g).astype(np.int32))
            self.sem.append(np.full(ng, semantics, dtype=np.int8))
            self.gw.append(fw[first].astype(np.int32))
            self.n_g += ng
        else:
            self.g.append(np.full(n, NO_GROUP, dtype=np.int32))


def _rule_factor_select(name, ft, arity, weight_kind, ties, heads, region) -> exp.Select:
    """The SELECT of one rule's factors: vids, per-factor weight or tied weight id, head group."""
    if region is None:
        base = exp.select(exp.column("rowid").as_("pdbq_fid"), exp.Star()).from_(table_ref(ft))
    else:
        base = region_factor_select(None, name, arity, heads, region)
        base = base.select(col("rowid", ft).as_("pdbq_fid"), copy=False)
    sel = exp.select(*[col(f"v{i}", "f") for i in range(arity)]).from_(
        exp.Subquery(this=base, alias=exp.TableAlias(this=ident("f")))
    )
    order: list[exp.Expression] = []
    if weight_kind == "expression":
        sel = sel.select(col("w", "f"), copy=False)
    if weight_kind == "tied":
        sel = sel.select(col("wid", "pw"), copy=False).join(
            table_ref("pdbq_fs_weights", "pw"),
            on=exp.and_(
                exp.EQ(this=col("rule", "pw"), expression=exp.Literal.string(name)),
                exp.EQ(this=col("tie", "pw"), expression=tie_json(ties, "f")),
            ),
            join_type="LEFT",
        )
        order = [col("pdbq_fid", "f")]
    if heads:
        rank = exp.Window(this=exp.func("dense_rank"), order=exp.Order(expressions=[exp.Ordered(this=col(h, "f")) for h in heads]))
        sel = sel.select(exp.Sub(this=rank, expression=exp.Literal.number(1)).as_("g"), copy=False)
        order = [exp.column("g"), col("pdbq_fid", "f")]
    elif region is not None:
        order = [col("pdbq_fid", "f")]
    if order:
        sel = sel.order_by(*order)
    return sel


def _factor_offsets(arities: list) -> np.ndarray:
    """CSR offsets of the factors' variables over all pieces, in piece order."""
    n_factors = sum(n for _, n in arities)
    factor_offsets = np.zeros(n_factors + 1, dtype=np.int64)
    start, edge = 0, 0
    for a, n in arities:
        if isinstance(a, np.ndarray):  # an import: its own offsets (arities vary)
            factor_offsets[start + 1 : start + n + 1] = edge + a[1:]
            edge += int(a[-1])
        else:  # fixed arity per rule: offsets are an arithmetic progression per block
            factor_offsets[start + 1 : start + n + 1] = edge + a * np.arange(1, n + 1, dtype=np.int64)
            edge += a * n
        start += n
    return factor_offsets


def _evidence_on(vids: np.ndarray, evidence) -> np.ndarray:
    """Per graph variable, its observed value or NO_EVIDENCE; evidence off the graph is ignored."""
    ev = np.full(vids.shape[0], NO_EVIDENCE, dtype=np.int32)
    ek, evv = _evidence_arrays(evidence)
    if ek.size:
        pos = np.searchsorted(vids, ek)
        pos_c = np.minimum(pos, max(vids.shape[0] - 1, 0))
        hit = (pos < vids.shape[0]) & (vids[pos_c] == ek) if vids.size else np.zeros(ek.shape, bool)
        ev[pos[hit]] = evv[hit]
    return ev


@numba.njit(cache=True)
def _bfs(var_offsets, var_factors, factor_offsets, factor_vars, group, group_start, group_end, evidence, seeds):  # pragma: no cover
    n_vars = var_offsets.shape[0] - 1
    vmark = np.zeros(n_vars, np.bool_)
    fmark = np.zeros(factor_offsets.shape[0] - 1, np.bool_)
    gmark = np.zeros(group_start.shape[0], np.bool_)
    queue = np.empty(n_vars, np.int64)
    head = 0
    tail = 0
    for s in seeds:
        if not vmark[s]:
            vmark[s] = True
            if evidence[s] < 0:
                queue[tail] = s
                tail += 1
    fstack = np.empty(factor_offsets.shape[0] - 1, np.int64)
    while head < tail:
        v = queue[head]
        head += 1
        for k in range(var_offsets[v], var_offsets[v + 1]):
            f0 = var_factors[k]
            if fmark[f0]:
                continue
            top = 0
            g = group[f0]
            if g >= 0:
                if gmark[g]:
                    continue
                gmark[g] = True
                for f in range(group_start[g], group_end[g]):
                    fmark[f] = True
                    fstack[top] = f
                    top += 1
            else:
                fmark[f0] = True
                fstack[top] = f0
                top += 1
            for i in range(top):
                f = fstack[i]
                for e in range(factor_offsets[f], factor_offsets[f + 1]):
                    u = factor_vars[e]
                    if not vmark[u]:
                        vmark[u] = True
                        if evidence[u] < 0:
                            queue[tail] = u
                            tail += 1
    return vmark, fmark


def reachable(graph: FactorGraph, seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(variable mask, factor mask) of the region reached from ``seeds`` (graph ids) through
    non-evidence variables; factors reached are those touching a reached non-evidence variable,
    whole head groups. Requires each group's factors to be consecutive (pdbq graphs are)."""
    ng = graph.n_groups
    gs = np.full(ng, 0, dtype=np.int64)
    ge = np.full(ng, 0, dtype=np.int64)
    if ng:
        ids = np.flatnonzero(graph.group >= 0)
        gg = graph.group[ids]
        gs[:] = ids[np.searchsorted(gg, np.arange(ng), side="left")]
        ge[:] = ids[np.searchsorted(gg, np.arange(ng), side="right") - 1] + 1
    return _bfs(
        graph.var_offsets, graph.var_factors, graph.factor_offsets, graph.factor_vars, graph.group, gs, ge,
        graph.evidence, np.asarray(seeds, dtype=np.int64),
    )


# A store of at most this many factors (imported and grounded) is read whole when nothing is left
# to ground: reading a million small factors through Arrow takes well under a second, about what
# a few frontier rounds in SQL cost, and the model graph is then cached for every later query.
WHOLE_READ_FACTORS = 1_000_000


def _read_whole(p: Prepared) -> bool:
    if not all(p.complete.values()):
        return False
    n = sum(i.n_factors for i in p.imports) + sum(p.stats.factors.values())
    return n <= WHOLE_READ_FACTORS


def _small_model(p: Prepared, config: GroundingConfig) -> bool:
    """Whether the row counts already read bound the whole model by ``config.whole_model_factors``
    factors: grounding it all is then one statement per rule, fewer than the frontier rounds."""
    if config.whole_model_factors <= 0:
        return False
    bound = model_size_bound(p)
    return bound is not None and bound <= config.whole_model_factors


def full_graph(
    con: duckdb.DuckDBPyConnection,
    variables: Mapping[str, CreateVariable],
    rules: Mapping[str, CreateRule],
    *,
    evidence: Evidence | None = None,
    config: GroundingConfig = GroundingConfig(),
) -> tuple[FactorGraph, np.ndarray, GroundingStats]:
    """Ground everything (reusing what is current) and build the whole graph; vids = arange."""
    stats = ground_all(con, variables, rules, config)
    graph, vids, stats.weight_rules = graph_from_store(con, evidence=evidence, imports=live_imports(con, variables))
    return graph, vids, stats


def query_graph(
    con: duckdb.DuckDBPyConnection,
    variables: Mapping[str, CreateVariable],
    rules: Mapping[str, CreateRule],
    seeds: np.ndarray,
    evidence: Evidence,
    *,
    config: GroundingConfig = GroundingConfig(),
    cache: GraphCache | None = None,
    prepared: Prepared | None = None,
    token: str | None = None,
) -> tuple[FactorGraph, np.ndarray, GroundingStats]:
    """Graph of the region the query's variables reach, grounding only what it needs.

    seeds: global vids of the query's variables. evidence: {vid: value} or (vids, values): the
    evidence for this query (stored evidence merged with GIVEN by the caller). Evidence variables
    stop the expansion and are clamped in the graph. Returns ``(graph, vids, stats)``: ``vids[i]`` is
    the global vid of graph variable ``i`` (sorted); every seed is among them.

    cache: a `GraphCache`. A graph built under the same store token, seeds, evidence and config
    is returned from it (``stats.cached == "graph"``). When a region outgrew the frontier rounds,
    the whole model's graph was built and is kept too: later queries under the same token and
    evidence find their region in it in memory (``stats.cached == "model"``), and a region that
    is the whole model shares that graph and everything derived from it.

    prepared: what `prepare` returned for this query, when the caller already ran it (so the
    data is fingerprinted once per query, not once per layer). token: the `store_token` of that
    prepared store, when the caller has it (`pdbq.planning.store_state`).

    When every rule is grounded in full (always for imported models) and the store holds at most
    `WHOLE_READ_FACTORS` factors, the whole model's graph is read at once and the region found
    in memory (``stats.cached`` stays "", the model graph is cached for later queries). When the
    row counts read by `prepare` bound the whole model by ``config.whole_model_factors``, every
    rule is grounded at once and the region found in memory the same way (``stats.small_model``).
    """
    seeds = unique(np.asarray(seeds, dtype=np.int64))
    ek, evv = _evidence_arrays(evidence)

    def key_of(token: str, whole: bool = False, region: np.ndarray | None = None) -> str:
        # A region's graph is the graph of any seed set whose closure it is, the region itself
        # included: filed under the region's vids, it serves every query that lands in it.
        return graph_key(token, None if whole else (seeds if region is None else region), (ek, evv), config)

    if cache is not None and prepared is not None and token is not None:
        # the caller's token describes the prepared store: a cached graph needs no statement
        # at all (not even a transaction, which would count as a change for pdbq.planning.store_state)
        hit = cache.get(key_of(token))
        if hit is not None:
            prepared.stats.cached = "graph"
            prepared.stats.weight_rules = hit.weight_rules
            return hit.graph, hit.vids, prepared.stats
    built = False  # the whole model's graph was read by this call (not found in the cache)
    # With the store already prepared and nothing left to ground, everything below only reads
    # (token, cache, one whole read): no transaction, which saves four round trips a query.
    reads_only = prepared is not None and _read_whole(prepared)
    with nullcontext() if reads_only else transaction(con):
        p = prepare(con, variables, rules, config) if prepared is None else prepared
        stats = p.stats
        n_total = sum(i.n for i in p.sync.info.values())
        if seeds.size and (seeds[0] < 0 or seeds[-1] >= n_total):
            raise GroundingError(f"query_graph: seed vids must lie in 0 .. {n_total - 1}")
        model = None
        if cache is None or prepared is None or token is None:
            token = store_token(con, p.imports) if cache is not None else ""
        if cache is not None:
            hit = cache.get(key_of(token))
            if hit is not None:
                stats.cached = "graph"
                stats.weight_rules = hit.weight_rules
                return hit.graph, hit.vids, stats
            model = cache.get(key_of(token, whole=True))
        if model is None and _read_whole(p):
            # Nothing is left to ground and the store is small: one read of every stored factor
            # and a search in memory cost less than a round trip per frontier round in SQL.
            g, _, weight_rules = graph_from_store(con, evidence=evidence, imports=p.imports)
            model = CachedGraph(g, np.arange(g.n_vars, dtype=np.int64), weight_rules)
            built = True
            if cache is not None:
                cache.put(key_of(token, whole=True), model)
        whole = model is None and _small_model(p, config)
        if model is None and not whole:
            region = expand(con, p, seeds, ek, config)
            stats.rounds = region.rounds
            stats.new_factors = region.new_factors
            if region.exhausted:
                graph, vids, stats.weight_rules = graph_from_store(
                    con, region=REGION_TABLE, extra_vids=region.visited, evidence=evidence, imports=p.imports
                )
                con.execute(f"DROP TABLE IF EXISTS {REGION_TABLE}")
                if cache is not None:  # filed under the state it was built from (expansion changed it)
                    cache.put(key_of(store_token(con, p.imports)), CachedGraph(graph, vids, stats.weight_rules))
                return graph, vids, stats
            con.execute(f"DROP TABLE IF EXISTS {REGION_TABLE}")
    if model is None:
        # A small model, or a region still growing after max_frontier_rounds: ground in full,
        # explore in memory.
        with transaction(con):  # ground_all joins it: the graph and its token see one state
            full = ground_all(con, variables, rules, config)
            stats.small_model = whole
            stats.full_fallback = not whole
            stats.grounded += full.grounded
            stats.new_factors += full.new_factors
            stats.factors = full.factors
            imports = live_imports(con, variables)
            g, _, weight_rules = graph_from_store(con, evidence=evidence, imports=imports)
            token = store_token(con, imports) if cache is not None else ""
        model = CachedGraph(g, np.arange(g.n_vars, dtype=np.int64), weight_rules)
        if cache is not None:
            cache.put(key_of(token, whole=True), model)
    elif not built:
        stats.cached = "model"
    stats.weight_rules = model.weight_rules
    vmask, fmask = reachable(model.graph, seeds)
    region_vars = np.flatnonzero(vmask)
    entry = None
    if vmask.all() and fmask.all():  # the region is the whole model: share its graph
        entry = model
    elif cache is not None:
        entry = cache.get(key_of(token, region=region_vars))
    if entry is None:
        sub, vids = subgraph(model.graph, region_vars, factors=fmask)
        entry = CachedGraph(sub, vids, model.weight_rules)
    if cache is not None:
        cache.put(key_of(token, region=region_vars), entry)
        cache.put(key_of(token), entry)
    return entry.graph, entry.vids, stats
