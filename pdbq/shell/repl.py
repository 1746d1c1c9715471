"""The shell's read-eval-print loop: `Shell` runs statements (each in a worker thread, so that Ctrl-C
can cancel it), prints their results and warnings, and reads a terminal with prompt_toolkit.

Interactive sessions use prompt_toolkit (history, highlighting, completion, multi-line
statements that end at a ``;``). Piped input, ``-c`` and ``-f`` go through the same statement
runner with a plain line reader. Each statement runs in a worker thread so that Ctrl-C can cancel
it (DuckDB's ``interrupt()`` plus pdbq's `CancelToken`) while the session and database stay usable.
Dot commands live in `pdbq.shell.dot_commands`, the command line in `pdbq.shell.cli`.
"""

from __future__ import annotations

import inspect
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

from pdbq.progress import CancelToken, Cancelled, ProgressBar
from pdbq.answers.render import render_result
from pdbq.errors import ParseError, PdbqError
from pdbq.shell.dot_commands import DotCommands
from pdbq.shell.session import apply_seed, banner
from pdbq.shell.streams import ASCII_BOX, can_encode, error_text, isatty, write

__all__ = ["Shell", "history_path", "banner"]

PROMPT = "pdbq> "
CONTINUATION = "...> "
HISTORY_ENV = "PDBQ_HISTORY"


# An estimate call or a method clause: a statement whose answer `.last` would describe.
_PROBABILISTIC = re.compile(r"\b(PROB|DIST|MAP|STDERR)\s*\(|\bUSING\s+(AUTO|QAM|GIBBS|EXACT|ANNEAL)\b", re.IGNORECASE)


def history_path() -> Path:
    """``$PDBQ_HISTORY`` if set, else ``~/.pdbq_history``."""
    env = os.environ.get(HISTORY_ENV)
    return Path(env) if env else Path.home() / ".pdbq_history"


class _Interrupted(Exception):
    """Ctrl-C cancelled the running statement."""


