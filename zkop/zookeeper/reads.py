"""Reads through the watch-validated cache: pipelined single reads, children, listings as hints, watched listings.

ZooKeeper answers one session's requests in the order they were sent (Programmer's Guide,
"ZooKeeper guarantees": sequential consistency), so reads started back to back cost one round
trip of latency instead of one each. Every read here is sent with kazoo's ``*_async`` calls,
waits at most the session timeout (:meth:`~zkop.zookeeper.session.Session.wait`) and runs
inside :meth:`~zkop.zookeeper.session.Session.mapped` (errors mapped, requests timed).

Reads of many znodes at once that bypass the cache (the ACL check, the tree walk, ``read_many``)
are :mod:`zkop.zookeeper.bulk`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import NoNodeError
from kazoo.security import ACL

from zkop.zookeeper.actions import OPEN_ACL, AclEntry, Observed
from zkop.zookeeper.cache import Generation, WatchCache
from zkop.zookeeper.errors import ConcurrentModification
from zkop.zookeeper.frozen import fast_init
from zkop.zookeeper.parents import Parents
from zkop.zookeeper.session import Session
from zkop.zookeeper.watches import PersistentWatches

__all__ = ["BATCH", "Listing", "PendingRead", "Reads", "from_kazoo_acl", "join_path", "to_observed"]

#: Nodes whose requests a pipelined read of many znodes keeps in flight together (:mod:`zkop.zookeeper.bulk`).
BATCH = 256


def from_kazoo_acl(acl: Sequence[ACL]) -> tuple[AclEntry, ...]:
    """Convert kazoo's ``ACL`` objects to sorted entries."""
    return tuple(sorted({AclEntry(str(a.id.scheme), str(a.id.id), int(a.perms)) for a in acl}))


def join_path(parent: str, name: str) -> str:
    """``/a`` + ``b`` → ``/a/b``; ``/`` + ``b`` → ``/b``."""
    return f"{parent.rstrip('/')}/{name}"


def to_observed(data: bytes | None, stat: Any, acl: tuple[AclEntry, ...] | None) -> Observed:
    """The :class:`Observed` of a kazoo read: ``data``, its ``ZnodeStat`` and the ACL if read (else ``None``)."""
    return Observed(data=data or b"", version=stat.version, num_children=stat.numChildren,
                    ephemeral_owner=stat.ephemeralOwner, acl_version=stat.aversion, acl=acl)


@fast_init
@dataclass(frozen=True)
class Listing:
    """A node's children (sorted) and ``Stat.czxid`` (the zxid that created the node)."""

    children: tuple[str, ...]
    created_zxid: int


class PendingRead:
    """A :meth:`Reads.read_async` in flight; :meth:`result` waits for it.

    Not built directly. ``result()`` may be called once per read; it raises what
    :meth:`ZooKeeperAdapter.read <zkop.zookeeper.adapter.ZooKeeperAdapter.read>` raises.
    """

    def __init__(self, reads: Reads, path: str, *, cached: Observed | None = None,
                 request: Any = None, issued: float = 0.0, expected_acl: tuple[AclEntry, ...] | None = OPEN_ACL,
                 watch: bool = False, watch_absent: bool = True, generation: Generation | None = None,
                 read_at: float = 0.0, covered: bool = False) -> None:
        self.reads = reads
        self.path = path
        self.cached = cached
        self.request = request
        self.issued = issued
        self.expected_acl = expected_acl
        self.watch = watch
        self.watch_absent = watch_absent
        self.generation = generation
        self.read_at = read_at
        self.covered = covered  # under an active persistent watch: no one-shot watch, absence remembered

    @property
    def from_memory(self) -> bool:
        """Answered from memory (:class:`WatchCache`) without a request: :meth:`result` neither waits,
        nor raises, nor remembers anything."""
        return self.request is None

    def result(self) -> Observed | None:
        """The znode, or ``None`` if it does not exist (waits at most the session timeout, seconds)."""
        if self.request is None:
            return self.cached
        return self.reads.finish(self)


