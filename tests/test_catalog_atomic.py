"""Atomicity: a statement that fails halfway leaves the catalog, its views and the data as before."""

from __future__ import annotations

import pytest
from conftest import MOVIES_MODEL, MOVIES_SQL

import pdbq
from pdbq.catalog.store import Catalog


def _snapshot(db):
    con = db.duckdb
    return (
        db.execute("SHOW VARIABLES").fetchall(),
        db.execute("SHOW RULES").fetchall(),
        db.catalog.version(),
        con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY 1").fetchall(),
        con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall(),
        con.execute("SELECT * FROM movies ORDER BY 1").fetchall(),
    )


class Boom(Exception):
    pass


def _fail_at_version_bump(monkeypatch):
    """Make the last step of every catalog change fail, after the view and the row were written."""
    def boom(self):
        raise Boom("disk full, say")

    monkeypatch.setattr(Catalog, "_bump_version", boom)


@pytest.mark.parametrize(
    "statement",
    [
        "CREATE VARIABLE liked(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies)",
        "CREATE OR REPLACE VARIABLE is_popular(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies LIMIT 1)",
        "CREATE RULE extra WEIGHT 1 AS is_popular(^m) :- tweets(m, p)",
        "CREATE OR REPLACE RULE fans_vote WEIGHT 3 AS is_popular(^m) :- tweets(m, p)",
        "DROP RULE fans_vote",
    ],
)
def test_failure_midway_rolls_back(tmp_path, monkeypatch, statement):
    path = tmp_path / "m.duckdb"
    with pdbq.connect(path) as db:
        db.execute(MOVIES_SQL + MOVIES_MODEL)
        before = _snapshot(db)
        _fail_at_version_bump(monkeypatch)
        with pytest.raises(Boom):
            db.execute(statement)
        assert _snapshot(db) == before
        monkeypatch.undo()
        db.execute(statement)  # the same statement succeeds once nothing fails
        assert _snapshot(db) != before
    with pdbq.connect(path) as db:
        assert _snapshot(db) != before


def test_failed_first_definition_leaves_no_catalog_tables(movies_db, monkeypatch):
    _fail_at_version_bump(monkeypatch)
    with pytest.raises(Boom):
        movies_db.execute("CREATE VARIABLE liked(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies)")
    names = movies_db.execute("SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'pdbq%'").fetchall()
    assert names == []
    assert movies_db.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'liked'").fetchall() == [(0,)]


def test_script_statements_are_atomic_one_by_one(movies_db):
    with pytest.raises(pdbq.CatalogError):
        movies_db.execute(
            "CREATE TABLE a(x INT);"
            "CREATE VARIABLE v(m TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM nope);"
            "CREATE TABLE b(x INT)"
        )
    tables = {r[0] for r in movies_db.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert "a" in tables and "b" not in tables
    assert len(movies_db.execute("SHOW VARIABLES")) == 0


def test_user_transaction_decides(movies_db):
    db = movies_db
    db.execute("BEGIN")
    db.execute("CREATE VARIABLE liked(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies)")
    db.execute("INSERT INTO movies VALUES ('Heat')")
    assert len(db.execute("SHOW VARIABLES")) == 1
    db.execute("ROLLBACK")
    assert len(db.execute("SHOW VARIABLES")) == 0
    assert db.execute("SELECT count(*) FROM movies").fetchall() == [(3,)]
    assert db.catalog.version() == 0
