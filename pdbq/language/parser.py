"""Parse pdbq scripts into the typed statement nodes of `pdbq.language.nodes`.

A script is split at top-level ';' (`split.split_script`); each statement is classified from its
tokens. pdbq's statements are parsed with `PdbqDialect` and converted into frozen dataclasses;
every other statement becomes `PassThrough` with its original text, which never goes through
sqlglot's parser (DuckDB gets exactly what the user wrote).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
from collections.abc import Callable, Iterator

import sqlglot
import sqlglot.expressions as exp
from sqlglot.errors import ErrorLevel, TokenError
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.tokens import Token, TokenType

from pdbq.errors import ParseError, suggest
from pdbq.language import expressions as px
from pdbq.language.dialect import (
    PARSE_CHECK,
    QUERY_START_TOKENS,
    PdbqDialect,
    looks_probabilistic,
)
from pdbq.language.explain_match import find_explain_match
from pdbq.language.long_lists import bind_long_lists
from pdbq.language.nodes import (
    ANSWER_SOURCE,
    AlterRelation,
    Atom,
    Column,
    CreateRule,
    CreateVariable,
    Domain,
    DomainKind,
    Drop,
    DropRelation,
    Estimate,
    EstimateKind,
    ExplainMatch,
    ExportUai,
    FactorFunction,
    GivenAtom,
    GivenQuery,
    Head,
    HeadKind,
    ImportUai,
    LearnMethod,
    LearnWeights,
    Method,
    OptionValue,
    PassThrough,
    ProbQuery,
    SaveAnswer,
    SaveKind,
    Semantics,
    Show,
    Statement,
    Term,
    TermKind,
    Weight,
    WeightKind,
)
from pdbq.language.params import Params, bind_parameters
from pdbq.language.split import Chunk, position, split_script
from pdbq.language.wrappers import VIEW_ADVICE, UaiStatement, find_uai, find_wrapper

__all__ = ["PLACEHOLDER_PREFIX", "parse_checked", "parse_script", "parse_statement"]

#: Estimate i of a ProbQuery is the column ``<alias>.__pdbq_est_<i>`` in its ``select``.
PLACEHOLDER_PREFIX = "__pdbq_est_"

_DIALECT = PdbqDialect()


@contextlib.contextmanager
def parse_checked(check: Callable[[], None] | None) -> Iterator[None]:
    """Parse inside this block with ``check()`` (a statement's cancel check, which raises) called
    every few thousand tokens."""
    token = PARSE_CHECK.set(check)
    try:
        yield
    finally:
        PARSE_CHECK.reset(token)


def parse_script(text: str, params: Params | None = None) -> list[Statement]:
    """Every statement of a script, in order; empty statements are skipped.

    ``params`` (a list for ``?``/``$1``, a dict for ``$name``) are bound as literals into pdbq
    statements (`pdbq.language.params`); a script with parameters must hold one statement.
    Plain SQL keeps its placeholders: DuckDB binds them.

    >>> [type(s).__name__ for s in parse_script("SHOW RULES; SELECT 1")]
    ['Show', 'PassThrough']
    """
    chunks = split_script(text)
    if params is not None and len(chunks) > 1:
        extra = chunks[1]
        raise ParseError(
            f"parameters bind to one statement; this text holds {len(chunks)}", line=extra.line, col=extra.col, text=text
        )
    return [_parse_chunk(text, chunk, params) for chunk in chunks]


def parse_statement(text: str, params: Params | None = None) -> Statement:
    """Exactly one statement (a trailing ';' is allowed), else `ParseError`.

    >>> parse_statement("DROP RULE IF EXISTS fans_vote;")
    Drop(kind='RULE', name='fans_vote', if_exists=True)
    """
    chunks = split_script(text)
    if not chunks:
        raise ParseError("expected a statement, found none", line=1, col=1, text=text)
    if len(chunks) > 1:
        extra = chunks[1]
        raise ParseError(
            f"expected one statement, found {len(chunks)}", line=extra.line, col=extra.col, text=text
        )
    return _parse_chunk(text, chunks[0], params)


# ----------------------------------------------------------------------------- classification


def _is_pdbq(tokens: tuple[Token, ...]) -> bool:
    first = tokens[0]
    tt = first.token_type

    def word(i: int) -> str:
        return tokens[i].text.upper() if i < len(tokens) and tokens[i].token_type == TokenType.VAR else ""

    if tt == TokenType.CREATE:
        i = 3 if len(tokens) > 2 and tokens[1].text.upper() == "OR" and tokens[2].text.upper() == "REPLACE" else 1
        return word(i) in ("VARIABLE", "RULE")
    if tt == TokenType.DROP:
        return word(1) in ("VARIABLE", "RULE")
    if tt == TokenType.SHOW:
        return word(1) in ("VARIABLES", "RULES", "WEIGHTS", "CALIBRATION")
    if tt == TokenType.VAR and first.text.upper() == "LEARN":
        return True
    if tt == TokenType.VAR and first.text.upper() == "EXPLAIN":
        return looks_probabilistic(tokens[1:])
    if tt in QUERY_START_TOKENS:
        return looks_probabilistic(tokens)
    return False


def _relation_drop(chunk: Chunk) -> DropRelation | None:
    """DuckDB's DROP TABLE / DROP VIEW of relations in the current schema, for pdbq's dependency
    check; None for anything else (other DROPs, or one sqlglot cannot read: DuckDB judges it)."""
    tokens = chunk.tokens
    if len(tokens) < 3 or tokens[0].token_type != TokenType.DROP or tokens[1].text.upper() not in ("TABLE", "VIEW"):
        return None
    try:
        tree = sqlglot.parse_one(chunk.sql, read="duckdb")
    except sqlglot.errors.SqlglotError:
        return None
    tables = [t for t in tree.args.get("expressions") or tree.args.get("tables") or [] if isinstance(t, exp.Table)]
    if not isinstance(tree, exp.Drop) or not tables or any(t.args.get("catalog") for t in tables):
        return None
    names = tuple(t.name.lower() for t in tables if not t.db or t.db.lower() == "main")
    if not names:
        return None
    return DropRelation(sql=chunk.sql, kind=str(tree.args.get("kind")).upper(), names=names,
                        if_exists=bool(tree.args.get("exists")), cascade=bool(tree.args.get("cascade")),
                        line=chunk.line, col=chunk.col)


def _relation_change(chunk: Chunk) -> AlterRelation | None:
    """``ALTER TABLE|VIEW`` or ``CREATE OR REPLACE TABLE|VIEW`` of a relation in the current schema,
    for pdbq's check of what reads it; None for anything else (DuckDB judges it)."""
    tokens = chunk.tokens
    if len(tokens) < 3 or tokens[0].token_type not in (TokenType.ALTER, TokenType.CREATE):
        return None
    if tokens[0].token_type == TokenType.CREATE and tokens[1].text.upper() != "OR":
        return None
    try:
        tree = sqlglot.parse_one(chunk.sql, read="duckdb")
    except sqlglot.errors.SqlglotError:
        return None
    if isinstance(tree, exp.Create) and not tree.args.get("replace"):
        return None
    kind = str(tree.args.get("kind") or "").upper()
    target = tree.this.this if isinstance(tree, exp.Create) and isinstance(tree.this, exp.Schema) else tree.this
    if not isinstance(tree, (exp.Alter, exp.Create)) or kind not in ("TABLE", "VIEW") or not isinstance(target, exp.Table):
        return None
    if target.args.get("catalog") or (target.db and target.db.lower() != "main"):
        return None
    return AlterRelation(sql=chunk.sql, kind=kind, name=target.name.lower(), line=chunk.line, col=chunk.col)


def _parse_chunk(text: str, chunk: Chunk, params: Params | None = None) -> Statement:
    try:
        return _parse_one(text, chunk, params)
    except RecursionError:  # any deep nesting the token scans and sqlglot meet
        raise ParseError("statement is nested too deeply", line=chunk.line, col=chunk.col, text=text) from None


def _parse_one(text: str, chunk: Chunk, params: Params | None = None) -> Statement:
    uai = find_uai(chunk.tokens)
    if uai is not None:
        return _uai(uai, text, chunk, params)
    match = find_explain_match(chunk.tokens, chunk.sql)
    if isinstance(match, tuple):
        message, tok = match
        raise _error_at(message, text, tok.start, max(1, tok.end - tok.start + 1))
    if match is not None:
        if params is not None:
            raise ParseError("EXPLAIN MATCH takes no parameters", line=chunk.line, col=chunk.col, text=text)
        return match
    words = [t.text.upper() for t in chunk.tokens]
    if words in (["SHOW", "TABLES"], ["SHOW", "ALL", "TABLES"]):
        # DuckDB's listing without pdbq's own storage tables (`Database` filters them)
        return Show(kind=" ".join(words[1:]))
    wrapper = find_wrapper(chunk.tokens)
    if wrapper is not None:
        return _save_answer(wrapper, text, chunk, params)
    if not _is_pdbq(chunk.tokens):
        return (_relation_drop(chunk) or _relation_change(chunk)
                or PassThrough(sql=chunk.sql, line=chunk.line, col=chunk.col))
    _check_numbers(text, chunk)
    tree = _run_parser(text, chunk)
    if chunk.lists and isinstance(tree, px.PdbqQuery):
        written = _finish(bind_long_lists(tree.copy(), chunk.lists, bound=False), text, chunk, params)
        stmt = _finish(bind_long_lists(tree, chunk.lists, bound=True), text, chunk, params)
        return dataclasses.replace(stmt, as_written=written)
    return _finish(bind_long_lists(tree, chunk.lists, bound=False), text, chunk, params)


def _finish(tree: exp.Expr, text: str, chunk: Chunk, params: Params | None) -> Statement:
    if params is not None:
        tree = bind_parameters(tree, params, where=chunk.sql.split(None, 1)[0].upper())
    elif isinstance(tree, (px.PdbqQuery, px.PdbqLearn)):
        _check_unbound(tree, text, chunk)
    return _convert(tree, text, chunk)


def _check_unbound(tree: exp.Expr, text: str, chunk: Chunk) -> None:
    if tree.find(exp.Placeholder) is not None:
        raise ParseError(
            "the statement has parameters (?, $1, $name) but no values were given: db.execute(sql, [values])",
            line=chunk.line, col=chunk.col, text=text,
        )


def _uai(found: UaiStatement | str, text: str, chunk: Chunk, params: Params | None) -> Statement:
    if isinstance(found, str):
        raise ParseError(found, line=chunk.line, col=chunk.col, text=text)
    if params is not None:
        raise ParseError(f"{found.kind} UAI takes no parameters", line=chunk.line, col=chunk.col, text=text)
    if found.kind == "IMPORT":
        return ImportUai(path=found.path, name=found.name.lower(), evidence=found.evidence, text=chunk.sql)
    return ExportUai(name=found.name.lower(), path=found.path, evidence=found.evidence, text=chunk.sql)


def _save_answer(wrapper, text: str, chunk: Chunk, params: Params | None) -> SaveAnswer:
    tokens = chunk.tokens
    first, last = tokens[wrapper.start], tokens[wrapper.end - 1]
    if wrapper.kind == "CREATE VIEW":
        raise ParseError(VIEW_ADVICE, line=chunk.line, col=chunk.col, text=text, width=max(1, first.start - chunk.start))
    inner_text = text[first.start : last.end + 1]
    line, col = position(text, first.start)
    inner = Chunk(inner_text, first.start, line, col, tokens=tuple(tokens[wrapper.start : wrapper.end]), lists=chunk.lists)
    match = find_explain_match(inner.tokens, inner_text)
    if isinstance(match, tuple):
        raise _error_at(match[0], text, match[1].start, max(1, match[1].end - match[1].start + 1))
    if match is not None:
        if params is not None:
            raise ParseError("EXPLAIN MATCH takes no parameters", line=line, col=col, text=text)
        query: ProbQuery | ExplainMatch = match
    else:
        _check_numbers(text, inner)
        tree = _run_parser(text, inner)
        if not isinstance(tree, px.PdbqQuery) or tree.args.get("explain"):
            raise ParseError("expected a probabilistic SELECT here", line=line, col=col, text=text)

        def finish(tree: exp.Expr) -> ProbQuery:
            if params is not None:
                tree = bind_parameters(tree, params, where=wrapper.kind)
            else:
                _check_unbound(tree, text, inner)
            return _prob_query(tree, text, inner)

        if inner.lists:
            written = finish(bind_long_lists(tree.copy(), inner.lists, bound=False))
            query = dataclasses.replace(finish(bind_long_lists(tree, inner.lists, bound=True)), as_written=written)
        else:
            query = finish(tree)
    chunk_end = tokens[-1].end + 1
    # The statement as written with the query swapped for a constant stand-in (no user values are
    # pasted); sqlglot then parses it into the tree the answer is substituted into.
    outer_text = text[chunk.start : first.start] + f"SELECT * FROM {ANSWER_SOURCE}" + text[last.end + 1 : chunk_end]
    try:
        outer = sqlglot.parse_one(outer_text, dialect="duckdb")
    except RecursionError:
        raise ParseError("statement is nested too deeply", line=chunk.line, col=chunk.col, text=text) from None
    except (SqlglotParseError, TokenError):
        raise ParseError(
            f"cannot read the {wrapper.kind} statement around the probabilistic query", line=chunk.line, col=chunk.col, text=text
        ) from None
    if outer.find(exp.Placeholder) is not None:
        raise ParseError(
            f"parameters are only bound inside the probabilistic query of {wrapper.kind}", line=chunk.line, col=chunk.col, text=text
        )
    return SaveAnswer(SaveKind(wrapper.kind), query, outer.sql(dialect="duckdb"), text=chunk.sql, tree=outer)


def _check_numbers(text: str, chunk: Chunk) -> None:
    """A positioned ParseError for a number token Python cannot read (``1e``, ``180E``): sqlglot
    tokenizes them as numbers and the conversion would fail later with a bare ValueError."""
    for tok in chunk.tokens:
        if tok.token_type != TokenType.NUMBER:
            continue
        try:
            float(tok.text)
        except ValueError:
            line, col = position(text, tok.start)
            raise ParseError(
                f"'{tok.text}' is not a number (an exponent needs digits, as in 1e3)",
                line=line, col=col, text=text, width=len(tok.text),
            ) from None


def _run_parser(text: str, chunk: Chunk) -> exp.Expr:
    parser = _DIALECT.parser(error_level=ErrorLevel.IMMEDIATE)
    try:
        trees = parser.parse(list(chunk.tokens), text)
    except SqlglotParseError as e:
        raise _from_sqlglot(e, parser, text, chunk) from None
    except TokenError:
        raise ParseError("cannot read this statement", line=chunk.line, col=chunk.col, text=text) from None
    except RecursionError:
        raise ParseError("statement is nested too deeply", line=chunk.line, col=chunk.col, text=text) from None
    except (AttributeError, KeyError, IndexError, TypeError, ValueError) as e:
        # sqlglot's parser raises assorted internal errors on some malformed input; the user
        # still deserves a positioned ParseError rather than a traceback into sqlglot.
        raise ParseError(
            f"cannot parse this statement ({type(e).__name__} in the SQL parser)",
            line=chunk.line,
            col=chunk.col,
            text=text,
        ) from None
    if len(trees) != 1 or trees[0] is None:
        raise ParseError("cannot parse this statement", line=chunk.line, col=chunk.col, text=text)
    return trees[0]


# ----------------------------------------------------------------------------- error messages

_OPERATORS = {
    "EQ": "=",
    "NEQ": "<>",
    "GT": ">",
    "GTE": ">=",
    "LT": "<",
    "LTE": "<=",
    "Add": "+",
    "Sub": "-",
    "Mul": "*",
    "Div": "/",
    "And": "AND",
    "Or": "OR",
    "Like": "LIKE",
    "Is": "IS",
    "Pow": "^",
    "Mod": "%",
    "DPipe": "||",
}
_CLAUSES = {
    "Order": "ORDER BY",
    "Group": "GROUP BY",
    "Where": "WHERE",
    "Having": "HAVING",
    "From": "FROM",
    "Limit": "LIMIT",
    "Offset": "OFFSET",
    "Not": "NOT",
    "In": "IN",
}
_CLASS = re.compile(r"<class '(?:[\w]+\.)*(\w+)'>")
_REQUIRED = re.compile(r"Required keyword: '(\w+)' missing for (\w+)")


def _reword(description: str, token: Token | None, at_end: bool) -> str:
    msg = _CLASS.sub(r"\1", description)
    m = _REQUIRED.match(msg)
    if m:
        keyword, cls = m.groups()
        if cls in _OPERATORS:
            return f"expected a value after '{_OPERATORS[cls]}'"
        if cls in _CLAUSES:
            return f"expected an expression after {_CLAUSES[cls]}"
        return f"incomplete {cls.lower()} expression: its '{keyword}' part is missing"
    if msg.startswith("Invalid expression / Unexpected token"):
        if token is None or at_end:
            return "unexpected end of statement"
        return f"unexpected '{token.text}'"
    if msg.startswith("Expecting "):
        return f"expected '{msg[len('Expecting '):].strip()}'"
    if msg.startswith("Expected "):
        return "e" + msg[1:]
    return msg


def _from_sqlglot(e: SqlglotParseError, parser, text: str, chunk: Chunk) -> ParseError:
    token: Token | None = getattr(parser, "_pdbq_error_token", None)
    at_end = bool(getattr(parser, "_pdbq_error_at_end", False))
    description = (e.errors[0].get("description") if e.errors else None) or str(e)
    message = _reword(str(description), token, at_end)
    if token is None or not token.text and token.start == 0 and token.end == 0:
        return ParseError(message, line=chunk.line, col=chunk.col, text=text)
    if at_end:
        offset, width = token.end + 1, 1
    else:
        offset, width = token.start, max(1, min(token.end - token.start + 1, 40))
    line, col = position(text, offset)
    return ParseError(message, line=line, col=col, text=text, width=width)


def _error_at(message: str, text: str, offset: int, width: int = 1) -> ParseError:
    line, col = position(text, offset)
    return ParseError(message, line=line, col=col, text=text, width=width)


# ----------------------------------------------------------------------------- conversion


def _convert(tree: exp.Expr, text: str, chunk: Chunk) -> Statement:
    if isinstance(tree, px.PdbqCreateVariable):
        return _create_variable(tree, chunk)
    if isinstance(tree, px.PdbqCreateRule):
        return _create_rule(tree, chunk, text)
    if isinstance(tree, px.PdbqDrop):
        return Drop(kind=tree.args["kind"], name=tree.this.name, if_exists=bool(tree.args.get("exists")))
    if isinstance(tree, px.PdbqShow):
        return Show(kind=tree.this)
    if isinstance(tree, px.PdbqQuery):
        return _prob_query(tree, text, chunk)
    if isinstance(tree, px.PdbqLearn):
        return LearnWeights(
            rules=tuple(r.name for r in tree.expressions or ()),
            method=LearnMethod(tree.args.get("method") or "SGD"),
            options=tuple((o.this.name, _option_value(o.expression)) for o in tree.args.get("options") or ()),
            text=chunk.sql,
        )
    # The token-level classifier and the dialect disagree: a bug, but say where.
    raise ParseError("cannot parse this statement as a pdbq statement", line=chunk.line, col=chunk.col, text=text)


def _sql(node: exp.Expr) -> str:
    return node.sql(dialect=_DIALECT)


def _type_text(raw: str) -> str:
    return re.sub(r"\s*([(),])\s*", r"\1", " ".join(raw.split())).upper()


def _create_variable(tree: px.PdbqCreateVariable, chunk: Chunk) -> CreateVariable:
    columns = tuple(
        Column(name=cd.name.lower(), type=_type_text(cd.meta.get("type_text") or _sql(cd.args["kind"])))
        for cd in tree.expressions
    )
    dom = tree.args["domain"]
    kind = dom.this
    if kind == "BOOLEAN":
        domain = Domain(DomainKind.BOOLEAN, (), 2)
    elif kind == "VALUES":
        values = tuple(v.this for v in dom.expressions)
        domain = Domain(DomainKind.VALUES, values, len(values))
    elif kind == "CLUSTER":
        domain = Domain(DomainKind.CLUSTER, (), 0)
    else:
        domain = Domain(DomainKind.CATEGORICAL, (), int(dom.args["size"].this))
    return CreateVariable(
        name=tree.this.name,
        columns=columns,
        domain=domain,
        source=tree.args.get("source_text") or _sql(tree.args["source"]),
        evidence=tree.args.get("evidence_text") or (_sql(tree.args["evidence"]) if tree.args.get("evidence") else None),
        or_replace=bool(tree.args.get("replace")),
        text=chunk.sql,
    )


def _lower_columns(node: exp.Expr) -> exp.Expr:
    node = node.copy()
    for col in node.find_all(exp.Column):
        for part in col.parts:
            part.set("this", part.this.lower())
    return node


def _term(node: exp.Expr) -> Term:
    if isinstance(node, px.PdbqHeadSymbol):
        return Term(TermKind.SYMBOL, node.this.name.lower(), head=True)
    if isinstance(node, px.PdbqWildcard):
        return Term(TermKind.WILDCARD, "_")
    if isinstance(node, exp.Column):
        return Term(TermKind.SYMBOL, node.name.lower())
    return Term(TermKind.CONSTANT, _sql(node))


def _atom(node: px.PdbqAtom) -> Atom:
    return Atom(
        relation=node.this.name,
        terms=tuple(_term(t) for t in node.expressions),
        negated=bool(node.args.get("negated")),
    )


def _number(node: exp.Expr) -> float:
    if isinstance(node, exp.Neg):
        return -_number(node.this)
    return float(node.this)


def _weight_range_error(rule: str, chunk: Chunk, text: str) -> ParseError:
    """The constant after WEIGHT overflowed a double (``WEIGHT 1e400``): weights are finite."""
    tokens = chunk.tokens
    at = next((t for i, t in enumerate(tokens) if tokens[i - 1].text.upper() == "WEIGHT" and i), tokens[0])
    if at.token_type == TokenType.DASH:
        at = tokens[tokens.index(at) + 1]
    line, col = position(text, at.start)
    return ParseError(
        f"rule '{rule}': WEIGHT {at.text[:24]}{'...' if len(at.text) > 24 else ''} is beyond the range of a "
        "double (about ±1.8e308); a weight must be a finite number",
        line=line, col=col, text=text, width=len(at.text),
    )


def _create_rule(tree: px.PdbqCreateRule, chunk: Chunk, text: str) -> CreateRule:
    head_node = tree.args["head"]
    first = _atom(head_node.this)
    other = head_node.args.get("expression")
    if other is None:
        head = Head(HeadKind.ATOM, (first,))
    elif isinstance(other, px.PdbqAtom):
        head = Head(HeadKind.EQUAL, (first, _atom(other)))
    else:
        head = Head(HeadKind.COMPARE, (first,), value=_sql(other))

    marked: list[str] = []
    symbols: list[str] = []
    for atom in head.atoms:
        for term in atom.terms:
            if term.kind is TermKind.SYMBOL:
                if term.head and term.text not in marked:
                    marked.append(term.text)
                if term.text not in symbols:
                    symbols.append(term.text)

    body: list[Atom] = []
    conditions: list[str] = []
    for item in tree.expressions:
        if isinstance(item, px.PdbqAtom):
            body.append(_atom(item))
        else:
            conditions.append(_sql(_lower_columns(item)))

    weight_node = tree.args.get("weight")
    if weight_node is None:
        weight = Weight(WeightKind.CONSTANT, 1.0)
    elif weight_node.this == "CONSTANT":
        value = _number(weight_node.expression)
        if not math.isfinite(value):
            raise _weight_range_error(tree.this.name, chunk, text)
        weight = Weight(WeightKind.CONSTANT, value)
    elif weight_node.this in ("LEARNABLE", "TIED"):
        feature = weight_node.args.get("expression")
        weight = Weight(
            WeightKind(weight_node.this.lower()), 0.0,
            symbols=tuple(s.name.lower() for s in weight_node.expressions or ()),
            expression=None if feature is None else _sql(_lower_columns(feature)),
        )
    elif weight_node.this == "MODEL":
        weight = Weight(WeightKind.MODEL, 1.0, model=weight_node.expression.this,
                        records=weight_node.expressions[0].name)
    else:
        weight = Weight(WeightKind.EXPRESSION, 1.0, expression=_sql(_lower_columns(weight_node.expression)))

    function_name = tree.args.get("function") or ("EQUAL" if head.kind is HeadKind.EQUAL else "VOTE")
    return CreateRule(
        name=tree.this.name,
        head=head,
        body=tuple(body),
        conditions=tuple(conditions),
        weight=weight,
        semantics=Semantics[tree.args.get("semantics") or "LINEAR"],
        function=FactorFunction[function_name],
        head_symbols=tuple(marked or symbols),
        or_replace=bool(tree.args.get("replace")),
        text=chunk.sql,
    )


def _option_value(node: exp.Expr) -> OptionValue:
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Neg):
        value = _option_value(node.this)
        return -value  # type: ignore[operator]
    if node.is_string:
        return node.this
    raw = node.this
    try:
        return int(raw)
    except ValueError:
        return float(raw)


