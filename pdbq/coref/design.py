"""The pair scores of a `DOMAIN CLUSTER` relation as a linear model: fixed part plus learnable weights.

A cluster rule's grounding is one candidate pair. Rules with a constant or ``= expr`` weight add
a fixed amount to the pair's score (a ``WEIGHT MODEL`` rule the stored pair model's match weight of
the two records, `pdbq.coref.model_rules`); a rule with a learnable weight (``WEIGHT ?``, ``WEIGHT
?(syms)``, optionally ``* feature``) adds θ_k · f, where k is the rule (and, for a tied rule, its
tying value) and f the grounding's feature (1 without ``* feature``; a NULL feature is 0: no
evidence). So for the unique candidate pairs p,

    w_p = offset_p + Σ_k θ_k · x_pk,       x_pk = Σ of the features of p's groundings of weight k.

`x` is kept as coordinates (pair, weight, value): a weight tied on a column with many values
would make a dense pairs × weights matrix large; `dense_features` builds the dense matrix the
coreference SampleRank needs, with a size check. θ is the latest learned value of each weight
(`pdbq.catalog.weights.latest_values`, versioned by LEARN WEIGHTS) or the rule's initial value.

Layout (`ClusterDesign`): keys[n] (mention keys in mention order), a[P] < b[P] int64 (dense
mention indices, sorted by (a, b)), offset float64[P]; gp int64[E], gk int64[E], gx float64[E]
(pair index, weight index, summed feature); weights: (rule, tie) per learnable weight k, values
float64[K], groundings int64[K].
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from pdbq.arrays import unique
from pdbq.catalog.names import normalize
from pdbq.catalog.weights import latest_values
from pdbq.coref.layout import PairGraph, pair_graph
from pdbq.coref.model_rules import ModelRuleScores, score_model_rule
from pdbq.errors import GroundingError, LearningError
from pdbq.grounding.compile import compile_rule, observed_columns
from pdbq.grounding.fingerprint import definition_hash
from pdbq.grounding.ground import tie_json
from pdbq.grounding.store import col, ident, sql_text, table_ref, var_table
from pdbq.language.nodes import CreateRule, CreateVariable, WeightKind

__all__ = ["ClusterDesign", "cluster_design", "is_learnable", "MAX_DENSE"]

#: The largest pairs × weights matrix `dense_features` builds (float64: 400 MB).
MAX_DENSE = 50_000_000


def is_learnable(rule: CreateRule) -> bool:
    return rule.weight.kind in (WeightKind.LEARNABLE, WeightKind.TIED)


@dataclass(frozen=True, eq=False)
class ClusterDesign:
    keys: np.ndarray
    a: np.ndarray
    b: np.ndarray
    offset: np.ndarray
    gp: np.ndarray
    gk: np.ndarray
    gx: np.ndarray
    weights: tuple[tuple[str, str | None], ...]
    values: np.ndarray
    groundings: np.ndarray
    count: int  # groundings read (all rules)
    # the `WEIGHT MODEL` rules' scored pairs, with the stored model (name, version) that answered
    models: tuple[ModelRuleScores, ...] = ()

    @property
    def n(self) -> int:
        return int(self.keys.shape[0])

    def scores(self, theta: np.ndarray | None = None) -> np.ndarray:
        theta = self.values if theta is None else np.asarray(theta, dtype=np.float64)
        learned = np.bincount(self.gp, weights=self.gx * theta[self.gk], minlength=self.a.shape[0]) if self.gp.size else 0.0
        return self.offset + learned

    def graph(self, theta: np.ndarray | None = None) -> PairGraph:
        return pair_graph(self.n, self.a, self.b, self.scores(theta))

    def dense_features(self, columns: np.ndarray) -> np.ndarray:
        """x[P, len(columns)]: the features of the learnable weights ``columns`` (indices)."""
        columns = np.asarray(columns, dtype=np.int64)
        size = self.a.shape[0] * columns.size
        if size > MAX_DENSE:
            raise LearningError(
                f"{columns.size} learnable weights × {self.a.shape[0]:,} candidate pairs is too large to learn "
                f"({size:,} > {MAX_DENSE:,} features); tie the weights on fewer values"
            )
        where = np.full(len(self.weights), -1, np.int64)
        where[columns] = np.arange(columns.size)
        x = np.zeros((self.a.shape[0], columns.size))
        keep = where[self.gk] >= 0
        np.add.at(x, (self.gp[keep], where[self.gk[keep]]), self.gx[keep])
        return x


def _mention_map(con, v: CreateVariable, map_name: str) -> np.ndarray:
    """Number the relation's keys 0..n-1 in key order in a temp table ``map_name(vid, key)``."""
    key = v.columns[0]
    import sqlglot

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
        this=table_ref(map_name), kind="TABLE", replace=True,
        properties=exp.Properties(expressions=[exp.TemporaryProperty()]),
        expression=exp.select(vid, col(key.name)).from_(distinct.subquery("d")),
    )
    con.execute(sql_text(create))
    return con.execute(sql_text(exp.select(col(key.name)).from_(table_ref(map_name)).order_by(col("vid")))).fetchnumpy()[key.name]


