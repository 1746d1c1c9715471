"""The loops an audit found ignoring a time limit or a cancel, each stopped where it runs: the
elimination-order search (both its paths), the cutset choice, AUTO's decision, the coreference
passes (annealing, the greedy passes, the polish, burn-in) and the reading of a large GIVEN.

No clock is raced here: each test hands the loop a stop that fires on a count (or a deadline
already past) and checks that it was read, what was kept, and what the answer says."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pdbq
from pdbq.errors import TimeLimitError
from pdbq.graph.builder import GraphBuilder
from pdbq.inference.exact.elimination import exact_marginals
from pdbq.inference.exact.elimination_order import min_fill_order
from pdbq.inference.moves.cutset import choose_cutset
from pdbq.language.nodes import FactorFunction as F


def _grid_scopes(rows: int, cols: int) -> list[np.ndarray]:
    out = []
    for r in range(rows):
        for c in range(cols):
            i = r * cols + c
            if c + 1 < cols:
                out.append(np.array([i, i + 1]))
            if r + 1 < rows:
                out.append(np.array([i, i + cols]))
    return out


def _grid(rows: int, cols: int, w: float = 0.5):
    b = GraphBuilder()
    v = b.add_variables(rows * cols)
    for s in _grid_scopes(rows, cols):
        b.add_factor(F.EQUAL, [v[int(s[0])], v[int(s[1])]], weight=b.add_weight(w))
    return b.build()


class _After:
    """should_stop() that answers True from its ``n``-th call on, counting the calls."""

    def __init__(self, n: int):
        self.n, self.calls = n, 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.calls >= self.n


@pytest.mark.parametrize("side", [30, 40])  # 900 variables: the numba kernel; 1,600: Python's sets
def test_the_order_search_reads_its_stop_on_both_paths(side):
    scopes = _grid_scopes(side, side)
    card = np.full(side * side, 2)
    stop = _After(2)
    info = min_fill_order(scopes, card, should_stop=stop)
    assert info.stopped and not info.complete
    assert stop.calls == 2
    assert 0 < info.order.shape[0] < side * side  # cut inside the search, with what was ordered
    assert min_fill_order(scopes, card).complete


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 60), m=st.integers(1, 90), seed=st.integers(0, 2**32 - 1), stop=st.none() | st.integers(2, 400))
def test_an_order_searched_in_pieces_is_the_order_searched_at_once(n, m, seed, stop):
    rng = np.random.default_rng(seed)
    card = rng.integers(1, 5, n)
    scopes = [np.unique(rng.choice(n, int(rng.integers(1, 5)))) for _ in range(m)]
    whole = min_fill_order(scopes, card, stop_above=stop)
    pieces = min_fill_order(scopes, card, stop_above=stop, should_stop=lambda: False)
    assert np.array_equal(whole.order, pieces.order)
    assert all(np.array_equal(a, b) for a, b in zip(whole.cliques, pieces.cliques))
    assert (whole.width, whole.max_table_size, whole.total_table_size, whole.complete) == \
        (pieces.width, pieces.max_table_size, pieces.total_table_size, pieces.complete)
    assert not pieces.stopped


def test_choosing_a_cutset_ends_at_its_stop():
    # on a 60 × 60 grid each cutset variable costs a min-fill order of the whole remainder: minutes
    stop = _After(3)
    with pytest.raises(TimeLimitError, match="stopped choosing the cutset"):
        choose_cutset(_grid(60, 60), max_table=1 << 10, should_stop=stop)
    assert stop.calls == 3


def test_exact_elimination_stops_inside_the_order_search():
    # 40 × 40: the order search alone is seconds; a passed deadline ends it before any clique
    with pytest.raises(TimeLimitError, match="elimination-order search"):
        exact_marginals(_grid(40, 40), deadline=time.perf_counter())


def test_cancel_is_read_inside_the_order_search():
    class Stop(Exception):
        pass

    calls = []

    def poll():
        calls.append(1)
        raise Stop

    with pytest.raises(Stop):
        exact_marginals(_grid(40, 40), poll=poll)
    assert calls == [1]


def _cluster_db(n: int):
    db = pdbq.connect()
    db.execute(f"CREATE TABLE r AS SELECT i AS id, 'name' || (hash(i) % 40) AS name FROM range({n}) t(i)")
    db.execute("CREATE TABLE p AS SELECT a.id AS a, b.id AS b, jaro_winkler_similarity(a.name, b.name) AS sim "
               "FROM r a JOIN r b ON a.id < b.id AND a.id // 100 = b.id // 100")
    db.execute("CREATE VARIABLE e(id BIGINT) DOMAIN CLUSTER FROM (SELECT id FROM r)")
    db.execute("CREATE RULE aff WEIGHT = 10 * (sim - 0.85) FUNCTION EQUAL AS e(a) = e(b) :- p(a, b, sim)")
    return db


def _pair_graph(n: int):
    from pdbq.coref.ground import ground_cluster

    db = _cluster_db(n)
    try:
        v = db.catalog.variables()["e"]
        return ground_cluster(db.duckdb, v, db.catalog.variables(), db.catalog.rules(), 10**7)[1]
    finally:
        db.close()


@pytest.fixture(scope="module")
def pairs():
    return _pair_graph(1000)


def test_coreference_map_stops_every_phase_at_its_deadline(pairs):
    from pdbq.inference.coreference.resolve import CorefConfig, resolve_map

    cfg = CorefConfig(sweeps=10**9, greedy_sweeps=10**6, temperature=0.5, chains=2, time_limit=1.0)
    r = resolve_map(pairs, cfg, deadline=time.perf_counter())  # the deadline already passed
    assert r.labels.shape == (1000,)
    assert len(r.warnings) == 1 and "annealing stopped early" in r.warnings[0]
    assert "zero-temperature passes" in r.warnings[0] and "best single-mention moves" in r.warnings[0]


def test_coreference_passes_read_the_cancel_inside_a_pass(pairs):
    from pdbq.inference.coreference.resolve import CorefConfig, resolve_map, sample_sizes

    class Stop(Exception):
        pass

    calls = []

    def poll():
        calls.append(1)
        if len(calls) >= 3:
            raise Stop

    with pytest.raises(Stop):
        resolve_map(pairs, CorefConfig(sweeps=1, greedy_sweeps=0, chains=1), poll=poll)
    calls.clear()
    with pytest.raises(Stop):  # burn-in: fifty passes read the cancel
        sample_sizes(pairs, CorefConfig(sweeps=1, burn_in=50, chains=1), 5, poll=poll)


def test_a_size_distribution_with_no_pass_kept_is_null_and_warned(pairs):
    from pdbq.inference.coreference.resolve import CorefConfig, sample_sizes

    warnings: list[str] = []
    d = sample_sizes(pairs, CorefConfig(sweeps=10, burn_in=10**6, chains=2, time_limit=1.0), 5,
                     deadline=time.perf_counter(), warnings=warnings)
    assert np.isnan(d).all()
    assert any("burn-in short" in w for w in warnings) and any("none: NULL" in w for w in warnings)


def test_pair_probabilities_with_no_pass_kept_are_nan_not_zero(pairs):
    from pdbq.inference.coreference.resolve import CorefConfig, sample_pairs

    post = sample_pairs(pairs, np.array([0, 1]), np.array([2, 3]), CorefConfig(sweeps=10, burn_in=10**6, chains=2,
                                                                             time_limit=1.0),
                        deadline=time.perf_counter())
    assert np.isnan(post.prob).all()
    assert any("no chain kept a sample" in w for w in post.warnings)


def test_a_cluster_query_past_its_limit_answers_with_the_cut_named():
    db = _cluster_db(3000)
    try:
        # grounded once without a limit and kept: the limited query only samples (grounding 3,000
        # mentions took over 1 s on a loaded machine, and the limit then ended the grounding)
        db.execute("SELECT e.id, DIST(e) FROM e WHERE e.id < 5 USING GIBBS WITH (sweeps = 1)")
        r = db.execute("SELECT e.id, DIST(e) FROM e WHERE e.id < 5 USING GIBBS WITH (sweeps = 1000000000, "
                       "time_limit = 5)")
        rows = r.fetchall()
        assert len(rows) == 5
        w = r.diagnostics["warnings"]
        assert any("size distributions average" in x for x in w), w
        # a row without a kept pass is NULL, never an empty distribution
        assert all(d is None or sum(d.values()) == pytest.approx(1.0) for _, d in rows)
    finally:
        db.close()


def test_a_large_given_is_read_in_few_statements_and_reads_the_cancel(monkeypatch):
    from pdbq.planning import evidence
    n = 3000
    with pdbq.connect() as db:
        db.execute(f"CREATE TABLE t AS SELECT * FROM range({n}) r(i)")
        db.execute("CREATE VARIABLE v(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t)")
        db.execute("CREATE RULE b WEIGHT 0.5 FUNCTION ISTRUE AS v(i) :- t(i)")
        given = ", ".join(f"v({i}) = {'TRUE' if i % 2 else 'FALSE'}" for i in range(1, n))
        sql = f"SELECT PROB(x) FROM v x WHERE x.i = 0 GIVEN {given} USING GIBBS WITH (steps = 100)"
        per_atom = []
        real = evidence._atom_rows
        monkeypatch.setattr(evidence, "_atom_rows", lambda *a: per_atom.append(1) or real(*a))
        assert len(db.execute(sql).fetchall()) == 1
        assert not per_atom  # no statement per atom (a minute at 20,000 atoms)
        # the reading of the keys calls the statement's cancel check between its statements
        from pdbq.language.parser import parse_statement

        class Stop(Exception):
            pass

        checks = []

        def check():
            checks.append(1)
            if len(checks) == 3:
                raise Stop

        stmt = parse_statement(sql)
        with pytest.raises(Stop):
            evidence.resolve_evidence(db.duckdb, db.catalog.variables(), stmt.given, check=check)
        assert len(checks) == 3


def test_a_bad_key_in_a_large_given_is_still_named():
    from pdbq.errors import EvidenceError

    with pdbq.connect() as db:
        db.execute("CREATE TABLE t AS SELECT * FROM range(10) r(i)")
        db.execute("CREATE VARIABLE v(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t)")
        db.execute("CREATE RULE b WEIGHT 0.5 FUNCTION ISTRUE AS v(i) :- t(i)")
        with pytest.raises(EvidenceError, match=r"v\(99\)"):
            db.execute("SELECT PROB(x) FROM v x WHERE x.i = 0 GIVEN v(1) = TRUE, v(99) = TRUE")


def test_a_long_statement_reads_the_cancel_while_it_parses():
    from pdbq.language.parser import parse_checked, parse_statement

    class Stop(Exception):
        pass

    calls = []

    def check():
        calls.append(1)
        raise Stop

    # decimals: a long list of integers or strings is read as one constant (test_long_in_lists.py)
    text = "SELECT PROB(x) FROM v x WHERE x.i IN (" + ", ".join(f"{i}.5" for i in range(20000)) + ")"
    with pytest.raises(Stop), parse_checked(check):
        parse_statement(text)
    assert calls == [1]
    assert parse_statement(text).estimates  # outside the block nothing is checked


def test_a_cancelled_long_in_list_is_cancelled_during_the_parse():
    from pdbq.progress import CancelToken, Cancelled

    token = CancelToken()
    token.cancel()  # cancelled before it starts: the first check ends the parse
    text = "SELECT PROB(x) FROM v x WHERE x.i IN (" + ", ".join(f"{i}.5" for i in range(20001)) + ")"
    with pdbq.connect() as db, pytest.raises(Cancelled):
        db.execute(text, cancel=token)


def test_autos_search_for_a_small_cutset_reads_its_stop():
    from pdbq.inference.moves.move_choice import choose_moves

    # a ring of strong walls: AUTO's choice conditions on a small cutset (tests/test_cutset.py)
    b = GraphBuilder()
    x = b.add_variables(8)
    strong = b.add_weight(9.0)
    for i in range(8):
        b.add_factor(F.EQUAL, [x[i], x[(i + 1) % 8]], weight=strong)
        b.add_factor(F.EQUAL, [x[i], x[(i + 2) % 8]], weight=strong)
    b.add_factor(F.ISTRUE, [x[0]], weight=b.add_weight(0.3))
    g = b.build()
    assert choose_moves(g, block_table=4).cutset is not None
    cut = choose_moves(g, block_table=4, should_stop=lambda: True)
    assert cut.cut and cut.cutset is None and "stopped the search for a small cutset" in cut.reason
    assert not choose_moves(g, block_table=4, should_stop=lambda: False).cut


@pytest.mark.parametrize("stopped_by, warned", [("time", True), ("steps", False), ("tolerance", False)])
def test_a_run_of_asked_steps_cut_by_the_clock_says_so(stopped_by, warned):
    # found by the time-limit matrix: within its tolerance, such a run answered without a word
    from pdbq.inference.mcmc.config import GibbsConfig
    from pdbq.inference.mcmc.run_book import diagnose

    out = diagnose(np.array([0]), np.array([[0.5, 0.5]]), np.array([[0.001, 0.001]]), np.array([1.0]),
                   np.array([1e6]), np.array([False]), 5000, GibbsConfig(steps=10**9, tolerance=0.01, chains=2),
                   stopped_by, 100, 100, np.array([2]))
    assert any("ended the run before the 1,000,000,000 updates per chain asked" in w for w in out) is warned, out


def _sql_grid(db, side: int, tie: float = 0.4) -> None:
    db.execute(f"CREATE TABLE cell AS SELECT i FROM range({side * side}) r(i)")
    db.execute(f"CREATE TABLE nb AS SELECT i AS a, i + 1 AS b FROM cell WHERE i % {side} < {side - 1} "
               f"UNION ALL SELECT i, i + {side} FROM cell WHERE i + {side} < {side * side}")
    db.execute("CREATE VARIABLE s(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM cell)")
    db.execute(f"CREATE RULE tie WEIGHT {tie} FUNCTION EQUAL AS s(a) = s(b) :- nb(a, b)")
    db.execute("CREATE RULE field WEIGHT 0.1 FUNCTION ISTRUE AS s(i) :- cell(i)")


@pytest.mark.parametrize("options, said", [
    ("cutset = true", "stopped choosing the cutset"),  # minutes of order searches on a 60 x 60 grid
    ("", "stopped the search for a small cutset"),  # AUTO's moves on strong ties
])
def test_explains_searches_stop_where_the_querys_would(options, said):
    from pdbq.language.parser import parse_statement
    from pdbq.planning.explain import explain_rows
    from pdbq.planning.plan import plan_query

    with pdbq.connect() as db:
        _sql_grid(db, 60, tie=0.4) if options else _sql_grid(db, 40, tie=3.0)  # AUTO scans 2,000 at most
        stmt = parse_statement(f"EXPLAIN SELECT PROB(x) FROM s x WHERE x.i = 0 USING "
                               f"{'GIBBS' if options else 'AUTO'} WITH (time_limit = 1{', ' if options else ''}{options})")
        plan = plan_query(db, stmt)
        # the statement began long ago: its time limit has passed when the searches start
        rows = dict(explain_rows(db, plan, stmt.method, started=time.perf_counter() - 100))
        assert said in rows["moves"], rows["moves"]


def test_explain_reads_the_cancel_in_the_cutset_search():
    import traceback

    from pdbq.progress import CancelToken, Cancelled

    class InCutset(CancelToken):
        """Cancelled once it is read inside the cutset choice (minutes on this grid)."""

        def check(self) -> None:
            if any(f.name == "choose_cutset" for f in traceback.extract_stack()):
                self.cancel()
            super().check()

    with pdbq.connect() as db:
        _sql_grid(db, 60)
        with pytest.raises(Cancelled):
            db.execute("EXPLAIN SELECT PROB(x) FROM s x WHERE x.i = 0 USING GIBBS WITH (cutset = true, steps = 10)",
                       cancel=InCutset())


@pytest.mark.parametrize("tempering", [1, 4])
def test_the_chains_set_up_stops_at_the_deadline_and_says_so(tempering, monkeypatch):
    # 1,024 chains x 4 copies over 90,000 variables took 11 s of set-up under time_limit = 1
    import sys

    from pdbq.inference.mcmc import gibbs
    from pdbq.inference.mcmc.config import GibbsConfig
    from pdbq.inference.moves import mixing

    g = _grid(20, 20)
    real = time.perf_counter
    t_end = real() + 3600.0
    where = "chain starts drawn" if tempering == 1 else "tempered copies made"

    def clock():  # the deadline passes inside the set-up step under test, never before
        f = sys._getframe(1)
        while f is not None:
            if (f.f_code.co_name == "initial_states" and f.f_locals.get("c", 0) >= 7 and tempering == 1) or \
                    isinstance(f.f_locals.get("self"), mixing._Cycle):
                return t_end + 1.0
            f = f.f_back
        return real()

    monkeypatch.setattr(gibbs.time, "perf_counter", clock)
    cfg = GibbsConfig(chains=64, steps=10**9, seed=1)
    if tempering == 1:
        r = gibbs.run_gibbs(g, [0], cfg, deadline=t_end)
    else:
        r = mixing.run_mixing(g, [0], cfg, mixing.MixingConfig(tempering=tempering), deadline=t_end)
    assert np.isnan(r.marginals).all()
    assert any("while it set up 64 chains" in w and where in w for w in r.warnings), r.warnings


@pytest.mark.parametrize("sharded", [False, True])
def test_dask_coreference_rounds_get_what_the_querys_deadline_leaves(pairs, sharded, monkeypatch):
    # the rounds counted their time_limit from their own start: grounding's share came on top
    import pdbq.distributed as distributed
    from pdbq.inference.coreference.resolve import CorefConfig
    from pdbq.language.parser import parse_statement
    from pdbq.planning import coref_query

    seen = []

    def capture(graph, cfg, *a, **k):
        seen.append(cfg.time_limit)
        raise RuntimeError("captured")

    monkeypatch.setattr(coref_query, "_shardable", lambda graph, workers: sharded)
    monkeypatch.setattr(coref_query, "_resolve_sharded", capture)
    monkeypatch.setattr(distributed, "resolve_distributed", capture)
    stmt = parse_statement("SELECT e.id, MAP(e) FROM e WHERE e.id < 3 USING GIBBS WITH (workers = 2, time_limit = 5)")
    with pytest.raises(RuntimeError, match="captured"):
        coref_query._resolve_map(pairs, CorefConfig(time_limit=5.0), stmt, deadline=time.perf_counter() + 0.5)
    assert 0 < seen[0] <= 0.5


def test_a_cluster_relations_grounding_is_kept_while_its_inputs_are_unchanged(monkeypatch):
    from pdbq.planning import coref_query

    real_kept = coref_query.kept_design
    calls = []
    real = coref_query.design
    monkeypatch.setattr(coref_query, "design", lambda *a, **k: calls.append(1) or real(*a, **k))
    db = _cluster_db(300)
    q = "SELECT e.id, MAP(e) FROM e WHERE e.id < 300 USING ANNEAL WITH (seed = 3, sweeps = 50)"
    try:
        first = db.execute(q).fetchall()
        assert db.execute(q).fetchall() == first and len(calls) == 1  # kept: the same answer, not grounded again
        db.execute("INSERT INTO p VALUES (0, 299, 0.99)")  # a new candidate pair: ground again
        changed = db.execute(q).fetchall()
        assert len(calls) == 2
        monkeypatch.setattr(coref_query, "kept_design", lambda *a: None)  # what a fresh grounding answers
        assert db.execute(q).fetchall() == changed
        db.execute("CREATE OR REPLACE RULE aff WEIGHT = 10 * (sim - 0.5) FUNCTION EQUAL AS e(a) = e(b) :- p(a, b, sim)")
        monkeypatch.setattr(coref_query, "kept_design", real_kept)
        db.execute(q)
        assert len(calls) == 4  # a changed rule: ground again
    finally:
        db.close()
