"""A rule the evidence satisfies in every grounding a query reaches (an MLN clause whose head is
observed true): the answer carries a note naming it (EXPLAIN shows it too), and the note is sound:
dropping the rule does not change the exact answer. Random evidence, differential check."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pdbq

MODEL = """
CREATE TABLE sensors AS SELECT * FROM (VALUES (1, 'a'), (2, 'a'), (3, 'b'), (4, 'b')) t(x, s);
CREATE TABLE sites AS SELECT DISTINCT s FROM sensors;
CREATE VARIABLE overheat(s TEXT) DOMAIN BOOLEAN FROM (SELECT s FROM sites);
CREATE VARIABLE alarm(x INT) DOMAIN BOOLEAN FROM (SELECT x FROM sensors);
CREATE RULE heat AS 0.1::overheat(s) :- sites(s);
CREATE RULE raises WEIGHT 2.0 AS overheat(s), sensors(x, s) => alarm(x);
CREATE RULE either WEIGHT 0.7 FUNCTION OR AS alarm(x) :- overheat(s), sensors(x, s);
"""


def _note(rule: str) -> str:
    return f"rule {rule} is satisfied by the evidence for every grounding this query reaches"


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from([None, True, False]), min_size=4, max_size=4), st.sampled_from(["a", "b"]))
def test_a_rule_named_satisfied_by_the_evidence_changes_nothing(alarms, site):
    given_ = ", ".join(f"alarm({x}) = {str(v).upper()}" for x, v in enumerate(alarms, 1) if v is not None)
    query = f"SELECT PROB(o) FROM overheat o WHERE o.s = '{site}' {'GIVEN ' + given_ if given_ else ''} USING EXACT"
    mine = [v for x, v in enumerate(alarms, 1) if (x <= 2) == (site == "a")]
    with pdbq.connect() as db:
        db.execute(MODEL)
        r = db.execute(query)
        (p,), = r.fetchall()
        warnings = r.diagnostics["warnings"]
        explained = [v for k, v in db.execute("EXPLAIN " + query.replace("USING EXACT", "USING GIBBS")).fetchall()
                     if k == "warning"]
        for rule in ("raises", "either"):
            noted = any(w.startswith(_note(rule)) for w in warnings)
            assert noted == any(w.startswith(_note(rule)) for w in explained)
            # every alarm the query reaches observed true: both clauses hold whatever overheat is
            assert noted == all(v is True for v in mine), (rule, alarms, site, warnings)
            if noted:
                with pdbq.connect() as without:
                    without.execute(MODEL + f"DROP RULE {rule};")
                    (q,), = without.execute(query).fetchall()
                assert q == pytest.approx(p, abs=1e-12), (rule, alarms, site)


def test_the_note_fails_when_the_head_is_not_observed_true():
    with pdbq.connect() as db:
        db.execute(MODEL)
        r = db.execute("SELECT PROB(o) FROM overheat o WHERE o.s = 'a' GIVEN alarm(1) = TRUE, alarm(2) = FALSE "
                       "USING EXACT")
        assert not any("satisfied by the evidence" in w for w in r.diagnostics["warnings"])
        r = db.execute("SELECT PROB(o) FROM overheat o WHERE o.s = 'a' GIVEN alarm(1) = TRUE, alarm(2) = TRUE "
                       "USING EXACT")
        noted = sorted(w.split()[1] for w in r.diagnostics["warnings"] if "satisfied by the evidence" in w)
        assert noted == ["either", "raises"]
