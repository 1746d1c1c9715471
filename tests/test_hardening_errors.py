"""Plain Python and raw DuckDB errors become PdbqErrors naming the offending thing, deep nesting
is a ParseError (or passes to DuckDB untouched where DuckDB accepts it), and a failed statement
leaves no internal table behind."""

from __future__ import annotations

import pytest
from conftest import NAMES_CLUSTER_SQL

import pdbq
from pdbq.errors import CatalogError, OptionError, ParseError, PdbqError


@pytest.fixture
def db():
    with pdbq.connect() as d:
        d.execute("CREATE TABLE people(name TEXT); CREATE TABLE t AS SELECT * FROM range(3) r(i)")
        d.execute("CREATE VARIABLE cancer(person BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t)")
        d.execute("CREATE RULE b WEIGHT 0.5 FUNCTION ISTRUE AS cancer(i) :- t(i)")
        yield d


def test_deeply_nested_copy_target_is_a_parse_error(db):
    with pytest.raises(ParseError, match="nested too deeply"):
        db.execute("COPY (SELECT c.person, PROB(c) AS p FROM cancer c) TO " + "(" * 100 + "'x.csv'" + ")" * 100)


def test_deeply_nested_plain_insert_goes_to_duckdb_untouched(db):
    db.execute("INSERT INTO people VALUES ('ann'), " + "(" * 1000 + "'bob'" + ")" * 1000)
    assert db.execute("SELECT name FROM people ORDER BY name").fetchall() == [("ann",), ("bob",)]


def test_unknown_column_of_a_variable_relation_names_the_relation_and_its_columns(db):
    with pytest.raises(CatalogError, match=r"column 'name' of c does not exist: c is the variable relation 'cancer', "
                                           r"whose columns are person"):
        db.execute("SELECT c.name, PROB(c) FROM cancer c USING EXACT")
    with pytest.raises(CatalogError, match="Did you mean 'person'"):
        db.execute("SELECT c.persn, PROB(c) FROM cancer c USING EXACT")


@pytest.mark.parametrize("text", ["IMPORT UAI 'a\x00b.uai' AS q", "EXPORT UAI cancer TO 'a\x00b.uai'"])
def test_nul_byte_in_a_file_name_is_a_pdbq_error(db, text):
    with pytest.raises(PdbqError, match="NUL byte"):
        db.execute(text)


def test_failed_cluster_statement_leaves_no_internal_table():
    with pdbq.connect() as db:
        db.execute(NAMES_CLUSTER_SQL)
        tables = lambda: {r[0] for r in db.duckdb.execute("SELECT table_name FROM duckdb_tables()").fetchall()}  # noqa: E731
        before = tables()
        with pytest.raises(PdbqError):
            db.execute("SELECT e.id, PROB(e) FROM e USING ANNEAL")  # PROB of a cluster needs a key
        assert not {t for t in tables() - before if "cluster_map" in t}
        db.execute("SELECT e.id, MAP(e) FROM e USING ANNEAL WITH (seed = 1)")
        assert not {t for t in tables() if "cluster_map" in t}


def test_scheduler_nonsense_is_an_option_error():
    with pdbq.connect() as db:
        db.execute(NAMES_CLUSTER_SQL)
        with pytest.raises(OptionError, match="scheduler"):
            db.execute("SELECT MAP(e) FROM e USING ANNEAL WITH (scheduler = 'nonsense')")
