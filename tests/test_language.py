"""Script splitting, statement_complete, parse errors (type, message, line/col, caret), the
ProbQuery placeholder convention and the sqlglotc import guard."""

from __future__ import annotations

import importlib

import pytest
import sqlglot

from pdbq.errors import ParseError, PdbqError
from pdbq.language import (
    PdbqDialect,
    parse_script,
    parse_statement,
    split_script,
    statement_complete,
)
from pdbq.language.nodes import PassThrough, ProbQuery

# ----------------------------------------------------------------------------- splitting


def test_split_respects_strings_comments_and_dollar_quotes() -> None:
    script = (
        "SELECT 'a;b' AS s;\n"
        "-- a comment; with a semicolon\n"
        "SELECT \"odd;name\" FROM t /* ; */ WHERE x = 1;\n"
        "SELECT $$x;y$$, $fn$ ; $fn$;\n"
        ";;  -- empty statements are skipped\n"
        "SELECT 3"
    )
    chunks = split_script(script)
    assert [c.sql for c in chunks] == [
        "SELECT 'a;b' AS s",
        "SELECT \"odd;name\" FROM t /* ; */ WHERE x = 1",
        "SELECT $$x;y$$, $fn$ ; $fn$",
        "SELECT 3",
    ]
    assert [(c.line, c.col) for c in chunks] == [(1, 1), (3, 1), (4, 1), (6, 1)]
    for c in chunks:
        assert script[c.start : c.start + len(c.sql)] == c.sql


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT list_transform([1, 2, 3], x -> x + 1)",
        "SELECT * FROM tbl USING SAMPLE 10%",
        "PIVOT cities ON year USING sum(population) GROUP BY country",
        "SELECT  1   +\n\t2  -- spacing kept\n  AS   x",
        "COPY t TO 'out;file.csv' (HEADER, DELIMITER ';')",
        "CALL pragma_version()",
        "SELECT MAP(['k'], [1])['k']",
        "SELECT 1 AS given",
    ],
)
def test_pass_through_is_original_text_byte_for_byte(sql: str) -> None:
    script = f"  {sql} ;\nSELECT 2;"
    first, second = parse_script(script)
    assert first == PassThrough(sql=sql, line=1, col=3)
    assert second == PassThrough(sql="SELECT 2", line=2 + sql.count("\n"), col=1)


def test_parse_script_mixes_pdbq_and_duckdb_statements_in_order() -> None:
    stmts = parse_script("CREATE TABLE t(x INT); SHOW RULES; SELECT PROB(m) FROM v m; DROP TABLE t")
    assert [type(s).__name__ for s in stmts] == ["PassThrough", "Show", "ProbQuery", "DropRelation"]


def test_parse_statement_needs_exactly_one() -> None:
    assert parse_statement("SHOW RULES;").kind == "RULES"
    with pytest.raises(ParseError, match="expected one statement, found 2") as e:
        parse_statement("SHOW RULES;\n  SHOW VARIABLES")
    assert (e.value.line, e.value.col) == (2, 3)
    with pytest.raises(ParseError, match="found none"):
        parse_statement("  -- nothing\n;")


@pytest.mark.parametrize(
    "text, complete",
    [
        ("SELECT 1;", True),
        ("SELECT 1;   \n", True),
        ("SELECT 1; -- trailing comment", True),
        ("SELECT 1; /* c */", True),
        ("SELECT 1", False),
        ("SELECT ';'", False),
        ("SELECT 'abc;", False),
        ("SELECT 1 -- ;", False),
        ("SELECT 1 /* ; */", False),
        ("SELECT $$;$$", False),
        ("SELECT $$;", False),
        ("", False),
        ("CREATE RULE r AS a(^x) :- b(x);", True),
    ],
)
def test_statement_complete(text: str, complete: bool) -> None:
    assert statement_complete(text) is complete


# ----------------------------------------------------------------------------- errors

