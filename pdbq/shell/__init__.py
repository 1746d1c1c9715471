"""The `pdbq` interactive shell: the command line (`cli`), the read-eval-print loop (`repl`), its dot
commands (`dot_commands`), the database it opens (`session`), output streams (`streams`),
completion and syntax highlighting; tables are drawn by `pdbq.answers.render`."""

from pdbq.shell.cli import build_arg_parser, main, run


def __getattr__(name: str):
    # the shell's statement loop (and the engine under it) is imported when a session opens,
    # not for ``pdbq --help``
    if name == "Shell":
        from pdbq.shell.repl import Shell  # noqa: PLC0415

        return Shell
    raise AttributeError(f"module 'pdbq.shell' has no attribute {name!r}")

__all__ = ["Shell", "build_arg_parser", "main", "run"]
