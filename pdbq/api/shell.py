"""The ``pdbq`` command: an interactive SQL shell, and a script runner when input is not a terminal.

    pdbq [DATABASE] [-c SQL] [-f FILE] [--seed N] [--no-progress] [--bail] [--readonly]

Interactive sessions use prompt_toolkit (history, highlighting, completion, multi-line
statements that end at a ``;``). Piped input, ``-c`` and ``-f`` go through the same statement
runner with a plain line reader. Each statement runs in a worker thread so that Ctrl-C can cancel
it (DuckDB's ``interrupt()`` plus pdbq's `CancelToken`) while the session and database stay usable.

Exit codes: 0 success; 1 a statement or dot command failed; 2 bad arguments or a database that
cannot be opened; 130 interrupted (Ctrl-C while running a script).
"""

from __future__ import annotations

import argparse
import inspect
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

from pdbq.api.progress import CancelToken, Cancelled, ProgressBar
from pdbq.api.render import MODES, render_result
from pdbq.errors import ParseError, PdbqError, suggest

__all__ = ["main", "Shell", "build_arg_parser", "history_path"]

PROMPT = "pdbq> "
CONTINUATION = "...> "
HISTORY_ENV = "PDBQ_HISTORY"

HELP = """\
Statements end with ';' and may span lines. Ctrl-C cancels a running statement, Ctrl-D exits.

.help                    show this help
.tables                  list tables and views
.variables               list random-variable relations (SHOW VARIABLES)
.rules                   list rules (SHOW RULES)
.schema [NAME]           show the definition of a table, view, variable relation or rule
.timer on|off            print each statement's run time
.mode [table|csv|json|markdown]
                         how results are printed (no argument: show the current mode)
.maxrows N               rows a table shows before eliding the middle (0: all)
.open FILE               close this database and open FILE (':memory:' for a new in-memory one)
.read FILE               run the statements in FILE
.quit, .exit             leave the shell"""

_ASCII_BOX = str.maketrans({
    "─": "-", "│": "|", "┌": "+", "┬": "+", "┐": "+", "├": "+", "┼": "+", "┤": "+",
    "└": "+", "┴": "+", "┘": "+", "…": "~", "·": ".",
})


def history_path() -> Path:
    """``$PDBQ_HISTORY`` if set, else ``~/.pdbq_history``."""
    env = os.environ.get(HISTORY_ENV)
    return Path(env) if env else Path.home() / ".pdbq_history"


class _Interrupted(Exception):
    """Ctrl-C cancelled the running statement."""


