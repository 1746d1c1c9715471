"""`pdbq.connect()` and `Database`: run pdbq scripts against one DuckDB database.

>>> import pdbq
>>> with pdbq.connect() as db:
...     _ = db.execute("CREATE TABLE movies AS SELECT * FROM (VALUES ('Up'), ('Heat')) t(movie)")
...     _ = db.execute("CREATE VARIABLE is_popular(movie TEXT) DOMAIN BOOLEAN FROM (SELECT movie FROM movies)")
...     db.execute("SHOW VARIABLES").fetchall()[0][:3]
('is_popular', 'movie VARCHAR', 'BOOLEAN')

Statements
    ``execute(script)`` splits the script into statements and runs them in order. Each statement
    is atomic on its own, like in DuckDB's CLI: when statement 3 fails, statements 1-2 stay
    done and the rest do not run. Inside a transaction the script opened itself (``BEGIN``), the
    statements join it and ``COMMIT``/``ROLLBACK`` decide.

Errors
    pdbq statements raise `PdbqError` subclasses. Every other statement is passed to DuckDB as
    its original text, and DuckDB's errors surface unchanged (``duckdb.Error`` subclasses such as
    ``duckdb.CatalogException``), so code written for DuckDB keeps working.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

import duckdb
import pyarrow as pa

from pdbq.api.result import Result
from pdbq.catalog.store import Catalog, transaction
from pdbq.coref.metrics import register_sql as register_coref_sql
from pdbq.errors import ParseError, PdbqError
from pdbq.graph.cache import DEFAULT_CACHE_BYTES, GraphCache
from pdbq.language.nodes import (
    AlterRelation,
    CreateRule,
    CreateVariable,
    Drop,
    DropRelation,
    ExplainMatch,
    ExportUai,
    ImportUai,
    LearnWeights,
    PassThrough,
    ProbQuery,
    SaveAnswer,
    Show,
    Statement,
)

__all__ = ["Database", "connect"]


def _parse_script(text: str, params: Any = None) -> list[Statement]:
    if params is None:  # statements are frozen and their trees never mutated: parse a text once
        return list(_parse_text(text))
    from pdbq.language.parser import parse_script

    return parse_script(text, params)


@functools.lru_cache(maxsize=256)
def _parse_text(text: str) -> tuple[Statement, ...]:
    from pdbq.language.parser import parse_script

    return tuple(parse_script(text))


def connect(
    path: str | os.PathLike[str] = ":memory:", *, read_only: bool = False, cache_bytes: int = DEFAULT_CACHE_BYTES
) -> Database:
    """Open (or create) a DuckDB database and its pdbq catalog.

    ``path`` is a DuckDB file or ``":memory:"``. ``read_only`` opens an existing file without
    ever writing to it (CREATE/DROP then fail); probabilistic queries, EXPLAIN, ``infer`` and the
    UDFs still work, their factor store living in an in-memory scratch database
    (`pdbq.grounding.scratch`) for the life of the connection. A file whose catalog was written by a newer pdbq
    raises `SchemaVersionError` and is left untouched (nothing is written before the check).
    ``cache_bytes`` bounds the in-memory cache of query graphs (`pdbq.graph.cache`): a query
    asked again while its inputs are unchanged reuses its pruned graph, kernel arrays and
    selection table and only samples; 0 turns it off.

    >>> db = connect()
    >>> db.execute("SELECT 42 AS answer").fetchall()
    [(42,)]
    >>> db.close()
    """
    target = os.fspath(path)
    con = duckdb.connect(target, read_only=read_only)
    try:
        return Database(con, path=target, read_only=read_only, cache_bytes=cache_bytes)
    except BaseException:
        con.close()
        raise


class Database:
    """One DuckDB connection plus its pdbq `Catalog`. Use `connect()` to make one.

    A context manager: ``with pdbq.connect("model.duckdb") as db: ...`` closes it on exit.
    """

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        *,
        path: str = ":memory:",
        read_only: bool = False,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ):
        self._con = con
        # Pruned query graphs and what inference derived from them, keyed by a digest of their
        # inputs (never stale); see pdbq.graph.cache.
        self.graph_cache = GraphCache(cache_bytes)
        self._catalog = Catalog(con)  # reads only; raises SchemaVersionError for newer catalogs
        register_coref_sql(con)  # TEMP table macros coref_b3 / coref_pairwise (docs/coreference.md)
        self.path = path
        self.read_only = read_only
        self._closed = False
        self._close_hooks: list[Callable[[], None]] = []
        # Session defaults for inference options (e.g. the shell's --seed); a query's own
        # WITH (...) options override them.
        self.default_options: dict[str, object] = {}

    # ---------------------------------------------------------------- properties

    @property
    def duckdb(self) -> duckdb.DuckDBPyConnection:
        """The DuckDB connection (plain SQL, relations, Arrow)."""
        self._check_open()
        return self._con

    @property
    def catalog(self) -> Catalog:
        """The variable relations and rules of this database."""
        self._check_open()
        return self._catalog

    # ---------------------------------------------------------------- running

    def execute(self, script: str, parameters: Any = None, *, progress: Any = None, cancel: Any = None,
                _frame: FrameType | None = None) -> Result:
        """Run one or more statements; return the last one's result.

        SHOW, SELECT and probabilistic queries return their rows as a `Result`; statements that
        return no rows (CREATE, DROP, ...) return an empty `Result` whose ``execute`` runs the next
        statement, so calls chain as in DuckDB: ``db.execute("CREATE ...").execute("INSERT ...")``.

        ``parameters`` binds ``?``/``$1`` (a list) or ``$name`` (a dict) in a one-statement
        script, as DuckDB's ``execute(sql, parameters)``: DuckDB binds them in plain SQL, pdbq binds
        them as literals in probabilistic queries. pandas/polars DataFrames and Arrow tables in the
        caller's variables can be queried by name, as with ``duckdb.sql`` (`pdbq.api.scans`).
        ``progress``: ``True`` for a progress bar on a terminal's stderr, or a callable receiving
        `pdbq.progress.Progress` during grounding and sampling. ``cancel``: a
        `pdbq.progress.CancelToken` that stops a probabilistic query between sampling rounds.

        >>> db = connect()
        >>> db.execute("CREATE TABLE t AS SELECT 1 AS x; SELECT x + 1 AS y FROM t").fetchall()
        [(2,)]
        >>> db.execute("SELECT x + ? AS y FROM t", [41]).fetchone()
        (42,)
        """
        if not isinstance(script, str):
            raise TypeError(f"execute() takes the script as a str, not {type(script).__name__}")
        self._check_open()
        _check_encodable(script)
        if cancel is None:
            statements = _parse_script(script, parameters)
        else:  # a long statement parses for seconds: the cancel is read while it does
            from pdbq.language.parser import parse_checked

            with parse_checked(cancel.check):
                statements = _parse_script(script, parameters)
        result: Result | None = None
        bar = None
        if progress is True:
            from pdbq.progress import ProgressBar

            progress = bar = ProgressBar()
        from pdbq.api.scans import python_tables

        frame = _frame if _frame is not None else sys._getframe(1)
        try:
            with python_tables(self._con, script, frame):
                for i, stmt in enumerate(statements):
                    result = self._run(stmt, last=i == len(statements) - 1, progress=progress or None, cancel=cancel,
                                       params=parameters)
        finally:
            del frame
            if bar is not None:
                bar.close()
        return result if result is not None else Result.empty(self)

    def sql(self, text: str, parameters: Any = None) -> duckdb.DuckDBPyRelation | None:
        """Like ``execute`` but the last statement's answer is a DuckDB relation (lazy for plain SQL).

        Statements that return nothing (CREATE, DROP, ...) give None, as in DuckDB's ``sql()``.
        """
        if not isinstance(text, str):
            raise TypeError(f"sql() takes the query as a str, not {type(text).__name__}")
        self._check_open()
        _check_encodable(text)
        statements = _parse_script(text, parameters)
        if not statements:
            return None
        from pdbq.api.scans import python_tables

        frame = sys._getframe(1)
        try:
            with python_tables(self._con, text, frame) as registered:
                for stmt in statements[:-1]:
                    self._run(stmt, last=False)
                last = statements[-1]
                if isinstance(last, PassThrough) and not registered:
                    return self._con.sql(last.sql, params=parameters)
                # a lazy relation would outlive the registered data frames: materialise
                result = self._run(last, last=True, params=parameters)
        finally:
            del frame
        return result.relation(self._con) if result is not None else None

    def ground(self) -> Any:
        """Ground every rule over the whole database (for learning and whole-model inference).

        Query answering grounds only what a query reaches; this grounds everything and returns
        the grounding statistics. Grounded factors are reused until a definition or an input
        table changes.
        """
        self._check_open()
        from pdbq.grounding import ground_all

        with self.scratch():
            return ground_all(self._con, self._catalog.variables(), self._catalog.rules())

    def _run(self, stmt: Statement, *, last: bool, progress: Any = None, cancel: Any = None,
             params: Any = None) -> Result | None:
        if isinstance(stmt, PassThrough):
            return self._pass_through(stmt, last=last, params=params)
        if isinstance(stmt, SaveAnswer):
            return self._save(stmt, progress=progress, cancel=cancel)
        if isinstance(stmt, ImportUai):
            from pdbq.api.save import run_import

            run_import(self, stmt, cancel)
            return None
        if isinstance(stmt, ExportUai):
            from pdbq.api.save import run_export

            run_export(self, stmt)
            return None
        if isinstance(stmt, CreateVariable):
            self._catalog.create_variable(stmt)
            return None
        if isinstance(stmt, CreateRule):
            self._catalog.create_rule(stmt)
            return None
        if isinstance(stmt, Drop):
            self._catalog.drop(stmt)
            return None
        if isinstance(stmt, DropRelation):
            # DuckDB does not track what rules and variables read: pdbq checks (or cascades) first,
            # and the cascade and the DROP commit together
            with transaction(self._con):
                self._catalog.check_relation_drop(stmt)
                return self._pass_through(PassThrough(stmt.sql, stmt.line, stmt.col), last=last, params=params)
        if isinstance(stmt, AlterRelation):
            readers = self._catalog.readers(stmt.name)
            if not readers:
                return self._pass_through(PassThrough(stmt.sql, stmt.line, stmt.col), last=last, params=params)
            # a rename or a column change of what a rule reads breaks it at the next query: the
            # change and the check commit together, or neither does
            with transaction(self._con):
                out = self._pass_through(PassThrough(stmt.sql, stmt.line, stmt.col), last=last, params=params)
                self._catalog.check_relation_change(stmt, readers)
                return out
        if isinstance(stmt, LearnWeights) or (isinstance(stmt, Show) and stmt.kind in ("WEIGHTS", "CALIBRATION")):
            return self._learning(stmt, progress=progress, cancel=cancel)
        if isinstance(stmt, Show) and stmt.kind in ("TABLES", "ALL TABLES"):
            from pdbq.api.save import user_tables

            return Result(user_tables(self._con, stmt.kind), connection=self._con, database=self)
        if isinstance(stmt, Show):
            table = self._catalog.show(stmt.kind)
            if stmt.kind.strip().upper() == "RULES":
                table = _with_template_analysis(table, self._catalog)
            return Result(table, connection=self._con, database=self)
        if isinstance(stmt, ProbQuery):
            return self._query(stmt, progress=progress, cancel=cancel)
        if isinstance(stmt, ExplainMatch):
            from pdbq.planning.coref_explain import explain_match

            with self.scratch():
                answer = explain_match(self, stmt)
            return Result(answer.table, answer.diagnostics, connection=self._con, database=self)
        raise PdbqError(f"this build of pdbq cannot run {type(stmt).__name__} statements")

    def _pass_through(self, stmt: PassThrough, *, last: bool, params: Any = None) -> Result | None:
        con = self._con
        kinds = con.extract_statements(stmt.sql)  # DuckDB's own parse: a syntax error raises here
        returns_rows = bool(kinds) and duckdb.ExpectedResultType.NOTHING not in kinds[-1].expected_result_type
        if not (last and returns_rows):
            con.execute(stmt.sql, params)
            _finish(con)
            return None
        rel = con.sql(stmt.sql, params=params)
        if rel is None:
            return None
        return Result(rel.to_arrow_table(), connection=con, database=self)

    def _save(self, stmt: SaveAnswer, *, progress: Any = None, cancel: Any = None) -> Result | None:
        from pdbq.api.save import run_save
        from pdbq.planning.execute import execute_query

        with self.scratch():
            if isinstance(stmt.query, ExplainMatch):
                from pdbq.planning.coref_explain import explain_match

                answer = explain_match(self, stmt.query)
            else:
                answer = execute_query(self, stmt.query, progress=progress, cancel=cancel)
        rows = run_save(self, stmt, answer)
        # diagnostics (method, warnings) stay visible: INSERT's row count, else an empty result
        table = pa.table({"Count": [rows[0][0]]}) if rows and len(rows[0]) == 1 and stmt.kind.value == "INSERT" else pa.table({})
        return Result(table, answer.diagnostics, connection=self._con, database=self)

    def _prepare_after_import(self, relation: str) -> None:
        """What the first query would do before inference, done right after an import committed
        (`pdbq.planning.after_import`); errors are the caller's to ignore (the next query reports
        them)."""
        from pdbq.planning.after_import import prepare_after_import

        prepare_after_import(self, relation)

    def _query(self, stmt: ProbQuery, *, progress: Any = None, cancel: Any = None) -> Result:
        # imported on first use: the engine loads numba, which a shell start-up need not pay for
        from pdbq.planning.execute import execute_query

        with self.scratch():
            answer = execute_query(self, stmt, progress=progress, cancel=cancel)
        return Result(answer.table, answer.diagnostics, connection=self._con, database=self)

    def _learning(self, stmt: LearnWeights | Show, *, progress: Any = None, cancel: Any = None) -> Result:
        """LEARN WEIGHTS / SHOW WEIGHTS / SHOW CALIBRATION (pdbq.learning): a progress report
        per epoch; a cancel stops learning (inside an epoch too) and keeps the last complete epoch's weights."""
        from pdbq.learning.statement import run_statement
        from pdbq.progress import Progress

        def on_epoch(info: Any) -> bool:
            if progress is not None:
                progress(Progress("learning", info.epoch, info.epochs, elapsed=info.elapsed))
            return cancel is not None and cancel.cancelled

        table, diagnostics = run_statement(self._con, self._catalog, stmt, on_epoch=on_epoch,
                                           should_stop=None if cancel is None else (lambda: cancel.cancelled))
        return Result(table, diagnostics, connection=self._con, database=self)

    def scratch(self) -> Any:
        """A context in which pdbq's own writes (the factor store) go to an in-memory scratch
        database when this database is read-only (`pdbq.grounding.scratch`); a no-op otherwise."""
        if not self.read_only:
            return contextlib.nullcontext()
        from pdbq.grounding.scratch import scratch_session

        return scratch_session(self._con)

    # ---------------------------------------------------------------- lifetime

    def _check_open(self) -> None:
        if self._closed:
            raise PdbqError("the database is closed")

    def on_close(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` when this database is closed, before its connection is (e.g. to close a
        cursor that the SQL functions of `pdbq.register` answer on)."""
        self._check_open()
        self._close_hooks.append(hook)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if not self._closed:
            self._closed = True
            hooks, self._close_hooks = self._close_hooks, []
            try:
                for hook in reversed(hooks):
                    hook()
            finally:
                self.graph_cache.clear()
                self._con.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("read-only" if self.read_only else "open")
        return f"<pdbq.Database {self.path!r} ({state})>"


def _with_template_analysis(table: pa.Table, catalog: Catalog) -> pa.Table:
    """SHOW RULES plus a column with each template's hierarchy analysis (seed 004, Defs. 5-6)."""
    from pdbq.analysis import analyze_template

    random = catalog.variables()
    rules = catalog.rules()
    notes = [analyze_template(rules[name], random).describe() for name in table.column("name").to_pylist()]
    return table.append_column("analysis", pa.array(notes, type=pa.string()))


def _check_encodable(text: str) -> None:
    """ParseError at a lone surrogate: DuckDB takes UTF-8 and would fail with a TypeError."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        line = text.count("\n", 0, e.start) + 1
        col = e.start - (text.rfind("\n", 0, e.start) + 1) + 1
        raise ParseError(
            "the text holds a character that is not valid Unicode (a lone surrogate)", line=line, col=col
        ) from None


def _finish(con: duckdb.DuckDBPyConnection) -> None:
    """Run a pending result to its end without keeping rows (the connection is free again)."""
    complete = getattr(con, "complete", None)
    if complete is not None:
        complete()
    else:  # DuckDB builds without complete(): drain the rows
        try:
            con.fetchall()
        except duckdb.InvalidInputException:
            pass  # nothing pending

