"""The `pdbq` interactive shell: the read-eval-print loop and its dot commands (`repl`),
completion, syntax highlighting; tables are drawn by `pdbq.answers.render`."""

from pdbq.shell.repl import Shell, build_arg_parser, main

__all__ = ["Shell", "build_arg_parser", "main"]