class Shell:
    """One shell session over a pdbq ``Database``: runs statements and dot commands, prints results.

    ``out`` receives results (and timer lines), ``err`` errors and the progress bar. ``failed``
    becomes True when any statement or dot command fails; ``interrupted`` when Ctrl-C cancelled one.
    """

    def __init__(
        self,
        db: Any,
        *,
        out: TextIO | None = None,
        err: TextIO | None = None,
        progress: bool = True,
        bail: bool = False,
        seed: int | None = None,
        read_only: bool = False,
        interactive: bool = False,
    ) -> None:
        self.db = db
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.progress = progress
        self.bail = bail
        self.seed = seed
        self.read_only = read_only
        self.interactive = interactive
        self.mode = "table"
        self.timer = False
        self.max_rows: int | None = 40
        self.failed = False
        self.interrupted = False
        self.quit = False
        self.completer: Any = None
        self._ascii = not _can_encode(self.out, "┌─┐│…·")
        if seed is not None:
            _apply_seed(db, seed)

    # ----------------------------------------------------------------------------------------
    # running input

    @property
    def stopped(self) -> bool:
        """True once the session should read no more input (quit, or a failure with --bail)."""
        if self.quit:
            return True
        if self.interactive:
            return False
        return self.interrupted or (self.bail and self.failed)

    @property
    def exit_code(self) -> int:
        if self.interactive:
            return 0  # like sqlite3 and duckdb: errors at the prompt were already shown
        if self.interrupted:
            return 130
        return 1 if self.failed else 0

    def run_text(self, text: str) -> None:
        """Run a script: statements (ending at ';') and dot commands (lines starting with '.')."""
        self.run_lines(text.splitlines(keepends=True))

    def run_lines(self, lines: Iterable[str]) -> None:
        """Run lines as they arrive; a statement runs as soon as its terminating ';' is read."""
        statement_complete = _language("statement_complete")
        buffer: list[str] = []
        first_line = 1
        for number, line in enumerate(lines, start=1):
            if self.stopped:
                return
            if not buffer and line.lstrip().startswith("."):
                self.dot_command(line.strip())
                continue
            if not buffer and not line.strip():
                continue
            if not buffer:
                first_line = number
            buffer.append(line if line.endswith("\n") else line + "\n")
            text = "".join(buffer)
            if _complete(statement_complete, text):
                buffer.clear()
                self.run_sql(text, first_line=first_line)
        if buffer and not self.stopped:
            self.run_sql("".join(buffer), first_line=first_line)

    def run_sql(self, text: str, *, first_line: int = 1) -> None:
        """Run every statement of ``text`` in order, printing each result.

        ``first_line`` is the line of the script ``text`` starts on; parse errors are reported
        at their line in the script.
        """
        try:
            chunks = _language("split_script")(text)
        except ParseError as exc:
            self._error(_relocate(exc, text, 1, 1, first_line))
            return
        except PdbqError as exc:
            self._error(exc)
            return
        for chunk in chunks:
            if self.stopped or not chunk.sql.strip():
                if self.stopped:
                    return
                continue
            self._run_statement(chunk, text, first_line)
            if self.interrupted:
                # Ctrl-C cancels the rest of what was submitted with it, too.
                return

    def _run_statement(self, chunk: Any, script: str, first_line: int) -> None:
        bar = ProgressBar(self.err) if self.progress else None
        started = time.perf_counter()
        try:
            text = self._in_worker(lambda token: self._execute(chunk.sql, token, bar))
        except _Interrupted:
            self.interrupted = True
            self.failed = True
            self._print_err("Interrupted")
            return
        except ParseError as exc:
            if exc.text == chunk.sql:
                exc = _relocate(exc, script, chunk.line, chunk.col, first_line)
            self._error(exc)
            return
        except Exception as exc:  # noqa: BLE001 - every failure is reported and the session goes on
            self._error(exc)
            return
        finally:
            if bar is not None:
                bar.close()
            self._invalidate_names()
        if text:
            self._print_out(text)
        if self.timer:
            self._print_out(f"Run Time (s): real {time.perf_counter() - started:.3f}")

    def _execute(self, sql: str, token: CancelToken, bar: ProgressBar | None) -> str | None:
        """Runs in the worker thread: execute and render (rendering may be what runs the query)."""
        result = self.db.execute(sql, **_execute_kwargs(self.db, token, bar))
        if result is None:
            return None
        if not getattr(result, "columns", True) or _is_row_count(self.db, sql, result):
            return None
        return self._render(result)

    def _render(self, result: Any) -> str:
        width = shutil.get_terminal_size((120, 24)).columns if _isatty(self.out) else None
        text = render_result(result, self.mode, width=width, max_rows=self.max_rows)
        return text.translate(_ASCII_BOX) if self._ascii else text

    def _in_worker(self, job: Callable[[CancelToken], Any]) -> Any:
        """Run ``job`` in a thread; on Ctrl-C cancel it and wait for it to stop."""
        token = CancelToken()
        box: dict[str, Any] = {}
        done = threading.Event()

        def target() -> None:
            try:
                box["value"] = job(token)
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                box["error"] = exc
            finally:
                done.set()

        worker = threading.Thread(target=target, name="pdbq-statement", daemon=True)
        worker.start()
        presses = 0
        # Poll with sleep rather than Thread.join: a join interrupted by Ctrl-C can mark a
        # still-running thread as finished (CPython 3.11), and sleep is safe to interrupt.
        while not done.is_set():
            try:
                time.sleep(0.02)
            except KeyboardInterrupt:
                presses += 1
                token.cancel()
                if presses >= 3:
                    # The statement ignores cancellation (e.g. a long compiled kernel): give up.
                    self._print_err("Statement does not stop; exiting.")
                    raise SystemExit(130) from None
            if token.cancelled and not done.is_set():
                # Repeated: the statement may not have reached DuckDB yet when Ctrl-C came.
                self._interrupt_duckdb()
        worker.join()
        if token.cancelled:
            error = box.get("error")
            if error is None or _is_cancellation(error):
                raise _Interrupted()
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def _interrupt_duckdb(self) -> None:
        try:
            self.db.duckdb.interrupt()
        except Exception:  # noqa: BLE001 - a closed connection has nothing to interrupt
            pass

    # ----------------------------------------------------------------------------------------
    # dot commands

    def dot_command(self, line: str) -> None:
        """Run one dot command line such as ``.mode csv``."""
        name, _, rest = line.partition(" ")
        arg = rest.strip()
        handler = _DOT.get(name.lower())
        if handler is None:
            known = sorted(_DOT)
            self._fail(f"unknown command '{name}'.{suggest(name, known)} Enter .help for the list.")
            return
        try:
            handler(self, arg)
        except Exception as exc:  # noqa: BLE001
            self._error(exc)

    def _dot_help(self, arg: str) -> None:
        self._print_out(HELP)

    def _dot_quit(self, arg: str) -> None:
        self.quit = True

    def _dot_timer(self, arg: str) -> None:
        value = arg.lower()
        if value not in ("on", "off"):
            self._fail(".timer takes 'on' or 'off'")
            return
        self.timer = value == "on"

    def _dot_mode(self, arg: str) -> None:
        if not arg:
            self._print_out(self.mode)
            return
        mode = arg.lower()
        if mode == "box":
            mode = "table"
        if mode not in MODES:
            self._fail(f"unknown mode '{arg}'.{suggest(mode, MODES)} Modes: {', '.join(MODES)}")
            return
        self.mode = mode

    def _dot_maxrows(self, arg: str) -> None:
        try:
            n = int(arg)
        except ValueError:
            self._fail(".maxrows takes a whole number (0: show all rows)")
            return
        if n < 0:
            self._fail(".maxrows takes a whole number (0: show all rows)")
            return
        self.max_rows = None if n == 0 else max(n, 2)

    def _dot_tables(self, arg: str) -> None:
        from pdbq.api.completion import read_names

        names = read_names(self.db)
        hidden = set(names.variables) | set(names.rules)
        tables = [t for t in names.tables if t not in hidden and not t.startswith("pdbq_")]
        if tables:
            self._print_out(_columns_layout(tables, self._width()))

    def _dot_variables(self, arg: str) -> None:
        self.run_sql("SHOW VARIABLES;")

    def _dot_rules(self, arg: str) -> None:
        self.run_sql("SHOW RULES;")

    def _dot_schema(self, arg: str) -> None:
        texts = _schema_texts(self.db, arg or None)
        if arg and not texts:
            from pdbq.api.completion import read_names

            names = read_names(self.db)
            pool = names.tables + names.variables + names.rules
            self._fail(f"no table, view, variable relation or rule named '{arg}'.{suggest(arg, pool)}")
            return
        if texts:
            self._print_out("\n".join(texts))

    def _dot_open(self, arg: str) -> None:
        if not arg:
            self._fail(".open takes a file name (or :memory:)")
            return
        new = _connect(_unquote(arg), read_only=self.read_only)
        if self.seed is not None:
            _apply_seed(new, self.seed)
        old, self.db = self.db, new
        try:
            old.close()
        except Exception:  # noqa: BLE001 - the old database is gone either way
            pass

    def _dot_read(self, arg: str) -> None:
        if not arg:
            self._fail(".read takes a file name")
            return
        path = Path(_unquote(arg)).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            self._fail(f"cannot read '{path}': {exc.strerror or exc}")
            return
        self.run_text(text)

    # ----------------------------------------------------------------------------------------
    # output

    def _width(self) -> int:
        return shutil.get_terminal_size((80, 24)).columns

    def _print_out(self, text: str) -> None:
        _write(self.out, text + "\n")

    def _print_err(self, text: str) -> None:
        self.out.flush()
        _write(self.err, text + "\n")

    def _fail(self, message: str) -> None:
        self.failed = True
        self._print_err(f"Error: {message}")

    def _error(self, exc: BaseException) -> None:
        self.failed = True
        self._print_err(_error_text(exc))

    def _invalidate_names(self) -> None:
        if self.completer is not None:
            self.completer.invalidate()

    # ----------------------------------------------------------------------------------------
    # interactive

    def run_interactive(self) -> None:
        """Read statements from the terminal with prompt_toolkit until .quit or Ctrl-D."""
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, InMemoryHistory
        from prompt_toolkit.key_binding import KeyBindings

        from pdbq.api.completion import PdbqCompleter, read_names
        from pdbq.api.highlight import prompt_lexer

        statement_complete = _language("statement_complete")

        self.completer = PdbqCompleter(lambda: read_names(self.db))
        bindings = KeyBindings()

        @bindings.add("enter")
        def _enter(event: Any) -> None:
            buffer = event.current_buffer
            text = buffer.text
            if not text.strip() or text.lstrip().startswith(".") or _complete(statement_complete, text):
                buffer.validate_and_handle()
            else:
                buffer.insert_text("\n")

        @bindings.add("escape", "enter")
        def _force(event: Any) -> None:
            event.current_buffer.validate_and_handle()

        path = history_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch(exist_ok=True)
            history: Any = FileHistory(str(path))
        except OSError:
            history = InMemoryHistory()
        session: Any = PromptSession(
            message=PROMPT,
            multiline=True,
            prompt_continuation=lambda width, line_number, wrap_count: CONTINUATION.rjust(width),
            history=history,
            lexer=prompt_lexer(),
            completer=self.completer,
            complete_while_typing=False,
            key_bindings=bindings,
        )
        while not self.quit:
            try:
                text = session.prompt()
            except KeyboardInterrupt:
                continue
            except EOFError:
                break
            self.interrupted = False
            try:
                self.run_text(text)
            except KeyboardInterrupt:
                # Ctrl-C outside a running statement (splitting, printing): drop the rest.
                self._print_err("Interrupted")


