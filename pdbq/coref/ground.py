"""Ground the rules over one `DOMAIN CLUSTER` relation into a `PairGraph` (docs/coreference.md).

A cluster relation is never synced into the factor store (its value is not a categorical
label): its keys are numbered here 0..n-1 in key order, in a temporary map table, and every
rule `c(a) = c(b) :- body` is compiled by the ordinary rule compiler with that map standing for
the relation. Each grounding is one candidate pair with its weight (the rule's constant, its
`= expr`, or a learnable weight times its feature: `pdbq.coref.design`); several rules or groundings of one pair add up; a pair of a key with itself is
dropped (it is within-entity in every clustering, a constant). The groundings are counted
before any is fetched and refused above `max_pairs`, like grounding's own size check.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from sqlglot import exp

from pdbq.catalog.cluster import is_cluster
from pdbq.catalog.names import normalize
from pdbq.coref.design import ClusterDesign, _mention_map, cluster_design
from pdbq.coref.layout import PairGraph
from pdbq.errors import GroundingError
from pdbq.grounding.store import ident, sql_text
from pdbq.language.nodes import CreateRule, CreateVariable

__all__ = ["cluster_rules", "ground_cluster", "design", "map_table", "drop_map", "mention_map"]


def map_table(relation: str) -> str:
    return f"__pdbq_cluster_map__{relation}"


def drop_map(con, relation: str) -> None:
    """Drop ``relation``'s mention map (`map_table`): a statement that grounded it drops it when
    it ends, failed or not, so no internal table outlives the statement."""
    con.execute(sql_text(exp.Drop(tables=[exp.Table(this=ident(map_table(relation)))], kind="TABLE", exists=True)))


def cluster_rules(relation: str, rules: Mapping[str, CreateRule]) -> list[CreateRule]:
    return [r for r in rules.values() if any(normalize(a.relation) == relation for a in r.head.atoms)]


def ground_cluster(
    con, v: CreateVariable, variables: Mapping[str, CreateVariable], rules: Mapping[str, CreateRule], max_pairs: int
) -> tuple[np.ndarray, PairGraph, int]:
    """(keys in mention order, the pair graph, groundings read) for cluster relation `v`; a
    learnable weight scores with its latest learned value (`pdbq.coref.design`)."""
    d = design(con, v, variables, rules, max_pairs)
    return np.asarray(d.keys), d.graph(), d.count


def mention_map(con, v: CreateVariable) -> np.ndarray:
    """The mention map of cluster relation `v` made again in `map_table` (a kept grounding's
    query needs it); its keys in mention order."""
    return np.asarray(_mention_map(con, v, map_table(v.name)))


def design(con, v: CreateVariable, variables: Mapping[str, CreateVariable], rules: Mapping[str, CreateRule],
           max_pairs: int) -> ClusterDesign:
    """The `ClusterDesign` of cluster relation `v` (its mention map left in `map_table`)."""
    if not is_cluster(v):
        raise GroundingError(f"variable relation '{v.name}' is not a DOMAIN CLUSTER relation")
    return cluster_design(con, v, variables, cluster_rules(v.name, rules), max_pairs, map_table(v.name))
