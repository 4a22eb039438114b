"""Read service nodes from ZooKeeper with watches armed, for the importer's reconciles.

Watches are one-shot (ZooKeeper Programmer's Guide, "ZooKeeper Watches"), so every read here arms
one again, and the reconcile that a watch triggers is the read that re-arms it:

* child lists use :meth:`~zkop.zookeeper.adapter.ZooKeeperAdapter.list_watched`, a *child watch* (fires when a child is
  created or deleted, or the node itself is deleted). A node that does not exist cannot carry a
  child watch, so an *exists watch* is armed instead, which fires when it is created;
* node bytes use :meth:`~zkop.zookeeper.adapter.ZooKeeperAdapter.read` with ``watch=True``, a *data watch* (or an exists
  watch if absent); the adapter answers repeated reads of an unchanged node from memory.

Both go through the adapter's session: waits bounded by the session timeout, kazoo's errors
mapped to :mod:`zkop.zookeeper.errors`, requests timed in ``zkop_zookeeper_request_*``.
Every watch event is handed to ``on_change(path)`` — for data watches through the adapter's
:meth:`~zkop.zookeeper.adapter.ZooKeeperAdapter.add_watch_listener`, which the builder wires to the same function. The
callbacks run on kazoo's event thread and must only enqueue a key. Events without a path (kazoo
fires every watcher with one when the session is lost) are dropped: the manager's session
listener re-reads everything after a new session (``ServiceImporter.on_session_reconnected``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from zkop.services.importer.sources import ServiceSource, SourceChild, SourceNode
from zkop.zookeeper.actions import Observed
from zkop.zookeeper.adapter import Listing, ZooKeeperNoAuth

__all__ = ["Listing", "ZooKeeperReader", "ZooKeeperSession", "child_path"]


class ZooKeeperSession(Protocol):
    """What the reader needs from :class:`~zkop.zookeeper.adapter.ZooKeeperAdapter`."""

    def list_watched(self, path: str, on_change: Callable[[str], None]) -> Listing | None: ...

    def read(self, path: str, expected_acl: Any = ..., *, watch: bool = False) -> Observed | None: ...


def child_path(parent: str, name: str) -> str:
    """``parent/name``, for any parent including ``/``."""
    return f"{parent.rstrip('/')}/{name}"


class ZooKeeperReader:
    """Watched reads of service nodes.

    Args:
        adapter: the ZooKeeper adapter (its session, its watched and cached reads).
        on_change: called with the path of every fired child or exists watch armed here; runs on
            kazoo's event thread, so it must only enqueue.
    """

    def __init__(self, adapter: ZooKeeperSession, on_change: Callable[[str], None]) -> None:
        self.adapter = adapter
        self.on_change = on_change

    def list(self, path: str) -> Listing | None:
        """Children and creation zxid of ``path``, arming a child watch; ``None`` (and an exists watch) if absent.

        Raises:
            ZooKeeperUnavailable, ZooKeeperNoAuth; ConcurrentModification if the node keeps
            appearing and vanishing between the two calls.
        """
        return self.adapter.list_watched(path, self._changed)

    def _changed(self, path: str) -> None:
        self.on_change(path)

    def read(self, path: str) -> Observed | None:
        """``path``'s bytes and stat through the adapter (a data watch, or an exists watch if absent)."""
        return self.adapter.read(path, watch=True)

    def read_service(self, source: ServiceSource, name: str, path: str) -> SourceNode | None:
        """Read service node ``path`` (a child called ``name`` of the import root) the way ``source`` lays it out.

        Every node read gets a watch: a child watch on the service node and on the instance
        parent, a data watch on each instance node the source reads. An instance that cannot be
        read for lack of permission is returned with its ``error`` set.

        Returns:
            The node, or ``None`` if the service node does not exist (any more).

        Raises:
            ZooKeeperUnavailable, ZooKeeperNoAuth (for the service node itself), ConcurrentModification.
        """
        listing = self.list(path)
        if listing is None:
            return None
        observed = self.read(path)
        if observed is None:
            return None
        parent = source.instance_parent(path)
        children: list[SourceChild] = []
        if parent is not None:
            names = listing.children
            if parent != path:
                below = self.list(parent)
                names = below.children if below is not None else ()
            for child in names:
                at = child_path(parent, child)
                if not source.reads_instance_data:
                    children.append(SourceChild(child, at))
                    continue
                try:
                    data = self.read(at)
                except ZooKeeperNoAuth as err:
                    children.append(SourceChild(child, at, error=str(err)))
                    continue
                if data is not None:
                    children.append(SourceChild(child, at, data.data))
        return SourceNode(name, path, listing.created_zxid, observed.data, tuple(children))
