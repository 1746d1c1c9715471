"""Every CREATE/DROP validation error: its type, a message fragment, the near-match hint, and that
the failed statement left the catalog, the views and the data exactly as they were."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import MOVIES_MODEL, MOVIES_SQL, TOKENS_SQL

import pdbq
from pdbq.errors import CatalogError, EvidenceError
from pdbq.language.nodes import (
    Atom,
    Column,
    CreateRule,
    CreateVariable,
    Domain,
    DomainKind,
    Head,
    HeadKind,
    Term,
    TermKind,
)

EXTRA = TOKENS_SQL + """
CREATE TABLE nums AS SELECT * FROM (VALUES (1, 2), (1, 3), (NULL, 4)) t(a, b);
CREATE VARIABLE tag(token INT) DOMAIN ('PER', 'ORG', 'LOC', 'O') FROM (SELECT id FROM tokens);
CREATE VARIABLE entity(token BIGINT) DOMAIN CATEGORICAL(3) FROM (SELECT id FROM tokens);
"""

V = "CREATE VARIABLE v(movie TEXT) DOMAIN BOOLEAN"
R = "CREATE RULE r"

# (statement, error type, fragments that must all appear in the message)
CASES = [
    # --- variables: the FROM query
    (f"{V} FROM (SELECT movie FROM movie)", CatalogError,
     ["variable 'v'", "FROM query", "unknown table 'movie'", "Did you mean 'movies'?"]),
    (f"{V} FROM (SELECT movi FROM movies)", CatalogError, ["unknown column 'movi'", "Did you mean 'movie'?"]),
    (f"{V} FROM (SELECT movie, 1 FROM movies)", CatalogError, ["yields 2 column(s) (movie, 1)", "1 key column(s)"]),
    ("CREATE VARIABLE v(movie INT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies)", CatalogError,
     ["column 'movie' is VARCHAR", "declared INT (INTEGER)"]),
    ("CREATE VARIABLE v(a INT) DOMAIN BOOLEAN FROM (SELECT a FROM nums)", CatalogError, ["NULL key"]),
    ("CREATE VARIABLE v(a INT) DOMAIN BOOLEAN FROM (SELECT a FROM nums WHERE a IS NOT NULL)", CatalogError,
     ["key (a=1) more than once", "SELECT DISTINCT"]),
    ("CREATE VARIABLE v(a DECIMAL(10,2)) DOMAIN BOOLEAN FROM (SELECT 'x')", CatalogError, ["declared DECIMAL(10,2)"]),
    # --- variables: names
    ("CREATE VARIABLE tweets(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies)", CatalogError,
     ["cannot create variable 'tweets'", "table or view named 'tweets'"]),
    ("CREATE VARIABLE is_popular(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies)", CatalogError,
     ["variable 'is_popular' already exists", "CREATE OR REPLACE VARIABLE"]),
    ("CREATE VARIABLE Fans_Vote(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies)", CatalogError,
     ["a rule named 'fans_vote' already exists"]),
    ("CREATE VARIABLE pdbq_x(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies)", CatalogError, ["reserved"]),
    # --- variables: evidence
    (f"{V} FROM (SELECT movie FROM movies) EVIDENCE (SELECT movie FROM movies)", CatalogError,
     ["EVIDENCE query yields 1 column(s)", "then one value column"]),
    (f"{V} FROM (SELECT movie FROM movies) EVIDENCE (SELECT movie, 'yes' FROM movies)", CatalogError,
     ["EVIDENCE value column", "VARCHAR", "BOOLEAN or an integer 0/1"]),
    (f"{V} FROM (SELECT movie FROM movies) EVIDENCE (SELECT movie, 2 FROM movies WHERE movie = 'Up')", EvidenceError,
     ["evidence value 2", "movie='Up'", "not in the domain"]),
    ("CREATE VARIABLE v(t INT) DOMAIN ('PER', 'ORG') FROM (SELECT id FROM tokens) EVIDENCE (SELECT 1, 'per')",
     EvidenceError, ["evidence value 'per'", "t=1"]),
    ("CREATE VARIABLE v(t INT) DOMAIN CATEGORICAL(3) FROM (SELECT id FROM tokens) EVIDENCE (SELECT 1, 3)",
     EvidenceError, ["evidence value 3"]),
    ("CREATE VARIABLE v(t INT) DOMAIN CATEGORICAL(3) FROM (SELECT id FROM tokens) EVIDENCE (SELECT 1, 'a')",
     CatalogError, ["an integer 0 .. k-1"]),
    (f"{V} FROM (SELECT movie FROM movies) EVIDENCE (SELECT 'Up', TRUE UNION ALL SELECT 'Up', FALSE)", EvidenceError,
     ["conflicting values", "movie='Up'"]),
    (f"{V} FROM (SELECT movie FROM movies) EVIDENCE (SELECT 'Jaws', TRUE)", EvidenceError,
     ["movie='Jaws'", "names no variable"]),
    (f"{V} FROM (SELECT movie FROM movies) EVIDENCE (SELECT movie, fan FROM label)", CatalogError,
     ["EVIDENCE query", "unknown table 'label'", "Did you mean 'labels'?"]),
    # --- rules: relations and arity
    (f"{R} AS is_popular(^m) :- tweet(m, p)", CatalogError,
     ["rule 'r'", "unknown relation 'tweet'", "Did you mean 'tweets'?"]),
    (f"{R} AS is_popular(^m) :- tweets(m)", CatalogError,
     ["tweets(m) has 1 argument(s)", "table 'tweets' has 2 column(s) (movie, person)"]),
    (f"{R} AS is_popular(^m) :- tweets(m, p), is_fan(p, m)", CatalogError,
     ["is_fan(p, m) has 2 argument(s)", "1 key column(s)"]),
    (f"{R} AS is_popula(^m) :- tweets(m, p)", CatalogError, ["unknown relation 'is_popula'", "Did you mean 'is_popular'?"]),
    (f"{R} AS movies(^m) :- tweets(m, p)", CatalogError, ["head movies(^m)", "an observed table", "random-variable relation"]),
    (f"{R} AS is_popular(^m) :- tweets(m, p), fans_vote(p)", CatalogError, ["names rule 'fans_vote'"]),
    (f"{R} AS is_popular(^m) :- tweets(m, p), pdbq_rules(p)", CatalogError, ["reserved for pdbq"]),
    (f"{R} AS is_popular(^m) :- tweets(m, p), NOT people(p)", CatalogError, ["negation applies to random atoms only"]),
    # --- rules: safety
    (f"{R} AS is_popular(^mm) :- tweets(m, p)", CatalogError,
     ["head symbol 'mm' is not bound by any body atom", "Did you mean 'm'?"]),
    (f"{R} AS is_popular(^m) :- tweets(m, p), pp <> 'bot'", CatalogError,
     ["condition pp <> 'bot'", "symbol 'pp' is not bound", "Did you mean 'p'?"]),
    (f"{R} AS is_popular(^m) :- tweets(m, p), t.p <> 'bot'", CatalogError, ["is qualified"]),
    (f"{R} AS is_popular(^m) :- tweets(m, p), p || 'x'", CatalogError, ["a condition must be BOOLEAN", "VARCHAR"]),
    (f"{R} AS is_popular(^m) :- tweets(m, p), no_such_fn(p) = 1", CatalogError, ["NO_SUCH_FN(p) = 1", "Scalar Function with name no_such_fn does not exist"]),
    (f"{R} WEIGHT = w * 2 AS is_popular(^m) :- tweets(m, p)", CatalogError, ["WEIGHT = w * 2", "symbol 'w' is not bound"]),
    (f"{R} WEIGHT = p AS is_popular(^m) :- tweets(m, p)", CatalogError, ["a weight must be numeric", "VARCHAR"]),
    (f"{R} WEIGHT ?(q) AS is_popular(^m) :- tweets(m, p)", CatalogError, ["WEIGHT ?(q)", "symbol 'q' is not bound"]),
    (f"{R} WEIGHT ?(p) SEMANTICS LOGICAL AS is_popular(^m) :- tweets(m, p)", CatalogError,
     ["SEMANTICS LOGICAL", "head symbols only (m)", "it uses p"]),
    (f"{R} WEIGHT = length(p) SEMANTICS RATIO AS is_popular(^m) :- tweets(m, p)", CatalogError,
     ["SEMANTICS RATIO", "it uses p"]),
    # --- rules: constants and types
    (f"{R} AS tag(^t) :- words(t, 3)", CatalogError, ["constant 3 (INTEGER)", "column 'word' (VARCHAR)"]),
    (f"{R} AS tag(^t) :- words('abc', w)", CatalogError, ["constant 'abc' is not of type INTEGER", "column 'token'"]),
    (f"{R} AS is_popular(^m) :- tweets(m, p), tokens(m)", CatalogError,
     ["symbol 'm' joins", "tweets(m, p)", "tokens(m)", "incompatible types"]),
    (f"{R} AS is_popular(^m) :- words(m, w)", CatalogError, ["symbol 'm' joins", "is_popular(^m)", "words(m, w)"]),
    # --- rules: heads
    (f"{R} AS tag(^t) = 'PRE' :- words(t, w)", CatalogError,
     ["tag(^t) = 'PRE'", "outside the domain", "Did you mean 'PER'?"]),
    (f"{R} AS entity(^t) = 3 :- words(t, w)", CatalogError, ["outside its CATEGORICAL(3) domain"]),
    (f"{R} AS is_popular(^m) = 'yes' :- tweets(m, p)", CatalogError, ["outside its BOOLEAN domain"]),
    (f"{R} FUNCTION EQUAL AS tag(a) = entity(b) :- words(a, w), words(b, w)", CatalogError, ["different domains"]),
    # --- rules: names
    ("CREATE RULE is_fan AS is_popular(^m) :- tweets(m, p)", CatalogError, ["a variable named 'is_fan' already exists"]),
    ("CREATE RULE movies AS is_popular(^m) :- tweets(m, p)", CatalogError, ["table or view named 'movies'"]),
    ("CREATE RULE fans_vote AS is_popular(^m) :- tweets(m, p)", CatalogError,
     ["rule 'fans_vote' already exists", "CREATE OR REPLACE RULE"]),
    # --- replacing and dropping
    ("CREATE OR REPLACE VARIABLE is_fan(person INT) DOMAIN BOOLEAN FROM (SELECT id FROM tokens)", CatalogError,
     ["cannot replace variable 'is_fan'", "rule 'fans_vote' would no longer be valid", "symbol 'p' joins"]),
    ("DROP VARIABLE is_fan", CatalogError, ["cannot drop variable 'is_fan'", "rule(s) fans_vote use it"]),
    ("DROP VARIABLE is_fna", CatalogError, ["unknown variable 'is_fna'", "Did you mean 'is_fan'?"]),
    ("DROP RULE fans_vot", CatalogError, ["unknown rule 'fans_vot'", "Did you mean 'fans_vote'?"]),
    ("DROP RULE is_fan", CatalogError, ["'is_fan' is a variable, not a rule", "DROP VARIABLE is_fan"]),
    ("DROP VARIABLE fans_vote", CatalogError, ["'fans_vote' is a rule"]),
]


def _state(db):
    """Everything a failed statement must leave as it was."""
    con = db.duckdb
    tables = con.execute(
        "SELECT table_name FROM duckdb_tables() UNION ALL SELECT view_name FROM duckdb_views() WHERE NOT internal "
        "ORDER BY 1"
    ).fetchall()
    data = {t: sorted(map(repr, con.execute(f'SELECT * FROM "{t}"').fetchall())) for (t,) in tables}
    return (
        db.execute("SHOW VARIABLES").fetchall(),
        db.execute("SHOW RULES").fetchall(),
        db.catalog.version(),
        data,
        con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY 1").fetchall(),
    )


@pytest.fixture(scope="module")
def model_db():
    # Shared by every case: each failed statement must leave it exactly as it was, which every
    # test checks, so a leak would also show up in the cases that follow.
    with pdbq.connect() as db:
        db.execute(MOVIES_SQL + MOVIES_MODEL + EXTRA)
        yield db


@pytest.mark.parametrize(("statement", "error", "fragments"), CASES, ids=[c[0][:60] for c in CASES])
def test_validation_error_leaves_everything_unchanged(model_db, statement, error, fragments):
    before = _state(model_db)
    with pytest.raises(error) as info:
        model_db.execute(statement)
    assert type(info.value) is error
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    assert _state(model_db) == before


def test_duckdb_error_is_attached(model_db):
    with pytest.raises(CatalogError) as info:
        model_db.execute(f"{V} FROM (SELECT movi FROM movies)")
    assert "Referenced column" in str(info.value.__cause__)


# ---------------------------------------------------------------------------------------------
# nodes the parser would refuse, built in Python (importers do this): the catalog checks them too

def _var(**changes):
    base = CreateVariable("v", (Column("movie", "TEXT"),), Domain(DomainKind.BOOLEAN), "SELECT movie FROM movies")
    return dataclasses.replace(base, **changes)


@pytest.mark.parametrize(
    ("node", "fragment"),
    [
        (_var(domain=Domain(DomainKind.VALUES, ("a", "a"), 2)), "domain value 'a' is listed twice"),
        (_var(domain=Domain(DomainKind.VALUES, (), 0)), "lists no values"),
        (_var(domain=Domain(DomainKind.CATEGORICAL, (), 0)), "CATEGORICAL(0)"),
        (_var(domain=Domain(DomainKind.BOOLEAN, (), 3)), "BOOLEAN domain has 2 values"),
        (_var(columns=()), "declares no key columns"),
        (_var(columns=(Column("m", "TEXT"), Column("M", "TEXT"))), "key column 'm' is declared twice"),
        (_var(columns=(Column("m", "NOT A TYPE"),)), "unknown type"),
        (_var(source="DELETE FROM movies"), "must be a single SELECT query"),
        (_var(source="SELECT movie FROM movies; SELECT 1"), "must be a single SELECT query"),
        (_var(name=""), "needs a name"),
        (_var(per_row_cardinality=True), "per-row cardinalities need a CATEGORICAL domain"),
        (_var(per_row_cardinality=True, domain=Domain(DomainKind.CATEGORICAL, (), 3)), "then one integer column"),
        (_var(per_row_cardinality=True, domain=Domain(DomainKind.CATEGORICAL, (), 3),
              source="SELECT movie, 4 FROM movies"), "cardinality 4; per-row cardinalities lie in 2 .. 3"),
    ],
)
def test_python_built_variable_errors(model_db, node, fragment):
    before = _state(model_db)
    with pytest.raises(CatalogError, match=None) as info:
        model_db.catalog.create_variable(node)
    assert fragment in str(info.value)
    assert _state(model_db) == before


def _sym(name, head=False):
    return Term(TermKind.SYMBOL, name, head)


def test_python_built_rule_errors(model_db):
    head = Head(HeadKind.ATOM, (Atom("is_popular", (_sym("m", True),)),))
    body = (Atom("tweets", (_sym("m"), _sym("p"))),)
    cases = [
        (CreateRule("r", Head(HeadKind.ATOM, (Atom("is_popular", (Term(TermKind.WILDCARD, "_"),)),)), body),
         "'_' cannot stand in a head"),
        (CreateRule("r", Head(HeadKind.EQUAL, head.atoms), body), "a equal head has 2 atom(s), not 1"),
        (CreateRule("r", Head(HeadKind.COMPARE, head.atoms), body), "has no value"),
        (CreateRule("r", head, (Atom("tweets", (_sym("m"), Term(TermKind.CONSTANT, "NULL"))),)), "NULL never matches"),
        (CreateRule("r", head, body, head_symbols=("x",)), "head symbol 'x' is not bound"),
        (CreateRule("r", head, (Atom("tweets", (_sym("m"), Term(TermKind.CONSTANT, "(SELECT 'x')"))),)),
         "is not a constant"),
    ]
    for node, fragment in cases:
        with pytest.raises(CatalogError) as info:
            model_db.catalog.create_rule(node)
        assert fragment in str(info.value)


def test_per_row_cardinality_round_trip(tmp_path):
    path = tmp_path / "uai.duckdb"
    node = CreateVariable(
        "x", (Column("id", "BIGINT"),), Domain(DomainKind.CATEGORICAL, (), 3),
        "SELECT id, 2 + id % 2 FROM range(4) t(id)", per_row_cardinality=True,
    )
    with pdbq.connect(path) as db:
        db.catalog.create_variable(node)
        assert db.execute("SELECT * FROM x").columns == ["id"]
        bad = dataclasses.replace(node, name="y", evidence="SELECT 0, 2")  # row 0 has 2 values
        with pytest.raises(EvidenceError, match="not below that variable's own cardinality"):
            db.catalog.create_variable(bad)
        db.catalog.create_variable(dataclasses.replace(bad, evidence="SELECT 1, 2"))  # row 1 has 3
    with pdbq.connect(path) as db:
        assert db.catalog.variable("x").per_row_cardinality
        assert db.catalog.variable("x").source == node.source
