"""Tab completion for the shell: keywords, tables, columns, variable relations, rules, dot commands.

Names are read from the open database when completion first needs them (DuckDB's
``duckdb_tables()``/``duckdb_views()``/``duckdb_columns()`` and pdbq's catalog) and kept until
`PdbqCompleter.invalidate` is called, which the shell does after every statement.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.document import Document

from pdbq.shell.highlight import PDBQ_KEYWORDS, SQL_KEYWORDS

__all__ = ["Names", "read_names", "PdbqCompleter", "DOT_COMMANDS"]

DOT_COMMANDS = (
    ".help", ".tables", ".variables", ".rules", ".schema", ".describe", ".databases", ".indexes", ".dump",
    ".import", ".timer", ".mode", ".headers", ".nullvalue", ".separator", ".maxrows", ".maxwidth", ".changes",
    ".show", ".output", ".once", ".bail", ".echo", ".last", ".diag", ".open", ".read", ".print", ".system",
    ".shell", ".columns", ".quit", ".exit",
)

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
# The word before the cursor's word names a table: FROM x, JOIN x, INTO x, UPDATE x, TABLE x, or a
# further table of a FROM list (FROM a, x).
_TABLE_POSITION = re.compile(
    r"\b(FROM|JOIN|INTO|UPDATE|TABLE|DESCRIBE)\s+$|\bFROM\s+[A-Za-z_][A-Za-z0-9_]*(\s+(AS\s+)?[A-Za-z_]\w*)?\s*,\s*$",
    re.IGNORECASE,
)
_QUALIFIED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)?$")


@dataclass(frozen=True)
class Names:
    """The names completion offers, by kind (columns keyed by their table)."""

    tables: tuple[str, ...] = ()
    columns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    variables: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()


def read_names(db: Any) -> Names:
    """Read table, column, variable and rule names from a pdbq ``Database`` (cheap catalog queries).

    A database that cannot answer (closed, busy) yields no names rather than an error: completion
    must never break the prompt.
    """
    tables: list[str] = []
    columns: dict[str, list[str]] = {}
    try:
        con = db.duckdb.cursor()
        try:
            tables = [
                r[0]
                for r in con.execute(
                    "SELECT table_name FROM duckdb_tables() WHERE NOT internal "
                    "UNION SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1"
                ).fetchall()
            ]
            for table, column in con.execute(
                "SELECT table_name, column_name FROM duckdb_columns() WHERE NOT internal ORDER BY table_name, column_index"
            ).fetchall():
                columns.setdefault(table, []).append(column)
        finally:
            con.close()
    except Exception:  # noqa: BLE001 - completion is best effort by design
        pass
    variables: list[str] = []
    rules: list[str] = []
    catalog = getattr(db, "catalog", None)
    if catalog is not None:
        for attr, out in (("variables", variables), ("rules", rules)):
            try:
                out.extend(str(name) for name in getattr(catalog, attr)())
            except Exception:  # noqa: BLE001
                pass
    return Names(tuple(tables), {t: tuple(c) for t, c in columns.items()}, tuple(variables), tuple(rules))


class PdbqCompleter(Completer):
    """prompt_toolkit completer over `Names` supplied by ``source`` (called lazily, then cached).

    After ``alias.`` or ``table.`` it offers that table's columns (any table's when the alias is
    unknown); at the start of a line that begins with ``.`` it offers dot commands.
    """

    def __init__(self, source: Callable[[], Names]) -> None:
        self._source = source
        self._names: Names | None = None

    def invalidate(self) -> None:
        """Forget cached names (call after a statement that may have changed the schema)."""
        self._names = None

    @property
    def names(self) -> Names:
        if self._names is None:
            self._names = self._source()
        return self._names

    def get_completions(self, document: Document, complete_event: Any) -> Iterator[Completion]:
        before = document.text_before_cursor
        if before.lstrip().startswith(".") and "\n" not in before and " " not in before.strip():
            word = before.strip()
            yield from _matches(word, DOT_COMMANDS, "command")
            return
        if before.lstrip().startswith((".schema ", ".describe ", ".read ", ".open ", ".output ", ".once ")) and "\n" not in before:
            if before.lstrip().startswith((".schema ", ".describe ")):
                word = _current_word(before)
                names = self.names
                yield from _matches(word, names.tables + names.variables + names.rules, "name")
            return
        qualified = _QUALIFIED.search(before)
        if qualified:
            owner, prefix = qualified.group(1), qualified.group(2) or ""
            names = self.names
            cols = _columns_of(names, owner, document.text)
            yield from _matches(prefix, cols, "column")
            return
        word = _current_word(before)
        names = self.names
        # pdbq's own catalog tables (pdbq_variables, ...) only when asked for by prefix.
        internal = word.lower().startswith("pdbq_")
        tables = tuple(t for t in names.tables if internal or not t.startswith("pdbq_"))
        columns = tuple(c for t, cols in names.columns.items() if internal or not t.startswith("pdbq_") for c in cols)
        if _TABLE_POSITION.search(before[: len(before) - len(word)]):
            # after FROM / JOIN / INTO ...: what can be read there (variable relations are views) and
            # keywords (`FROM (SELECT ...`); never rules or columns
            pools: tuple[tuple[str, tuple[str, ...]], ...] = (
                ("variable", names.variables), ("table", tables), ("keyword", PDBQ_KEYWORDS + SQL_KEYWORDS))
        else:
            pools = (
                ("variable", names.variables),
                ("rule", names.rules),
                ("table", tables),
                ("column", columns if word else ()),  # Tab on nothing: names and keywords, not every column
                ("keyword", PDBQ_KEYWORDS + SQL_KEYWORDS),
            )
        seen: set[str] = set()
        for kind, pool in pools:
            for c in _matches(word, pool, kind):
                if c.text.lower() not in seen:
                    seen.add(c.text.lower())
                    yield c


def _current_word(before: str) -> str:
    m = _WORD.search(before)
    return m.group(0) if m else ""


def _internal(table: str) -> bool:
    return table.lower().startswith(("pdbq_", "__pdbq"))


def _columns_of(names: Names, owner: str, text: str = "") -> tuple[str, ...]:
    by_name = {t.lower(): cols for t, cols in names.columns.items()}
    if owner.lower() in by_name:
        return by_name[owner.lower()]
    # An alias: the table it names in the statement (`FROM x AS s`, `FROM x s`, `JOIN x s`)
    pattern = re.compile(rf"\b([A-Za-z_][A-Za-z0-9_]*)\s+(?:AS\s+)?{re.escape(owner)}\b", re.IGNORECASE)
    for m in pattern.finditer(text):
        cols = by_name.get(m.group(1).lower())
        if cols is not None:
            return cols
    # Unknown: every user column (never pdbq's storage: vid, v0, n_factors ...), deduplicated.
    return tuple(dict.fromkeys(c for t, cols in names.columns.items() if not _internal(t) for c in cols))


def _matches(word: str, pool: Iterable[str], kind: str) -> Iterator[Completion]:
    # An empty word (Tab after a space or on an empty line) offers the whole pool, as DuckDB does.
    low = word.lower()
    for cand in dict.fromkeys(pool):
        if cand.lower().startswith(low) and cand.lower() != low:
            # Keywords follow the case the user is typing in; names keep their own.
            text = cand.lower() if kind == "keyword" and word and word.islower() else cand
            yield Completion(text, start_position=-len(word), display_meta=kind)
