"""Linking two sources: `pdbq.link(left, right, id=..., fields=[...])`.

`mode="link_only"` compares records of `left` only with records of `right` (each source is taken
as free of duplicates, so no within-source pair is scored); `mode="link_and_dedupe"` compares
every pair, within and across sources. Both sources need the id column (`right_id` when the
right one names it differently) and the compared fields; ids must be unique within a source and
may repeat across sources. The records of both are stacked (with their source) and clustered by
the same model as `pdbq.dedupe`, so match probabilities (`probabilities=True`), explanations and
the CLI (`pdbq dedupe LEFT --link RIGHT`) work the same; `explain` takes the original ids
(written ``"source:id"`` when an id appears in both sources).

Output: `clusters` is `(source, id, cluster)` with `source` the name given in `sources`
(default "left", "right") and `cluster` a number shared by the records of one entity (the
position, in (source, id) order, of its first record); `pairs`, with probabilities, is
`(id_l, id_r, match_probability, se)` with `id_l` from the left source under link_only, and
`(source_l, id_l, source_r, id_r, match_probability, se)` under link_and_dedupe.

`one_to_one=True` (link_only only) states that each source is free of duplicates: no cluster
may then hold two records of one source, so a record links to at most one record of the other
source. It is a hard constraint of the clustering moves (a move that would put two records of
one source in one cluster is rejected before it is scored), so the MAP clustering never breaks
it and the match probabilities are those of the posterior restricted to such clusterings (a
pair of one source has probability 0). Without it, two records of one source can end up in one
cluster through a shared partner in the other source.

Blocking (and, with the estimated model, its estimation) runs over all records; the pairs
within a source are dropped before clustering, so `max_pairs` bounds the compared pairs from
above.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
from sqlglot import exp

from pdbq.coref.layout import CorefInputError
from pdbq.coref.model import source_relation
from pdbq.linkage import _write, dedupe, id_named
from pdbq.linkage.stored import connection_of, stored_model

__all__ = ["MODES", "link"]

MODES = ("link_only", "link_and_dedupe")
_SOURCE = "__pdbq_source"
_KEY = "__pdbq_key"


def _q(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def _relation(con, source, side: str):
    if isinstance(source, pa.Table):
        return con.from_arrow(source)
    return source_relation(con, source, suffix=f" ({side} source)")


ALL_VALUES = "all_values"


def _all_values(rel, id_col: str) -> exp.Expression:
    """A record's non-empty values of every column but the id, space-joined (schema-agnostic)."""
    parts = [exp.func("nullif", exp.func("trim", exp.cast(exp.column(_q(c)), "VARCHAR")), exp.Literal.string(""))
             for c in rel.columns if c != id_col]
    # DuckDB's concat_ws skips NULLs; sqlglot's generic one would turn any NULL into NULL
    joined = exp.Anonymous(this="concat_ws", expressions=[exp.Literal.string(" "), *parts])
    return exp.func("nullif", joined, exp.Literal.string("")) if parts else exp.Null()


def _side(con, rel, side: str, k: int, id_col: str, out_id: str, columns: list[str],
          all_values: str | None = None) -> exp.Select:
    from pdbq.errors import suggest

    for c in [id_col, *columns]:
        if c not in rel.columns:
            raise CorefInputError(f"column {c!r} is not a column of the {side} source.{suggest(c, rel.columns)}")
    name = f"__pdbq_link_{side}"
    con.register(name, rel)
    dup = con.execute(exp.select(_q(id_col), "count(*)").from_(name).group_by(_q(id_col))
                      .having("count(*) > 1").limit(1).sql(dialect="duckdb")).fetchall()
    if dup:
        raise CorefInputError(f"id column {id_col!r} of the {side} source is not unique: {dup[0][0]!r} appears "
                              f"{dup[0][1]} times")
    extra = [exp.alias_(_all_values(rel, id_col), all_values, quoted=True)] if all_values else []
    return exp.select(exp.alias_(exp.Literal.number(k), _SOURCE), exp.alias_(exp.column(_q(id_col)), out_id),
                      *[exp.column(_q(c)) for c in columns if c != out_id], *extra).from_(name)


def _schema_agnostic(lrel, rrel, left_id: str, right_id: str) -> tuple[list[str], str | None]:
    """Fields when none were given: the columns both sources have (but the ids), plus, when a
    source has columns the other lacks, `ALL_VALUES`: each record's non-empty values of all its
    columns as one text (compared as text, whatever the columns are called). Returns (fields,
    the all-values field or None)."""
    lcols = [c for c in lrel.columns if c != left_id]
    rcols = [c for c in rrel.columns if c != right_id]
    common = [c for c in lcols if c in rcols]
    if set(lcols) == set(rcols):
        if not common:
            raise CorefInputError("the sources have no column to compare but their ids: give fields=[...]")
        return common, None
    name = ALL_VALUES
    while name in lcols or name in rcols:
        name = "_" + name
    return [*common, name], name


