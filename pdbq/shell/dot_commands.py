"""The shell's dot commands (``.mode``, ``.schema``, ``.open`` ...): `DotCommands`, the half of
`pdbq.shell.repl.Shell` that reads and changes session settings rather than running statements."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from pdbq.answers.render import MODES
from pdbq.errors import PdbqError, suggest
from pdbq.shell.definitions import dump_lines, schema_texts
from pdbq.shell.session import open_database
from pdbq.shell.streams import can_encode, columns_layout, open_output, unquote

__all__ = ["HELP", "DOT", "DotCommands"]

HELP = """\
Statements end with ';' and may span lines. Ctrl-C cancels a running statement, Ctrl-D exits.

.help                    show this help
.tables                  list tables and views
.variables               list random-variable relations (SHOW VARIABLES)
.rules                   list rules (SHOW RULES)
.schema [NAME]           show the definition of a table, view, variable relation or rule
.describe NAME           columns and types of a table, view or variable relation
.databases               list attached databases and their files
.indexes [TABLE]         list indexes (of TABLE)
.dump [NAME]             the SQL script that rebuilds the database (or one table, view,
                         variable relation or rule): tables with rows, views, variables, rules
.import FILE TABLE       load a CSV or Parquet file into TABLE (created when missing)
.last, .diag             how the last probabilistic query was answered: method, steps,
                         chains, R-hat, largest standard error, time, warnings
.timer on|off            print each statement's run time
.mode [MODE]             how results are printed: table (alias box, duckbox), line, csv, json,
                         markdown, list, tabs, html (no argument: show the current mode)
