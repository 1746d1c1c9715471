"""``python -m pdbq.learning calibration DB OUT.png``: save the latest stored calibration plot of
database file DB as a PNG (needs matplotlib: ``pip install 'pdbq[plot]'``)."""

from __future__ import annotations

import argparse
import sys

import duckdb

from pdbq.errors import PdbqError
from pdbq.learning.statement import save_calibration_plot


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pdbq.learning", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    cal = sub.add_parser("calibration", help="save the latest calibration plot as a PNG")
    cal.add_argument("database", help="a DuckDB file with a pdbq catalog")
    cal.add_argument("output", help="the PNG file to write")
    args = ap.parse_args(argv)
    try:
        con = duckdb.connect(args.database, read_only=True)
    except duckdb.Error as e:
        print(f"error: cannot open {args.database}: {e}", file=sys.stderr)
        return 1
    try:
        save_calibration_plot(con, args.output)
    except PdbqError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        con.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
