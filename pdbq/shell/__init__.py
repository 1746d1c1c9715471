"""The `pdbq` interactive shell: the command line (`cli`), the read-eval-print loop (`repl`), its dot
commands (`dot_commands`), the database it opens (`session`), output streams (`streams`),
completion and syntax highlighting; tables are drawn by `pdbq.answers.render`."""

from pdbq.shell.cli import build_arg_parser, main
from pdbq.shell.repl import Shell

__all__ = ["Shell", "build_arg_parser", "main"]
