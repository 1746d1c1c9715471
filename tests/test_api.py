"""The Python API: connect, Database.execute/sql, Result, read-only files, schema versions."""

from __future__ import annotations

import hashlib
import sys

import duckdb
import pyarrow as pa
import pytest
from conftest import MOVIES_MODEL, MOVIES_SQL

import pdbq
from pdbq.catalog.store import SCHEMA_VERSION


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_public_names():
    for name in ("connect", "Database", "Result", "PdbqError", "CatalogError", "SchemaVersionError", "ParseError"):
        assert name in pdbq.__all__ and hasattr(pdbq, name)


def test_execute_returns_the_last_result(movies_db):
    db = movies_db
    assert db.execute("CREATE TABLE t(a INT)") is None
    assert db.execute("") is None
    assert db.execute("-- only a comment") is None
    result = db.execute("INSERT INTO t VALUES (1), (2); SELECT a, a * 10 AS b FROM t ORDER BY a")
    assert isinstance(result, pdbq.Result)
    assert result.fetchall() == [(1, 10), (2, 20)]
    assert result.columns == ["a", "b"]
    assert result.diagnostics == {}
    assert db.execute(MOVIES_MODEL) is None  # CREATE RULE last: nothing to return
    assert isinstance(db.execute("SHOW RULES"), pdbq.Result)


def test_intermediate_results_do_not_block_the_connection(movies_db):
    movies_db.execute("SELECT * FROM range(100000); SELECT 1")
    assert movies_db.sql("SELECT 2 AS x").fetchall() == [(2,)]
    movies_db.execute("SELECT * FROM movies; CREATE TABLE after AS SELECT 1 AS y")
    assert movies_db.sql("SELECT * FROM after").fetchall() == [(1,)]


def test_result_api(movies_db):
    result = movies_db.execute("SELECT movie, length(movie) AS n FROM movies ORDER BY movie")
    assert len(result) == 3
    assert isinstance(result.arrow(), pa.Table)
    assert result.arrow().column("n").to_pylist() == [8, 8, 2]
    rel = result.relation()
    assert isinstance(rel, duckdb.DuckDBPyRelation)
    assert rel.filter("n > 2").fetchall() == [("Avengers", 8), ("Twilight", 8)]
    assert result.relation(movies_db.duckdb).fetchall() == result.fetchall()
    text = repr(result)
    assert "Avengers" in text and "varchar" in text and "3 rows" in text
    html = pdbq.Result(pa.table({"x": ["<b>"]}))._repr_html_()
    assert "&lt;b&gt;" in html and "<b>" not in html.replace("<table>", "")
    with pytest.raises(ValueError, match="no connection"):
        pdbq.Result(pa.table({"x": [1]})).relation()
    with pytest.raises(TypeError):
        pdbq.Result([1, 2])  # type: ignore[arg-type]


def test_result_df():
    pytest.importorskip("pandas")
    df = pdbq.Result(pa.table({"x": [1, 2]})).df()
    assert list(df["x"]) == [1, 2]


def test_repr_truncates_long_results(movies_db):
    result = movies_db.execute("SELECT range AS i FROM range(1000)")
    text = repr(result)
    assert "1000 rows" in text and "(20 shown)" in text
    assert len(text.splitlines()) < 40
    assert "(20 shown)" in result._repr_html_()


def test_sql_returns_relations(movies_model):
    db = movies_model
    rel = db.sql("SELECT movie FROM movies WHERE movie <> 'Up'")
    assert isinstance(rel, duckdb.DuckDBPyRelation)
    assert sorted(rel.fetchall()) == [("Avengers",), ("Twilight",)]
    shown = db.sql("SHOW VARIABLES")
    assert isinstance(shown, duckdb.DuckDBPyRelation)
    assert shown.filter("name = 'is_fan'").fetchall()[0][1] == "person VARCHAR"
    assert db.sql("CREATE VARIABLE liked(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies)") is None
    assert "liked" in db.catalog.variables()
    assert db.sql("") is None
    assert db.duckdb.sql("SELECT count(*) FROM liked").fetchall() == [(3,)]


