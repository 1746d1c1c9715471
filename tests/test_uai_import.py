"""UAI networks loaded into a database (pdbq.io.uai.read_uai): query-driven graphs, SQL answers,
DROP, reopening a file, round trips and bad files."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import pdbq
from pdbq.errors import CatalogError, PdbqError
from pdbq.graph.from_store import full_graph, query_graph
from pdbq.grounding import ground_all, stored_evidence
from pdbq.grounding.imported import IMPORTS_TABLE, live_imports
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.io.uai import UaiFormatError, read_mar, read_uai, read_uai_graph, write_uai

from conftest import MISSING_DATA, UAI_DATA as DATA  # noqa: E402
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=MISSING_DATA)

# var 1 has 3 values, var 3 only one (padded with an impossible second value); var 2 is in no
# factor with another variable.
MIX = """MARKOV
4
2 3 2 1
3
2 0 1
1 2
1 3
6
1 2 3 4 5 6
2
0.3 0.7
1
1.0
"""


def _tables(con) -> list[str]:
    rows = con.execute("SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'pdbq_fs_imported%'").fetchall()
    return sorted(r[0] for r in rows)


def _mar_error(marginals: np.ndarray, vids: np.ndarray, mar: list[np.ndarray]) -> float:
    return max(float(np.abs(marginals[i, : len(mar[v])] - mar[v]).max()) for i, v in enumerate(vids))


@needs_data
@pytest.mark.parametrize("net", ["Promedus_24", "CSP_12"])  # evidence; per-variable domains up to 4
def test_query_graph_of_an_import_gives_the_mar_marginals(net):
    db = pdbq.connect()
    read_uai(db, DATA / f"{net}.uai", "net", evidence=DATA / f"{net}.uai.evid")
    con, V, R = db.duckdb, db.catalog.variables(), db.catalog.rules()
    ground_all(con, V, R)  # builds the vid map and loads the stored evidence
    ev = stored_evidence(con)
    mar = read_mar(DATA / f"{net}.uai.MAR")
    expected_ev = read_uai_graph(DATA / f"{net}.uai", DATA / f"{net}.uai.evid").evidence
    assert dict(zip(ev[0].tolist(), ev[1].tolist())) == expected_ev
    seeds = np.array([0, 1, 2, 3, 4, 17])
    g, vids, _ = query_graph(con, V, R, seeds, ev)
    assert set(seeds) <= set(vids.tolist())
    assert _mar_error(exact_marginals(g).marginals, vids, mar) < 1e-6
    whole, all_vids, _ = full_graph(con, V, R)
    assert whole.n_vars == len(mar) and all_vids.tolist() == list(range(len(mar)))
    assert _mar_error(exact_marginals(whole).marginals, all_vids, mar) < 1e-6


def test_reachability_runs_through_imported_factors_and_rules(tmp_path):
    p = tmp_path / "mix.uai"
    p.write_text(MIX)
    db = pdbq.connect()
    read_uai(db, p, "net")
    db.execute("CREATE TABLE pairs AS SELECT 1 AS a, 2 AS b")
    db.execute("CREATE RULE link WEIGHT 0.7 FUNCTION EQUAL AS net(a) = net(b) :- pairs(a, b)")
    con, V, R = db.duckdb, db.catalog.variables(), db.catalog.rules()
    g, vids, _ = query_graph(con, V, R, np.array([0]), {})
    # 0 reaches 1 through the file's factor, 2 through the rule (EQUAL: +1 equal, -1 not); 3 is not connected
    assert vids.tolist() == [0, 1, 2] and g.n_factors == 3
    assert g.cardinality.tolist() == [2, 3, 2]
    t01 = np.arange(1, 7, dtype=float).reshape(2, 3)
    t2 = np.array([0.3, 0.7])
    joint = t01[:, :, None] * t2[None, None, :] * np.exp(0.7 * np.where(np.arange(3)[:, None] == np.arange(2)[None, :], 1.0, -1.0))[None]
    joint /= joint.sum()
    r = exact_marginals(g)
    assert r.marginals[0, :2] == pytest.approx(joint.sum(axis=(1, 2)), abs=1e-12)
    assert r.marginals[1, :3] == pytest.approx(joint.sum(axis=(0, 2)), abs=1e-12)
    whole, _, _ = full_graph(con, V, R)
    assert whole.n_vars == 4 and whole.cardinality.tolist() == [2, 3, 2, 2]
    assert exact_marginals(whole).marginals[3, :2].tolist() == [1.0, 0.0]  # the padded value is impossible


def test_evidence_file_becomes_stored_evidence(tmp_path):
    p, e = tmp_path / "mix.uai", tmp_path / "mix.uai.evid"
    p.write_text(MIX)
    e.write_text("1 1 2")
    db = pdbq.connect()
    read_uai(db, p, "net", evidence=e)
    con, V, R = db.duckdb, db.catalog.variables(), db.catalog.rules()
    ground_all(con, V, R)
    assert [a.tolist() for a in stored_evidence(con)] == [[1], [2]]
    g, vids, _ = query_graph(con, V, R, np.array([0]), stored_evidence(con))
    assert vids.tolist() == [0, 1] and g.evidence.tolist() == [-1, 2]
    assert exact_marginals(g).marginals[0, :2] == pytest.approx([3 / 9, 6 / 9], abs=1e-12)


def test_drop_variable_removes_the_import_and_its_factors(tmp_path):
    p = tmp_path / "mix.uai"
    p.write_text(MIX)
    db = pdbq.connect()
    read_uai(db, p, "net")
    con = db.duckdb
    assert _tables(con) == ["pdbq_fs_imported__net", "pdbq_fs_imported_evid__net", "pdbq_fs_imported_vars__net"]
    full_graph(con, db.catalog.variables(), db.catalog.rules())
    db.execute("DROP VARIABLE net")
    assert _tables(con) == []
    assert con.execute(f"SELECT count(*) FROM {IMPORTS_TABLE}").fetchone()[0] == 0
    g, _, _ = full_graph(con, db.catalog.variables(), db.catalog.rules())
    assert g.n_vars == 0 and g.n_factors == 0
    read_uai(db, p, "net")  # the name is free again
    assert [i.relation for i in live_imports(con)] == ["net"]  # read_uai builds the vid map at import
    g, _, _ = full_graph(con, db.catalog.variables(), db.catalog.rules())
    assert g.n_factors == 4  # the file's three and one padding the one-value variable


def test_a_replaced_relation_no_longer_uses_the_imported_factors(tmp_path):
    p = tmp_path / "mix.uai"
    p.write_text(MIX)
    db = pdbq.connect()
    read_uai(db, p, "net")
    db.execute("CREATE OR REPLACE VARIABLE net(id INTEGER) DOMAIN BOOLEAN FROM (SELECT range::INTEGER FROM range(4))")
    g, _, _ = full_graph(db.duckdb, db.catalog.variables(), db.catalog.rules())
    assert g.n_vars == 4 and g.n_factors == 0
    db.execute("DROP VARIABLE net")
    assert _tables(db.duckdb) == []


def test_the_import_survives_reopening_a_file_database(tmp_path):
    p = tmp_path / "mix.uai"
    p.write_text(MIX)
    path = tmp_path / "model.duckdb"
    with pdbq.connect(path) as db:
        read_uai(db, p, "net")
        before = exact_marginals(full_graph(db.duckdb, db.catalog.variables(), db.catalog.rules())[0]).marginals
    with pdbq.connect(path) as db:
        v = db.catalog.variable("net")
        assert v.per_row_cardinality
        g, _, _ = full_graph(db.duckdb, db.catalog.variables(), db.catalog.rules())
        assert g.cardinality.tolist() == [2, 3, 2, 2]
        assert np.array_equal(exact_marginals(g).marginals, before)
    with pdbq.connect(path) as db:  # a fresh process state that has never grounded: query first
        g, vids, _ = query_graph(db.duckdb, db.catalog.variables(), db.catalog.rules(), np.array([1]), {})
        assert vids.tolist() == [0, 1] and g.n_factors == 1


def test_write_uai_round_trips_an_import(tmp_path):
    src = DATA / "Promedus_24.uai" if DATA.is_dir() else None
    if src is None:
        src = tmp_path / "mix.uai"
        src.write_text(MIX)
    evid = DATA / "Promedus_24.uai.evid" if DATA.is_dir() else None
    db = pdbq.connect()
    m = read_uai(db, src, "net", evidence=evid)
    out, out_ev = tmp_path / "out.uai", tmp_path / "out.uai.evid"
    write_uai(db, "net", out, evid_path=out_ev)
    back = read_uai_graph(out, out_ev)
    for name, a, b in zip(m.graph._fields, m.graph, back.graph):
        assert np.array_equal(a, b), name
    assert back.evidence == m.evidence


def test_write_uai_refuses_factors_across_relations(tmp_path):
    p = tmp_path / "mix.uai"
    p.write_text(MIX)
    db = pdbq.connect()
    read_uai(db, p, "net")
    db.execute("CREATE VARIABLE other(id INTEGER) DOMAIN CATEGORICAL(3) FROM (SELECT 1)")
    db.execute("CREATE TABLE pairs AS SELECT 1 AS a, 1 AS b")
    db.execute("CREATE RULE across WEIGHT 0.5 FUNCTION EQUAL AS net(a) = other(b) :- pairs(a, b)")
    with pytest.raises(PdbqError, match="other relations"):
        write_uai(db, "net", tmp_path / "out.uai")


def test_a_bad_file_names_file_and_line_and_changes_nothing(tmp_path):
    p = tmp_path / "bad.uai"
    p.write_text("MARKOV\n2\n2 2\n2\n1 0\n2 0 7\n2\n1 1\n4\n1 1 1 1\n")
    db = pdbq.connect()
    with pytest.raises(UaiFormatError, match=r"bad\.uai, line 6: a factor scope names variable 7"):
        read_uai(db, p, "net")
    p.write_text("MARKOV\n1\n2\n1\n1 0\n2\n0.5 -2\n")
    with pytest.raises(PdbqError, match=r"bad\.uai, line 7: .*non-negative"):
        read_uai(db, p, "net")
    assert db.catalog.variables() == {} and _tables(db.duckdb) == []


def test_a_taken_name_is_refused_before_anything_is_written(tmp_path):
    p = tmp_path / "mix.uai"
    p.write_text(MIX)
    db = pdbq.connect()
    db.execute("CREATE TABLE net AS SELECT 1 AS id")
    with pytest.raises(CatalogError):
        read_uai(db, p, "net")
    assert _tables(db.duckdb) == []
    read_uai(db, p, "net2")
    with pytest.raises(CatalogError, match="exists"):
        read_uai(db, p, "NET2")
    assert db.duckdb.execute(f"SELECT count(*) FROM {IMPORTS_TABLE}").fetchone()[0] == 1


@needs_data
def test_a_sql_prob_query_over_an_import_answers_with_the_mar_marginals():
    db = pdbq.connect()
    read_uai(db, DATA / "Promedus_24.uai", "net", evidence=DATA / "Promedus_24.uai.evid")
    mar = read_mar(DATA / "Promedus_24.uai.MAR")
    rows = db.execute("SELECT v.id, PROB(v = 1) AS p FROM net v WHERE v.id < 5 OR v.id = 25 USING EXACT").fetchall()
    got = {int(i): float(p) for i, p in rows}
    assert sorted(got) == [0, 1, 2, 3, 4, 25]
    for i, p in got.items():
        assert p == pytest.approx(mar[i][1], abs=1e-6)
    assert got[25] == 1.0  # an evidence variable (observed 1) is a point mass


def test_show_variables_counts_the_states_of_each_imported_variable(tmp_path):
    p = tmp_path / "mix.uai"
    p.write_text(MIX)
    with pdbq.connect() as db:
        db.execute(f"IMPORT UAI '{p}' AS net")
        rows = db.execute("SHOW VARIABLES")
        (domain, card), = [(r[rows.columns.index("domain")], r[rows.columns.index("cardinality")]) for r in rows.fetchall()]
        # MIX: two variables with 2 states, one with 3, one with 1 (padded to 2)
        assert domain == "CATEGORICAL per variable: 2 (3 variables), 3 (1 variable)" and card == 3
