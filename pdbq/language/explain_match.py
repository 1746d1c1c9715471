"""``EXPLAIN MATCH relation [(key, key), ...]``: the stored pair model's explanation of a DOMAIN
CLUSTER relation's candidate pairs, as rows (docs/coreference.md). Parsed at the token level,
like IMPORT/EXPORT UAI: it is no SQL query, so DuckDB never sees it.

Keys are constants (numbers, negative numbers, strings), kept as SQL literal text; the relation's
key type reads them when the statement runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot.tokens import Token, TokenType

from pdbq.language.nodes import ExplainMatch

__all__ = ["USAGE", "find_explain_match"]

USAGE = "expected EXPLAIN MATCH relation [(key, key), ...]"
_NAMES = (TokenType.VAR, TokenType.IDENTIFIER)


def _word(tok: Token) -> str:
    return tok.text.upper() if tok.token_type != TokenType.STRING else ""


def _constant(t: list[Token], i: int) -> tuple[str, int] | None:
    """(SQL literal text, next index) of the constant at t[i]; None when there is none."""
    if i < len(t) and t[i].token_type == TokenType.STRING:
        return "'" + t[i].text.replace("'", "''") + "'", i + 1
    if i < len(t) and t[i].token_type == TokenType.NUMBER:
        return t[i].text, i + 1
    if i + 1 < len(t) and t[i].token_type == TokenType.DASH and t[i + 1].token_type == TokenType.NUMBER:
        return "-" + t[i + 1].text, i + 2
    return None


def find_explain_match(tokens: Sequence[Token], text: str = "") -> ExplainMatch | tuple[str, Token] | None:
    """The EXPLAIN MATCH statement ``tokens`` form; (message, offending token) for one that starts
    like it but is malformed; None for anything else (EXPLAIN SELECT ... is the query's)."""
    if len(tokens) < 2 or _word(tokens[0]) != "EXPLAIN" or _word(tokens[1]) != "MATCH":
        return None
    t = [x for x in tokens[2:] if x.token_type != TokenType.SEMICOLON]
    if not t or t[0].token_type not in _NAMES:
        return (f"{USAGE}: the name of a DOMAIN CLUSTER relation after EXPLAIN MATCH", t[0] if t else tokens[1])
    relation = t[0].text.lower()
    pairs: list[tuple[str, str]] = []
    i = 1
    while i < len(t):
        if pairs and t[i].token_type == TokenType.COMMA:
            i += 1
        start = t[i] if i < len(t) else t[-1]
        if i >= len(t) or t[i].token_type != TokenType.L_PAREN:
            return (f"{USAGE}: after the relation, pairs of keys such as (17, 18)", start)
        left = _constant(t, i + 1)
        right = _constant(t, left[1] + 1) if left and left[1] < len(t) and t[left[1]].token_type == TokenType.COMMA else None
        if left is None or right is None or right[1] >= len(t) or t[right[1]].token_type != TokenType.R_PAREN:
            return (f"{USAGE}: a pair is two constant keys in parentheses, e.g. (17, 18)", start)
        pairs.append((left[0], right[0]))
        i = right[1] + 1
    return ExplainMatch(relation=relation, pairs=tuple(pairs), text=text)
