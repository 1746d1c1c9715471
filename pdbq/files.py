"""Every file pdbq writes goes through one atomic writer: the content goes to a temporary file in
the target's folder, is flushed to disk (fsync), and is renamed over the target. A crash, a kill
or an error mid-write leaves the previous file as it was (and at worst a stray temporary file,
named ``.<name>.pdbq-tmp-<random>``, never a truncated target).

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> atomic_write_text(d / "a.txt", "one")
>>> (d / "a.txt").read_text()
'one'
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

from pdbq.errors import PdbqError

__all__ = ["atomic_path", "atomic_write_text", "checked_path", "TMP_MARK"]

TMP_MARK = ".pdbq-tmp-"


def checked_path(path: str | os.PathLike[str], what: str = "file") -> Path:
    """``path`` as a `Path`, or a `PdbqError` for a name the operating system cannot take (a NUL
    byte, an empty name)."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text or "\x00" in text:
        raise PdbqError(f"{what} name {text!r} is not a valid file name" + (" (it holds a NUL byte)" if text else ""))
    return Path(text)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # some systems cannot open a folder; the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], what: str = "file") -> Iterator[Path]:
    """Yield a temporary path in ``path``'s folder (with ``path``'s suffix, so writers that go
    by the extension still do); when the block ends normally the file written there is synced
    and renamed over ``path``; on an error it is removed and ``path`` is untouched. A missing
    folder is a `PdbqError` before anything is written."""
    target = checked_path(path, what)
    folder = target.parent if str(target.parent) else Path(".")
    try:
        folder_ok = folder.is_dir()
    except OSError as exc:  # a name too long, a permission
        raise PdbqError(f"cannot write {what} '{target}': {exc.strerror or exc}") from None
    if not folder_ok:
        raise PdbqError(f"cannot write {what} '{target}': the folder '{folder}' does not exist")
    tmp = folder / f".{target.stem[:64]}{TMP_MARK}{uuid.uuid4().hex[:12]}{target.suffix[:16]}"
    try:
        yield tmp
        try:
            if tmp.is_file():
                with open(tmp, "rb+") as f:
                    os.fsync(f.fileno())
            os.replace(tmp, target)
        except OSError as exc:
            raise PdbqError(f"cannot write {what} '{target}': {exc.strerror or exc}") from None
        _fsync_dir(folder)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str, what: str = "file") -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (`atomic_path`)."""
    with atomic_path(path, what) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