class Reads:
    """Every read of the ZooKeeper layer, over one :class:`Session` and its :class:`WatchCache`.

    With ``watches`` (persistent recursive watches in use), a watched read of a path under an
    active root arms no one-shot watch: the root's watch notifies every change, and the cache is
    invalidated on kazoo's reader thread before any later reply (:mod:`zkop.zookeeper.watches`),
    so the result, absence included, is remembered without an ``exists`` watch.

    Attributes:
        count: ``getData`` requests sent by :meth:`read_async` (cache hits are not requests).
    """

    def __init__(self, session: Session, cache: WatchCache, watches: PersistentWatches | None = None) -> None:
        self.session = session
        self.cache = cache
        self.watches = watches
        self.count = 0
        #: Told which parents :meth:`learn_absent` found present or absent (the writer's, set by the adapter).
        self.parents: Parents | None = None

    # --- single znodes -------------------------------------------------------------------------

    def read_async(self, path: str, expected_acl: tuple[AclEntry, ...] | None = OPEN_ACL, *,
                   watch: bool = False, max_age: float | None = None, watch_absent: bool = True) -> PendingRead:
        """Start a read of ``path`` and return at once; see ``ZooKeeperAdapter.read`` for the arguments.

        A result remembered by the cache (watched reads only) completes at once, without a request.

        Raises:
            ZooKeeperUnavailable: not connected (raised here, not by ``result()``).
        """
        generation: Generation | None = None
        read_at = 0.0
        covered = False
        if watch:
            # The generation first: a connection lost or a root removed after it moves the epoch.
            hit, cached, generation = self.cache.lookup(path, expected_acl, max_age=max_age,
                                                        watch_absent=watch_absent)
            if hit:
                return PendingRead(self, path, cached=cached)
            read_at = time.monotonic()
            covered = self.watches is not None and self.watches.covers(
                path, wait=self.session.options.session_timeout)
        self.session.require_connected("read")
        self.count += 1
        request = self.session.client.get_async(path, watch=self.cache.on_watch if watch and not covered else None)
        return PendingRead(self, path, request=request, issued=time.monotonic(), expected_acl=expected_acl,
                           watch=watch, watch_absent=watch_absent, generation=generation, read_at=read_at,
                           covered=covered)

    def settle(self, pending: Sequence[PendingRead]) -> None:
        """Wait (at most the session timeout) until the last of ``pending`` in flight is answered.

        The earlier ones are answered by then too (in order): their ``result()`` no longer
        blocks, and a worker wakes up once for a batch instead of once per request. Raises
        nothing; errors surface from ``result()``.
        """
        for read in reversed(pending):
            if read.request is not None:
                read.request.wait(self.session.options.session_timeout)
                return

    def finish(self, pending: PendingRead) -> Observed | None:
        """Wait for a started read, complete it (exists watch, ACL) and remember it if watched.

        Raises:
            ZooKeeperUnavailable, ZooKeeperNoAuth; ConcurrentModification (changed between data and ACL reads).
        """
        session, client, path = self.session, self.session.client, pending.path
        with session.mapped("get", path, started=pending.issued):
            try:
                data, stat = session.wait(pending.request)
            except NoNodeError:
                stat = None
        observed: Observed | None = None
        if stat is None:
            if pending.watch and pending.watch_absent and not pending.covered:
                with session.mapped("exists", path):
                    if session.wait(client.exists_async(path, watch=self.cache.on_watch)) is not None:
                        raise ConcurrentModification(f"znode {path} appeared while being read")
        else:
            acl: tuple[AclEntry, ...] | None = None
            expected_acl = pending.expected_acl
            if expected_acl is None or stat.aversion > 0 or expected_acl != OPEN_ACL:
                with session.mapped("get_acls", path):
                    try:
                        acls, stat2 = session.wait(client.get_acls_async(path))
                    except NoNodeError:
                        raise ConcurrentModification(f"znode {path} vanished while being read") from None
                acl = from_kazoo_acl(acls)
                if stat2.version != stat.version:
                    raise ConcurrentModification(f"znode {path} changed while being read")
            observed = to_observed(data, stat, acl)
        if pending.watch and (observed is not None or pending.watch_absent or pending.covered):
            self.cache.remember(path, pending.generation, pending.read_at, observed)
        return observed

    # --- children ------------------------------------------------------------------------------

    def children(self, path: str, *, watch: bool = False) -> list[str] | None:
        """Children names of ``path`` (unsorted), or ``None`` if it does not exist.

        With ``watch=True`` a child watch is armed; it is delivered like a data watch
        (the cache forgets ``path``, the watch listeners get it).
        """
        session = self.session
        with session.mapped("get_children", path):
            try:
                request = session.client.get_children_async(path, watch=self.cache.on_watch if watch else None)
                return list(session.wait(request))
            except NoNodeError:
                return None

    def list_watched(self, path: str, on_change: Callable[[str], None]) -> Listing | None:
        """Children and creation zxid of ``path`` with a child watch; ``None`` (and an exists watch) if absent.

        A node that does not exist cannot carry a child watch, so an exists watch is armed
        instead, which fires when it is created. Both call ``on_change(path)`` when they fire
        (on kazoo's event thread: enqueue only); events without a path (kazoo fires every
        watcher with one when the session is lost) are dropped. The cache is not involved.

        Raises:
            ZooKeeperUnavailable, ZooKeeperNoAuth; ConcurrentModification if the node keeps
            appearing and vanishing between the two calls.
        """
        def watcher(event: Any) -> None:
            changed = getattr(event, "path", None)
            if changed:
                on_change(str(changed))

        session, client = self.session, self.session.client
        for _ in range(3):
            session.require_connected("get_children")
            with session.mapped("get_children", path):
                try:
                    children, stat = session.wait(client.get_children_async(path, watch=watcher, include_data=True))
                    return Listing(tuple(sorted(str(c) for c in children)), int(stat.czxid))
                except NoNodeError:
                    pass
            session.require_connected("exists")
            with session.mapped("exists", path):
                if session.wait(client.exists_async(path, watch=watcher)) is None:
                    return None
        raise ConcurrentModification(f"znode {path} kept appearing and vanishing while being listed")

    def learn_absent(self, paths: Iterable[str], *, min_per_parent: int = 2, max_children: int = 10_000) -> int:
        """List parents once and note which of ``paths`` are absent; see ``ZooKeeperAdapter.learn_absent``.

        Returns:
            How many paths were learned absent.

        Raises:
            ZooKeeperUnavailable, ZooKeeperNoAuth: as a read.
        """
        by_parent: dict[str, set[str]] = {}
        for path in paths:
            parent, _, name = path.rpartition("/")
            by_parent.setdefault(parent or "/", set()).add(name)
        parents = sorted(p for p, names in by_parent.items() if len(names) >= min_per_parent)
        if not parents:
            return 0
        session, client = self.session, self.session.client
        session.require_connected("read")
        learned_at = time.monotonic()
        stats = [(parent, time.monotonic(), client.exists_async(parent)) for parent in parents]
        absent: list[str] = []
        listings: list[tuple[str, float, Any]] = []
        missing_parents: list[str] = []
        for parent, started, request in stats:
            with session.mapped("exists", parent, started=started):
                stat = session.wait(request)
            if stat is None:
                missing_parents.append(parent)
                absent.extend(join_path(parent, name) for name in by_parent[parent])
            elif stat.numChildren <= max_children:
                listings.append((parent, time.monotonic(), client.get_children_async(parent)))
        if self.parents is not None:
            # The first creates under a missing parent create it first, once (zkop.zookeeper.parents).
            self.parents.absent(missing_parents)
            missing = set(missing_parents)
            self.parents.exist(p for p in parents if p not in missing)
        for parent, started, request in listings:
            with session.mapped("get_children", parent, started=started):
                try:
                    children = set(session.wait(request))
                except NoNodeError:
                    children = set()
            absent.extend(join_path(parent, name) for name in by_parent[parent] if name not in children)
        self.cache.learn_absent(absent, learned_at)
        return len(absent)
