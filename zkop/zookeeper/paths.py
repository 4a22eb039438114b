"""ZooKeeper path rules, checked before kazoo ever sees a path.

The rules are the server's, from ``org.apache.zookeeper.common.PathUtils.validatePath``
(ZooKeeper 3.8) and the Programmer's Guide, "ZNodes": a path is absolute,
has no trailing ``/`` (except the root), no empty, ``.`` or ``..`` segment, and
no NUL or other forbidden code point: U+0001–U+001F, U+007F–U+009F,
U+D800–U+F8FF and U+FFF0–U+FFFF. Java strings are UTF-16, so a code point above
U+FFFF is a surrogate pair, which falls in U+D800–U+DFFF and is rejected too.
``/zookeeper`` is reserved for the server.

kazoo normalises some bad paths silently (it collapses ``//`` and drops a
trailing ``/``), which would make zkop write a different znode than the one
declared; so every path is validated here first.
"""

from __future__ import annotations

import re

__all__ = ["InvalidPath", "is_within", "parent_paths", "validate_path"]

RESERVED_ROOT = "/zookeeper"


class InvalidPath(ValueError):
    """A path breaks one of ZooKeeper's path rules; ``str(err)`` names the rule."""


#: The forbidden code points above, as one character class (searched in C, not a call per character).
_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\U0010ffff]")


def validate_path(path: str, *, allow_reserved: bool = False) -> str:
    """Return ``path`` unchanged if ZooKeeper would accept it as a znode to manage.

    Args:
        path: the znode path, e.g. ``/app/features/x/enabled``.
        allow_reserved: accept paths under ``/zookeeper`` (never for user data).

    Raises:
        InvalidPath: with a message naming the broken rule.
    """
    if not isinstance(path, str) or path == "":
        raise InvalidPath("path must be a non-empty string")
    if not path.startswith("/"):
        raise InvalidPath(f"path must be absolute (start with '/'): {path!r}")
    if path == "/":
        raise InvalidPath("the root znode '/' cannot be managed")
    if path.endswith("/"):
        raise InvalidPath(f"path must not end with '/': {path!r}")
    forbidden = _FORBIDDEN.search(path)
    if forbidden is not None:
        raise InvalidPath(f"path contains a forbidden character U+{ord(forbidden.group()):04X} "
                          f"at index {forbidden.start()}")
    for segment in path[1:].split("/"):
        if segment == "":
            raise InvalidPath(f"path contains an empty segment ('//'): {path!r}")
        if segment in (".", ".."):
            raise InvalidPath(f"path contains a relative segment {segment!r}: {path!r}")
    if not allow_reserved and is_within(path, RESERVED_ROOT):
        raise InvalidPath(f"paths under {RESERVED_ROOT} are reserved for the ZooKeeper server")
    return path


def is_within(path: str, root: str) -> bool:
    """True if ``path`` is ``root`` or below it (segment-wise, so ``/ab`` is not within ``/a``)."""
    if root == "/":
        return True
    return path == root or path.startswith(root.rstrip("/") + "/")


def parent_paths(path: str) -> list[str]:
    """The ancestors of a valid path, outermost first, root excluded: ``/a/b/c`` → ``['/a', '/a/b']``."""
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]
