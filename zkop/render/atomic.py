"""One file replaced atomically: a temporary file in the same directory, ``fsync``, ``rename``, ``fsync`` of the
directory, so that a reader opens the old content or the new, never half a file, even across a crash."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["write_file_atomically"]


def write_file_atomically(path: str | os.PathLike[str], content: bytes, *, mode: int = 0o644) -> bool:
    """Make the file ``path`` hold exactly ``content`` (its directory is created if missing).

    Returns:
        False if it already held exactly ``content`` (nothing written), else True.

    Raises:
        OSError: the directory or file cannot be written (the temporary file is removed; ``path`` is unchanged).
    """
    target = Path(path)
    with contextlib.suppress(FileNotFoundError, IsADirectoryError, NotADirectoryError):
        if target.is_file() and target.read_bytes() == content:
            return False
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(content)
            out.flush()
            os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    directory = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return True
