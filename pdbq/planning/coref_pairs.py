"""Pairwise match probabilities of a `DOMAIN CLUSTER` relation in SQL: `PROB(a = b)`.

    SELECT a.id AS id_l, b.id AS id_r, PROB(a = b) AS p, STDERR(a = b) AS se
    FROM entity AS a JOIN entity AS b ON a.id < b.id
    JOIN pairs ON pairs.a = a.id AND pairs.b = b.id;

`a` and `b` are two aliases of one cluster relation; `PROB(a = b)` is P(the two rows' mentions
are one entity) under the clustering posterior (τ = 1, the entity moves of
`pdbq.inference.coreference.resolve.sample_pairs`), `STDERR(a = b)` its standard error across
chains. The pairs asked for are exactly those the query's FROM / JOIN / WHERE select (a WHERE or
ON conjunct that mentions an estimate is dropped first: it cannot narrow what to sample for): a
join over the candidate pairs asks for them only; `ON a.id < b.id` alone asks for all n(n−1)/2
pairs, which the query's `max_pairs` bounds like grounding.

The answer is computed in two passes over the query: the first selects the DISTINCT pairs of
mention numbers `(a, b)` the query's scope yields (`pair_rows`), the sampler estimates them all
in one run, and in the final query every `PROB(a = b)` / `STDERR(a = b)` becomes a lookup in
that table by the two rows' mention numbers (`lookup_pairs`).
"""

from __future__ import annotations

import numpy as np
from sqlglot import exp

from pdbq.errors import InferenceError
from pdbq.grounding.store import col, ident, sql_text, table_ref
from pdbq.language.nodes import Estimate, EstimateKind, ProbQuery
from pdbq.planning.rewrite import relax

__all__ = ["VID", "pair_estimates", "check_pair_relations", "pair_rows", "lookup_pairs"]

#: The mention number column of a cluster alias's relation in the final query (dropped from the
#: answer with the estimate placeholders).
VID = "__pdbq_est_vid"


def pair_estimates(stmt: ProbQuery) -> list[Estimate]:
    """The query's `PROB(a = b)` / `STDERR(a = b)` calls."""
    return [e for e in stmt.estimates if e.other is not None]


def _call(e: Estimate) -> str:
    return f"{e.kind.value}({e.alias} = {e.other})"


def check_pair_relations(stmt: ProbQuery, relations: dict[str, str]) -> dict[tuple[str, str], str]:
    """{(alias, other): relation} of the pair estimates; InferenceError for two aliases of
    different relations or a kind other than PROB/STDERR."""
    out: dict[tuple[str, str], str] = {}
    for e in pair_estimates(stmt):
        if e.kind not in (EstimateKind.PROB, EstimateKind.STDERR):  # pragma: no cover - the parser refuses it
            raise InferenceError(f"{_call(e)}: only PROB and STDERR compare two aliases")
        left, right = relations[e.alias], relations[e.other]
        if left != right:
            raise InferenceError(f"{_call(e)}: '{e.alias}' is cluster relation '{left}' and '{e.other}' is "
                                 f"'{right}'; PROB(a = b) compares two aliases of one DOMAIN CLUSTER relation")
        out[(e.alias, e.other)] = left
    return out


def _scope(tree: exp.Expression, alias: str) -> exp.Select | None:
    subs = [s for s in tree.find_all(exp.Subquery) if s.alias_or_name.lower() == alias and s.meta.get("pdbq_source")]
    return subs[0].find_ancestor(exp.Select) if len(subs) == 1 else None


def pair_rows(con, tree: exp.Expression, alias: str, other: str, max_pairs: int) -> tuple[np.ndarray, np.ndarray]:
    """(qa, qb): the DISTINCT mention numbers of the row pairs of `alias` and `other` that the
    query `tree` selects (its aliases already standing for relations with a `VID` column and
    marked ``meta["pdbq_source"]``). InferenceError when the two aliases are not in one SELECT's
    FROM, or when the query asks for more than `max_pairs` pairs (naming the count)."""
    scope = _scope(tree, alias)
    if scope is None or _scope(tree, other) is not scope:
        raise InferenceError(f"PROB({alias} = {other}): '{alias}' and '{other}' must each appear once, in the FROM "
                             "of the same SELECT (e.g. FROM entity AS a JOIN entity AS b ON ...)")
    sel = scope.copy()
    with_ = tree.args.get("with_") if isinstance(tree, exp.Query) else None
    if scope is not tree and sel.args.get("with_") is None and with_ is not None:
        sel.set("with_", with_.copy())
    sel = relax(sel, [col(VID, alias).as_(ident("qa")), col(VID, other).as_(ident("qb"))])
    n = int(con.execute(sql_text(exp.select(exp.func("count", exp.Star())).from_(sel.subquery("p")))).fetchall()[0][0])
    if n > max_pairs:
        raise InferenceError(
            f"PROB({alias} = {other}): the query asks for {n:,} pairs of rows, above max_pairs = {max_pairs:,}; "
            "join the candidate pairs (or narrow WHERE) to ask for the pairs you need, or raise max_pairs "
            "(WITH (max_pairs = ...))")
    got = con.execute(sql_text(exp.select("qa", "qb").from_(sel.subquery("p")).order_by("qa", "qb"))).fetchnumpy()
    return np.asarray(got["qa"], np.int64), np.asarray(got["qb"], np.int64)


def lookup_pairs(tree: exp.Expression, estimates: list[Estimate], tables: dict[tuple[str, str], str]) -> exp.Expression:
    """A copy of `tree` in which every pair estimate's placeholder is a scalar lookup of its
    value (`p` or `se`) in ``tables[(alias, other)]`` (columns qa, qb, p, se) by the two rows'
    `VID` columns."""
    out = tree.copy()
    by_name = {e.placeholder: e for e in estimates}
    for c in list(out.find_all(exp.Column)):
        e = by_name.get(c.name)
        if e is None or c.table.lower() != e.alias:
            continue
        cond = exp.and_(exp.EQ(this=col("qa", "__pdbq_pp"), expression=col(VID, e.alias)),
                        exp.EQ(this=col("qb", "__pdbq_pp"), expression=col(VID, e.other)))
        value = "p" if e.kind is EstimateKind.PROB else "se"
        look = exp.select(col(value, "__pdbq_pp")).from_(table_ref(tables[(e.alias, e.other)], "__pdbq_pp")).where(cond)
        c.replace(exp.Subquery(this=look))
    return out
