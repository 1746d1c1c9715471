"""UAI reader/writer: format variations, evidence files, errors and round trips."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdbq.graph.builder import GraphBuilder
from pdbq.inference.exact.elimination import exact_map, exact_marginals
from pdbq.io.uai import (
    UaiFormatError,
    read_evid,
    read_map,
    read_mar,
    read_pr,
    read_uai_graph,
    write_evid,
    write_uai,
)
from pdbq.language.nodes import FactorFunction as F
from pdbq.language.nodes import Semantics as S

from conftest import MISSING_DATA, UAI_DATA as DATA  # noqa: E402

TINY = """MARKOV
3
2 3   2
4
2 0 1
1 2
  1   1
0

6
 1.0 2e0 3.0E+00
 4 5 0
2 0.25 7.5e-1
3 1 1 1
1
2.5
"""


def test_reads_scientific_notation_whitespace_zeros_and_empty_scopes(tmp_path):
    p = tmp_path / "tiny.uai"
    p.write_text(TINY)
    m = read_uai_graph(p)
    g = m.graph
    assert m.kind == "MARKOV" and g.n_vars == 3 and g.n_factors == 4
    assert m.cardinality.tolist() == [2, 3, 2]
    assert np.exp(g.tables[:6]).tolist() == pytest.approx([1, 2, 3, 4, 5, 0])
    assert g.tables[5] == -np.inf
    assert g.factor_args(3).size == 0
    # brute force from the file's numbers: p(x0, x1, x2) ∝ T0[x0,x1] T1[x2] T2[x1] * 2.5
    t0 = np.array([[1, 2, 3], [4, 5, 0.0]])
    t1 = np.array([0.25, 0.75])
    joint = t0[:, :, None] * t1[None, None, :] * np.ones(3)[None, :, None] * 2.5
    r = exact_marginals(g)
    assert r.log_z == pytest.approx(np.log(joint.sum()))
    assert r.marginals[1, :3] == pytest.approx(joint.sum(axis=(0, 2)) / joint.sum())


def test_repeated_variable_in_scope_and_bayes_header(tmp_path):
    p = tmp_path / "rep.uai"
    p.write_text("BAYES 1 2 1 2 0 0 4 0.2 0.8 0.5 0.5")
    m = read_uai_graph(p)
    assert m.kind == "BAYES"
    r = exact_marginals(m.graph)
    assert r.marginals[0].tolist() == pytest.approx([0.2 / 0.7, 0.5 / 0.7])  # the diagonal: 0.2 and 0.5


def test_bayes_rows_that_do_not_sum_to_one_are_refused(tmp_path):
    p = tmp_path / "cpt.uai"
    p.write_text("BAYES 2 2 2 2 1 0 2 0 1 2 0.3 0.7 4 0.1 0.9 0.6 0.5")
    with pytest.raises(UaiFormatError, match="BAYES factor 1 .*row 1 sums to 1.1"):
        read_uai_graph(p)
    p.write_text("MARKOV 2 2 2 2 1 0 2 0 1 2 0.3 0.7 4 0.1 0.9 0.6 0.5")  # the same tables as potentials: fine
    assert read_uai_graph(p).kind == "MARKOV"


def test_one_value_domains_are_padded(tmp_path):
    p = tmp_path / "one.uai"
    p.write_text("MARKOV 2 1 2 1 2 0 1 2 1 3")
    r = exact_marginals(read_uai_graph(p).graph)
    assert r.marginals[0].tolist() == [1.0, 0.0]
    assert r.marginals[1].tolist() == pytest.approx([0.25, 0.75])
    assert r.log_z == pytest.approx(np.log(4.0))


def test_evidence_files_both_forms(tmp_path):
    p = tmp_path / "a.evid"
    p.write_text("0\n")
    assert read_evid(p) == {}
    p.write_text("2 0 1 2 0\n")
    assert read_evid(p) == {0: 1, 2: 0}
    p.write_text("1\n2 0 1 2 0\n")  # older form: one sample
    assert read_evid(p) == {0: 1, 2: 0}
    u = tmp_path / "t.uai"
    u.write_text(TINY)
    m = read_uai_graph(u, p)
    assert m.evidence == {0: 1, 2: 0} and m.graph.evidence.tolist() == [1, -1, 0]
    r = exact_marginals(m.graph)
    assert r.marginals[1, :3] == pytest.approx([4 / 9, 5 / 9, 0.0])
    p.write_text("1 1 7")
    with pytest.raises(UaiFormatError, match="outside its domain"):
        read_uai_graph(u, p)


@pytest.mark.parametrize(
    "text, message",
    [
        ("MARKOW 1 2 0", "MARKOV or BAYES"),
        ("MARKOV 2 2 2 1 2 0 1 3 1 1 1", "needs 4"),
        ("MARKOV 1 2 1 1 5 2 1 1", "outside 0..0"),
        ("MARKOV 1 2 1 1 0 2 1 x", "not a number"),
        ("MARKOV 1 2 1 1 0 2 1", "ends inside the table"),
        ("MARKOV 1 2 1 1 0 2 1 1 9", "unexpected tokens"),
        ("MARKOV 1 2 1 1 0 2 1 -1", "non-negative"),
    ],
)
def test_malformed_files_name_the_problem(tmp_path, text, message):
    p = tmp_path / "bad.uai"
    p.write_text(text)
    with pytest.raises(UaiFormatError, match=message):
        read_uai_graph(p)


def test_round_trip_of_a_table_graph(tmp_path):
    p = tmp_path / "t.uai"
    p.write_text(TINY)
    m = read_uai_graph(p)
    q = tmp_path / "copy.uai"
    write_uai(m, q)
    m2 = read_uai_graph(q)
    for a, b in zip(m.graph, m2.graph):
        assert np.array_equal(a, b)


def test_written_potentials_are_the_shortest_numbers_that_read_back_the_same(tmp_path):
    p = tmp_path / "t.uai"
    p.write_text("MARKOV\n1\n2\n1\n1 0\n2\n0.1 0.7\n")
    q = tmp_path / "copy.uai"
    write_uai(read_uai_graph(p), q)
    assert q.read_text().splitlines()[-1] == "0.1 0.7"  # not exp(log(0.1)) = 0.10000000000000002
    g = GraphBuilder()
    x = g.add_variable(2)
    g.add_factor(F.TABLE, [x], table=np.log([1 / 3, 2 / 3]))
    write_uai(g.build(), q)
    back = read_uai_graph(q).graph
    assert np.array_equal(back.tables, np.log([1 / 3, 2 / 3]))  # long values keep every digit they need


def test_round_trip_of_a_rule_graph_keeps_every_answer(tmp_path):
    b = GraphBuilder()
    h, x, y = b.add_variables(3)
    t = b.add_variable(3)
    grp = b.add_group(S.RATIO, b.add_weight(1.2))
    b.add_factor(F.VOTE, [x, h], literals=[1, 1], group=grp)
    b.add_factor(F.VOTE, [y, h], literals=[1, 1], group=grp)
    b.add_factor(F.EQUAL, [t, x], literals=[2, -1], weight=b.add_weight(-0.6))
    b.add_factor(F.TABLE, [t, y], table=np.linspace(-1, 1, 6), weight=b.add_weight(2.0))
    b.set_evidence(y, 1)
    g = b.build()
    q, e = tmp_path / "rules.uai", tmp_path / "rules.uai.evid"
    write_uai(g, q, evid_path=e)
    back = read_uai_graph(q, e)
    r1, r2 = exact_marginals(g), exact_marginals(back.graph)
    assert np.allclose(r1.marginals, r2.marginals, atol=1e-12)
    assert r1.log_z == pytest.approx(r2.log_z, abs=1e-12)
    assert exact_map(g).log_score == pytest.approx(exact_map(back.graph).log_score, abs=1e-12)


def test_write_evid_and_answer_readers(tmp_path):
    p = tmp_path / "x.evid"
    write_evid({3: 1, 1: 0}, p)
    assert p.read_text().split() == ["2", "1", "0", "3", "1"]
    (tmp_path / "a.MAR").write_text("MAR\n2 2 0.25 0.75 3 0.1 0.2 0.7\n")
    mar = read_mar(tmp_path / "a.MAR")
    assert [x.tolist() for x in mar] == [[0.25, 0.75], [0.1, 0.2, 0.7]]
    (tmp_path / "a.PR").write_text("PR\n-5.861811\n")
    assert read_pr(tmp_path / "a.PR") == -5.861811
    (tmp_path / "a.MAP").write_text("MAP\n3 0 1 2\n")
    assert read_map(tmp_path / "a.MAP").tolist() == [0, 1, 2]
    with pytest.raises(UaiFormatError, match="MAR answer"):
        read_mar(tmp_path / "a.PR")


@pytest.mark.skipif(not DATA.is_dir(), reason=MISSING_DATA)
def test_loads_the_10000_variable_network():
    m = read_uai_graph(DATA / "relational_5.uai", DATA / "relational_5.uai.evid")
    assert m.n_vars == 10_000 and m.graph.n_factors > 10_000
    assert m.evidence == {10: 1, 5010: 1}


@pytest.mark.skipif(not DATA.is_dir(), reason=MISSING_DATA)
def test_round_trip_of_a_competition_file(tmp_path):
    m = read_uai_graph(DATA / "Promedus_24.uai", DATA / "Promedus_24.uai.evid")
    write_uai(m, tmp_path / "p.uai", evid_path=tmp_path / "p.uai.evid")
    back = read_uai_graph(tmp_path / "p.uai", tmp_path / "p.uai.evid")
    assert back.evidence == m.evidence
    assert np.array_equal(back.graph.tables, m.graph.tables)
    assert np.array_equal(back.graph.factor_vars, m.graph.factor_vars)
