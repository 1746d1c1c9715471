"""pdbq inside plain DuckDB SQL: ``pdbq.register(con)`` adds scalar functions to a connection.

>>> import duckdb, pdbq
>>> db = pdbq.connect()
>>> _ = db.execute("CREATE TABLE t AS SELECT * FROM range(3) r(i)")
>>> _ = db.execute("CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t)")
>>> _ = db.execute("CREATE RULE r WEIGHT 1.0 FUNCTION ISTRUE AS x(i) :- t(i)")
>>> con = db.duckdb
>>> pdbq.register(con)
>>> con.sql("SELECT i, round(pdbq_prob('x', i), 4) AS p FROM t ORDER BY i").fetchall()
[(0, 0.8808), (1, 0.8808), (2, 0.8808)]
>>> pdbq.unregister(con)

Functions (``KEYS`` is one to four key values, in the relation's key-column order):

| function | type |
|---|---|
| ``pdbq_prob('relation', KEYS)`` | DOUBLE: P(TRUE) of a boolean variable |
| ``pdbq_stderr('relation', KEYS)`` | DOUBLE: standard error of that (largest per-value one otherwise) |
| ``pdbq_dist('relation', KEYS)`` | MAP(VARCHAR, DOUBLE): value (as text) -> probability |
| ``pdbq_map('relation', KEYS)`` | VARCHAR: the most probable value, as text |
| ``pdbq_set('option', value)`` | VARCHAR: sets an inference option for later calls |

How it works (docs/udf.md is the user documentation):

* DuckDB has no overloading for Python functions and no ``ANY`` parameter, so each function is an
  Arrow UDF ``_pdbq_<kind>_impl(relation VARCHAR, keys VARCHAR[])`` plus a temporary SQL macro
  with one overload per key arity that casts every key to VARCHAR and packs them into a list.
  The implementation casts them back with the catalog's key types (one DuckDB query per batch).
* DuckDB calls an Arrow UDF once per chunk of (up to 2048) rows; every key of a chunk, over all
  relations it names, is answered by ONE query-aware inference (`pdbq.planning.infer.infer`), never one
  per row. `inference_runs()` counts them.
* A UDF may not query the connection it runs on, so pdbq works on its own cursor of the same
  database (or of ``database=``'s connection), closed by `unregister` or at interpreter exit.
  The cursor sees committed data only: rows inserted inside an open transaction of ``con`` are
  invisible to the functions until COMMIT.
* Errors are raised as `PdbqError` subclasses; DuckDB surfaces them as
  ``duckdb.InvalidInputException`` whose message carries pdbq's.
"""

from __future__ import annotations

import atexit
import importlib
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa
import sqlglot.expressions as exp

from pdbq.api.database import Database
from pdbq.planning.options import EXTERNAL_OPTIONS, QueryOptions
from pdbq.errors import CatalogError, InferenceError, OptionError, suggest
from pdbq.grounding.store import ident, sql_text
from pdbq.language.nodes import DomainKind, Method

__all__ = ["register", "unregister", "registered_elsewhere", "add_macros", "inference_runs", "FUNCTIONS", "MAX_KEYS"]

MAX_KEYS = 4  # key arities with a macro overload
FUNCTIONS = ("pdbq_prob", "pdbq_stderr", "pdbq_dist", "pdbq_map")
_SETTER = "pdbq_set"

# DuckDB 2 renamed the module of type constants (duckdb.typing before)
_types = getattr(duckdb, "sqltypes", None) or importlib.import_module("duckdb.typing")
_VARCHAR = _types.VARCHAR
_DOUBLE = _types.DOUBLE
# the list and map types are made by the connection being registered: the module-level
# duckdb.list_type opens DuckDB's default connection (70 ms) that nothing else uses

_lock = threading.Lock()  # guards the counter and the session table
_runs = 0
_sessions: dict[int, "_Session"] = {}


def inference_runs() -> int:
    """How many inferences the registered functions have run in this process (for tests and
    benchmarks: a query over n rows should add about ceil(n / 2048) per function call site)."""
    return _runs


def _count_run() -> None:
    global _runs
    with _lock:
        _runs += 1


@dataclass
class _Session:
    """pdbq's state for one registered DuckDB connection."""

    con: duckdb.DuckDBPyConnection
    db: Database  # on a cursor: never the connection the UDF runs on
    method: Method = Method.AUTO
    options: dict[str, Any] = field(default_factory=dict)
    allow_external: bool = False  # pdbq_set may set EXTERNAL_OPTIONS (the Python caller said so)
    lock: threading.Lock = field(default_factory=threading.Lock)  # one batch at a time per cursor

    def close(self) -> None:
        self.db.close()