# ---------------------------------------------------------------------------------------------
# helpers


_DOT: dict[str, Callable[[Shell, str], None]] = {
    ".help": Shell._dot_help,
    ".tables": Shell._dot_tables,
    ".variables": Shell._dot_variables,
    ".rules": Shell._dot_rules,
    ".schema": Shell._dot_schema,
    ".timer": Shell._dot_timer,
    ".mode": Shell._dot_mode,
    ".maxrows": Shell._dot_maxrows,
    ".open": Shell._dot_open,
    ".read": Shell._dot_read,
    ".quit": Shell._dot_quit,
    ".exit": Shell._dot_quit,
}


def _language(name: str) -> Any:
    """``pdbq.language.<name>`` (the script splitter lives in ``pdbq.language.split``)."""
    import pdbq.language as language

    found = getattr(language, name, None)
    if found is None:
        from pdbq.language import split

        found = getattr(split, name)
    return found


def _complete(statement_complete: Callable[[str], bool], text: str) -> bool:
    try:
        return bool(statement_complete(text))
    except Exception:  # noqa: BLE001 - let the statement run and report its own error
        return True


def _write(stream: Any, text: str) -> None:
    try:
        stream.write(text)
    except UnicodeEncodeError:
        # A terminal or pipe that cannot show some characters: show '?' rather than fail.
        encoding = getattr(stream, "encoding", None) or "ascii"
        stream.write(text.encode(encoding, "replace").decode(encoding))
    stream.flush()


