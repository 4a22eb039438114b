"""What the mirror read under a root, as plain data: :class:`Snapshot` of :class:`Znode` (filled by
:class:`zkop.mirror.tree.TreeReader`, decided over by :func:`zkop.mirror.decide.decide`, which imports no reader).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Snapshot", "Znode"]


@dataclass(frozen=True)
class Znode:
    """A znode read: its ``path``, the path ``relative`` to the root (``""`` for the root) and its ``data``."""

    path: str
    relative: str
    data: bytes


@dataclass(frozen=True)
class Snapshot:
    """A root read at one moment: whether it exists, the znodes mirrored, the paths ZooKeeper refused (NoAuth);
    ``exceeded`` says which limit of :meth:`zkop.mirror.tree.TreeReader.snapshot` stopped the read (then ``nodes``
    is incomplete)."""

    root_exists: bool
    nodes: tuple[Znode, ...]
    unreadable: tuple[str, ...] = ()
    exceeded: str | None = None
