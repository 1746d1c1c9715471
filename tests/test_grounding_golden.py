"""Golden grounding tests: tests/fixtures/grounding/<case>/model.sql -> expected.txt.

Set PDBQ_REGEN_GOLDEN=1 to rewrite the expected files (then review the diff).
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest

from pdbq.grounding.compile import compile_rule, observed_columns
from pdbq.grounding.ground import ground_all, rule_order
from pdbq.language import parse_script
from pdbq.language.nodes import CreateRule, CreateVariable, PassThrough

CASES = Path(__file__).parent / "fixtures" / "grounding"


def load_model(con: duckdb.DuckDBPyConnection, text: str) -> tuple[dict, dict]:
    """Run a script's plain SQL on ``con``; return its (variables, rules) definitions."""
    variables: dict[str, CreateVariable] = {}
    rules: dict[str, CreateRule] = {}
    for stmt in parse_script(text):
        if isinstance(stmt, PassThrough):
            con.execute(stmt.sql)
        elif isinstance(stmt, CreateVariable):
            variables[stmt.name] = stmt
        elif isinstance(stmt, CreateRule):
            rules[stmt.name] = stmt
    return variables, rules


def key_names(con) -> dict[int, str]:
    """vid -> 'relation(key, ...)' for rendering."""
    out = {}
    for (rel,) in con.execute("SELECT relation FROM pdbq_fs_relations ORDER BY base").fetchall():
        cur = con.execute(f'SELECT * FROM "pdbq_fs_vars__{rel}" ORDER BY vid')
        names = [d[0] for d in cur.description]
        for row in cur.fetchall():
            keys = [repr(v) if not hasattr(v, "isoformat") else repr(v.isoformat()) for n, v in zip(names, row) if n not in ("vid", "cardinality")]
            out[row[0]] = f"{rel}({', '.join(keys)})"
    return out


def render(con, variables, rules) -> str:
    stats = ground_all(con, variables, rules)
    names = key_names(con)
    lines = ["== variables"]
    for vid, name in sorted(names.items()):
        lines.append(f"{vid}: {name}")
    lines.append("== evidence")
    for vid, value in con.execute("SELECT vid, value FROM pdbq_fs_evidence ORDER BY vid").fetchall():
        lines.append(f"{names[vid]} = {value}")
    lines.append("== warnings")
    lines += sorted(stats.warnings)
    compiled = {n: compile_rule(rules[n], variables, observed_columns(con)) for n in rules}
    for name in rule_order(compiled):
        c = compiled[name]
        lines.append(f"== rule {name}: function {c.function.name}, semantics {c.semantics.name}, "
                     f"weight {c.weight_kind.value}, literals {list(c.literals)}")
        lines.append(c.sql())
        cur = con.execute(f'SELECT * FROM "pdbq_fs_factors__{name}"')
        cols = [d[0] for d in cur.description]
        rows = []
        for row in cur.fetchall():
            args = [f"{names[row[i]]}@{c.literals[i]}" for i in range(c.arity)]
            extra = [f"{n}={row[j]!r}" for j, n in enumerate(cols) if j >= c.arity]
            rows.append("  " + ", ".join(args) + (" | " + " ".join(extra) if extra else ""))
        lines.append(f"-- {len(rows)} factors")
        lines += sorted(rows)
    lines.append("== weights")
    for row in con.execute("SELECT rule, wid, value, learnable, tie FROM pdbq_fs_weights ORDER BY rule, wid").fetchall():
        lines.append("  " + " ".join(str(x) for x in row))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("case", sorted(p.name for p in CASES.iterdir() if (p / "model.sql").exists()))
def test_golden(case: str) -> None:
    con = duckdb.connect()
    variables, rules = load_model(con, (CASES / case / "model.sql").read_text())
    got = render(con, variables, rules)
    expected_path = CASES / case / "expected.txt"
    if os.environ.get("PDBQ_REGEN_GOLDEN") or not expected_path.exists():
        expected_path.write_text(got)
        if not os.environ.get("PDBQ_REGEN_GOLDEN"):
            pytest.fail(f"wrote missing {expected_path}; review it and rerun")
    assert got == expected_path.read_text()
    # a second grounding reuses everything and changes nothing
    stats = ground_all(con, variables, rules)
    assert sorted(stats.reused) == sorted(rules) and stats.new_factors == 0
    assert render(con, variables, rules) == got
