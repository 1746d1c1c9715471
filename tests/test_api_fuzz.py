"""Hypothesis: whatever text reaches Database.execute, the only errors are PdbqError subclasses
(pdbq statements) or duckdb.Error subclasses (passed-through SQL) — never a Python crash."""

from __future__ import annotations

import duckdb
import pytest
from conftest import MOVIES_MODEL, MOVIES_SQL
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pdbq

EXTRA_MODEL = """
CREATE TABLE words AS SELECT * FROM (VALUES (0, 'Bart'), (1, 'Simpson')) t(token, word);
CREATE VARIABLE tag(token INT) DOMAIN ('PER', 'ORG', 'O') FROM (SELECT token FROM words) EVIDENCE (SELECT 1, 'O');
CREATE RULE word_feature WEIGHT ?(w) AS tag(^t) = 'PER' :- words(t, w);
CREATE RULE same WEIGHT = 0.5 FUNCTION EQUAL AS tag(a) = tag(b) :- words(a, w), words(b, w), a < b;
SHOW VARIABLES; SHOW RULES; DROP RULE same; DROP VARIABLE IF EXISTS nothing;
SELECT m.movie, PROB(m) AS p FROM is_popular AS m GIVEN is_fan('bart') = TRUE USING GIBBS WITH (seed = 7, steps = 200, chains = 2);
"""
VALID = MOVIES_MODEL + EXTRA_MODEL

# pieces a mutation may insert: pdbq keywords and punctuation that sit near parser decisions
PIECES = [
    "(", ")", ",", ";", "'", '"', ":-", "^", "_", "=", "?", "?(", "NOT ", "AS ", "WEIGHT ", "DOMAIN ", "FROM ",
    "EVIDENCE ", "CATEGORICAL(", "BOOLEAN", "RULE ", "VARIABLE ", "OR REPLACE ", "SEMANTICS ", "FUNCTION ",
    "PROB(", "DIST(", "MAP(", "GIVEN ", "USING ", "WITH (", "EXPLAIN ", "$$", "--", "/*", "*/", "\n", " ",
    "0", "-1", "1e400", "NULL", "TRUE", "is_popular", "tweets", "m", "p",
]

ALLOWED = (pdbq.PdbqError, duckdb.Error)


@st.composite
def mutated(draw):
    text = VALID
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "duplicate"]))
        if op == "insert":
            text = text[:i] + draw(st.sampled_from(PIECES)) + text[i:]
        elif op == "delete":
            j = min(len(text), i + draw(st.integers(1, 12)))
            text = text[:i] + text[j:]
        else:
            j = min(len(text), i + draw(st.integers(1, 40)))
            text = text[:j] + text[i:j] + text[j:]
    return text


def _run(db, text):
    try:
        db.execute(text)
    except ALLOWED:
        pass


@pytest.fixture(scope="module")
def tables_db():
    with pdbq.connect() as db:
        db.execute(MOVIES_SQL)
        yield db


@settings(max_examples=140, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=120)
       | st.lists(st.sampled_from(PIECES), max_size=25).map("".join))
def test_arbitrary_text(tables_db, text):
    _run(tables_db, text)
    # whatever happened, the connection still works
    assert tables_db.execute("SELECT 1").fetchall() == [(1,)]


@settings(max_examples=60, deadline=None)
@given(mutated())
def test_mutated_scripts(text):
    with pdbq.connect() as db:
        db.execute(MOVIES_SQL)
        _run(db, text)
        # the catalog is readable and consistent with what was stored
        shown = db.execute("SHOW VARIABLES").fetchall()
        assert set(db.catalog.variables()) == {r[0] for r in shown}
        assert len(db.catalog.rules()) == len(db.execute("SHOW RULES"))


def test_surrogates_are_refused_cleanly(tables_db):
    with pytest.raises(pdbq.ParseError) as info:
        tables_db.execute("SELECT 1;\nSELECT '\ud800'")
    assert (info.value.line, info.value.col) == (2, 9)
