"""Read a znode or a subtree for a mirror, read-only, with every change watched.

:class:`ReadOnlyZooKeeper` is the adapter surface the mirror and ``zkop fetch`` get (no ``execute``).
Data comes from watched reads (the adapter's watch-validated cache, under
:meth:`~zkop.zookeeper.adapter.ZooKeeperAdapter.watch_subtrees` with ``whole``); children from
:meth:`~zkop.zookeeper.adapter.ZooKeeperAdapter.list_watched`, remembered here until the child watch
fires by the same exact rule. So a pass after one change reads what changed, not the whole subtree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from zkop.mirror.snapshot import Snapshot, Znode
from zkop.zookeeper.actions import Observed
from zkop.zookeeper.adapter import Listing, ZooKeeperNoAuth
from zkop.zookeeper.listings import WatchedListings
from zkop.zookeeper.paths import is_within

__all__ = ["NO_LIMITS", "Limits", "ReadOnlyZooKeeper", "Snapshot", "TreeReader", "Znode"]


class ReadOnlyZooKeeper(Protocol):
    """The reads the mirror may make (:class:`~zkop.zookeeper.adapter.ZooKeeperAdapter` has them)."""

    def read(self, path: str, expected_acl: Any = ..., *, watch: bool = False) -> Observed | None: ...

    def list_watched(self, path: str, on_change: Callable[[str], None]) -> Listing | None: ...


@dataclass(frozen=True)
class Limits:
    """What one mirror may have zkop read: at most ``znodes`` znodes and ``data_bytes`` bytes of data (``0``: no
    limit), so that one object cannot exhaust zkop's memory (``--mirror-max-znodes``, ``--mirror-max-bytes``)."""

    znodes: int = 0
    data_bytes: int = 0


#: No limit (tests, ``zkop fetch``: the reader's own process).
NO_LIMITS = Limits()


def _join(parent: str, name: str) -> str:
    return f"{parent.rstrip('/')}/{name}"


class TreeReader:
    """Watched reads of roots; ``on_change(path)`` runs on kazoo's thread for every fired child watch.

    Thread-safe. A recursive read mirrors every znode below the root that holds data or has no
    children (an empty interior znode is structure, not a value); the root itself only when not
    recursive. ``/zookeeper`` is never read.
    """

    def __init__(self, zookeeper: ReadOnlyZooKeeper, on_change: Callable[[str], None]) -> None:
        self.zookeeper = zookeeper
        self.on_change = on_change
        self._listings = WatchedListings(zookeeper, on_change)

    def forget_all(self) -> None:
        """Drop every remembered listing (a new session: every watch is gone)."""
        self._listings.forget_all()

    def _list(self, path: str) -> Listing | None:
        return self._listings.listing(path)

    def snapshot(self, root: str, *, recursive: bool, exclude: tuple[str, ...] = (),
                 limits: Limits = NO_LIMITS) -> Snapshot:
        """Read ``root`` (and, if ``recursive``, its subtree but the subtrees ``exclude`` names), arming the watches;
        a read that reaches one of ``limits`` stops there (:attr:`Snapshot.exceeded`).

        Raises:
            ZooKeeperUnavailable: the session is not connected (the caller retries).
        """
        if not recursive:
            try:
                observed = self.zookeeper.read(root, watch=True)
            except ZooKeeperNoAuth:
                return Snapshot(True, (), (root,))
            if observed is None:
                return Snapshot(False, ())
            return Snapshot(True, (Znode(root, "", observed.data),))
        nodes: list[Znode] = []
        unreadable: list[str] = []
        visited = data_bytes = 0
        try:
            top = self._list(root)
        except ZooKeeperNoAuth:
            return Snapshot(True, (), (root,))
        if top is None:
            return Snapshot(False, ())
        pending = [(_join(root, c), c) for c in top.children if not (root == "/" and c == "zookeeper")]
        while pending:
            path, relative = pending.pop(0)
            if exclude and any(is_within(path, excluded) for excluded in exclude):
                continue  # a reserved root (zkop.feature.gate): never read for an object
            try:
                listing = self._list(path)
                observed = self.zookeeper.read(path, watch=True) if listing is not None else None
            except ZooKeeperNoAuth:
                unreadable.append(path)
                continue
            if listing is None or observed is None:
                continue  # deleted while being read; its parent's child watch brings the next pass
            visited += 1
            data_bytes += len(observed.data)
            if limits.znodes and visited > limits.znodes:
                return Snapshot(True, (), (), exceeded=f"more than {limits.znodes} znodes below {root} "
                                                       "(--mirror-max-znodes)")
            if limits.data_bytes and data_bytes > limits.data_bytes:
                return Snapshot(True, (), (), exceeded=f"more than {limits.data_bytes} bytes of data below {root} "
                                                       "(--mirror-max-bytes)")
            if observed.data or not listing.children:
                nodes.append(Znode(path, relative, observed.data))
            pending.extend((_join(path, c), f"{relative}/{c}") for c in listing.children)
        return Snapshot(True, tuple(sorted(nodes, key=lambda n: n.path)), tuple(sorted(unreadable)))
