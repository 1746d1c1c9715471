"""Golden parser fixtures: tests/fixtures/language/*.sql hold input statements, each followed by a
line `=> <normal form>` (one JSON line, see `normal_form`). One parametrised test runs them all.

Regenerate the expected side after an intended change (then review the diff):
    PDBQ_REGEN_FIXTURES=1 python -m pytest tests/test_language_golden.py
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
from pathlib import Path

import pytest

from pdbq.language import parse_statement
from pdbq.language.nodes import Atom, Term, TermKind

FIXTURES = Path(__file__).parent / "fixtures" / "language"
_SKIP_FIELDS = {"text", "tree"}


def _term(term: Term) -> str:
    if term.kind is TermKind.WILDCARD:
        return "_"
    return ("^" if term.head else "") + term.text


def _plain(value):
    if isinstance(value, Atom):
        inner = ", ".join(_term(t) for t in value.terms)
        return f"{'NOT ' if value.negated else ''}{value.relation}({inner})"
    if dataclasses.is_dataclass(value):
        out = {}
        for f in dataclasses.fields(value):
            if f.name in _SKIP_FIELDS:
                continue
            v = getattr(value, f.name)
            default = f.default if f.default is not dataclasses.MISSING else dataclasses.MISSING
            if default is not dataclasses.MISSING and v == default and f.name not in ("kind",):
                continue
            out[f.name] = _plain(v)
        return {type(value).__name__: out}
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def normal_form(statement) -> str:
    """One JSON line: {"NodeType": {field: value, ...}} without default-valued fields and without
    `text`/`tree`; atoms are written `NOT rel(^h, x, 'c', _)`, enums by name."""
    return json.dumps(_plain(statement), ensure_ascii=False, separators=(", ", ": "))


def read_pairs(path: Path) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    block: list[str] = []
    for line in path.read_text().splitlines():
        if line.startswith("=>"):
            pairs.append(("\n".join(block).strip(), line[2:].strip()))
            block = []
        elif line.startswith("#") and not block:
            continue
        elif line.strip() or block:
            block.append(line)
    assert not "".join(block).strip(), f"{path.name}: input without '=>' line at the end"
    return pairs


def regenerate(path: Path) -> None:
    lines = path.read_text().splitlines()
    out: list[str] = []
    block: list[str] = []
    for line in lines:
        if line.startswith("=>"):
            out.append("=> " + normal_form(parse_statement("\n".join(block).strip())))
            block = []
        else:
            if not (line.startswith("#") and not block) and (line.strip() or block):
                block.append(line)
            out.append(line)
    path.write_text("\n".join(out) + "\n")


def _cases():
    for path in sorted(FIXTURES.glob("*.sql")):
        if os.environ.get("PDBQ_REGEN_FIXTURES"):
            regenerate(path)
        for i, (sql, expected) in enumerate(read_pairs(path)):
            yield pytest.param(sql, expected, id=f"{path.stem}-{i}")


@pytest.mark.parametrize("sql, expected", list(_cases()))
def test_fixture(sql: str, expected: str) -> None:
    assert expected, "fixture has no expected normal form; regenerate and review it"
    assert normal_form(parse_statement(sql)) == expected


def test_fixtures_cover_every_statement_kind() -> None:
    kinds = set()
    for path in FIXTURES.glob("*.sql"):
        for sql, _ in read_pairs(path):
            kinds.add(type(parse_statement(sql)).__name__)
    assert kinds == {"CreateVariable", "CreateRule", "Drop", "Show", "ProbQuery", "PassThrough", "ExplainMatch", "SaveAnswer"}