# ---------------------------------------------------------------------------------------- SQL


def _impl_name(function: str) -> str:
    return f"_{function}_impl"


def _macro_sql(function: str) -> str:
    """``CREATE OR REPLACE TEMP MACRO f(relation, k1) AS _f_impl(relation, [k1::VARCHAR]), ...``."""
    overloads = []
    for n in range(1, MAX_KEYS + 1):
        params = [ident("relation")] + [ident(f"k{i}") for i in range(1, n + 1)]
        keys = exp.Array(expressions=[exp.cast(exp.column(f"k{i}"), exp.DataType.build("VARCHAR"))
                                      for i in range(1, n + 1)])
        body = exp.Anonymous(this=_impl_name(function), expressions=[exp.column("relation"), keys])
        overloads.append(exp.MacroOverload(this=body, expressions=params))
    return _create_macro(function, overloads)


def _setter_sql() -> str:
    body = exp.Anonymous(this=_impl_name(_SETTER), expressions=[
        exp.column("name"), exp.cast(exp.column("value"), exp.DataType.build("VARCHAR"))])
    return _create_macro(_SETTER, [exp.MacroOverload(this=body, expressions=[ident("name"), ident("value")])])


def _drop_macro_sql(name: str) -> str:
    # sqlglot renders Drop's name from ``tables`` (``this`` gives a nameless DROP MACRO).
    return sql_text(exp.Drop(tables=[exp.to_table(name)], kind="MACRO", exists=True))


def _create_macro(name: str, overloads: list[exp.Expression]) -> str:
    create = exp.Create(
        this=exp.UserDefinedFunction(this=exp.to_table(name)),
        kind="MACRO",
        replace=True,
        properties=exp.Properties(expressions=[exp.TemporaryProperty()]),
        expression=exp.MacroOverloads(expressions=overloads),
    )
    return sql_text(create)


# ---------------------------------------------------------------------------------------- register


def register(con: duckdb.DuckDBPyConnection, *, database: Database | None = None, allow_external: bool = False) -> None:
    """Add ``pdbq_prob``, ``pdbq_stderr``, ``pdbq_dist``, ``pdbq_map`` and ``pdbq_set`` to ``con``.

    ``con`` is any DuckDB connection: a pdbq `Database`'s (``db.duckdb``) or one opened with plain
    ``duckdb.connect(path)`` on a pdbq database file. The functions answer from ``database`` when
    given (its ``default_options`` become the starting options), else from ``con``'s own database;
    either way through a separate cursor. Registering again replaces the functions and resets the
    options.

    ``pdbq_set`` never sets an option that reaches outside this process (`EXTERNAL_OPTIONS`:
    ``scheduler``) unless ``allow_external=True``: any SQL can call it, including a view stored in
    the database file by someone else. Options set from Python (``database.default_options``)
    are the caller's own and always apply.

    >>> # con = duckdb.connect("model.duckdb"); pdbq.register(con)
    >>> # con.sql("SELECT title, pdbq_prob('is_popular', title) FROM movies")
    """
    if not isinstance(con, duckdb.DuckDBPyConnection):
        raise TypeError(f"register() takes a duckdb connection, not {type(con).__name__}")
    if not isinstance(allow_external, bool):
        raise TypeError(f"allow_external= takes True or False, not {type(allow_external).__name__}")
    if database is not None and not isinstance(database, Database):
        raise TypeError(f"database= takes a pdbq Database, not {type(database).__name__}")
    unregister(con)
    base = database.duckdb if database is not None else con
    cursor = base.cursor()
    try:
        work = Database(cursor, path=database.path if database is not None else ":cursor:",
                        read_only=database.read_only if database is not None else False)
    except BaseException:
        cursor.close()
        raise
    if database is not None:
        work.graph_cache = database.graph_cache  # keyed by content: one cache serves both cursors
    session = _Session(con, work, allow_external=allow_external)
    if database is not None and database.default_options:
        opts = dict(database.default_options)
        QueryOptions.from_pairs(tuple(opts.items()))  # validated now, not at the first call
        session.options = opts
    created: list[str] = []
    try:
        keys, dist = con.list_type(_VARCHAR), con.map_type(_VARCHAR, _DOUBLE)
        for function in FUNCTIONS:
            ret = {"pdbq_dist": dist, "pdbq_map": _VARCHAR}.get(function, _DOUBLE)
            con.create_function(_impl_name(function), _batch_function(session, function), [_VARCHAR, keys], ret,
                                type="arrow", null_handling="special", side_effects=True)
            created.append(function)
            con.execute(_macro_sql(function))
        con.create_function(_impl_name(_SETTER), _setter_function(session), [_VARCHAR, _VARCHAR], _VARCHAR,
                            type="native", null_handling="special", side_effects=True)
        created.append(_SETTER)
        con.execute(_setter_sql())
    except BaseException as exc:
        # Only what this call added: DuckDB keeps Python functions per database instance, so the
        # same names may belong to another connection's registration.
        _remove(con, created)
        session.close()
        if isinstance(exc, duckdb.CatalogException) and "already exists" in str(exc):
            raise CatalogError(
                "pdbq's SQL functions are already registered on another connection to this database in "
                "this process (DuckDB shares Python functions between the connections of one database); "
                "use them from there, or unregister them there first") from exc
        raise
    with _lock:
        _sessions[id(con)] = session


