"""Hypothesis: arbitrary text and mutated valid scripts raise only PdbqError subclasses."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pdbq.errors import PdbqError
from pdbq.language import parse_script, split_script, statement_complete
from pdbq.language.split import tokenize_script

VALID = """
CREATE OR REPLACE VARIABLE spouse(p1 TEXT, p2 TEXT) DOMAIN BOOLEAN
    FROM (SELECT p1, p2 FROM candidates) EVIDENCE (SELECT p1, p2, label FROM labels);
CREATE VARIABLE tag(token INT) DOMAIN ('PER', 'ORG') FROM (SELECT id FROM tokens);
CREATE VARIABLE topic(d INT) DOMAIN CATEGORICAL(3) FROM (SELECT id FROM docs);
CREATE RULE fans WEIGHT 0.8 SEMANTICS RATIO FUNCTION VOTE AS is_popular(^m) :- tweets(m, p), NOT is_fan(p, _), p <> 'bot';
CREATE RULE smokers WEIGHT ?(w) AS smokes(a) = smokes(b) :- friends(a, b, w), (a < b);
CREATE RULE aff WEIGHT = sim - 0.3 AS tag(^t) = 'PER' :- pairs(t, 'x', -1, sim);
SELECT m.movie, PROB(m) AS p, 1 - STDERR(m), DIST(m), MAP(m), PROB(m = 'PER') FROM is_popular AS m
  WHERE m.movie IN ('a', 'b') ORDER BY PROB(m) DESC LIMIT 10
  GIVEN is_fan('bart') = TRUE, (SELECT a, TRUE FROM f) AS is_fan USING QAM WITH (tolerance = 0.01, seed = -7, x = NULL);
EXPLAIN WITH c AS (SELECT 1) SELECT PROB(c) FROM c;
DROP RULE IF EXISTS fans; DROP VARIABLE tag; SHOW VARIABLES; SHOW RULES;
SELECT MAP(['a'], [1]), $$q;$$, 'it''s' -- c
"""


def _check(text: str) -> None:
    try:
        parse_script(text)
    except PdbqError:
        pass
    statement_complete(text)
    try:
        split_script(text)
    except PdbqError:
        pass


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list("abcPROBGIVEN()^:-_,;'\"$=<>0123456789.? \n/*")), max_size=80))
def test_arbitrary_text_raises_only_pdbq_errors(text: str) -> None:
    _check(text)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=60))
def test_arbitrary_unicode_raises_only_pdbq_errors(text: str) -> None:
    _check(text)


_TOKENS = [(t.start, t.end + 1) for t in tokenize_script(VALID)]


@st.composite
def mutated(draw) -> str:
    spans = list(_TOKENS)
    pieces = [VALID[a:b] for a, b in spans]
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(pieces) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "caret", "paren"]))
        if op == "delete":
            del pieces[i]
        elif op == "duplicate":
            pieces.insert(i, pieces[i])
        elif op == "swap" and i + 1 < len(pieces):
            pieces[i], pieces[i + 1] = pieces[i + 1], pieces[i]
        elif op == "caret":
            pieces.insert(i, "^")
        elif op == "paren":
            pieces.insert(i, draw(st.sampled_from(["(", ")", ",", "=", "GIVEN", "USING", "WITH", "NOT"])))
        if not pieces:
            pieces = ["SELECT"]
    return " ".join(pieces)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_scripts_raise_only_pdbq_errors(text: str) -> None:
    _check(text)


def test_unmutated_script_parses() -> None:
    assert len(parse_script(VALID)) == 13
