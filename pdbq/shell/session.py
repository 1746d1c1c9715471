"""The database a shell session works on: opening it, its default seed, and the banner naming it."""

from __future__ import annotations

from typing import Any

from pdbq.errors import PdbqError

__all__ = ["BANNER", "banner", "apply_seed", "open_database", "version_text"]

BANNER = """\
{version} (DuckDB {duckdb})
Connected to {target}.
Enter ".help" for usage hints; statements end with ';'."""


def banner(db: Any) -> str:
    """The first lines of an interactive session: versions and the database."""
    import duckdb  # noqa: PLC0415

    path = getattr(db, "path", ":memory:")
    target = "a transient in-memory database" if path in (":memory:", "") else f"'{path}'"
    if getattr(db, "read_only", False):
        target += " (read-only)"
    return BANNER.format(version=version_text(), duckdb=duckdb.__version__, target=target)


def apply_seed(db: Any, seed: int) -> None:
    options = getattr(db, "default_options", None)
    if options is None:
        raise PdbqError("this pdbq Database has no default options; --seed cannot be applied")
    options["seed"] = int(seed)


def open_database(path: str, *, read_only: bool = False, seed: int | None = None, allow_external: bool = False) -> Any:
    """``path`` opened as `pdbq.connect` does (SQL functions registered for a file), with ``seed`` as
    the default seed of its queries and of those functions."""
    from pdbq.api import connect
    from pdbq.udf import attach_functions

    db = connect(path, read_only=read_only)
    try:
        if seed is not None:
            apply_seed(db, seed)
        attach_functions(db, allow_external=allow_external)
    except BaseException:
        db.close()
        raise
    return db


def version_text() -> str:
    from pdbq.version import __version__

    return f"pdbq {__version__}"
