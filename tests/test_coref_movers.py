"""People who moved: the stable identifiers (date of birth, email) agree on most pairs of one
person while the moved fields (address, city, zip, phone) disagree together — dependence among
matches. Agreement on several stable identifiers must never be evidence against a match, and
the front door must find the movers.

Both tests fail with today's model (strict xfail: they fail the suite once they pass, so the
marker goes with the fix). Measured on 20,000 records without households: EM within each
training rule fits the rule's own u (for neighbours sharing an address and phone), which here
takes the people who moved for non-matches (the rule "email equal" gets a match share of 0.47;
m(city differs) ≈ 0); the field interactions then give a pair exact on date of birth and email
−10.7 bits. Precision 1.0, recall 0.38.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import duckdb
import numpy as np
import pytest
from hypothesis import Phase, given, settings, strategies as st

from pdbq.coref.metrics import pairwise
from pdbq.linkage import dedupe

FIELDS = ["first_name", "last_name", "dob", "email", "phone", "address", "city", "zip"]


def _movers():
    spec = importlib.util.spec_from_file_location("pdbq_tests_movers_data", Path(__file__).parent / "movers_data.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.movers


def _run(n, seed):
    tbl, ent = _movers()(n, seed=seed)
    con = duckdb.connect()
    con.register("src", tbl)
    con.execute("CREATE TABLE people AS SELECT * FROM src")
    return dedupe("people", id="rid", fields=FIELDS, con=con), ent


def test_generator_plants_dependence_among_matches():
    """The generator does what the tests rely on: among one person's pairs, the place fields
    change together (far more often than independence says) while dob and email mostly agree."""
    tbl, ent = _movers()(4000, seed=3)
    cols = {f: np.asarray(tbl.column(f).to_pylist(), dtype=object) for f in FIELDS}
    order = np.argsort(ent, kind="stable")
    e = ent[order]
    a = order[:-1][e[1:] == e[:-1]]
    b = order[1:][e[1:] == e[:-1]]
    assert a.size > 300

    def differ(f):
        x, y = cols[f][a], cols[f][b]
        ok = (x != None) & (y != None)  # noqa: E711
        return (x != y) & ok, ok

    addr, ok_a = differ("address")
    city, ok_c = differ("city")
    both = ok_a & ok_c
    p_addr, p_city = addr[both].mean(), city[both].mean()
    assert 0.25 < p_addr < 0.7
    assert (addr & city)[both].mean() > 1.5 * p_addr * p_city  # moves change both together
    for f, most in (("dob", 0.2), ("email", 0.4)):  # new emails and typos: email changes more
        d, ok = differ(f)
        assert d[ok].mean() < most


@pytest.mark.xfail(strict=True, reason="EM within a training rule takes movers for non-matches (module docstring)")
# no shrinking: each try is a whole dedupe run; the failing seed is in the message
@settings(max_examples=1, deadline=None, phases=[Phase.generate])
@given(seed=st.integers(0, 999))
def test_movers_are_found(seed):
    res, ent = _run(4000, seed)
    # few pairs of different people share a date of birth and an email (twins with a family
    # address): agreeing on both is nearly two independent coincidences, not a -10-bit penalty
    inter = {(r["field"], r["given"]): r["bits"] for r in res.pair_model.interactions_table()}
    assert inter.get(("dob", "email"), 0.0) > -3.0, (seed, inter)
    pw = pairwise(res.clusters.column("cluster").to_numpy(), ent)
    assert pw.f1 >= 0.95, (seed, pw)
