"""Script splitting at top-level ';' by token offsets, and `statement_complete` for the shell.

Splitting uses sqlglot's tokenizer (DuckDB rules for strings, quoted identifiers, comments and
dollar-quoted strings), so a ';' inside any of them never splits. Each chunk is a slice of the
original text: DuckDB receives exactly what the user wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from pdbq.errors import ParseError
from pdbq.language.dialect import PdbqDialect
from pdbq.language.long_lists import LongList, mask_long_lists, restore_offsets, verified

__all__ = ["Chunk", "split_script", "statement_complete", "tokenize_script", "position"]


class _SplitTokenizer(PdbqDialect.Tokenizer):
    # No COMMAND swallowing (CALL, VACUUM, ...): every statement is tokenized fully, so token
    # offsets are exact and ';' inside a command's strings is still respected.
    COMMANDS: set = set()


@dataclass(frozen=True)
class Chunk:
    """One statement of a script: its text (no trailing ';', no surrounding whitespace or
    comments), its 0-based start offset in the script, and its 1-based line and column."""

    sql: str
    start: int
    line: int
    col: int
    tokens: tuple[Token, ...] = field(default=(), compare=False, repr=False)
    #: long IN lists covered by placeholder names in ``tokens`` (`pdbq.language.long_lists`)
    lists: Mapping[str, LongList] = field(default_factory=dict, compare=False, repr=False)


def position(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of a 0-based character offset in ``text``."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, col


_UNTERMINATED = (
    ("$", "unterminated dollar-quoted string"),
    ("'", "unterminated string"),
    ('"', "unterminated quoted identifier"),
    ("/*", "unterminated comment"),
    ("e'", "unterminated string"),
    ("E'", "unterminated string"),
)


def tokenize_script(text: str) -> list[Token]:
    """Tokens of a whole script with absolute offsets; `ParseError` (with line/col) when the text
    cannot be tokenized, e.g. an unterminated string."""
    tokenizer = _SplitTokenizer(dialect=PdbqDialect)
    try:
        return tokenizer.tokenize(text)
    except TokenError as e:
        core = getattr(tokenizer, "_core", None)
        offset = getattr(core, "_start", None)
        if not isinstance(offset, int):
            offset = getattr(e, "start", 0) or 0
        message = "cannot read the text here"
        rest = text[offset:]
        for prefix, what in _UNTERMINATED:
            if rest.startswith(prefix):
                message = what
                break
        line, col = position(text, offset)
        raise ParseError(message, line=line, col=col, text=text) from None
    except (RecursionError, ValueError, IndexError) as e:  # defensive: tokenizer internals
        raise ParseError(f"cannot read the text ({type(e).__name__})", line=1, col=1, text=text) from None


def split_script(text: str) -> list[Chunk]:
    """Split a script into statements at top-level ';'. Empty statements are skipped.

    >>> [c.sql for c in split_script("SELECT ';'; -- note\\nSELECT 2")]
    ["SELECT ';'", 'SELECT 2']
    """
    chunks: list[Chunk] = []
    current: list[Token] = []
    # long IN lists are cut out before tokenizing (offsets mapped back); chunks keep the text as written
    masked = mask_long_lists(text)
    tokens, lists = None, masked.lists
    if lists:
        try:
            tokens = tokenize_script(masked.text)
        except ParseError:  # said again, at its place, by the tokenizing of the text as written
            tokens = None
    if tokens is not None and verified(tokens, lists):
        restore_offsets(tokens, masked, text)
    else:
        tokens, lists = tokenize_script(text), {}
    for tok in tokens + [Token(TokenType.SEMICOLON, ";")]:
        if tok.token_type != TokenType.SEMICOLON:
            current.append(tok)
            continue
        if current:
            start = current[0].start
            end = current[-1].end + 1
            line, col = position(text, start)
            chunks.append(Chunk(text[start:end], start, line, col, tuple(current), lists))
        current = []
    return chunks


def statement_complete(text: str) -> bool:
    """True when ``text`` ends with a ';' outside strings and comments (trailing whitespace and
    comments ignored). An unterminated string or comment is simply incomplete.

    >>> statement_complete("SELECT 1;"), statement_complete("SELECT ';'"), statement_complete("SELECT 'a")
    (True, False, False)
    """
    try:
        tokens = tokenize_script(text)
    except ParseError:
        return False
    return bool(tokens) and tokens[-1].token_type == TokenType.SEMICOLON