ERRORS = [
    # (script, message fragment, line, col)
    ("SELECT PROB(m) FROM t m USING QAM WITH (steps = );", "expected a value after '=' in WITH option 'steps'", 1, 49),
    ("SELECT 1;\nSELECT PROB(m) FROM t m\n  WITH (steps = 1, Steps = 2)", "WITH option 'steps' is given twice", 3, 20),
    ("SELECT 1;\nSELECT 'abc", "unterminated string", 2, 8),
    ("SELECT 1; /* abc", "unterminated comment", 1, 11),
    ("SELECT $$abc", "unterminated dollar-quoted string", 1, 8),
    ('SELECT "abc', "unterminated quoted identifier", 1, 8),
    ("SELECT 1;\n  LEARN WEIGHTS FOR r USING ADAM", "unknown learning method 'ADAM' after USING", 2, 29),
    ("LEARN WIGHTS", "expected WEIGHTS after LEARN", 1, 7),
    ("LEARN WEIGHTS FOR r extra", "unexpected 'extra' in LEARN WEIGHTS", 1, 21),
    ("CREATE VARIABLE v(a INT) DOMAIN ('a', 'b', 'a') FROM (SELECT 1)", "domain value 'a' appears twice", 1, 44),
    ("CREATE VARIABLE v(a INT) DOMAIN ('a', '') FROM (SELECT 1)", "non-empty", 1, 39),
    ("CREATE VARIABLE v(a INT) DOMAIN ('a') FROM (SELECT 1)", "at least two values", 1, 33),
    ("CREATE VARIABLE v(a INT) DOMAIN (1, 2) FROM (SELECT 1)", "string literals", 1, 34),
    ("CREATE VARIABLE v(a INT) DOMAIN CATEGORICAL(1) FROM (SELECT 1)", "k >= 2", 1, 45),
    ("CREATE VARIABLE v(a INT) DOMAIN CATEGORICAL(2.5) FROM (SELECT 1)", "whole number", 1, 45),
    ("CREATE VARIABLE v() DOMAIN BOOLEAN FROM (SELECT 1)", "expected a key column name", 1, 19),
    ("CREATE VARIABLE v(a INT, A TEXT) DOMAIN BOOLEAN FROM (SELECT 1, 2)", "key column 'a' is declared twice", 1, 26),
    ("CREATE VARIABLE v(a) DOMAIN BOOLEAN FROM (SELECT 1)", "expected a type for key column 'a'", 1, 20),
    ("CREATE VARIABLE v(a INT) DOMAIN BOOLEAN", "expected FROM (SELECT ...)", 1, 40),
    ("CREATE VARIABLE v(a INT) DOMAIN BOOLEAN FROM (SHOW RULES)", "expected a SELECT query", 1, 47),
    ("CREATE VARIABLE v(a INT) DOMAIN BOOLEAN FROM (SELECT PROB(m) FROM x m)", "cannot be used inside FROM", 1, 47),
    ("CREATE VARIABLE v(a INT) DOMAIN MAYBE FROM (SELECT 1)", "after DOMAIN", 1, 33),
    ("CREATE RULE r AS a(^x) :- b(^x)", "'^' marks head symbols", 1, 29),
    ("CREATE RULE r AS a(^x) :-\n  b(x), ^x > 1", "'^' marks head symbols", 2, 9),
    ("CREATE RULE r AS a(_) :- b(x)", "'_' (any value) cannot be used in the rule head", 1, 20),
    ("CREATE RULE r AS a(x) :- x > 1", "needs at least one atom", 1, 30),
    ("CREATE RULE r WEIGHT abc AS a(x) :- b(x)", "expected a number, ?, ?(symbols) or = expression", 1, 22),
    ("CREATE RULE r WEIGHT 1 WEIGHT 2 AS a(x) :- b(x)", "WEIGHT is given twice", 1, 24),
    ("CREATE RULE r WEIGHT ? * AS e(a) = e(b) :- p(a, b, s)", "expected a feature expression after WEIGHT ? *", 1, 26),
    ("CREATE RULE r\n  WEIGHT ?(c) * s * ? AS e(a) = e(b) :- p(a, b, s, c)", "'?' is only allowed right after WEIGHT", 2, 17),
    ("CREATE RULE r WEIGHT ? * MAP(x) AS e(a) = e(b) :- p(a, b, s)", "cannot be used in a rule", 1, 26),
    ("CREATE RULE r SEMANTICS FOO AS a(x) :- b(x)", "unknown semantics 'FOO'", 1, 25),
    ("CREATE RULE r FUNCTION XOR AS a(x) :- b(x)", "unknown function 'XOR'", 1, 24),
    ("CREATE RULE r FUNCTION IMPLY AS a(x) = b(x) :- c(x)", "means FUNCTION EQUAL", 1, 33),
    ("CREATE RULE r AS a(x) b(x)", "expected ':-'", 1, 23),
    ("CREATE RULE r a(x) :- b(x)", "expected WEIGHT, SEMANTICS, FUNCTION or AS", 1, 15),
    ("CREATE RULE r AS a(x) :- b(x + 1)", "atom arguments must be symbols, constants or _", 1, 30),
    ("CREATE RULE r AS a(x) :- b(x), PROB(x) > 1", "cannot be used in a rule", 1, 32),
    ("CREATE RULE r AS a(x) :- b(x), x > ", "expected a value after '>'", 1, 35),
    ("CREATE RULE r AS a(x) :- b(x) c(x)", "unexpected 'c' in the rule body", 1, 31),
    ("CREATE RULE r AS a(x) = :- b(x)", "expected a constant or an atom after '='", 1, 25),
    ("SELECT PROB(z) FROM is_popular m", "no relation or alias 'z'", 1, 8),
    ("SELECT PROB(is_popular) FROM is_popular AS pop", "no relation or alias 'is_popular'", 1, 8),
    ("SELECT PROB(m.x) FROM is_popular m", "PROB takes the alias of a variable relation", 1, 13),
    ("SELECT DIST(m = 1) FROM is_popular m", "only PROB and STDERR take '= value'", 1, 15),
    ("SELECT PROB(m = ) FROM is_popular m", "expected a constant after '='", 1, 17),
    ("SELECT PROB(m) FROM is_popular m USING FOO", "unknown inference method 'FOO'", 1, 40),
    ("SELECT m.x FROM is_popular m\nGIVEN a(1) = 2", "need a PROB, DIST, MAP or STDERR", 2, 1),
    ("SELECT PROB(m) FROM t m GIVEN a(x) = 2", "GIVEN keys of 'a' must be constants", 1, 33),
    ("SELECT PROB(m) FROM t m GIVEN a(1)", "expected '= value'", 1, 35),
    ("SELECT PROB(m) FROM t m GIVEN a(1) = 2 GIVEN b(1) = 1", "GIVEN appears twice", 1, 40),
    ("SELECT PROB(m) FROM t m GIVEN (SELECT 1, TRUE)", "expected the relation name", 1, 47),
    ("SELECT PROB(m) FROM t m ORDER BY", "expected an expression after ORDER BY", 1, 33),
    ("SELECT PROB(m) FROM t m USING QAM WITH (a = 1) extra", "unexpected 'extra'", 1, 48),
    ("SELECT PROB(m) FROM t m WITH (a 1)", "expected '=' after WITH option 'a'", 1, 33),
    ("SELECT PROB(m) FROM t m WITH (a = x)", "expected a value after '=' in WITH option 'a'", 1, 35),
    ("EXPLAIN ANALYZE SELECT PROB(m) FROM t m", "EXPLAIN ANALYZE is not supported", 1, 9),
    ("SHOW VARIABLES x", "unexpected 'x'", 1, 16),
    ("DROP RULE", "expected a rule name after DROP RULE", 1, 10),
]


