"""Grounding configuration and the size check run before a rule's join."""

from __future__ import annotations

import json
from dataclasses import dataclass

import duckdb
import sqlglot.expressions as exp

from pdbq.errors import GroundingError, OptionError
from pdbq import memory
from pdbq.memory import gib

__all__ = ["GroundingConfig", "estimate_groundings", "check_estimate", "check_actual", "grounding_bytes",
           "groundings_that_fit", "too_large_for_memory"]

# Memory per grounding, per column of the rule's SELECT: its value in the factor table (DuckDB keeps
# an in-memory database's tables in memory) and, per variable slot, the query graph's arrays read
# from it (variable id, the reverse CSR, the kernels' copies); plus a factor's own entries.
_BYTES_PER_COLUMN = 24
_BYTES_PER_ROW = 48


def grounding_bytes(select: exp.Expression, columns: int = 0) -> int:
    """Estimated memory of one grounding of ``select`` (at least ``columns`` columns: a rule's
    variables, weight and feature) once grounded and loaded into a graph."""
    n = max(len(getattr(select, "expressions", ()) or ()), columns, 1)
    return _BYTES_PER_ROW + _BYTES_PER_COLUMN * n


def groundings_that_fit(select: exp.Expression, columns: int = 0) -> int:
    """How many groundings of ``select`` the memory left can hold (`grounding_bytes` each)."""
    return memory.available_bytes() // grounding_bytes(select, columns)


@dataclass(frozen=True)
class GroundingConfig:
    """Settings for grounding (pass explicitly; frozen).

    max_groundings: a rule whose join is estimated (DuckDB's optimizer estimate) or found
        (exact count, checked inside the transaction before commit) to yield more groundings
        raises `GroundingError`; nothing is written.
    max_frontier_rounds: query-driven grounding expands the frontier in SQL for at most this many
        rounds; a region still growing after that is grounded fully and explored in memory.
    whole_model_factors: query-driven grounding grounds every rule in full at once, instead of
        expanding the region round by round, when the row counts already read bound the whole
        model's factors by this many: a small model costs one statement per rule then, where a
        frontier round costs several per rule (0: always expand the region).
    fingerprint: "hash" (row count + a hash aggregate over every row: notices any change made
        through plain DuckDB SQL) or "count" (row count only: cheaper, misses in-place UPDATEs).
    """

    max_groundings: int = 100_000_000
    max_frontier_rounds: int = 12
    whole_model_factors: int = 10_000
    fingerprint: str = "hash"

    def __post_init__(self) -> None:
        if not isinstance(self.max_groundings, int) or self.max_groundings < 0:
            raise OptionError(f"max_groundings must be a non-negative integer, got {self.max_groundings!r}")
        if not isinstance(self.max_frontier_rounds, int) or self.max_frontier_rounds < 0:
            raise OptionError(f"max_frontier_rounds must be a non-negative integer, got {self.max_frontier_rounds!r}")
        if not isinstance(self.whole_model_factors, int) or self.whole_model_factors < 0:
            raise OptionError(f"whole_model_factors must be a non-negative integer, got {self.whole_model_factors!r}")
        if self.fingerprint not in ("hash", "count"):
            raise OptionError(f"fingerprint must be 'hash' or 'count', got {self.fingerprint!r}")


def estimate_groundings(con: duckdb.DuckDBPyConnection, select: exp.Expression, text: str | None = None) -> int:
    """DuckDB's optimizer estimate of the number of rows ``select`` yields (a few ms: no join runs).
    ``text``: ``select`` already generated as DuckDB SQL."""
    plan = con.execute("EXPLAIN (FORMAT JSON) " + (text or select.sql(dialect="duckdb"))).fetchall()
    try:
        root = json.loads(plan[0][1])[0]
        return int(float(root.get("extra_info", {}).get("Estimated Cardinality", 0)))
    except (ValueError, KeyError, IndexError, TypeError):
        return 0


def too_large_for_memory(rule: str, fit: int, select: exp.Expression, columns: int = 0) -> str:
    """The message of a rule with more than ``fit`` groundings, all the memory left holds."""
    per = grounding_bytes(select, columns)
    return (f"rule '{rule}': its join yields more than {fit:,} groundings, which need more than "
            f"{gib(per * (fit + 1))} of memory ({per} bytes each in the factor store and the query graph), but only "
            f"{gib(memory.available_bytes())} is available; nothing was grounded (restrict the rule)")


def check_estimate(con: duckdb.DuckDBPyConnection, rule: str, select: exp.Expression, config: GroundingConfig,
                   text: str | None = None, columns: int = 0) -> None:
    """Refuse a rule's join that yields more than ``config.max_groundings`` rows, before any row
    is written.

    The same for more groundings than the memory left holds (`groundings_that_fit`): the join is
    refused before it is materialized, not after DuckDB or NumPy ran out of memory.

    DuckDB's optimizer estimate (a few ms) clears most joins. Over the limit it is confirmed by a
    count that stops after ``max_groundings + 1`` rows: the estimate of a join on several key
    columns can be thousands of times too high (6·10⁹ for the 2·10⁶ edges of a 1000×1000 grid
    keyed by (row, column)), and a model that fits must not be refused for it. A join that is
    really too large is stopped after that many rows, as the insert itself would be.
    """
    estimate = estimate_groundings(con, select, text)
    fit = groundings_that_fit(select, columns)
    cap = min(config.max_groundings, fit)
    if estimate <= cap:
        return
    bounded = select.copy().limit(cap + 1)
    counted = exp.select(exp.Count(this=exp.Star())).from_(exp.Subquery(this=bounded, alias=exp.TableAlias(this=exp.to_identifier("j"))))
    n = int(con.execute(counted.sql(dialect="duckdb")).fetchall()[0][0])
    if n > fit and fit < config.max_groundings:
        raise GroundingError(too_large_for_memory(rule, fit, select, columns))
    if n > config.max_groundings:
        raise GroundingError(
            f"rule '{rule}': its join is estimated at {estimate:,} groundings and yields more than max_groundings = "
            f"{config.max_groundings:,}; nothing was grounded (raise max_groundings or restrict the rule)"
        )


def check_actual(rule: str, count: int, config: GroundingConfig) -> None:
    if count > config.max_groundings:
        raise GroundingError(
            f"rule '{rule}' yields {count:,} groundings, over max_groundings = {config.max_groundings:,}; "
            "nothing was grounded (raise max_groundings or restrict the rule)"
        )
