"""The adversarial audit as a benchmark: thousands of mutated pdbq statements (the seeded corpus
and mutations of tests/fuzz_corpus.py) against the smokers model; every failure must be a
PdbqError that leaves catalog, data and weights unchanged, and no statement may hang.

    python examples/bench/fuzz.py [--cases 10000] [--seed 28]
    python examples/bench/fuzz.py --grammar [--cases 20000] [--seed 28]

``--grammar``: statements drawn by the hypothesis grammar of tests/fuzz_grammar.py (every kind
of statement with leaves at the edges, a quarter of them mutated) instead of the seeded
mutations of the corpus.

Cases run in chunks of 500 (seeds seed, seed + 1, ...), each on a fresh database, with a line of
progress per chunk on stderr. Prints the counts (cases, executed, answered, PdbqErrors, non-PdbqError failures, failures that
changed the state, hangs) and the first offenders of each kind.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from fuzz_corpus import Outcome, fuzz  # noqa: E402
from fuzz_grammar import grammar_fuzz  # noqa: E402


def _report(kind: str, text: str, what: str) -> None:
    print(f"{kind}: {text[:300]!r} -> {what}", file=sys.stderr, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--grammar", action="store_true", help="draw statements from the hypothesis grammar")
    args = ap.parse_args()
    t0 = time.perf_counter()
    out = Outcome()
    # chunks of 500 cases (seeds seed, seed + 1, ...): a line of progress each, a fresh database
    for k, start in enumerate(range(0, args.cases, 500)):
        with tempfile.TemporaryDirectory() as tmp:
            n = min(500, args.cases - start)
            part = (grammar_fuzz(n, float("inf"), args.seed + k, tmp, report=_report) if args.grammar
                    else fuzz(n, args.seed + k, tmp))
        for name in ("cases", "ran", "ok", "pdbq_errors"):
            setattr(out, name, getattr(out, name) + getattr(part, name))
        out.non_pdbq += part.non_pdbq
        out.changed += part.changed
        out.hangs += part.hangs
        print(f"{out.cases} cases, {len(out.non_pdbq)} non-PdbqError, {len(out.changed)} changed, {len(out.hangs)} hangs, "
              f"{time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    print("| cases | executed | answered | PdbqError | non-PdbqError | changed state | hangs | seconds |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {out.cases} | {out.ran} | {out.ok} | {out.pdbq_errors} | {len(out.non_pdbq)} | {len(out.changed)} | "
          f"{len(out.hangs)} | {time.perf_counter() - t0:.0f} |")
    for label, rows in (("non-PdbqError", out.non_pdbq), ("changed state", out.changed), ("hang", out.hangs)):
        for text, what in rows[:50]:
            print(f"{label}: {text[:160]!r} -> {what}")


if __name__ == "__main__":
    main()