@pytest.mark.parametrize("script, fragment, line, col", ERRORS, ids=[e[1][:40] for e in ERRORS])
def test_parse_errors(script: str, fragment: str, line: int, col: int) -> None:
    with pytest.raises(ParseError) as info:
        parse_script(script)
    err = info.value
    assert fragment in err.reason
    assert (err.line, err.col) == (line, col), str(err)
    assert isinstance(err, PdbqError)
    # The message shows the offending line with a caret under the token's first character.
    source_line, caret_line = str(err).splitlines()[-2:]
    assert source_line == script.splitlines()[line - 1]
    assert caret_line.index("^") == col - 1
    assert "\x1b" not in str(err)  # no ANSI escapes from sqlglot


def test_error_positions_are_relative_to_the_whole_script() -> None:
    script = "SELECT 1;\n\nCREATE TABLE t(x INT);\n  SELECT PROB(m) FROM t m\n    WITH (steps = )"
    with pytest.raises(ParseError) as info:
        parse_script(script)
    assert (info.value.line, info.value.col) == (5, 19)
    assert info.value.text == script


def test_caret_spans_the_offending_token() -> None:
    with pytest.raises(ParseError) as info:
        parse_script("SELECT PROB(m) FROM is_popular m USING FANCY")
    assert str(info.value).splitlines()[-1].strip() == "^^^^^"


