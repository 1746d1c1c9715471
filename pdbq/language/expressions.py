"""sqlglot expression classes for pdbq's statements (the dialect's parse trees).

The dialect (`pdbq.language.dialect`) builds these; `pdbq.language.parser` turns them into the
frozen dataclasses of `pdbq.language.nodes`. Nothing outside the language package should need them.
"""

from __future__ import annotations

import sqlglot.expressions as exp

ESTIMATE_KINDS = ("PROB", "DIST", "MAP", "STDERR")
METHODS = ("AUTO", "QAM", "GIBBS", "EXACT", "ANNEAL")
SEMANTICS = ("LINEAR", "LOGICAL", "RATIO")
FUNCTIONS = ("VOTE", "IMPLY", "IMPLY_MLN", "AND", "OR", "EQUAL", "ISTRUE")


class PdbqEstimate(exp.Expression, exp.Func):
    """PROB(v), PROB(v = value), DIST(v), MAP(v), STDERR(v): `this` the alias identifier,
    `expression` the optional value literal, `kind` one of ESTIMATE_KINDS; `other` the second
    alias of PROB(a = b) / STDERR(a = b) (two aliases of one DOMAIN CLUSTER relation)."""

    arg_types = {"this": True, "expression": False, "kind": True, "other": False}


class PdbqGivenAtom(exp.Expression):
    """GIVEN rel(key, ...) = value"""

    arg_types = {"this": True, "expressions": True, "expression": True}


class PdbqGivenQuery(exp.Expression):
    """GIVEN (select keys..., value) AS rel; `text` is the query as written."""

    arg_types = {"this": True, "expression": True, "text": False}


class PdbqOption(exp.Expression):
    """name = value inside WITH (...)."""

    arg_types = {"this": True, "expression": True}


class PdbqQuery(exp.Expression):
    """A probabilistic query: `this` the DuckDB query (estimates inside), then its trailing clauses.

    `with_` exists because sqlglot attaches CTEs to whatever node a statement parser returns."""

    arg_types = {
        "this": True,
        "given": False,
        "method": False,
        "options": False,
        "explain": False,
        "with_": False,
    }


class PdbqDomain(exp.Expression):
    """`this`: BOOLEAN | VALUES | CATEGORICAL; `expressions`: value literals; `size`: k literal."""

    arg_types = {"this": True, "expressions": False, "size": False}


class PdbqCreateVariable(exp.Expression):
    arg_types = {
        "this": True,
        "expressions": True,  # ColumnDef
        "domain": True,
        "source": True,
        "evidence": False,
        "replace": False,
        "source_text": False,
        "evidence_text": False,
    }


class PdbqWildcard(exp.Expression):
    """`_` in a body atom."""

    arg_types = {}


class PdbqHeadSymbol(exp.Expression):
    """`^sym` in a head atom; `this` the Identifier."""

    arg_types = {"this": True}


class PdbqAtom(exp.Expression):
    """rel(term, ...), optionally negated; terms are Column / Literal-ish / PdbqWildcard / PdbqHeadSymbol."""

    arg_types = {"this": True, "expressions": False, "negated": False}


class PdbqHead(exp.Expression):
    """`this` the first atom; `expression` the second atom (EQUAL) or the constant (COMPARE)."""

    arg_types = {"this": True, "expression": False}


class PdbqWeight(exp.Expression):
    """`this`: CONSTANT | LEARNABLE | TIED | EXPRESSION | MODEL; `expression` the number, the
    expression or (MODEL) the stored pair model's name; `expressions` the tied symbols or (MODEL)
    the records table."""

    arg_types = {"this": True, "expression": False, "expressions": False}


class PdbqCreateRule(exp.Expression):
    arg_types = {
        "this": True,
        "head": True,
        "expressions": True,  # body items: PdbqAtom or a condition expression
        "weight": False,
        "semantics": False,
        "function": False,
        "replace": False,
    }


class PdbqDrop(exp.Expression):
    arg_types = {"this": True, "kind": True, "exists": False}


class PdbqShow(exp.Expression):
    arg_types = {"this": True}


class PdbqLearn(exp.Expression):
    """LEARN WEIGHTS [FOR rule, ...] [USING method] [WITH (...)]: `expressions` the rule names,
    `method` the method word, `options` PdbqOption nodes."""

    arg_types = {"expressions": False, "method": False, "options": False}


LEARN_METHODS = ("SGD", "SAMPLERANK")


__all__ = [
    "ESTIMATE_KINDS",
    "METHODS",
    "SEMANTICS",
    "FUNCTIONS",
    "PdbqEstimate",
    "PdbqGivenAtom",
    "PdbqGivenQuery",
    "PdbqOption",
    "PdbqQuery",
    "PdbqDomain",
    "PdbqCreateVariable",
    "PdbqWildcard",
    "PdbqHeadSymbol",
    "PdbqAtom",
    "PdbqHead",
    "PdbqWeight",
    "PdbqCreateRule",
    "PdbqDrop",
    "PdbqShow",
    "PdbqLearn",
    "LEARN_METHODS",
]
