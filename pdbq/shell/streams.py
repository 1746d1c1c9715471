"""Where the shell's text goes: writing to streams that may not encode every character,
terminal detection, error texts, and small layouts shared by the dot commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from pdbq.errors import PdbqError

__all__ = ["ASCII_BOX", "write", "isatty", "can_encode", "unquote", "open_output", "error_text", "columns_layout"]

ASCII_BOX = str.maketrans({
    "─": "-", "│": "|", "┌": "+", "┬": "+", "┐": "+", "├": "+", "┼": "+", "┤": "+",
    "└": "+", "┴": "+", "┘": "+", "…": "~", "·": ".",
})


def open_output(path: str) -> TextIO:
    return open(Path(path).expanduser(), "w", encoding="utf-8")  # noqa: SIM115 - closed by .output/.once


def write(stream: Any, text: str) -> None:
    try:
        stream.write(text)
    except UnicodeEncodeError:
        # A terminal or pipe that cannot show some characters: show '?' rather than fail.
        encoding = getattr(stream, "encoding", None) or "ascii"
        stream.write(text.encode(encoding, "replace").decode(encoding))
    stream.flush()


def isatty(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # closed stream
        return False


def can_encode(stream: Any, sample: str) -> bool:
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        sample.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text



def error_text(exc: BaseException) -> str:
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



def columns_layout(names: list[str], width: int) -> str:
    """Names in as many columns as fit the terminal, filled down then across (like ls)."""
    col_w = max(len(n) for n in names) + 2
    ncols = max(1, width // col_w)
    nrows = -(-len(names) // ncols)
    lines = []
    for r in range(nrows):
        cells = [names[c * nrows + r] for c in range(ncols) if c * nrows + r < len(names)]
        lines.append("".join(n.ljust(col_w) for n in cells).rstrip())
    return "\n".join(lines)

