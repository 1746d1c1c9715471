"""Bound parameters (``?``, ``$1``, ``$name``) of a pdbq statement, bound as literals in its sqlglot
tree: values never pass through SQL text, so a parameter can never change the statement's shape.

Plain SQL statements get their parameters from DuckDB itself (``con.execute(sql, params)``); this
module binds them for pdbq's own statements (probabilistic queries: SELECT, WHERE, GIVEN, WITH).

>>> import sqlglot
>>> from pdbq.language.dialect import PdbqDialect
>>> t2 = sqlglot.parse_one("SELECT * FROM t WHERE a = ? AND b = ?", read=PdbqDialect)
>>> bind_parameters(t2, [3, "x'y"], where="q").sql("duckdb")
"SELECT * FROM t WHERE a = 3 AND b = 'x''y'"
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
from collections.abc import Mapping, Sequence
from typing import Any

import sqlglot.expressions as exp

from pdbq.errors import ParseError

__all__ = ["bind_parameters", "literal", "Params"]

Params = Sequence[Any] | Mapping[str, Any]

# Arguments holding a sub-query's text as written; dropped when it holds a parameter, so that the
# bound tree (not the text with its '?') is what runs.
_TEXT_ARGS = ("text", "source_text", "evidence_text")


def literal(value: Any, where: str = "parameter") -> exp.Expression:
    """A sqlglot literal node for one Python value."""
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int):
        return exp.Literal.number(value) if value >= 0 else exp.Neg(this=exp.Literal.number(-value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ParseError(f"{where}: {value!r} is not a finite number", line=1, col=1)
        return exp.Literal.number(repr(value)) if value >= 0 else exp.Neg(this=exp.Literal.number(repr(-value)))
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise ParseError(f"{where}: {value!r} is not a finite number", line=1, col=1)
        return exp.cast(exp.Literal.string(str(value)), exp.DataType.build("DECIMAL(38, 10)"))
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, _dt.datetime):
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")),
                        exp.DataType.build("TIMESTAMPTZ" if value.tzinfo else "TIMESTAMP"))
    if isinstance(value, _dt.date):
        return exp.cast(exp.Literal.string(value.isoformat()), exp.DataType.build("DATE"))
    raise ParseError(
        f"{where}: cannot bind a {type(value).__name__} (bind None, bool, int, float, Decimal, str, date or datetime)",
        line=1, col=1,
    )


def bind_parameters(tree: exp.Expression, params: Params, *, where: str) -> exp.Expression:
    """Replace every placeholder of ``tree`` (in place, in text order) by its value's literal.

    ``params`` is a sequence for ``?`` / ``$1`` or a mapping for ``$name``, as in DuckDB. Raises
    `ParseError` when the counts or names do not match.
    """
    # `PdbqDialect` records each placeholder's offset; sqlglot's tree order is not text order
    holders = sorted(tree.find_all(exp.Placeholder), key=lambda n: n.meta.get("start", 0))
    names = [str(h.args.get("this") or "") for h in holders]  # "" for '?'

    if isinstance(params, Mapping):
        if any(not n for n in names):
            raise ParseError(f"{where}: '?' needs a list of parameters, not a dict", line=1, col=1)
        missing = [n for n in names if n not in params]
        if missing:
            raise ParseError(f"{where}: no value for parameter ${missing[0]}", line=1, col=1)
        extra = sorted(set(params) - set(names))
        if extra:
            raise ParseError(f"{where}: parameter '{extra[0]}' is not used by the statement", line=1, col=1)
        values = [params[n] for n in names]
    else:
        if isinstance(params, (str, bytes)):
            raise ParseError(f"{where}: parameters are a list or a dict, not a {type(params).__name__}", line=1, col=1)
        seq = list(params)
        numbered = [n for n in names if n]
        if any(not n.isdigit() for n in numbered):
            raise ParseError(f"{where}: ${numbered[0]} needs a dict of parameters", line=1, col=1)
        if numbered:
            idx = [int(n) - 1 if n else None for n in names]
            if any(i is None for i in idx):
                raise ParseError(f"{where}: do not mix '?' and '$1' parameters", line=1, col=1)
            if any(not 0 <= i < len(seq) for i in idx):  # type: ignore[operator]
                raise ParseError(f"{where}: {len(seq)} parameter(s) given, the statement uses ${max(idx) + 1}", line=1, col=1)
            values = [seq[i] for i in idx]  # type: ignore[index]
        else:
            if len(seq) != len(holders):
                raise ParseError(
                    f"{where}: the statement has {len(holders)} parameter(s), {len(seq)} given", line=1, col=1
                )
            values = seq
    for holder, value in zip(holders, values):
        node = holder
        while node is not None:
            for key in _TEXT_ARGS:
                if node.args.get(key) is not None and isinstance(node.args.get(key), str):
                    node.set(key, None)
            node = node.parent
        holder.replace(literal(value, where))
    return tree
