"""Long IN lists of literals in a probabilistic query are read as one bound constant
(`pdbq.language.long_lists`): a 300,000-literal list no longer spends seconds in sqlglot before a
time limit can act. Differential: the query variables a list selects are the rows DuckDB's own
``WHERE … IN (…)`` selects from the same keys, for lists drawn anew each run (integers, strings
with quotes, numeric-looking strings, NOT IN, lists compared with a column of another type, where
the query runs again with the literals as written); a DuckDB error is a PdbqError."""

from __future__ import annotations

import os

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pdbq
from pdbq.errors import ParseError, PdbqError
from pdbq.language.long_lists import MIN_ITEMS, mask_long_lists
from pdbq.language.parser import parse_statement

N = 600
_STRING_KEYS = [f"k{n}" if n % 4 == 0 else f"it's {n}" if n % 4 == 1 else f"ü{n}" if n % 4 == 2 else str(n)
                for n in range(N)]


@pytest.fixture(scope="module")
def db():
    d = pdbq.connect()
    d.execute(f"CREATE TABLE ti AS SELECT i - {N // 2} AS i FROM range({N}) r(i)")
    d.execute("CREATE TABLE ts(s TEXT)")
    d.execute("INSERT INTO ts SELECT unnest(?)", [_STRING_KEYS])
    d.execute(f"CREATE TABLE td AS SELECT i / 2 AS d FROM range({N}) r(i)")
    d.execute("CREATE VARIABLE vi(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM ti)")
    d.execute("CREATE VARIABLE vs(s TEXT) DOMAIN BOOLEAN FROM (SELECT s FROM ts)")
    d.execute("CREATE VARIABLE vd(d DOUBLE) DOMAIN BOOLEAN FROM (SELECT d FROM td)")
    d.execute("CREATE RULE bi WEIGHT 0.5 FUNCTION ISTRUE AS vi(i) :- ti(i)")
    yield d
    d.close()


_RELATIONS = {"vi": ("ti", "i"), "vs": ("ts", "s"), "vd": ("td", "d")}


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


@st.composite
def lists(draw, relation: str):
    # mostly the key column's own kind (members that match), sometimes the other (cast or refused)
    own = "str" if relation == "vs" else "int"
    kind = draw(st.sampled_from([own, own, own, "str" if own == "int" else "int"]))
    n = draw(st.integers(MIN_ITEMS - 5, MIN_ITEMS + 300))
    if kind == "int":
        ints = st.integers(-N, N) | st.integers(-(2**63) + 1, 2**63 - 1)
        values = draw(st.lists(ints, min_size=n, max_size=n))
        zeros = draw(st.booleans())
        items = [(f"-{abs(v):03d}" if v < 0 else f"{v:03d}") if zeros else str(v) for v in values]
    else:
        pool = st.sampled_from(_STRING_KEYS) | st.text(st.characters(blacklist_characters="\\\x00"), max_size=6)
        items = [_quote(v) for v in draw(st.lists(pool, min_size=n, max_size=n))]
    sep = draw(st.sampled_from([", ", ",", " ,\n   ", ",\t"]))
    return kind, sep.join(items), n


@settings(max_examples=int(os.environ.get("PDBQ_FUZZ_EXAMPLES", "25")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), relation=st.sampled_from(sorted(_RELATIONS)), negate=st.booleans())
def test_a_long_list_selects_what_duckdb_selects(db, data, relation, negate):
    kind, body, n = data.draw(lists(relation))
    table, column = _RELATIONS[relation]
    op = "NOT IN" if negate else "IN"
    sql = f"SELECT x.{column}, PROB(x) AS p FROM {relation} x WHERE x.{column} {op} ({body}) USING GIBBS " \
          "WITH (steps = 10, seed = 1)"
    stmt = parse_statement(sql)
    assert (stmt.as_written is not None) == (n >= MIN_ITEMS), (kind, n)  # bound exactly when long
    try:
        want = sorted(r[0] for r in db.duckdb.execute(f"SELECT {column} FROM {table} x WHERE x.{column} {op} ({body})")
                      .fetchall())
    except duckdb.Error:
        with pytest.raises(PdbqError):
            db.execute(sql)
        return
    got = sorted(r[0] for r in db.execute(sql).fetchall())
    assert got == want, (relation, kind, op, n)


def test_a_list_inside_a_string_or_a_comment_is_left_as_written(db):
    items = ", ".join(str(i) for i in range(MIN_ITEMS + 10))
    text = f"SELECT 'x IN ({items})' AS s, -- y IN ({items})\n PROB(x) AS p FROM vi x WHERE x.i = 1 USING GIBBS " \
           "WITH (steps = 10)"
    assert len(mask_long_lists(text).lists) == 2  # the scan takes them for lists: the tokenizer says not
    stmt = parse_statement(text)
    assert stmt.as_written is None
    (s, _), = db.execute(text).fetchall()
    assert s == f"x IN ({items})"


def test_an_error_after_a_long_list_is_placed_in_the_text_as_written():
    items = ",\n".join(str(i) for i in range(MIN_ITEMS + 10))
    text = f"SELECT PROB(x) FROM vi x\nWHERE x.i IN (\n{items}\n) AND x.i = = 1"
    assert mask_long_lists(text).lists
    with pytest.raises(ParseError) as e:
        parse_statement(text)
    line = text.count("\n") + 1
    assert (e.value.line, e.value.col) == (line, text.splitlines()[-1].index("= 1") + 1)


def test_a_300000_literal_list_is_one_node_and_answers_under_a_small_limit(db):
    # sqlglot made a node per literal and copied them with every rewrite (11.7 s at 20,000 under
    # time_limit = 1): the statement is now a handful of nodes whatever the list's length
    items = ", ".join(str(i) for i in range(-N // 2, 300_000 - N // 2))
    sql = f"SELECT x.i, PROB(x) AS p FROM vi x WHERE x.i IN ({items}) USING GIBBS WITH (time_limit = 1)"
    stmt = parse_statement(sql)
    assert sum(1 for _ in stmt.tree.walk()) < 60
    rows = db.execute(sql).fetchall()
    assert len(rows) == N


def test_a_list_of_another_type_is_compared_as_written(db):
    # '7' against a BIGINT key: DuckDB casts each literal to the key's type; the bound VARCHAR
    # members cannot be compared, so the query runs again with its literals as written
    items = ", ".join(_quote(str(i)) for i in range(MIN_ITEMS + 1))
    sql = f"SELECT x.i, PROB(x) AS p FROM vi x WHERE x.i IN ({items}) USING GIBBS WITH (steps = 10)"
    assert parse_statement(sql).as_written is not None
    assert sorted(r[0] for r in db.execute(sql).fetchall()) == list(range(MIN_ITEMS + 1))
