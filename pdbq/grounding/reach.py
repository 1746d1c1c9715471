"""Query-driven grounding: ground only the factors of the region a query's variables reach.

Semi-naive frontier expansion in SQL. Round by round, for every rule, one DuckDB statement grounds
the rule's factors that touch the new frontier and were not stored before (the rule's SELECT with
a pushed-down ``vid IN frontier`` filter per random atom); the frontier's neighbours through stored
factors that are not evidence and not yet visited form the next frontier. Evidence variables end
the expansion: the factors that reach them are kept (the variable is clamped in the graph), their
other factors and neighbours are not reached through them.

A factor of a LOGICAL/RATIO head group couples every variable of the group (g is not linear), so
reaching one factor of a group brings the whole group.

For each rule the store keeps the vids it has expanded (``pdbq_fs_expanded``): a rule's stored factors
are exactly those touching its expanded vids (whole groups for grouped rules), so later queries
reuse them and a full `ground_all` completes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa
import sqlglot.expressions as exp

from pdbq.arrays import union, unique
from pdbq.grounding.compile import CompiledRule
from pdbq.grounding.ground import Prepared, _check_rows, _sync_weights, ground_rows
from pdbq.grounding.imported import import_neighbours_select
from pdbq.grounding.limits import GroundingConfig
from pdbq.grounding.store import col, factor_table, ident, sql_text, table_ref

__all__ = ["Region", "expand", "touch_condition", "REGION_TABLE"]

REGION_TABLE = "pdbq_fs_r_expanded"  # temp table: the region's expanded (non-evidence) vids


@dataclass
class Region:
    """Result of a frontier expansion.

    expanded: vids whose factors are all in the region (non-evidence, reached), sorted.
    visited: every vid reached (expanded + evidence on the boundary + evidence seeds), sorted.
    exhausted: True when the frontier emptied within ``max_frontier_rounds``; False means the
        region is still growing and the caller should ground in full and explore in memory.
    rounds: SQL rounds run; new_factors: factor rows written.
    """

    expanded: np.ndarray
    visited: np.ndarray
    exhausted: bool
    rounds: int
    new_factors: int


def _in(column: exp.Expression, table: str, rule: str | None = None) -> exp.Expression:
    sub = exp.select(exp.column("vid")).from_(table_ref(table))
    if rule is not None:
        sub = sub.where(exp.EQ(this=exp.column("rule"), expression=exp.Literal.string(rule)))
    return exp.In(this=column, query=exp.Subquery(this=sub))


def touch_condition(columns: list[exp.Expression], table: str) -> exp.Expression:
    """``c0 IN (SELECT vid FROM table) OR c1 IN (...) ...``"""
    return exp.or_(*[_in(c.copy(), table) for c in columns])


def _touching_select(c: CompiledRule, frontier: str) -> exp.Expression:
    """Groundings of rule c touching the frontier and no vid the rule expanded before: a UNION ALL
    of one branch per position so each filter is pushed down onto its atom's vid map."""
    branches = []
    for i, vc in enumerate(c.vid_columns):
        conds = [_in(vc.copy(), frontier)]
        conds += [exp.Not(this=_in(c.vid_columns[j].copy(), frontier)) for j in range(i)]
        conds += [exp.Not(this=_in(v.copy(), "pdbq_fs_expanded", c.name)) for v in c.vid_columns]
        branches.append(c.restricted(exp.and_(*conds)))
    out = branches[0]
    for b in branches[1:]:
        out = exp.union(out, b, distinct=False)
    return out


def _ground_frontier(con, c: CompiledRule, frontier: str, config: GroundingConfig) -> int:
    touching = _touching_select(c, frontier)
    if not c.grouped:
        return ground_rows(con, c, exp.select("*").from_(exp.Subquery(this=touching, alias=exp.TableAlias(this=ident("g")))), config)
    keys = [ident(h) for h in c.head_columns]
    stored = exp.select(*[exp.column(h) for h in c.head_columns]).from_(table_ref(factor_table(c.name)))
    new_keys = exp.except_(
        exp.select(*[exp.column(h) for h in c.head_columns]).from_(exp.Subquery(this=touching, alias=exp.TableAlias(this=ident("t")))),
        stored,
    )
    full = exp.Subquery(this=c.select.copy(), alias=exp.TableAlias(this=ident("g")))
    sel = exp.select(*[col(f"v{i}", "g") for i in range(c.arity)])
    if c.has_w:
        sel = sel.select(col("w", "g"), copy=False)
    sel = sel.select(*[col(t, "g") for t in c.tie_columns], *[col(h, "g") for h in c.head_columns], copy=False).from_(full)
    sel = sel.join(exp.Subquery(this=new_keys, alias=exp.TableAlias(this=ident("k"))), using=keys, join_type="SEMI")
    return ground_rows(con, c, sel, config)