def _isatty(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # closed stream
        return False


def _can_encode(stream: Any, sample: str) -> bool:
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        sample.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _is_cancellation(exc: BaseException) -> bool:
    if isinstance(exc, (Cancelled, KeyboardInterrupt)):
        return True
    try:
        import duckdb

        return isinstance(exc, duckdb.InterruptException)
    except (ImportError, AttributeError):
        return False


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, PdbqError):
        return f"Error: {exc}"
    try:
        import duckdb

        if isinstance(exc, duckdb.Error):
            return f"Error: {exc}"
    except ImportError:
        pass
    if isinstance(exc, OSError):
        return f"Error: {exc}"
    # Not a user error: say what it was so it can be reported.
    return f"Internal error: {type(exc).__name__}: {exc}"


def _relocate(exc: ParseError, text: str, line0: int, col0: int, first_line: int) -> ParseError:
    """Report a parse error at its place in the script rather than in its statement.

    The error's position is relative to a statement that starts at (``line0``, ``col0``) of
    ``text``, and ``text`` starts on line ``first_line`` of the script.
    """
    if exc.text is None or (line0, col0, first_line) == (1, 1, 1):
        return exc
    line = exc.line + line0 - 1
    col = exc.col + (col0 - 1 if exc.line == 1 else 0)
    caret = str(exc).rsplit("\n", 1)[-1]
    width = max(1, caret.count("^"))
    # Padding the text keeps the caret excerpt on the right line of the script.
    padded = "\n" * (first_line - 1) + text
    return ParseError(exc.reason, line=line + first_line - 1, col=col, text=padded, width=width)


