"""Mixing analysis from seed 004 (De Sa et al., "Rapidly mixing Gibbs sampling for a class of
factor graphs using hierarchy width"): hierarchical templates, hierarchy width, maximum factor
weight, Theorem 2's mixing bound, and warnings about LINEAR semantics. docs/semantics.md explains
what each number means and the choices made.

- `analyze_template(rule)`: Definitions 5–6 for one rule (`TemplateAnalysis`);
- `analyze_graph(graph)`: the ground level on a `FactorGraph` (`GraphAnalysis`);
- `analyze(graph_or_rule, rule=None, graph=None)`: either, or both, as one frozen `Analysis`
  (`pdbq.analyze(db, rule=..., query=...)` does the same over a database's catalog and queries);
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
    """An analysis that cannot be made (unknown rule, wrong argument)."""


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


def analyze(
    obj: FactorGraph | CreateRule | None = None,
    rule: CreateRule | None = None,
    *,
    graph: FactorGraph | None = None,
    random_relations: Collection[str] | None = None,
    query_warnings: Collection[str] | None = None,
    exact_limit: int = DEFAULT_STATE_LIMIT,
    exact_max_edges: int = DEFAULT_EXACT_MAX_EDGES,
) -> Analysis:
    """Analyse a rule, a factor graph, or both.

    - ``analyze(graph)``: the ground level of a `FactorGraph`, with the LINEAR-semantics warnings;
    - ``analyze(create_rule_node)`` or ``analyze(graph, rule=create_rule_node)``: the template level
      (``random_relations`` names the variable relations; None counts every atom). When the rule
      passes Lemma 7's premises and ``graph`` is its grounding, the hierarchy width is at most 1;
    - ``query_warnings``: the warnings of a query's plan, which replace the graph's own (the graph
      is then a query's pruned graph, not one rule's grounding).

    Over a database (a rule by name, a query's graph) use `pdbq.analyze(db, rule=..., query=...)`.
    """
    if isinstance(obj, FactorGraph):
        if graph is not None:
            raise AnalysisError("pass the factor graph once: analyze(graph) or analyze(rule=..., graph=graph)")
        graph, obj = obj, None
    if isinstance(obj, CreateRule):
        if rule is not None:
            raise AnalysisError("pass the rule once: analyze(rule_node) or analyze(graph, rule=rule_node)")
        rule, obj = obj, None
    if obj is not None:
        hint = " (over a database: pdbq.analyze(db, rule=..., query=...))" if hasattr(obj, "catalog") else ""
        raise AnalysisError(f"analyze() takes a FactorGraph or a CreateRule, not {type(obj).__name__}{hint}")
    if isinstance(rule, str):
        raise AnalysisError(f"rule '{rule}' is looked up in a database: pdbq.analyze(db, rule='{rule}')")
    template = None
    if rule is not None:
        if not isinstance(rule, CreateRule):
            raise AnalysisError(f"rule must be a CreateRule, not {type(rule).__name__}")
        template = analyze_template(rule, random_relations)
    ground = None
    warnings: list[str] = []
    if graph is not None:
        from_query = query_warnings is not None
        e = 1 if (template is not None and template.lemma7 and not from_query) else None
        ground = analyze_graph(graph, exact_limit=exact_limit, exact_max_edges=exact_max_edges, template_factors=e)
        if from_query:
            warnings = list(query_warnings)
        else:
            names = None
            if template is not None:
                names = {int(w): template.rule for w in set(graph.weight.tolist())}
            warnings = semantics_warnings(graph, names)
    if template is None and ground is None:
        raise AnalysisError("nothing to analyse: give a factor graph, a rule, or a query")
    return _combine(template, ground, warnings)