def unregister(con: duckdb.DuckDBPyConnection) -> None:
    """Remove the functions `register` added to ``con`` and close pdbq's cursor (idempotent)."""
    with _lock:
        session = _sessions.pop(id(con), None)
    if session is None:
        return
    _remove(con)
    session.close()


def registered_elsewhere(con: duckdb.DuckDBPyConnection) -> bool:
    """True when ``con``'s database already has pdbq's functions from another connection of this
    process (DuckDB shares Python functions between the connections of one database)."""
    with _lock:
        if id(con) in _sessions:
            return False
    found = con.execute("SELECT count(*) FROM duckdb_functions() WHERE function_name = ?",
                        [_impl_name(FUNCTIONS[0])]).fetchall()
    return bool(found[0][0])


def add_macros(con: duckdb.DuckDBPyConnection) -> None:
    """Add the SQL names (``pdbq_prob`` ...: TEMP macros, one set per connection) to ``con`` over the
    functions another connection of the same database registered (see `registered_elsewhere`)."""
    for function in FUNCTIONS:
        con.execute(_macro_sql(function))
    con.execute(_setter_sql())


def _remove(con: duckdb.DuckDBPyConnection, functions: Sequence[str] = (*FUNCTIONS, _SETTER)) -> None:
    for function in functions:
        try:
            con.execute(_drop_macro_sql(function))
        except duckdb.ConnectionException:
            pass  # the connection is closed: its temporary macros are gone with it
        try:
            con.remove_function(_impl_name(function))
        except (duckdb.Error, ValueError):
            pass  # never registered (a failed register) or the connection is closed


@atexit.register
def _close_all() -> None:
    # A connection captured by a UDF and still open at exit makes nanobind report leaks.
    with _lock:
        sessions = list(_sessions.values())
        _sessions.clear()
    for s in sessions:
        try:
            _remove(s.con)  # DuckDB drops its references to the closures (and so to the cursor)
            s.close()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


# ---------------------------------------------------------------------------------------- pdbq_set


def _parse_value(text: str | None) -> Any:
    if text is None:
        return None
    t = text.strip()
    for conv in (int, float):
        try:
            return conv(t)
        except ValueError:
            continue
    return t


def _setter_function(session: _Session) -> Callable[[str | None, str | None], str]:
    def pdbq_set(name: str | None, value: str | None) -> str:
        if name is None:
            raise OptionError("pdbq_set: the option name is NULL")
        key = name.strip().lower()
        with session.lock:
            if key == "method":
                if value is None:
                    session.method = Method.AUTO
                else:
                    try:
                        session.method = Method(value.strip().upper())
                    except ValueError:
                        valid = ", ".join(m.value for m in Method)
                        raise OptionError(f"pdbq_set: unknown method {value!r}; valid: {valid}") from None
                return f"method = {session.method.value}"
            parsed = _parse_value(value)
            if key in EXTERNAL_OPTIONS and parsed is not None and not session.allow_external:
                raise OptionError(
                    f"pdbq_set: option '{key}' reaches outside this process ({EXTERNAL_OPTIONS[key]}) and is not "
                    "settable from SQL, which a database file can store in a view; allow it from Python: "
                    "pdbq.connect(path, allow_external=True) or pdbq.register(con, allow_external=True)")
            trial = {k: v for k, v in session.options.items() if k != key}
            if parsed is not None:
                trial[key] = parsed
            QueryOptions.from_pairs(tuple(trial.items()))  # raises OptionError naming the option
            session.options = trial
            return f"{key} = {'default' if parsed is None else parsed}"

    return pdbq_set


# ---------------------------------------------------------------------------------------- batches


def _batch_function(session: _Session, function: str) -> Callable[[pa.Array, pa.Array], pa.Array]:
    def impl(relations: pa.Array, keys: pa.Array) -> pa.Array:
        with session.lock:
            return _answer(session, function, relations, keys)

    impl.__name__ = _impl_name(function)
    return impl


