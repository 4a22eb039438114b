"""Children listings remembered while their child watch has not fired: a subtree walked again reads only what changed.

Shared by the readers that walk a subtree and keep it watched (:class:`zkop.mirror.tree.TreeReader`, the
ZooKeeperConfigTree controller's listings). A fired watch forgets its path's listing and tells ``on_change``; a
listing read while a watch on its path fired (or while a new session began) is not remembered, so a stale one never
outlives the change that made it stale.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from zkop.zookeeper.reads import Listing

__all__ = ["ListsWatched", "WatchedListings"]


class ListsWatched(Protocol):
    """What :class:`WatchedListings` needs of an adapter
    (:meth:`zkop.zookeeper.adapter.ZooKeeperAdapter.list_watched`)."""

    def list_watched(self, path: str, on_change: Callable[[str], None]) -> Listing | None: ...


class WatchedListings:
    """The watched children listings of ``zookeeper``, remembered until their watch fires.

    Args:
        zookeeper: lists a path with a child watch.
        on_change: called with the path of every fired watch armed here (kazoo's event thread: it must only
            enqueue).
    """

    def __init__(self, zookeeper: ListsWatched, on_change: Callable[[str], None]) -> None:
        self.zookeeper = zookeeper
        self.on_change = on_change
        self._lock = threading.Lock()
        self._listings: dict[str, Listing | None] = {}
        self._generations: dict[str, int] = {}
        self._epoch = 0

    def forget_all(self) -> None:
        """Drop every remembered listing (a new session: every watch is gone)."""
        with self._lock:
            self._epoch += 1
            self._listings.clear()

    def _fired(self, path: str) -> None:
        with self._lock:
            self._generations[path] = self._generations.get(path, 0) + 1
            self._listings.pop(path, None)
        self.on_change(path)

    def listing(self, path: str) -> Listing | None:
        """``path``'s children and creation zxid (``None``: absent), from memory while its watch has not fired.

        Raises:
            what :meth:`ListsWatched.list_watched` raises (ZooKeeperUnavailable, ZooKeeperNoAuth, ...).
        """
        with self._lock:
            if path in self._listings:
                return self._listings[path]
            generation = (self._epoch, self._generations.get(path, 0))
        listing = self.zookeeper.list_watched(path, self._fired)
        with self._lock:
            if (self._epoch, self._generations.get(path, 0)) == generation:
                self._listings[path] = listing
        return listing
