"""The store check kept between queries (`pdbq.planning.store_state`): a repeated query skips
the factor store's checks only while no statement has run on the database, and every change —
plain SQL on the connection, on another cursor, rolled back, a DDL — makes the next query check
in full and answer from the new data."""

from __future__ import annotations

import pytest
from test_query import CHAIN, chain_exact

import pdbq
from pdbq.planning.store_state import kept_state

Q = "SELECT PROB(v) AS p FROM x v WHERE v.i = 1 USING EXACT"


@pytest.fixture
def db():
    d = pdbq.connect()
    d.execute(CHAIN)
    yield d
    d.close()


def ask(db):
    return db.execute(Q).fetchall()[0][0]


def settle(db):
    """Query until the check is kept (the first queries ground and so write)."""
    for _ in range(4):
        p = ask(db)
        if kept_state(db) is not None:
            return p
    raise AssertionError("the store check is never kept on an unchanged database")


def test_a_repeated_query_keeps_the_check_and_answers_the_same(db):
    p = settle(db)
    assert ask(db) == p == pytest.approx(chain_exact({3: 1})[1], abs=1e-9)
    assert kept_state(db) is not None  # the query itself ran nothing that moves the count


@pytest.mark.parametrize("how", ["connection", "cursor", "second_connection_statement"])
def test_plain_sql_update_between_two_queries_is_seen(db, how):
    settle(db)
    change = "UPDATE obs SET v = FALSE"
    if how == "connection":
        db.duckdb.execute(change)
    elif how == "cursor":
        cur = db.duckdb.cursor()
        cur.execute(change)
        cur.close()
    else:
        db.duckdb.cursor().execute("BEGIN; " + change + "; COMMIT")
    assert kept_state(db) is None
    assert ask(db) == pytest.approx(chain_exact({3: 0})[1], abs=1e-9)


def test_a_rolled_back_update_is_not_served_and_the_old_answer_returns(db):
    before = settle(db)
    db.duckdb.execute("BEGIN")
    db.duckdb.execute("UPDATE obs SET v = FALSE")
    inside = ask(db)
    db.duckdb.execute("ROLLBACK")
    assert inside == pytest.approx(chain_exact({3: 0})[1], abs=1e-9)
    assert ask(db) == before


def test_a_query_inside_a_users_transaction_is_never_kept(db):
    settle(db)
    db.duckdb.execute("BEGIN")
    ask(db)
    assert kept_state(db) is None
    db.duckdb.execute("COMMIT")


def test_an_imported_factor_table_updated_on_another_cursor_is_seen(tmp_path):
    import numpy as np  # noqa: PLC0415
    from test_uai_import import MIX  # noqa: PLC0415

    from pdbq.io import read_uai  # noqa: PLC0415

    path = tmp_path / "mix.uai"
    path.write_text(MIX)
    d = pdbq.connect()
    read_uai(d, path, "net")
    q = "SELECT v.id, DIST(v) AS d FROM net v WHERE v.id = 0 USING EXACT"

    def dist():
        return np.asarray([p for _, p in sorted(dict(d.execute(q).fetchall()[0][1]).items())])

    before = dist()
    dist()
    assert kept_state(d) is not None  # an imported model: kept from the second query on
    cur = d.duckdb.cursor()
    cur.execute("UPDATE pdbq_fs_imported__net SET log_table = [0, 0, 0, CAST('-inf' AS DOUBLE), "
                "CAST('-inf' AS DOUBLE), CAST('-inf' AS DOUBLE)] WHERE fid = 0")
    cur.close()
    after = dist()
    assert before[1] > 1e-3 and after == pytest.approx([1.0, 0.0], abs=1e-12)
    d.close()


def test_a_variable_over_a_view_is_checked_in_full_every_time():
    d = pdbq.connect()
    d.execute(CHAIN.replace("FROM (SELECT i FROM nodes) EVIDENCE", "FROM (SELECT i FROM nodes_v) EVIDENCE")
              .replace("CREATE TABLE obs", "CREATE VIEW nodes_v AS SELECT i FROM nodes; CREATE TABLE obs"))
    for _ in range(3):
        d.execute(Q)
    assert kept_state(d) is None  # a view may read what the count does not see (a file)
    d.close()


def test_a_volatile_from_query_is_checked_in_full_every_time():
    d = pdbq.connect()
    d.execute(CHAIN.replace("FROM (SELECT i FROM nodes) EVIDENCE", "FROM (SELECT i FROM nodes WHERE random() >= 0) EVIDENCE"))
    for _ in range(3):
        d.execute(Q)
    assert kept_state(d) is None
    d.close()


def test_a_catalog_change_is_seen(db):
    settle(db)
    db.execute("CREATE OR REPLACE RULE link WEIGHT 0.2 FUNCTION EQUAL AS x(a) = x(b) :- edges(a, b)")
    assert kept_state(db) is None
    assert abs(ask(db) - chain_exact({3: 1})[1]) > 1e-3


def test_a_write_by_another_cursor_during_the_check_is_never_kept(db, monkeypatch):
    import pdbq.planning.store_state as store_state  # noqa: PLC0415

    settle(db)
    store_state.forget(db)
    state, kept = store_state.checked_store(db, with_token=True)
    assert not kept and kept_state(db) is state  # an undisturbed check is kept
    store_state.forget(db)
    real = store_state.prepare
    cur = db.duckdb.cursor()

    def racing(*args, **kwargs):
        out = real(*args, **kwargs)
        cur.execute("UPDATE obs SET v = FALSE")  # commits while the check's transaction is open
        return out

    monkeypatch.setattr(store_state, "prepare", racing)
    store_state.checked_store(db, with_token=True)
    monkeypatch.setattr(store_state, "prepare", real)
    cur.close()
    assert kept_state(db) is None  # the check read a state that is already gone
    assert ask(db) == pytest.approx(chain_exact({3: 0})[1], abs=1e-9)
