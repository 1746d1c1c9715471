"""Long IN lists of literals, read without putting every literal through sqlglot.

A query's ``WHERE x.i IN (1, 2, …)`` of 20,000 or 300,000 literals took sqlglot seconds to
tokenize, parse, copy and generate again (a node per literal, copied with each rewrite of the
tree) before a time limit could act. A list of at least `MIN_ITEMS` integers, or of at least
`MIN_ITEMS` plain strings, is found in the text by one regular-expression pass and replaced by a
placeholder name; the tokenizer then sees one name (its tokens are moved back to their offsets in
the text as written), the parser one column.

In a probabilistic query the placeholder becomes ``IN (SELECT unnest(from_json('[…]',
'["BIGINT"]')))``: one string constant, which DuckDB reads in milliseconds. Its members are typed
(BIGINT or VARCHAR) where DuckDB casts literals to the other side's type, so a list compared
with a column of another family (strings with a number column) is refused by DuckDB's binder:
the parser keeps the same query with the list's text as written (``ProbQuery.as_written``), which
the planner answers instead. Elsewhere (rules, variables) the placeholder becomes the list's text
as written.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import sqlglot.expressions as exp
from sqlglot.tokens import TokenType

__all__ = ["MIN_ITEMS", "LongList", "Masked", "bind_long_lists", "mask_long_lists", "restore_offsets", "verified"]

#: Lists shorter than this go through sqlglot as before (a few hundred literals parse quickly).
MIN_ITEMS = 200
PREFIX = "__pdbq_inlist_"
#: The alias of the bound list's one column: marks the subquery as a bound list.
COLUMN = "__pdbq_inlist_value"
_INT64 = 2**63 - 1

# Where a list may start. A match inside a string or a comment is not an IN: the tokenizer's check
# (`verified`) finds such a misreading, and the text is then tokenized as written.
_CANDIDATE = re.compile(r"\bIN\s*\(\s*", re.IGNORECASE)
_STRINGS = re.compile(r"'(?:[^'\\]|'')*'(?:\s*,\s*'(?:[^'\\]|'')*')*")
_INT_CHARS = re.compile(r"[0-9 \t\r\n,-]+")
_CLOSE = re.compile(r"\s*\)")
_STR = re.compile(r"'((?:[^'\\]|'')*)'")


@dataclass(frozen=True)
class LongList:
    """One long list: ``kind`` ``"int"`` or ``"str"``, its members as a JSON array, and the text
    between its parentheses as written."""

    kind: str
    values_json: str
    text: str
    count: int


def _ints(body: str) -> LongList | None:
    if not _INT_CHARS.fullmatch(body):
        return None
    try:  # int() takes exactly one integer literal between blanks: 1, -2, 007 (not 1 - 2, - 1, 1 2)
        values = [int(p) for p in body.split(",")]
    except ValueError:
        return None
    if max(values) > _INT64 or min(values) < -_INT64:
        return None  # HUGEINT literals: left to sqlglot and DuckDB as written
    return LongList("int", json.dumps(values), body, len(values))


def _strings(body: str) -> LongList:
    values = [m.group(1).replace("''", "'") for m in _STR.finditer(body)]
    return LongList("str", json.dumps(values, ensure_ascii=False), body, len(values))


def _body(text: str, start: int) -> str | None:
    """The members of the list opening at ``start``, as written (None: no long literal list)."""
    if text.startswith("'", start):
        m = _STRINGS.match(text, start)
        return m.group(0) if m and _CLOSE.match(text, m.end()) else None
    close = text.find(")", start)
    return None if close < 0 else text[start:close].rstrip()


@dataclass(frozen=True)
class Masked:
    """A text with each long list's members replaced by a placeholder name: ``text``, the lists
    by name, and ``cuts``: (offset in ``text`` from which on, characters to add) to map an
    offset of ``text`` back to the text as written."""

    text: str
    lists: dict[str, LongList]
    cuts: tuple[tuple[int, int], ...]


def mask_long_lists(text: str) -> Masked:
    """``text`` with each long list's members replaced by a placeholder name (no long list: the
    text as it is)."""
    if len(text) < 2 * MIN_ITEMS:
        return Masked(text, {}, ())
    parts: list[str] = []
    lists: dict[str, LongList] = {}
    cuts: list[tuple[int, int]] = []
    last = removed = 0
    for m in _CANDIDATE.finditer(text):
        start = m.end()
        if start < last:
            continue
        body = _body(text, start)
        if body is None or body.count(",") + 1 < MIN_ITEMS:
            continue
        found = _strings(body) if body.startswith("'") else _ints(body)
        if found is None:
            continue
        end = start + len(body)
        name = f"{PREFIX}{len(lists)}"
        parts += [text[last:start], name]
        after_name = start - removed + len(name)  # in the masked text
        removed += (end - start) - len(name)
        cuts.append((after_name, removed))
        last = end
        lists[name] = found
    if not lists:
        return Masked(text, {}, ())
    parts.append(text[last:])
    return Masked("".join(parts), lists, tuple(cuts))


def restore_offsets(tokens, masked: Masked, text: str) -> None:
    """Move the tokens of ``masked.text`` to their offsets (and lines and columns) in ``text``."""
    cuts, k, shift = masked.cuts, 0, 0
    line, line_start, at = 1, 0, 0
    for tok in tokens:
        while k < len(cuts) and tok.start >= cuts[k][0]:
            shift = cuts[k][1]
            k += 1
        if not shift:
            continue
        tok.start += shift
        tok.end += shift
        lines = text.count("\n", at, tok.start)
        if lines:
            line += lines
            line_start = text.rfind("\n", at, tok.start) + 1
        at = tok.start
        tok.line, tok.col = line, tok.end - line_start + 1


def verified(tokens, lists: dict[str, LongList]) -> bool:
    """True when every placeholder is a name token right inside ``IN (`` … ``)``: the scan read
    the text as the tokenizer does (a list it took for code inside a comment or a string is not)."""
    seen = 0
    for i, tok in enumerate(tokens):
        if tok.text not in lists:
            continue
        if not (tok.token_type == TokenType.VAR and 2 <= i < len(tokens) - 1
                and tokens[i - 1].token_type == TokenType.L_PAREN and tokens[i - 2].token_type == TokenType.IN
                and tokens[i + 1].token_type == TokenType.R_PAREN):
            return False
        seen += 1
    return seen == len(lists)


def _bound_query(found: LongList) -> exp.Expression:
    kind = '["BIGINT"]' if found.kind == "int" else '["VARCHAR"]'
    members = exp.Unnest(expressions=[exp.Anonymous(this="from_json", expressions=[
        exp.Literal.string(found.values_json), exp.Literal.string(kind)])])
    return exp.Subquery(this=exp.select(exp.alias_(members, COLUMN)))


def bind_long_lists(tree: exp.Expression, lists: dict[str, LongList], *, bound: bool) -> exp.Expression:
    """Each placeholder of ``tree`` replaced: by the bound subquery (``bound``, a probabilistic
    query) or by the list's text as written."""
    if not lists:
        return tree
    for node in list(tree.find_all(exp.In)):
        items = node.args.get("expressions") or []
        if len(items) != 1 or not isinstance(items[0], exp.Column) or items[0].table or items[0].name not in lists:
            continue
        found = lists[items[0].name]
        if bound:
            node.set("expressions", None)
            node.set("query", _bound_query(found))
        else:
            node.set("expressions", [exp.Var(this=found.text)])
    return tree
