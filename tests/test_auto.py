"""AUTO: exact on small graphs, MCMC beyond the table budget or the time limit, with reasons."""

from __future__ import annotations

import pytest

from pdbq.graph.builder import GraphBuilder
from pdbq.inference.exact.auto import AutoConfig, choose_method, estimate_exact_seconds
from pdbq.language.nodes import FactorFunction as F


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
    return b


def test_small_graph_goes_exact_with_its_width():
    d = choose_method(_grid(5).build())
    assert d.method == "EXACT"
    assert d.reason == "exact: induced width 5, largest table 64 entries"
    assert d.width == 5 and d.table_size == 64 and 0 < d.estimated_seconds < 1


def test_oversized_graph_goes_mcmc_and_says_why():
    d = choose_method(_grid(40).build())
    assert d.method == "MCMC"
    assert d.reason.startswith("MCMC: induced width at least ")
    assert "budget 2^26" in d.reason and d.width >= 26 and d.table_size > 2**26
    assert d.estimated_seconds is None
    d = choose_method(_grid(5).build(), max_table=32)
    assert d.method == "MCMC" and "(budget 2^5)" in d.reason


def test_slow_but_fitting_graph_goes_mcmc():
    d = choose_method(_grid(5).build(), max_seconds=1e-9)
    assert d.method == "MCMC" and "would take about" in d.reason and "induced width 5" in d.reason


def test_evidence_cuts_the_graph():
    b = _grid(8)
    g = b.build()
    assert choose_method(g, max_table=2**6).method == "MCMC"
    # observing a whole middle row and column leaves four 3x3/4x4 pieces
    ev = {v: 0 for v in range(64) if v // 8 == 4 or v % 8 == 4}
    d = choose_method(g, max_table=2**6, evidence=ev)
    assert d.method == "EXACT" and d.width <= 5


def test_cost_model_is_monotone():
    c = AutoConfig()
    assert estimate_exact_seconds(10**6, 10, 10, c) < estimate_exact_seconds(10**7, 10, 10, c)
    assert estimate_exact_seconds(44_040_190, 40, 440, c) == pytest.approx(1.47, abs=0.1)
