"""The ZooKeeper adapter: the one object through which zkop reads and writes znodes.

A thin facade over :mod:`.session`, :mod:`.errors`, :mod:`.cache`, :mod:`.reads`, :mod:`.bulk`,
:mod:`.writer`, :mod:`.watches` and :mod:`.probe` (docs/architecture.md, "Where things live"). It
plans nothing: it executes :mod:`zkop.zookeeper.actions` with compare-and-set. Session states are
kazoo's ``KazooState`` (Programmer's Guide, "ZooKeeper Sessions"); reads and writes are refused
while not CONNECTED (the walks wait for a reconnect, at most the session timeout per request).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from kazoo.client import KazooClient

from zkop.zookeeper.acls import AclId
from zkop.zookeeper.actions import OPEN_ACL, AclEntry, Action, CheckVersion, Observed
from zkop.zookeeper.bulk import AclRead, BulkReads, NodeSnapshot
from zkop.zookeeper.cache import WatchCache
from zkop.zookeeper.errors import (
    ConcurrentModification,
    NodeNotFound,
    WriteRefused,
    ZooKeeperError,
    ZooKeeperNoAuth,
    ZooKeeperUnavailable,
)
from zkop.zookeeper.probe import PARENT_NEEDS, client_address, parent_acl_problem, run_probe, session_identities
from zkop.zookeeper.reads import Listing, PendingRead, Reads, from_kazoo_acl
from zkop.zookeeper.session import ConnectionOptions, Session, SessionListener, split_chroot
from zkop.zookeeper.watches import PersistentWatches
from zkop.zookeeper.writer import Writer, to_kazoo_acl

__all__ = [
    "PARENT_NEEDS",
    "AclRead",
    "ConcurrentModification",
    "ConnectionOptions",
    "Listing",
    "NodeNotFound",
    "NodeSnapshot",
    "Observed",
    "PendingRead",
    "SessionListener",
    "WriteRefused",
    "ZooKeeperAdapter",
    "ZooKeeperError",
    "ZooKeeperNoAuth",
    "ZooKeeperUnavailable",
    "from_kazoo_acl",
    "split_chroot",
    "to_kazoo_acl",
]

class ZooKeeperAdapter:
    """A kazoo session plus watched, cached and pipelined reads and conditional, idempotent writes.

    Thread-safe: kazoo multiplexes calls from many worker threads over one session.

    Args:
        client: an already built :class:`KazooClient` (tests); built from ``options`` if ``None``.
        refuse_writes: why every write is refused (``zkop run --dry-run``: :attr:`refuse_writes`); ``None``: none.
        known_max_age: seconds a remembered znode is trusted (:attr:`known_max_age`); ``None``: the cache's default.

    Attributes:
        options: the connection settings.
        cache: the watch-validated cache (``path in adapter.cache``: is ``path`` remembered).
    """

    def __init__(self, options: ConnectionOptions, client: KazooClient | None = None, *,
                 refuse_writes: str | None = None, known_max_age: float | None = None) -> None:
        self.options = options
        self.cache = WatchCache()
        # The session is gone and with it every watch: nothing cached can be trusted.
        self._session = Session(options, client, on_lost=self.cache.forget_all)
        self.watches = PersistentWatches(self._session.client, self.cache, options.watch_mode)
        self._reads = Reads(self._session, self.cache, self.watches)
        self._bulk = BulkReads(self._session)
        self._writer = Writer(self._session, self.cache, self._reads)
        self._reads.parents = self._writer.parents
        self._writer.refuse_writes = refuse_writes
        if known_max_age is not None:
            self.cache.known_max_age = known_max_age

    # --- session -------------------------------------------------------------------------------

    @property
    def client(self) -> KazooClient:
        """The kazoo client (tests expire its session; features never call it)."""
        return self._session.client

    def start(self) -> None:
        """Open the session and check that the chroot (if any) exists.

        Raises:
            ZooKeeperUnavailable: no session within ``connect_timeout`` seconds, or the chroot is missing.
            ZooKeeperNoAuth: the server rejected the auth data.
        """
        self._session.start()

    def stop(self, timeout: float | None = None) -> None:
        """Close the session (ephemeral nodes of this session, if any, go away) and end its threads.

        Each thread is waited for at most ``timeout`` seconds (default: the session timeout); see
        :meth:`Session.stop <zkop.zookeeper.session.Session.stop>`. Idempotent.
        """
        self._session.stop(timeout)

    def health_check(self) -> str | None:
        """``None``, or which of the session's own threads ended while it is open (see ``Session.health_check``)."""
        return self._session.health_check()

    @property
    def connected(self) -> bool:
        """True while the session is CONNECTED (not SUSPENDED or LOST)."""
        return self._session.connected

    @property
    def last_connect_error(self) -> str | None:
        """Why connecting fails (untrusted certificate, host name mismatch, SASL rejected…), or ``None``."""
        return self._session.last_connect_error

    @property
    def unavailable_reason(self) -> str | None:
        """Why there is no usable session (readiness, status), ``None`` while CONNECTED; names a reset in progress."""
        return self._session.unavailable_reason

    def server_version(self) -> str | None:
        """The version the server of this session reports to ``srvr`` (``3.8.0-…``), or ``None`` when it does not
        answer: not connected, or ``srvr`` not in its ``4lw.commands.whitelist`` (it is by default since 3.5.3).
        Waits at most the session timeout."""
        try:
            text = self._session.client.command(b"srvr")
        except Exception:  # kazoo raises socket, TLS and ZooKeeper errors alike: the version is a nicety
            return None
        for line in str(text).splitlines():
            if line.startswith("Zookeeper version:"):
                return line.split(":", 1)[1].split(",", 1)[0].strip() or None
        return None

    @property
    def session_id(self) -> int | None:
        """The current session id, or ``None`` before the first session."""
        return self._session.session_id

    def add_session_listener(self, listener: SessionListener) -> None:
        """Call ``listener(state)`` with ``"CONNECTED"``, ``"SUSPENDED"`` or ``"LOST"`` on every change.

        Listeners run on the session's dispatcher thread, so they may call ZooKeeper
        (kazoo forbids blocking calls inside its own state listener).
        """
        self._session.add_listener(listener)

    @property
    def client_address(self) -> str | None:
        """The local address of the connection (what the server's ``ip`` scheme sees, unless NAT
        is in between), or ``None`` while not connected."""
        return client_address(self._session.client)

    @property
    def identities(self) -> frozenset[AclId]:
        """The identities this session holds on the server (:func:`zkop.zookeeper.probe.session_identities`),
        ``ip:<its address>`` included while connected; read from the credentials files each time."""
        return session_identities(self.options, self.client_address)

    def parent_acl_problem(self) -> str | None:
        """Why ``options.parent_acl`` would lock zkop out of the parents it creates, or ``None``.

        Needs :data:`PARENT_NEEDS`; ``ip`` entries count only once the session's address is known.
        """
        return parent_acl_problem(self.options, self.identities)

    def probe(self, scratch_root: str = "/zkop/probe") -> None:
        """Write, read back and delete a scratch znode under ``scratch_root`` (parents created).

        Catches credentials or ACLs that let zkop connect but not read what it writes, before any
        managed znode is touched (:func:`zkop.zookeeper.probe.run_probe`). A ``--zk-parent-acl``
        that would lock zkop out is refused before anything is written; if a step is refused all
        the same, the parents the probe created are deleted again.

        Raises:
            ZooKeeperNoAuth: the parent ACL excludes zkop, a step was refused, or the bytes read back differ.
            ZooKeeperUnavailable: the session failed meanwhile.
        """
        run_probe(scratch_root, self.parent_acl_problem(), create_parents=self._writer.create_parents,
                  execute=self.execute, read=lambda path: self.read(path, OPEN_ACL))

    # --- the watch-validated cache ---------------------------------------------------------------

    @property
    def known_max_age(self) -> float:
        """Seconds a remembered znode is trusted (ACL changes fire no watch); see :class:`WatchCache`."""
        return self.cache.known_max_age

    @known_max_age.setter
    def known_max_age(self, seconds: float) -> None:
        self.cache.known_max_age = seconds

    @property
    def absent_max_age(self) -> float:
        """Seconds an absence learned by :meth:`learn_absent` may stand in for a read."""
        return self.cache.absent_max_age

    @absent_max_age.setter
    def absent_max_age(self, seconds: float) -> None:
        self.cache.absent_max_age = seconds

    @property
    def cache_hits(self) -> int:
        """Watched reads answered from memory."""
        return self.cache.cache_hits

    @property
    def absent_hits(self) -> int:
        """Reads answered from an absence learned by :meth:`learn_absent`."""
        return self.cache.absent_hits

    def watch_subtrees(self, owner: str, paths: Iterable[str], *, whole: bool = False) -> None:
        """Keep ``owner``'s ``paths`` under persistent recursive watches (replacing its earlier ones).

        With ``whole`` the watch listeners hear of every node created, changed or deleted below
        ``paths``, not only of nodes registered or remembered (a mirrored subtree).

        The roots are :func:`~zkop.zookeeper.watches.covering_roots` of every owner's paths; a read
        or write below an active root needs no watch of its own, and the cache is filled from
        zkop's own writes. No-op with ``watch_mode`` ``per-node`` or on a server < 3.6 (then every
        watched read arms one watch per znode, as before). Never blocks; see :meth:`wait_watches`.
        """
        self.watches.watch(owner, paths, whole=whole)

    def wait_watches(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until the server watches every root; False if not (or not in use)."""
        return self.watches.wait_active(timeout)

    @property
    def watch_mode(self) -> str:
        """``persistent`` while persistent watches are in use, ``per-node`` when not, ``auto`` before it is known."""
        if not self.watches.enabled:
            return "per-node"
        return "persistent" if self.watches.supported else self.options.watch_mode

    def add_watch_listener(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(path)`` whenever a watch armed by a watched :meth:`read` fires.

        Runs on kazoo's event thread: the listener must not block or call ZooKeeper
        (enqueue a key and return).
        """
        self.cache.add_listener(listener)

    def forget(self, path: str) -> None:
        """Drop what is remembered about ``path`` (the next watched read goes to ZooKeeper)."""
        self.cache.forget(path)

    def forget_all(self) -> None:
        """Drop everything remembered (after a session loss every watch is gone)."""
        self.cache.forget_all()

    # --- reads ---------------------------------------------------------------------------------

    @property
    def reads(self) -> int:
        """``getData`` requests sent (watched reads answered from memory are not counted)."""
        return self._reads.count

    def read(self, path: str, expected_acl: tuple[AclEntry, ...] | None = OPEN_ACL, *,
             watch: bool = False, max_age: float | None = None, watch_absent: bool = True) -> Observed | None:
        """Read a znode's data and stat, and its ACL when it may differ from ``expected_acl``.

        The ACL (a second round trip) is read only when the stat's ``aversion`` shows it changed
        since creation or a non-default ACL is expected; otherwise ``Observed.acl`` is ``None`` ("as
        created"). ``expected_acl=None`` always reads it.

        ``watch=True`` arms a watch and remembers the result in the watch-validated cache
        (:mod:`zkop.zookeeper.cache`) for at most ``max_age`` seconds (default :attr:`known_max_age`);
        fired watches reach the :meth:`add_watch_listener` listeners. ``watch_absent=False`` arms no
        exists watch on a missing node the caller is about to create (it arms a data watch with
        :meth:`execute` ``arm_watches=True``), and "absent" is not remembered.

        Returns:
            The znode, or ``None`` if it does not exist.

        Raises:
            ZooKeeperUnavailable, ZooKeeperNoAuth, ConcurrentModification (changed between data and ACL reads).
        """
        return self.read_async(path, expected_acl, watch=watch, max_age=max_age, watch_absent=watch_absent).result()

    def read_async(self, path: str, expected_acl: tuple[AclEntry, ...] | None = OPEN_ACL, *,
                   watch: bool = False, max_age: float | None = None, watch_absent: bool = True) -> PendingRead:
        """Start :meth:`read` and return at once; :meth:`PendingRead.result` waits for it.

        Reads started back to back cost one round trip of latency (a session's requests are answered
        in order: Programmer's Guide, "ZooKeeper guarantees"); a remembered result completes at once.

        Raises:
            ZooKeeperUnavailable: not connected (raised here, not by ``result()``).
        """
        return self._reads.read_async(path, expected_acl, watch=watch, max_age=max_age, watch_absent=watch_absent)

    def settle(self, pending: Sequence[PendingRead]) -> None:
        """Wait (at most the session timeout) until the last of ``pending`` in flight is answered.

        The earlier ones are answered by then too (in order), so a worker wakes once per batch.
        Raises nothing; errors surface from ``result()``.
        """
        self._reads.settle(pending)

    def learn_absent(self, paths: Iterable[str], *, min_per_parent: int = 2, max_children: int = 10_000) -> int:
        """Batch the first reads of a cold start: list each parent once and remember which paths are absent.

        For every parent holding at least ``min_per_parent`` of ``paths`` (and at most
        ``max_children`` children), one ``exists`` and one ``getChildren`` replace a ``getData`` per
        path. A path found absent is answered ``None`` once, within :attr:`absent_max_age` seconds,
        by the next :meth:`read_async` with ``watch=True, watch_absent=False``: only ever a hint for a
        create, which fails with :class:`ConcurrentModification` if the node appeared. Nothing is watched.

        Returns:
            How many paths were learned absent.

        Raises:
            ZooKeeperUnavailable, ZooKeeperNoAuth: as a read.
        """
        return self._reads.learn_absent(paths, min_per_parent=min_per_parent, max_children=max_children)

    def children(self, path: str) -> list[str] | None:
        """Children names of ``path`` (unsorted), or ``None`` if it does not exist."""
        return self._reads.children(path)

    def watch_children(self, path: str) -> list[str] | None:
        """List the children of ``path`` and arm a child watch on it.

        When the children change the listeners of :meth:`add_watch_listener` get ``path``.

        Returns:
            The children's names, or ``None`` if ``path`` does not exist.
        """
        return self._reads.children(path, watch=True)

    def list_watched(self, path: str, on_change: Callable[[str], None]) -> Listing | None:
        """Children (sorted) and creation zxid of ``path``, arming a child watch (an exists watch if absent).

        Fired watches call ``on_change(path)`` on kazoo's event thread; see :meth:`Reads.list_watched`.

        Raises:
            ZooKeeperUnavailable, ZooKeeperNoAuth, ConcurrentModification.
        """
        return self._reads.list_watched(path, on_change)

    def walk(self, root: str, visit: Callable[[NodeSnapshot], bool], *,
             skip: Callable[[str], bool] = lambda _: False) -> list[str]:
        """Read the subtree at ``root`` (data, stat, ACL, children), pipelined; see :meth:`.bulk.BulkReads.walk`.

        Returns:
            The paths that could not be read (``NoAuth``).

        Raises:
            NodeNotFound, ZooKeeperNoAuth (``root`` itself), ZooKeeperUnavailable.
        """
        return self._bulk.walk(root, visit, skip=skip)

    def read_many(self, paths: Sequence[str], *,
                  on_node: Callable[[], None] | None = None) -> dict[str, Observed | ZooKeeperError | None]:
        """Data, stat and ACL of many znodes, pipelined, per-node errors as values: :meth:`.bulk.BulkReads.read_many`.

        Raises:
            ZooKeeperUnavailable: connection or session lost.
        """
        return self._bulk.read_many(paths, on_node=on_node)

    def read_acls(self, paths: Sequence[str]) -> dict[str, AclRead | ZooKeeperNoAuth | None]:
        """``getACL`` of many znodes, pipelined; see :meth:`.bulk.BulkReads.read_acls`.

        Raises:
            ZooKeeperUnavailable: not connected, or a request unanswered for the session timeout.
        """
        return self._bulk.read_acls(paths)

    # --- writes --------------------------------------------------------------------------------

    @property
    def refuse_writes(self) -> str | None:
        """Why every write is refused (``zkop run --dry-run``), or ``None`` (the default): writes go out.

        Set it and :meth:`execute` (and so :meth:`probe`) raises :class:`WriteRefused`,
        logged at ERROR, before anything is sent; reads and watches work as ever.
        """
        return self._writer.refuse_writes

    @refuse_writes.setter
    def refuse_writes(self, reason: str | None) -> None:
        self._writer.refuse_writes = reason

    def execute(self, actions: Sequence[Action], *, atomic: bool = False, arm_watches: bool = False,
                require: Sequence[CheckVersion] = ()) -> None:
        """Execute plan actions in order, each conditional on the version it was planned from.

        Idempotent under retries after a lost reply (:mod:`zkop.zookeeper.writer`).

        Args:
            actions: the writes, in order.
            atomic: one ZooKeeper ``multi`` (all or nothing), creating missing parents and retrying
                once if a create finds none. ``multi`` has no setACL, so a batch with a
                :class:`~zkop.zookeeper.actions.SetAcl` runs one by one.
            arm_watches: then arm a data watch on every node created and remember it, as a
                watched :meth:`read` (a read sent right behind the writes: no extra round trip).
            require: preconditions checked in the same ``multi`` as the writes (ZooKeeper's
                ``check``); with nothing to write nothing is checked. A batch with a
                :class:`~zkop.zookeeper.actions.SetAcl` checks them with a read first (not atomic).

        Raises:
            ConcurrentModification: the node changed since it was read; read and plan again.
            ZooKeeperUnavailable: not connected (SUSPENDED/LOST) or the request failed in transit.
            ZooKeeperNoAuth: the ACL forbids the write.
            WriteRefused: :attr:`refuse_writes` is set; nothing was sent.
        """
        self._writer.execute(actions, atomic=atomic, arm_watches=arm_watches, require=require)