def test_pass_through_errors_keep_duckdbs_type(movies_db):
    with pytest.raises(duckdb.CatalogException, match="movi"):
        movies_db.execute("SELECT * FROM movi")
    with pytest.raises(duckdb.BinderException):
        movies_db.execute("SELECT nope FROM movies")
    with pytest.raises(duckdb.ConstraintException):
        movies_db.execute("CREATE TABLE k(a INT PRIMARY KEY); INSERT INTO k VALUES (1), (1)")
    with pytest.raises(duckdb.Error):
        movies_db.execute("SELECT 1 +")
    # the connection is still usable
    assert movies_db.execute("SELECT count(*) FROM movies").fetchall() == [(3,)]


def test_pdbq_errors_are_pdbq_errors(movies_db):
    with pytest.raises(pdbq.ParseError):
        movies_db.execute("CREATE VARIABLE v(a INT) DOMAIN ('a', 'a') FROM (SELECT 1)")
    with pytest.raises(pdbq.CatalogError):
        movies_db.execute("DROP RULE nothing")
    with pytest.raises(TypeError):
        movies_db.execute(42)  # type: ignore[arg-type]


def test_context_manager_and_close():
    with pdbq.connect() as db:
        assert db.execute("SELECT 1").fetchall() == [(1,)]
        assert "open" in repr(db)
    assert "closed" in repr(db)
    with pytest.raises(pdbq.PdbqError, match="closed"):
        db.execute("SELECT 1")
    with pytest.raises(pdbq.PdbqError, match="closed"):
        db.duckdb  # noqa: B018
    db.close()  # idempotent


def test_read_only_never_writes(tmp_path):
    path = tmp_path / "ro.duckdb"
    with pdbq.connect(path) as db:
        db.execute(MOVIES_SQL + MOVIES_MODEL)
        shown = db.execute("SHOW RULES").fetchall()
    digest = _digest(path)
    with pdbq.connect(path, read_only=True) as db:
        assert db.read_only and "read-only" in repr(db)
        assert db.execute("SHOW RULES").fetchall() == shown
        assert db.execute("SELECT count(*) FROM is_popular").fetchall() == [(3,)]
        with pytest.raises(pdbq.PdbqError, match="read-only"):
            db.execute("CREATE VARIABLE liked(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies)")
        with pytest.raises(pdbq.PdbqError, match="read-only"):
            db.execute("DROP RULE fans_vote")
        with pytest.raises(duckdb.Error):
            db.execute("INSERT INTO movies VALUES ('Heat')")
    assert _digest(path) == digest


def test_plain_duckdb_file_is_not_changed_by_reading(tmp_path):
    path = tmp_path / "plain.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT 1 AS a")
    con.close()
    digest = _digest(path)
    with pdbq.connect(path) as db:
        assert db.execute("SHOW VARIABLES").fetchall() == []
        assert db.execute("SELECT * FROM t").fetchall() == [(1,)]
    assert _digest(path) == digest
    with pdbq.connect(path, read_only=True) as db:
        assert db.catalog.version() == 0


@pytest.mark.parametrize("read_only", [False, True])
def test_newer_schema_version_is_refused_untouched(tmp_path, read_only):
    path = tmp_path / "future.duckdb"
    with pdbq.connect(path) as db:
        db.execute(MOVIES_SQL + MOVIES_MODEL)
        db.duckdb.execute("UPDATE pdbq_meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
    digest = _digest(path)
    with pytest.raises(pdbq.SchemaVersionError, match=f"schema version {SCHEMA_VERSION + 1}, newer than"):
        pdbq.connect(path, read_only=read_only)
    assert _digest(path) == digest
    # the refused connection was closed: the file can be opened again by plain DuckDB
    con = duckdb.connect(str(path))
    assert con.execute("SELECT value FROM pdbq_meta WHERE key = 'schema_version'").fetchall() == [
        (str(SCHEMA_VERSION + 1),)
    ]
    con.close()


def test_current_schema_version_is_written(tmp_path):
    path = tmp_path / "now.duckdb"
    with pdbq.connect(path) as db:
        db.execute(MOVIES_SQL + MOVIES_MODEL)
        rows = db.duckdb.execute("SELECT key, value FROM pdbq_meta ORDER BY key").fetchall()
    assert rows == [("catalog_version", "3"), ("schema_version", str(SCHEMA_VERSION))]
