"""The ``pdbq`` command line: arguments, and which input a session reads (``-c``, ``-f``, a
terminal, or piped standard input).

    pdbq [DATABASE] [-c SQL] [-f FILE] [--seed N] [--no-progress] [--bail] [--readonly]
    pdbq dedupe ...
    pdbq warm-up [--jobs N] [--only TASK,...]

Exit codes: 0 success; 1 a statement or dot command failed; 2 bad arguments or a database that
cannot be opened; 130 interrupted (Ctrl-C while running a script).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, NoReturn

from pdbq.errors import PdbqError
from pdbq.shell.session import version_text
from pdbq.shell.streams import error_text, isatty

__all__ = ["build_arg_parser", "main"]


def build_arg_parser() -> argparse.ArgumentParser:
    """The command-line interface of ``pdbq``."""
    p = argparse.ArgumentParser(
        prog="pdbq",
        usage="%(prog)s [DATABASE] [-c SQL] [-f FILE] [options]\n       %(prog)s dedupe INPUT --id COL --fields A,B,... [options]"
              "\n       %(prog)s warm-up [--jobs N]",
        description="pdbq: a probabilistic database on DuckDB. Without -c/-f it reads statements "
        "from the terminal (interactive shell) or from standard input.",
        epilog="Entity resolution: 'pdbq dedupe INPUT --id COL --fields A,B,...' clusters the records "
        "of a CSV/Parquet file or table that refer to one entity ('pdbq dedupe --help' for its options). "
        "'pdbq warm-up' compiles pdbq's kernels for this machine ahead of the first query. "
        "Exit status: 0 ok, 1 a statement failed, 2 usage error or database not opened, 130 interrupted.",
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
    p.add_argument("--allow-external", action="store_true",
                   help="let SQL (pdbq_set, also from the file's views) set options that connect outside "
                        "this process (the Dask scheduler)")
    p.add_argument("--version", action="version", version=version_text())
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


def run() -> NoReturn:
    """The ``pdbq`` command: `main`, then leave without tearing the interpreter down.

    Python's teardown of the engine's modules (numba's, LLVM's, DuckDB's) costs about 0.35 CPU
    seconds after the last answer is printed, a sixth of a short script's run. `main` has closed
    the database by then; exit handlers still run and the output is flushed first."""
    code = main()
    _exit_now(code)


def _exit_now(code: int) -> NoReturn:
    import atexit  # noqa: PLC0415

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed pipe or stream: nothing more can reach it
    os._exit(code if isinstance(code, int) else 1)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``pdbq`` console script; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["dedupe"]:  # the sub-command lives in its own module
        from pdbq.linkage.cli import main as dedupe_main

        return dedupe_main(argv[1:])
    if argv[:1] == ["warm-up"]:
        from pdbq.shell.warm import main as warm_main

        return warm_main(argv[1:])
    args = build_arg_parser().parse_args(argv)
    # the engine is imported once the arguments are read: --help and usage errors start fast
    from pdbq.shell.repl import Shell  # noqa: PLC0415
    from pdbq.shell.session import open_database  # noqa: PLC0415

    actions: list[tuple[str, str]] = args.actions or []
    interactive = not actions and isatty(sys.stdin) and isatty(sys.stdout)
    try:
        db = open_database(args.database, read_only=args.readonly, seed=args.seed, allow_external=args.allow_external)
    except Exception as exc:  # noqa: BLE001
        sys.stderr.write(f"{error_text(exc)}\n")
        return 2
    try:
        shell = Shell(
            db,
            progress=not args.no_progress,
            bail=args.bail,
            seed=args.seed,
            read_only=args.readonly,
            interactive=interactive,
            allow_external=args.allow_external,
        )
    except PdbqError as exc:
        sys.stderr.write(f"{error_text(exc)}\n")
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
            shell._close_output()
        except OSError:
            pass
        try:
            shell.db.close()
        except Exception:  # noqa: BLE001
            pass