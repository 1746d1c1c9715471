"""A cluster relation's grounding kept between queries while its inputs are unchanged.

Grounding a DOMAIN CLUSTER relation (`pdbq.coref.ground.design`) joins its candidate pairs and
scores them: seconds at a few thousand mentions, repeated by every query of the relation (a
query with a time limit spent it all on grounding before any pass). The grounding is kept per
database and relation under a key of everything it read: the definitions (the relation, its
rules, ``max_pairs``), and a fingerprint of the rows of the relation's FROM, of every table or
view its rules read, and of the learned weights (`pdbq.grounding.fingerprint`: one statement
that reads each input once, far cheaper than the pair join). A query whose key matches reuses
it. Rules weighted by a stored pair model (``WEIGHT MODEL``) and inputs outside the current
schema are not keyed: those relations are grounded on every query, as before.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

import sqlglot.expressions as exp

from pdbq.catalog.weights import LEARNING_TABLES, has_learning_schema
from pdbq.coref.ground import cluster_rules
from pdbq.grounding.compile import compile_rule, observed_columns
from pdbq.grounding.fingerprint import combine, definition_hash, fingerprint_many
from pdbq.grounding.store import var_table
from pdbq.language.nodes import CreateRule, CreateVariable, WeightKind

__all__ = ["input_key", "keep_design", "kept_design"]

_KEPT: weakref.WeakKeyDictionary[Any, dict[str, tuple[str, Any]]] = weakref.WeakKeyDictionary()
_PER_DATABASE = 4  # relations kept per database (the latest used)


def input_key(con, v: CreateVariable, variables: Mapping[str, CreateVariable], rules: Mapping[str, CreateRule],
              max_pairs: int) -> str | None:
    """The key of what grounding ``v`` reads (None: not keyed, ground it every time)."""
    crules = cluster_rules(v.name, rules)
    if any(r.weight.kind is WeightKind.MODEL for r in crules):
        return None
    lookup = observed_columns(con)
    skip = {var_table(name) for name in variables}
    items: list[tuple[str, str]] = [("query", v.source)]
    for rule in crules:
        for t in compile_rule(rule, variables, lookup).select.find_all(exp.Table):
            if t.name in skip:
                continue
            if t.args.get("db") is not None or t.args.get("catalog") is not None:
                return None
            items.append(("relation", t.name))
    if has_learning_schema(con):
        items += [("relation", name) for name in LEARNING_TABLES]
    prints = fingerprint_many(con, items)
    return combine([definition_hash((v, tuple(crules), max_pairs))] + [prints[i] for i in dict.fromkeys(items)])


def kept_design(db: Any, relation: str, key: str | None) -> Any:
    """The grounding kept for ``relation`` under ``key``, or None."""
    if key is None:
        return None
    try:
        hit = _KEPT.get(db, {}).get(relation)
    except TypeError:  # a session that cannot be weakly referenced keeps nothing
        return None
    return hit[1] if hit is not None and hit[0] == key else None


def keep_design(db: Any, relation: str, key: str | None, design: Any) -> None:
    if key is None:
        return
    try:
        kept = _KEPT.setdefault(db, {})
    except TypeError:
        return
    kept.pop(relation, None)
    kept[relation] = (key, design)
    while len(kept) > _PER_DATABASE:
        kept.pop(next(iter(kept)))
