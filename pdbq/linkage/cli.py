"""`pdbq dedupe INPUT --id COL --fields A,B,... [--block EXPR]... [--out FILE] [--gold FILE]`.

Reads a CSV/Parquet file (or, with --database, a table of that DuckDB file), clusters its
records (`pdbq.linkage.dedupe`), and writes `(id, cluster)` to --out (CSV or Parquet) or stdout
as CSV. --gold FILE (CSV with columns id, entity) prints B³ and pairwise scores to stderr.
Exit status 0, or 2 with the error on stderr for bad input.
"""

from __future__ import annotations

import argparse
import sys

import duckdb

from pdbq.coref.model import Blocking
from pdbq.errors import PdbqError
from pdbq.inference.coreference.resolve import CorefConfig

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pdbq dedupe", description="Cluster the records of a table that refer to one entity.")
    p.add_argument("input", help="a .csv/.parquet file, or a table name with --database")
    p.add_argument("--id", required=True, help="the id column")
    p.add_argument("--fields", required=True, help="comma-separated columns to compare")
    p.add_argument("--block", action="append", default=None, metavar="EXPR",
                   help="a blocking key (DuckDB expression); repeatable; default: per field")
    p.add_argument("--bias", type=float, default=0.0, help="subtracted from every pair score")
    p.add_argument("--max-pairs", type=int, default=20_000_000, help="refuse blocking above this many pairs")
    p.add_argument("--nulls", choices=("ignore", "error"), default="ignore")
    p.add_argument("--sweeps", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--database", help="a DuckDB file holding the input table")
    p.add_argument("--out", help="write (id, cluster) here (.csv or .parquet); default stdout")
    p.add_argument("--gold", help="CSV (id, entity): print B3 and pairwise scores to stderr")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from pdbq.linkage import DEFAULT_CONFIG, dedupe, evaluate

    con = duckdb.connect(args.database, read_only=True) if args.database else duckdb.connect()
    try:
        config = CorefConfig(**{**DEFAULT_CONFIG.__dict__, "sweeps": args.sweeps, "seed": args.seed})
        res = dedupe(
            args.input, id=args.id, fields=[f.strip() for f in args.fields.split(",") if f.strip()],
            blocking=[Blocking(b) for b in args.block] if args.block else None, bias=args.bias,
            max_pairs=args.max_pairs, nulls=args.nulls, config=config, output=args.out, con=con,
        )
        for w in res.warnings:
            sys.stderr.write(f"warning: {w}\n")
        if args.out is None:
            sys.stdout.write("id,cluster\n")
            for i, c in zip(res.clusters.column("id").to_pylist(), res.clusters.column("cluster").to_pylist()):
                sys.stdout.write(f"{i},{c}\n")
        d = res.diagnostics
        sys.stderr.write(
            f"{d['records']} records, {d['candidate_pairs']} candidate pairs, {d['clusters']} clusters, "
            f"{d['factor_evaluations']} factor evaluations, {d['seconds']:.2f} s\n"
        )
        if args.gold:
            g = con.execute("SELECT id, entity FROM read_csv(?)", [args.gold]).fetchnumpy()
            b3, pw = evaluate(res.clusters, g["id"], g["entity"])
            sys.stderr.write(f"B3 P {b3.precision:.4f} R {b3.recall:.4f} F1 {b3.f1:.4f}; "
                             f"pairwise P {pw.precision:.4f} R {pw.recall:.4f} F1 {pw.f1:.4f}\n")
        return 0
    except PdbqError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    finally:
        con.close()
