"""Pair models stored in the catalog for the front door: `dedupe(..., model_name=...)` stores the
fitted model as a new version of that name, `dedupe(..., model="name[@version]")` scores with a
stored one without re-estimating (`pdbq.catalog.pair_models` holds the rows).
"""

from __future__ import annotations

from dataclasses import replace

import duckdb

from pdbq.catalog.pair_models import check_writable, load_pair_model, parse_model_ref, store_pair_model
from pdbq.coref.layout import CorefInputError
from pdbq.coref.pair_model import PairModel

__all__ = ["connection_of", "stored_model", "check_can_store", "store_model"]


def connection_of(con):
    """The DuckDB connection of `con`: a DuckDB connection, or a `pdbq.connect` Database (which
    the linkage layer knows only by its `duckdb` property)."""
    if con is None or isinstance(con, duckdb.DuckDBPyConnection):
        return con
    inner = getattr(con, "duckdb", None)
    if isinstance(inner, duckdb.DuckDBPyConnection):
        return inner
    raise CorefInputError(f"con must be a DuckDB connection or a pdbq database, got {type(con).__name__}")


def stored_model(con, ref: str, fields: list[str] | None) -> tuple[PairModel, str, int]:
    """(model, name, version) of stored pair model `ref` ("name" or "name@version"); the fields
    asked for must be the model's (in any order): CorefInputError naming both lists otherwise."""
    if con is None:
        raise CorefInputError(f"model={ref!r} names a stored pair model: give the database that stores it (con=...)")
    data, name, version = load_pair_model(con, ref)
    model = PairModel.from_dict(data)
    if data.get("prior_training_rules") is not None:
        model = replace(model, diagnostics={"prior_training_rules": float(data["prior_training_rules"])})
    have = [f.field for f in model.fields if not f.levels.derived]
    if fields is not None and sorted(dict.fromkeys(fields)) != sorted(have):
        raise CorefInputError(f"pair model {name!r} version {version} compares fields {have}, "
                              f"but fields={list(fields)} were given: give the model's fields or fit a new model")
    return model, name, version


def check_can_store(con, name: str, *, own: bool) -> str:
    """The stored form of `name`, after checking that it can be stored (before any work):
    a database to store in (not dedupe's own throw-away connection), open for writing."""
    stored, _ = parse_model_ref(name)
    if "@" in str(name):
        raise CorefInputError(f"model_name={name!r}: versions are numbered by the store, name the model without '@'")
    if own:
        raise CorefInputError(f"model_name={name!r}: give the database to store the model in (con=...)")
    check_writable(con, stored)
    return stored


def store_model(con, name: str, model: PairModel, *, records: int, candidate_pairs: int) -> int:
    """Store `model` as the next version of `name`; the version."""
    data = model.to_dict()
    if "prior_training_rules" in model.diagnostics:
        data["prior_training_rules"] = float(model.diagnostics["prior_training_rules"])
    return store_pair_model(con, name, model=data, levels=model.table(), records=records,
                            candidate_pairs=candidate_pairs)
