"""Versioned learned weights and calibration tables in the catalog (sql/catalog.sql).

LEARN WEIGHTS records one version per successful run (`record_version`); SHOW WEIGHTS lists the
latest learned value of every weight whose rule is unchanged since, and the stored pair models
(`show_weights`), SHOW CALIBRATION the latest run's calibration buckets (`show_calibration`). The factor store reads
``pdbq_learned_weights`` when it (re)creates weight rows, so queries use the latest values even after
the store was rebuilt.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence

import duckdb
import pyarrow as pa

from pdbq.catalog.names import fetch_one
from pdbq.catalog.pair_models import pair_model_weight_rows
from pdbq.catalog.store import schema_sql

__all__ = [
    "LEARNING_TABLES",
    "ensure_learning_schema",
    "has_learning_schema",
    "next_version",
    "record_version",
    "show_weights",
    "show_calibration",
    "latest_values",
]

LEARNING_TABLES = ("pdbq_weight_versions", "pdbq_learned_weights", "pdbq_calibration")


def has_learning_schema(con: duckdb.DuckDBPyConnection) -> bool:
    n = fetch_one(
        con,
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = current_schema() AND table_name IN (?, ?, ?)",
        list(LEARNING_TABLES),
    )[0]
    return n == len(LEARNING_TABLES)


def ensure_learning_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create the learning tables where missing (every statement of catalog.sql is idempotent)."""
    if not has_learning_schema(con):
        con.execute(schema_sql())


def next_version(con: duckdb.DuckDBPyConnection) -> int:
    row = fetch_one(con, "SELECT coalesce(max(version), 0) + 1 FROM pdbq_weight_versions")
    return int(row[0])


def record_version(
    con: duckdb.DuckDBPyConnection,
    *,
    version: int,
    method: str,
    rules: Sequence[str],
    options: str,
    epochs: int,
    seconds: float,
    interrupted: bool,
    holdout: int,
    accuracy: float | None,
    log_loss: float | None,
    ece: float | None,
    weights: pa.Table,
    calibration: pa.Table | None,
) -> None:
    """Insert one version: its summary row, its weights (columns rule, rule_hash, tie, value,
    stderr, groundings) and its calibration buckets. Call inside a transaction."""
    con.execute(
        "INSERT INTO pdbq_weight_versions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [version, method, list(rules), options, epochs, seconds, interrupted, holdout, accuracy, log_loss, ece,
         _dt.datetime.now()],
    )
    con.register("pdbq_tmp_learned", weights)
    try:
        con.execute(
            "INSERT INTO pdbq_learned_weights SELECT ?, rule, rule_hash, tie, value, stderr, groundings FROM pdbq_tmp_learned",
            [version],
        )
    finally:
        con.unregister("pdbq_tmp_learned")
    if calibration is not None and calibration.num_rows:
        con.register("pdbq_tmp_calibration", calibration)
        try:
            con.execute(
                "INSERT INTO pdbq_calibration SELECT ?, bucket, lower, upper, predicted, true_count, false_count, "
                "mean_probability, observed_fraction FROM pdbq_tmp_calibration",
                [version],
            )
        finally:
            con.unregister("pdbq_tmp_calibration")


_WEIGHT_FIELDS = [("rule", pa.string()), ("weight", pa.string()), ("tie", pa.string()), ("value", pa.float64()),
                  ("stderr", pa.float64()), ("groundings", pa.int64()), ("version", pa.int64())]
_CALIBRATION_FIELDS = [("bucket", pa.int32()), ("lower", pa.float64()), ("upper", pa.float64()),
                       ("predicted", pa.int64()), ("true_count", pa.int64()), ("false_count", pa.int64()),
                       ("mean_probability", pa.float64()), ("observed_fraction", pa.float64()), ("version", pa.int64())]


def _table(fields, rows) -> pa.Table:
    columns = list(zip(*rows)) if rows else [[] for _ in fields]
    return pa.table({f: pa.array(list(c), t) for (f, t), c in zip(fields, columns)})


def show_weights(con: duckdb.DuckDBPyConnection, current: dict[str, str], rules=None) -> pa.Table:
    """The latest learned value of every weight of a rule whose definition is unchanged since it
    was learned (``current``: rule -> definition hash now), with the rule's weight text and the
    tying value (NULL for ``?``); then the latest version of every stored entity-resolution pair
    model, after a row per cluster rule weighted by one (``rules``: the catalog's rules;
    `pdbq.catalog.pair_models.pair_model_weight_rows`)."""
    return pa.concat_tables([_rule_weights(con, current), pair_model_weight_rows(con, _WEIGHT_FIELDS, rules)])


def _rule_weights(con: duckdb.DuckDBPyConnection, current: dict[str, str]) -> pa.Table:
    if not has_learning_schema(con) or not current:
        return _table(_WEIGHT_FIELDS, [])
    con.register("pdbq_tmp_current", pa.table({"rule": list(current), "rule_hash": list(current.values())}))
    try:
        rows = con.execute(
            """
            SELECT l.rule, r.weight, l.tie, l.value, l.stderr, l.groundings, l.version
            FROM pdbq_learned_weights l
            JOIN pdbq_tmp_current c ON c.rule = l.rule AND c.rule_hash = l.rule_hash
            JOIN pdbq_rules r ON r.name = l.rule
            WHERE l.version = (SELECT max(version) FROM pdbq_learned_weights m
                               WHERE m.rule = l.rule AND m.rule_hash = l.rule_hash)
            ORDER BY l.rule, l.tie NULLS FIRST
            """
        ).fetchall()
    finally:
        con.unregister("pdbq_tmp_current")
    return _table(_WEIGHT_FIELDS, rows)


def show_calibration(con: duckdb.DuckDBPyConnection) -> pa.Table:
    """The calibration buckets of the latest LEARN WEIGHTS run that had a holdout."""
    if not has_learning_schema(con):
        return _table(_CALIBRATION_FIELDS, [])
    rows = con.execute(
        """
        SELECT bucket, lower, upper, predicted, true_count, false_count, mean_probability, observed_fraction, version
        FROM pdbq_calibration WHERE version = (SELECT max(version) FROM pdbq_calibration)
        ORDER BY bucket
        """
    ).fetchall()
    return _table(_CALIBRATION_FIELDS, rows)


def latest_values(con: duckdb.DuckDBPyConnection, rule: str, rule_hash: str) -> dict[str | None, float]:
    """Tie (NULL for ``?``) -> the latest learned value of rule ``rule`` while its definition hash
    is ``rule_hash`` (empty when never learned). Cluster rules read their weights from here (they
    have no factor-store rows)."""
    if not has_learning_schema(con):
        return {}
    rows = con.execute(
        """
        SELECT l.tie, l.value FROM pdbq_learned_weights l
        WHERE l.rule = ? AND l.rule_hash = ?
          AND l.version = (SELECT max(version) FROM pdbq_learned_weights m WHERE m.rule = l.rule AND m.rule_hash = l.rule_hash)
        """,
        [rule, rule_hash],
    ).fetchall()
    return {t: float(v) for t, v in rows}
