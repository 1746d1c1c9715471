"""Versioned entity-resolution pair models in the catalog (sql/pair_models.sql).

`pdbq.dedupe(..., model_name=...)` stores each fitted model as a new version of its name
(`store_pair_model`; earlier versions are kept); `dedupe(..., model="name[@version]")` reads one
back (`load_pair_model`: the model's JSON, turned into a `PairModel` by the linkage layer, which
owns that class). SHOW WEIGHTS lists the latest version of every stored model next to the learned
rule weights (`pair_model_weight_rows`). This layer sees only plain data: the model as a JSON-able
dict and its per-level rows.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import math
from importlib import resources

import duckdb
import pyarrow as pa

from pdbq.catalog.names import fetch_one, normalize, transaction
from pdbq.catalog.text import weight_sql
from pdbq.errors import CatalogError, PdbqError
from pdbq.language.nodes import WeightKind

__all__ = [
    "PAIR_MODEL_TABLES",
    "pair_models_sql",
    "parse_model_ref",
    "check_writable",
    "store_pair_model",
    "load_pair_model",
    "pair_model_weight_rows",
]

PAIR_MODEL_TABLES = ("pdbq_pair_models", "pdbq_pair_model_levels")


@functools.cache
def pair_models_sql() -> str:
    """The text of ``sql/pair_models.sql``."""
    return (resources.files("pdbq") / "sql" / "pair_models.sql").read_text(encoding="utf-8")


def _has_tables(con: duckdb.DuckDBPyConnection) -> bool:
    n = fetch_one(
        con,
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = current_schema() AND table_name IN (?, ?)",
        list(PAIR_MODEL_TABLES),
    )[0]
    return n == len(PAIR_MODEL_TABLES)


def parse_model_ref(ref: str) -> tuple[str, int | None]:
    """``"name"`` or ``"name@version"`` → (stored name, version or None for the latest)."""
    name, sep, ver = str(ref).partition("@")
    name = normalize(name)
    if not name:
        raise CatalogError(f"a pair model name is needed, got {ref!r}")
    if not sep:
        return name, None
    try:
        version = int(ver)
    except ValueError:
        raise CatalogError(f"pair model {ref!r}: the version after '@' must be a whole number") from None
    if version < 1:
        raise CatalogError(f"pair model {ref!r}: versions start at 1")
    return name, version


def check_writable(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """PdbqError when pair model ``name`` cannot be stored in this database (read-only): checked
    before any work, so a long fit is not thrown away at the end."""
    row = fetch_one(con, "SELECT readonly FROM duckdb_databases() WHERE database_name = current_database()")
    if row and row[0]:
        raise PdbqError(f"cannot store pair model {name!r}: the database is open read-only")


def store_pair_model(
    con: duckdb.DuckDBPyConnection,
    name: str,
    *,
    model: dict,
    levels: list[dict],
    records: int,
    candidate_pairs: int,
) -> int:
    """Store ``model`` (`PairModel.to_dict()`) and its per-level rows (`PairModel.table()`) as the
    next version of ``name``, in one transaction (nothing is stored if any step fails); the
    version number."""
    name = normalize(name)
    check_writable(con, name)
    with transaction(con):
        if not _has_tables(con):
            con.execute(pair_models_sql())
        version = int(fetch_one(con, "SELECT coalesce(max(version), 0) + 1 FROM pdbq_pair_models WHERE name = ?",
                                [name])[0])
        fields = [f["field"] for f in model["fields"]]
        con.execute(
            "INSERT INTO pdbq_pair_models VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [name, version, str(model.get("source", "em")), fields, float(model["prior"]), json.dumps(model),
             int(records), int(candidate_pairs), _dt.datetime.now()],
        )
        rows = [[name, version, r["field"], r["kind"], int(r["level"]), r["name"], float(r["m"]), float(r["u"]),
                 float(r["weight_bits"]), bool(r["tf"])] for r in levels]
        if rows:
            con.executemany("INSERT INTO pdbq_pair_model_levels VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    return version


def load_pair_model(con: duckdb.DuckDBPyConnection, ref: str) -> tuple[dict, str, int]:
    """(model JSON as a dict, name, version) of stored pair model ``ref`` (``name[@version]``);
    CatalogError naming what is missing and what is stored."""
    name, version = parse_model_ref(ref)
    if not _has_tables(con):
        raise CatalogError(f"no pair model {name!r}: this database stores no pair models "
                           "(store one with dedupe(..., model_name=...) or pdbq dedupe --model NAME)")
    stored = [int(r[0]) for r in con.execute(
        "SELECT version FROM pdbq_pair_models WHERE name = ? ORDER BY version", [name]).fetchall()]
    if not stored:
        names = [r[0] for r in con.execute("SELECT DISTINCT name FROM pdbq_pair_models ORDER BY name").fetchall()]
        raise CatalogError(f"no pair model {name!r}; stored: {', '.join(names) or 'none'}")
    if version is None:
        version = stored[-1]
    elif version not in stored:
        raise CatalogError(f"pair model {name!r} has no version {version}; stored versions: "
                           + ", ".join(map(str, stored)))
    text = fetch_one(con, "SELECT model FROM pdbq_pair_models WHERE name = ? AND version = ?", [name, version])[0]
    return json.loads(text), name, version


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def _rule_rows(con: duckdb.DuckDBPyConnection, rules) -> tuple[list[tuple], set[tuple[str, int]]]:
    """SHOW WEIGHTS rows of the cluster rules weighted by a stored pair model (``WEIGHT MODEL``):
    the version a query would use now (the latest, unless the rule names one), and those
    (name, version)s."""
    rows: list[tuple] = []
    used: set[tuple[str, int]] = set()
    for rname, rule in sorted((rules or {}).items()):
        w = rule.weight
        if w.kind is not WeightKind.MODEL:
            continue
        try:
            _, name, version = load_pair_model(con, w.model or "")
        except PdbqError:
            name, version = parse_model_ref(w.model or "")[0], None  # dropped since: a query says so
        tie = {"model": name, "version": version, "records": w.records}
        rows.append((rname, weight_sql(w), json.dumps(tie), None, None, None, version))
        if version is not None:
            used.add((name, version))
    return rows, used


def pair_model_weight_rows(con: duckdb.DuckDBPyConnection, fields: list[tuple[str, pa.DataType]],
                           rules=None) -> pa.Table:
    """SHOW WEIGHTS rows for the latest version of every stored pair model (and every version a
    ``WEIGHT MODEL`` rule of ``rules`` names), in SHOW WEIGHTS' columns (``fields``: rule, weight,
    tie, value, stderr, groundings, version): `rule` is the model's name; one row for the prior
    (weight ``= log2(λ / (1 - λ))`` with λ written out) and one per field and level (weight ``=
    log2(m / u)`` with m and u written out; `tie` the field, level and level name as JSON); `value`
    the weight in bits; stderr and groundings NULL. Before them, one row per ``WEIGHT MODEL`` rule:
    `rule` the rule, `tie` the model, the version that answers its queries and the records table
    as JSON, `version` that version."""
    rows, used = _rule_rows(con, rules) if _has_tables(con) else ([], set())
    if _has_tables(con):
        latest = "(SELECT max(version) FROM pdbq_pair_models x WHERE x.name = p.name)"
        pinned = [f"(name = ? AND version = {int(v)})" for _, v in sorted(used)]
        extra = (" OR " + " OR ".join(pinned)) if pinned else ""
        for name, version, prior in con.execute(
            f"SELECT name, version, prior FROM pdbq_pair_models p WHERE version = {latest}{extra} ORDER BY name, version",
            [n for n, _ in sorted(used)],
        ).fetchall():
            bits = _log2_odds(prior)
            rows.append((name, f"= log2({_fmt(prior)} / (1 - {_fmt(prior)}))", None, bits, None, None, version))
            for field, level, level_name, m, u, w, tf in con.execute(
                "SELECT field, level, level_name, m, u, weight_bits, tf FROM pdbq_pair_model_levels "
                "WHERE name = ? AND version = ? ORDER BY list_position(?, field), level",
                [name, version, _fields_of(con, name, version)],
            ).fetchall():
                tie = {"field": field, "level": level, "name": level_name}
                if tf:
                    tie["term_frequency"] = True
                rows.append((name, f"= log2({_fmt(m)} / {_fmt(u)})", json.dumps(tie), w, None, None, version))
    columns = list(zip(*rows)) if rows else [[] for _ in fields]
    return pa.table({f: pa.array(list(c), t) for (f, t), c in zip(fields, columns)})


def _fields_of(con: duckdb.DuckDBPyConnection, name: str, version: int) -> list[str]:
    return list(fetch_one(con, "SELECT fields FROM pdbq_pair_models WHERE name = ? AND version = ?", [name, version])[0])


def _log2_odds(p: float) -> float:
    return math.log2(p / (1.0 - p))
