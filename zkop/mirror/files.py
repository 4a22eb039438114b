"""Write a set of files into a directory atomically, the way the kubelet updates a ConfigMap volume.

Kubernetes' ``AtomicWriter.Write`` (``pkg/volume/util/atomic_writer.go``): the payload goes into a
new hidden directory ``..<timestamp>``; a symlink ``..data_tmp`` to it is renamed over ``..data``
(``rename(2)`` is atomic), and every user-visible file ``D/<key>`` is a symlink to ``..data/<key>``.
A reader that opens files through ``D/`` therefore sees either the old set or the new one, never
a mix; the previous timestamped directory is removed after the swap, and user-visible links of
keys that went away are removed last.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

__all__ = ["DATA_DIR", "write_atomically"]

#: The symlink to the current payload directory (``AtomicWriter``'s ``dataDirName``).
DATA_DIR = "..data"
_DATA_TMP = "..data_tmp"


def _current(directory: Path) -> dict[str, bytes] | None:
    try:
        target = directory / os.readlink(directory / DATA_DIR)
    except OSError:
        return None
    return {p.name: p.read_bytes() for p in target.iterdir()} if target.is_dir() else None


def write_atomically(directory: str | os.PathLike[str], files: Mapping[str, bytes], *, mode: int = 0o644) -> bool:
    """Make ``directory`` hold exactly ``files`` (flat names: ConfigMap keys), in one atomic step.

    Returns:
        False if the directory already held exactly these files (nothing written), else True.

    Raises:
        OSError: the directory cannot be written; ValueError: a name with ``/`` or starting with ``..``.
    """
    root = Path(directory)
    for name in files:
        if "/" in name or name.startswith("..") or name in ("", "."):
            raise ValueError(f"file name {name!r}: not a flat name")
    root.mkdir(parents=True, exist_ok=True)
    if _current(root) == dict(files):
        return False
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime())
    payload = Path(tempfile.mkdtemp(prefix=stamp, dir=root))
    for name, content in files.items():
        (payload / name).write_bytes(content)
        os.chmod(payload / name, mode)
    os.chmod(payload, 0o755)
    tmp = root / _DATA_TMP
    if tmp.is_symlink():
        tmp.unlink()
    os.symlink(payload.name, tmp)
    os.rename(tmp, root / DATA_DIR)
    for name in files:
        link = root / name
        if not link.is_symlink():
            os.symlink(f"{DATA_DIR}/{name}", link)
    for entry in root.iterdir():
        if entry.name.startswith(".."):
            if entry.name != payload.name and not entry.is_symlink() and entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)  # the previous payload (and any left by a crash)
        elif entry.is_symlink() and entry.name not in files:
            entry.unlink()
    return True