def _register_vids(con, name: str, vids: np.ndarray) -> None:
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} (vid INTEGER)")
    if vids.size:
        con.register("pdbq_fs_r_arrow", pa.table({"vid": pa.array(vids.astype(np.int32))}))
        try:
            con.execute(f"INSERT INTO {name} SELECT vid FROM pdbq_fs_r_arrow")
        finally:
            con.unregister("pdbq_fs_r_arrow")


def region_factor_select(c: CompiledRule | None, rule: str, arity: int, head_columns: tuple[str, ...], region: str) -> exp.Select:
    """Stored factor rows of ``rule`` in the region: touching a region vid (whole groups)."""
    ft = factor_table(rule)
    touch = touch_condition([exp.column(f"v{i}") for i in range(arity)], region)
    sel = exp.select("*").from_(table_ref(ft))
    if not head_columns:
        return sel.where(touch)
    keys = exp.select(*[exp.column(h) for h in head_columns]).distinct().from_(table_ref(ft)).where(touch)
    return sel.join(exp.Subquery(this=keys, alias=exp.TableAlias(this=ident("k"))), using=[ident(h) for h in head_columns], join_type="SEMI")


def _neighbours(con, prepared: Prepared, frontier: str) -> np.ndarray:
    parts = []
    for name, c in prepared.compiled.items():
        sel = region_factor_select(c, name, c.arity, c.head_columns, frontier)
        q = exp.select(exp.func("unnest", exp.Array(expressions=[exp.column(f"v{i}") for i in range(c.arity)])).as_("vid")).from_(
            exp.Subquery(this=sel, alias=exp.TableAlias(this=ident("f")))
        )
        parts.append(np.asarray(con.execute(sql_text(q)).fetchnumpy()["vid"], dtype=np.int64))
    for info in prepared.imports:  # imported factors: stored whole, only their neighbours are read
        q = import_neighbours_select(info, frontier)
        parts.append(np.asarray(con.execute(sql_text(q)).fetchnumpy()["vid"], dtype=np.int64))
    if not parts:
        return np.zeros(0, dtype=np.int64)
    return unique(np.concatenate(parts))


def expand(
    con: duckdb.DuckDBPyConnection,
    prepared: Prepared,
    seeds: np.ndarray,
    evidence_vids: np.ndarray,
    config: GroundingConfig = GroundingConfig(),
) -> Region:
    """Expand from ``seeds`` (global vids) stopping at ``evidence_vids``; grounds what it reaches.

    Call inside the transaction that ran `prepare`. Leaves the temp table ``pdbq_fs_r_expanded``
    (the region's expanded vids) for the graph builder.
    """
    seeds = unique(np.asarray(seeds, dtype=np.int64))
    ev = unique(np.asarray(evidence_vids, dtype=np.int64))
    frontier = np.setdiff1d(seeds, ev, assume_unique=True)
    visited = seeds
    expanded: list[np.ndarray] = []
    rounds = 0
    new_factors = 0
    while frontier.size and rounds < config.max_frontier_rounds:
        rounds += 1
        _register_vids(con, "pdbq_fs_r_frontier", frontier)
        for name, c in prepared.compiled.items():
            if prepared.complete[name]:
                continue
            n = _ground_frontier(con, c, "pdbq_fs_r_frontier", config)
            if n:
                _check_rows(con, c)
                _sync_weights(con, c)
                new_factors += n
            con.execute(
                "INSERT INTO pdbq_fs_expanded SELECT ?, vid FROM pdbq_fs_r_frontier "
                "WHERE vid NOT IN (SELECT vid FROM pdbq_fs_expanded WHERE rule = ?)",
                [name, name],
            )
            con.execute(
                f"UPDATE pdbq_fs_rules SET n_factors = (SELECT count(*) FROM {sql_text(table_ref(factor_table(name)))}) WHERE rule = ?",
                [name],
            )
        expanded.append(frontier)
        nb = _neighbours(con, prepared, "pdbq_fs_r_frontier")
        fresh = np.setdiff1d(nb, visited, assume_unique=True)
        visited = union(visited, fresh)
        frontier = np.setdiff1d(fresh, ev, assume_unique=True)
    exp_vids = unique(np.concatenate(expanded)) if expanded else np.zeros(0, dtype=np.int64)
    _register_vids(con, REGION_TABLE, exp_vids)
    con.execute("DROP TABLE IF EXISTS pdbq_fs_r_frontier")
    return Region(exp_vids, visited, frontier.size == 0, rounds, new_factors)
