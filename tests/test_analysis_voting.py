"""examples/voting.py's SQL model has the paper's energies (§2.1) and the analysis sees Lemmas 2–3."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

import pdbq
from pdbq.analysis import analyze_graph
from pdbq.inference.exact.potentials import log_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
voting = pytest.importorskip("voting")


def paper_delta(semantics, w, t, f):
    """E(Q = 1) − E(Q = −1) for the paper's three energies (the priors cancel)."""
    st, sf = sum(t), sum(f)
    if semantics == "LINEAR":
        return 2 * w * (st - sf)
    if semantics == "LOGICAL":
        return 2 * w * (max(t) - max(f))
    return 2 * w * (math.log1p(st) - math.log1p(sf))


@pytest.mark.parametrize("semantics", ["LINEAR", "LOGICAL", "RATIO"])
def test_sql_voting_model_has_the_papers_energy(semantics):
    n, w = 4, 0.5
    graph, q = voting.build(n, semantics, w=w)
    a = analyze_graph(graph)
    assert a.hierarchy_width == (2 * n + 1 if semantics == "LINEAR" else 3)
    side = {}  # voter -> +1 (true-voter) / -1 (false-voter), from the sign of its vote's weight
    for f in graph.var_adjacent_factors(q):
        args = graph.factor_args(f)
        (v,) = [int(x) for x in args if x != q]
        side[v] = int(np.sign(graph.weights[graph.weight[f]]))
    assert sorted(side.values()) == [-1] * n + [1] * n
    rng = np.random.default_rng(1)
    for _ in range(40):
        x = rng.integers(0, 2, graph.n_vars)
        t = [x[v] for v, s in side.items() if s > 0]
        f = [x[v] for v, s in side.items() if s < 0]
        x1, x0 = x.copy(), x.copy()
        x1[q], x0[q] = 1, 0
        assert log_score(graph, x1) - log_score(graph, x0) == pytest.approx(paper_delta(semantics, w, t, f))


def _voting_db(n: int, semantics: str):
    import pdbq

    db = pdbq.connect()
    con = db.duckdb
    con.execute("CREATE TABLE q_key AS SELECT 1 AS k")
    con.execute(f"CREATE TABLE t_prior AS SELECT i::INTEGER AS i, -0.5 AS w FROM range({n}) r(i)")
    con.execute(f"CREATE TABLE f_prior AS SELECT i::INTEGER AS i, -0.5 AS w FROM range({n}) r(i)")
    db.execute(voting.model_sql(semantics, 0.5))
    return db


def test_linear_warning_names_the_rule_in_answers_explain_and_analyze():
    db = _voting_db(12, "LINEAR")
    q = "SELECT PROB(x) FROM q AS x USING QAM WITH (steps = 2000, seed = 1)"
    res = db.execute(q)
    warned = sorted(w for w in res.diagnostics["warnings"] if "LINEAR semantics" in w)
    assert len(warned) == 2
    assert warned[0].startswith("rule 'f_votes' has LINEAR semantics and a head with 12 coupled votes (q(1); ")
    assert warned[1].startswith("rule 't_votes' has LINEAR semantics and a head with 12 coupled votes (q(1); ")
    rows = db.execute("EXPLAIN " + q).fetchall()
    explained = [v for k, v in rows if k == "warning"]
    assert sorted(w.split(" has ")[0] for w in explained) == ["rule 'f_votes'", "rule 't_votes'"]
    a = pdbq.analyze(db, query=q)
    assert sorted(a.warnings) == warned


@pytest.mark.parametrize("semantics", ["RATIO", "LOGICAL"])
def test_no_warning_on_grouped_semantics_through_sql(semantics):
    db = _voting_db(12, semantics)
    res = db.execute("SELECT PROB(x) FROM q AS x USING QAM WITH (steps = 2000, seed = 1)")
    assert not [w for w in res.diagnostics["warnings"] if "LINEAR semantics" in w]
