"""Parent znodes created once: what the writer knows of the parents it needs, shared by every worker.

A create whose parent is missing fails (``NoNode``); ZooKeeper has no "create with parents". Without
memory, each of eight workers creating the first objects under a new parent would find it missing, and
each would send a create for every ancestor (most of them answered ``NodeExists``) -- a cold start of
2,000 objects under 50 new parents cost 1.24 requests per object instead of 1 (issue #26). This module
keeps, per adapter:

* **parents known to exist**: created by this adapter, found existing (``NodeExists``), or the parent
  of a node a write created -- never asked for again;
* **parents known to be absent**: learned by the cold start's one ``exists`` per parent
  (:meth:`~zkop.zookeeper.reads.Reads.learn_absent`), so the first create under one goes after its
  parents instead of failing first;
* **parents being created**: one worker sends the create, the others racing for the same parent wait
  for its answer instead of sending their own.

Knowledge is a hint, never trusted over ZooKeeper. A write that fails ``NoNode`` although every parent
was known to exist when it was sent (:meth:`Parents.known_of`) drops them all (someone deleted one) and
creates them again; when some parent was not known the failure is put down to it, and the known ones
are kept (another worker has just created them). A parent create that fails ``NoNode`` (an ancestor
known to exist is gone) drops every ancestor and creates them from the top. At most :data:`MAX_KNOWN` parents
are remembered (then the set starts again): a bound, not an expected size.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

__all__ = ["MAX_KNOWN", "Parents"]

#: Parents remembered as existing before the set is cleared (bounds the memory of a huge, churning tree).
MAX_KNOWN = 100_000


class Parents:
    """What one adapter knows of parent znodes; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: set[str] = set()
        self._absent: set[str] = set()
        self._creating: dict[str, threading.Event] = {}

    def exist(self, paths: Iterable[str]) -> None:
        """Note ``paths`` as existing (created, found, or the parents of a node just created)."""
        with self._lock:
            for path in paths:
                if len(self._known) >= MAX_KNOWN:
                    self._known.clear()
                self._known.add(path)
                self._absent.discard(path)

    def absent(self, paths: Iterable[str]) -> None:
        """Note ``paths`` as absent (a read found none)."""
        with self._lock:
            for path in paths:
                self._known.discard(path)
                self._absent.add(path)

    def forget(self, paths: Iterable[str]) -> None:
        """Drop what is known of ``paths`` (a create under them failed ``NoNode``)."""
        with self._lock:
            for path in paths:
                self._known.discard(path)
                self._absent.discard(path)

    def known_of(self, paths: Iterable[str]) -> set[str]:
        """Those of ``paths`` known to exist now (before a write, to tell afterwards what was wrongly known)."""
        with self._lock:
            return {path for path in paths if path in self._known}

    def missing_known(self, paths: Iterable[str]) -> bool:
        """True if one of ``paths`` is known to be absent or being created: create them before the write."""
        with self._lock:
            return any(path in self._absent or path in self._creating for path in paths)

    def ensure(self, paths: Iterable[str], create: Callable[[str], bool], timeout: float) -> list[str]:
        """Make sure each of ``paths`` (outermost first) exists, sending at most one create per parent.

        A parent known to exist is skipped; one another thread is creating is waited for (at most
        ``timeout`` seconds, then created here too); any other is created with ``create(path)``, which
        returns True if it created the node and False if it existed already, and raises on any other
        error (then the path is neither known nor claimed any more, and the error propagates).

        Returns:
            The parents this call created, outermost first.
        """
        made: list[str] = []
        for path in paths:
            while True:
                with self._lock:
                    if path in self._known:
                        break
                    pending = self._creating.get(path)
                    if pending is None:
                        mine = self._creating[path] = threading.Event()
                if pending is not None:
                    if not pending.wait(timeout):
                        pending = None  # the other creator is stuck: create it here (NodeExists is fine)
                    else:
                        continue  # known now, or its creator failed: look again
                    with self._lock:
                        mine = self._creating.setdefault(path, threading.Event())
                try:
                    created = create(path)
                except BaseException:
                    with self._lock:
                        if self._creating.get(path) is mine:
                            del self._creating[path]
                    mine.set()
                    raise
                with self._lock:
                    self._known.add(path)
                    self._absent.discard(path)
                    if self._creating.get(path) is mine:
                        del self._creating[path]
                mine.set()
                if created:
                    made.append(path)
                break
        return made
