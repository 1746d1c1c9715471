"""Shared fixtures. Keep this small: fixtures used by one file belong in that file."""

from __future__ import annotations

import pytest

import pdbq

# A small movie model's data: three movies, people who tweet about them, one known fan.
MOVIES_SQL = """
CREATE TABLE movies AS SELECT * FROM (VALUES ('Up'), ('Twilight'), ('Avengers')) t(movie);
CREATE TABLE tweets AS SELECT * FROM (VALUES
    ('Up', 'bart'), ('Twilight', 'lisa'), ('Up', 'bot'), ('Avengers', 'lisa')) t(movie, person);
CREATE TABLE people AS SELECT DISTINCT person FROM tweets;
CREATE TABLE labels AS SELECT * FROM (VALUES ('bart', TRUE)) t(person, fan);
"""

# The model over MOVIES_SQL: two boolean variable relations and one rule.
MOVIES_MODEL = """
CREATE VARIABLE is_popular(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies);
CREATE VARIABLE is_fan(person TEXT) DOMAIN BOOLEAN
    FROM (SELECT person FROM people)
    EVIDENCE (SELECT person, fan FROM labels);
CREATE RULE fans_vote WEIGHT 0.8 SEMANTICS RATIO AS is_popular(^m) :- tweets(m, p), is_fan(p), p <> 'bot';
"""

# Tokens and their words: the data of the categorical (tag) and entity models of the catalog tests.
TOKENS_SQL = """
CREATE TABLE tokens AS SELECT * FROM range(4) t(id);
CREATE TABLE words AS SELECT * FROM (VALUES (0, 'Bart'), (1, 'Simpson'), (2, 'in'), (3, 'Springfield')) t(token, word);
"""


@pytest.fixture
def movies_db():
    """An in-memory database holding the movie tables (no model yet)."""
    with pdbq.connect() as db:
        db.execute(MOVIES_SQL)
        yield db


@pytest.fixture
def movies_model(movies_db):
    """``movies_db`` with MOVIES_MODEL defined."""
    movies_db.execute(MOVIES_MODEL)
    return movies_db
