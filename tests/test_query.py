"""The query engine end to end through pdbq.connect(): x_q / x_e / x_l, pruning, answers, errors."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pyarrow as pa
import pytest

import pdbq
from pdbq.progress import CancelToken, Cancelled, Progress
from pdbq.api import infer
from pdbq.errors import CatalogError, EvidenceError, InferenceError, OptionError

# A chain x(0) - x(1) - ... - x(9) with EQUAL links, a per-node prior, and stored evidence x(3) = TRUE.
CHAIN = """
CREATE TABLE nodes AS SELECT i, 'n' || i AS label FROM range(10) r(i);
CREATE TABLE edges AS SELECT i AS a, i + 1 AS b FROM range(9) r(i);
CREATE TABLE obs AS SELECT * FROM (VALUES (3, TRUE)) t(i, v);
CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM nodes) EVIDENCE (SELECT i, v FROM obs);
CREATE RULE link WEIGHT 0.8 FUNCTION EQUAL AS x(a) = x(b) :- edges(a, b);
CREATE RULE prior WEIGHT = (i - 4.5) * 0.3 FUNCTION ISTRUE AS x(i) :- nodes(i, _);
CREATE TABLE toks AS SELECT * FROM range(4) r(id);
CREATE VARIABLE tag(token BIGINT) DOMAIN ('PER', 'ORG', 'O') FROM (SELECT id FROM toks);
CREATE VARIABLE topic(token BIGINT) DOMAIN CATEGORICAL(3) FROM (SELECT id FROM toks);
CREATE RULE tags WEIGHT 0.7 FUNCTION EQUAL AS tag(a) = tag(b) :- toks(a), toks(b), b = a + 1;
CREATE RULE per WEIGHT 0.4 AS tag(^t) = 'PER' :- toks(t);
CREATE RULE top WEIGHT 0.5 AS topic(^t) = 2 :- toks(t);
"""

W_LINK = 0.8


def prior(i: int) -> float:
    return (i - 4.5) * 0.3


def chain_exact(evidence: dict[int, int], n: int = 10) -> np.ndarray:
    """P(x_i = 1) for every i by enumeration (EQUAL = ±1, ISTRUE = ±1, energy Σ w φ)."""
    free = [i for i in range(n) if i not in evidence]
    p1 = np.zeros(n)
    z = 0.0
    for bits in itertools.product((0, 1), repeat=len(free)):
        x = dict(evidence)
        x.update(zip(free, bits))
        e = sum(W_LINK * (1 if x[i] == x[i + 1] else -1) for i in range(n - 1))
        e += sum(prior(i) * (1 if x[i] else -1) for i in range(n))
        w = math.exp(e)
        z += w
        for i in range(n):
            p1[i] += w * x[i]
    return p1 / z


@pytest.fixture(scope="module")
def db():
    d = pdbq.connect()
    d.execute(CHAIN)
    yield d
    d.close()


def q(db, sql):
    return db.execute(sql)


# ------------------------------------------------------------------ the three sets and pruning


def test_sets_and_pruning_stop_at_stored_evidence(db):
    r = q(db, "SELECT PROB(v) FROM x v WHERE v.i = 1 USING EXACT")
    d = r.diagnostics
    # x(1) reaches x(0), x(2) and the stored evidence x(3), which stops the expansion.
    assert (d["query_vars"], d["latent_vars"], d["evidence_in_graph"], d["pruned"]) == (1, 2, 1, 10 + 4 + 4 - 4)
    assert d["evidence_vars"] == 1
    assert d["graph_factors"] == 6  # links 0-1, 1-2, 2-3 and the priors of x(0..2)
    assert r.fetchall()[0][0] == pytest.approx(chain_exact({3: 1})[1], abs=1e-9)


def test_given_adds_evidence_and_prunes_more(db):
    r = q(db, "SELECT PROB(v) FROM x v WHERE v.i = 5 GIVEN x(6) = FALSE USING EXACT")
    d = r.diagnostics
    assert (d["query_vars"], d["latent_vars"], d["evidence_in_graph"], d["evidence_vars"]) == (1, 1, 2, 2)
    assert r.fetchall()[0][0] == pytest.approx(chain_exact({3: 1, 6: 0})[5], abs=1e-9)


def test_given_overrides_stored_evidence_for_that_query_only(db):
    over = q(db, "SELECT PROB(v) FROM x v WHERE v.i = 2 GIVEN x(3) = FALSE USING EXACT").fetchall()[0][0]
    assert over == pytest.approx(chain_exact({3: 0})[2], abs=1e-9)
    # the check has teeth: the two answers differ a lot
    assert abs(chain_exact({3: 0})[2] - chain_exact({3: 1})[2]) > 0.05
    again = q(db, "SELECT PROB(v) FROM x v WHERE v.i = 1 USING EXACT").fetchall()[0][0]
    assert again == pytest.approx(chain_exact({3: 1})[1], abs=1e-9)


def test_given_query_form(db):
    r = q(db, "SELECT PROB(v) FROM x v WHERE v.i = 5 GIVEN (SELECT 6, FALSE) AS x USING EXACT")
    assert r.fetchall()[0][0] == pytest.approx(chain_exact({3: 1, 6: 0})[5], abs=1e-9)


def test_query_variable_that_is_evidence_is_a_point_mass(db):
    r = q(db, "SELECT PROB(v), STDERR(v) FROM x v WHERE v.i = 3 USING QAM")
    assert r.fetchall() == [(1.0, 0.0)]
    assert r.diagnostics["method"] == "EVIDENCE" and r.diagnostics["steps"] == 0


def test_where_conjunct_on_an_estimate_filters_after_inference(db):
    exact = chain_exact({3: 1})
    r = q(db, "SELECT v.i, PROB(v) AS p FROM x v WHERE v.i < 3 AND PROB(v) > 0.5 ORDER BY v.i USING EXACT")
    assert r.diagnostics["query_vars"] == 3  # the PROB conjunct cannot narrow x_q
    assert [row[0] for row in r.fetchall()] == [i for i in range(3) if exact[i] > 0.5]


# ------------------------------------------------------------------ SQL around the estimates


def test_order_by_prob_desc_limit(db):
    exact = chain_exact({3: 1})
    r = q(db, "SELECT v.i, PROB(v) AS p FROM x v ORDER BY PROB(v) DESC LIMIT 4 USING EXACT")
    rows = r.fetchall()
    assert [row[0] for row in rows] == list(np.argsort(-exact, kind="stable")[:4])
    assert rows[0][1] == pytest.approx(exact.max(), abs=1e-9)


def test_join_with_ordinary_table_and_expressions(db):
    exact = chain_exact({3: 1})
    r = q(db, """SELECT n.label, round(1 - PROB(v), 6) AS q FROM nodes n JOIN x v ON v.i = n.i
                 WHERE n.label IN ('n0', 'n8') ORDER BY n.label USING EXACT""")
    assert r.fetchall() == [("n0", round(1 - exact[0], 6)), ("n8", round(1 - exact[8], 6))]
    assert r.columns == ["label", "q"]


def test_cte_and_star_hide_internal_columns(db):
    r = q(db, "WITH s AS (SELECT v.i, PROB(v) AS p FROM x v WHERE v.i = 2) SELECT * FROM s USING EXACT")
    assert r.columns == ["i", "p"]
    r = q(db, "SELECT *, PROB(v) FROM x v WHERE v.i = 2 USING EXACT")
    assert r.columns == ["i", "PROB(v)"]


def test_dist_and_map_types(db):
    r = q(db, """SELECT t.token, DIST(t) AS d, MAP(t) AS m, PROB(t = 'PER') AS p, STDERR(t) AS se
                 FROM tag t WHERE t.token = 1 USING EXACT""")
    s = r.arrow().schema
    assert s.field("d").type == pa.map_(pa.string(), pa.float64())
    assert s.field("m").type == pa.string() and s.field("p").type == pa.float64()
    (token, dist, mapv, p, se), = r.fetchall()
    dist = dict(dist)
    assert list(dist) == ["PER", "ORG", "O"] and sum(dist.values()) == pytest.approx(1.0)
    assert mapv == "PER" and p == pytest.approx(dist["PER"]) and se == 0.0
    r = q(db, "SELECT DIST(v) AS d, MAP(v) AS m FROM x v WHERE v.i = 9 USING EXACT")
    assert r.arrow().schema.field("d").type == pa.map_(pa.bool_(), pa.float64())
    assert r.arrow().schema.field("m").type == pa.bool_()
    r = q(db, "SELECT DIST(t) AS d, MAP(t) AS m FROM topic t WHERE t.token = 0 USING EXACT")
    assert r.arrow().schema.field("d").type == pa.map_(pa.int32(), pa.float64())
    assert r.fetchall()[0][1] == 2


def test_map_is_joint_map_with_exact_and_argmax_with_gibbs(db):
    exact = q(db, "SELECT v.i, MAP(v) FROM x v WHERE v.i IN (0, 1, 2) ORDER BY v.i USING EXACT").fetchall()
    assert all(isinstance(m, bool) for _, m in exact)
    gibbs = q(db, "SELECT v.i, MAP(v) FROM x v WHERE v.i IN (0, 1, 2) ORDER BY v.i USING GIBBS "
                  "WITH (steps = 20000, seed = 1)").fetchall()
    marg = chain_exact({3: 1})
    assert [m for _, m in gibbs] == [bool(marg[i] > 0.5) for i in range(3)]


# ------------------------------------------------------------------ run lengths and seeds


def test_explicit_steps_and_sweeps_are_exact(db):
    r = q(db, "SELECT PROB(v) FROM x v WHERE v.i = 1 USING QAM WITH (steps = 3000, seed = 2)")
    assert r.diagnostics["steps"] == 3000 and r.diagnostics["seed"] == 2
    r = q(db, "SELECT PROB(v) FROM x v WHERE v.i = 1 USING GIBBS WITH (sweeps = 100, burn_in = 10, seed = 2)")
    assert r.diagnostics["steps"] == 100 * 3 and r.diagnostics["burn_in"] == 10 * 3


def test_same_seed_same_answer(db):
    sql = "SELECT v.i, PROB(v) FROM x v WHERE v.i IN (1, 7) ORDER BY v.i USING QAM WITH (steps = 4000, seed = 11)"
    assert q(db, sql).fetchall() == q(db, sql).fetchall()
    other = q(db, sql.replace("seed = 11", "seed = 12")).fetchall()
    assert other != q(db, sql).fetchall()


def test_default_tolerance_stops_the_run_and_seed_is_reported(db):
    # the default tolerance (0.01) ends the run; a generous time limit keeps a loaded machine from
    # stopping it first
    r = q(db, "SELECT PROB(v) AS p, STDERR(v) AS se FROM x v WHERE v.i = 8 USING QAM WITH (time_limit = 60)")
    d = r.diagnostics
    assert isinstance(d["seed"], int) and d["method"] == "QAM" and d["selection"] == "trail"
    p, se = r.fetchall()[0]
    assert 1.96 * se <= 0.0101
    assert abs(p - chain_exact({3: 1})[8]) <= 4 * se + 0.005
    assert d["rhat_max"] is not None and d["ess_min"] > 0 and d["seconds"] > 0


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    "sql, error, fragments",
    [
        ("SELECT PROB(v) FROM x v GIVEN x(1) = TRUE, x(1) = FALSE", EvidenceError, ["x(1)", "TRUE", "FALSE"]),
        ("SELECT PROB(v) FROM x v GIVEN x(99) = TRUE", EvidenceError, ["99", "no variable of x"]),
        ("SELECT PROB(v) FROM x v GIVEN x(1) = 5", EvidenceError, ["5", "outside the domain"]),
        ("SELECT PROB(t = 'PER') FROM tag t GIVEN tag(0) = 'XYZ'", EvidenceError, ["'XYZ'", "domain"]),
        ("SELECT PROB(v) FROM x v GIVEN nodes(1) = TRUE", EvidenceError, ["nodes", "not a variable relation"]),
        ("SELECT PROB(v) FROM x v GIVEN x(1, 2) = TRUE", EvidenceError, ["1 key column"]),
        ("SELECT PROB(v) FROM x v WITH (stepz = 10)", OptionError, ["stepz", "steps", "Valid options"]),
        ("SELECT PROB(v) FROM x v WITH (steps = 'many')", OptionError, ["steps", "number"]),
        ("SELECT PROB(v) FROM x v WITH (selection = 'trial')", OptionError, ["trail"]),
        ("SELECT PROB(t) FROM tag t", InferenceError, ["PROB(t = value)", "DIST(t)"]),
        ("SELECT PROB(t = 'XYZ') FROM tag t", InferenceError, ["'XYZ'"]),
        ("SELECT PROB(n) FROM nodes n", CatalogError, ["nodes", "not a variable relation"]),
        ("SELECT PROB(s) FROM (SELECT 1) s", CatalogError, ["subquery"]),
        ("SELECT PROB(v) FROM x v USING GIBBS WITH (selection = 'trail')", OptionError, ["GIBBS", "uniform"]),
        ("SELECT PROB(v) FROM x v USING ANNEAL", InferenceError, ["MAP"]),
    ],
)
def test_errors(db, sql, error, fragments):
    with pytest.raises(error) as e:
        q(db, sql)
    for f in fragments:
        assert f in str(e.value), (f, str(e.value))


# ------------------------------------------------------------------ infer(), progress, cancel


def test_infer_batches_keys_in_one_run(db):
    inf = infer(db, {"x": [0, 1, 8], "tag": [(2,)]}, method="EXACT", map=True)
    exact = chain_exact({3: 1})
    assert inf["x"].prob() == pytest.approx(exact[[0, 1, 8]], abs=1e-9)
    assert inf["x"].map() == [bool(exact[i] > 0.5) for i in (0, 1, 8)]
    assert list(inf["tag"].dist()[0]) == ["PER", "ORG", "O"]
    assert inf.diagnostics["query_vars"] == 4
    with pytest.raises(CatalogError, match="no variable of x"):
        infer(db, {"x": [42]})
    nul = infer(db, {"x": [42, 1]}, missing="null", method="EXACT")
    assert np.isnan(nul["x"].prob()[0]) and nul["x"].prob()[1] == pytest.approx(exact[1])
    given = infer(db, {"x": [5]}, given=[("x", (6,), False)], method="EXACT")
    assert given["x"].prob()[0] == pytest.approx(chain_exact({3: 1, 6: 0})[5], abs=1e-9)


def test_progress_callback_and_cancel(db):
    from pdbq.planning.execute import execute_query
    from pdbq.language.parser import parse_statement

    seen: list[Progress] = []
    stmt = parse_statement("SELECT PROB(v) FROM x v WHERE v.i = 1 USING QAM WITH (steps = 5000, seed = 1)")
    execute_query(db, stmt, progress=seen.append)
    phases = {p.phase for p in seen}
    assert phases == {"grounding", "sampling"} and seen[-1].total == 5000
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        execute_query(db, stmt, cancel=token)
    assert q(db, "SELECT PROB(v) FROM x v WHERE v.i = 1 USING EXACT").fetchall()  # still usable
