"""The factor store's checks stay correct after the latency work: an imported model edited
through plain SQL, a relation whose vids move because another one grew, and the whole-store
read (all rules grounded) all answer exactly as a fresh database does."""

from __future__ import annotations

import numpy as np
import pytest
from test_query import CHAIN, chain_exact
from test_uai_import import MIX

import pdbq
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.io import read_uai, read_uai_graph

Q = "SELECT v.id, DIST(v) AS d FROM net v WHERE v.id = 0 USING EXACT"


def _dist(db):
    r = db.execute(Q)
    dist = r.fetchall()[0][1]  # a MAP value -> probability, in domain order
    return np.asarray([p for _, p in sorted(dict(dist).items())], dtype=float), r.diagnostics["graph_cached"]


def test_an_imported_factor_edited_through_plain_sql_is_noticed(tmp_path):
    p = tmp_path / "mix.uai"
    p.write_text(MIX)
    db = pdbq.connect()
    read_uai(db, p, "net")
    before, _ = _dist(db)
    assert _dist(db)[1]  # the repeat is served from the cache
    expected = exact_marginals(read_uai_graph(p).graph).marginals[0, :2]
    assert before == pytest.approx(expected, abs=1e-12)
    # factor 0 over (0, 1): make variable 0 = 1 impossible
    db.execute("UPDATE pdbq_fs_imported__net SET log_table = [0, 0, 0, CAST('-inf' AS DOUBLE), CAST('-inf' AS DOUBLE), CAST('-inf' AS DOUBLE)] WHERE fid = 0")
    after, cached = _dist(db)
    assert not cached and after == pytest.approx([1.0, 0.0], abs=1e-12)


def test_vids_moved_by_another_relation_growing_keep_answers_right():
    db = pdbq.connect()
    db.execute(CHAIN)
    q = "SELECT PROB(v) AS p FROM x v WHERE v.i = 5 USING EXACT"
    first = db.execute(q).fetchall()[0][0]
    assert first == pytest.approx(chain_exact({3: 1})[5], abs=1e-12)
    # relation 'a' sorts before 'x': growing it moves every vid of x (and of tag, topic)
    db.execute("CREATE TABLE grow AS SELECT range AS k FROM range(3)")
    db.execute("CREATE VARIABLE a(k BIGINT) DOMAIN BOOLEAN FROM (SELECT k FROM grow)")
    assert db.execute(q).fetchall()[0][0] == pytest.approx(first, abs=1e-12)
    db.execute("INSERT INTO grow SELECT range + 3 FROM range(5)")
    assert db.execute(q).fetchall()[0][0] == pytest.approx(first, abs=1e-12)
    q2 = "SELECT PROB(v) AS p FROM x v WHERE v.i = 8 USING EXACT"  # a region grounded after the move
    assert db.execute(q2).fetchall()[0][0] == pytest.approx(chain_exact({3: 1})[8], abs=1e-12)


def test_a_fully_grounded_store_is_read_whole_and_answers_the_same():
    db = pdbq.connect()
    db.execute(CHAIN)
    db.ground()
    r = db.execute("SELECT v.i, PROB(v) AS p FROM x v WHERE v.i IN (1, 8) ORDER BY v.i USING EXACT")
    got = [p for _, p in r.fetchall()]
    want = chain_exact({3: 1})
    assert got == pytest.approx([want[1], want[8]], abs=1e-12)
    db.execute("UPDATE obs SET v = FALSE")  # still noticed on the whole-store path
    r = db.execute("SELECT PROB(v) AS p FROM x v WHERE v.i = 1 USING EXACT")
    assert not r.diagnostics["graph_cached"]
    assert r.fetchall()[0][0] == pytest.approx(chain_exact({3: 0})[1], abs=1e-12)


def test_read_uai_succeeds_beside_a_broken_relation_and_the_query_reports_it(tmp_path):
    p = tmp_path / "mix.uai"
    p.write_text(MIX)
    db = pdbq.connect()
    db.execute("CREATE TABLE src AS SELECT range AS k FROM range(3)")
    db.execute("CREATE VARIABLE b(k BIGINT) DOMAIN BOOLEAN FROM (SELECT k FROM src)")
    # pdbq refuses this DROP (b reads src); a plain DuckDB connection to the same file does not
    db.duckdb.execute("DROP TABLE src")  # b's FROM query no longer runs
    read_uai(db, p, "net")  # the import itself is fine: only the prebuilt vid map is skipped
    assert "net" in db.catalog.variables()
    with pytest.raises(Exception, match="src"):
        db.execute(Q)
    db.execute("DROP VARIABLE b")
    assert _dist(db)[0] == pytest.approx(exact_marginals(read_uai_graph(p).graph).marginals[0, :2], abs=1e-12)


def test_read_uai_inside_a_users_transaction_commits_with_it(tmp_path):
    p = tmp_path / "mix.uai"
    p.write_text(MIX)
    db = pdbq.connect()
    db.execute("BEGIN")
    read_uai(db, p, "net")
    db.execute("COMMIT")
    assert _dist(db)[0] == pytest.approx(exact_marginals(read_uai_graph(p).graph).marginals[0, :2], abs=1e-12)
