"""Catalog checks for cluster-valued variable relations (``DOMAIN CLUSTER``, docs/coreference.md).

A cluster relation's value is the entity its key belongs to. It takes one key column and no
stored evidence, and enters rules only as the two sides of an EQUAL head over candidate pairs:

    CREATE RULE affinity WEIGHT = <expr> FUNCTION EQUAL AS entity(a) = entity(b) :- pairs(a, b, ...)

with a constant, per-pair (`= expr`) or learnable (`?`, `?(syms)`, either optionally `* feature`)
weight and observed body atoms only. A learnable weight times a feature is a cluster-rule form
(coreference SampleRank learns it, docs/learning.md); ordinary rules refuse it.
"""

from __future__ import annotations

from collections.abc import Mapping

import duckdb

from pdbq.catalog.names import normalize, relation_columns
from pdbq.catalog.pair_models import load_pair_model
from pdbq.errors import CatalogError
from pdbq.language.nodes import CreateRule, CreateVariable, DomainKind, FactorFunction, HeadKind, WeightKind

__all__ = ["check_cluster_variable", "check_cluster_rule", "check_model_weight", "model_fields", "is_cluster"]


def is_cluster(v: CreateVariable) -> bool:
    return v.domain.kind is DomainKind.CLUSTER


def check_cluster_variable(node: CreateVariable, what: str) -> None:
    if not is_cluster(node):
        return
    if len(node.columns) != 1:
        raise CatalogError(f"{what}: a DOMAIN CLUSTER relation takes exactly one key column (the mention id)")
    if node.evidence is not None:
        raise CatalogError(f"{what}: DOMAIN CLUSTER relations take no EVIDENCE (give known matches as pairs with a large weight)")
    if node.per_row_cardinality:
        raise CatalogError(f"{what}: DOMAIN CLUSTER has no cardinality")


def check_cluster_rule(node: CreateRule, variables: Mapping[str, CreateVariable], what: str) -> None:
    """Refuse any use of a cluster relation other than `c(a) = c(b) :- observed pairs`."""
    atoms = list(node.head.atoms) + list(node.body)
    cluster = [a for a in atoms if normalize(a.relation) in variables and is_cluster(variables[normalize(a.relation)])]
    if not cluster:
        if node.weight.kind is WeightKind.MODEL:
            raise CatalogError(f"{what}: WEIGHT MODEL (a stored pair model's match weight) is for DOMAIN CLUSTER "
                               "pair rules only: FUNCTION EQUAL AS entity(a) = entity(b) :- pairs(a, b)")
        if node.weight.kind in (WeightKind.LEARNABLE, WeightKind.TIED) and node.weight.expression is not None:
            raise CatalogError(
                f"{what}: a learnable weight times a feature (WEIGHT ? * expr) is supported on DOMAIN CLUSTER pair "
                "rules only; write WEIGHT ? or WEIGHT ?(symbols) here"
            )
        return
    shape = "FUNCTION EQUAL AS entity(a) = entity(b) :- pairs(a, b, ...)"
    if node.head.kind is not HeadKind.EQUAL or node.function is not FactorFunction.EQUAL:
        raise CatalogError(f"{what}: a DOMAIN CLUSTER relation enters rules only as {shape}")
    heads = {normalize(a.relation) for a in node.head.atoms}
    if len(heads) != 1 or any(a.negated for a in node.head.atoms) or not all(a in node.head.atoms for a in cluster):
        raise CatalogError(f"{what}: both sides of the head must be the same cluster relation, which may not appear in the body ({shape})")
    random_body = [a for a in node.body if normalize(a.relation) in variables]
    if random_body:
        raise CatalogError(f"{what}: a cluster rule's body must be observed tables only (the candidate pairs), not '{random_body[0].relation}'")


def model_fields(data: dict) -> list[str]:
    """The columns a stored pair model (its JSON as a dict) reads: its fields, and for a derived
    field (model codes) the columns it is derived from."""
    out = [c for f in data.get("fields", []) for c in (f.get("sources") or [f["field"]])]
    return list(dict.fromkeys(out))


def check_model_weight(con: duckdb.DuckDBPyConnection, node: CreateRule, variables: Mapping[str, CreateVariable],
                       what: str) -> None:
    """``WEIGHT MODEL 'name[@version]' ON records`` of a cluster rule: the model is stored, and
    the records table exists with the cluster relation's key column and the model's fields
    (CatalogError naming what is missing). Checked again when a query grounds the rule."""
    if node.weight.kind is not WeightKind.MODEL:
        return
    try:
        data, name, version = load_pair_model(con, node.weight.model or "")
    except CatalogError as exc:
        raise CatalogError(f"{what}: WEIGHT MODEL {node.weight.model!r}: {exc}") from None
    relation = normalize(node.head.atoms[0].relation)
    key = variables[relation].columns[0].name
    records = node.weight.records or ""
    cols = relation_columns(con, records)
    if cols is None:
        raise CatalogError(f"{what}: WEIGHT MODEL ... ON {records}: no table or view '{records}' holds the records")
    have = {c.name.lower() for c in cols}
    missing = [c for c in [key, *model_fields(data)] if c.lower() not in have]
    if missing:
        raise CatalogError(f"{what}: records '{records}' have no column {missing[0]!r}: pair model {name!r} version "
                           f"{version} compares {model_fields(data)}, keyed by '{relation}'s key column {key!r}")
