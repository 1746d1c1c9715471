"""Evidence of probability zero is an EvidenceError naming the factor, in every method, before any
number is returned (issue 12, item 3): a hard factor whose variables are all observed (pruned from
the query's graph), an all-zero table, and evidence that leaves a variable no possible value."""

from __future__ import annotations

import numpy as np
import pytest

import pdbq
from pdbq.errors import EvidenceError
from pdbq.inference.mcmc.feasibility import HardFactors, propagate
from pdbq.api import infer
from pdbq.io.uai import read_uai

METHODS = ["AUTO", "EXACT", "GIBBS", "QAM", "ANNEAL"]
# x0 == x1 (hard), x1 ~ x2 (soft)
EQUAL = "MARKOV 3  2 2 2  2  2 0 1  2 1 2  4 1 0 0 1  4 2 1 1 2"
ALL_ZERO = "MARKOV 2  2 2  2  1 0  2 0 1  2 0 0  4 1 2 3 4"
# x0 = 1 leaves x1 nothing: the (1, 0) and (1, 1) entries are 0
NO_VALUE = "MARKOV 2  2 2  1  2 0 1  4 1 0 0 0"


def _db(tmp_path, text: str) -> pdbq.Database:
    p = tmp_path / "m.uai"
    p.write_text(text)
    db = pdbq.connect()
    read_uai(db, p, "m")
    return db


def _query(method: str, where: str, given: str) -> str:
    est = "MAP(x)" if method == "ANNEAL" else "PROB(x = 1)"
    return f"SELECT {est} FROM m x WHERE {where} {given} USING {method}{'' if method == 'EXACT' else ' WITH (seed = 1, steps = 2000)'}"


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("where", ["x.id = 2", "x.id = 0"])  # a free variable; an evidence-only query
def test_violated_factor_over_evidence_only(tmp_path, method, where):
    with _db(tmp_path, EQUAL) as db:
        with pytest.raises(EvidenceError, match=r"factor 0 of the imported model 'm' over m\(0\) = 0, m\(1\) = 1"):
            db.execute(_query(method, where, "GIVEN m(0) = 0, m(1) = 1"))
        # consistent evidence still answers (the check is not a blanket refusal)
        rows = db.execute(_query(method, where, "GIVEN m(0) = 1, m(1) = 1")).fetchall()
        assert len(rows) == 1 and rows[0][0] is not None


@pytest.mark.parametrize("method", METHODS)
def test_all_zero_table(tmp_path, method):
    with _db(tmp_path, ALL_ZERO) as db:
        with pytest.raises(EvidenceError, match=r"factor 0 .* over m\(0\) is all zeros"):
            db.execute(_query(method, "x.id = 1", ""))


@pytest.mark.parametrize("method", METHODS)
def test_evidence_leaving_no_value(tmp_path, method):
    with _db(tmp_path, NO_VALUE) as db:
        with pytest.raises(EvidenceError, match=r"m\(0\) = 1, m\(1\) leaves some variable no possible value"):
            db.execute(_query(method, "x.id = 1", "GIVEN m(0) = 1"))
        assert db.execute(_query(method, "x.id = 1", "GIVEN m(0) = 0")).fetchall()


def test_infer_checks_evidence_too(tmp_path):
    with _db(tmp_path, EQUAL) as db:
        with pytest.raises(EvidenceError):
            infer(db, {"m": [2]}, given=[("m", 0, 0), ("m", 1, 1)], method="GIBBS")


def test_propagation_chains_through_factors():
    # x0 == x1, x1 == x2 (hard): x0 = 0 and x2 = 1 are impossible only through x1
    eq = np.array([0.0, -np.inf, -np.inf, 0.0])
    hf = HardFactors(np.array([0, 2, 4]), np.array([0, 1, 1, 2]), np.array([0, 4, 8]), np.concatenate([eq, eq]),
                     np.array([2, 2, 2, 2]))
    v = propagate(hf, np.array([0, 2]), np.array([0, 1]))
    assert v is not None
    assert propagate(hf, np.array([0, 2]), np.array([1, 1])) is None


# an odd cycle of hard "different" constraints: every factor alone is satisfiable (propagation
# passes), no world satisfies all three
ODD_CYCLE = "MARKOV 3  2 2 2  3  2 0 1  2 1 2  2 0 2  4 0 1 1 0  4 0 1 1 0  4 0 1 1 0"


@pytest.mark.parametrize("method", ["EXACT", "GIBBS", "QAM"])
def test_contradiction_beyond_propagation_is_an_error(tmp_path, method):
    from pdbq.errors import InferenceError, PdbqError

    expected = EvidenceError if method == "EXACT" else InferenceError
    with _db(tmp_path, ODD_CYCLE) as db:
        with pytest.raises(expected, match="probability zero|no world of positive probability") as e:
            db.execute(_query(method, "x.id = 0", ""))
        assert isinstance(e.value, PdbqError)
