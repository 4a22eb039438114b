"""Persistent recursive watches (ZooKeeper ≥ 3.6 ``addWatch``) at zkop's session layer.

kazoo 2.11 has no API for them (python-zk/kazoo#715), so they are added here in kazoo's style:

- :class:`AddWatch` is ``AddWatchRequest{path, mode}`` (``ZooDefs.OpCode.addWatch``,
  ``zookeeper.jute``), sent through ``KazooClient._call``; :class:`RemoveWatches` is
  ``RemoveWatchesRequest`` with type ``Any`` (``DataTree.removeWatch`` removes every mode).
- A PERSISTENT_RECURSIVE watch on ``R`` fires for ``R`` and every node below, and stays
  (``WatchManager.triggerWatch``); it lives on the connection, and kazoo re-sends no watch on
  reconnect, so every root is added again on every new connection (:meth:`PersistentWatches._on_state`).
- Notifications are handled on kazoo's reader thread (a hook over
  ``ConnectionHandler._read_watch_event``), in server order: the server sends a change's
  notification before the reply to any later request of the session
  (``FinalRequestProcessor.processRequest``), so the cache drops a value before a later reply
  arrives. kazoo's own one-shot watchers still get the event. Paths are un-chrooted
  (``KazooClient.unchroot``).
- A server < 3.6 answers ``UNIMPLEMENTED`` and closes the connection
  (``UnimplementedRequestProcessor``); the session then falls back to per-node watches.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import namedtuple
from collections.abc import Iterable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import UnimplementedError
from kazoo.protocol.serialization import int_struct, read_string, write_string
from kazoo.protocol.states import Callback

from zkop.zookeeper import metrics
from zkop.zookeeper.cache import WatchCache

__all__ = ["ADD_WATCH", "WATCH_MODES", "AddWatch", "PersistentWatches", "RemoveWatches", "covered", "covering_roots"]

log = logging.getLogger(__name__)

#: ``ZooDefs.OpCode.addWatch`` and ``removeWatches``.
ADD_WATCH = 106
REMOVE_WATCHES = 18
#: ``ZooDefs.AddWatchModes``.
PERSISTENT_RECURSIVE = 1
#: ``Watcher.WatcherType.Any``.
WATCHER_TYPE_ANY = 3
#: ``Watcher.Event.EventType`` codes a persistent recursive watch delivers.
NODE_CREATED, NODE_DELETED, NODE_DATA_CHANGED = 1, 2, 3
_CHANGES = frozenset({NODE_CREATED, NODE_DELETED, NODE_DATA_CHANGED})
#: ``--zk-watch-mode`` values.
WATCH_MODES = ("auto", "persistent", "per-node")


class AddWatch(namedtuple("AddWatch", "path mode")):
    """``AddWatchRequest{ustring path; int mode}``; the reply has no body."""

    type = ADD_WATCH

    def serialize(self) -> bytearray:
        """The request body: the path (jute ustring) and the mode (int)."""
        body = bytearray(write_string(self.path))
        body.extend(int_struct.pack(self.mode))
        return body

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> bool:
        """The reply carries nothing beyond its header."""
        return True


class RemoveWatches(namedtuple("RemoveWatches", "path watcher_type")):
    """``RemoveWatchesRequest{ustring path; int type}``; the reply has no body (``NoWatcher`` if none)."""

    type = REMOVE_WATCHES

    def serialize(self) -> bytearray:
        """The request body: the path and the watcher type."""
        body = bytearray(write_string(self.path))
        body.extend(int_struct.pack(self.watcher_type))
        return body

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> bool:
        """The reply carries nothing beyond its header."""
        return True


def covering_roots(paths: Iterable[str]) -> frozenset[str]:
    """The fewest roots whose subtrees hold every one of ``paths``, each as deep as possible (pure).

    One root per top-level name: the deepest common ancestor of the paths below it (a path alone
    under its top-level name is its own root). ``/`` is a root only if ``/`` itself is given, so a
    shared ensemble's other trees are never watched; e.g. ``/app/a/x``, ``/app/a/y``, ``/zkop/owners/
    app/a/x`` → ``{/app/a, /zkop/owners/app/a/x}``.
    """
    groups: dict[str, list[str]] = {}
    for path in paths:
        if path == "/":
            return frozenset({"/"})
        parts = path.strip("/").split("/")
        common = groups.get(parts[0])
        if common is None:
            groups[parts[0]] = parts
            continue
        depth = 0
        while depth < min(len(common), len(parts)) and common[depth] == parts[depth]:
            depth += 1
        groups[parts[0]] = common[:depth]
    return frozenset("/" + "/".join(parts) for parts in groups.values())


def covered(path: str, roots: frozenset[str]) -> bool:
    """Is ``path`` one of ``roots`` or below one (walks up the path: O(depth))?"""
    if not roots:
        return False
    while True:
        if path in roots:
            return True
        if path == "/":
            return False
        path = path.rsplit("/", 1)[0] or "/"


class PersistentWatches:
    """Keeps persistent recursive watches on the roots covering the paths features register.

    Thread-safe. Roots are added when wanted and on every new connection; a root counts as
    *active* once the server has answered its ``addWatch`` on the current connection, and only
    then do reads below it go without a one-shot watch (:meth:`covers`).

    Args:
        client: the kazoo client (its connection gets the reader-thread hooks, see the module).
        cache: the watch-validated cache the notifications invalidate.
        mode: ``auto`` (persistent if the server supports it), ``persistent`` (the same, an error
            logged if it does not) or ``per-node`` (today's one-shot watches only).
        opcode: the request's opcode (tests send an unknown one to see a server < 3.6 answer).

    Attributes:
        supported: ``None`` until the server answered an ``addWatch`` in this session, then
            whether it supports it.
    """

    def __init__(self, client: KazooClient, cache: WatchCache, mode: str = "auto", *,
                 opcode: int = ADD_WATCH) -> None:
        if mode not in WATCH_MODES:
            raise ValueError(f"watch mode {mode!r}: expected one of {', '.join(WATCH_MODES)}")
        self.client = client
        self.cache = cache
        self.mode = mode
        self.opcode = opcode
        self.supported: bool | None = None
        self._cond = threading.Condition(threading.Lock())
        self._wanted: dict[str, frozenset[str]] = {}  # owner -> paths
        self._managed: frozenset[str] = frozenset()
        self._whole_owners: set[str] = set()
        self._whole: frozenset[str] = frozenset()  # roots whose every node's events are wanted
        self._roots: frozenset[str] = frozenset()  # wanted roots
        self._active: frozenset[str] = frozenset()  # answered on this connection (copy-on-write)
        self._pending: dict[str, float] = {}  # root -> monotonic time its addWatch was sent
        self._retiring: set[str] = set()  # roots no longer wanted, removed once the pending adds are in
        self._connected = False
        connection = client._connection
        self._original_watch_event = connection._read_watch_event
        self._original_response = connection._read_response
        if mode != "per-node":
            connection._read_watch_event = self._read_watch_event
            connection._read_response = self._read_response
        client.add_listener(self._on_state)

    # --- what features ask for ----------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """Persistent watches are in use (not ``per-node``, not refused by the server)."""
        return self.mode != "per-node" and self.supported is not False

    @property
    def roots(self) -> frozenset[str]:
        """The wanted roots (:func:`covering_roots` of every registered path)."""
        return self._roots

    @property
    def active(self) -> frozenset[str]:
        """The roots the server watches on the current connection."""
        return self._active

    def watch(self, owner: str, paths: Iterable[str], *, whole: bool = False) -> None:
        """Keep ``owner``'s ``paths`` (and everything below) under persistent recursive watches.

        Replaces ``owner``'s earlier paths. New roots are added at once (if connected); roots no
        longer wanted are removed once the new ones are active, and what the cache remembers below
        them, not covered by another root, is dropped. Events for paths under a root that nobody
        registered and the cache does not hold are dropped on the reader thread, unless an owner
        registered it with ``whole`` (it wants every node below its paths: a mirrored subtree).
        Never blocks.
        """
        with self._cond:
            self._wanted[owner] = frozenset(paths)
            if whole:
                self._whole_owners.add(owner)
            else:
                self._whole_owners.discard(owner)
            self._whole = frozenset().union(*(self._wanted[o] for o in self._whole_owners))
            self._managed = frozenset().union(*self._wanted.values())
            roots = covering_roots(self._managed)
            added, removed = roots - self._roots, self._roots - roots
            self._roots = roots
            if not (self.enabled and self._connected):
                return
            self._retiring |= removed
            for root in sorted(added):
                self._send_add(root)
            self._retire_if_ready()

    def wait_active(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until every wanted root is active; False if not (or not enabled)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.enabled and not self._roots <= self._active:
                left = deadline - time.monotonic()
                if left <= 0 or not self._connected:
                    return False
                self._cond.wait(left)
            return self.enabled

    def covers(self, path: str, *, wait: float = 0.0) -> bool:
        """Is ``path`` under an active root (its changes are notified without a one-shot watch)?

        With ``wait`` > 0 (seconds), a path under a root whose ``addWatch`` is in flight waits for
        its answer (sent first on a new connection: one round trip).
        """
        if covered(path, self._active):
            return True
        if wait <= 0 or not self.enabled or not covered(path, self._roots):
            return False
        deadline = time.monotonic() + wait
        with self._cond:
            while not covered(path, self._active) and any(covered(path, frozenset({r})) for r in self._pending):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return covered(path, self._active)

    # --- requests ---------------------------------------------------------------------------------

    def _full(self, path: str) -> str:
        chroot = self.client.chroot
        return (chroot + path if path != "/" else chroot) if chroot else path

    def _send_add(self, root: str) -> None:
        """Send ``addWatch(root, PERSISTENT_RECURSIVE)`` (caller holds the lock; never blocks)."""
        request = AddWatch(self._full(root), PERSISTENT_RECURSIVE)
        if self.opcode != ADD_WATCH:
            request = type("AddWatchProbe", (AddWatch,), {"type": self.opcode})(*request)
        self._pending[root] = time.monotonic()
        self.client._call(request, self.client.handler.async_result())

    def _retire_if_ready(self) -> None:
        """Remove the retiring roots once no add is in flight (caller holds the lock)."""
        if self._pending or not self._retiring:
            return
        retired, self._retiring = frozenset(self._retiring), set()
        self._active = self._active - retired
        remaining = self._active
        self.cache.forget_matching(lambda p: covered(p, retired) and not covered(p, remaining))
        for root in sorted(retired):
            self.client._call(RemoveWatches(self._full(root), WATCHER_TYPE_ANY), self.client.handler.async_result())
        self._cond.notify_all()

    # --- kazoo's threads --------------------------------------------------------------------------

    def _on_state(self, state: str) -> None:
        """kazoo state listener (its connection thread, in order with replies): re-add or forget."""
        with self._cond:
            if state == KazooState.CONNECTED:
                self._connected = True
                if self.enabled:
                    for root in sorted(self._roots):
                        self._send_add(root)
                return
            # Every server-side watch, one-shot or persistent, went with the connection.
            self._connected = False
            self._active = frozenset()
            self._pending.clear()
            self._retiring.clear()
            if state == KazooState.LOST and self.mode == "auto":
                self.supported = None  # a new session asks the server again
            self._cond.notify_all()
        self.cache.forget_all()

    def _read_response(self, header: Any, buffer: bytes, offset: int) -> Any:
        """Hook over ``ConnectionHandler._read_response`` (reader thread): note answered ``addWatch`` es."""
        pending = self.client._pending
        request = pending[0][0] if pending else None
        result = self._original_response(header, buffer, offset)
        if isinstance(request, AddWatch):
            self._answered(request, int(header.err))
        return result

    def _answered(self, request: AddWatch, err: int) -> None:
        root = self.client.unchroot(request.path)
        with self._cond:
            sent = self._pending.pop(root, None)
            if sent is not None:
                metrics.ZOOKEEPER_REQUEST_DURATION.labels("add_watch").observe(time.monotonic() - sent)
            if err == 0:
                self.supported = True
                if root in self._roots:
                    self._active = self._active | {root}
                else:
                    self._retiring.add(root)
            elif err == UnimplementedError.code:
                if self.supported is not False:
                    level = logging.ERROR if self.mode == "persistent" else logging.WARNING
                    log.log(level, "ZooKeeper does not support persistent watches (addWatch answered UNIMPLEMENTED: "
                            "a server older than 3.6); using one watch per znode for this session%s",
                            " despite --zk-watch-mode=persistent" if self.mode == "persistent" else "")
                self.supported = False
                self._pending.clear()
                self._retiring.clear()
            else:
                metrics.ZOOKEEPER_REQUEST_ERRORS.labels("add_watch", str(err)).inc()
                log.warning("addWatch %s refused (error %d): znodes below it get one watch each", root, err)
            self._retire_if_ready()
            self._cond.notify_all()

    def _read_watch_event(self, buffer: bytes, offset: int) -> None:
        """Hook over ``ConnectionHandler._read_watch_event`` (reader thread): invalidate, then dispatch."""
        client = self.client
        active = self._active
        if active:
            # WatcherEvent{int type; int state; ustring path}, as Watch.deserialize reads it.
            event_type = int_struct.unpack_from(buffer, offset)[0]
            full_path, _ = read_string(buffer, offset + 8)
            if event_type in _CHANGES:
                path = client.unchroot(full_path)
                if covered(path, active):
                    own, was_known = self.cache.on_event(path, event_type)
                    wanted = was_known or path in self._managed or covered(path, self._whole)
                    if not own and wanted and not client._stopped.is_set():
                        client.handler.dispatch_callback(Callback("watch", self.cache.notify, (path,)))
            if full_path not in client._data_watchers and full_path not in client._child_watchers:
                return  # no one-shot watcher for kazoo to fire
        self._original_watch_event(buffer, offset)
