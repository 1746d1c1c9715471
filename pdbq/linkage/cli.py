"""`pdbq dedupe INPUT --id COL --fields A,B,... [--compare F=KIND[:T1,T2]]... [--train FILE] [--block EXPR]... [--out FILE] [--gold FILE] [--database FILE [--model NAME] [--use-model NAME[@V]]]`.

Reads a CSV/Parquet file (or, with --database, a table of that DuckDB file), clusters its
records (`pdbq.linkage.dedupe`), and writes `(id, cluster)` to --out (CSV or Parquet) or stdout
as CSV. On stderr: the comparison chosen per field, the blocking rules with their estimated
recall, the match prior, a summary line (and with --show-model, m, u and the weight of every
level). --gold FILE (the records' id column or `id`, and an entity column; or two columns of
matching ids) prints B³ and pairwise scores to stderr; --train FILE (same shapes) fits the model
from those labels instead of EM and prints a holdout report.
--link FILE links INPUT to a second source (`pdbq.linkage.link`; --link-mode, --link-id,
--one-to-one: each source is free of duplicates, so no cluster holds two records of one source)
and writes `(source, id, cluster)`. --pairs FILE writes every candidate pair's match probability
from the clustering posterior (`id_l, id_r, match_probability, se`), --cluster-confidence FILE
each cluster's probability of being exactly right (least certain first), --explain FILE each
pair's per-field levels and contributions; --calibration PNG (with --gold and --pairs) prints
the ECE over the labelled pairs and draws the reliability diagram.
With --database FILE, --model NAME stores the fitted pair model there as a new version of NAME
(SHOW WEIGHTS lists it), and --use-model NAME[@VERSION] scores with a stored one instead of
estimating (INPUT may still be a CSV/Parquet file).
Exit status 0, or 2 with the error on stderr for bad input.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from typing import TYPE_CHECKING

from pdbq.coref.kinds import KINDS
from pdbq.errors import CorefInputError, PdbqError
from pdbq.progress import ProgressBar, expect_compiles, watch_compiles

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import pyarrow as pa

    from pdbq.coref.levels import FieldSpec

__all__ = ["main", "build_parser", "parse_compare"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pdbq dedupe", description="Cluster the records of a table that refer to one entity.")
    p.add_argument("input", help="a .csv/.parquet file, or a table name with --database")
    p.add_argument("--id", required=True, help="the id column")
    p.add_argument("--fields", help="comma-separated columns to compare (with --use-model: default the model's)")
    p.add_argument("--compare", action="append", default=None, metavar="FIELD=KIND[:T1,T2]",
                   help=f"override a field's comparison: KIND one of {', '.join(KINDS)}, optional thresholds; repeatable")
    p.add_argument("--train", help="labels to fit the model from: (id, entity) or two columns of matching ids")
    p.add_argument("--block", action="append", default=None, metavar="EXPR",
                   help="a blocking key (DuckDB expression); repeatable; default: chosen automatically")
    p.add_argument("--max-pairs", type=int, default=20_000_000, help="at most this many candidate pairs")
    p.add_argument("--nulls", choices=("ignore", "error"), default="ignore")
    p.add_argument("--sweeps", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--show-model", action="store_true", help="print m, u and the weight of every level to stderr")
    p.add_argument("--database", help="a DuckDB file holding the input table (and the stored pair models)")
    p.add_argument("--model", metavar="NAME",
                   help="store the fitted pair model in --database as a new version of NAME (SHOW WEIGHTS lists it)")
    p.add_argument("--use-model", metavar="NAME[@VERSION]",
                   help="score with a pair model stored in --database instead of estimating one (default: latest version)")
    p.add_argument("--out", help="write (id, cluster) here (.csv or .parquet); default stdout")
    p.add_argument("--gold", help="labels to score the clusters against: B3 and pairwise scores on stderr")
    p.add_argument("--link", metavar="FILE", help="a second source: link INPUT's records to this one's")
    p.add_argument("--link-mode", choices=("link_only", "link_and_dedupe"), default="link_only",
                   help="with --link: compare only across sources (default) or also within each")
    p.add_argument("--one-to-one", action="store_true",
                   help="with --link (link_only): each source is free of duplicates; no cluster may hold two "
                        "records of one source (default: decided from the data)")
    p.add_argument("--no-one-to-one", action="store_true",
                   help="with --link: do not constrain the clusters even when the sources look free of duplicates")
    p.add_argument("--link-id", metavar="COL", help="with --link: the second source's id column (default: --id)")
    p.add_argument("--pairs", metavar="FILE",
                   help="write every candidate pair's posterior match probability (.csv or .parquet)")
    p.add_argument("--cluster-confidence", metavar="FILE",
                   help="write each cluster's probability of being exactly right, least certain first")
    p.add_argument("--explain", metavar="FILE", help="write each pair's per-field levels and contributions")
    p.add_argument("--calibration", metavar="PNG",
                   help="with --gold and --pairs: print the ECE and draw the reliability diagram here")
    return p


def parse_compare(items: list[str] | None) -> list[FieldSpec]:
    """`FIELD=KIND[:T1,T2,...]` → `FieldSpec`s (`CorefInputError` naming a malformed one)."""
    from pdbq.coref.levels import FieldSpec  # noqa: PLC0415
    out = []
    for item in items or []:
        field, sep, rest = item.partition("=")
        kind, _, th = rest.partition(":")
        if not sep or not field.strip() or kind.strip() not in KINDS:
            raise CorefInputError(f"--compare {item!r}: expected FIELD=KIND[:T1,T2,...] with KIND one of {', '.join(KINDS)}")
        try:
            thresholds = tuple(float(x) for x in th.split(",") if x.strip()) if th.strip() else None
        except ValueError as exc:
            raise CorefInputError(f"--compare {item!r}: thresholds must be numbers") from exc
        out.append(FieldSpec(field.strip(), kind.strip(), thresholds))
    return out


def _print_model(res, show_levels: bool) -> None:
    pm = res.pair_model
    if pm is None:
        return
    w = sys.stderr.write
    what = ("P(a record of one source and one of the other match)" if "prior_all_pairs" in pm.diagnostics
            else "P(two random records match)")
    w(f"pair model ({'estimated without labels' if pm.source == 'em' else 'fitted from labels'}; "
      f"prior {what} = {pm.prior:.3g}):\n")
    for f in pm.fields:
        w(f"  {f.levels.describe()}{', term-frequency adjusted' if f.tf else ''}\n")
        if show_levels:
            for row in f.describe():
                w(f"      {row['name']:<26} m {row['m']:.4f}  u {row['u']:.6f}  weight {row['weight_bits']:+.2f} bits\n")
    for row in pm.interactions_table():
        w(f"  {row['field']} and {row['given']} agree together among non-matches: {row['bits']:+.2f} bits when both agree\n")
    b = res.blocking
    if b is not None:
        w(f"blocking ({res.diagnostics['candidate_pairs']:,} candidate pairs; {b.recall_text()}, "
          f"about {b.expected_missed:.1f} of {b.expected_matches:.0f} matching pairs missed):\n")
        for r in b.describe(pm):
            w(f"  {r}\n")
    one = res.diagnostics.get("one_to_one")
    if one is not None:
        ev = [f"{e['field']} {e['ratio']:.2g}" for e in one["evidence"].values() if e["field"] is not None]
        w(f"one-to-one: {'each source detected free of duplicates' if one['detected'] else 'not detected'} "
          f"(within/cross exact agreement: {', '.join(ev) if ev else 'no identifying field'})\n")


def _fail(message: str) -> int:
    sys.stderr.write(f"error: {message}\n")
    return 2


def _check_input(path: str) -> str | None:
    """Why a CSV input cannot be read as records, or None (checked before any work)."""
    p = Path(path)
    if p.suffix.lower() not in (".csv", ".tsv"):
        return None
    if not p.is_file():
        return f"no such file: {path}"
    with open(p, "rb") as f:
        head = f.read(1 << 16)
    if not head.strip():
        return f"the input {path!r} is empty: it holds no header and no records"
    if b"\x00" in head:
        return f"the input {path!r} is not a text CSV file (it holds NUL bytes)"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a character cut at the end of the sample
            return f"the input {path!r} is not UTF-8 text (byte {exc.start}: {head[exc.start]:#04x}); convert it to UTF-8"
    return None


def _check_out(flag: str, path: str, suffixes: tuple[str, ...] = (".csv", ".parquet", ".pq")) -> str | None:
    """Why an output file cannot be written, or None (checked before clustering, not after)."""
    p = Path(path)
    if "\x00" in path:
        return f"{flag} {path!r} is not a valid file name"
    if p.suffix.lower() not in suffixes:
        return f"{flag} must end in {' or '.join(suffixes[:2])}, got {p.name!r}"
    folder = p.parent if str(p.parent) else Path(".")
    if not folder.is_dir():
        return f"{flag} {path!r}: the folder '{folder}' does not exist"
    if p.is_dir():
        return f"{flag} {path!r} is a folder"
    return None


def _check_files(args) -> str | None:
    """The first problem with the files named on the command line, before any work."""
    if args.database is not None and not Path(args.database).is_file():
        return f"--database: no such file: {args.database}"
    for flag, value in (("--out", args.out), ("--pairs", args.pairs), ("--cluster-confidence", args.cluster_confidence),
                        ("--explain", args.explain)):
        if value and (problem := _check_out(flag, value)):
            return problem
    if args.calibration and (problem := _check_out("--calibration", args.calibration, (".png", ".PNG"))):
        return problem
    # with --database, INPUT and --link may name its tables
    for value in (None, None) if args.database else (args.input, args.link):
        if value and (problem := _check_input(value)):
            return problem
    return None


def _write_stdout(table: pa.Table) -> None:
    # csv quoting: ids holding a comma, a quote or a newline stay one field
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(table.column_names)
    w.writerows(zip(*[table.column(c).to_pylist() for c in table.column_names]))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # the engine is imported once the arguments are read: --help and usage errors start fast
    import duckdb  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    import pyarrow as pa  # noqa: PLC0415

    from pdbq.coref.model import Blocking  # noqa: PLC0415
    from pdbq.inference.coreference.resolve import CorefConfig  # noqa: PLC0415
    from pdbq.linkage import _FS_CONFIG, dedupe, evaluate, id_named  # noqa: PLC0415

    try:
        _check_model_args(args)
    except PdbqError as exc:
        return _fail(str(exc))
    problem = _check_files(args)
    if problem:
        return _fail(problem)
    # storing a model writes to the database file; everything else only reads it
    try:
        con = duckdb.connect(args.database, read_only=not args.model) if args.database else duckdb.connect()
    except duckdb.Error as exc:
        return _fail(f"--database {args.database!r} cannot be opened: {str(exc).splitlines()[0]}")
    try:
        config = CorefConfig(**{**_FS_CONFIG.__dict__, "sweeps": args.sweeps, "seed": args.seed})
        if args.calibration and not (args.gold and args.pairs):
            raise CorefInputError("--calibration needs --gold (the true entities) and --pairs (the probabilities)")
        if args.one_to_one and args.no_one_to_one:
            raise CorefInputError("give --one-to-one or --no-one-to-one, not both")
        if args.one_to_one and not args.link:
            raise CorefInputError("--one-to-one needs --link: it constrains the records of two sources")
        if args.link and args.train:
            raise CorefInputError("--train is not available with --link yet (fit on one source, or without labels)")
        kw = dict(fields=[f.strip() for f in args.fields.split(",") if f.strip()] if args.fields else None,
                  compare=parse_compare(args.compare), train=args.train,
                  blocking=[Blocking(b) for b in args.block] if args.block else None,
                  max_pairs=args.max_pairs, nulls=args.nulls, config=config, output=args.out, con=con,
                  probabilities=bool(args.pairs or args.cluster_confidence))
        if args.gold and not args.link:  # a bad label file costs no clustering and stores no model
            _gold_labels(con, args, _record_ids(con, args))
        # the kernels' compilation on a machine's first run is said on stderr before the wait
        with watch_compiles(ProgressBar(sys.stderr)):
            # about 12 CPU s on a 2-core machine (docs/benchmarks.md, "Cold start")
            expect_compiles("pdbq's entity resolution kernels", 12.0)
            if args.link:
                from pdbq.linkage.link import link  # noqa: PLC0415

                res = link(args.input, args.link, id=args.id, right_id=args.link_id, mode=args.link_mode,
                           one_to_one=True if args.one_to_one else False if args.no_one_to_one else None,
                           model=args.use_model, model_name=args.model, **kw)
            else:
                res = dedupe(args.input, id=args.id, model=args.use_model, model_name=args.model, **kw)
        _write_extras(res, args)
        for w in res.warnings:
            sys.stderr.write(f"warning: {w}\n")
        _print_model(res, args.show_model)
        if args.out is None:
            _write_stdout(id_named(res.clusters, args.id, args.link_id if args.link else None))
        d = res.diagnostics
        for key, what in (("used_model", "scored with stored"), ("stored_model", "stored")):
            if key in d:
                sys.stderr.write(f"{what} pair model {d[key]['name']!r} version {d[key]['version']}\n")
        sys.stderr.write(
            f"{d['records']} records, {d['candidate_pairs']} candidate pairs, {d['clusters']} clusters, "
            f"{d['factor_evaluations']} factor evaluations, {d['seconds']:.2f} s\n"
        )
        if "holdout" in d:
            h = d["holdout"]
            sys.stderr.write(f"holdout ({h['records']} labelled records not used to fit): B3 F1 {h['b3_f1']:.4f}; "
                             f"pairwise P {h['pairwise_precision']:.4f} R {h['pairwise_recall']:.4f} F1 {h['pairwise_f1']:.4f}\n")
        if args.gold:
            lab = _gold_labels(con, args, res.ids)
            ids = res.ids[lab.index]
            # by `res.ids` (a link result's clusters repeat ids across sources)
            clusters = pa.table({"id": res.ids, "cluster": res.clusters.column("cluster")})
            b3, pw = evaluate(clusters.take(lab.index), ids, lab.entity)
            sys.stderr.write(f"B3 P {b3.precision:.4f} R {b3.recall:.4f} F1 {b3.f1:.4f}; "
                             f"pairwise P {pw.precision:.4f} R {pw.recall:.4f} F1 {pw.f1:.4f}\n")
            if args.calibration:
                from pdbq.linkage.calibration import calibrate  # noqa: PLC0415

                pairs = res.pairs
                if args.link:  # the gold file names records by the ids `explain` takes
                    pairs = pa.table({"id_l": _pair_ids(res, "l"), "id_r": _pair_ids(res, "r"),
                                      "match_probability": res.pairs.column("match_probability")})
                labelled = np.isin(pairs.column("id_l").to_numpy(zero_copy_only=False), ids) & np.isin(
                    pairs.column("id_r").to_numpy(zero_copy_only=False), ids)
                cal = calibrate(pairs.filter(pa.array(labelled)), ids, lab.entity)
                cal.plot(args.calibration)
                sys.stderr.write(f"calibration: {cal.report.n:,} labelled pairs of {pairs.num_rows:,}, ECE {cal.ece:.4f}, "
                                 f"reliability diagram {args.calibration}\n")
        return 0
    except PdbqError as exc:
        return _fail(str(exc))
    except duckdb.Error as exc:  # the input file or table as DuckDB read it
        return _fail(f"cannot read {args.input!r}: {str(exc).splitlines()[0]}")
    except (OSError, UnicodeError) as exc:
        return _fail(str(exc))
    finally:
        con.close()


def _record_ids(con, args) -> np.ndarray | None:
    """The input's id column (None when there is none or it has NULLs: dedupe says so)."""
    import numpy as np  # noqa: PLC0415

    from pdbq.coref.model import source_relation  # noqa: PLC0415

    rel = source_relation(con, args.input)
    if args.id not in rel.columns:
        return None
    ids = rel.select(f'"{args.id.replace(chr(34), chr(34) * 2)}" AS i').fetchnumpy()["i"]
    if np.ma.isMaskedArray(ids) and np.ma.getmaskarray(ids).any():
        return None  # NULL ids: dedupe names them
    return np.asarray(ids)


