"""Mixing analysis from seed 004 (De Sa et al., "Rapidly mixing Gibbs sampling for a class of
factor graphs using hierarchy width"): hierarchical templates, hierarchy width, maximum factor
weight, Theorem 2's mixing bound, and warnings about LINEAR semantics. docs/semantics.md explains
what each number means and the choices made.

- `analyze_template(rule)`: Definitions 5–6 for one rule (`TemplateAnalysis`);
- `analyze_graph(graph)`: the ground level on a `FactorGraph` (`GraphAnalysis`);
- `analyze(obj, rule=None, query=None)`: either, or both, as one frozen `Analysis`;
- `semantics_warnings(graph, rule_names)`: Theorem 1 warnings for query answers.

>>> from pdbq.graph.builder import GraphBuilder
>>> from pdbq.language.nodes import FactorFunction
>>> b = GraphBuilder(); x = b.add_variables(9); w = b.add_weight(1.0)
>>> for a, c in zip(x, x[1:]):
...     _ = b.add_factor(FactorFunction.EQUAL, [a, c], weight=w)
>>> a = analyze(b.build())             # a path of 9 variables: Lemma 1 gives ceil(log2 9) = 4
>>> a.hierarchy_width, a.hierarchy_width_bounds, a.max_degree, a.max_factor_weight
(4, (4, 4), 2, 2.0)
"""

from __future__ import annotations

import importlib
from collections.abc import Collection
from dataclasses import dataclass

from pdbq.analysis.advice import DEFAULT_VOTE_THRESHOLD, semantics_warnings
from pdbq.analysis.ground import DEFAULT_EXACT_MAX_EDGES, GraphAnalysis, analyze_graph
from pdbq.analysis.hierarchy import DEFAULT_STATE_LIMIT, hierarchy_width
from pdbq.analysis.template import TemplateAnalysis, analyze_template
from pdbq.errors import PdbqError
from pdbq.graph.layout import FactorGraph
from pdbq.language.nodes import CreateRule

__all__ = [
    "Analysis",
    "AnalysisError",
    "GraphAnalysis",
    "TemplateAnalysis",
    "analyze",
    "analyze_graph",
    "analyze_template",
    "hierarchy_width",
    "semantics_warnings",
    "DEFAULT_VOTE_THRESHOLD",
]


class AnalysisError(PdbqError):
    """An analysis that cannot be made (unknown rule, no query engine, wrong argument)."""


@dataclass(frozen=True)
class Analysis:
    """The answer of `analyze`: template-level fields are None without a rule, ground-level
    fields None without a graph."""

    hierarchical: bool | None  # Definition 6 (template)
    hierarchy_depth: int | None  # Definition 5 (template)
    hierarchy_width: int | None  # Definition 3, exact (ground); None when only bounds are known
    hierarchy_width_bounds: tuple[int, int] | None  # (lower, upper) (ground)
    max_degree: int | None  # Statement 3's lower bound (ground)
    max_factor_weight: float | None  # Definition 4 (ground)
    mixing_bound: float | None  # Theorem 2 (ground); None also when it overflows a float
    template: TemplateAnalysis | None = None
    graph: GraphAnalysis | None = None
    warnings: tuple[str, ...] = ()


def _combine(template: TemplateAnalysis | None, ground: GraphAnalysis | None, warnings: list[str]) -> Analysis:
    return Analysis(
        hierarchical=template.hierarchical if template else None,
        hierarchy_depth=template.hierarchy_depth if template else None,
        hierarchy_width=ground.hierarchy_width if ground else None,
        hierarchy_width_bounds=ground.hierarchy_width_bounds if ground else None,
        max_degree=ground.max_degree if ground else None,
        max_factor_weight=ground.max_factor_weight if ground else None,
        mixing_bound=ground.mixing_bound if ground else None,
        template=template,
        graph=ground,
        warnings=tuple(warnings),
    )


def _is_database(obj: object) -> bool:
    try:
        database = importlib.import_module("pdbq.api.database")
    except ModuleNotFoundError:
        return False
    return isinstance(obj, database.Database)


def analyze(
    obj: object,
    rule: str | CreateRule | None = None,
    query: str | None = None,
    *,
    graph: FactorGraph | None = None,
    random_relations: Collection[str] | None = None,
    exact_limit: int = DEFAULT_STATE_LIMIT,
    exact_max_edges: int = DEFAULT_EXACT_MAX_EDGES,
) -> Analysis:
    """Analyse a rule, a factor graph, or both.

    - ``analyze(graph)``: the ground level of a `FactorGraph`, with the LINEAR-semantics warnings;
    - ``analyze(create_rule_node)`` or ``analyze(graph, rule=create_rule_node)``: the template level
      (``random_relations`` names the variable relations; None counts every atom);
    - ``analyze(db, rule="name", graph=...)``: the rule from ``db.catalog`` (its variable relations
      known), plus the ground level of ``graph`` — the rule's grounding — when given. When the rule
      passes Lemma 7's premises the grounding's hierarchy width is at most 1, which bounds it;
    - ``analyze(db, query=sql)``: needs the query engine's pruned graph (``pdbq.api.query.query_graph``);
      raises AnalysisError until that exists.
    """
    if isinstance(obj, FactorGraph):
        if graph is not None:
            raise AnalysisError("pass the factor graph once: analyze(graph) or analyze(db, graph=graph)")
        graph, obj = obj, None
    if isinstance(obj, CreateRule):
        if rule is not None:
            raise AnalysisError("pass the rule once: analyze(rule_node) or analyze(graph, rule=rule_node)")
        rule, obj = obj, None
    template = None
    if obj is not None and not _is_database(obj):
        raise AnalysisError(f"analyze() takes a FactorGraph, a CreateRule or a pdbq Database, not {type(obj).__name__}")
    if query is not None:
        if obj is None:
            raise AnalysisError("query analysis needs the database: analyze(db, query=...)")
        try:
            engine = importlib.import_module("pdbq.api.query")
        except ModuleNotFoundError:
            engine = None
        query_plan = getattr(engine, "query_plan", None)
        if query_plan is None:
            raise AnalysisError("query analysis needs the query engine's pruned graph (pdbq.api.query.query_plan), "
                                "which this build does not have; analyze the grounded graph instead")
        if graph is not None:
            raise AnalysisError("pass either query= or graph=, not both")
        plan = query_plan(obj, query)
        graph = plan.graph
        query_warnings = engine.semantics_warnings_of(plan, obj.duckdb)
    if isinstance(rule, str):
        if obj is None:
            raise AnalysisError(f"rule '{rule}' is looked up in a database: analyze(db, rule='{rule}')")
        node = obj.catalog.rule(rule)  # CatalogError with suggestions when unknown
        if random_relations is None:
            random_relations = tuple(obj.catalog.variables())
        rule = node
    if rule is not None:
        if not isinstance(rule, CreateRule):
            raise AnalysisError(f"rule must be a rule name or a CreateRule, not {type(rule).__name__}")
        template = analyze_template(rule, random_relations)
    ground = None
    warnings: list[str] = []
    if graph is not None:
        e = 1 if (template is not None and template.lemma7 and query is None) else None
        ground = analyze_graph(graph, exact_limit=exact_limit, exact_max_edges=exact_max_edges, template_factors=e)
        if query is not None:
            warnings = query_warnings
        else:
            names = None
            if template is not None:
                names = {int(w): template.rule for w in set(graph.weight.tolist())}
            warnings = semantics_warnings(graph, names)
    if template is None and ground is None:
        raise AnalysisError("nothing to analyse: give a factor graph, a rule, or a query")
    return _combine(template, ground, warnings)