.headers on|off          column names (and types) above table, csv, list and html output
.nullvalue TEXT          how NULL is shown (default: NULL; empty in csv, list and tabs)
.separator COL           field separator of csv (default ,) and list (default |) modes
.maxrows N               rows a table shows before eliding the middle (0: all)
.maxwidth N              widest a table is drawn, in characters (0: the terminal's width)
.changes on|off          after INSERT, UPDATE, DELETE and COPY, print how many rows changed
.show                    show the current settings
.output [FILE]           send results to FILE (no argument: back to the terminal)
.once FILE               send the next result only to FILE
.echo on|off             print each statement before running it
.bail on|off             stop a script at the first failing statement
.open FILE               close this database and open FILE (':memory:' for a new in-memory one)
.read FILE               run the statements in FILE
.print TEXT              print TEXT
.system CMD, .shell CMD  run CMD in the operating system's shell
.quit, .exit             leave the shell

Warnings of a query (not converged, tolerance not reached, ...) are printed under its result.
Save answers with CREATE TABLE t AS SELECT ..., PROB(v) ... or COPY (SELECT ...) TO 'file.parquet'."""


class DotCommands:
    """Dot-command handlers, mixed into `pdbq.shell.repl.Shell` (which supplies the session state,
    ``_print_out``, ``_fail``, ``_error``, ``run_sql`` and ``run_text`` they use)."""

    def dot_command(self, line: str) -> None:
        """Run one dot command line such as ``.mode csv``."""
        if self.echo:
            self._print_out(line)
        name, _, rest = line.partition(" ")
        arg = rest.strip()
        handler = DOT.get(name.lower())
        if handler is None:
            known = sorted(DOT)
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
        mode = arg.split()[0].lower()
        if mode in ("box", "duckbox"):
            mode = "table"
        if mode not in MODES:
            self._fail(f"unknown mode '{arg}'.{suggest(mode, MODES)} Modes: {', '.join(MODES)}")
            return
        self.mode = mode

    def _dot_separator(self, arg: str) -> None:
        if not arg:
            self._fail(".separator takes the field separator, e.g. .separator ';' (row separators are newlines)")
            return
        text = unquote(arg) if arg[0] in "'\"" else arg.split()[0]  # a quoted separator may be a space
        sep = text.replace("\\t", "\t")  # `.separator \t`: a tab, as in sqlite3
        if len(sep) != 1 and self.mode == "csv":
            self._fail("csv mode takes a one-character separator; use .mode list for longer ones")
            return
        self.separator = sep

    def _dot_maxwidth(self, arg: str) -> None:
        try:
            n = int(arg)
        except ValueError:
            n = -1
        if n < 0:
            self._fail(".maxwidth takes a whole number of characters (0: the terminal's width)")
            return
        self.max_width = None if n == 0 else max(n, 20)

    def _dot_changes(self, arg: str) -> None:
        value = self._on_off(".changes", arg)
        if value is not None:
            self.changes = value

    def _dot_show(self, arg: str) -> None:
        out = self.out if self.out is not self._terminal_out else None
        settings = [
            ("mode", self.mode),
            ("headers", "on" if self.headers else "off"),
            ("nullvalue", repr(self.nullvalue) if self.nullvalue is not None else "(mode default)"),
            ("separator", repr(self.separator) if self.separator is not None else "(mode default)"),
            ("maxrows", str(self.max_rows or 0)),
            ("maxwidth", str(self.max_width or 0)),
            ("timer", "on" if self.timer else "off"),
            ("changes", "on" if self.changes else "off"),
            ("echo", "on" if self.echo else "off"),
            ("bail", "on" if self.bail else "off"),
            ("output", getattr(out, "name", "file") if out is not None else "stdout"),
            ("seed", str(self.seed) if self.seed is not None else "(none)"),
            ("database", getattr(self.db, "path", ":memory:") + (" (read-only)" if self.read_only else "")),
        ]
        width = max(len(k) for k, _ in settings)
        self._print_out("\n".join(f"{k.rjust(width)}: {v}" for k, v in settings))

    def _dot_print(self, arg: str) -> None:
        import shlex  # noqa: PLC0415

        try:
            words = shlex.split(arg)
        except ValueError:  # an unbalanced quote: print the text as typed
            words = [arg]
        self._print_out(" ".join(words))

    def _dot_system(self, arg: str) -> None:
        import subprocess  # noqa: PLC0415

        if not arg:
            self._fail(".system takes a command")
            return
        done = subprocess.run(arg, shell=True, capture_output=True, text=True, check=False)  # noqa: S602 - the user's own command
        if done.stdout:
            self._print_out(done.stdout.rstrip("\n"))
        if done.stderr:
            self._print_err(done.stderr.rstrip("\n"))
        if done.returncode:
            self._fail(f"command exited with status {done.returncode}")

    def _dot_indexes(self, arg: str) -> None:
        con = self.db.duckdb.cursor()
        try:
            rows = con.execute(
                "SELECT index_name FROM duckdb_indexes() WHERE (? IS NULL OR lower(table_name) = lower(?)) "
                "AND NOT starts_with(table_name, 'pdbq_') ORDER BY table_name, index_name",
                [arg or None, unquote(arg) if arg else None],
            ).fetchall()
        finally:
            con.close()
        if rows:
            self._print_out("\n".join(r[0] for r in rows))

    def _dot_dump(self, arg: str) -> None:
        name = unquote(arg) if arg else None
        lines = list(dump_lines(self.db, name))
        if name is not None and len(lines) <= 2:  # BEGIN and COMMIT only
            self._fail(f"no table, view, variable relation or rule named '{arg}'")
            return
        self._print_result("\n".join(lines))

    def _dot_import(self, arg: str) -> None:
        import shlex  # noqa: PLC0415

        import sqlglot.expressions as exp  # noqa: PLC0415

        from pdbq.grounding.store import sql_text  # noqa: PLC0415

        words = [w for w in shlex.split(arg) if not w.startswith("--")] if arg else []
        if len(words) != 2:
            self._fail(".import takes a file and a table: .import FILE TABLE (CSV or Parquet)")
            return
        path, name = str(Path(words[0]).expanduser()), words[1]
        parquet = path.lower().endswith((".parquet", ".pq"))
        args: list[exp.Expression] = [exp.Placeholder()]
        params: list[Any] = [path]
        if not parquet and self.separator is not None:
            args.append(exp.EQ(this=exp.column("delim"), expression=exp.Placeholder()))
            params.append(self.separator)
        source = exp.select("*").from_(exp.Table(this=exp.Anonymous(
            this="read_parquet" if parquet else "read_csv", expressions=args)))
        table = exp.to_table(name, dialect="duckdb")
        con = self.db.duckdb
        exists = con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE lower(table_name) = lower(?)", [table.name]).fetchall()[0][0]
        statement = (exp.Insert(this=table, expression=source) if exists
                     else exp.Create(this=table, kind="TABLE", expression=source))
        try:
            self.db.execute(sql_text(statement), params)
        except (duckdb.Error, PdbqError) as exc:
            # DuckDB's first line says what went wrong; the rest points into pdbq's own statement
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            self._fail(f"cannot import {words[0]} into {name}: {reason}")
            return
        self._invalidate_names()

    def _dot_columns(self, arg: str) -> None:
        self._fail(".columns (results drawn column-wise) is not supported; .mode line prints one value per line")

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

    def _on_off(self, name: str, arg: str) -> bool | None:
        value = arg.lower()
        if value not in ("on", "off"):
            self._fail(f"{name} takes 'on' or 'off'")
            return None
        return value == "on"

    def _dot_headers(self, arg: str) -> None:
        value = self._on_off(".headers", arg)
        if value is not None:
            self.headers = value

    def _dot_echo(self, arg: str) -> None:
        value = self._on_off(".echo", arg)
        if value is not None:
            self.echo = value

    def _dot_bail(self, arg: str) -> None:
        value = self._on_off(".bail", arg)
        if value is not None:
            self.bail = value

    def _dot_nullvalue(self, arg: str) -> None:
        self.nullvalue = unquote(arg) if arg else None

    def _dot_output(self, arg: str) -> None:
        self._close_output()
        if arg:
            self.out = open_output(unquote(arg))
            self._ascii = not can_encode(self.out, "┌─┐│…·")

    def _dot_once(self, arg: str) -> None:
        if not arg:
            self._fail(".once takes a file name")
            return
        self._close_output()
        self.out = open_output(unquote(arg))
        self._once = True

    def _close_output(self) -> None:
        if self.out is not self._terminal_out:
            try:
                self.out.close()
            finally:
                self.out = self._terminal_out
                self._ascii = not can_encode(self.out, "┌─┐│…·")
        self._once = False

    def _dot_last(self, arg: str) -> None:
        from pdbq.shell.diag import format_diagnostics

        if not self.last_diagnostics:
            self._print_out("no probabilistic query has run yet in this session")
            return
        if "no_answer" in self.last_diagnostics:
            self._print_out(self.last_diagnostics["no_answer"])
            return
        self._print_out(format_diagnostics(self.last_diagnostics))

    def _dot_databases(self, arg: str) -> None:
        con = self.db.duckdb.cursor()
        try:
            rows = con.execute(
                "SELECT database_name, coalesce(path, '') FROM duckdb_databases() WHERE NOT internal ORDER BY 1"
            ).fetchall()
        finally:
            con.close()
        self._print_out("\n".join(f"{name}: {path or '(in memory)'}" for name, path in rows))

    def _dot_describe(self, arg: str) -> None:
        if not arg:
            self._fail(".describe takes a table, view or variable relation name")
            return
        import sqlglot.expressions as exp  # noqa: PLC0415

        from pdbq.grounding.store import sql_text  # noqa: PLC0415

        try:
            table = exp.to_table(unquote(arg), dialect="duckdb")
        except Exception:  # noqa: BLE001 - a name sqlglot cannot read
            self._fail(f"'{arg}' is not a table name")
            return
        self._run_statement_text(sql_text(exp.Describe(this=table)))

    def _run_statement_text(self, sql: str) -> None:
        echo, self.echo = self.echo, False  # the dot command was echoed, not its statement
        try:
            self.run_sql(sql + ";")
        finally:
            self.echo = echo

    def _dot_tables(self, arg: str) -> None:
        from pdbq.shell.completion import read_names

        names = read_names(self.db)
        hidden = set(names.variables) | set(names.rules)
        tables = [t for t in names.tables if t not in hidden and not t.startswith("pdbq_")]
        if tables:
            self._print_out(columns_layout(tables, self._width()))

    def _dot_variables(self, arg: str) -> None:
        self.run_sql("SHOW VARIABLES;")

    def _dot_rules(self, arg: str) -> None:
        self.run_sql("SHOW RULES;")

    def _dot_schema(self, arg: str) -> None:
        texts = schema_texts(self.db, arg or None)
        if arg and not texts:
            from pdbq.shell.completion import read_names

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
        new = open_database(unquote(arg), read_only=self.read_only, seed=self.seed,
                            allow_external=getattr(self, "allow_external", False))
        old, self.db = self.db, new
        try:
            old.close()
        except Exception:  # noqa: BLE001 - the old database is gone either way
            pass

    def _dot_read(self, arg: str) -> None:
        if not arg:
            self._fail(".read takes a file name")
            return
        path = Path(unquote(arg)).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            self._fail(f"cannot read '{path}': {exc.strerror or exc}")
            return
        self.run_text(text)


DOT: dict[str, Callable[[Any, str], None]] = {
    ".help": DotCommands._dot_help,
    ".tables": DotCommands._dot_tables,
    ".variables": DotCommands._dot_variables,
    ".rules": DotCommands._dot_rules,
    ".schema": DotCommands._dot_schema,
    ".timer": DotCommands._dot_timer,
    ".headers": DotCommands._dot_headers,
    ".echo": DotCommands._dot_echo,
    ".bail": DotCommands._dot_bail,
    ".nullvalue": DotCommands._dot_nullvalue,
    ".output": DotCommands._dot_output,
    ".once": DotCommands._dot_once,
    ".last": DotCommands._dot_last,
    ".diag": DotCommands._dot_last,
    ".databases": DotCommands._dot_databases,
    ".describe": DotCommands._dot_describe,
    ".mode": DotCommands._dot_mode,
    ".maxrows": DotCommands._dot_maxrows,
    ".open": DotCommands._dot_open,
    ".read": DotCommands._dot_read,
    ".separator": DotCommands._dot_separator,
    ".maxwidth": DotCommands._dot_maxwidth,
    ".changes": DotCommands._dot_changes,
    ".show": DotCommands._dot_show,
    ".print": DotCommands._dot_print,
    ".system": DotCommands._dot_system,
    ".shell": DotCommands._dot_system,
    ".indexes": DotCommands._dot_indexes,
    ".dump": DotCommands._dot_dump,
    ".import": DotCommands._dot_import,
    ".columns": DotCommands._dot_columns,
    ".quit": DotCommands._dot_quit,
    ".exit": DotCommands._dot_quit,
}
