"""Mixing moves through SQL: the tempering/blocks options, AUTO's move choice and EXPLAIN."""

from __future__ import annotations

import numpy as np
import pytest

import pdbq
from pdbq.errors import OptionError

# Pairs a(i) = b(i) held by a hard rule (weight far beyond anything single-site moves can cross
# in a test's time), a prior on a(i), soft links between neighbouring pairs.
MODEL = """
CREATE TABLE ids AS SELECT * FROM range(4) r(i);
CREATE VARIABLE a(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM ids);
CREATE VARIABLE b(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM ids);
CREATE RULE wall WEIGHT 12 FUNCTION EQUAL AS a(i) = b(i) :- ids(i);
CREATE RULE prior WEIGHT 0.6 FUNCTION ISTRUE AS a(i) :- ids(i);
CREATE RULE link WEIGHT 0.4 FUNCTION EQUAL AS b(i) = a(j) :- ids(i), ids(j), j = i + 1;
"""


@pytest.fixture(scope="module")
def db():
    d = pdbq.connect()
    d.execute(MODEL)
    yield d
    d.close()


def _prob(db, using):
    r = db.execute(f"SELECT v.i, PROB(v), STDERR(v) FROM a v ORDER BY v.i {using}")
    rows = r.fetchall()
    return np.array([p for _, p, _ in rows]), np.array([s for _, _, s in rows]), r.diagnostics


def test_blocks_and_tempering_options_answer_within_their_error(db):
    exact, _, _ = _prob(db, "USING EXACT")
    for opts in ("blocks = 'auto'", "blocks = 2", "tempering = 3, blocks = 4"):
        p, se, d = _prob(db, f"USING GIBBS WITH ({opts}, seed = 3, steps = 20000)")
        assert np.all(np.abs(p - exact) <= 4 * se + 0.01), (opts, p, exact)
        assert "block" in d["method_reason"]
    # single-site moves stay stuck behind the walls and the diagnostics say so
    p, se, d = _prob(db, "USING GIBBS WITH (seed = 3, steps = 20000)")
    assert np.abs(p - exact).max() > 0.1
    assert "block" not in d["method_reason"]


def test_mode_jumps_option_answers_within_its_error(db):
    exact, _, _ = _prob(db, "USING EXACT")
    p, se, d = _prob(db, "USING GIBBS WITH (jumps = 8, tempering = 2, seed = 3, steps = 20000)")
    assert np.all(np.abs(p - exact) <= 4 * se + 0.01), (p, exact)
    assert "mode jumps between" in d["method_reason"]
    rows = dict(db.execute("EXPLAIN SELECT PROB(v) FROM a v USING GIBBS WITH (jumps = 8, tempering = 2)").fetchall())
    assert "mode jumps between up to 8 local modes" in rows["moves"]


def test_auto_picks_blocks_for_strong_couplings_when_exact_is_off(db):
    # max_table = 2 rules exact elimination out, so AUTO samples and picks the moves itself
    # time_limit bounds the whole query (grounding and planning too): room for a loaded machine
    exact, _, _ = _prob(db, "USING EXACT")
    p, se, d = _prob(db, "USING AUTO WITH (max_table = 2, seed = 1, time_limit = 6)")
    assert "exact block moves" in d["method_reason"] and "pilot did not mix" in d["method_reason"]
    assert np.all(np.abs(p - exact) <= 4 * se + 0.01)


def test_auto_keeps_plain_chains_when_the_pilot_mixes():
    with pdbq.connect() as d:
        d.execute(MODEL.replace("WEIGHT 12", "WEIGHT 2"))  # strong, but single-site moves cross it
        r = d.execute("SELECT PROB(v) FROM a v USING AUTO WITH (max_table = 2, seed = 1, time_limit = 4)")
        why = r.diagnostics["method_reason"]
        assert "mixed (split R-hat" in why and "did not mix" not in why and "exact block(s)" not in why


def test_explain_names_the_moves(db):
    rows = dict(db.execute("EXPLAIN SELECT PROB(v) FROM a v USING GIBBS WITH (blocks = 4, tempering = 2)").fetchall())
    assert "exact block moves" in rows["moves"] and "2 copies" in rows["moves"]
    rows = dict(db.execute("EXPLAIN SELECT PROB(v) FROM a v USING AUTO WITH (max_table = 2)").fetchall())
    assert rows["moves"].startswith("AUTO: exact block moves")
    rows = dict(db.execute("EXPLAIN SELECT PROB(v) FROM a v").fetchall())
    assert rows["moves"] == "none: exact elimination"


@pytest.mark.parametrize("opts,fragment", [("blocks = 'huge'", "blocks"), ("blocks = 1", "blocks"),
                                            ("tempering = 0", "tempering"), ("block_table = 1", "block_table"),
                                            ("jumps = 1", "jumps"), ("jumps = 100", "jumps"), ("jumps = -1", "jumps"),
                                            ("jumps = 4", "tempering")])
def test_bad_options(db, opts, fragment):
    with pytest.raises(OptionError, match=fragment):
        db.execute(f"SELECT PROB(v) FROM a v USING GIBBS WITH ({opts})")
