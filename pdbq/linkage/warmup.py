"""The entity-resolution kernels' warm-up: one `dedupe` of a small built-in table, with match
probabilities, so that numba compiles (or loads from its cache) every kernel the ``pdbq dedupe``
command and `pdbq.dedupe` run. Used by ``pdbq warm-up``."""

from __future__ import annotations

import time

__all__ = ["warm_up_dedupe"]

_FIRST = ("Anna", "Ben", "Carla", "Dario", "Eva", "Femi", "Gita", "Hugo", "Ines", "Jonas")
_LAST = ("Smith", "Novak", "Garcia", "Okafor", "Lindqvist", "Rossi", "Tanaka", "Dubois", "Silva", "Kowalski")
_CITY = ("Lyon", "Porto", "Graz", "Turku", "Cork")


def _records():
    """40 records of 20 people, every second one with a typo: duplicates a model can find."""
    rows = []
    for i in range(20):
        first, last, city = _FIRST[i % 10], _LAST[(i * 3) % 10], _CITY[i % 5]
        rows.append((2 * i, f"{first} {last}", city, 1950 + i))
        rows.append((2 * i + 1, f"{first[:-1]}{first[-1] * 2} {last}", city, 1950 + i))
    return rows


def warm_up_dedupe() -> float:
    """Run the entity-resolution kernels once in this process; the seconds it took."""
    import duckdb  # noqa: PLC0415

    from pdbq.linkage.front import dedupe  # noqa: PLC0415

    t0 = time.perf_counter()
    con = duckdb.connect()
    try:
        con.execute("CREATE TABLE people(id INTEGER, name TEXT, city TEXT, born INTEGER)")
        con.executemany("INSERT INTO people VALUES (?, ?, ?, ?)", _records())
        dedupe("people", id="id", fields=["name", "city", "born"], con=con, probabilities=True)
    finally:
        con.close()
    return time.perf_counter() - t0
