"""Definitions as text: the normalised fields SHOW lists, and a canonical statement for nodes
built in Python (whose ``text`` is empty) so that every stored definition can be re-parsed.

>>> from pdbq.language.nodes import Atom, Term, TermKind
>>> atom_sql(Atom("is_popular", (Term(TermKind.SYMBOL, "m", head=True),)))
'is_popular(^m)'
"""

from __future__ import annotations

from sqlglot import exp

from pdbq.language.nodes import (
    Atom,
    Column,
    CreateRule,
    CreateVariable,
    Domain,
    DomainKind,
    Head,
    HeadKind,
    Semantics,
    Term,
    TermKind,
    Weight,
    WeightKind,
)

__all__ = [
    "term_sql",
    "atom_sql",
    "head_sql",
    "rule_sql",
    "weight_sql",
    "domain_sql",
    "keys_sql",
    "statement_sql",
]


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def term_sql(term: Term) -> str:
    if term.kind is TermKind.WILDCARD:
        return "_"
    if term.kind is TermKind.SYMBOL:
        return ("^" if term.head else "") + term.text
    return term.text


def atom_sql(atom: Atom) -> str:
    inner = ", ".join(term_sql(t) for t in atom.terms)
    return f"{'NOT ' if atom.negated else ''}{atom.relation}({inner})"


def head_sql(head: Head) -> str:
    if head.kind is HeadKind.COMPARE:
        return f"{atom_sql(head.atoms[0])} = {head.value}"
    if head.kind is HeadKind.EQUAL:
        return " = ".join(atom_sql(a) for a in head.atoms)
    return atom_sql(head.atoms[0])


def rule_sql(rule: CreateRule) -> str:
    """``head :- atom, ..., condition, ...``"""
    parts = [atom_sql(a) for a in rule.body] + list(rule.conditions)
    return f"{head_sql(rule.head)} :- {', '.join(parts)}"


def weight_sql(weight: Weight) -> str:
    feature = f" * {weight.expression}" if weight.expression is not None else ""
    if weight.kind is WeightKind.LEARNABLE:
        return "?" + feature
    if weight.kind is WeightKind.TIED:
        return f"?({', '.join(weight.symbols)})" + feature
    if weight.kind is WeightKind.EXPRESSION:
        return f"= {weight.expression}"
    if weight.kind is WeightKind.MODEL:
        return f"MODEL {_quote(weight.model or '')} ON {exp.to_identifier(weight.records).sql(dialect='duckdb')}"
    return repr(float(weight.value))


def domain_sql(domain: Domain) -> str:
    if domain.kind is DomainKind.VALUES:
        return "(" + ", ".join(_quote(v) for v in domain.values) + ")"
    if domain.kind is DomainKind.CATEGORICAL:
        return f"CATEGORICAL({domain.size})"
    if domain.kind is DomainKind.CLUSTER:
        return "CLUSTER"
    return "BOOLEAN"


def keys_sql(columns: tuple[Column, ...]) -> str:
    return ", ".join(f"{c.name} {c.type}" for c in columns)


def statement_sql(node: CreateVariable | CreateRule) -> str:
    """A canonical CREATE statement for ``node`` (used when ``node.text`` is empty)."""
    replace = "OR REPLACE " if node.or_replace else ""
    if isinstance(node, CreateVariable):
        text = (
            f"CREATE {replace}VARIABLE {node.name}({keys_sql(node.columns)}) "
            f"DOMAIN {domain_sql(node.domain)} FROM ({node.source})"
        )
        if node.evidence is not None:
            text += f" EVIDENCE ({node.evidence})"
        return text
    weight = node.weight
    clauses = ""
    if not (weight.kind is WeightKind.CONSTANT and weight.value == 1.0):
        clauses += f" WEIGHT {weight_sql(weight)}"
    if node.semantics is not Semantics.LINEAR:
        clauses += f" SEMANTICS {node.semantics.name}"
    clauses += f" FUNCTION {node.function.name}"
    return f"CREATE {replace}RULE {node.name}{clauses} AS {rule_sql(node)}"
