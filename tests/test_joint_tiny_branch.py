"""pdbq.joint through a sampler when a branch's probability is astronomically small (hard weights):
the standard error of a product of estimates is computed without dividing by the tiny branch."""
import math

import pytest

import pdbq

MODEL = """
CREATE TABLE ids AS SELECT range::INT AS x FROM range(10);
CREATE VARIABLE b(id INT) DOMAIN BOOLEAN FROM (SELECT x FROM ids WHERE x < 5);
CREATE RULE r2 WEIGHT -1e+20 SEMANTICS LOGICAL AS b(^x) :- ids(x), x = 2, b(y), ids(y), y IN (4, 1);
CREATE RULE r3 WEIGHT -0.0525553 AS b(x) :- ids(x), x = 4;
CREATE RULE r4 WEIGHT -10000000000.0 FUNCTION OR AS b(^x) :- ids(x), x = 3, b(y0), ids(y0), y0 = 0;
"""


@pytest.mark.parametrize("method", ["GIBBS", "QAM"])
def test_joint_with_a_vanishing_branch_answers(method):
    db = pdbq.connect()
    db.execute(MODEL)
    # once an OverflowError from (stderr / p)**2 with p ~ 1e-174
    t = pdbq.joint(db, [("b", 0), ("b", 2)], given={"b": {1: True, 3: False}}, method=method,
                   options={"seed": 1, "time_limit": 5})
    ps, ses = t.column("p").to_pylist(), t.column("stderr").to_pylist()
    assert all(0.0 <= p <= 1.0 for p in ps)
    assert all(se >= 0.0 and not math.isnan(se) for se in ses)
    exact = pdbq.joint(db, [("b", 0), ("b", 2)], given={"b": {1: True, 3: False}}, method="EXACT")
    truth = {tuple(r[:2]): r[2] for r in zip(*(exact.column(i).to_pylist() for i in range(3)))}
    got = {tuple(r[:2]): (r[2], r[3]) for r in zip(*(t.column(i).to_pylist() for i in range(4)))}
    warned = (t.schema.metadata or {}).get(b"warnings")
    for cell, p_true in truth.items():
        p, se = got.get(cell, (0.0, 0.0))
        assert abs(p - p_true) <= 4 * se + 1e-9 or warned, (cell, p, se, p_true)