def _gold_labels(con, args, ids):
    """--gold read against the record ids (`pdbq.linkage.labels.read_labels`); None without ids."""
    from pdbq.linkage.labels import read_labels  # noqa: PLC0415

    if ids is None:
        return None
    try:
        return read_labels(con, args.gold, ids, args.id, "--gold")
    except (TypeError, ValueError) as exc:  # ids of another type than the records' (numpy's comparison)
        raise CorefInputError(f"--gold {args.gold!r}: its ids cannot be matched to the records' "
                              f"{args.id!r} column ({exc})") from None


def _check_model_args(args) -> None:
    if not args.fields and not args.use_model:
        raise CorefInputError("give the fields to compare (--fields A,B,...) or a stored model (--use-model NAME)")
    for flag, value in (("--model", args.model), ("--use-model", args.use_model)):
        if value and not args.database:
            raise CorefInputError(f"{flag} needs --database FILE: the DuckDB file the pair models are stored in")


def _pair_ids(res, side: str) -> np.ndarray:
    """The record ids (`res.ids`: source-qualified where ids repeat) of a link result's pair
    column; under link_only the left id is from "left", the right from "right"."""
    import numpy as np  # noqa: PLC0415

    c = res.clusters
    lookup = dict(zip(zip(c.column("source").to_pylist(), c.column("id").to_pylist()), res.ids))
    ids = res.pairs.column(f"id_{side}").to_pylist()
    if f"source_{side}" in res.pairs.column_names:
        sources = res.pairs.column(f"source_{side}").to_pylist()
    else:
        sources = ["left" if side == "l" else "right"] * len(ids)
    return np.asarray([lookup[(s, i)] for s, i in zip(sources, ids)])


def _write_extras(res, args) -> None:
    from pathlib import Path

    from pdbq.linkage import _write  # noqa: PLC0415

    if args.pairs:
        _write(res.pairs, Path(args.pairs))
    if args.cluster_confidence:
        _write(res.cluster_confidence, Path(args.cluster_confidence))
    if args.explain:
        _write(res.explain(), Path(args.explain))
