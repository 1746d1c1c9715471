"""The factor store's checks, skipped on a query when nothing has run on the database since they
last passed (issue 20: a repeated query's fixed cost).

Every query checks that the factor store matches the data (`pdbq.grounding.ground.prepare`:
catalog definitions, the FROM/EVIDENCE fingerprints of every variable relation, rules' inputs,
imported factor tables) and digests the store for the query-graph cache (`store_token`). Those
are a dozen DuckDB round trips, most of a repeated query's cost.

DuckDB counts, per database, the statements that may change what a name reads: every write
(INSERT/UPDATE/DELETE, on any connection to the database, committed or rolled back), every DDL,
BEGIN/COMMIT/ROLLBACK, SET, registering a Python object. Reading the count runs no statement
(`_catalog_version`, tens of nanoseconds). A full check that runs inside one transaction in which
the count moved only by its own BEGIN and COMMIT saw a state nobody else changed while it read,
and the check wrote nothing: its result (`StoreState`) holds as long as the count stays where it
was after the COMMIT. The next query compares one integer and, when it is equal, plans with the
kept definitions, prepared store and token instead of checking again.

Only when the count sees every input: the shortcut is refused when a definition reads anything a
statement on this database would not change — a view (it may read a file), a table function
(``read_csv``), a Python object found by a replacement scan, a table in a database that is not
DuckDB's own (an attached SQLite or Postgres file that another process may write), or a function
whose value changes by itself (``random()``, ``now()``, a user's Python UDF). Those databases are
checked in full on every query, as before.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import duckdb
import sqlglot
import sqlglot.expressions as exp

from pdbq.catalog.store import transaction
from pdbq.grounding.ground import Prepared, prepare, store_token
from pdbq.grounding.limits import GroundingConfig
from pdbq.language.nodes import CreateRule, CreateVariable

__all__ = ["StoreState", "checked_store", "kept_state", "read_definitions", "store_version", "forget"]

# Functions whose value changes without any statement: a definition calling one is fingerprinted
# on every query (its FROM may select different rows each time).
_VOLATILE = frozenset({
    "random", "rand", "setseed", "uuid", "gen_random_uuid", "uuidv4", "uuidv7", "nextval", "currval",
    "now", "today", "current_date", "current_time", "current_timestamp", "current_localtime",
    "current_localtimestamp", "get_current_time", "get_current_timestamp", "localtime", "localtimestamp",
    "transaction_timestamp", "txid_current", "current_setting", "current_query", "epoch_ms",
})


@dataclass
class StoreState:
    """What one passed check found: valid while ``version`` is the database's count."""

    version: int
    variables: dict[str, CreateVariable]
    rules: dict[str, CreateRule]
    prepared: Prepared
    token: str | None
    # evidence (vids, values bytes) that the hard-factor check already found possible
    possible: set[bytes] = field(default_factory=set)
    # what planning derived from this state and a statement (SQL it generated, stored
    # evidence): valid exactly as long as the state
    memo: dict[Any, Any] = field(default_factory=dict)

    def remember(self, key: Any, stmt: Any, make: Any) -> Any:
        """``make()`` for ``stmt`` under ``key``, made once per state (the entry holds the
        statement, so that its id is not reused while the entry lives)."""
        full = (key, id(stmt))
        hit = self.memo.get(full)
        if hit is not None and hit[0] is stmt:
            return hit[1]
        if len(self.memo) > 512:
            self.memo.clear()
        value = make()
        self.memo[full] = (stmt, value)
        return value

    def for_query(self) -> Prepared:
        """The prepared store for one query: its stats are the query's own (the graph builder
        writes into them)."""
        p = self.prepared
        return dataclasses.replace(p, complete=dict(p.complete), stats=copy.deepcopy(p.stats))


_STATES: weakref.WeakKeyDictionary[Any, StoreState] = weakref.WeakKeyDictionary()


def store_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """The database's count of statements that may change what a name reads; None when this
    DuckDB does not expose it (then every query checks in full)."""
    read = getattr(con, "_catalog_version", None)
    if read is None:
        return None
    try:
        return int(read())
    except Exception:  # noqa: BLE001 - an older or different build: no shortcut
        return None


def forget(db: Any) -> None:
    """Drop the kept state of ``db`` (its next query checks in full)."""
    try:
        _STATES.pop(db, None)
    except TypeError:
        pass


