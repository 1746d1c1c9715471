"""Running `SaveAnswer` (CREATE TABLE AS / INSERT INTO / COPY TO over a probabilistic query) and
the UAI statements for `Database`.

The probabilistic query is answered by the planning layer like any other; its Arrow answer is
registered under a fresh name and the outer statement's stand-in table is replaced by that name
in the statement's sqlglot tree, which DuckDB then runs. Nothing but the statement as written and
a generated identifier reaches DuckDB, so CREATE/INSERT/COPY keep every DuckDB option (OR REPLACE,
TEMP, BY NAME, column lists, FORMAT, PARTITION_BY, ...).
"""

from __future__ import annotations

import uuid
from typing import Any

import duckdb
import pyarrow as pa
import sqlglot.expressions as exp

from pdbq.errors import PdbqError
from pdbq.files import atomic_path, checked_path
from pdbq.grounding.store import sql_text
from pdbq.language.nodes import ANSWER_SOURCE, ExportUai, ImportUai, SaveAnswer

__all__ = ["run_save", "run_import", "run_export", "user_tables", "is_internal"]


def is_internal(name: str) -> bool:
    """pdbq's own storage (catalog, factor store) and transient answer tables."""
    low = name.lower()
    return low.startswith(("pdbq_", "__pdbq"))


def user_tables(con: Any, kind: str) -> pa.Table:
    """DuckDB's ``SHOW TABLES`` / ``SHOW ALL TABLES`` without pdbq's storage tables."""
    table = con.sql(sql_text(exp.Command(this="SHOW", expression=kind))).to_arrow_table()
    keep = pa.array([not is_internal(n) for n in table.column("name").to_pylist()], type=pa.bool_())
    return table.filter(keep)


def run_save(db: Any, stmt: SaveAnswer, answer: Any) -> Any:
    """Run ``stmt``'s outer statement over ``answer`` (a `QueryAnswer`); returns DuckDB's result
    relation (the row count for INSERT, None for CREATE/COPY)."""
    con = db.duckdb
    name = f"__pdbq_answer_{uuid.uuid4().hex}"
    tree = stmt.tree.copy()
    for table in tree.find_all(exp.Table):
        if table.name == ANSWER_SOURCE and not table.args.get("db"):
            table.set("this", exp.to_identifier(name))
    con.register(name, answer.table)
    try:
        target = _copy_target(tree)
        if target is None:
            return con.execute(sql_text(tree)).fetchall()
        # COPY ... TO one local file: written beside it and renamed over it, so a kill mid-write
        # leaves the previous file (the same atomic writer as every file pdbq writes)
        with atomic_path(target, "COPY target") as tmp:
            tree.set("files", [exp.Literal.string(str(tmp))])
            return con.execute(sql_text(tree)).fetchall()
    except duckdb.Error as exc:
        # the statement around the answer is pdbq's rewrite of the user's: say which one failed
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PdbqError(f"{stmt.kind.value} around the probabilistic query failed: {detail}") from None
    finally:
        con.unregister(name)


# COPY options under which DuckDB writes a folder, not one file
_FOLDER_OPTIONS = {"PARTITION_BY", "PER_THREAD_OUTPUT", "FILE_SIZE_BYTES", "ROTATE", "FILENAME_PATTERN"}


def _copy_target(tree: exp.Expression) -> str | None:
    """The local file a COPY TO writes, or None (not a COPY TO, a folder, a URL, stdout)."""
    if not isinstance(tree, exp.Copy) or tree.args.get("kind") is not False:
        return None
    files = tree.args.get("files") or []
    if len(files) != 1 or not isinstance(files[0], exp.Literal) or not files[0].is_string:
        return None
    params = {p.this.name.upper() for p in tree.args.get("params") or [] if isinstance(p.this, (exp.Var, exp.Identifier))}
    path = files[0].this
    if params & _FOLDER_OPTIONS or "://" in path or path.startswith("/dev/") or path in ("", "-"):
        return None
    return path


def _file_error(kind: str, exc: OSError, path: str) -> PdbqError:
    return PdbqError(f"{kind} UAI: cannot {'read' if kind == 'IMPORT' else 'write'} '{exc.filename or path}': "
                     f"{exc.strerror or exc}")


def run_import(db: Any, stmt: ImportUai, cancel: Any = None) -> Any:
    from pdbq.io import read_uai  # noqa: PLC0415 - numpy-heavy reader only when importing

    checked_path(stmt.path, "IMPORT UAI file")
    if stmt.evidence is not None:
        checked_path(stmt.evidence, "IMPORT UAI evidence file")
    try:
        return read_uai(db, stmt.path, stmt.name, evidence=stmt.evidence,
                        poll=cancel.check if cancel is not None else None)
    except OSError as exc:
        raise _file_error("IMPORT", exc, stmt.path) from None


def run_export(db: Any, stmt: ExportUai) -> Any:
    from pdbq.io.uai import export_uai  # noqa: PLC0415

    checked_path(stmt.path, "EXPORT UAI file")
    if stmt.evidence is not None:
        checked_path(stmt.evidence, "EXPORT UAI evidence file")
    try:
        return export_uai(db, stmt.name, stmt.path, evid_path=stmt.evidence)
    except OSError as exc:
        raise _file_error("EXPORT", exc, stmt.path) from None
