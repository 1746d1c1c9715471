"""Ground the rules over one `DOMAIN CLUSTER` relation into a `PairGraph` (docs/coreference.md).

A cluster relation is never synced into the factor store (its value is not a categorical
label): its keys are numbered here 0..n-1 in key order, in a temporary map table, and every
rule `c(a) = c(b) :- body` is compiled by the ordinary rule compiler with that map standing for
the relation. Each grounding is one candidate pair with its weight (the rule's constant or its
`= expr`); several rules or groundings of one pair add up; a pair of a key with itself is
dropped (it is within-entity in every clustering, a constant). The groundings are counted
before any is fetched and refused above `max_pairs`, like grounding's own size check.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import sqlglot
from sqlglot import exp

from pdbq.catalog.cluster import is_cluster
from pdbq.catalog.names import normalize
from pdbq.coref.layout import PairGraph, pair_graph
from pdbq.errors import GroundingError
from pdbq.grounding.compile import compile_rule, observed_columns
from pdbq.grounding.store import col, ident, sql_text, table_ref, var_table
from pdbq.language.nodes import CreateRule, CreateVariable

__all__ = ["cluster_rules", "ground_cluster", "map_table"]


def map_table(relation: str) -> str:
    return f"__pdbq_cluster_map__{relation}"


def cluster_rules(relation: str, rules: Mapping[str, CreateRule]) -> list[CreateRule]:
    return [r for r in rules.values() if any(normalize(a.relation) == relation for a in r.head.atoms)]


def ground_cluster(
    con, v: CreateVariable, variables: Mapping[str, CreateVariable], rules: Mapping[str, CreateRule], max_pairs: int
) -> tuple[np.ndarray, PairGraph, int]:
    """(keys in mention order, the pair graph, groundings read) for cluster relation `v`."""
    if not is_cluster(v):
        raise GroundingError(f"variable relation '{v.name}' is not a DOMAIN CLUSTER relation")
    key = v.columns[0]
    src = sqlglot.parse_one(v.source, read="duckdb")
    sub = exp.Subquery(this=src, alias=exp.TableAlias(this=ident("s"), columns=[ident(key.name)]))
    keyed = exp.select(exp.Cast(this=col(key.name, "s"), to=exp.DataType.build(key.type, dialect="duckdb")).as_(ident(key.name))).from_(sub)
    vid = exp.Cast(
        this=exp.Sub(this=exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=[exp.Ordered(this=col(key.name))])),
                     expression=exp.Literal.number(1)),
        to=exp.DataType.build("BIGINT"),
    ).as_(ident("vid"))
    distinct = exp.select(col(key.name)).distinct().from_(keyed.subquery("k")).where(col(key.name).is_(exp.null()).not_())
    create = exp.Create(
        this=table_ref(map_table(v.name)), kind="TABLE", replace=True,
        properties=exp.Properties(expressions=[exp.TemporaryProperty()]),
        expression=exp.select(vid, col(key.name)).from_(distinct.subquery("d")),
    )
    con.execute(sql_text(create))
    keys = con.execute(sql_text(exp.select(col(key.name)).from_(table_ref(map_table(v.name))).order_by(col("vid")))).fetchnumpy()[key.name]
    n = int(len(keys))
    parts = []
    lookup = observed_columns(con)
    for rule in cluster_rules(v.name, rules):
        c = compile_rule(rule, variables, lookup)
        sel = c.select.copy()
        for t in sel.find_all(exp.Table):
            if t.name == var_table(v.name):
                t.set("this", ident(map_table(v.name)))
        w = col("w") if c.has_w else exp.Literal.number(c.weight_value)
        parts.append(
            exp.select(col("v0").as_(ident("a")), col("v1").as_(ident("b")), exp.Cast(this=w, to=exp.DataType.build("DOUBLE")).as_(ident("w")))
            .from_(sel.subquery("g"))
        )
    if not parts:
        return np.asarray(keys), pair_graph(n, np.zeros(0), np.zeros(0), np.zeros(0)), 0
    union = parts[0]
    for p in parts[1:]:
        union = exp.union(union, p, distinct=False)
    count = int(con.execute(sql_text(exp.select(exp.func("count", exp.Star())).from_(union.subquery("u")))).fetchall()[0][0])
    if count > max_pairs:
        raise GroundingError(
            f"the rules over cluster relation '{v.name}' yield {count:,} candidate pairs, above max_pairs = {max_pairs:,}; "
            "narrow the pairs' blocking or raise max_pairs (WITH (max_pairs = ...))"
        )
    lo = exp.func("least", col("a"), col("b"))
    hi = exp.func("greatest", col("a"), col("b"))
    agg = (
        exp.select(lo.as_(ident("a")), hi.as_(ident("b")), exp.func("sum", col("w")).as_(ident("w")))
        .from_(union.subquery("u"))
        .where(exp.NEQ(this=col("a"), expression=col("b")))
        .group_by(lo.copy(), hi.copy())
    )
    res = con.execute(sql_text(agg)).fetchnumpy()
    w = np.ma.filled(np.ma.asarray(res["w"], dtype=np.float64), np.nan)
    if w.size and not np.all(np.isfinite(w)):
        raise GroundingError(f"a rule over cluster relation '{v.name}' gives a NULL or non-finite weight to some pair")
    return np.asarray(keys), pair_graph(n, res["a"], res["b"], w), count
