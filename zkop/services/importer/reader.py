"""Read service nodes from ZooKeeper with watches armed, for the importer's reconciles.

Watches are one-shot (ZooKeeper Programmer's Guide, "ZooKeeper Watches"), so every read here arms
one again, and the reconcile that a watch triggers is the read that re-arms it:

* child lists use kazoo's ``get_children(path, watch=…)`` on the adapter's session, a *child
  watch* (fires when a child is created or deleted, or the node itself is deleted). A node that
  does not exist cannot carry a child watch, so an *exists watch* is armed instead, which fires
  when it is created;
* node bytes use :meth:`ZooKeeperAdapter.read` with ``watch=True``, a *data watch* (or an exists
  watch if absent); the adapter answers repeated reads of an unchanged node from memory.

Every watch event is handed to ``on_change(path)`` — for data watches through the adapter's
:meth:`~ZooKeeperAdapter.add_watch_listener`, which the builder wires to the same function. The
callbacks run on kazoo's event thread and must only enqueue a key. Events without a path (kazoo
fires every watcher with one when the session is lost) are dropped: the manager's session
listener re-reads everything after a new session (``ServiceImporter.on_session_reconnected``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from kazoo.exceptions import ConnectionLoss, NoAuthError, NoNodeError, OperationTimeoutError, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError

from zkop.services.importer.sources import ServiceSource, SourceChild, SourceNode
from zkop.zookeeper.actions import Observed
from zkop.zookeeper.adapter import ConcurrentModification, ZooKeeperNoAuth, ZooKeeperUnavailable

__all__ = ["Listing", "ZooKeeperReader", "ZooKeeperSession", "child_path"]


class ZooKeeperSession(Protocol):
    """What the reader needs from :class:`~zkop.zookeeper.adapter.ZooKeeperAdapter`."""

    client: Any

    @property
    def connected(self) -> bool: ...

    def read(self, path: str, expected_acl: Any = ..., *, watch: bool = False) -> Observed | None: ...


def child_path(parent: str, name: str) -> str:
    """``parent/name``, for any parent including ``/``."""
    return f"{parent.rstrip('/')}/{name}"


@dataclass(frozen=True)
class Listing:
    """A node's children (sorted) and ``Stat.czxid`` (the zxid that created the node)."""

    children: tuple[str, ...]
    created_zxid: int


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

    def _on_event(self, event: Any) -> None:
        path = getattr(event, "path", None)
        if path:
            self.on_change(str(path))

    @contextmanager
    def _mapped(self, operation: str, path: str) -> Iterator[None]:
        if not self.adapter.connected:
            raise ZooKeeperUnavailable(f"ZooKeeper session is not connected; {operation} {path} refused")
        try:
            yield
        except (ConnectionLoss, SessionExpiredError, OperationTimeoutError, KazooTimeoutError) as err:
            raise ZooKeeperUnavailable(f"ZooKeeper {operation} {path} failed: {type(err).__name__}") from err
        except NoAuthError as err:
            raise ZooKeeperNoAuth(f"ZooKeeper refused {operation} on {path}: not authorised (NoAuth)") from err

    def list(self, path: str) -> Listing | None:
        """Children and creation zxid of ``path``, arming a child watch; ``None`` (and an exists watch) if absent.

        Raises:
            ZooKeeperUnavailable, ZooKeeperNoAuth; ConcurrentModification if the node keeps
            appearing and vanishing between the two calls.
        """
        client = self.adapter.client
        for _ in range(3):
            with self._mapped("get_children", path):
                try:
                    children, stat = client.get_children(path, watch=self._on_event, include_data=True)
                    return Listing(tuple(sorted(str(c) for c in children)), int(stat.czxid))
                except NoNodeError:
                    pass
            with self._mapped("exists", path):
                if client.exists(path, watch=self._on_event) is None:
                    return None
        raise ConcurrentModification(f"znode {path} kept appearing and vanishing while being listed")

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