def link(left, right, *, id: str, right_id: str | None = None, fields: list[str] | None = None, comparisons=None,
         mode: str = "link_only", sources: tuple[str, str] = ("left", "right"), output: str | Path | None = None,
         con: duckdb.DuckDBPyConnection | None = None, one_to_one: bool | None = None, **options):
    """Link the records of `left` to those of `right` (module docstring). `options`: the other
    arguments of `pdbq.dedupe` (blocking, bias, max_pairs, nulls, config, probabilities, and
    `model=` / `model_name=` to score with / store a pair model in the database `con`; with a
    stored `model` the fields may be left out).
    `one_to_one=True` (link_only only): each source is free of duplicates, so no cluster holds two
    records of one source (a hard constraint of MAP and the posterior sampler, module docstring);
    None (the default): under link_only with an estimated model, True when the data show both
    sources free of duplicates (`pdbq.linkage.sources.duplicate_free`), else False.
    With no `fields` (and no stored model or comparisons), the sources' shared columns are the
    fields, and where their columns differ, one more: every record's non-empty values joined as
    one text (`ALL_VALUES`, "all_values"), so sources with different columns still compare.
    Returns a `DedupeResult` whose tables carry the source of each record."""
    if mode not in MODES:
        raise CorefInputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if one_to_one and mode != "link_only":
        raise CorefInputError(f"one_to_one needs mode='link_only': under {mode!r} a source may hold duplicates, "
                              "which the constraint would forbid joining")
    if len(sources) != 2 or sources[0] == sources[1]:
        raise CorefInputError(f"sources must be two different names, got {sources!r}")
    con = connection_of(con)
    model = options.get("model")
    if con is None and (options.get("model_name") is not None or isinstance(model, str)):
        what = f"model_name={options['model_name']!r}" if options.get("model_name") is not None else f"model={model!r}"
        raise CorefInputError(f"{what} names a stored pair model: give the database that stores it (con=...)")
    if comparisons is None and not fields and isinstance(model, str):
        fields = [f.field for f in stored_model(con, model, None)[0].fields if not f.levels.derived]  # the stored model's
    own = con is None
    con = duckdb.connect() if own else con
    try:
        lrel, rrel = _relation(con, left, "left"), _relation(con, right, "right")
        extra = None
        if comparisons is None and not fields:
            fields, extra = _schema_agnostic(lrel, rrel, id, right_id or id)
        wanted = list(dict.fromkeys([c.field for c in comparisons] if comparisons else
                                    [f for f in fields if f != extra]))
        lq = _side(con, lrel, "left", 0, id, id, wanted, extra)
        rq = _side(con, rrel, "right", 1, right_id or id, id, wanted, extra)
        stacked = exp.union(lq, rq, distinct=False, by_name=True)
        keyed = exp.select(
            exp.alias_(exp.Sub(this=exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=[
                exp.Ordered(this=exp.column(_SOURCE)), exp.Ordered(this=exp.column(_q(id)))])),
                expression=exp.Literal.number(1)), _KEY),
            exp.Star(),
        ).from_(stacked.subquery("s"))
        con.execute(exp.Create(this=exp.to_table("__pdbq_link_records"), kind="TABLE", replace=True,
                               properties=exp.Properties(expressions=[exp.TemporaryProperty()]),
                               expression=keyed).sql(dialect="duckdb"))
        res = dedupe("__pdbq_link_records", id=_KEY, fields=fields, comparisons=comparisons, con=con,
                     link_only=_SOURCE if mode == "link_only" else None,
                     one_to_one=one_to_one if mode == "link_only" else bool(one_to_one), **options)
        got = con.execute(exp.select(_SOURCE, exp.column(_q(id))).from_("__pdbq_link_records")
                          .order_by(_KEY).sql(dialect="duckdb")).fetchnumpy()
        src = np.asarray(sources, dtype=object)[np.asarray(got[_SOURCE], dtype=np.int64)]
        orig = np.asarray(got[id])
        key = np.asarray(res.clusters.column("id").to_numpy(zero_copy_only=False), dtype=np.int64)
        clusters = pa.table({"source": pa.array(src[key], pa.string()), "id": pa.array(orig[key]),
                             "cluster": res.clusters.column("cluster")})
        pairs = res.pairs
        if pairs is not None:
            kl = np.asarray(pairs.column("id_l").to_numpy(zero_copy_only=False), dtype=np.int64)
            kr = np.asarray(pairs.column("id_r").to_numpy(zero_copy_only=False), dtype=np.int64)
            cols = {"id_l": pa.array(orig[kl]), "id_r": pa.array(orig[kr])}
            if mode == "link_and_dedupe":
                cols = {"source_l": pa.array(src[kl], pa.string()), "id_l": cols["id_l"],
                        "source_r": pa.array(src[kr], pa.string()), "id_r": cols["id_r"]}
            pairs = pa.table({**cols, "match_probability": pairs.column("match_probability"), "se": pairs.column("se")})
        if output is not None:
            _write(id_named(clusters, id, right_id), Path(output))
        # explain() takes record ids: the original ones when no id repeats across sources
        ids = orig if np.unique(orig).size == orig.size else np.array([f"{s}:{i}" for s, i in zip(src, orig)], dtype=object)
        diag = {**res.diagnostics, "mode": mode}
        return replace(res, clusters=clusters, pairs=pairs, diagnostics=diag, ids=ids)
    finally:
        if own:
            con.close()
        else:
            con.execute("DROP TABLE IF EXISTS __pdbq_link_records")
            for side in ("left", "right"):
                try:
                    con.unregister(f"__pdbq_link_{side}")
                except Exception:  # noqa: BLE001 - not registered when its source failed to load
                    pass
