"""How a mirrored znode's path becomes a ConfigMap key (pure).

The key of a znode is its path relative to the mirror's root with ``/`` written as ``.``; a byte
outside ``[-_a-zA-Z0-9.]`` (in the UTF-8 of the name) is written ``_XX`` (two upper-case hex
digits). So ``/legacy/app/db/url`` mirrored from ``/legacy/app`` is ``db.url``, and ``a b`` is
``a_20b``. A non-recursive mirror's one key is the root's last name (or ``spec.key``).

Names made of ``[-a-zA-Z0-9]`` map one to one; ``.`` in names and escapes can make two paths
meet (``a/b`` and ``a.b`` are both ``a.b``): such a key is a *collision*, reported and left out
for every path that maps to it, never merged. A key longer than 253 characters, or ``.``,
``..`` or starting with ``..`` (refused by kube-apiserver's ``IsConfigMapKey`` and by the
kubelet's ``AtomicWriter``) is reported too.
"""

from __future__ import annotations

import re

__all__ = ["MAX_KEY_LENGTH", "key_for", "key_problem"]

#: ``validation.DNS1123SubdomainMaxLength``, the longest ConfigMap key.
MAX_KEY_LENGTH = 253

_KEEP = re.compile(rb"[-_a-zA-Z0-9.]")


def _escape(name: str) -> str:
    return "".join(chr(b) if _KEEP.fullmatch(bytes([b])) and b != ord("_") else f"_{b:02X}"
                   for b in name.encode("utf-8"))


def key_for(relative: str) -> str:
    """The ConfigMap key of a znode ``relative`` to the mirror's root (``a/b`` → ``a.b``; no leading ``/``).

    ``_`` itself is escaped (``_5F``) so that an escape never reads as a name's own characters.
    """
    return ".".join(_escape(part) for part in relative.split("/"))


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot be a ConfigMap key (``IsConfigMapKey``), or ``None``."""
    if not key:
        return "the key is empty"
    if len(key) > MAX_KEY_LENGTH:
        return f"the key is {len(key)} characters long, more than {MAX_KEY_LENGTH}"
    if key in (".", "..") or key.startswith(".."):
        return f"the key {key!r} is '.', '..' or starts with '..'"
    return None
