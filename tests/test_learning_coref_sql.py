"""LEARN WEIGHTS ... USING SAMPLERANK for DOMAIN CLUSTER rules, end to end through SQL: learning on a
planted clustering from a gold table, versions, queries using the learned weights, holdout
scores, cancellation, and the bad-input errors that leave the weights unchanged."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import pdbq
from pdbq.coref.metrics import b_cubed
from pdbq.errors import CatalogError, LearningError, OptionError
from pdbq.progress import CancelToken


def _planted(seed: int = 0, n_ent: int = 40):
    """Entities of 1-5 mentions; candidate pairs within blocks of 5 entities; `sim` high for
    coreferent pairs, `noise` independent of them, `kind` 'near' for pairs with sim > 0.6."""
    rng = np.random.default_rng(seed)
    ents = np.repeat(np.arange(n_ent), rng.integers(1, 6, n_ent))
    a, b = np.triu_indices(ents.size, 1)
    keep = (ents[a] // 5) == (ents[b] // 5)
    a, b = a[keep], b[keep]
    same = ents[a] == ents[b]
    sim = np.clip(np.where(same, rng.normal(0.8, 0.12, a.size), rng.normal(0.4, 0.12, a.size)), 0, 1)
    noise = rng.normal(0.0, 1.0, a.size)
    return ents, a, b, sim, noise


@pytest.fixture
def db():
    ents, a, b, sim, noise = _planted()
    d = pdbq.connect()
    con = d.duckdb
    con.register("m_arrow", pa.table({"id": np.arange(ents.size) + 100, "entity": ents}))
    con.execute("CREATE TABLE mentions AS SELECT * FROM m_arrow")
    con.register("p_arrow", pa.table({"a": a + 100, "b": b + 100, "sim": sim, "noise": noise,
                                      "kind": np.where(sim > 0.6, "near", "far")}))
    con.execute("CREATE TABLE pairs AS SELECT * FROM p_arrow")
    d.execute("CREATE VARIABLE entity(id BIGINT) DOMAIN CLUSTER FROM (SELECT id FROM mentions)")
    d.execute("CREATE RULE simw WEIGHT ? * (sim - 0.6) FUNCTION EQUAL AS entity(a) = entity(b) :- pairs(a, b, sim, _, _)")
    d.execute("CREATE RULE noisew WEIGHT ? * noise FUNCTION EQUAL AS entity(a) = entity(b) :- pairs(a, b, _, noise, _)")
    d.execute("CREATE RULE bias WEIGHT ? FUNCTION EQUAL AS entity(a) = entity(b) :- pairs(a, b, _, _, _)")
    yield d
    d.close()


GOLD = "gold = 'SELECT id, entity FROM mentions'"


def _weights(d) -> dict:
    return {(r["rule"], r["tie"]): (r["value"], r["version"]) for r in d.execute("SHOW WEIGHTS").arrow().to_pylist()}


def _map_b3(d) -> float:
    t = d.execute("SELECT e.id, MAP(e) AS c FROM entity e ORDER BY e.id WITH (init = 'components')").arrow()
    gold = d.duckdb.execute("SELECT entity FROM mentions ORDER BY id").fetchnumpy()["entity"]
    return b_cubed(np.asarray(t.column("c").to_pylist()), gold).f1


def test_learns_planted_weights_and_queries_use_them(db):
    before = _map_b3(db)  # every weight 0: no pair scores anything
    r = db.execute(f"LEARN WEIGHTS USING SAMPLERANK WITH ({GOLD}, holdout = 0.3, seed = 1)")
    row = r.arrow().to_pylist()[0]
    assert row["version"] == 1 and row["weights"] == 3 and row["epochs"] == 100 and not row["interrupted"]
    assert row["rules"] == "bias, noisew, simw" and row["objective"] == "b3" and row["holdout"] > 0
    assert row["b3_f1"] > 0.9 and row["pairwise_f1"] > 0.8
    assert r.diagnostics["holdout"]["b3_f1"] == row["b3_f1"]
    w = _weights(db)
    assert set(w) == {("simw", None), ("noisew", None), ("bias", None)}
    assert all(v[1] == 1 for v in w.values())
    assert w[("simw", None)][0] > 0 and abs(w[("noisew", None)][0]) < w[("simw", None)][0] / 3
    after = _map_b3(db)
    assert after > 0.9 and after > before + 0.2


def _prob_pair(d, k, same, other):
    t = d.execute(f"SELECT e.id, PROB(e = {k}) AS p FROM entity e WHERE e.id IN ({same}, {other}) WITH (seed = 2)")
    return {x["id"]: x["p"] for x in t.arrow().to_pylist()}


def test_prob_reads_learned_weights(db):
    # mention k's most similar coreferent neighbour and its least similar other neighbour
    k, same, other = db.duckdb.execute("""
        WITH g AS (SELECT p.a, p.b, p.sim, ma.entity = mb.entity AS coref FROM pairs p
                   JOIN mentions ma ON ma.id = p.a JOIN mentions mb ON mb.id = p.b)
        SELECT a, max_by(b, sim) FILTER (coref), min_by(b, sim) FILTER (NOT coref) FROM g GROUP BY a
        HAVING count(*) FILTER (coref) > 0 ORDER BY max(sim) FILTER (coref) - min(sim) FILTER (NOT coref) DESC LIMIT 1
    """).fetchone()
    before = _prob_pair(db, k, same, other)
    db.execute(f"LEARN WEIGHTS USING SAMPLERANK WITH ({GOLD}, seed = 1)")
    after = _prob_pair(db, k, same, other)
    assert after[same] > before[same] + 0.3 and after[other] < before[other] / 3, (before, after)


def test_versions_and_pairwise_objective(db):
    db.execute(f"LEARN WEIGHTS FOR simw, bias USING SAMPLERANK WITH ({GOLD}, seed = 1)")
    first = _weights(db)
    assert set(first) == {("simw", None), ("bias", None)}  # noisew stays at its initial 0, unlearned
    r = db.execute(f"LEARN WEIGHTS USING SAMPLERANK WITH ({GOLD}, objective = 'pairwise', epochs = 20, seed = 3)")
    row = r.arrow().to_pylist()[0]
    assert row["version"] == 2 and row["objective"] == "pairwise" and row["epochs"] == 20
    assert row["holdout"] == 0 and row["b3_f1"] is None  # no holdout, no held-out scores
    w = _weights(db)
    assert {v[1] for v in w.values()} == {2}
    n = db.duckdb.execute("SELECT count(*), count(DISTINCT version) FROM pdbq_learned_weights").fetchone()
    assert n == (5, 2)
    assert "holdout = " not in db.execute("SHOW WEIGHTS").arrow().column("weight").to_pylist()[0]


def test_tied_weights_per_value(db):
    db.execute("CREATE RULE kindw WEIGHT ?(kind) FUNCTION EQUAL AS entity(a) = entity(b) :- pairs(a, b, _, _, kind)")
    db.execute(f"LEARN WEIGHTS FOR kindw USING SAMPLERANK WITH ({GOLD}, seed = 0)")
    w = _weights(db)
    near, far = w[("kindw", '{"kind":"near"}')][0], w[("kindw", '{"kind":"far"}')][0]
    assert near > 0 > far


def test_cancel_and_time_limit_keep_weights(db):
    token = CancelToken()
    token.cancel()  # stops at the first progress report (every 10,000 steps)
    r = db.execute(f"LEARN WEIGHTS USING SAMPLERANK WITH ({GOLD}, epochs = 400, seed = 1)", cancel=token)
    row = r.arrow().to_pylist()[0]
    assert row["interrupted"] and row["epochs"] < 400
    assert any("stopped after" in x for x in r.diagnostics["warnings"])
    assert _weights(db)[("simw", None)][0] > 0  # stored and used
    r = db.execute(f"LEARN WEIGHTS USING SAMPLERANK WITH ({GOLD}, epochs = 400, time_limit = 0.001, seed = 1)")
    row = r.arrow().to_pylist()[0]
    assert row["interrupted"] and row["epochs"] < 400 and row["version"] == 2
    assert any("time_limit reached" in x for x in r.diagnostics["warnings"])


def _unchanged(db, sql: str, error, match: str) -> None:
    before = _weights(db)
    with pytest.raises(error, match=match):
        db.execute(sql)
    assert _weights(db) == before


def test_bad_input_keeps_previous_weights(db):
    db.execute(f"LEARN WEIGHTS USING SAMPLERANK WITH ({GOLD}, epochs = 20, seed = 1)")
    con = db.duckdb
    con.execute("CREATE TABLE partial AS SELECT * FROM mentions WHERE id <> 105")
    con.execute("CREATE TABLE dup AS SELECT * FROM mentions UNION ALL SELECT 101, 99")
    _unchanged(db, "LEARN WEIGHTS USING SAMPLERANK WITH (gold = 'no_such_table')", OptionError, "gold")
    _unchanged(db, "LEARN WEIGHTS USING SAMPLERANK WITH (gold = 'SELECT id FROM mentions')", OptionError, "two columns")
    _unchanged(db, "LEARN WEIGHTS USING SAMPLERANK WITH (gold = 'partial')", LearningError, "no entity for 1 of .* key 105")
    _unchanged(db, "LEARN WEIGHTS USING SAMPLERANK WITH (gold = 'dup')", LearningError, "mention 101 .* more than one row")
    _unchanged(db, "LEARN WEIGHTS FOR simw USING SAMPLERANK", LearningError, "needs a gold clustering")
    _unchanged(db, f"LEARN WEIGHTS FOR simw WITH ({GOLD})", LearningError, "USING SAMPLERANK")
    _unchanged(db, f"LEARN WEIGHTS USING SAMPLERANK WITH ({GOLD}, holdout = 'SELECT id FROM mentions')", LearningError,
               "leaves no candidate pair")
    _unchanged(db, f"LEARN WEIGHTS USING SAMPLERANK WITH ({GOLD}, holdout = 'SELECT 1')", OptionError, "selects no mention")
    _unchanged(db, f"LEARN WEIGHTS USING SAMPLERANK WITH ({GOLD}, objective = 'f2')", OptionError, "'objective'")
    _unchanged(db, "LEARN WEIGHTS USING SAMPLERANK", LearningError, "DOMAIN CLUSTER rules: learn them USING SAMPLERANK")
    db.execute("CREATE RULE fixed WEIGHT = sim - 0.5 FUNCTION EQUAL AS entity(a) = entity(b) :- pairs(a, b, sim, _, _)")
    _unchanged(db, f"LEARN WEIGHTS FOR fixed USING SAMPLERANK WITH ({GOLD})", LearningError, "no learnable weight")
    db.execute("CREATE VARIABLE flag(id BIGINT) DOMAIN BOOLEAN FROM (SELECT id FROM mentions)")
    db.execute("CREATE RULE flagw WEIGHT ? AS flag(i) :- mentions(i, _)")
    _unchanged(db, f"LEARN WEIGHTS FOR simw, flagw USING SAMPLERANK WITH ({GOLD})", LearningError, "not a cluster rule")
    _unchanged(db, f"LEARN WEIGHTS FOR flagw USING SAMPLERANK WITH ({GOLD})", OptionError, "for DOMAIN CLUSTER rules")
    with pytest.raises(CatalogError, match="no_rule"):
        db.execute(f"LEARN WEIGHTS FOR no_rule USING SAMPLERANK WITH ({GOLD})")
    assert db.duckdb.execute("SELECT count(*) FROM pdbq_weight_versions").fetchone()[0] == 1


def test_cluster_rule_without_groundings(db):
    db.duckdb.execute("CREATE TABLE nopairs(a BIGINT, b BIGINT, s DOUBLE)")
    db.execute("CREATE RULE empty WEIGHT ? * s FUNCTION EQUAL AS entity(a) = entity(b) :- nopairs(a, b, s)")
    with pytest.raises(LearningError, match="no groundings"):
        db.execute(f"LEARN WEIGHTS FOR empty USING SAMPLERANK WITH ({GOLD})")


def test_plain_learn_weights_skips_cluster_rules(db):
    """Without FOR and gold, LEARN WEIGHTS learns the ordinary rules (SGD) and leaves the cluster
    rules alone; with gold it learns the cluster rules; each is its own version."""
    db.duckdb.execute("CREATE TABLE flags AS SELECT id, id % 3 = 0 AS f FROM mentions")
    db.execute("CREATE VARIABLE flag(id BIGINT) DOMAIN BOOLEAN FROM (SELECT id FROM flags) EVIDENCE (SELECT id, f FROM flags)")
    db.execute("CREATE RULE flagw WEIGHT ? AS flag(i) :- flags(i, _)")
    row = db.execute("LEARN WEIGHTS WITH (epochs = 5)").arrow().to_pylist()[0]
    assert row["rules"] == "flagw" and row["method"] == "SGD"
    assert set(_weights(db)) == {("flagw", None)}
    row = db.execute(f"LEARN WEIGHTS USING SAMPLERANK WITH ({GOLD}, epochs = 5)").arrow().to_pylist()[0]
    assert row["rules"] == "bias, noisew, simw" and row["version"] == 2
    assert {k[0]: v[1] for k, v in _weights(db).items()} == {"flagw": 1, "bias": 2, "noisew": 2, "simw": 2}
