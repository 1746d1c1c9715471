"""The loopy-BP cross-check is no witness against a target its own factors force: near-deterministic
factors (weights near the hard threshold) can hold BP at 0.5 where the forced answer is exact."""
import pdbq

MODEL = """
CREATE TABLE ids AS SELECT range::INT AS x FROM range(10);
CREATE VARIABLE b(id INT) DOMAIN BOOLEAN FROM (SELECT x FROM ids WHERE x < 5);
CREATE VARIABLE c(id INT) DOMAIN ('v0', 'v1', 'v2') FROM (SELECT x FROM ids WHERE x < 3);
CREATE RULE r0 WEIGHT -1000000.0 FUNCTION EQUAL AS c(x) = c(y) :- ids(x), ids(y), x = 2, y = 0;
CREATE RULE r1 WEIGHT 999999.0 AS c(^x) = 'v2' :- ids(x), x = 1, b(y), ids(y), y = 0;
CREATE RULE r2 WEIGHT -2000000.0 FUNCTION IMPLY AS b(^x) :- ids(x), x = 4, NOT b(y0), ids(y0), y0 = 0;
"""


def test_a_forced_answer_is_not_called_unreliable_by_belief_propagation():
    db = pdbq.connect()
    db.execute(MODEL)
    q = "SELECT v.id, PROB(v) FROM b v GIVEN b(3) = FALSE, b(4) = FALSE USING "
    r = db.execute(q + "AUTO WITH (exact_budget = 0, seed = 3)")
    got = sorted(r.fetchall())
    exact = sorted(db.execute(q + "EXACT").fetchall())
    assert all(abs(a[1] - b[1]) < 1e-6 for a, b in zip(got, exact)), (got, exact)
    assert not [w for w in r.diagnostics["warnings"] if "cross-check" in w or "unreliable" in w], r.diagnostics
