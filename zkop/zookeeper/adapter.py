"""The ZooKeeper adapter: the one place where zkop reads and writes znodes.

It owns a kazoo session, executes :mod:`zkop.zookeeper.actions` with
compare-and-set semantics, makes retried writes idempotent, and maps kazoo's
exceptions to a small hierarchy the reconcilers understand. It plans nothing.

Session states follow the ZooKeeper Programmer's Guide ("ZooKeeper Sessions")
and kazoo's ``KazooState``: CONNECTED, SUSPENDED (connection lost, session may
still be alive) and LOST (session expired). Writes are refused while not
CONNECTED; listeners registered with :meth:`ZooKeeperAdapter.add_session_listener`
are called from a separate thread, never inside kazoo's own state callback.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    AuthFailedError,
    BadVersionError,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import ACL, Id

from zkop.zookeeper.actions import (
    OPEN_ACL,
    AclEntry,
    Action,
    CheckVersion,
    CreateNode,
    DeleteNode,
    Observed,
    SetAcl,
    SetData,
)
from zkop.zookeeper.handler import SelectHandler
from zkop.zookeeper.paths import parent_paths

__all__ = [
    "ConcurrentModification",
    "ConnectionOptions",
    "PendingRead",
    "ZooKeeperAdapter",
    "ZooKeeperError",
    "ZooKeeperNoAuth",
    "ZooKeeperUnavailable",
    "split_chroot",
]

log = logging.getLogger(__name__)


class ZooKeeperError(Exception):
    """Base of the adapter's errors."""


class ZooKeeperUnavailable(ZooKeeperError):
    """No usable session: connection lost, session expired, request timed out, or chroot missing."""


class ZooKeeperNoAuth(ZooKeeperError):
    """The server refused the operation for lack of permission (``NoAuth``) or the auth data was rejected."""


class ConcurrentModification(ZooKeeperError):
    """The znode changed between read and write (``BadVersion``, ``NodeExists``, ``NotEmpty``); re-plan."""


@dataclass(frozen=True)
class ConnectionOptions:
    """How to reach the ensemble.

    Attributes:
        hosts: connect string ``host:port[,host:port…][/chroot]`` (ZooKeeper Programmer's Guide,
            "Connecting"); the chroot must already exist.
        session_timeout: requested session timeout, seconds (the server clamps it to
            [2, 20] × tickTime by default).
        auth: ``(scheme, credential)`` pairs, e.g. ``("digest", "user:password")``.
        use_tls, tls_ca_file, tls_cert_file, tls_key_file: TLS to the client port.
        connect_timeout: seconds to wait for the first session in :meth:`ZooKeeperAdapter.start`.
        parent_acl: ACL for parent znodes zkop creates (default: the open ACL).
    """

    hosts: str = "127.0.0.1:2181"
    session_timeout: float = 10.0
    auth: tuple[tuple[str, str], ...] = ()
    use_tls: bool = False
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    connect_timeout: float = 15.0
    parent_acl: tuple[AclEntry, ...] = OPEN_ACL


def to_kazoo_acl(acl: Sequence[AclEntry]) -> list[ACL]:
    """Convert entries to kazoo's ``ACL`` objects."""
    return [ACL(entry.perms, Id(entry.scheme, entry.id)) for entry in acl]


def from_kazoo_acl(acl: Sequence[ACL]) -> tuple[AclEntry, ...]:
    """Convert kazoo's ``ACL`` objects to sorted entries."""
    return tuple(sorted({AclEntry(str(a.id.scheme), str(a.id.id), int(a.perms)) for a in acl}))


def split_chroot(hosts: str) -> tuple[str, str]:
    """Split ``"h1:2181,h2:2181/app"`` into ``("h1:2181,h2:2181", "/app")``; chroot ``""`` if none."""
    index = hosts.find("/")
    if index < 0:
        return hosts, ""
    return hosts[:index], hosts[index:].rstrip("/")


SessionListener = Callable[[str], None]


