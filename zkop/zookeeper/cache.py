"""The watch-validated cache: what a watched read saw, served while its watch has not fired.

A watched read arms a ZooKeeper watch on its path (a data watch, or an exists watch if the node
is absent). Until that watch fires — the node changed, was created or deleted (ZooKeeper
Programmer's Guide, "ZooKeeper Watches") — or the session is lost, the result is still what
the server holds, so the next watched read may be answered from memory. Exact, not a TTL
cache: an entry is dropped the moment its watch fires, and a read that raced with the watch
(:meth:`WatchCache.generation` taken before the read, compared in :meth:`WatchCache.remember`)
is not stored. A bounded age (:attr:`WatchCache.known_max_age`) is added on top because ACL
changes fire no watch.

Hints from parent listings (:meth:`WatchCache.learn_absent`) are kept apart: they stand in
only for a read that precedes a create, which is conditional on absence anyway.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from zkop.zookeeper.actions import OPEN_ACL, AclEntry, Observed

__all__ = ["WatchCache", "WatchListener"]

log = logging.getLogger(__name__)

#: ``listener(path)`` for a fired watch; runs on kazoo's event thread.
WatchListener = Callable[[str], None]


class WatchCache:
    """Znodes remembered by watched reads: path → (monotonic time read, :class:`Observed` or ``None``).

    Thread-safe (one lock). :meth:`on_watch` is the kazoo watcher every cached read arms.

    Attributes:
        known_max_age: seconds a remembered znode is trusted. Data changes fire watches, but ACL
            changes do not (Programmer's Guide: watches are set by getData/exists/getChildren
            only), so a bounded age makes the periodic resync re-read and catch ACL drift.
        absent_max_age: seconds an absence learned from a listing may stand in for a read.
        cache_hits, absent_hits: reads answered from memory, from a learned absence.
    """

    def __init__(self) -> None:
        self.known_max_age = 300.0
        self.absent_max_age = 120.0
        self.cache_hits = 0
        self.absent_hits = 0
        self._known: dict[str, tuple[float, Observed | None]] = {}
        self._invalidations: dict[str, int] = {}
        self._absent: dict[str, float] = {}  # path -> monotonic time a listing showed it absent
        self._lock = threading.Lock()
        self._listeners: list[WatchListener] = []

    def __contains__(self, path: object) -> bool:
        """True if ``path`` is remembered (as present or absent)."""
        with self._lock:
            return path in self._known

    def lookup(self, path: str, expected_acl: tuple[AclEntry, ...] | None, *, max_age: float | None,
               watch_absent: bool) -> tuple[bool, Observed | None, int]:
        """Answer a watched read of ``path`` from memory if possible.

        A remembered node is served if younger than ``max_age`` seconds (default
        :attr:`known_max_age`) and its ACL is known or not needed (the open ACL expected and
        never changed). With ``watch_absent=False`` a fresh learned absence is served, once.

        Returns:
            ``(hit, value, generation)``: on a hit ``value`` is the answer; on a miss
            ``generation`` is to be handed to :meth:`remember` with the result of the read.
        """
        with self._lock:
            learned = self._absent.pop(path, None) if not watch_absent else None
            if learned is not None and time.monotonic() - learned < self.absent_max_age:
                self.absent_hits += 1
                return True, None, 0
            if path in self._known:
                at, cached = self._known[path]
                fresh = time.monotonic() - at < (self.known_max_age if max_age is None else max_age)
                if fresh and (cached is None or cached.acl is not None or (
                    expected_acl == OPEN_ACL and cached.acl_version == 0
                )):
                    self.cache_hits += 1
                    return True, cached, 0
            return False, None, self._invalidations.get(path, 0)

    def remember(self, path: str, generation: int | None, read_at: float, observed: Observed | None) -> None:
        """Remember ``observed`` (read at monotonic ``read_at``) unless ``path`` changed since ``generation``."""
        with self._lock:
            if self._invalidations.get(path, 0) == generation:
                self._known[path] = (read_at, observed)

    def learn_absent(self, paths: Iterable[str], learned_at: float) -> None:
        """Note ``paths`` as absent at monotonic ``learned_at`` (not for paths already remembered)."""
        with self._lock:
            for path in paths:
                if path not in self._known:
                    self._absent[path] = learned_at

    def forget(self, path: str) -> None:
        """Drop what is remembered about ``path`` (the next watched read goes to ZooKeeper)."""
        with self._lock:
            self._known.pop(path, None)
            self._absent.pop(path, None)
            self._invalidations[path] = self._invalidations.get(path, 0) + 1

    def forget_all(self) -> None:
        """Drop everything remembered (after a session loss every watch is gone)."""
        with self._lock:
            for path in self._known:
                self._invalidations[path] = self._invalidations.get(path, 0) + 1
            self._known.clear()
            self._absent.clear()

    def add_listener(self, listener: WatchListener) -> None:
        """Call ``listener(path)`` whenever a watch armed through :meth:`on_watch` fires.

        Runs on kazoo's event thread: the listener must not block or call ZooKeeper
        (enqueue a key and return).
        """
        self._listeners.append(listener)

    def on_watch(self, event: Any) -> None:
        """kazoo watcher: a watch on ``event.path`` fired; forget it and tell the listeners."""
        path = str(event.path)
        self.forget(path)
        for listener in list(self._listeners):
            try:
                listener(path)
            except Exception:
                log.exception("watch listener failed")