_EXECUTE_PARAMS: dict[type, frozenset[str]] = {}


def _execute_kwargs(db: Any, token: CancelToken, bar: ProgressBar | None) -> dict[str, Any]:
    """Pass the cancel token and progress callback to ``Database.execute`` where it takes them."""
    kind = type(db)
    params = _EXECUTE_PARAMS.get(kind)
    if params is None:
        try:
            sig = inspect.signature(db.execute)
            if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values()):
                params = frozenset({"cancel", "progress"})
            else:
                params = frozenset(sig.parameters)
        except (TypeError, ValueError):
            params = frozenset()
        _EXECUTE_PARAMS[kind] = params
    kwargs: dict[str, Any] = {}
    if "cancel" in params:
        kwargs["cancel"] = token
    if "progress" in params and bar is not None:
        kwargs["progress"] = bar
    return kwargs


def _is_row_count(db: Any, sql: str, result: Any) -> bool:
    """True for the single ``Count`` DuckDB answers INSERT/UPDATE/DELETE with (not shown, as in
    DuckDB's CLI; ``... RETURNING`` answers with rows and is shown)."""
    if list(getattr(result, "columns", ())) != ["Count"]:
        return False
    try:
        import duckdb

        statements = db.duckdb.extract_statements(sql)
        kinds = {duckdb.StatementType.INSERT, duckdb.StatementType.UPDATE, duckdb.StatementType.DELETE}
    except Exception:  # noqa: BLE001 - not plain DuckDB SQL: show whatever came back
        return False
    return len(statements) == 1 and statements[0].type in kinds


def _apply_seed(db: Any, seed: int) -> None:
    options = getattr(db, "default_options", None)
    if options is None:
        raise PdbqError("this pdbq Database has no default options; --seed cannot be applied")
    options["seed"] = int(seed)


def _connect(path: str, *, read_only: bool = False) -> Any:
    import pdbq

    return pdbq.connect(path, read_only=read_only)


def _schema_texts(db: Any, name: str | None) -> list[str]:
    """CREATE statements of tables and views, then of variable relations and rules.

    A variable relation is also a DuckDB view; it is shown once, as its CREATE VARIABLE.
    """
    definitions: list[tuple[str, Any]] = []
    catalog = getattr(db, "catalog", None)
    if catalog is not None:
        for attr in ("variables", "rules"):
            try:
                definitions.extend(getattr(catalog, attr)().items())
            except Exception:  # noqa: BLE001 - an unreadable catalog shows no definitions
                continue
    pdbq_names = {str(key).lower() for key, _ in definitions}
    texts: list[str] = []
    con = db.duckdb.cursor()
    try:
        query = (
            "SELECT name, sql FROM (SELECT table_name AS name, sql, 0 AS o FROM duckdb_tables() WHERE NOT internal "
            "UNION ALL SELECT view_name, sql, 1 FROM duckdb_views() WHERE NOT internal) "
            "WHERE (? IS NULL OR lower(name) = lower(?)) AND (? IS NOT NULL OR NOT starts_with(name, 'pdbq_')) "
            "ORDER BY o, name"
        )
        for table, sql in con.execute(query, [name, name, name]).fetchall():
            if sql and table.lower() not in pdbq_names:
                texts.append(sql.strip())
    finally:
        con.close()
    for key, definition in definitions:
        if name is None or str(key).lower() == name.lower():
            texts.append(_definition_text(definition))
    return texts


