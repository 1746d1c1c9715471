"""The audit as a test: mutated pdbq statements (seeded, from the SQL in docs/ and examples/ and
a template per statement kind; tests/fuzz_corpus.py) fail only with a PdbqError, and a failure
leaves the catalog, the data and the learned weights as they were. Thousands more cases:
examples/bench/fuzz.py.

The grammar fuzzer (tests/fuzz_grammar.py) draws new statements every run (a fresh seed, printed
with any failure): ``PDBQ_FUZZ_SECONDS`` (default 30) and ``PDBQ_FUZZ_EXAMPLES`` (default 2,000)
bound it, ``PDBQ_FUZZ_SEED`` replays a run."""

from __future__ import annotations

import os
import random

from fuzz_corpus import Outcome, fresh_db, fuzz, run_case
from fuzz_grammar import grammar_fuzz

FUZZ_SECONDS = float(os.environ.get("PDBQ_FUZZ_SECONDS", "30"))
FUZZ_EXAMPLES = int(os.environ.get("PDBQ_FUZZ_EXAMPLES", "2000"))


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


def test_grammar_fuzzed_statements_fail_only_with_pdbq_errors_and_change_nothing(tmp_path):
    seed = int(os.environ.get("PDBQ_FUZZ_SEED") or random.SystemRandom().randrange(2**32))
    out = grammar_fuzz(FUZZ_EXAMPLES, FUZZ_SECONDS, seed, str(tmp_path))
    print(f"grammar fuzzer, seed {seed}: {out.cases} statements, {out.ran} run, {out.ok} answered, "
          f"{out.pdbq_errors} PdbqErrors, {len(out.non_pdbq)} other errors, {len(out.changed)} changed state")
    replay = f"(replay: PDBQ_FUZZ_SEED={seed} PDBQ_FUZZ_EXAMPLES={out.cases})"
    assert out.cases >= 10, f"only {out.cases} statements in {FUZZ_SECONDS} s {replay}"
    assert not out.non_pdbq, f"{len(out.non_pdbq)} non-PdbqErrors {replay}: {out.non_pdbq[:5]}"
    assert not out.changed, f"{len(out.changed)} failures changed the state {replay}: {out.changed[:5]}"
    assert not out.hangs, f"hangs {replay}: {out.hangs[:3]}"
