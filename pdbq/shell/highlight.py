"""Syntax highlighting for the shell: Pygments' SQL lexer plus pdbq's own keywords.

Pygments is optional (it is not a dependency of prompt_toolkit); without it the shell simply
does not colour its input. `prompt_lexer()` returns the prompt_toolkit lexer or ``None``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PDBQ_KEYWORDS", "SQL_KEYWORDS", "PdbqLexer", "prompt_lexer"]

# Words pdbq adds to DuckDB's SQL (multi-word statements are listed by their words).
PDBQ_KEYWORDS = (
    "VARIABLE", "VARIABLES", "RULE", "RULES", "DOMAIN", "BOOLEAN", "CATEGORICAL", "EVIDENCE", "WEIGHT",
    "SEMANTICS", "LINEAR", "LOGICAL", "RATIO", "FUNCTION", "VOTE", "IMPLY", "IMPLY_MLN", "EQUAL", "ISTRUE",
    "PROB", "DIST", "MAP", "STDERR", "GIVEN", "USING", "AUTO", "QAM", "GIBBS", "EXACT", "ANNEAL", "EXPLAIN",
    "SHOW",
)

# Common SQL words offered by tab completion (highlighting uses Pygments' full list).
SQL_KEYWORDS = (
    "SELECT", "FROM", "WHERE", "GROUP", "BY", "ORDER", "HAVING", "LIMIT", "OFFSET", "JOIN", "LEFT", "RIGHT",
    "INNER", "OUTER", "FULL", "CROSS", "ON", "AS", "AND", "OR", "NOT", "IN", "IS", "NULL", "LIKE", "ILIKE",
    "BETWEEN", "CASE", "WHEN", "THEN", "ELSE", "END", "DISTINCT", "UNION", "ALL", "EXCEPT", "INTERSECT",
    "WITH", "INSERT", "INTO", "VALUES", "UPDATE", "SET", "DELETE", "CREATE", "TABLE", "VIEW", "DROP", "ALTER",
    "OR REPLACE", "IF", "EXISTS", "PRIMARY", "KEY", "DESCRIBE", "SUMMARIZE", "COPY", "ATTACH", "DETACH",
    "ASC", "DESC", "TRUE", "FALSE", "CAST", "COUNT", "SUM", "AVG", "MIN", "MAX", "TEXT", "VARCHAR",
    "INTEGER", "INT", "BIGINT", "DOUBLE", "DATE", "TIMESTAMP",
)

try:
    from pygments.lexer import inherit, words
    from pygments.lexers.sql import SqlLexer
    from pygments.token import Keyword

    class PdbqLexer(SqlLexer):
        """SQL lexer that also knows pdbq's keywords (``PROB``, ``GIVEN``, ``CREATE RULE`` ...)."""

        name = "pdbq SQL"
        aliases = ["pdbq"]
        filenames = []
        tokens = {
            "root": [
                (words(PDBQ_KEYWORDS, suffix=r"\b"), Keyword),
                inherit,
            ]
        }

except ImportError:  # pragma: no cover - exercised only where pygments is absent
    PdbqLexer = None  # type: ignore[assignment,misc]


def prompt_lexer() -> Any:
    """A prompt_toolkit lexer for pdbq SQL, or ``None`` when Pygments is not installed."""
    if PdbqLexer is None:
        return None
    from prompt_toolkit.lexers import PygmentsLexer

    return PygmentsLexer(PdbqLexer)
