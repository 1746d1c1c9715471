"""``EXPLAIN MATCH relation [(key, key), ...]``: why a stored pair model scores a DOMAIN CLUSTER
relation's candidate pairs as it does, as rows (docs/coreference.md).

For every rule over the relation weighted by a stored pair model (``WEIGHT MODEL 'name[@v]' ON
records``), one row per candidate pair (its groundings; or the pairs listed, either order) and
term:

    rule, model, id_l, id_r, term, level, contribution, match_weight

`term` a compared field or ``(constant)`` (the prior's log2 odds); `level` the pair's comparison
level on that field (NULL: a NULL value, no evidence); `contribution` its log2 Bayes factor
(bits, term-frequency adjusted on an exact match), the contributions summing to `match_weight`
(bits; the pair factor is match_weight × ln 2). They are the rows `pdbq.dedupe(...).explain()`
gives (`pdbq.coref.explain.explain_pairs`); `model` is the stored model that answered, as
``name@version``. Only the model rules are grounded; the statement reads and changes nothing
stored (its TEMP tables are dropped).
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import sqlglot
from sqlglot import exp

from pdbq.catalog.cluster import is_cluster
from pdbq.catalog.names import normalize
from pdbq.coref.design import cluster_design
from pdbq.coref.explain import explain_pairs, terms_estimated
from pdbq.coref.ground import cluster_rules, drop_map, map_table
from pdbq.errors import CatalogError, InferenceError, suggest
from pdbq.grounding.store import sql_text
from pdbq.language.nodes import ExplainMatch, WeightKind
from pdbq.planning.plan import QueryAnswer

__all__ = ["explain_match", "MAX_PAIRS"]

#: Groundings an EXPLAIN MATCH may read (as a cluster query's default max_pairs).
MAX_PAIRS = 20_000_000


def _keys(con, key_type: str, literals: list[str], relation: str) -> list:
    """The listed keys as values of the relation's key type; InferenceError naming a bad one."""
    out = []
    for lit in literals:
        cast = exp.Cast(this=sqlglot.parse_one(lit, read="duckdb"), to=exp.DataType.build(key_type, dialect="duckdb"))
        try:
            out.append(con.execute(sql_text(exp.select(cast))).fetchall()[0][0])
        except Exception:  # noqa: BLE001 - DuckDB's conversion error
            raise InferenceError(f"EXPLAIN MATCH {relation}: {lit} is not a key of type {key_type}") from None
    return out


def explain_match(db, stmt: ExplainMatch) -> QueryAnswer:
    """The rows of the module docstring, with diagnostics (pairs, models, seconds)."""
    started = time.perf_counter()
    con = db.duckdb
    variables = db.catalog.variables()
    rules = db.catalog.rules()
    relation = normalize(stmt.relation)
    v = variables.get(relation)
    if v is None or not is_cluster(v):
        clusters = sorted(n for n, x in variables.items() if is_cluster(x))
        what = "not a DOMAIN CLUSTER relation" if v is not None else "no variable relation"
        raise CatalogError(f"EXPLAIN MATCH {stmt.relation}: {what} '{relation}'.{suggest(relation, clusters)} "
                           f"DOMAIN CLUSTER relations: {', '.join(clusters) or 'none'}")
    model_rules = [r for r in cluster_rules(relation, rules) if r.weight.kind is WeightKind.MODEL]
    if not model_rules:
        raise InferenceError(f"EXPLAIN MATCH {relation}: no rule over '{relation}' is weighted by a stored pair model "
                             "(CREATE RULE ... WEIGHT MODEL 'name' ON records FUNCTION EQUAL AS "
                             f"{relation}(a) = {relation}(b) :- pairs(a, b)); EXPLAIN MATCH explains those weights")
    key = v.columns[0]
    left = _keys(con, key.type, [a for a, _ in stmt.pairs], relation)
    right = _keys(con, key.type, [b for _, b in stmt.pairs], relation)
    try:
        d = cluster_design(con, v, variables, model_rules, MAX_PAIRS, map_table(relation))
    finally:
        drop_map(con, relation)
    ids = np.asarray(d.keys)
    tables, found = [], np.zeros(len(stmt.pairs), bool)
    for m in d.models:
        keep = _candidate(ids, m.scores, left, right, relation, m.rule) if stmt.pairs else None
        if keep is not None:
            found |= keep
            if not keep.any():
                continue
        t = explain_pairs(ids, terms_estimated(m.model, m.scores),
                          **({} if keep is None else {"id_l": np.asarray(left, dtype=ids.dtype)[keep],
                                                       "id_r": np.asarray(right, dtype=ids.dtype)[keep]}))
        head = {"rule": pa.array([m.rule] * t.num_rows, pa.string()),
                "model": pa.array([f"{m.name}@{m.version}"] * t.num_rows, pa.string())}
        t = pa.table({**head, **{c: t.column(c) for c in t.column_names}, "__i": np.arange(t.num_rows)})
        # pairs in key order, each pair's terms in the model's field order (the constant last)
        tables.append(t.sort_by([("id_l", "ascending"), ("id_r", "ascending"), ("__i", "ascending")]).drop(["__i"]))
    if stmt.pairs and not found.all():
        j = int(np.flatnonzero(~found)[0])
        raise InferenceError(f"EXPLAIN MATCH {relation}: ({stmt.pairs[j][0]}, {stmt.pairs[j][1]}) is not a candidate "
                             "pair of its WEIGHT MODEL rules (no grounding of them names both keys)")
    out = pa.concat_tables(tables) if tables else _empty(ids)
    out = out.replace_schema_metadata({"unit": "bits"})
    diag = {"pairs": int(sum(m.scores.a.size for m in d.models)),
            "pair_models": {m.rule: f"{m.name}@{m.version}" for m in d.models},
            "seconds": time.perf_counter() - started, "warnings": []}
    return QueryAnswer(out, diag)


def _candidate(ids, scores, left, right, relation: str, rule: str) -> np.ndarray:
    """Which listed pairs are candidate pairs of this rule's scores (a key that is no mention is
    an InferenceError naming it)."""
    order = np.argsort(ids, kind="stable")
    pos = {}
    for k in [*left, *right]:
        i = int(np.searchsorted(ids[order], k))
        if i >= ids.size or ids[order][i] != k:
            raise InferenceError(f"EXPLAIN MATCH {relation}: no mention has key {k!r}")
        pos[k] = int(order[i])
    have = set(zip(scores.a.tolist(), scores.b.tolist()))
    return np.array([(min(pos[a], pos[b]), max(pos[a], pos[b])) in have for a, b in zip(left, right)], dtype=bool)


def _empty(ids) -> pa.Table:
    key = pa.array(ids[:0])
    return pa.table({"rule": pa.array([], pa.string()), "model": pa.array([], pa.string()), "id_l": key, "id_r": key,
                     "term": pa.array([], pa.string()), "level": pa.array([], pa.string()),
                     "contribution": pa.array([], pa.float64()), "match_weight": pa.array([], pa.float64())})