def _join(parent: str, name: str) -> str:
    return f"{parent.rstrip('/')}/{name}"


class PendingRead:
    """A :meth:`ZooKeeperAdapter.read_async` in flight; :meth:`result` waits for it.

    Not built directly. ``result()`` may be called once per read; it raises what
    :meth:`ZooKeeperAdapter.read` raises.
    """

    def __init__(self, adapter: ZooKeeperAdapter, path: str, *, cached: Observed | None = None,
                 request: Any = None, issued: float = 0.0, expected_acl: tuple[AclEntry, ...] | None = OPEN_ACL,
                 watch: bool = False, watch_absent: bool = True, generation: int | None = None,
                 read_at: float = 0.0) -> None:
        self.adapter = adapter
        self.path = path
        self.cached = cached
        self.request = request
        self.issued = issued
        self.expected_acl = expected_acl
        self.watch = watch
        self.watch_absent = watch_absent
        self.generation = generation
        self.read_at = read_at

    def result(self) -> Observed | None:
        """The znode, or ``None`` if it does not exist (waits at most the session timeout, seconds)."""
        if self.request is None:
            return self.cached
        return self.adapter._finish_read(self)


class ZooKeeperAdapter:
    """A kazoo session plus conditional, idempotent execution of plan actions.

    Thread-safe: kazoo multiplexes calls from many worker threads over one session.

    Args:
        options: connection settings.
        client: an already built :class:`KazooClient` (tests); built from ``options`` if ``None``.
    """

    def __init__(self, options: ConnectionOptions, client: KazooClient | None = None) -> None:
        self.options = options
        self.client = client or self._build_client(options)
        self._listeners: list[SessionListener] = []
        self._state = "LOST"
        self._state_lock = threading.Lock()
        self._events: list[str] = []
        self._event_cond = threading.Condition(self._state_lock)
        self._stopped = False
        self._dispatcher = threading.Thread(target=self._dispatch, name="zk-session-events", daemon=True)
        self.client.add_listener(self._on_state)
        # Watch-validated cache of znodes: path -> Observed (or None for "absent"), valid while
        # the ZooKeeper watch armed by the read that filled it has not fired.
        self._known: dict[str, tuple[float, Observed | None]] = {}
        #: Seconds a remembered znode is trusted. Data changes fire watches, but ACL changes do not
        #: (ZooKeeper Programmer's Guide: watches are set by getData/exists/getChildren only), so a
        #: bounded age makes the periodic resync re-read and catch ACL drift.
        self.known_max_age = 300.0
        self._invalidations: dict[str, int] = {}
        self._known_lock = threading.Lock()
        # Paths a child listing showed absent (see learn_absent): path -> monotonic time learned.
        self._absent: dict[str, float] = {}
        #: Seconds an absence learned from a listing may stand in for a read.
        self.absent_max_age = 120.0
        self._watch_listeners: list[Callable[[str], None]] = []
        self.consecutive_failures = 0
        self._durations: dict[str, Any] = {}  # operation -> labelled histogram child
        self.reads = 0
        self.cache_hits = 0
        self.absent_hits = 0

    @staticmethod
    def _build_client(options: ConnectionOptions) -> KazooClient:
        kwargs: dict[str, Any] = {
            "hosts": options.hosts,
            "timeout": options.session_timeout,
            "auth_data": list(options.auth) or None,
            "connection_retry": {"max_tries": -1, "delay": 0.2, "backoff": 2, "max_delay": 5.0},
            "handler": SelectHandler(),
        }
        if options.use_tls:
            kwargs.update(
                use_ssl=True, ca=options.tls_ca_file, certfile=options.tls_cert_file,
                keyfile=options.tls_key_file, verify_certs=options.tls_ca_file is not None,
            )
        return KazooClient(**kwargs)

    # --- session -----------------------------------------------------------------------------

    def start(self) -> None:
        """Open the session and check that the chroot (if any) exists.

        Raises:
            ZooKeeperUnavailable: no session within ``connect_timeout`` seconds, or the chroot is missing.
            ZooKeeperNoAuth: the server rejected the auth data.
        """
        if not self._dispatcher.is_alive():
            self._dispatcher.start()
        try:
            with warnings.catch_warnings():
                # kazoo only warns about a missing chroot; it becomes a clear error below.
                warnings.filterwarnings("ignore", message="No chroot path exists", category=UserWarning)
                self.client.start(timeout=self.options.connect_timeout)
        except KazooTimeoutError as err:
            raise ZooKeeperUnavailable(
                f"could not connect to ZooKeeper at {self.options.hosts} within "
                f"{self.options.connect_timeout:g} s"
            ) from err
        except AuthFailedError as err:
            raise ZooKeeperNoAuth(f"ZooKeeper rejected the credentials: {err!r}") from err
        _, chroot = split_chroot(self.options.hosts)
        if chroot:
            with self._mapped("exists", "/"):
                # Inside a chroot "/" is the chroot node itself.
                exists = self._wait(self.client.exists_async("/"))
            if exists is None:
                raise ZooKeeperUnavailable(
                    f"the chroot {chroot} does not exist on the ensemble; create it first "
                    f"(zkCli.sh create {chroot})"
                )

    def stop(self) -> None:
        """Close the session (ephemeral nodes of this session, if any, go away) and stop the dispatcher."""
        self._stopped = True
        try:
            self.client.stop()
            self.client.close()
        finally:
            with self._event_cond:
                self._event_cond.notify_all()

    @property
    def connected(self) -> bool:
        """True while the session is CONNECTED (not SUSPENDED or LOST)."""
        return bool(self.client.connected) and self.client.state == KazooState.CONNECTED

    @property
    def session_id(self) -> int | None:
        """The current session id, or ``None`` before the first session."""
        cid = self.client.client_id
        return int(cid[0]) if cid else None

    def add_session_listener(self, listener: SessionListener) -> None:
        """Call ``listener(state)`` with ``"CONNECTED"``, ``"SUSPENDED"`` or ``"LOST"`` on every change.

        Listeners run on the adapter's dispatcher thread, so they may call ZooKeeper
        (kazoo forbids blocking calls inside its own state listener).
        """
        self._listeners.append(listener)

    def _on_state(self, state: str) -> None:
        # Runs inside kazoo's event thread: no ZooKeeper calls here, just hand over.
        if state == KazooState.LOST:
            # The session is gone and with it every watch: nothing cached can be trusted.
            self.forget_all()
        with self._event_cond:
            self._state = str(state)
            self._events.append(str(state))
            self._event_cond.notify_all()

    def _dispatch(self) -> None:
        from zkop.zookeeper import metrics

        while True:
            with self._event_cond:
                while not self._events and not self._stopped:
                    self._event_cond.wait()
                if self._stopped and not self._events:
                    return
                state = self._events.pop(0)
            metrics.ZOOKEEPER_CONNECTED.set(1 if state == "CONNECTED" else 0)
            log.info("ZooKeeper session state: %s", state)
            for listener in list(self._listeners):
                try:
                    listener(state)
                except Exception:
                    log.exception("session listener failed")

    def probe(self, scratch_root: str = "/zkop/probe") -> None:
        """Write, read back and delete a scratch znode under ``scratch_root`` (parents created).

        Catches credentials or ACLs that let zkop connect but not read what it
        writes, before any managed znode is touched.

        Raises:
            ZooKeeperNoAuth: a step was refused, or the bytes read back differ.
            ZooKeeperUnavailable: the session failed meanwhile.
        """
        import os
        import uuid

        path = f"{scratch_root.rstrip('/')}/{uuid.uuid4().hex}"
        payload = os.urandom(16)
        self.execute([CreateNode(path, payload)])
        try:
            observed = self.read(path, OPEN_ACL)
            if observed is None or observed.data != payload:
                raise ZooKeeperNoAuth(f"start-up probe: {path} did not read back what was written")
        finally:
            with suppress(NoNodeError):
                self.execute([DeleteNode(path, 0)])

    # --- reads -------------------------------------------------------------------------------

    def read(self, path: str, expected_acl: tuple[AclEntry, ...] | None = OPEN_ACL, *,
             watch: bool = False, max_age: float | None = None, watch_absent: bool = True) -> Observed | None:
        """Read a znode's data and stat, and its ACL when it may differ from ``expected_acl``.

        The ACL costs a second round trip, so it is read only when the stat's
        ``aversion`` shows it changed since creation or a non-default ACL is
        expected; otherwise ``Observed.acl`` is ``None`` ("as created"). Pass
        ``expected_acl=None`` to always read it.

        With ``watch=True`` the read arms a ZooKeeper watch on the path (a data
        watch, or an exists watch if the node is absent) and remembers the
        result: until the watch fires (the node changed, was created or
        deleted — ZooKeeper Programmer's Guide, "ZooKeeper Watches") or the
        session is lost, the next watched read of the path is answered from
        memory without a round trip. Watch events are passed to the
        listeners of :meth:`add_watch_listener`. ``max_age`` (seconds, default
        :attr:`known_max_age`) bounds how long a remembered result is trusted.
        ``watch_absent=False`` skips the exists watch (one round trip) when the node
        is missing and the caller is about to create it; the caller then arms a
        data watch after the create (:meth:`execute` with ``arm_watches=True``), and
        "absent" is not remembered.

        Returns:
            The znode, or ``None`` if it does not exist.

        Raises:
            ZooKeeperUnavailable, ZooKeeperNoAuth, ConcurrentModification (changed between data and ACL reads).
        """
        return self.read_async(path, expected_acl, watch=watch, max_age=max_age, watch_absent=watch_absent).result()

    def read_async(self, path: str, expected_acl: tuple[AclEntry, ...] | None = OPEN_ACL, *,
                   watch: bool = False, max_age: float | None = None, watch_absent: bool = True) -> PendingRead:
        """Start :meth:`read` and return at once; :meth:`PendingRead.result` waits for it.

        ZooKeeper answers one session's requests in the order they were sent
        (Programmer's Guide, "ZooKeeper guarantees": sequential consistency), so
        several reads started back to back cost one round trip of latency instead
        of one each, and a caller can do other I/O (an API request) meanwhile.
        A remembered result (see :meth:`read`) completes at once, without a request.

        Raises:
            ZooKeeperUnavailable: not connected (raised here, not by ``result()``).
        """
        generation: int | None = None
        read_at = 0.0
        if watch:
            with self._known_lock:
                learned = self._absent.pop(path, None) if not watch_absent else None
                if learned is not None and time.monotonic() - learned < self.absent_max_age:
                    self.absent_hits += 1
                    return PendingRead(self, path, cached=None)
                if path in self._known:
                    at, cached = self._known[path]
                    fresh = time.monotonic() - at < (self.known_max_age if max_age is None else max_age)
                    if fresh and (cached is None or cached.acl is not None or (
                        expected_acl == OPEN_ACL and cached.acl_version == 0
                    )):
                        self.cache_hits += 1
                        return PendingRead(self, path, cached=cached)
                generation = self._invalidations.get(path, 0)
            read_at = time.monotonic()
        self._require_connected("read")
        self.reads += 1
        request = self.client.get_async(path, watch=self._on_watch if watch else None)
        return PendingRead(self, path, request=request, issued=time.monotonic(), expected_acl=expected_acl,
                           watch=watch, watch_absent=watch_absent, generation=generation, read_at=read_at)

    def settle(self, pending: Sequence[PendingRead]) -> None:
        """Wait (at most the session timeout) until the last of ``pending`` in flight is answered.

        ZooKeeper answers one session's requests in the order they were sent, so the
        earlier ones are answered by then too: their ``result()`` no longer blocks, and a
        worker wakes up once for a batch instead of once per request. Raises nothing;
        errors surface from ``result()``.
        """
        for read in reversed(pending):
            if read.request is not None:
                read.request.wait(self.options.session_timeout)
                return

    def _finish_read(self, pending: PendingRead) -> Observed | None:
        """Wait for a started read, complete it (exists watch, ACL) and remember it if watched."""
        path = pending.path
        with self._mapped("get", path, started=pending.issued):
            try:
                data, stat = self._wait(pending.request)
            except NoNodeError:
                stat = None
        observed: Observed | None = None
        if stat is None:
            if pending.watch and pending.watch_absent:
                with self._mapped("exists", path):
                    if self._wait(self.client.exists_async(path, watch=self._on_watch)) is not None:
                        raise ConcurrentModification(f"znode {path} appeared while being read")
        else:
            acl: tuple[AclEntry, ...] | None = None
            expected_acl = pending.expected_acl
            if expected_acl is None or stat.aversion > 0 or expected_acl != OPEN_ACL:
                with self._mapped("get_acls", path):
                    try:
                        acls, stat2 = self._wait(self.client.get_acls_async(path))
                    except NoNodeError:
                        raise ConcurrentModification(f"znode {path} vanished while being read") from None
                acl = from_kazoo_acl(acls)
                if stat2.version != stat.version:
                    raise ConcurrentModification(f"znode {path} changed while being read")
            observed = Observed(
                data=data or b"", version=stat.version, num_children=stat.numChildren,
                ephemeral_owner=stat.ephemeralOwner, acl_version=stat.aversion, acl=acl,
            )
        if pending.watch and (observed is not None or pending.watch_absent):
            self._remember(path, pending.generation, pending.read_at, observed)
        return observed

    def _remember(self, path: str, generation: int | None, read_at: float, observed: Observed | None) -> None:
        """Remember ``observed`` unless ``path`` was invalidated since ``generation`` was taken."""
        with self._known_lock:
            if self._invalidations.get(path, 0) == generation:
                self._known[path] = (read_at, observed)

    def learn_absent(self, paths: Iterable[str], *, min_per_parent: int = 2, max_children: int = 10_000) -> int:
        """Batch the first reads of a cold start: list each parent once and remember which paths are absent.

        For every parent directory holding at least ``min_per_parent`` of ``paths``,
        one ``exists`` (for ``numChildren``) and one ``getChildren`` — all sent back to
        back — replace a ``getData`` per path. A path found absent is answered
        ``None`` by the next :meth:`read_async` with ``watch=True, watch_absent=False``
        (the caller is about to create it), once, within :attr:`absent_max_age`
        seconds. That is only ever a hint for a create, and a create is conditional
        on absence by nature: if the node appeared meanwhile the create fails with
        ``NodeExists`` (:class:`ConcurrentModification`), and the caller reads again.
        Parents with more than ``max_children`` children are not listed (a reply
        that large is not worth it). Nothing is watched.

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
        self._require_connected("read")
        learned_at = time.monotonic()
        stats = [(parent, time.monotonic(), self.client.exists_async(parent)) for parent in parents]
        absent: list[str] = []
        listings: list[tuple[str, float, Any]] = []
        for parent, started, request in stats:
            with self._mapped("exists", parent, started=started):
                stat = self._wait(request)
            if stat is None:
                absent.extend(_join(parent, name) for name in by_parent[parent])
            elif stat.numChildren <= max_children:
                listings.append((parent, time.monotonic(), self.client.get_children_async(parent)))
        for parent, started, request in listings:
            with self._mapped("get_children", parent, started=started):
                try:
                    children = set(self._wait(request))
                except NoNodeError:
                    children = set()
            absent.extend(_join(parent, name) for name in by_parent[parent] if name not in children)
        with self._known_lock:
            for path in absent:
                if path not in self._known:
                    self._absent[path] = learned_at
        return len(absent)

    def watch_children(self, path: str) -> list[str] | None:
        """List the children of ``path`` and arm a child watch on it.

        When the children change the watch fires and the listeners of
        :meth:`add_watch_listener` get ``path`` — used to retry a deletion that
        waits for its children to go, without waiting for backoff.

        Returns:
            The children's names, or ``None`` if ``path`` does not exist.
        """
        with self._mapped("get_children", path):
            try:
                return list(self._wait(self.client.get_children_async(path, watch=self._on_watch)))
            except NoNodeError:
                return None

    def add_watch_listener(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(path)`` whenever a watch armed by a watched :meth:`read` fires.

        Runs on kazoo's event thread: the listener must not block or call ZooKeeper
        (enqueue a key and return).
        """
        self._watch_listeners.append(listener)

    def _on_watch(self, event: Any) -> None:
        path = str(event.path)
        self.forget(path)
        for listener in list(self._watch_listeners):
            try:
                listener(path)
            except Exception:
                log.exception("watch listener failed")

    def forget(self, path: str) -> None:
        """Drop what is remembered about ``path`` (the next watched read goes to ZooKeeper)."""
        with self._known_lock:
            self._known.pop(path, None)
            self._absent.pop(path, None)
            self._invalidations[path] = self._invalidations.get(path, 0) + 1

    def forget_all(self) -> None:
        """Drop everything remembered (after a session loss every watch is gone)."""
        with self._known_lock:
            for path in self._known:
                self._invalidations[path] = self._invalidations.get(path, 0) + 1
            self._known.clear()
            self._absent.clear()

    def _require_connected(self, what: str) -> None:
        if not self.connected:
            self.consecutive_failures += 1
            raise ZooKeeperUnavailable(f"ZooKeeper session is {self.client.state}; {what} refused until it is back")

    def children(self, path: str) -> list[str] | None:
        """Children names of ``path`` (unsorted), or ``None`` if it does not exist."""
        with self._mapped("get_children", path):
            try:
                return list(self._wait(self.client.get_children_async(path)))
            except NoNodeError:
                return None

    # --- writes ------------------------------------------------------------------------------

    def execute(self, actions: Sequence[Action], *, atomic: bool = False, arm_watches: bool = False,
                require: Sequence[CheckVersion] = ()) -> None:
        """Execute plan actions in order, each conditional on the version it was planned from.

        Idempotent under retries after a lost reply: a create that finds the node
        holding the intended bytes succeeds; a delete that finds nothing succeeds.

        Args:
            actions: the writes, in order.
            atomic: run several actions as one ZooKeeper ``multi`` (all succeed or none
                does, one round trip; Programmer's Guide, "multi"), creating missing
                parents and retrying once if a create finds no parent. ``multi`` has no
                setACL operation, so a batch with a :class:`SetAcl` runs one by one.
                After a failed ``multi`` nothing was written: read and plan again.
            arm_watches: after the writes, arm a data watch on every node created (a
                watched read sent right behind the writes, so it adds a request but no
                round trip of latency) and remember what it read, like a watched :meth:`read`.
            require: preconditions checked in the same ``multi`` as the writes (ZooKeeper's
                ``check``); with nothing to write nothing is checked. A batch with a
                :class:`SetAcl` checks them with a read first (not atomic).

        Raises:
            ConcurrentModification: the node changed since it was read; read and plan again.
            ZooKeeperUnavailable: not connected (SUSPENDED/LOST) or the request failed in transit.
            ZooKeeperNoAuth: the ACL forbids the write.
        """
        if not actions:
            return
        has_acl = any(isinstance(a, SetAcl) for a in actions)
        if (require or (atomic and len(actions) > 1)) and not has_acl:
            self._require_connected("writes")
            for action in actions:
                self.forget(action.path)
            self._commit(actions, arm_watches, require)
            return
        for check in require:
            self._require_connected("writes")
            with self._mapped("exists", check.path):
                stat = self._wait(self.client.exists_async(check.path))
            if stat is None or stat.version != check.version:
                raise ConcurrentModification(f"znode {check.path} changed (version is no longer {check.version})")
        for action in actions:
            self._require_connected("writes")
            self.forget(action.path)
            if isinstance(action, CreateNode):
                self._create(action)
            elif isinstance(action, SetData):
                self._set(action)
            elif isinstance(action, SetAcl):
                self._set_acl(action)
            elif isinstance(action, DeleteNode):
                self._delete(action)
            else:  # pragma: no cover - exhaustive
                raise TypeError(f"unknown action {action!r}")
        if arm_watches:
            reads = [self.read_async(a.path, a.acl, watch=True) for a in actions if isinstance(a, CreateNode)]
            self.settle(reads)
            for pending in reads:
                pending.result()

    def _commit(self, actions: Sequence[Action], arm_watches: bool, require: Sequence[CheckVersion] = ()) -> None:
        """Run ``require`` checks and ``actions`` as one ``multi``; see :meth:`execute`."""
        creates = [a for a in actions if isinstance(a, CreateNode)]
        for attempt in range(2):
            transaction = self.client.transaction()
            for check in require:
                transaction.check(check.path, check.version)
            for action in actions:
                if isinstance(action, CreateNode):
                    transaction.create(action.path, action.data, acl=to_kazoo_acl(action.acl))
                elif isinstance(action, SetData):
                    transaction.set_data(action.path, action.data, version=action.expected_version)
                elif isinstance(action, DeleteNode):
                    transaction.delete(action.path, version=action.expected_version)
                else:  # pragma: no cover - execute() never sends SetAcl here
                    raise TypeError(f"{action!r} cannot run in a multi")
            started = time.monotonic()
            request = transaction.commit_async()
            # Sent behind the multi on the same session, so answered after it (in order).
            reads = [self.read_async(a.path, a.acl, watch=True) for a in creates] if arm_watches else []
            self.settle(reads)
            failed: tuple[CheckVersion | Action, Exception] | None
            try:
                with self._mapped("multi", actions[0].path, started=started):
                    results = list(self._wait(request))
                failed = next(((a, r) for a, r in zip([*require, *actions], results, strict=False)
                               if isinstance(r, Exception) and not isinstance(r, RolledBackError)), None)
            except (NoNodeError, NodeExistsError, BadVersionError, NotEmptyError) as err:
                # A server that reports the failure in the reply header names no operation: a NoNode
                # is taken as a missing parent when there are creates, as ZooKeeper 3.8 would say.
                failed = (creates[0] if isinstance(err, NoNodeError) and creates else actions[0], err)
            if failed is None:
                for pending in reads:
                    pending.result()
                return
            step, error = failed
            for pending in reads:
                self.forget(pending.path)  # what the reads saw belongs to no write of ours
            if isinstance(error, NoNodeError) and isinstance(step, CreateNode) and not attempt:
                parent_acl = to_kazoo_acl(self.options.parent_acl)
                for parent in sorted({p for a in creates for p in parent_paths(a.path)}, key=len):
                    with self._mapped("create", parent), suppress(NodeExistsError):
                        self._wait(self.client.create_async(parent, b"", acl=parent_acl))
                continue
            if isinstance(error, NoAuthError):
                raise ZooKeeperNoAuth(f"ZooKeeper refused the write of {step.path}: not authorised (NoAuth)")
            raise ConcurrentModification(
                f"znode {step.path} changed since it was read ({type(error).__name__}); nothing was written"
            )
        raise ConcurrentModification(f"a parent of {creates[0].path} vanished during create")  # pragma: no cover

    def _create(self, action: CreateNode) -> None:
        # Try the node itself first: when its parents exist (the common case) that is one round trip.
        for attempt in range(2):
            with self._mapped("create", action.path):
                try:
                    self._wait(self.client.create_async(action.path, action.data, acl=to_kazoo_acl(action.acl)))
                    return
                except NodeExistsError:
                    break
                except NoNodeError:
                    if attempt:
                        raise ConcurrentModification(f"a parent of {action.path} vanished during create") from None
            parent_acl = to_kazoo_acl(self.options.parent_acl)
            for parent in parent_paths(action.path):
                with self._mapped("create", parent), suppress(NodeExistsError):
                    self._wait(self.client.create_async(parent, b"", acl=parent_acl))
        current = self.read(action.path)
        if current is not None and current.data == action.data and not current.ephemeral_owner:
            return  # our earlier create whose reply was lost, or someone wrote the same bytes
        raise ConcurrentModification(f"znode {action.path} appeared with other data before it could be created")

    def _set(self, action: SetData) -> None:
        with self._mapped("set", action.path):
            try:
                self._wait(self.client.set_async(action.path, action.data, version=action.expected_version))
                return
            except BadVersionError:
                pass
            except NoNodeError:
                raise ConcurrentModification(f"znode {action.path} was deleted before it could be updated") from None
        current = self.read(action.path)
        if current is not None and current.data == action.data:
            return  # the write went through and the reply was lost
        raise ConcurrentModification(f"znode {action.path} changed (version is no longer {action.expected_version})")

    def _set_acl(self, action: SetAcl) -> None:
        with self._mapped("set_acls", action.path):
            try:
                acl = to_kazoo_acl(action.acl)
                self._wait(self.client.set_acls_async(action.path, acl, version=action.expected_acl_version))
            except BadVersionError:
                raise ConcurrentModification(f"ACL of znode {action.path} changed meanwhile") from None
            except NoNodeError:
                raise ConcurrentModification(f"znode {action.path} was deleted before its ACL was set") from None

    def _delete(self, action: DeleteNode) -> None:
        with self._mapped("delete", action.path):
            try:
                self._wait(self.client.delete_async(action.path, version=action.expected_version))
            except NoNodeError:
                return
            except BadVersionError:
                raise ConcurrentModification(
                    f"znode {action.path} changed (version is no longer {action.expected_version})"
                ) from None
            except NotEmptyError:
                raise ConcurrentModification(f"znode {action.path} has children; not deleted") from None

    # --- error mapping and metrics -----------------------------------------------------------

    def _wait(self, result: Any) -> Any:
        """Wait for a kazoo async result at most the session timeout.

        kazoo's synchronous calls wait without a bound; a request caught in a
        connection hand-over must not hold a worker forever. A timeout raises
        kazoo's timeout error, which :meth:`_mapped` turns into ZooKeeperUnavailable.
        """
        return result.get(timeout=self.options.session_timeout)

    @contextmanager
    def _mapped(self, operation: str, path: str, started: float | None = None) -> Iterator[None]:
        """Map kazoo's errors to the adapter's and time the request (from ``started``, default now)."""
        from zkop.zookeeper import metrics

        if started is None:
            started = time.monotonic()
        try:
            yield
            self.consecutive_failures = 0
        except (ConnectionLoss, SessionExpiredError, OperationTimeoutError, KazooTimeoutError) as err:
            self.consecutive_failures += 1
            metrics.ZOOKEEPER_REQUEST_ERRORS.labels(operation, type(err).__name__).inc()
            raise ZooKeeperUnavailable(f"ZooKeeper {operation} {path} failed: {type(err).__name__}") from err
        except NoAuthError as err:
            metrics.ZOOKEEPER_REQUEST_ERRORS.labels(operation, "NoAuthError").inc()
            raise ZooKeeperNoAuth(f"ZooKeeper refused {operation} on {path}: not authorised (NoAuth)") from err
        except KazooException as err:
            if not isinstance(err, (NoNodeError, NodeExistsError, BadVersionError, NotEmptyError)):
                metrics.ZOOKEEPER_REQUEST_ERRORS.labels(operation, type(err).__name__).inc()
            else:
                self.consecutive_failures = 0
            raise
        finally:
            histogram = self._durations.get(operation)
            if histogram is None:
                histogram = self._durations[operation] = metrics.ZOOKEEPER_REQUEST_DURATION.labels(operation)
            histogram.observe(time.monotonic() - started)
