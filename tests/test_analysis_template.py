"""Template-level analysis (seed 004, Definitions 5 and 6) and `analyze` on rules and databases."""

from __future__ import annotations

import math

import pytest

import pdbq
from pdbq.analysis import AnalysisError, analyze, analyze_template
from pdbq.language.nodes import Atom, CreateRule, Head, HeadKind, Semantics, Term, TermKind
from pdbq.language.parser import parse_statement


def sym(name, hat=False):
    return Term(TermKind.SYMBOL, name, hat)


def rule(name, head, body, heads, semantics=Semantics.LOGICAL):
    return CreateRule(name, Head(HeadKind.ATOM, (head,)), tuple(body), semantics=semantics, head_symbols=heads)


# (7): φ(A(x̂, ŷ, z), B(x̂, ŷ), Q(x̂, ŷ))   (8): φ(A(z), B(x̂), Q(x̂, y))
EX7 = rule("ex7", Atom("q", (sym("x", True), sym("y", True))),
           [Atom("a", (sym("x"), sym("y"), sym("z"))), Atom("b", (sym("x"), sym("y")))], ("x", "y"))
EX8 = rule("ex8", Atom("q", (sym("x", True), sym("y"))), [Atom("a", (sym("z"),)), Atom("b", (sym("x"),))], ("x",))


def test_example_7_is_hierarchical_with_depth_2():
    t = analyze_template(EX7)
    assert (t.hierarchy_depth, t.hierarchical_symbols, t.hierarchical) == (2, ("x", "y"), True)
    assert t.terms == ("q", "a", "b") and t.lemma7


def test_example_8_is_not_hierarchical_with_depth_0():
    t = analyze_template(EX8)
    assert (t.hierarchy_depth, t.hierarchical_symbols, t.hierarchical) == (0, (), False)
    assert "not hierarchical" in t.describe() and "x" in t.describe()


def test_examples_parsed_from_pdbq_sql_agree():
    ex7 = parse_statement("CREATE RULE ex7 WEIGHT 1 SEMANTICS LOGICAL AS q(^x, ^y) :- a(x, y, z), b(x, y);")
    ex8 = parse_statement("CREATE RULE ex8 WEIGHT 1 SEMANTICS LOGICAL AS q(^x, y) :- a(z), b(x);")
    assert analyze_template(ex7).hierarchy_depth == 2 and analyze_template(ex7).hierarchical
    assert analyze_template(ex8).hierarchy_depth == 0 and not analyze_template(ex8).hierarchical


def test_depth_is_a_common_prefix_not_a_common_set():
    # same symbols, different order: the first symbols differ, depth 0
    r = rule("swap", Atom("q", (sym("x", True), sym("y", True))), [Atom("a", (sym("y"), sym("x")))], ("x", "y"))
    assert analyze_template(r).hierarchy_depth == 0
    # one hierarchical head symbol is not enough when another head symbol is not
    r = rule("half", Atom("q", (sym("x", True), sym("y", True))), [Atom("a", (sym("x"), sym("z")))], ("x", "y"))
    t = analyze_template(r)
    assert t.hierarchy_depth == 1 and not t.hierarchical


def test_voting_templates_are_hierarchical():
    # Q() :- T(x): no head symbol, so hierarchical at depth 0 (Lemma 7 then needs grouped semantics)
    vote = rule("t_votes", Atom("q", ()), [Atom("t", (sym("x"),))], ())
    t = analyze_template(vote)
    assert t.hierarchical and t.hierarchy_depth == 0 and t.lemma7
    linear = rule("t_votes", Atom("q", ()), [Atom("t", (sym("x"),))], (), Semantics.LINEAR)
    t = analyze_template(linear)
    assert t.hierarchical and not t.one_factor_per_head and not t.lemma7
    assert "no polynomial-mixing guarantee" in t.describe()
    # a LINEAR rule may ground duplicated input rows as parallel factors (bag semantics)
    prior = rule("t_prior", Atom("t", (sym("x", True),)), [Atom("p", (sym("x"), sym("w")))], ("x",), Semantics.LINEAR)
    t = analyze_template(prior, random_relations={"t"})
    assert t.hierarchical and t.hierarchy_depth == 1 and not t.lemma7


def test_observed_atoms_are_not_terms():
    fans = parse_statement(
        "CREATE RULE fans_vote WEIGHT 0.8 SEMANTICS RATIO AS is_popular(^m) :- tweets(m, p), is_fan(p), p <> 'bot';")
    every = analyze_template(fans)  # the paper's literal reading: every atom a term
    assert every.terms == ("is_popular", "tweets", "is_fan") and not every.hierarchical
    known = analyze_template(fans, random_relations={"is_popular", "is_fan"})
    assert known.terms == ("is_popular", "is_fan") and known.ignored == ("tweets",)
    assert known.hierarchy_depth == 0 and not known.hierarchical  # is_fan(p) starts with p
    only_head = analyze_template(fans, random_relations={"is_popular"})
    assert only_head.hierarchical and only_head.hierarchy_depth == 1


def test_constants_are_skipped_and_wildcards_break_the_prefix():
    const = Term(TermKind.CONSTANT, "'PER'")
    r = rule("c", Atom("tag", (sym("t", True),)), [Atom("w", (const, sym("t"), sym("w")))], ("t",))
    assert analyze_template(r).hierarchy_depth == 1
    wild = Term(TermKind.WILDCARD)
    r = rule("w", Atom("tag", (sym("t", True),)), [Atom("w", (wild,)), Atom("v", (wild,))], ("t",))
    assert analyze_template(r).hierarchy_depth == 0


def test_analyze_rule_node_gives_template_fields_only():
    a = analyze(EX7)
    assert (a.hierarchical, a.hierarchy_depth) == (True, 2)
    assert a.hierarchy_width is None and a.graph is None and a.template.rule == "ex7"
    with pytest.raises(AnalysisError, match="once"):
        analyze(EX7, rule=EX8)


def test_analyze_database_rule_and_query(movies_model):
    a = pdbq.analyze(movies_model, rule="fans_vote")
    # the catalog knows is_fan is random and tweets observed: is_fan(p) breaks the prefix
    assert a.template.terms == ("is_popular", "is_fan") and a.hierarchical is False
    with pytest.raises(Exception, match="fans_vote"):  # CatalogError with a suggestion
        pdbq.analyze(movies_model, rule="fans_vot")
    # the query's pruned graph: three RATIO head groups (one per movie); bart's vote is evidence,
    # lisa votes for Twilight and Avengers, so one component holds two hyperedges
    q = pdbq.analyze(movies_model, query="SELECT m.movie, PROB(m) FROM is_popular AS m")
    assert (q.hierarchy_width, q.max_degree, q.graph.n_groups) == (2, 2, 3)
    assert q.max_factor_weight == pytest.approx(2 * 0.8 * math.log(2))  # RATIO over one vote
    assert q.hierarchical is None and q.warnings == ()
