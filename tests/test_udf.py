"""pdbq's functions inside plain DuckDB SQL (`pdbq.register`)."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import duckdb
import pytest

import pdbq
from pdbq.udf import bridge as udf

# A chain x(0) - x(1) - ... - x(n-1) tied by EQUAL factors, with an ISTRUE pull on even keys and
# x(0) observed FALSE: marginals differ per key, so a wrong key order or a mixed-up batch shows.
CHAIN = """
CREATE TABLE t AS SELECT * FROM range({n}) r(i);
CREATE TABLE links AS SELECT i AS a, i + 1 AS b FROM t WHERE i + 1 < {n};
CREATE TABLE obs AS SELECT 0::BIGINT AS i, FALSE AS v;
CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t) EVIDENCE (SELECT i, v FROM obs);
CREATE RULE pull WEIGHT 0.6 FUNCTION ISTRUE AS x(i) :- t(i), i % 2 = 0;
CREATE RULE tie WEIGHT 0.8 FUNCTION EQUAL AS x(a) = x(b) :- links(a, b);
"""

# Two-column keys of mixed types and a three-valued domain.
PAIRS = """
CREATE TABLE items AS SELECT * FROM (VALUES ('a', 1), ('a', 2), ('b', 1)) v(name, n);
CREATE VARIABLE tag(name TEXT, n INTEGER) DOMAIN ('red', 'green', 'blue') FROM (SELECT name, n FROM items);
CREATE RULE greenish WEIGHT 1.5 AS tag(name, n) = 'green' :- items(name, n), n = 1;
"""


@pytest.fixture
def chain():
    with pdbq.connect() as db:
        db.execute(CHAIN.format(n=8))
        pdbq.register(db.duckdb)
        yield db
        pdbq.unregister(db.duckdb)


def _rows(con, sql):
    return con.sql(sql).fetchall()


def test_values_equal_the_pdbq_query_with_the_same_seed(chain):
    con = chain.duckdb
    got = _rows(con, "SELECT pdbq_set('seed', 11), pdbq_set('method', 'qam'), pdbq_set('steps', 3000)")
    assert got == [("seed = 11", "method = QAM", "steps = 3000")]
    udf_rows = _rows(con, "SELECT i, pdbq_prob('x', i), pdbq_stderr('x', i) FROM t WHERE i IN (2, 5) ORDER BY i")
    sql_rows = chain.execute(
        "SELECT a.i, PROB(a), STDERR(a) FROM x a WHERE a.i IN (2, 5) ORDER BY a.i "
        "USING QAM WITH (seed = 11, steps = 3000)"
    ).fetchall()
    assert udf_rows == sql_rows  # the same x_q, graph, method and seed: the same run
    assert all(se > 0 for _, _, se in udf_rows)  # really sampled
    other = chain.execute(
        "SELECT a.i, PROB(a) FROM x a WHERE a.i IN (2, 5) ORDER BY a.i USING QAM WITH (seed = 12, steps = 3000)"
    ).fetchall()
    assert [r[1] for r in other] != [r[1] for r in udf_rows]  # the comparison can fail: seeds matter


def test_exact_values_distribution_and_map(chain):
    con = chain.duckdb
    _rows(con, "SELECT pdbq_set('method', 'exact')")
    exact = dict(chain.execute("SELECT a.i, PROB(a) FROM x a USING EXACT").fetchall())
    rows = _rows(con, "SELECT i, pdbq_prob('x', i), pdbq_dist('x', i), pdbq_map('x', i), pdbq_stderr('x', i) "
                      "FROM t ORDER BY i")
    assert len(rows) == 8
    for i, p, dist, mapv, se in rows:
        assert p == pytest.approx(exact[i], abs=1e-12)
        assert dist == {"false": pytest.approx(1 - exact[i]), "true": pytest.approx(exact[i])}
        assert se == 0.0
        assert mapv in ("true", "false")
    assert rows[0][1] == 0.0 and rows[0][3] == "false"  # evidence
    assert len({round(r[1], 9) for r in rows}) > 2  # not a constant answer
    # the functions compose with ordinary SQL
    (top,) = _rows(con, "SELECT arg_max(i, pdbq_prob('x', i)) FROM t")
    assert exact[top[0]] == max(exact.values())


def test_one_inference_per_batch():
    with pdbq.connect() as db:
        db.execute("CREATE TABLE t AS SELECT * FROM range(2100) r(i)")
        db.execute("CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t)")
        db.execute("CREATE RULE r WEIGHT 1.0 FUNCTION ISTRUE AS x(i) :- t(i)")
        con = db.duckdb
        pdbq.register(con)
        try:
            before = udf.inference_runs()
            (row,) = _rows(con, "SELECT count(*), min(p), max(p) FROM (SELECT pdbq_prob('x', i) AS p FROM t)")
            runs = udf.inference_runs() - before
            assert row[0] == 2100
            assert row[1] == pytest.approx(1 / (1 + math.exp(-2.0)))  # ISTRUE is ±1-valued
            assert row[2] == pytest.approx(row[1])
            # 2100 rows = 2 chunks of <= 2048 rows: 2 inferences (a few more if DuckDB splits
            # chunks across threads), never one per row
            assert 2 <= runs <= 4
            before = udf.inference_runs()
            assert _rows(con, "SELECT pdbq_prob('x', NULL)") == [(None,)]  # nothing to ask: no run
            assert udf.inference_runs() == before
        finally:
            pdbq.unregister(con)


@pytest.mark.parametrize(
    "sql, message",
    [
        ("SELECT pdbq_prob('nope', 1)", "'nope' is not a variable relation"),
        ("SELECT pdbq_prob('xx', 1)", "Did you mean 'x'"),
        ("SELECT pdbq_prob('x', 1, 2)", "x has 1 key column (i), got 2 keys"),
        ("SELECT pdbq_prob('x', 999)", "no variable of x has this key"),
        ("SELECT pdbq_prob('x', 'abc')", "'abc' is not a valid BIGINT for key column i"),
        ("SELECT pdbq_set('tolerance', -1)", "option 'tolerance' must be > 0"),
        ("SELECT pdbq_set('sed', 1)", "Did you mean 'seed'"),
        ("SELECT pdbq_set('method', 'magic')", "unknown method 'magic'"),
    ],
)
def test_errors_carry_pdbq_messages(chain, sql, message):
    with pytest.raises(duckdb.Error) as info:
        chain.duckdb.sql(sql).fetchall()
    assert message in str(info.value)


def test_too_many_keys_is_a_binder_error(chain):
    with pytest.raises(duckdb.BinderException, match="pdbq_prob"):
        chain.duckdb.sql("SELECT pdbq_prob('x', 1, 2, 3, 4, 5)").fetchall()


def test_mixed_key_types_and_a_categorical_domain():
    with pdbq.connect() as db:
        db.execute(PAIRS)
        con = db.duckdb
        pdbq.register(con)
        try:
            _rows(con, "SELECT pdbq_set('method', 'exact')")
            rows = _rows(con, "SELECT name, n, pdbq_dist('tag', name, n), pdbq_map('tag', name, n), "
                              "pdbq_dist('tag', name, n)['green'] FROM items ORDER BY name, n")
            want = dict(((r[0], r[1]), r[2]) for r in db.execute(
                "SELECT t.name, t.n, PROB(t = 'green') FROM tag t USING EXACT").fetchall())
            for name, n, dist, mapv, green in rows:
                assert list(dist) == ["red", "green", "blue"]
                assert green == pytest.approx(want[(name, n)])
                assert mapv == ("green" if n == 1 else "red")
            with pytest.raises(duckdb.Error, match="not boolean"):
                con.sql("SELECT pdbq_prob('tag', 'a', 1)").fetchall()
        finally:
            pdbq.unregister(con)


def test_unregister_removes_the_functions(chain):
    con = chain.duckdb
    assert _rows(con, "SELECT count(*) FROM duckdb_functions() WHERE function_name LIKE 'pdbq\\_%' ESCAPE '\\'")[0][0] >= 5
    pdbq.unregister(con)
    with pytest.raises(duckdb.Error):
        con.sql("SELECT pdbq_prob('x', 1)").fetchall()
    # every macro overload and implementation is gone, not only the implementations
    assert _rows(con, "SELECT function_name FROM duckdb_functions() WHERE function_name LIKE '%pdbq\\_%' ESCAPE '\\'") == []
    pdbq.unregister(con)  # idempotent
    pdbq.register(con)  # and again
    assert _rows(con, "SELECT pdbq_prob('x', 0)") == [(0.0,)]


def test_database_defaults_seed_the_options(chain):
    chain.default_options = {"seed": 5, "steps": 500}
    con = duckdb.connect()  # another database: the functions answer from `database`
    try:
        pdbq.register(con, database=chain)
        _rows(con, "SELECT pdbq_set('method', 'gibbs')")
        a = _rows(con, "SELECT pdbq_prob('x', 3)")
        b = chain.execute("SELECT PROB(a) FROM x a WHERE a.i = 3 USING GIBBS").fetchall()
        assert a == b
    finally:
        pdbq.unregister(con)
        con.close()


def test_plain_duckdb_on_a_pdbq_file(tmp_path):
    path = str(tmp_path / "model.duckdb")
    with pdbq.connect(path) as db:
        db.execute(CHAIN.format(n=6))
        want = dict(db.execute("SELECT a.i, PROB(a) FROM x a USING EXACT").fetchall())
    # a fresh process, as a user of plain DuckDB would run it; stderr must stay clean at exit
    script = textwrap.dedent(f"""
        import duckdb, pdbq
        con = duckdb.connect({path!r})
        con.execute("SET enable_progress_bar = false")  # DuckDB's own bar would go to stdout
        pdbq.register(con)
        con.sql("SELECT pdbq_set('method', 'exact')").fetchall()
        for i, p in con.sql("SELECT i, pdbq_prob('x', i) FROM t ORDER BY i").fetchall():
            print(i, repr(p))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "leaked" not in out.stderr
    got = {int(a): float(b) for a, b in (line.split() for line in out.stdout.splitlines())}
    assert got == pytest.approx(want, abs=1e-12)


