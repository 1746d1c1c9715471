"""QAM, GIBBS and AUTO answers match EXACT within their standard errors on random SQL models."""

from __future__ import annotations

import numpy as np
import pytest

import pdbq


def random_model(seed: int) -> str:
    """8 boolean variables: random EQUAL links with per-link weights, per-variable priors, a
    RATIO-semantics vote rule over the same links, and one stored evidence row."""
    rng = np.random.default_rng(seed)
    n = 8
    pairs = sorted({tuple(sorted(rng.choice(n, 2, replace=False).tolist())) for _ in range(10)})
    links = ", ".join(f"({a}, {b}, {rng.normal(0, 0.8):.3f})" for a, b in pairs)
    priors = ", ".join(f"({i}, {rng.normal(0, 0.6):.3f})" for i in range(n))
    ev = int(rng.integers(n))
    return f"""
    CREATE TABLE nodes AS SELECT * FROM (VALUES {priors}) t(i, w);
    CREATE TABLE links AS SELECT * FROM (VALUES {links}) t(a, b, w);
    CREATE TABLE obs AS SELECT {ev} AS i, TRUE AS v;
    CREATE VARIABLE y(i INTEGER) DOMAIN BOOLEAN FROM (SELECT i FROM nodes) EVIDENCE (SELECT i, v FROM obs);
    CREATE RULE link WEIGHT = w FUNCTION EQUAL AS y(a) = y(b) :- links(a, b, w);
    CREATE RULE prior WEIGHT = w FUNCTION ISTRUE AS y(i) :- nodes(i, w);
    CREATE RULE vote WEIGHT 0.6 SEMANTICS RATIO AS y(^a) :- links(a, b, _), y(b);
    """


def answers(db, using: str) -> tuple[np.ndarray, np.ndarray, dict]:
    r = db.execute(f"SELECT v.i, PROB(v) AS p, STDERR(v) AS se FROM y v ORDER BY v.i {using}")
    rows = r.fetchall()
    return np.array([x[1] for x in rows]), np.array([x[2] for x in rows]), r.diagnostics


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_qam_gibbs_auto_match_exact(seed):
    with pdbq.connect() as db:
        db.execute(random_model(seed))
        exact, se0, d = answers(db, "USING EXACT")
        assert d["method"] == "EXACT" and np.all(se0 == 0)
        auto, _, d = answers(db, "")
        assert d["method"] == "EXACT" and d["method_reason"].startswith("AUTO: exact")
        np.testing.assert_allclose(auto, exact, atol=1e-12)
        for using, method in [
            ("USING QAM WITH (steps = 30000, seed = 5)", "QAM"),
            ("USING GIBBS WITH (steps = 30000, seed = 5)", "GIBBS"),
            ("WITH (max_table = 1, steps = 30000, seed = 5)", "QAM"),  # AUTO past its table budget
        ]:
            p, se, d = answers(db, using)
            assert d["method"] == method
            free = se > 0
            assert free.sum() >= 6
            assert np.all(np.abs(p - exact) <= 4 * se + 0.01), (using, p, exact, se)
            # teeth: the same tolerance rejects the answers of a model without the vote rule's pull
            assert np.any(np.abs(p[free] - 0.5) > 4 * se[free] + 0.01)


def test_qam_with_each_selection_matches_exact():
    with pdbq.connect() as db:
        db.execute(random_model(4))
        exact, _, _ = answers(db, "USING EXACT")
        base = "SELECT v.i, PROB(v), STDERR(v) FROM y v WHERE v.i IN (0, 1) ORDER BY v.i USING QAM WITH (steps = 20000, seed = 3, "
        for sel in ("uniform", "query_only", "distance", "tv", "mi"):
            rows = db.execute(base + f"selection = '{sel}')").fetchall()
            for i, p, se in rows:
                assert abs(p - exact[i]) <= 4 * se + 0.01, (sel, i, p, exact[i], se)
