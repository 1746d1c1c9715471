"""`read_uai` does the first query's work before inference (`pdbq.planning.after_import`): the
store check is kept, the stored evidence checked, the model read into the graph cache. A query
right after the import answers from it; any change made after the import is still seen."""

from __future__ import annotations

import numpy as np
import pytest
from test_uai_import import MIX

import pdbq
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.io import read_uai, read_uai_graph
from pdbq.planning.store_state import kept_state

Q = "SELECT v.id, DIST(v) AS d FROM net v WHERE v.id = {k} USING EXACT"


@pytest.fixture
def net(tmp_path):
    path = tmp_path / "mix.uai"
    path.write_text(MIX)
    d = pdbq.connect()
    read_uai(d, path, "net")
    yield d, path
    d.close()


def dist(d, k=0):
    return np.asarray([p for _, p in sorted(dict(d.execute(Q.format(k=k)).fetchall()[0][1]).items())])


def test_the_import_leaves_a_kept_check_and_a_cached_model(net):
    d, path = net
    assert kept_state(d) is not None
    r = d.execute(Q.format(k=0))
    assert r.diagnostics.get("graph_cached") is True  # the region came from the model read at import
    g = read_uai_graph(path).graph
    want = exact_marginals(g).marginals[0, : g.cardinality[0]]
    assert dist(d) == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("where", ["connection", "cursor"])
def test_an_imported_factor_edited_right_after_the_import_is_seen(net, where):
    d, _ = net
    change = ("UPDATE pdbq_fs_imported__net SET log_table = [0, 0, 0, CAST('-inf' AS DOUBLE), "
              "CAST('-inf' AS DOUBLE), CAST('-inf' AS DOUBLE)] WHERE fid = 0")
    if where == "connection":
        d.duckdb.execute(change)
    else:
        cur = d.duckdb.cursor()
        cur.execute(change)
        cur.close()
    assert kept_state(d) is None
    assert dist(d) == pytest.approx([1.0, 0.0], abs=1e-12)


def test_a_second_import_is_answered_right(net, tmp_path):
    d, path = net
    read_uai(d, path, "net2")
    g = read_uai_graph(path).graph
    want = exact_marginals(g).marginals[1, : g.cardinality[1]]
    got = np.asarray([p for _, p in sorted(dict(d.execute(
        "SELECT v.id, DIST(v) AS d FROM net2 v WHERE v.id = 1 USING EXACT").fetchall()[0][1]).items())])
    assert got == pytest.approx(want, abs=1e-12)
    assert dist(d, 1) == pytest.approx(want, abs=1e-12)
