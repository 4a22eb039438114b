"""The watch-validated cache: what a watched read saw, served while its watch has not fired.

Exact, not a TTL cache: an entry is dropped the moment its watch fires (ZooKeeper Programmer's
Guide, "ZooKeeper Watches") or the connection is lost (:meth:`WatchCache.forget_all`: kazoo 2.11
re-sends no watch after a reconnect), and a read that raced with its watch is not stored
(:meth:`WatchCache.lookup` hands out a generation that :meth:`WatchCache.remember` compares). A
bounded age (:attr:`WatchCache.known_max_age`) is added because ACL changes fire no watch.
Absences learned from parent listings (:meth:`WatchCache.learn_absent`) stand in only for the read
before a create, which is conditional anyway.

Under persistent recursive watches (:mod:`zkop.zookeeper.watches`) invalidation runs on kazoo's
reader thread (:meth:`WatchCache.on_event`), in server order, so a value is dropped before the reply
to any later request reaches its caller; that also makes an entry filled from zkop's own write
(:meth:`WatchCache.expect`, :meth:`WatchCache.settle`) exact.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from zkop.zookeeper.actions import OPEN_ACL, AclEntry, Observed

__all__ = ["NO_FILL", "Expectation", "Generation", "WatchCache", "WatchListener"]

log = logging.getLogger(__name__)

#: ``listener(path)`` for a fired watch; runs on kazoo's event thread.
WatchListener = Callable[[str], None]
#: ``(epoch, invalidations of the path)`` when a read began; the read is stored only if unchanged.
Generation = tuple[int, int]
#: :meth:`WatchCache.settle` without a value to remember.
NO_FILL: Any = object()


@dataclass(eq=False)
class Expectation:
    """The notification zkop's own write of ``path`` will cause (:meth:`WatchCache.expect`).

    Attributes:
        path: the znode written.
        event_type: ZooKeeper's ``EventType`` code (1 NodeCreated, 2 NodeDeleted, 3 NodeDataChanged).
        epoch: the cache's epoch when the write was sent.
        seen: a notification of that type arrived (taken as the write's own).
        foreign: another notification for ``path`` arrived meanwhile (someone else changed it).
    """

    path: str
    event_type: int
    epoch: int
    seen: bool = False
    foreign: bool = False


class WatchCache:
    """Znodes remembered by watched reads: path → (monotonic time read, :class:`Observed` or ``None``).

    Thread-safe (one lock). :meth:`on_watch` is the kazoo watcher every cached read arms.

    Attributes:
        known_max_age: seconds a remembered znode is trusted. Data changes fire watches, but ACL
            changes do not (Programmer's Guide: watches are set by getData/exists/getChildren
            only), so a bounded age makes the periodic resync re-read and catch ACL drift.
        absent_max_age: seconds an absence learned from a listing may stand in for a read
            (default 1800). A stale hint costs no correctness: it only stands in for the read
            before a create, which is conditional (``NodeExists`` → read and plan again), and with
            persistent watches a creation notification drops it. So the bound is generous: it must
            outlast a cold sync (``docs/performance.md``, "Scale run").
        cache_hits, absent_hits: reads answered from memory, from a learned absence.
    """

    def __init__(self) -> None:
        self.known_max_age = 300.0
        self.absent_max_age = 1800.0
        self.cache_hits = 0
        self.absent_hits = 0
        self._known: dict[str, tuple[float, Observed | None]] = {}
        self._invalidations: dict[str, int] = {}
        self._epoch = 0  # moved by forget_all/forget_matching: no read begun before is stored
        self._expected: dict[str, list[Expectation]] = {}
        self._absent: dict[str, float] = {}  # path -> monotonic time a listing showed it absent
        self._lock = threading.Lock()
        self._listeners: list[WatchListener] = []

    def __contains__(self, path: object) -> bool:
        """True if ``path`` is remembered (as present or absent)."""
        with self._lock:
            return path in self._known

    def lookup(self, path: str, expected_acl: tuple[AclEntry, ...] | None, *, max_age: float | None,
               watch_absent: bool) -> tuple[bool, Observed | None, Generation]:
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
                return True, None, (0, 0)
            if path in self._known:
                at, cached = self._known[path]
                fresh = time.monotonic() - at < (self.known_max_age if max_age is None else max_age)
                if fresh and (cached is None or cached.acl is not None or (
                    expected_acl == OPEN_ACL and cached.acl_version == 0
                )):
                    self.cache_hits += 1
                    return True, cached, (0, 0)
            return False, None, (self._epoch, self._invalidations.get(path, 0))

    def remember(self, path: str, generation: Generation | None, read_at: float, observed: Observed | None) -> None:
        """Remember ``observed`` (read at monotonic ``read_at``) unless ``path`` changed since ``generation``
        (a watch fired, or the connection was lost: :meth:`forget_all`)."""
        with self._lock:
            if (self._epoch, self._invalidations.get(path, 0)) == generation:
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
            self._forget(path)

    def _forget(self, path: str) -> None:
        self._known.pop(path, None)
        self._absent.pop(path, None)
        self._invalidations[path] = self._invalidations.get(path, 0) + 1

    def forget_all(self) -> None:
        """Drop everything remembered: the connection or the session is gone, and every watch with it.

        Also no read or write begun before is stored afterwards (the epoch moves), and pending
        :class:`Expectation` s can no longer fill anything.
        """
        self.forget_matching(lambda _: True)

    def forget_matching(self, drop: Callable[[str], bool]) -> None:
        """Drop every remembered path for which ``drop(path)`` is true (a watch that covered it was
        removed), and move the epoch so that no read begun before is stored."""
        with self._lock:
            self._epoch += 1
            for path in [p for p in self._known if drop(p)]:
                self._forget(path)
            for path in [p for p in self._absent if drop(p)]:
                self._absent.pop(path, None)

    # --- persistent watches: invalidation on kazoo's reader thread --------------------------------

    def expect(self, path: str, event_type: int) -> Expectation:
        """Note that zkop is about to write ``path``, which will cause a notification of ``event_type``.

        Register before the write is sent; :meth:`settle` it once the reply is in (or the write failed).
        """
        with self._lock:
            expectation = Expectation(path, event_type, self._epoch)
            self._expected.setdefault(path, []).append(expectation)
            return expectation

    def settle(self, expectation: Expectation, value: Observed | None = NO_FILL) -> bool:
        """Withdraw ``expectation``; remember ``value`` (what the write left) if that is exact.

        Exact when the write's own notification arrived, nothing else changed the path since it was
        registered, and the connection was not lost (same epoch): then no notification is pending
        for the path, and the next one drops the value again. ``NO_FILL`` only withdraws.

        Returns:
            True if a notification was taken as the write's own (a failed write must then wake
            the listeners itself: that notification was someone else's).
        """
        with self._lock:
            waiting = self._expected.get(expectation.path)
            if waiting is not None:
                if expectation in waiting:
                    waiting.remove(expectation)
                if not waiting:
                    del self._expected[expectation.path]
            if (value is not NO_FILL and expectation.seen and not expectation.foreign
                    and expectation.epoch == self._epoch):
                self._known[expectation.path] = (time.monotonic(), value)
            return expectation.seen

    def on_event(self, path: str, event_type: int) -> tuple[bool, bool]:
        """A notification for ``path`` arrived (kazoo's reader thread, before any later reply): drop it.

        Returns:
            ``(own, was_known)``: ``own`` if it is the notification of zkop's own pending write
            (:meth:`expect`: nobody needs waking); ``was_known`` if ``path`` was remembered.
        """
        with self._lock:
            waiting = self._expected.get(path)
            own = False
            if waiting:
                for expectation in waiting:
                    if not expectation.seen and expectation.event_type == event_type:
                        expectation.seen = own = True
                        break
                if not own:
                    for expectation in waiting:
                        expectation.foreign = True
            was_known = path in self._known
            self._forget(path)
            return own, was_known

    def notify(self, path: str) -> None:
        """Tell the listeners that ``path`` changed (already forgotten); kazoo's event thread."""
        for listener in list(self._listeners):
            try:
                listener(path)
            except Exception:
                log.exception("watch listener failed")

    def add_listener(self, listener: WatchListener) -> None:
        """Call ``listener(path)`` whenever a watch armed through :meth:`on_watch` fires.

        Runs on kazoo's event thread: the listener must not block or call ZooKeeper
        (enqueue a key and return).
        """
        self._listeners.append(listener)

    def on_watch(self, event: Any) -> None:
        """kazoo watcher: a watch on ``event.path`` fired; forget it and tell the listeners.

        kazoo fires every one-shot watcher with a path-less ``NONE`` event when the connection is
        lost (``KazooClient._reset_watchers``); that is handled by :meth:`forget_all`, not here.
        """
        if event.path is None:
            return
        path = str(event.path)
        self.forget(path)
        self.notify(path)
