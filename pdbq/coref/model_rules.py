"""Cluster rules weighted by a stored pair model: ``WEIGHT MODEL 'name[@version]' ON records``.

    CREATE RULE match WEIGHT MODEL 'people@2' ON people
        FUNCTION EQUAL AS entity(a) = entity(b) :- pairs(a, b);

Each grounding (a candidate pair of the cluster relation's keys) scores the model's match weight
of the two records — the same number the front door (`pdbq.dedupe(..., model=...)`) gives the
pair: log2 prior odds + Σ_fields log2 Bayes factor of the pair's comparison level (term
frequencies of `records`), as a pair factor in nats (× ln 2). The records are the rows of the
table or view `records` whose column named like the cluster relation's key holds the key; a key
without a record compares as NULL on every field (no evidence), a key held by two records is an
error.

`score_model_rule(con, rule, key, map_name, a, b)` scores the pairs (a, b) (dense mention numbers
of the relation's mention map) and returns a `ModelRuleScores`: the model's name and version
that answered, the model, and the `PairScores` (levels and per-field contributions, in bits) for
explanations (`pdbq.coref.explain`). Everything it creates is TEMP and dropped before it returns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from sqlglot import exp

from pdbq.catalog.cluster import model_fields
from pdbq.catalog.pair_models import load_pair_model
from pdbq.coref.layout import CorefInputError
from pdbq.coref.levels import VALUES, prepare_values
from pdbq.coref.pair_model import PairModel, PairScores, score_pairs
from pdbq.errors import GroundingError, PdbqError
from pdbq.grounding.store import col, ident, sql_text, table_ref
from pdbq.language.nodes import Column, CreateRule

__all__ = ["ModelRuleScores", "score_model_rule"]

_RECORDS = "__pdbq_model_records"
_PAIRS = "__pdbq_model_pairs"
_M = "__pdbq_m"


@dataclass(frozen=True, eq=False)
class ModelRuleScores:
    """A `WEIGHT MODEL` rule's pairs scored: `name`, `version` (the stored model that answered),
    `model`, `scores` (pairs a < b sorted, as asked; match weight in bits)."""

    rule: str
    name: str
    version: int
    model: PairModel
    scores: PairScores

    @property
    def nats(self) -> np.ndarray:
        """The pair factors: match weight × ln 2."""
        return self.scores.match_weight * np.log(2.0)


def _drop(con) -> None:
    for t in (_RECORDS, VALUES):
        con.execute(f"DROP TABLE IF EXISTS {ident(t).sql(dialect='duckdb')}")
    try:
        con.unregister(_PAIRS)
    except Exception:  # noqa: BLE001 - not registered when an earlier step failed
        pass


def score_model_rule(con, rule: CreateRule, key: Column, map_name: str, a: np.ndarray, b: np.ndarray) -> ModelRuleScores:
    """Score pairs (a[k], b[k]) (dense mention numbers, a < b) with `rule`'s stored pair model
    (module docstring); GroundingError naming the rule, model or records when they do not fit."""
    what = f"rule '{rule.name}'"
    try:
        data, name, version = load_pair_model(con, rule.weight.model or "")
    except PdbqError as exc:
        raise GroundingError(f"{what}: {exc}") from None
    model = PairModel.from_dict(data)
    fields = model_fields(data)
    records = rule.weight.records or ""
    rec = exp.Table(this=ident(records))
    cols = [col(f, "r").as_(ident(f)) for f in fields]
    # every mention gets a row: a key without a record compares as NULL (no evidence)
    q = (exp.select(col("vid", "m").as_(ident(_M)), *cols).from_(table_ref(map_name, "m"))
         .join(rec.as_("r"), on=exp.EQ(this=col(key.name, "r"), expression=col(key.name, "m")), join_type="left"))
    try:
        dup = con.execute(sql_text(exp.select(col(key.name), exp.func("count", exp.Star()))
                                   .from_(exp.Table(this=ident(records))).group_by(col(key.name))
                                   .having(exp.GT(this=exp.func("count", exp.Star()), expression=exp.Literal.number(1)))
                                   .limit(1))).fetchall()
        if dup:
            raise GroundingError(f"{what}: records '{records}' hold key {dup[0][0]!r} {dup[0][1]} times; "
                                 f"WEIGHT MODEL needs one record per key of column {key.name!r}")
        con.execute(sql_text(exp.Create(this=table_ref(_RECORDS), kind="TABLE", replace=True,
                                        properties=exp.Properties(expressions=[exp.TemporaryProperty()]), expression=q)))
        columns = {c: str(t) for c, t in zip(*_describe(con))}
        prepare_values(con, _RECORDS, _M, columns, tuple(f.levels for f in model.fields))
        con.register(_PAIRS, pa.table({"a": np.asarray(a, np.int64), "b": np.asarray(b, np.int64)}))
        scores = score_pairs(con, model, _PAIRS)
    except CorefInputError as exc:
        raise GroundingError(f"{what}: pair model {name!r} version {version} on records '{records}': {exc}") from None
    except GroundingError:
        raise
    except Exception as exc:  # noqa: BLE001 - DuckDB's binder names the table or column
        raise GroundingError(f"{what}: WEIGHT MODEL {name!r} ON {records}: {str(exc).splitlines()[0]}") from None
    finally:
        _drop(con)
    return ModelRuleScores(rule.name, name, version, model, scores)


def _describe(con):
    rel = con.sql(sql_text(exp.select("*").from_(table_ref(_RECORDS)).limit(0)))
    return rel.columns, rel.types
