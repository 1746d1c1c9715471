"""Statements around a probabilistic query, and the UAI statements, recognised from tokens.

``CREATE [OR REPLACE] [TEMP] TABLE t AS <query>``, ``INSERT INTO t [(cols)] <query>`` and
``COPY (<query>) TO 'file' (...)`` whose ``<query>`` uses PROB/DIST/MAP/STDERR (or GIVEN/USING),
or is an ``EXPLAIN MATCH`` statement, become `SaveAnswer`: the inner query is parsed like any probabilistic query, the statement
around it by sqlglot with the query replaced by ``SELECT * FROM __pdbq_answer__``.
``CREATE VIEW`` over such a query is refused (`view_error`): a DuckDB view is re-evaluated by
DuckDB, which cannot run pdbq's inference, and a silently materialised "view" would go stale.

``IMPORT UAI 'file.uai' AS name [EVIDENCE 'file.evid']`` and
``EXPORT UAI name TO 'file.uai' [EVIDENCE 'file.evid']`` are read here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot.tokens import Token, TokenType

from pdbq.language.dialect import looks_probabilistic

__all__ = ["Wrapper", "find_wrapper", "is_explain_match", "UaiStatement", "find_uai", "VIEW_ADVICE"]

_OPEN = {TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE}
_CLOSE = {TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE}
_QUERY = {TokenType.SELECT, TokenType.WITH, TokenType.FROM}

VIEW_ADVICE = (
    "a view cannot hold a probabilistic query: DuckDB re-evaluates views itself and cannot run "
    "PROB/DIST/MAP/STDERR. Save the answers with CREATE TABLE name AS SELECT ... (run it again to "
    "refresh them), or define a live view with pdbq's SQL functions (registered by pdbq.connect and the "
    "pdbq shell on a database file; elsewhere call pdbq.register(con)): "
    "CREATE VIEW v AS SELECT key, pdbq_prob('relation', key) FROM ..."
)


@dataclass(frozen=True)
class Wrapper:
    """``kind`` ("CREATE TABLE", "CREATE VIEW", "INSERT", "COPY") and the inner query's token range."""

    kind: str
    start: int  # index of the inner query's first token
    end: int  # index just past its last token


def _depth0(tokens: Sequence[Token], begin: int):
    depth = 0
    for i in range(begin, len(tokens)):
        tt = tokens[i].token_type
        if tt in _OPEN:
            depth += 1
            if depth == 1:
                yield i, tokens[i]
            continue
        if tt in _CLOSE:
            depth -= 1
            continue
        if depth == 0:
            yield i, tokens[i]


def _matching(tokens: Sequence[Token], open_index: int) -> int:
    depth = 0
    for i in range(open_index, len(tokens)):
        tt = tokens[i].token_type
        if tt in _OPEN:
            depth += 1
        elif tt in _CLOSE:
            depth -= 1
            if depth == 0:
                return i
    return -1


def _is_query_start(tokens: Sequence[Token], i: int) -> bool:
    # a loop, not recursion: a thousand nested parentheses are valid SQL
    while tokens[i].token_type == TokenType.L_PAREN and i + 1 < len(tokens):
        i += 1
    return tokens[i].token_type in _QUERY or is_explain_match(tokens, i)


def is_explain_match(tokens: Sequence[Token], i: int) -> bool:
    """Whether ``EXPLAIN MATCH`` starts at tokens[i] (its rows can be saved like a query's)."""
    return (i + 1 < len(tokens) and _word(tokens[i]) == "EXPLAIN" and _word(tokens[i + 1]) == "MATCH")


def find_wrapper(tokens: Sequence[Token]) -> Wrapper | None:
    """The wrapper statement ``tokens`` form around a probabilistic query, else None."""
    if len(tokens) < 3:
        return None
    first = tokens[0].token_type
    found: Wrapper | None = None
    if first == TokenType.CREATE:
        kind = None
        for i, tok in _depth0(tokens, 1):
            if kind is None:
                if tok.token_type == TokenType.TABLE:
                    kind = "CREATE TABLE"
                elif tok.token_type == TokenType.VIEW:
                    kind = "CREATE VIEW"
                elif tok.token_type in (TokenType.OR, TokenType.REPLACE, TokenType.TEMPORARY) or tok.text.upper() in (
                    "OR", "REPLACE", "TEMP", "TEMPORARY", "MATERIALIZED"
                ):
                    continue
                else:
                    return None
            elif tok.token_type == TokenType.ALIAS and i + 1 < len(tokens) and _is_query_start(tokens, i + 1):
                found = Wrapper(kind, i + 1, len(tokens))
                break
    elif first == TokenType.INSERT:
        into = False
        for i, tok in _depth0(tokens, 1):
            if tok.token_type == TokenType.INTO:
                into = True
            elif into and _is_query_start(tokens, i):
                found = Wrapper("INSERT", i, len(tokens))
                break
    elif first == TokenType.COPY and tokens[1].token_type == TokenType.L_PAREN and _is_query_start(tokens, 1):
        close = _matching(tokens, 1)
        if close > 2:
            found = Wrapper("COPY", 2, close)
    if found is None:
        return None
    inner = found.start
    while tokens[inner].token_type == TokenType.L_PAREN and inner + 1 < found.end:
        inner += 1
    if not (is_explain_match(tokens, inner) or looks_probabilistic(tokens[found.start : found.end])):
        return None
    # `AS (SELECT ... GIVEN ...)`: the parentheses stay in the outer statement
    while (tokens[found.start].token_type == TokenType.L_PAREN
           and _matching(tokens, found.start) == found.end - 1 and found.end - found.start > 2):
        found = Wrapper(found.kind, found.start + 1, found.end - 1)
    return found


@dataclass(frozen=True)
class UaiStatement:
    kind: str  # "IMPORT" | "EXPORT"
    path: str
    name: str
    evidence: str | None


def _word(tok: Token) -> str:
    return tok.text.upper() if tok.token_type == TokenType.VAR else ""


def find_uai(tokens: Sequence[Token]) -> UaiStatement | str | None:
    """The IMPORT/EXPORT UAI statement ``tokens`` form; a message saying what is wrong with one
    that starts like it; None for anything else (e.g. DuckDB's IMPORT DATABASE)."""
    if len(tokens) < 2 or _word(tokens[0]) not in ("IMPORT", "EXPORT") or _word(tokens[1]) != "UAI":
        return None
    kind = _word(tokens[0])
    t = list(tokens[2:])
    usage = (
        "expected IMPORT UAI 'file.uai' AS name [EVIDENCE 'file.evid']" if kind == "IMPORT"
        else "expected EXPORT UAI name TO 'file.uai' [EVIDENCE 'file.evid']"
    )

    def is_name(tok: Token) -> bool:
        return tok.token_type in (TokenType.VAR, TokenType.IDENTIFIER) or (tok.text.isidentifier() and tok.token_type != TokenType.STRING)

    evidence = None
    if len(t) >= 2 and _word(t[-2]) == "EVIDENCE" and t[-1].token_type == TokenType.STRING:
        evidence = t[-1].text
        t = t[:-2]
    if kind == "IMPORT":
        if len(t) == 3 and t[0].token_type == TokenType.STRING and t[1].token_type == TokenType.ALIAS and is_name(t[2]):
            return UaiStatement(kind, t[0].text, t[2].text, evidence)
    elif len(t) == 3 and is_name(t[0]) and _word(t[1]) == "TO" and t[2].token_type == TokenType.STRING:
        return UaiStatement(kind, t[2].text, t[0].text, evidence)
    return usage
