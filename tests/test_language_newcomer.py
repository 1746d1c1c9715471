"""Parsing the statements and habits added for newcomers (issue 13): statements around a
probabilistic query, IMPORT/EXPORT UAI, SHOW TABLES, bound parameters, `=>` and `p::` rules."""

from __future__ import annotations

import math

import pytest

from pdbq.errors import ParseError
from pdbq.language.nodes import (
    ANSWER_SOURCE,
    ExportUai,
    FactorFunction,
    ImportUai,
    PassThrough,
    ProbQuery,
    SaveAnswer,
    SaveKind,
    Show,
    WeightKind,
)
from pdbq.language.parser import parse_script, parse_statement

Q = "SELECT c.name, PROB(c) AS p FROM cancer c GIVEN smokes('ann') = TRUE USING QAM WITH (seed = 7)"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (f"CREATE TABLE risk AS {Q}", SaveKind.CREATE_TABLE),
        (f"CREATE OR REPLACE TEMP TABLE IF NOT EXISTS risk AS ({Q})", SaveKind.CREATE_TABLE),
        (f"INSERT INTO risk {Q}", SaveKind.INSERT),
        (f"INSERT OR REPLACE INTO risk (name, p) {Q}", SaveKind.INSERT),
        (f"INSERT INTO risk BY NAME ({Q})", SaveKind.INSERT),
        (f"COPY ({Q}) TO 'risk.parquet' (FORMAT parquet)", SaveKind.COPY),
    ],
)
def test_statements_around_a_probabilistic_query(text: str, kind: SaveKind) -> None:
    stmt = parse_statement(text)
    assert isinstance(stmt, SaveAnswer) and stmt.kind is kind
    assert isinstance(stmt.query, ProbQuery) and stmt.query.method.value == "QAM"
    assert stmt.query.options == (("seed", 7),) and stmt.query.given[0].relation == "smokes"
    assert ANSWER_SOURCE in stmt.outer and "PROB" not in stmt.outer.upper()


def test_plain_create_insert_copy_still_pass_through() -> None:
    for text in ("CREATE TABLE t AS SELECT 1 AS x", "INSERT INTO t SELECT 2", "COPY t TO 'x.csv'",
                 "COPY (SELECT prob FROM t) TO 'y.csv'", "CREATE VIEW v AS SELECT 1"):
        assert isinstance(parse_statement(text), PassThrough), text


def test_create_view_over_prob_is_a_positioned_error() -> None:
    with pytest.raises(ParseError, match="a view cannot hold a probabilistic query") as info:
        parse_statement(f"CREATE VIEW risk AS {Q}")
    assert info.value.line == 1 and info.value.col == 1


def test_uai_statements() -> None:
    assert parse_statement("IMPORT UAI 'a b.uai' AS Net EVIDENCE 'a.evid'") == ImportUai(
        "a b.uai", "net", "a.evid", text="IMPORT UAI 'a b.uai' AS Net EVIDENCE 'a.evid'")
    assert parse_statement("EXPORT UAI net TO 'o.uai'").path == "o.uai"
    assert isinstance(parse_statement("EXPORT UAI net TO 'o.uai'"), ExportUai)
    assert isinstance(parse_statement("IMPORT DATABASE 'dir'"), PassThrough)  # DuckDB's own
    with pytest.raises(ParseError, match="EXPORT UAI name TO"):
        parse_statement("EXPORT UAI TO 'o.uai'")


def test_show_tables_is_pdbq_filtered() -> None:
    assert parse_statement("SHOW TABLES") == Show("TABLES")
    assert parse_statement("show all tables") == Show("ALL TABLES")
    assert isinstance(parse_statement("SHOW TABLES FROM main"), PassThrough)


def test_parameters_bind_as_literals_in_text_order() -> None:
    stmt = parse_statement(
        "SELECT c.name, PROB(c) + ? AS p FROM cancer c WHERE c.name = ? GIVEN smokes(?) = ? USING GIBBS WITH (seed = ?)",
        [0.5, "o'hara", "ann", False, 3],
    )
    assert "0.5" in stmt.select and "'o''hara'" in stmt.select
    assert stmt.given[0].keys == ("'ann'",) and stmt.given[0].value == "FALSE"
    assert stmt.options == (("seed", 3),)
    named = parse_statement("SELECT PROB(c) FROM cancer c WHERE c.name = $who", {"who": "bob"})
    assert "'bob'" in named.select
    with pytest.raises(ParseError, match="no value for parameter \\$who"):
        parse_statement("SELECT PROB(c) FROM cancer c WHERE c.name = $who", {"whom": "bob"})
    with pytest.raises(ParseError, match="cannot bind a list"):
        parse_statement("SELECT PROB(c) FROM cancer c WHERE c.name = ?", [["a"]])
    # plain SQL keeps its placeholders: DuckDB binds them
    assert parse_script("SELECT ? + 1", [1])[0] == PassThrough("SELECT ? + 1")


def test_mln_arrow_and_probabilistic_facts() -> None:
    mln = parse_statement("CREATE RULE r WEIGHT 1.2 AS smokes(x), friends(x, y), x <> y => smokes(y)")
    assert mln.function is FactorFunction.IMPLY_MLN and mln.weight.value == 1.2
    assert [a.relation for a in mln.body] == ["smokes", "friends"] and mln.conditions == ("x <> y",)
    assert mln.head.atoms[0].relation == "smokes" and mln.head_symbols == ("y",)
    same = parse_statement("CREATE RULE r WEIGHT 1.2 FUNCTION IMPLY_MLN AS smokes(y) :- smokes(x), friends(x, y), x <> y")
    assert (mln.head, mln.body, mln.conditions, mln.function) == (same.head, same.body, same.conditions, same.function)
    assert parse_statement("CREATE RULE r FUNCTION VOTE AS a(x) => b(x)").function is FactorFunction.VOTE
    fact = parse_statement("CREATE RULE p AS 0.25::smokes(x) :- people(x)")
    assert fact.function is FactorFunction.ISTRUE and fact.weight.kind is WeightKind.CONSTANT
    assert 1 / (1 + math.exp(-2 * fact.weight.value)) == pytest.approx(0.25)  # ISTRUE is ±1: sigmoid(2w)
    column = parse_statement("CREATE RULE p AS rate::smokes(x) :- rates(x, rate)")
    assert column.weight.kind is WeightKind.EXPRESSION and "LN(rate / (1 - rate))" in column.weight.expression
    for bad, message in (
        ("CREATE RULE p AS 0::smokes(x) :- people(x)", "strictly between 0 and 1"),
        ("CREATE RULE p WEIGHT 2 AS 0.3::smokes(x) :- people(x)", "leave out WEIGHT"),
        ("CREATE RULE p AS 0.3::smokes(x) = 'a' :- people(x)", "one boolean atom"),
        ("CREATE RULE r AS a(x) =>", "expected an atom"),
    ):
        with pytest.raises(ParseError, match=message):
            parse_statement(bad)


def test_joint_prob_in_sql_points_to_the_python_functions() -> None:
    for text in ("SELECT PROB(a, b) FROM smokes a JOIN cancer b USING (name)",
                 "SELECT PROB(a AND NOT b) FROM smokes a JOIN cancer b USING (name)"):
        with pytest.raises(ParseError, match="pdbq.probability"):
            parse_statement(text)
