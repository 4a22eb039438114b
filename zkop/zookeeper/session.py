"""The kazoo session: lifecycle, connection states, bounded waits, error mapping and request metrics.

Session states follow the ZooKeeper Programmer's Guide ("ZooKeeper Sessions") and kazoo's
``KazooState``: CONNECTED, SUSPENDED (connection lost, session may still be alive) and LOST
(session expired). Listeners registered with :meth:`Session.add_listener` are called from a
separate thread, never inside kazoo's own state callback.

Every request of the ZooKeeper layer runs inside :meth:`Session.mapped` (kazoo errors become
:mod:`zkop.zookeeper.errors`, the request is timed in ``zkop_zookeeper_request_duration_seconds``)
and waits through :meth:`Session.wait` (at most the session timeout: kazoo's synchronous calls
wait without a bound, and a request queued while the connection is down would wait as long as
the server stays away).
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import AuthFailedError, KazooException
from kazoo.handlers.threading import KazooTimeoutError

from zkop.zookeeper import metrics
from zkop.zookeeper.actions import OPEN_ACL, AclEntry
from zkop.zookeeper.errors import CONFLICTS, ZooKeeperError, ZooKeeperUnavailable, map_kazoo_error
from zkop.zookeeper.handler import SelectHandler

__all__ = ["ConnectionOptions", "Session", "SessionListener", "split_chroot"]

log = logging.getLogger(__name__)

#: ``listener(state)`` with ``"CONNECTED"``, ``"SUSPENDED"`` or ``"LOST"``.
SessionListener = Callable[[str], None]


@dataclass(frozen=True)
class ConnectionOptions:
    """How to reach the ensemble.

    Attributes:
        hosts: connect string ``host:port[,host:port…][/chroot]`` (ZooKeeper Programmer's Guide,
            "Connecting"); the chroot must already exist.
        session_timeout: requested session timeout, seconds (the server clamps it to
            [2, 20] × tickTime by default); also the longest any request waits for its answer.
        auth: ``(scheme, credential)`` pairs, e.g. ``("digest", "user:password")``.
        use_tls, tls_ca_file, tls_cert_file, tls_key_file: TLS to the client port.
        connect_timeout: seconds to wait for the first session in :meth:`Session.start`.
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


def split_chroot(hosts: str) -> tuple[str, str]:
    """Split ``"h1:2181,h2:2181/app"`` into ``("h1:2181,h2:2181", "/app")``; chroot ``""`` if none."""
    index = hosts.find("/")
    if index < 0:
        return hosts, ""
    return hosts[:index], hosts[index:].rstrip("/")


def build_client(options: ConnectionOptions) -> KazooClient:
    """A kazoo client for ``options``: endless reconnects (0.2 s doubling to 5 s), zkop's select handler, TLS."""
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


class Session:
    """One kazoo session shared by every ZooKeeper request of the process.

    Thread-safe: kazoo multiplexes calls from many worker threads over one session.

    Args:
        options: connection settings.
        client: an already built :class:`KazooClient` (tests); built from ``options`` if ``None``.
        on_lost: called inside kazoo's state callback when the session is LOST (every watch is
            gone with it); must not block or call ZooKeeper.

    Attributes:
        consecutive_failures: requests refused or failed for lack of a session since the last
            one that reached the server (a conflict reached it). Not locked: an estimate.
    """

    def __init__(self, options: ConnectionOptions, client: KazooClient | None = None, *,
                 on_lost: Callable[[], None] | None = None) -> None:
        self.options = options
        self.client = client or build_client(options)
        self.consecutive_failures = 0
        self._on_lost = on_lost
        self._listeners: list[SessionListener] = []
        self._state = "LOST"
        self._events: list[str] = []
        self._event_cond = threading.Condition(threading.Lock())
        self._stopped = False
        self._dispatcher = threading.Thread(target=self._dispatch, name="zk-session-events", daemon=True)
        self._durations: dict[str, Any] = {}  # operation -> labelled histogram child
        self.client.add_listener(self._on_state)

    # --- lifecycle ----------------------------------------------------------------------------

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
            mapped = map_kazoo_error(err, "connect", self.options.hosts)
            assert mapped is not None
            raise mapped from err
        _, chroot = split_chroot(self.options.hosts)
        if chroot:
            with self.mapped("exists", "/"):
                # Inside a chroot "/" is the chroot node itself.
                exists = self.wait(self.client.exists_async("/"))
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

    def add_listener(self, listener: SessionListener) -> None:
        """Call ``listener(state)`` with ``"CONNECTED"``, ``"SUSPENDED"`` or ``"LOST"`` on every change.

        Listeners run on the session's dispatcher thread, so they may call ZooKeeper
        (kazoo forbids blocking calls inside its own state listener).
        """
        self._listeners.append(listener)

    def _on_state(self, state: str) -> None:
        # Runs inside kazoo's event thread: no ZooKeeper calls here, just hand over.
        if state == KazooState.LOST and self._on_lost is not None:
            self._on_lost()
        with self._event_cond:
            self._state = str(state)
            self._events.append(str(state))
            self._event_cond.notify_all()

    def _dispatch(self) -> None:
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

    # --- requests -----------------------------------------------------------------------------

    def require_connected(self, what: str) -> None:
        """Refuse ``what`` (``"read"``, ``"writes"``) unless CONNECTED.

        Raises:
            ZooKeeperUnavailable: the session is SUSPENDED or LOST (counted as a failure).
        """
        if not self.connected:
            self.consecutive_failures += 1
            raise ZooKeeperUnavailable(f"ZooKeeper session is {self.client.state}; {what} refused until it is back")

    def wait(self, result: Any) -> Any:
        """The value of kazoo async ``result``, waiting at most ``options.session_timeout`` seconds.

        A request caught in a connection hand-over, or queued by kazoo while the server is
        away, must not hold a worker forever. Run it inside :meth:`mapped`, which turns the
        timeout into :class:`ZooKeeperUnavailable`.

        Raises:
            KazooTimeoutError: no answer in time; kazoo's own error for a failed request.
        """
        return result.get(timeout=self.options.session_timeout)

    @contextmanager
    def mapped(self, operation: str, path: str, started: float | None = None) -> Iterator[None]:
        """Map kazoo's errors (:func:`~zkop.zookeeper.errors.map_kazoo_error`) and time the request.

        ``started`` is when the request was sent (``time.monotonic()`` seconds; default now).
        :data:`~zkop.zookeeper.errors.CONFLICTS` and kazoo errors without a mapping pass through
        unchanged; everything but a conflict is counted in ``zkop_zookeeper_request_errors_total``.

        Raises:
            ZooKeeperUnavailable, ZooKeeperNoAuth: mapped from kazoo's errors.
        """
        if started is None:
            started = time.monotonic()
        try:
            yield
            self.consecutive_failures = 0
        except (KazooException, KazooTimeoutError) as err:
            mapped: ZooKeeperError | None = map_kazoo_error(err, operation, path)
            if isinstance(err, CONFLICTS):
                self.consecutive_failures = 0
                raise
            if isinstance(mapped, ZooKeeperUnavailable):
                self.consecutive_failures += 1
            metrics.ZOOKEEPER_REQUEST_ERRORS.labels(operation, type(err).__name__).inc()
            if mapped is None:
                raise
            raise mapped from err
        finally:
            histogram = self._durations.get(operation)
            if histogram is None:
                histogram = self._durations[operation] = metrics.ZOOKEEPER_REQUEST_DURATION.labels(operation)
            histogram.observe(time.monotonic() - started)
