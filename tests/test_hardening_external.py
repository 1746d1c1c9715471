"""A database file cannot make pdbq reach outside the process: SQL (a view stored in the file,
pdbq_set) may not set an option that opens a connection (`EXTERNAL_OPTIONS`) unless the Python
caller allowed it; a scheduler address that is not a Dask scheduler is an error naming it."""

from __future__ import annotations

import socket
import threading

import duckdb
import pytest

import pdbq
from pdbq.errors import InferenceError, OptionError, PdbqError

MODEL = """
CREATE TABLE t AS SELECT * FROM range(4) r(i);
CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t);
CREATE RULE pull WEIGHT 0.7 FUNCTION ISTRUE AS x(i) :- t(i);
"""


class CountingServer:
    """A TCP listener on 127.0.0.1 that counts connections (and greets them as an HTTP server
    would, which a Dask client misreads as a message of exabytes)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.address = f"tcp://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            try:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                conn.close()
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def server():
    s = CountingServer()
    yield s
    s.close()


def _author_file(path, address: str) -> None:
    """The file's author: a model plus views that point the reader's pdbq at ``address``."""
    with pdbq.connect(path, allow_external=True) as db:
        db.execute(MODEL)
        db.execute(f"CREATE VIEW aim AS SELECT pdbq_set('scheduler', '{address}') AS s, "
                   "pdbq_set('method', 'gibbs') AS m, pdbq_set('steps', 200) AS n")
        db.execute("CREATE VIEW answers AS SELECT i, pdbq_prob('x', i) AS p FROM t")
        db.execute("CREATE VIEW both_at_once AS SELECT a.s, w.i, pdbq_prob('x', w.i) AS p FROM aim a, t w")


def test_a_view_stored_in_a_file_cannot_make_the_reader_connect_anywhere(tmp_path, server):
    path = tmp_path / "model.duckdb"
    _author_file(path, server.address)
    with pdbq.connect(path) as db:  # the reader: default settings
        with pytest.raises((PdbqError, duckdb.Error), match="'scheduler' reaches outside this process"):
            db.execute("SELECT * FROM aim").fetchall()
        rows = db.execute("SELECT * FROM answers ORDER BY i").fetchall()
        assert len(rows) == 4 and all(0 < p < 1 for _, p in rows)
        with pytest.raises((PdbqError, duckdb.Error), match="not settable from SQL"):
            db.execute("SELECT * FROM both_at_once").fetchall()
    # the same through plain DuckDB and pdbq.register
    con = duckdb.connect(str(path))
    try:
        pdbq.register(con)
        with pytest.raises(duckdb.Error, match="not settable from SQL"):
            con.sql("SELECT * FROM both_at_once").fetchall()
        pdbq.unregister(con)
    finally:
        con.close()
    assert server.connections == 0


def test_options_from_python_and_allowed_sql_still_reach_the_scheduler(tmp_path, server):
    path = tmp_path / "model.duckdb"
    _author_file(path, server.address)
    # allowed from Python: the view's setting applies, and the reader's pdbq connects there
    with pdbq.connect(path, allow_external=True) as db:
        db.execute("SELECT * FROM aim").fetchall()
        with pytest.raises((PdbqError, duckdb.Error), match="is not a Dask scheduler"):
            db.execute("SELECT * FROM answers").fetchall()
    assert server.connections >= 1
    seen = server.connections
    # a Python-side option (default_options) is the caller's own: it applies without allow_external
    with pdbq.connect(path) as db:
        db.default_options["scheduler"] = server.address
        con = db.duckdb
        pdbq.register(con, database=db)
        con.sql("SELECT pdbq_set('method', 'gibbs'), pdbq_set('steps', 100)").fetchall()
        with pytest.raises(duckdb.Error, match="is not a Dask scheduler"):
            con.sql("SELECT pdbq_prob('x', i) FROM t").fetchall()
        pdbq.unregister(con)
    assert server.connections > seen


def test_resetting_an_external_option_is_allowed_and_allow_external_takes_a_bool(tmp_path):
    path = tmp_path / "m.duckdb"
    with pdbq.connect(path) as db:
        db.execute(MODEL)
        assert db.execute("SELECT pdbq_set('scheduler', NULL)").fetchall() == [("scheduler = default",)]
    with pytest.raises(TypeError, match="allow_external"):
        pdbq.connect(path, allow_external="yes")


def test_a_scheduler_that_is_not_dask_is_an_error_naming_it(server):
    pytest.importorskip("distributed")
    with pdbq.connect() as db:
        db.execute(MODEL)
        with pytest.raises(InferenceError, match=f"'{server.address}' is not a Dask scheduler"):
            db.execute(f"SELECT PROB(v) FROM x v USING GIBBS WITH (steps = 100, scheduler = '{server.address}')")
        assert db.execute("SHOW VARIABLES").fetchall()[0][0] == "x"


def test_a_silent_endpoint_is_an_error_within_the_time_limit():
    pytest.importorskip("distributed")
    quiet = socket.socket()
    quiet.bind(("127.0.0.1", 0))
    quiet.listen(4)
    address = f"tcp://127.0.0.1:{quiet.getsockname()[1]}"
    try:
        with pdbq.connect() as db:
            db.execute(MODEL)
            with pytest.raises(InferenceError, match="did not answer as a Dask scheduler|could not reach"):
                db.execute(f"SELECT PROB(v) FROM x v USING GIBBS WITH (steps = 100, time_limit = 1, "
                           f"scheduler = '{address}')")
    finally:
        quiet.close()


def test_a_real_scheduler_passes_the_check(tmp_path):
    distributed = pytest.importorskip("distributed")
    import distributed.diagnostics.plugin  # noqa: F401

    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp://",
                                       dashboard_address=":0")
    done: list[str] = []

    class Count(distributed.diagnostics.plugin.SchedulerPlugin):
        def transition(self, key, start, finish, *args, **kwargs):
            if finish == "memory":
                done.append(key)

    cluster.scheduler.add_plugin(Count())
    try:
        address = cluster.scheduler.address
        assert address.startswith("tcp://")
        path = tmp_path / "model.duckdb"
        _author_file(path, address)
        with pdbq.connect(path, allow_external=True) as db:
            db.execute("SELECT * FROM aim").fetchall()
            rows = db.execute("SELECT * FROM answers ORDER BY i").fetchall()
        assert len(rows) == 4 and all(0 < p < 1 for _, p in rows)
        assert done  # the chains ran there
    finally:
        cluster.close()


def test_external_options_is_what_pdbq_set_refuses():
    from pdbq.planning.options import EXTERNAL_OPTIONS

    assert set(EXTERNAL_OPTIONS) == {"scheduler"}
    with pdbq.connect() as db:
        db.execute(MODEL)
        pdbq.register(db.duckdb)
        try:
            with pytest.raises(duckdb.Error, match=OptionError.__name__ + "|not settable from SQL"):
                db.duckdb.sql("SELECT pdbq_set(' SCHEDULER ', 'tcp://127.0.0.1:9')").fetchall()
        finally:
            pdbq.unregister(db.duckdb)
