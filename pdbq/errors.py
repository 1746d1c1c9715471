"""The error hierarchy: every error pdbq raises on bad input is a `PdbqError`.

Messages name the offending object; where a name was misspelled they suggest near matches;
parse errors carry the 1-based line and column and show the line with a caret under the token.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "PdbqError",
    "ParseError",
    "CatalogError",
    "GroundingError",
    "EvidenceError",
    "InferenceError",
    "LearningError",
    "TimeLimitError",
    "OptionError",
    "SchemaVersionError",
    "suggest",
    "caret_excerpt",
]


def suggest(name: str, candidates: Iterable[str], *, limit: int = 3) -> str:
    """Return ``" Did you mean 'x'?"`` (or ``'x' or 'y'``) for near matches, else ``""``.

    >>> suggest("tweet", ["tweets", "movies"])
    " Did you mean 'tweets'?"
    """
    pool = sorted({str(c) for c in candidates})
    by_lower = {c.lower(): c for c in pool}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=limit, cutoff=0.6)
    if not close:
        return ""
    quoted = [f"'{by_lower[c]}'" for c in close]
    if len(quoted) == 1:
        return f" Did you mean {quoted[0]}?"
    return f" Did you mean {', '.join(quoted[:-1])} or {quoted[-1]}?"


def caret_excerpt(text: str, line: int, col: int, width: int = 1) -> str:
    """The 1-based ``line`` of ``text`` with a caret line under columns ``col .. col+width-1``."""
    lines = text.splitlines() or [""]
    line = min(max(line, 1), len(lines))
    src = lines[line - 1].expandtabs(1)
    col = min(max(col, 1), len(src) + 1)
    width = max(1, width)
    return f"{src}\n{' ' * (col - 1)}{'^' * width}"


class PdbqError(Exception):
    """Root of every error pdbq raises for bad input or an impossible request."""


class ParseError(PdbqError):
    """A statement that does not parse. ``line`` and ``col`` are 1-based (col: start of the token)."""

    def __init__(self, message: str, *, line: int, col: int, text: str | None = None, width: int = 1):
        self.reason = message
        self.line = line
        self.col = col
        self.text = text
        detail = f"{message} (line {line}, column {col})"
        if text is not None:
            detail += "\n" + caret_excerpt(text, line, col, width)
        super().__init__(detail)


class CatalogError(PdbqError):
    """A definition that names something unknown, clashes with an existing name, or is unsafe."""


class GroundingError(PdbqError):
    """A rule that cannot be grounded (for example, more groundings than ``max_groundings``)."""


class EvidenceError(PdbqError):
    """Evidence that conflicts with itself, names no variable, or lies outside the domain."""


class InferenceError(PdbqError):
    """An inference request that cannot be carried out as asked (e.g. exact beyond its budget)."""


class LearningError(InferenceError):
    """LEARN WEIGHTS cannot run as asked: no evidence, no learnable weight, a holdout that leaves
    nothing to learn from, divergence. The previous weights are kept."""


class TimeLimitError(InferenceError):
    """A query's ``time_limit`` ran out before sampling could start (while grounding or building
    its graph). ``stage`` names what was running, ``elapsed`` the seconds the query had taken. The
    interrupted stage was rolled back: the database is as it was (stages that had finished stay
    committed and are reused by the next query)."""

    def __init__(self, message: str, *, stage: str = "", elapsed: float = 0.0):
        self.stage = stage
        self.elapsed = elapsed
        super().__init__(message)


class OptionError(PdbqError):
    """An unknown option or an option value of the wrong type or range."""


class SchemaVersionError(PdbqError):
    """A database file written by a newer pdbq (its catalog schema is newer than this library)."""


class CorefInputError(PdbqError):
    """Bad input to a coreference model: ids, fields, blocking, gold table or pair arrays."""