def test_several_relations_in_one_batch_share_one_inference(chain):
    con = chain.duckdb
    chain.execute("CREATE VARIABLE y(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t WHERE i < 3)")
    chain.execute("CREATE RULE ypull WEIGHT -0.3 FUNCTION ISTRUE AS y(i) :- t(i)")
    _rows(con, "SELECT pdbq_set('method', 'exact')")
    before = udf.inference_runs()
    rows = _rows(con, "SELECT r, i, pdbq_prob(r, i) FROM (VALUES ('x', 3), ('y', 2), ('X', 3), (NULL, 1)) v(r, i)")
    assert udf.inference_runs() - before == 1
    x3 = chain.execute("SELECT PROB(a) FROM x a WHERE a.i = 3 USING EXACT").fetchall()[0][0]
    y2 = chain.execute("SELECT PROB(a) FROM y a WHERE a.i = 2 USING EXACT").fetchall()[0][0]
    assert [r[2] for r in rows] == [pytest.approx(x3), pytest.approx(y2), pytest.approx(x3), None]


def test_a_view_over_the_functions_survives_reopening(tmp_path, capsys):
    path = str(tmp_path / "model.duckdb")
    with pdbq.connect(path) as db:
        db.execute(CHAIN.format(n=4))
        want = dict(db.execute("SELECT a.i, PROB(a) FROM x a USING EXACT").fetchall())
        db.execute("SELECT pdbq_set('method', 'exact')")  # pdbq.connect registered them for the file
        db.execute("CREATE VIEW pv AS SELECT i, pdbq_prob('x', i) AS p FROM t")
    # closing unregistered the functions and closed their cursor: a read-only reopen is allowed
    with pdbq.connect(path, read_only=True) as db:
        db.execute("SELECT pdbq_set('method', 'exact')")
        got = dict(db.execute("SELECT i, p FROM pv").fetchall())
    assert got == pytest.approx(want, abs=1e-12)
    from pdbq.shell import main

    assert main([path, "--no-progress", "-c", ".mode csv", "-c", "SELECT pdbq_set('method', 'exact');",
                 "-c", "SELECT i, p FROM pv ORDER BY i;"]) == 0
    rows = capsys.readouterr().out.splitlines()
    shown = {int(a): float(b) for a, b in (r.split(",") for r in rows if r[:1].isdigit())}
    assert shown == pytest.approx(want, abs=1e-9)


def test_in_memory_connect_registers_nothing():
    with pdbq.connect() as db:
        with pytest.raises(duckdb.CatalogException, match="pdbq_prob"):
            db.execute("SELECT pdbq_prob('x', 1)")


def test_two_connections_to_one_file_in_one_process(tmp_path):
    path = str(tmp_path / "model.duckdb")
    with pdbq.connect(path) as first:
        first.execute(CHAIN.format(n=3))
        first.execute("SELECT pdbq_set('method', 'exact')")
        want = dict(first.execute("SELECT i, pdbq_prob('x', i) FROM t").fetchall())
        # DuckDB shares Python functions between the connections of one database: the second
        # door must neither fail nor remove the first one's functions
        with pdbq.connect(path) as second:
            assert dict(second.execute("SELECT i, pdbq_prob('x', i) FROM t").fetchall()) == pytest.approx(want)
        assert dict(first.execute("SELECT i, pdbq_prob('x', i) FROM t").fetchall()) == pytest.approx(want)
        with pytest.raises(pdbq.CatalogError, match="already registered on another connection"):
            pdbq.register(duckdb.connect(path))
        assert dict(first.execute("SELECT i, pdbq_prob('x', i) FROM t").fetchall()) == pytest.approx(want)
