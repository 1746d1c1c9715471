"""The audit as a test: mutated pdbq statements (seeded, from the SQL in docs/ and examples/ and
a template per statement kind; tests/fuzz_corpus.py) fail only with a PdbqError, and a failure
leaves the catalog, the data and the learned weights as they were. Thousands more cases:
examples/bench/fuzz.py."""

from __future__ import annotations

from fuzz_corpus import Outcome, fresh_db, fuzz, run_case


def test_mutated_statements_fail_only_with_pdbq_errors_and_change_nothing(tmp_path):
    out = fuzz(200, seed=28, tmp=str(tmp_path))
    assert out.ran >= 40, f"only {out.ran} of {out.cases} mutations reached execution"
    assert not out.non_pdbq, out.non_pdbq[:3]
    assert not out.changed, out.changed[:3]
    assert not out.hangs, out.hangs[:3]


def test_the_checker_catches_a_plain_python_error_and_a_changed_state():
    # the harness itself: a statement that fails with a non-PdbqError, and one that fails after
    # changing data, must be reported (else the test above could not fail)
    db = fresh_db()
    out = Outcome()
    try:
        original = db.execute

        def broken(text, *a, **k):
            if "boom" in text:
                raise ValueError("boom")
            if "dirty" in text:
                db.duckdb.execute("DELETE FROM people WHERE person = 'Anna'")
                raise __import__("pdbq").PdbqError("failed after a change")
            return original(text, *a, **k)

        db.execute = broken
        run_case(db, "SELECT PROB(c) FROM cancer c WHERE 'boom' <> '' USING EXACT", out)
        run_case(db, "SELECT PROB(c) FROM cancer c WHERE 'dirty' <> '' USING EXACT", out)
    finally:
        db.close()
    assert len(out.non_pdbq) == 1 and len(out.changed) == 1
