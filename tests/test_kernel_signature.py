"""Every graph a query hands to the kernels has the warm-up graph's numba signature.

numba types a read-only array apart from a writable one: a graph holding one (an Arrow buffer
read without a copy, as the one-part tables of an imported network were) is a new signature of
every sampling kernel it reaches, compiled inside the query, after the warm-up and past its
deadline (DBN_11's default query: 6.9–12.3 s for a 5 s limit on a loaded machine, the seconds in
numba's compiler). The models are drawn: imported networks (random domains and scopes) and rule
models of one and of several rules.
"""

from __future__ import annotations

import numba
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pdbq
from pdbq.answers.warmup import _tiny_graph
from pdbq.graph.from_store import full_graph, query_graph
from pdbq.grounding import ground_all, stored_evidence
from pdbq.io.uai import read_uai

_SETTINGS = {"max_examples": 12, "deadline": None, "suppress_health_check": [HealthCheck.function_scoped_fixture],
             "print_blob": True}
_WARM = numba.typeof(_tiny_graph()[0])


def _uai_text(rng: np.random.Generator, n: int) -> str:
    card = rng.integers(2, 4, size=n)
    scopes = [[i] for i in range(n)] + [sorted(rng.choice(n, size=min(n, int(rng.integers(2, 4))), replace=False).tolist())
                                        for _ in range(int(rng.integers(1, 2 * n)))]
    lines = ["MARKOV", str(n), " ".join(map(str, card)), str(len(scopes))]
    lines += [f"{len(s)} " + " ".join(map(str, s)) for s in scopes]
    for s in scopes:
        size = int(np.prod(card[s]))
        lines += [str(size), " ".join(f"{x:.4f}" for x in rng.uniform(0.05, 1.0, size=size))]
    return "\n".join(lines) + "\n"


def _graphs(db):
    con, V, R = db.duckdb, db.catalog.variables(), db.catalog.rules()
    ground_all(con, V, R)
    ev = stored_evidence(con)
    whole, _, _ = full_graph(con, V, R)
    part, _, _ = query_graph(con, V, R, np.array([0]), ev)
    return whole, part


def _check(graph) -> None:
    got = numba.typeof(graph)
    if got != _WARM:
        diff = [(f, str(a), str(b)) for f, a, b in zip(graph._fields, got.types, _WARM.types) if a != b]
        raise AssertionError(f"graph arrays typed apart from the warm-up's (kernels recompile in the query): {diff}")


@settings(**_SETTINGS)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 9))
def test_an_imported_network_has_the_warm_up_signature(tmp_path_factory, seed, n):
    path = tmp_path_factory.mktemp("net") / "net.uai"
    path.write_text(_uai_text(np.random.default_rng(seed), n))
    db = pdbq.connect()
    try:
        read_uai(db, path, "net")
        for g in _graphs(db):
            _check(g)
    finally:
        db.close()


@settings(**_SETTINGS)
@given(n_rules=st.integers(1, 3), weight=st.floats(-3, 3, allow_nan=False), rows=st.integers(2, 6))
def test_a_rule_model_has_the_warm_up_signature(n_rules, weight, rows):
    db = pdbq.connect()
    try:
        db.execute(f"CREATE TABLE people AS SELECT range AS p FROM range({rows})")
        db.execute("CREATE TABLE friends AS SELECT a.p AS a, b.p AS b FROM people a, people b WHERE a.p < b.p")
        db.execute("CREATE VARIABLE smokes(p INT) DOMAIN BOOLEAN FROM (SELECT p FROM people)")
        db.execute(f"CREATE RULE r0 WEIGHT {weight} FUNCTION EQUAL AS smokes(a) = smokes(b) :- friends(a, b)")
        for k in range(1, n_rules):
            db.execute(f"CREATE RULE r{k} WEIGHT {weight / (k + 1)} AS smokes(^p) :- people(p), p % {k + 1} = 0")
        for g in _graphs(db):
            _check(g)
    finally:
        db.close()


def _signatures() -> dict[str, set[str]]:
    import sys

    from numba.core.dispatcher import Dispatcher

    out: dict[str, set[str]] = {}
    for name, mod in list(sys.modules.items()):
        if name.startswith("pdbq.") and mod is not None:
            for k, v in list(vars(mod).items()):
                if isinstance(v, Dispatcher):
                    out[f"{name}.{k}"] = set(map(str, v.signatures))
    return out


def test_batch_statistics_has_one_signature_for_sliced_and_whole_stores():
    from pdbq.inference.mcmc.estimates import (
        _batch_stats_kernel,
        _geyer_kernel,
        batch_statistics,
    )

    rng = np.random.default_rng(0)
    whole = rng.random((3, 24, 4, 2))
    counts = np.full((3, 24, 4), 7, dtype=np.int64)
    sliced = batch_statistics(whole[:, 2:], counts[:, 2:])
    contiguous = batch_statistics(np.ascontiguousarray(whole[:, 2:]), np.ascontiguousarray(counts[:, 2:]))
    for a, b in zip(sliced, contiguous):
        np.testing.assert_array_equal(a, b)
    assert len(_batch_stats_kernel.signatures) == 1 and len(_geyer_kernel.signatures) == 1


@settings(**{**_SETTINGS, "max_examples": 4})
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(3, 9), chains=st.integers(1, 4))
def test_a_sampled_query_after_the_warm_up_compiles_nothing(tmp_path_factory, seed, n, chains):
    """Every kernel signature a sampling query meets was compiled (or loaded) by the warm-up, so
    none is compiled inside a query's time limit (sampled answers of drawn imports, AUTO forced
    to sample, plain and with the mixing moves; runs of fixed length, nothing timed)."""
    from pdbq.answers.engine import answer
    from pdbq.answers.warmup import warm_up
    from pdbq.language.nodes import Method
    from pdbq.planning.options import QueryOptions

    for tier in ("core", "moves"):
        warm_up(tier)
    path = tmp_path_factory.mktemp("net") / "net.uai"
    path.write_text(_uai_text(np.random.default_rng(seed), n))
    db = pdbq.connect()
    try:
        read_uai(db, path, "net")
        whole, part = _graphs(db)
    finally:
        db.close()
    before = _signatures()
    for g in (whole, part):
        q = np.flatnonzero(g.evidence < 0)
        for opts in (QueryOptions(exact_budget=0.0, steps=20_000, chains=chains, seed=seed % 1000),
                     QueryOptions(exact_budget=0.0, steps=20_000, chains=chains, seed=seed % 1000, blocks="auto",
                                  tempering=2, jumps=2)):
            answer(g, q, Method.AUTO, opts)
    after = _signatures()
    new = {k: sorted(after[k] - before.get(k, set())) for k in after if after[k] - before.get(k, set())}
    assert not new, f"kernels typed anew inside a query (compiled past its deadline on a fresh install): {new}"
