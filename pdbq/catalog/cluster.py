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

from pdbq.catalog.names import normalize
from pdbq.errors import CatalogError
from pdbq.language.nodes import CreateRule, CreateVariable, DomainKind, FactorFunction, HeadKind, WeightKind

__all__ = ["check_cluster_variable", "check_cluster_rule", "is_cluster"]


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