def _count(con, q: exp.Expression) -> int:
    return int(con.execute(sql_text(exp.select(exp.func("count", exp.Star())).from_(q.subquery("u")))).fetchall()[0][0])


def cluster_design(
    con, v: CreateVariable, variables: Mapping[str, CreateVariable], rules: list[CreateRule], max_pairs: int, map_name: str
) -> ClusterDesign:
    """Ground ``rules`` (the rules over cluster relation ``v``) into a `ClusterDesign`; the
    mention map is left in temp table ``map_name``."""
    keys = np.asarray(_mention_map(con, v, map_name))
    n = int(keys.size)
    lookup = observed_columns(con)
    lo = exp.func("least", col("v0"), col("v1"))
    hi = exp.func("greatest", col("v0"), col("v1"))
    fixed, learn = [], []
    count = 0
    compiled = []
    for rule in rules:
        c = compile_rule(rule, variables, lookup)
        sel = c.select.copy()
        for t in sel.find_all(exp.Table):
            if t.name == var_table(v.name):
                t.set("this", ident(map_name))
        count += _count(con, sel)
        compiled.append((rule, c, sel))
    if count > max_pairs:
        raise GroundingError(
            f"the rules over cluster relation '{v.name}' yield {count:,} candidate pairs, above max_pairs = {max_pairs:,}; "
            "narrow the pairs' blocking or raise max_pairs (WITH (max_pairs = ...))"
        )
    models: list[ModelRuleScores] = []
    for rule, c, sel in compiled:
        g = sel.subquery("g")
        if rule.weight.kind is WeightKind.MODEL:
            q = (exp.select(lo.as_(ident("a")), hi.as_(ident("b"))).distinct().from_(g)
                 .where(exp.NEQ(this=col("v0"), expression=col("v1"))).order_by(ident("a"), ident("b")))
            res = con.execute(sql_text(q)).fetchnumpy()
            models.append(score_model_rule(con, rule, v.columns[0], map_name, np.asarray(res["a"], np.int64),
                                           np.asarray(res["b"], np.int64)))
        elif is_learnable(rule):
            f = col("f") if rule.weight.expression is not None else exp.Literal.number(1)
            tie = tie_json(c.tie_columns) if c.tie_columns else exp.Cast(this=exp.null(), to=exp.DataType.build("VARCHAR"))
            q = (
                exp.select(lo.as_(ident("a")), hi.as_(ident("b")), tie.as_(ident("tie")),
                           exp.func("sum", exp.func("coalesce", exp.Cast(this=f, to=exp.DataType.build("DOUBLE")),
                                                    exp.Literal.number(0))).as_(ident("x")),
                           exp.func("count", exp.Star()).as_(ident("k")))
                .from_(g).where(exp.NEQ(this=col("v0"), expression=col("v1")))
                .group_by(lo.copy(), hi.copy(), tie.copy())
            )
            res = con.execute(sql_text(q)).fetchnumpy()
            x = np.asarray(res["x"], dtype=np.float64)
            if x.size and not np.all(np.isfinite(x)):
                raise GroundingError(f"rule '{rule.name}': the weight's feature is not finite for some pair")
            if c.tie_columns:  # a JSON text per grounding, never NULL (a NULL value is written null)
                distinct, inverse = np.unique(np.asarray(res["tie"], dtype=object).astype(str), return_inverse=True)
                ties = ([str(t) for t in distinct], inverse.reshape(-1).astype(np.int64))
            else:
                ties = ([None], np.zeros(x.size, np.int64))
            learn.append((normalize(rule.name), rule, np.asarray(res["a"], np.int64), np.asarray(res["b"], np.int64),
                          ties, x, np.asarray(res["k"], np.int64)))
        else:
            w = col("w") if c.has_w else exp.Literal.number(c.weight_value)
            fixed.append(exp.select(col("v0").as_(ident("a")), col("v1").as_(ident("b")),
                                    exp.Cast(this=w, to=exp.DataType.build("DOUBLE")).as_(ident("w"))).from_(g))
    fa = fb = np.zeros(0, np.int64)
    fw = np.zeros(0)
    if fixed:
        union = fixed[0]
        for p in fixed[1:]:
            union = exp.union(union, p, distinct=False)
        flo = exp.func("least", col("a"), col("b"))
        fhi = exp.func("greatest", col("a"), col("b"))
        agg = (
            exp.select(flo.as_(ident("a")), fhi.as_(ident("b")), exp.func("sum", col("w")).as_(ident("w")))
            .from_(union.subquery("u"))
            .where(exp.NEQ(this=col("a"), expression=col("b")))
            .group_by(flo.copy(), fhi.copy())
        )
        res = con.execute(sql_text(agg)).fetchnumpy()
        fa, fb = np.asarray(res["a"], np.int64), np.asarray(res["b"], np.int64)
        fw = np.ma.filled(np.ma.asarray(res["w"], dtype=np.float64), np.nan)
        if fw.size and not np.all(np.isfinite(fw)):
            raise GroundingError(f"a rule over cluster relation '{v.name}' gives a NULL or non-finite weight to some pair")
    # the unique pairs of every rule, in (a, b) order
    all_keys = [fa * n + fb] + [la * n + lb for _, _, la, lb, _, _, _ in learn]
    all_keys += [m.scores.a * n + m.scores.b for m in models]
    pkey = unique(np.concatenate(all_keys)) if all_keys else np.zeros(0, np.int64)  # by sorting: see pdbq.arrays
    a, b = (pkey // n, pkey % n) if n else (pkey, pkey)
    offset = np.zeros(pkey.size)
    if fa.size:
        np.add.at(offset, np.searchsorted(pkey, fa * n + fb), fw)
    for m in models:  # a stored pair model's match weight, in nats
        np.add.at(offset, np.searchsorted(pkey, m.scores.a * n + m.scores.b), m.nats)
    weights: list[tuple[str, str | None]] = []
    values: list[float] = []
    groundings: list[int] = []
    gp, gk, gx = [], [], []
    for name, rule, la, lb, ties, x, k in learn:
        learned = latest_values(con, name, definition_hash(rule))
        distinct, inverse = ties  # a LEARNABLE rule has its one weight even without groundings
        base = len(weights)
        for t in distinct:
            weights.append((name, t))
            values.append(learned.get(t, float(rule.weight.value)))
        ks = base + inverse
        groundings.extend(np.bincount(inverse, weights=k, minlength=len(distinct)).astype(np.int64).tolist())
        gp.append(np.searchsorted(pkey, la * n + lb))
        gk.append(ks)
        gx.append(x)
    cat = lambda parts, dt: np.concatenate(parts).astype(dt) if parts else np.zeros(0, dt)  # noqa: E731
    return ClusterDesign(
        keys=keys, a=a.astype(np.int64), b=b.astype(np.int64), offset=offset,
        gp=cat(gp, np.int64), gk=cat(gk, np.int64), gx=cat(gx, np.float64),
        weights=tuple(weights), values=np.asarray(values, dtype=np.float64),
        groundings=np.asarray(groundings, dtype=np.int64), count=count, models=tuple(models),
    )