def _call_text(function: str, relation: str, key: tuple) -> str:
    args = ", ".join(repr(k) for k in (relation, *key))
    return f"{function}({args})"


def _answer(session: _Session, function: str, relations: pa.Array, keys: pa.Array) -> pa.Array:
    rels = relations.to_pylist()
    rows = keys.to_pylist()
    db = session.db
    variables = db.catalog.variables()
    # row -> (relation, key strings) for rows that ask something; NULL anywhere gives NULL
    asked: list[tuple[str, tuple[str, ...]] | None] = []
    distinct: dict[str, dict[tuple[str, ...], None]] = {}
    for rel, key in zip(rels, rows):
        if rel is None or key is None or any(k is None for k in key):
            asked.append(None)
            continue
        name = rel.lower()
        key = tuple(key)
        if name not in variables:
            raise CatalogError(f"{_call_text(function, rel, key)}: '{rel}' is not a variable relation."
                               f"{suggest(name, variables)}")
        n = len(variables[name].columns)
        if len(key) != n:
            cols = ", ".join(c.name for c in variables[name].columns)
            raise CatalogError(f"{_call_text(function, rel, key)}: {name} has {n} key column{'s' if n != 1 else ''} "
                               f"({cols}), got {len(key)} key{'s' if len(key) != 1 else ''}")
        if function == "pdbq_prob" and variables[name].domain.kind is not DomainKind.BOOLEAN:
            raise InferenceError(f"{_call_text(function, rel, key)}: {name} is not boolean; use "
                                 f"pdbq_dist('{name}', ...)['value'] for the probability of one value")
        asked.append((name, key))
        distinct.setdefault(name, {})[key] = None
    if not distinct:
        return _empty(function, len(asked))
    typed = {name: _typed_keys(db, name, list(ks)) for name, ks in distinct.items()}
    from pdbq.planning.infer import infer  # noqa: PLC0415 - the engine is loaded on first use

    inference = infer(db, {name: t for name, t in typed.items()}, method=session.method,
                      options=dict(session.options), map=function == "pdbq_map", missing="error")
    _count_run()
    index = {name: {k: i for i, k in enumerate(ks)} for name, ks in distinct.items()}
    values = {name: _values(function, inference[name]) for name in distinct}
    out = [None if a is None else values[a[0]][index[a[0]][a[1]]] for a in asked]
    return pa.array(out, type=_arrow_type(function))


def _typed_keys(db: Database, relation: str, keys: list[tuple[str, ...]]) -> list[tuple]:
    """Key strings (the macros cast keys to VARCHAR) back to the catalog's key types, by DuckDB."""
    columns = db.catalog.key_types(relation)
    if all(c.type.upper() == "VARCHAR" for c in columns):
        return keys
    names = [f"k{i}" for i in range(len(columns))]
    table = pa.table({n: pa.array([k[i] for k in keys], type=pa.string()) for i, n in enumerate(names)})
    view = f"__pdbq_udf_keys_{uuid.uuid4().hex}"
    casts = [exp.TryCast(this=exp.column(ident(n)), to=exp.DataType.build(c.type, dialect="duckdb")).as_(ident(n))
             for n, c in zip(names, columns)]
    con = db.duckdb
    con.register(view, table)
    try:
        got = con.execute(sql_text(exp.select(*casts).from_(exp.to_table(view)))).fetchall()
    finally:
        con.unregister(view)
    for raw, row in zip(keys, got):
        for i, (text, value) in enumerate(zip(raw, row)):
            if value is None:
                raise CatalogError(f"{relation}{raw!r}: {text!r} is not a valid {columns[i].type} "
                                   f"for key column {columns[i].name}")
    return [tuple(r) for r in got]


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"  # as DuckDB writes a BOOLEAN cast to VARCHAR
    return str(value)


def _values(function: str, answers: Any) -> list:
    if function == "pdbq_prob":
        return [float(x) for x in answers.prob()]
    if function == "pdbq_stderr":
        return [float(x) for x in answers.stderr()]
    if function == "pdbq_dist":
        return [None if d is None else [(_text(k), float(p)) for k, p in d.items()] for d in answers.dist()]
    return [_text(v) for v in answers.map()]


def _arrow_type(function: str) -> pa.DataType:
    if function == "pdbq_dist":
        return pa.map_(pa.string(), pa.float64())
    if function == "pdbq_map":
        return pa.string()
    return pa.float64()


def _empty(function: str, n: int) -> pa.Array:
    return pa.nulls(n, type=_arrow_type(function))

