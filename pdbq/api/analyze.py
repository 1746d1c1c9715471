"""`pdbq.analyze(db, rule=..., query=...)`: the mixing analysis of `pdbq.analysis` over a database —
a rule looked up in its catalog, a query's pruned graph with the warnings its answers carry.

>>> import pdbq
>>> db = pdbq.connect()
>>> db.execute("CREATE TABLE t AS SELECT * FROM range(4) r(i)")
>>> db.execute("CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t)")
>>> db.execute("CREATE RULE r WEIGHT 1.0 FUNCTION ISTRUE AS x(i) :- t(i)")
>>> analyze(db, rule="r").hierarchical
True
"""

from __future__ import annotations

from collections.abc import Collection

from pdbq.analysis import Analysis, AnalysisError
from pdbq.analysis import analyze as analyze_objects
from pdbq.api.database import Database
from pdbq.graph.layout import FactorGraph
from pdbq.language.nodes import CreateRule
from pdbq.planning.plan import query_plan, semantics_warnings_of

__all__ = ["analyze"]


def analyze(
    obj: Database | FactorGraph | CreateRule,
    rule: str | CreateRule | None = None,
    query: str | None = None,
    *,
    graph: FactorGraph | None = None,
    random_relations: Collection[str] | None = None,
    **limits: int,
) -> Analysis:
    """Analyse a rule, a factor graph, a query, or a rule with its grounding.

    - ``analyze(db, rule="name")``: the rule from ``db.catalog`` (its variable relations known),
      plus the ground level of ``graph`` when given (the rule's grounding);
    - ``analyze(db, query=sql)``: the query's pruned graph, with the warnings its answers carry
      (naming the rule and the head variable's key);
    - ``analyze(graph)``, ``analyze(rule_node)``: as `pdbq.analysis.analyze`.

    ``limits``: ``exact_limit`` and ``exact_max_edges`` of `pdbq.analysis.analyze_graph`.
    """
    if not isinstance(obj, Database):
        if query is not None:
            raise AnalysisError("query analysis needs the database: analyze(db, query=...)")
        return analyze_objects(obj, rule, graph=graph, random_relations=random_relations, **limits)
    db = obj
    query_warnings = None
    if query is not None:
        if graph is not None:
            raise AnalysisError("pass either query= or graph=, not both")
        plan = query_plan(db, query)
        graph = plan.graph
        query_warnings = semantics_warnings_of(plan, db.duckdb)
    if isinstance(rule, str):
        node = db.catalog.rule(rule)  # CatalogError with suggestions when unknown
        if random_relations is None:
            random_relations = tuple(db.catalog.variables())
        rule = node
    return analyze_objects(rule, graph=graph, random_relations=random_relations, query_warnings=query_warnings, **limits)