def _definition_text(definition: Any) -> str:
    text = (getattr(definition, "text", "") or "").strip()
    if not text:
        from pdbq.catalog.text import statement_sql

        text = statement_sql(definition)
    return text if text.endswith(";") else text + ";"


def _columns_layout(names: list[str], width: int) -> str:
    """Names in as many columns as fit the terminal, filled down then across (like ls)."""
    col_w = max(len(n) for n in names) + 2
    ncols = max(1, width // col_w)
    nrows = -(-len(names) // ncols)
    lines = []
    for r in range(nrows):
        cells = [names[c * nrows + r] for c in range(ncols) if c * nrows + r < len(names)]
        lines.append("".join(n.ljust(col_w) for n in cells).rstrip())
    return "\n".join(lines)


def build_arg_parser() -> argparse.ArgumentParser:
    """The command-line interface of ``pdbq``."""
    p = argparse.ArgumentParser(
        prog="pdbq",
        description="pdbq: a probabilistic database on DuckDB. Without -c/-f it reads statements "
        "from the terminal (interactive shell) or from standard input.",
        epilog="Exit status: 0 ok, 1 a statement failed, 2 usage error or database not opened, "
        "130 interrupted.",
    )
    p.add_argument("database", nargs="?", default=":memory:", help="database file (default: in-memory)")
    p.add_argument(
        "-c", dest="actions", action=_Append, metavar="SQL", kind="sql",
        help="run SQL (statements and dot commands) and exit; may repeat",
    )
    p.add_argument(
        "-f", dest="actions", action=_Append, metavar="FILE", kind="file",
        help="run the statements in FILE and exit; may repeat (in order with -c)",
    )
    p.add_argument("--seed", type=int, default=None, metavar="N", help="default random seed of inference")
    p.add_argument("--no-progress", action="store_true", help="never draw a progress bar")
    p.add_argument("--bail", action="store_true", help="stop at the first failing statement")
    p.add_argument("--readonly", action="store_true", help="open the database read-only")
    p.add_argument("--version", action="version", version=_version())
    return p


class _Append(argparse.Action):
    """Collect -c and -f in the order given, tagged with their kind."""

    def __init__(self, *args: Any, kind: str, **kwargs: Any) -> None:
        self.kind = kind
        super().__init__(*args, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        items = list(getattr(namespace, self.dest, None) or [])
        items.append((self.kind, values))
        setattr(namespace, self.dest, items)


def _version() -> str:
    from pdbq import __version__

    return f"pdbq {__version__}"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``pdbq`` console script; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["dedupe"]:  # the sub-command lives in its own module
        from pdbq.linkage.cli import main as dedupe_main

        return dedupe_main(argv[1:])
    args = build_arg_parser().parse_args(argv)
    actions: list[tuple[str, str]] = args.actions or []
    interactive = not actions and _isatty(sys.stdin) and _isatty(sys.stdout)
    try:
        db = _connect(args.database, read_only=args.readonly)
    except Exception as exc:  # noqa: BLE001
        sys.stderr.write(f"{_error_text(exc)}\n")
        return 2
    try:
        shell = Shell(
            db,
            progress=not args.no_progress,
            bail=args.bail,
            seed=args.seed,
            read_only=args.readonly,
            interactive=interactive,
        )
    except PdbqError as exc:
        sys.stderr.write(f"{_error_text(exc)}\n")
        db.close()
        return 2
    try:
        if actions:
            for kind, value in actions:
                if shell.stopped:
                    break
                if kind == "sql":
                    shell.run_text(value)
                else:
                    shell.dot_command(f".read {value}")
        elif interactive:
            shell.run_interactive()
        else:
            shell.run_lines(sys.stdin)
        return shell.exit_code
    except KeyboardInterrupt:
        # Ctrl-C while reading a script or printing: stop like a cancelled statement.
        sys.stderr.write("Interrupted\n")
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `pdbq -f x.sql | head`): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1 if shell.failed else 0
    finally:
        try:
            shell.db.close()
        except Exception:  # noqa: BLE001
            pass