class Shell(DotCommands):
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
        allow_external: bool = False,
    ) -> None:
        self.db = db
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.progress = progress
        self.bail = bail
        self.seed = seed
        self.read_only = read_only
        self.allow_external = allow_external
        self.interactive = interactive
        self.mode = "table"
        self.timer = False
        self.headers = True
        self.nullvalue: str | None = None  # None: each mode's own (NULL; empty in csv)
        self.echo = False
        self.last_diagnostics: dict[str, Any] | None = None
        self._terminal_out = self.out  # where results go when no .output/.once is active
        self._once = False
        self.max_rows: int | None = 40
        self.max_width: int | None = None  # None: the terminal's width
        self.separator: str | None = None  # None: each mode's own (, in csv, | in list)
        self.changes = False
        self.total_changes = 0
        self.failed = False
        self.interrupted = False
        self.quit = False
        self.completer: Any = None
        self._ascii = not can_encode(self.out, "┌─┐│…·")
        if seed is not None:
            apply_seed(db, seed)

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
        # lines end at '\n' only: str.splitlines also splits at '\x1e', '\x0c', '\u2028', ..., which
        # may stand inside a string literal (a `.dump` of such a value must read back as it was)
        self.run_lines(line for line in re.split(r"(?<=\n)", text) if line)

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
            if self.echo:
                self._print_out(chunk.sql + ";")
            self._run_statement(chunk, text, first_line)
            if self.interrupted:
                # Ctrl-C cancels the rest of what was submitted with it, too.
                return

    def _run_statement(self, chunk: Any, script: str, first_line: int) -> None:
        # the bar is drawn only on a terminal (and not with --no-progress); its notices (the
        # kernels' one-time compilation, said before the wait) go to stderr in every case
        bar = ProgressBar(self.err)
        if not self.progress:
            bar.enabled = False
        started = time.perf_counter()
        try:
            try:
                text, diagnostics, changed = self._in_worker(lambda token: self._execute(chunk.sql, token, bar))
            finally:
                # erase the bar first: nothing may be printed on its line
                if bar is not None:
                    bar.close()
                self._invalidate_names()
        except _Interrupted:
            self.interrupted = True
            self.failed = True
            self._forget_last(chunk.sql, "was interrupted (Ctrl-C) before it answered")
            self._print_err("Interrupted")
            return
        except ParseError as exc:
            if exc.text == chunk.sql:
                exc = _relocate(exc, script, chunk.line, chunk.col, first_line)
            self._error(exc)
            return
        except Exception as exc:  # noqa: BLE001 - every failure is reported and the session goes on
            self._forget_last(chunk.sql, "failed")
            self._error(exc)
            return
        if diagnostics:
            self.last_diagnostics = diagnostics
        if text:
            self._print_result(text)
        if changed is not None and self.changes:
            self.total_changes += changed
            self._print_out(f"changes: {changed}   total_changes: {self.total_changes}")
        for warning in (diagnostics or {}).get("warnings") or ():
            self._print_warning(str(warning))
        if self.timer:
            self._print_out(f"Run Time (s): real {time.perf_counter() - started:.3f}")

    def _forget_last(self, sql: str, what: str) -> None:
        """A probabilistic statement that gave no answer: ``.last`` must not describe the one before."""
        if _PROBABILISTIC.search(sql):
            self.last_diagnostics = {"no_answer": f"the last probabilistic query {what}: {' '.join(sql.split())}"}

    def _execute(self, sql: str, token: CancelToken,
                 bar: ProgressBar | None) -> tuple[str | None, dict[str, Any], int | None]:
        """Runs in the worker thread: execute and render (rendering may be what runs the query).
        Returns the text, the diagnostics, and the row count of INSERT/UPDATE/DELETE/COPY."""
        result = self.db.execute(sql, **_execute_kwargs(self.db, token, bar))
        if result is None:
            return None, {}, None
        diagnostics = dict(getattr(result, "diagnostics", None) or {})
        if not getattr(result, "columns", True):
            return None, diagnostics, None
        if _is_row_count(self.db, sql, result):
            row = result.fetchone()
            return None, diagnostics, int(row[0]) if row and row[0] is not None else None
        return self._render(result), diagnostics, None

    def _render(self, result: Any) -> str:
        width = self.max_width
        if width is None:
            width = shutil.get_terminal_size((120, 24)).columns if isatty(self.out) else None
        text = render_result(result, self.mode, width=width, max_rows=self.max_rows, header=self.headers,
                             null=self.nullvalue, separator=self.separator)
        return text.translate(ASCII_BOX) if self._ascii else text

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
        # Wait on the event rather than Thread.join: a join interrupted by Ctrl-C can mark a
        # still-running thread as finished (CPython 3.11), and an event's timed wait is safe to
        # interrupt; it returns as soon as the statement ends (a sleep between checks added up
        # to 10 ms to every statement of a script).
        while not done.is_set():
            try:
                done.wait(0.02)
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
    # ----------------------------------------------------------------------------------------
    # output

    def _width(self) -> int:
        return shutil.get_terminal_size((80, 24)).columns

    def _print_out(self, text: str) -> None:
        write(self.out, text + "\n")

    def _print_result(self, text: str) -> None:
        """A statement's result: to ``.output``/``.once``'s file when one is set."""
        write(self.out, text + "\n")
        if self._once:
            self._close_output()

    def _print_warning(self, text: str) -> None:
        """One line under the result, dim on a terminal (stderr: a script's output stays clean)."""
        line = " ".join(f"Warning: {text}".split())
        if isatty(self.err) and os.environ.get("NO_COLOR") is None:
            line = f"\x1b[2m{line}\x1b[0m"
        self._print_err(line)

    def _print_err(self, text: str) -> None:
        self.out.flush()
        write(self.err, text + "\n")

    def _fail(self, message: str) -> None:
        self.failed = True
        self._print_err(f"Error: {message}")

    def _error(self, exc: BaseException) -> None:
        self.failed = True
        self._print_err(error_text(exc))

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

        from pdbq.shell.completion import PdbqCompleter, read_names
        from pdbq.shell.highlight import prompt_lexer

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
        self._print_out(banner(self.db))
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


def _is_cancellation(exc: BaseException) -> bool:
    if isinstance(exc, (Cancelled, KeyboardInterrupt)):
        return True
    try:
        import duckdb

        return isinstance(exc, duckdb.InterruptException)
    except (ImportError, AttributeError):
        return False


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
    """True for the single ``Count`` DuckDB answers INSERT/UPDATE/DELETE/COPY with (not shown, as in
    DuckDB's CLI; ``... RETURNING`` answers with rows and is shown)."""
    if list(getattr(result, "columns", ())) != ["Count"]:
        return False
    try:
        import duckdb

        statements = db.duckdb.extract_statements(sql)
        kinds = {duckdb.StatementType.INSERT, duckdb.StatementType.UPDATE, duckdb.StatementType.DELETE,
                 duckdb.StatementType.COPY}
    except Exception:  # noqa: BLE001 - not plain DuckDB SQL (INSERT ... SELECT PROB(...) GIVEN ...)
        words = sql.split(None, 1)
        return bool(words) and words[0].upper() in ("INSERT", "COPY")
    return len(statements) == 1 and statements[0].type in kinds