@functools.lru_cache(maxsize=4096)
def _reads(sql: str) -> tuple[tuple[tuple[str, ...], ...], bool]:
    """The table names a SELECT reads (parts of each qualified name; CTEs left out) and whether
    everything it reads is a named table read with stable functions."""
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except sqlglot.errors.ParseError:
        return (), False
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    names = []
    for t in tree.find_all(exp.Table):
        if not isinstance(t.this, exp.Identifier):
            return (), False  # a table function, a file path, ...
        parts = tuple(p.name for p in t.parts)
        if len(parts) == 1 and parts[0].lower() in ctes:
            continue
        names.append(parts)
    for f in tree.find_all(exp.Func):
        name = f.name if isinstance(f, exp.Anonymous) else f.sql_name()
        if name.lower() in _VOLATILE:
            return (), False
        if isinstance(f, exp.Anonymous) and name.lower() not in _builtins():
            return (), False  # a user's function (a Python UDF may read anything)
    return tuple(names), True


_BUILTINS: frozenset[str] | None = None


def _builtins() -> frozenset[str]:
    global _BUILTINS  # noqa: PLW0603 - the same in every connection of this process
    if _BUILTINS is None:
        con = duckdb.connect()
        try:
            _BUILTINS = frozenset(
                r[0].lower() for r in con.execute("SELECT DISTINCT function_name FROM duckdb_functions() WHERE internal").fetchall()
            )
        finally:
            con.close()
    return _BUILTINS


def _only_duckdb_databases(con: duckdb.DuckDBPyConnection) -> bool:
    rows = con.execute("SELECT type FROM duckdb_databases() WHERE NOT internal").fetchall()
    return all(str(r[0]).lower() == "duckdb" for r in rows)


def counted_inputs(con: duckdb.DuckDBPyConnection, variables: Mapping[str, CreateVariable], prepared: Prepared) -> bool:
    """Whether every input of the store's check is a table of a DuckDB database read with stable
    functions (so that any change to it moves the count)."""
    texts = [v.source for v in variables.values()] + [v.evidence for v in variables.values() if v.evidence]
    names: list[tuple[str, ...]] = []
    for text in texts:
        found, ok = _reads(text)
        if not ok:
            return False
        names += found
    for c in prepared.compiled.values():
        names += [(t,) for t in c.observed]
    kind = getattr(con, "_table_kind", None)
    if kind is None:
        return False
    for parts in set(names):
        if kind(parts[0] if len(parts) == 1 else parts) != "table":
            return False
    return _only_duckdb_databases(con)


def kept_state(db: Any) -> StoreState | None:
    """The kept check of ``db`` when nothing ran on its database since it passed, else None."""
    try:
        state = _STATES.get(db)
    except TypeError:  # a session that cannot be weakly referenced: never kept
        return None
    if state is None:
        return None
    return state if store_version(db.duckdb) == state.version else None


def read_definitions(db: Any) -> tuple[tuple[dict, dict], int | None]:
    """The catalog's ``(variables, rules)`` and the count read just before them, for
    `checked_store` (a caller that needs the definitions before planning reads them once)."""
    version = store_version(db.duckdb)
    return db.catalog.definitions(), version


def checked_store(db: Any, *, with_token: bool,
                  definitions: tuple[tuple[dict, dict], int | None] | None = None) -> tuple[StoreState, bool]:
    """The store checked for a query on ``db``: ``(state, kept)``, ``kept`` True when nothing ran
    on the database since the last passed check, so that its result is used as it is.

    Otherwise the full check (definitions, `prepare`, and with ``with_token`` the store token)
    runs in one transaction and is kept for later queries when nothing else ran meanwhile, it
    wrote nothing, and its inputs are all counted (`counted_inputs`). ``definitions``: what
    `read_definitions` returned just before (read outside the transaction: kept only when the
    count moved by the BEGIN alone since)."""
    con = db.duckdb
    state = kept_state(db)
    if state is not None:
        return state, True
    with transaction(con):
        start = store_version(con)
        if definitions is None:
            variables, rules = db.catalog.definitions()
        else:
            (variables, rules), read_at = definitions
            if read_at is None or start != read_at + 1:
                start = None  # something ran between the read and the BEGIN: not kept
        prepared = prepare(con, variables, rules, GroundingConfig())
        token = store_token(con, prepared.imports) if with_token else None
        end = store_version(con)
    after = store_version(con)
    state = StoreState(-1 if after is None else after, variables, rules, prepared, token)
    # start == end: nothing ran during the check, neither its own writes nor anyone's;
    # after == end + 1: the only statement since was its COMMIT (not the caller's transaction)
    if after is not None and start is not None and start == end and after == end + 1 and counted_inputs(con, variables, prepared):
        try:
            _STATES[db] = state
        except TypeError:
            pass
    else:
        forget(db)
    return state, False
