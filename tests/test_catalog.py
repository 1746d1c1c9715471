"""The catalog: storing, listing, reconstructing, replacing and dropping definitions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from conftest import MOVIES_MODEL, MOVIES_SQL, TOKENS_SQL

import pdbq
from pdbq.catalog.store import SCHEMA_VERSION, Catalog, schema_sql
from pdbq.catalog.text import statement_sql
from pdbq.language.nodes import (
    Atom,
    Column,
    CreateRule,
    CreateVariable,
    Domain,
    DomainKind,
    Drop,
    Head,
    HeadKind,
    Term,
    TermKind,
    Weight,
    WeightKind,
)
from pdbq.language.parser import parse_script, parse_statement

MORE_MODEL = TOKENS_SQL + """
CREATE TABLE pairs AS SELECT * FROM (VALUES (0, 1, 0.9), (1, 3, 0.2)) t(a, b, sim);
CREATE VARIABLE tag(token INT) DOMAIN ('PER', 'ORG', 'LOC', 'O') FROM (SELECT id FROM tokens)
    EVIDENCE (SELECT 2, 'O');
CREATE VARIABLE entity(token BIGINT) DOMAIN CATEGORICAL(3) FROM (SELECT id FROM tokens);
CREATE RULE word_feature WEIGHT ?(w) AS tag(^t) = 'PER' :- words(t, w);
CREATE RULE affinity WEIGHT = sim - 0.3 FUNCTION EQUAL AS entity(a) = entity(b) :- pairs(a, b, sim);
CREATE RULE not_loc WEIGHT -0.5 AS tag(^t) = 'LOC' :- words(t, _), NOT is_fan('bart');
"""


def _show(db, kind):
    return db.execute(f"SHOW {kind}").fetchall()


def test_round_trip_through_a_file(tmp_path):
    path = tmp_path / "model.duckdb"
    with pdbq.connect(path) as db:
        db.execute(MOVIES_SQL + MOVIES_MODEL + MORE_MODEL)
        shown = (_show(db, "VARIABLES"), _show(db, "RULES"))
        nodes = (db.catalog.variables(), db.catalog.rules())
        version = db.catalog.version()
        written = {s.name: s for s in parse_script(MOVIES_MODEL + MORE_MODEL) if isinstance(s, (CreateVariable, CreateRule))}
    with pdbq.connect(path) as db:
        assert (_show(db, "VARIABLES"), _show(db, "RULES")) == shown
        assert db.catalog.version() == version == 8
        # a fresh Catalog re-parses the stored text: the same nodes as the session that made them
        assert (db.catalog.variables(), db.catalog.rules()) == nodes
        assert {**db.catalog.variables(), **db.catalog.rules()} == written
        assert db.execute("SELECT count(*) FROM is_popular").fetchall() == [(3,)]
    assert [r[0] for r in shown[0]] == ["entity", "is_fan", "is_popular", "tag"]
    assert [r[0] for r in shown[1]] == ["affinity", "fans_vote", "not_loc", "word_feature"]


def test_show_lists_normalised_fields(movies_model):
    variables = movies_model.execute("SHOW VARIABLES")
    assert variables.columns == ["name", "keys", "domain", "cardinality", "source", "evidence"]
    rows = {r[0]: r for r in variables.fetchall()}
    assert rows["is_fan"][1:4] == ("person VARCHAR", "BOOLEAN", 2)
    assert rows["is_fan"][5] == "SELECT person, fan FROM labels"
    assert rows["is_popular"][5] is None
    rules = movies_model.execute("SHOW RULES")
    assert rules.columns == ["name", "rule", "weight", "semantics", "function", "definition", "analysis"]
    assert [r[:5] for r in rules.fetchall()] == [
        ("fans_vote", "is_popular(^m) :- tweets(m, p), is_fan(p), p <> 'bot'", "0.8", "RATIO", "VOTE")
    ]
    assert "hierarchical" in rules.fetchall()[0][6]
    movies_model.execute(MORE_MODEL)
    by_name = {r[0]: r for r in movies_model.execute("SHOW RULES").fetchall()}
    assert by_name["word_feature"][1:3] == ("tag(^t) = 'PER' :- words(t, w)", "?(w)")
    assert by_name["affinity"][1:5] == ("entity(a) = entity(b) :- pairs(a, b, sim)", "= sim - 0.3", "LINEAR", "EQUAL")
    tag = {r[0]: r for r in movies_model.execute("SHOW VARIABLES").fetchall()}["tag"]
    assert tag[1:4] == ("token INTEGER", "('PER', 'ORG', 'LOC', 'O')", 4)


def test_empty_catalog_shows_nothing_and_writes_nothing(movies_db):
    assert len(movies_db.execute("SHOW VARIABLES")) == 0
    assert movies_db.execute("SHOW RULES").columns[0] == "name"
    assert movies_db.catalog.version() == 0
    tables = movies_db.execute("SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'pdbq_%'")
    assert len(tables) == 0


def test_catalog_api(movies_model):
    cat = movies_model.catalog
    assert isinstance(cat, Catalog)
    assert cat.variable("IS_POPULAR").name == "is_popular"
    assert cat.rule("fans_vote").weight == Weight(WeightKind.CONSTANT, 0.8)
    assert cat.key_types("is_popular") == (Column("movie", "VARCHAR"),)
    assert cat.relation_columns("tweets") == (Column("movie", "VARCHAR"), Column("person", "VARCHAR"))
    assert cat.relation_columns("is_fan") == (Column("person", "VARCHAR"),)
    with pytest.raises(pdbq.CatalogError, match="unknown variable 'is_popula'. Did you mean 'is_popular'"):
        cat.variable("is_popula")
    with pytest.raises(pdbq.CatalogError, match="unknown rule 'fan_vote'. Did you mean 'fans_vote'"):
        cat.rule("fan_vote")
    with pytest.raises(pdbq.CatalogError, match="unknown variable 'is_fa'"):
        cat.key_types("is_fa")
    with pytest.raises(pdbq.CatalogError, match="unknown relation 'tweet'. Did you mean 'tweets'"):
        cat.relation_columns("tweet")
    assert cat.show("rules").num_rows == 1


def test_variable_relation_is_a_view(movies_model):
    db = movies_model
    assert sorted(db.execute("SELECT movie FROM is_popular").fetchall()) == [("Avengers",), ("Twilight",), ("Up",)]
    # the name is taken in DuckDB too
    with pytest.raises(Exception, match="already exists"):
        db.execute("CREATE TABLE is_popular(x INT)")
    db.execute("DROP RULE fans_vote; DROP VARIABLE is_popular")
    db.execute("CREATE TABLE is_popular(x INT)")  # free again


def test_version_counts_successful_changes(movies_db):
    cat = movies_db.catalog
    movies_db.execute("CREATE VARIABLE is_popular(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies)")
    assert cat.version() == 1
    with pytest.raises(pdbq.CatalogError):
        movies_db.execute("CREATE VARIABLE is_popular(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies)")
    assert cat.version() == 1
    movies_db.execute("CREATE OR REPLACE VARIABLE is_popular(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies)")
    movies_db.execute("DROP VARIABLE IF EXISTS nothing_here")  # a no-op changes nothing
    assert cat.version() == 2
    movies_db.execute("DROP VARIABLE is_popular")
    assert cat.version() == 3


def test_or_replace_redefines(movies_model):
    db = movies_model
    db.execute("CREATE OR REPLACE RULE fans_vote WEIGHT 2 AS is_popular(^m) :- tweets(m, p)")
    assert db.execute("SHOW RULES").fetchall()[0][1:3] == ("is_popular(^m) :- tweets(m, p)", "2.0")
    db.execute(
        "CREATE OR REPLACE VARIABLE is_popular(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies WHERE movie <> 'Up')"
    )
    assert len(db.execute("SELECT * FROM is_popular")) == 2
    assert db.catalog.variable("is_popular").or_replace


def test_drop_if_exists_and_dependencies(movies_model):
    db = movies_model
    db.execute("DROP RULE IF EXISTS nope; DROP VARIABLE IF EXISTS nope")
    db.execute("DROP RULE fans_vote")
    db.execute("DROP VARIABLE is_fan")
    assert [r[0] for r in _show(db, "VARIABLES")] == ["is_popular"]
    assert _show(db, "RULES") == []


def test_nodes_built_in_python_are_stored_as_canonical_text(movies_db):
    cat = movies_db.catalog
    var = CreateVariable("is_popular", (Column("movie", "TEXT"),), Domain(DomainKind.BOOLEAN), "SELECT movie FROM movies")
    sym = lambda s, head=False: Term(TermKind.SYMBOL, s, head)  # noqa: E731
    rule = CreateRule(
        "votes",
        Head(HeadKind.ATOM, (Atom("is_popular", (sym("m", True),)),)),
        (Atom("tweets", (sym("m"), Term(TermKind.WILDCARD, "_"))),),
        weight=Weight(WeightKind.LEARNABLE, 0.0),
        head_symbols=("m",),
    )
    cat.create_variable(var)
    cat.create_rule(rule)
    for node in (var, rule):
        text = statement_sql(node)
        assert parse_statement(text) == type(node)(**{**node.__dict__, "text": text})
    assert cat.rule("votes").text == statement_sql(rule)
    cat.drop(Drop("RULE", "votes"))
    assert cat.rules() == {}


def test_schema_file_is_package_data():
    text = schema_sql()
    assert f"schema_version: {SCHEMA_VERSION}" in text
    for table in ("pdbq_meta", "pdbq_variables", "pdbq_rules"):
        assert f"CREATE TABLE IF NOT EXISTS {table}" in text


def test_catalog_survives_user_transaction(movies_db):
    db = movies_db
    db.execute("BEGIN; CREATE VARIABLE is_popular(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies); ROLLBACK")
    assert _show(db, "VARIABLES") == []
    db.execute("BEGIN; CREATE VARIABLE is_popular(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies); COMMIT")
    assert [r[0] for r in _show(db, "VARIABLES")] == ["is_popular"]


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 999).map(lambda k: f"0.{k:03d}".rstrip("0")), st.sampled_from(["", "  "]))
def test_show_rules_shows_what_was_written_beside_the_weight(p, space):
    """``p::head :- body`` compiles to weight logit(p) / 2 under FUNCTION ISTRUE (a ±1 factor): SHOW RULES lists that,
    and beside it the statement as written, with ``p::`` as the user typed it."""
    import math

    with pdbq.connect() as db:
        db.execute("CREATE TABLE sensors AS SELECT * FROM range(3) r(x);"
                   "CREATE VARIABLE faulty(x BIGINT) DOMAIN BOOLEAN FROM (SELECT x FROM sensors);"
                   f"CREATE RULE fault_prior AS {p}{space}::faulty(x) :- sensors(x);")
        table = db.execute("SHOW RULES").arrow()
        row = table.to_pylist()[0]
        assert table.column_names[:6] == ["name", "rule", "weight", "semantics", "function", "definition"]
        assert 2 * float(row["weight"]) == pytest.approx(math.log(float(p) / (1 - float(p)))) and row["function"] == "ISTRUE"
        assert f"AS {p}{space}::faulty(x) :- sensors(x)" in row["definition"]