def _call_end(chunk: Chunk, start: int) -> int:
    """Offset just past the ')' closing the call that starts at ``start``."""
    tokens = chunk.tokens
    for i, tok in enumerate(tokens):
        if tok.start == start:
            depth = 0
            for tok2 in tokens[i + 1 :]:
                if tok2.token_type == TokenType.L_PAREN:
                    depth += 1
                elif tok2.token_type == TokenType.R_PAREN:
                    depth -= 1
                    if depth == 0:
                        return tok2.end + 1
            break
    return start


def _prob_query(tree: px.PdbqQuery, text: str, chunk: Chunk) -> ProbQuery:
    query = tree.this.copy()
    calls = sorted(query.find_all(px.PdbqEstimate), key=lambda n: n.meta.get("start", 0))

    # An aliased table is known only by its alias, as in DuckDB (the placeholder qualifies by it).
    in_scope = {t.alias_or_name.lower() for t in query.find_all(exp.Table)}
    in_scope |= {s.alias.lower() for s in query.find_all(exp.Subquery) if s.alias}

    estimates: list[Estimate] = []
    index: dict[tuple, int] = {}
    for call in calls:
        kind = call.args["kind"]
        alias = call.this.name.lower()
        value_node = call.args.get("expression")
        value = _sql(value_node) if value_node is not None else None
        other = call.args["other"].name.lower() if call.args.get("other") is not None else None
        start = call.meta.get("start", chunk.start)
        for name in (alias, other) if other is not None else (alias,):
            if name not in in_scope:
                hint = suggest(name, in_scope)
                shown = f"{kind}({alias} = {other})" if other is not None else f"{kind}({alias})"
                raise _error_at(
                    f"{shown}: no relation or alias '{name}' in the query's FROM.{hint}",
                    text,
                    start,
                    max(1, _call_end(chunk, start) - start),
                )
        if other == alias:
            raise _error_at(f"{kind}({alias} = {other}) compares an alias with itself; name two aliases of the "
                            "DOMAIN CLUSTER relation, e.g. FROM entity AS a JOIN entity AS b ON ...",
                            text, start, max(1, _call_end(chunk, start) - start))
        key = (kind, alias, value, other)
        if key not in index:
            index[key] = len(estimates)
            estimates.append(
                Estimate(EstimateKind(kind), alias, value, placeholder=f"{PLACEHOLDER_PREFIX}{len(estimates)}",
                         other=other)
            )
        placeholder = exp.column(estimates[index[key]].placeholder, table=alias)
        parent = call.parent
        if isinstance(parent, exp.Select) and call.arg_key == "expressions":
            # Name a bare estimate column as written, as DuckDB names a bare function call.
            written = text[start : _call_end(chunk, start)] or _sql(call)
            call.replace(exp.alias_(placeholder, written, quoted=True))
        else:
            call.replace(placeholder)

    given: list[GivenAtom | GivenQuery] = []
    for item in tree.args.get("given") or ():
        if isinstance(item, px.PdbqGivenAtom):
            given.append(
                GivenAtom(
                    relation=item.this.name,
                    keys=tuple(_sql(k) for k in item.expressions),
                    value=_sql(item.expression),
                )
            )
        else:
            given.append(GivenQuery(relation=item.this.name, query=item.args.get("text") or _sql(item.expression)))

    options = tuple((o.this.name, _option_value(o.expression)) for o in tree.args.get("options") or ())
    return ProbQuery(
        select=query.sql(dialect="duckdb"),
        estimates=tuple(estimates),
        given=tuple(given),
        method=Method[tree.args.get("method") or "AUTO"],
        options=options,
        explain=bool(tree.args.get("explain")),
        text=chunk.sql,
        tree=query,
    )
