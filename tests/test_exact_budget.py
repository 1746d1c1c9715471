"""AUTO's exact budget: exact whenever its estimated cost fits ``exact_budget`` (default a few
seconds); over it AUTO samples, and a flagged sampling answer says which option gives the exact one."""

from __future__ import annotations

import re

import numpy as np
import pytest
from test_query import CHAIN, chain_exact

import pdbq
from pdbq.answers.engine import answer
from pdbq.errors import OptionError
from pdbq.graph.builder import GraphBuilder
from pdbq.inference.exact.auto import DEFAULT_EXACT_BUDGET, AutoConfig, choose_method
from pdbq.language.nodes import FactorFunction as F
from pdbq.language.nodes import Method
from pdbq.planning.options import QueryOptions

Q = "SELECT PROB(v) AS p FROM x v WHERE v.i = 1 {with_}"


@pytest.fixture(scope="module")
def db():
    d = pdbq.connect()
    d.execute(CHAIN)
    yield d
    d.close()


def test_default_budget_is_a_few_seconds():
    assert 2 <= DEFAULT_EXACT_BUDGET <= 10
    assert QueryOptions().exact_budget == DEFAULT_EXACT_BUDGET == AutoConfig().max_seconds


def test_within_budget_auto_is_exact(db):
    r = db.execute(Q.format(with_=""))
    assert r.diagnostics["method"] == "EXACT"
    assert r.fetchall()[0][0] == pytest.approx(chain_exact({3: 1})[1], abs=1e-12)
    assert not any("exact_budget" in w for w in r.diagnostics["warnings"])


def test_over_budget_auto_samples_and_the_flagged_answer_names_the_option(db):
    # a budget of 0 s is below any estimate; the tolerance cannot be met in 1.5 s: a flagged answer
    r = db.execute(Q.format(with_="WITH (exact_budget = 0, tolerance = 1e-6, time_limit = 1.5, seed = 3)"))
    d = r.diagnostics
    assert d["method"] == "QAM" and "exact_budget 0 s" in d["method_reason"]
    assert any("not reached" in w for w in d["warnings"])
    hint = [w for w in d["warnings"] if "exact_budget" in w]
    assert len(hint) == 1 and "USING EXACT" in hint[0]
    # the option the warning names gives the exact answer
    option = re.search(r"WITH \(exact_budget = (\d+)\)", hint[0]).group(1)
    exact = db.execute(Q.format(with_=f"WITH (exact_budget = {option})"))
    assert exact.diagnostics["method"] == "EXACT"
    assert exact.fetchall()[0][0] == pytest.approx(chain_exact({3: 1})[1], abs=1e-12)


def _grid(n: int):
    b = GraphBuilder()
    vs = b.add_variables(n * n)
    w = b.add_weight(0.3)
    for i in range(n):
        for j in range(n):
            if j + 1 < n:
                b.add_factor(F.EQUAL, [vs[i * n + j], vs[i * n + j + 1]], weight=w)
            if i + 1 < n:
                b.add_factor(F.EQUAL, [vs[i * n + j], vs[(i + 1) * n + j]], weight=w)
    return b.build()


def test_the_budget_decides_between_exact_and_sampling_at_the_estimate():
    g = _grid(6)
    est = choose_method(g, max_seconds=float("inf")).estimated_seconds
    q = np.array([0, 7])
    at = answer(g, q, Method.AUTO, QueryOptions(exact_budget=est * 1.01))
    assert at.method == "EXACT" and at.decision.estimated_seconds == pytest.approx(est)
    below = answer(g, q, Method.AUTO, QueryOptions(exact_budget=est * 0.99, steps=200, chains=2, seed=1,
                                                   tolerance=1e-9, time_limit=0.5))
    assert below.method == "QAM"
    assert any("exact_budget" in w for w in below.warnings)  # flagged (tolerance), so it says how


@pytest.mark.parametrize("bad", ["-1", "'a'", "NULL"])
def test_exact_budget_must_be_a_non_negative_number(db, bad):
    with pytest.raises(OptionError, match="exact_budget"):
        db.execute(Q.format(with_=f"WITH (exact_budget = {bad})"))


def test_the_hint_names_what_gives_the_exact_answer_in_each_case():
    from pdbq.inference.exact.auto import Decision, exact_hint

    timed = exact_hint(Decision("MCMC", "", 20, 2**21, 7.4), 5.0)
    assert "about 7.4 s" in timed and "WITH (exact_budget = 15)" in timed and "USING EXACT" in timed
    floor = exact_hint(Decision("MCMC", "", -1, -1, 12.0), 5.0)
    assert "at least 12.0 s" in floor and "exact_budget" in floor
    table = exact_hint(Decision("MCMC", "", 31, 2**31, None), 5.0)
    assert "2^31-entry table" in table and "max_table" in table
