"""DOMAIN CLUSTER relations in SQL: definitions, MAP / PROB / STDERR / DIST answers, errors."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import pdbq
from pdbq.errors import CatalogError, GroundingError, InferenceError, OptionError

NAMES = [(1, "john smith"), (2, "jon smith"), (3, "mary jones"), (4, "mary jones"), (5, "peter pan")]


@pytest.fixture
def db():
    d = pdbq.connect()
    rows = ", ".join(f"({i}, '{n}')" for i, n in NAMES)
    d.execute(f"CREATE TABLE records AS SELECT * FROM (VALUES {rows}) t(id, name)")
    d.execute("CREATE TABLE pairs AS SELECT l.id AS a, r.id AS b, jaro_winkler_similarity(l.name, r.name) AS sim "
              "FROM records l JOIN records r ON l.id < r.id")
    d.execute("CREATE VARIABLE entity(id BIGINT) DOMAIN CLUSTER FROM (SELECT id FROM records)")
    d.execute("CREATE RULE affinity WEIGHT = 10 * (sim - 0.9) FUNCTION EQUAL AS entity(a) = entity(b) :- pairs(a, b, sim)")
    yield d
    d.close()


def _exact_same(d, i, j, event=None):
    """P(i, j in one entity) (or of `event(partition)`) by enumerating every partition."""
    w = {(a, b): 10 * (s - 0.9) for a, b, s in d.duckdb.execute("SELECT a, b, sim FROM pairs").fetchall()}
    ids = [k for k, _ in NAMES]

    def partitions(items):
        if not items:
            yield []
            return
        first, rest = items[0], items[1:]
        for p in partitions(rest):
            yield [[first]] + p
            for k in range(len(p)):
                yield p[:k] + [[first] + p[k]] + p[k + 1:]

    num = den = 0.0
    for p in partitions(ids):
        score = sum(w[(min(a, b), max(a, b))] for block in p for a, b in itertools.combinations(block, 2))
        pr = math.exp(score)
        den += pr
        if (event(p) if event else any(i in block and j in block for block in p)):
            num += pr
    return num / den


def test_metric_macros_come_with_every_connection(db):
    db.duckdb.execute("CREATE TABLE g AS SELECT * FROM (VALUES (1, 1), (2, 1), (3, 3), (4, 3), (5, 3)) t(id, entity)")
    db.duckdb.execute("CREATE TABLE p AS SELECT * FROM (VALUES (1, 1), (2, 1), (3, 1), (4, 4), (5, 4)) t(id, cluster)")
    assert db.execute("SELECT * FROM coref_pairwise('p', 'g')").fetchall() == [(0.5, 0.5, 0.5)]


def test_definition_round_trips(db):
    shown = str(db.execute("SHOW VARIABLES"))
    assert "CLUSTER" in shown


def test_map_labels_are_smallest_ids(db):
    r = db.execute("SELECT e.id, MAP(e) AS cluster FROM entity AS e ORDER BY e.id")
    assert r.arrow().column("cluster").to_pylist() == [1, 1, 3, 3, 5]
    assert r.diagnostics["e.factor_evaluations"] > 0
    assert r.diagnostics["e.candidate_pairs"] == 10


def test_prob_same_entity_matches_exact(db):
    r = db.execute("SELECT e.id, PROB(e = 1) AS p, STDERR(e) AS se FROM entity AS e WHERE e.id IN (2, 3) "
                   "ORDER BY e.id WITH (sweeps = 3000, chains = 4, seed = 3)")
    p = r.arrow().column("p").to_pylist()
    se = r.arrow().column("se").to_pylist()
    for (pid, got, s) in zip((2, 3), p, se):
        exact = _exact_same(db, 1, pid)
        assert abs(got - exact) <= 5 * s + 2e-3, (pid, got, exact, s)
    assert 0.3 < p[0] < 0.95 and p[1] < 0.01


def test_size_distribution(db):
    r = db.execute("SELECT e.id, DIST(e) AS sizes FROM entity AS e WHERE e.id = 5 WITH (sweeps = 400, seed = 1)")
    sizes = dict(r.arrow().column("sizes").to_pylist()[0])
    assert sum(sizes.values()) == pytest.approx(1.0)
    exact = _exact_same(db, 5, 5, event=lambda p: any(b == [5] for b in p))
    assert abs(sizes[1] - exact) < 0.02, (sizes, exact)


def test_other_relations_unaffected(db):
    db.execute("CREATE VARIABLE flag(id BIGINT) DOMAIN BOOLEAN FROM (SELECT id FROM records)")
    db.execute("CREATE RULE f1 WEIGHT 1.0 AS flag(^i) :- records(i, n)")
    r = db.execute("SELECT f.id, PROB(f) AS p FROM flag f WHERE f.id = 1 USING EXACT")
    assert r.arrow().column("p").to_pylist()[0] == pytest.approx(1 / (1 + math.exp(-2)))  # the vote: ±1
    db.ground()  # the cluster rule is not grounded into the factor store
    with pytest.raises(InferenceError, match="cannot mix"):
        db.execute("SELECT e.id, MAP(e), PROB(f) FROM entity e JOIN flag f ON e.id = f.id")


def test_definition_errors(db):
    with pytest.raises(CatalogError, match="exactly one key column"):
        db.execute("CREATE VARIABLE e2(a BIGINT, b BIGINT) DOMAIN CLUSTER FROM (SELECT id, id FROM records)")
    with pytest.raises(CatalogError, match="only as"):
        db.execute("CREATE RULE r2 WEIGHT 1.0 AS entity(^a) = 1 :- records(a, n)")
    with pytest.raises(CatalogError, match="supported on DOMAIN CLUSTER pair rules only"):
        db.execute("CREATE VARIABLE flag(id BIGINT) DOMAIN BOOLEAN FROM (SELECT id FROM records)")
        db.execute("CREATE RULE r3 WEIGHT ? * n AS flag(a) :- records(a, n)")
    with pytest.raises(CatalogError, match="r4.*numeric"):
        db.execute("CREATE RULE r4 WEIGHT ? * 'x' FUNCTION EQUAL AS entity(a) = entity(b) :- pairs(a, b, s)")
    with pytest.raises(pdbq.ParseError, match="CLUSTER"):
        db.execute("CREATE VARIABLE e3(id BIGINT) DOMAIN CLUSTERS FROM (SELECT id FROM records)")


def test_query_errors(db):
    with pytest.raises(OptionError, match="'sweep'"):
        db.execute("SELECT e.id, MAP(e) FROM entity e WITH (sweep = 3)")
    with pytest.raises(GroundingError, match="yield 10 candidate pairs, above max_pairs = 5"):
        db.execute("SELECT e.id, MAP(e) FROM entity e WITH (max_pairs = 5)")
    with pytest.raises(InferenceError, match="no mention has key 99"):
        db.execute("SELECT e.id, PROB(e = 99) FROM entity e")
    with pytest.raises(InferenceError, match="needs a key"):
        db.execute("SELECT e.id, PROB(e) FROM entity e")
    with pytest.raises(InferenceError, match="EXPLAIN is not available"):
        db.execute("EXPLAIN SELECT e.id, MAP(e) FROM entity e")
    with pytest.raises(InferenceError, match="USING EXACT is not available"):
        db.execute("SELECT e.id, MAP(e) FROM entity e USING EXACT")
    from pdbq.api import infer

    with pytest.raises(InferenceError, match="ask it with a query"):
        infer(db, {"entity": [(1,)]})
    before = db.duckdb.execute("SELECT count(*) FROM pairs").fetchone()[0]
    assert before == 10