# ----------------------------------------------------------------------------- ProbQuery select


def test_prob_query_placeholders_and_tree() -> None:
    q = parse_statement(
        "SELECT m.movie, PROB(m) AS p, PROB(m) * 2 AS p2, STDERR(m) FROM is_popular m "
        "ORDER BY PROB(m) DESC LIMIT 10 GIVEN is_fan('bart') = TRUE USING QAM"
    )
    assert isinstance(q, ProbQuery)
    assert [(e.kind.value, e.alias, e.placeholder) for e in q.estimates] == [
        ("PROB", "m", "__pdbq_est_0"),
        ("STDERR", "m", "__pdbq_est_1"),
    ]
    assert q.select == (
        'SELECT m.movie, m.__pdbq_est_0 AS p, m.__pdbq_est_0 * 2 AS p2, m.__pdbq_est_1 AS "STDERR(m)" '
        "FROM is_popular AS m ORDER BY m.__pdbq_est_0 DESC LIMIT 10"
    )
    assert q.tree is not None and q.tree.sql(dialect="duckdb") == q.select
    # The select is plain DuckDB SQL: sqlglot's own DuckDB dialect reads it back unchanged.
    assert sqlglot.parse_one(q.select, read="duckdb").sql(dialect="duckdb") == q.select


def test_prob_query_text_is_the_statement_as_written() -> None:
    q = parse_script("SELECT 1;\n SELECT PROB(m)  FROM v m -- note\n;")[1]
    assert q.text == "SELECT PROB(m)  FROM v m"


def test_dialect_parses_and_generates_pdbq_queries() -> None:
    sql = "SELECT PROB(m = 'x'), MAP(m) FROM v AS m GIVEN r(1, 'a') = TRUE USING GIBBS WITH (seed = 3)"
    tree = sqlglot.parse_one(sql, read=PdbqDialect)
    assert tree.sql(dialect=PdbqDialect) == sql
    # DuckDB's own MAP is untouched by the dialect.
    duck = "SELECT MAP(['a'], [1])"
    assert sqlglot.parse_one(duck, read=PdbqDialect).sql(dialect=PdbqDialect) == duck


def test_import_refuses_compiled_sqlglot(monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlglot.tokens

    import pdbq.language.dialect as dialect

    monkeypatch.setattr(sqlglot.tokens, "SQLGLOTC_INSTALLED", True)
    try:
        with pytest.raises(ImportError, match="pip uninstall sqlglotc"):
            importlib.reload(dialect)
    finally:
        monkeypatch.setattr(sqlglot.tokens, "SQLGLOTC_INSTALLED", False)
        importlib.reload(dialect)
