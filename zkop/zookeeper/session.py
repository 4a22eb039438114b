"""The kazoo session: lifecycle, connection states, bounded waits, error mapping and request metrics.

States are kazoo's ``KazooState`` (Programmer's Guide, "ZooKeeper Sessions"): CONNECTED, SUSPENDED
(connection lost, session may be alive), LOST (expired). :meth:`Session.add_listener` listeners run
on a thread of their own, never inside kazoo's state callback.

Every request of the ZooKeeper layer runs inside :meth:`Session.mapped` (kazoo errors become
:mod:`zkop.zookeeper.errors`; timed in ``zkop_zookeeper_request_duration_seconds``) and waits
through :meth:`Session.wait`, at most the session timeout (kazoo's synchronous calls wait without a
bound). A session that cannot come back is made anew: :mod:`zkop.zookeeper.reset`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from types import TracebackType
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import AuthFailedError, KazooException, SASLException
from kazoo.handlers.threading import KazooTimeoutError

from zkop.zookeeper import metrics
from zkop.zookeeper.connect_guard import ConnectGuard
from zkop.zookeeper.connection import ConnectionOptions, build_client, split_chroot
from zkop.zookeeper.errors import (
    CONFLICTS,
    ZooKeeperError,
    ZooKeeperNoAuth,
    ZooKeeperUnavailable,
    map_kazoo_error,
)
from zkop.zookeeper.reset import SuspensionWatchdog, restart_from_scratch, zxid_refused
from zkop.zookeeper.threads import join_bounded

__all__ = ["ConnectionOptions", "Session", "SessionListener", "build_client", "split_chroot"]

log = logging.getLogger(__name__)

#: Seconds a refusal probe waits for a server's answer (a healthy handshake takes milliseconds).
PROBE_TIMEOUT = 3.0

#: ``listener(state)`` with ``"CONNECTED"``, ``"SUSPENDED"`` or ``"LOST"``.
SessionListener = Callable[[str], None]


class Session:
    """One kazoo session shared by every ZooKeeper request of the process.

    Thread-safe: kazoo multiplexes calls from many worker threads over one session.

    Args:
        client: an already built :class:`KazooClient` (tests); built from ``options`` if ``None``.
        on_lost: called inside kazoo's state callback when the session is LOST (every watch is
            gone with it); must not block or call ZooKeeper.
    """

    def __init__(self, options: ConnectionOptions, client: KazooClient | None = None, *,
                 on_lost: Callable[[], None] | None = None) -> None:
        self.options = options
        self.client = client or build_client(options)
        self._on_lost = on_lost
        self._listeners: list[SessionListener] = []
        self._state = "LOST"
        self._events: list[str] = []
        self._event_cond = threading.Condition(threading.Lock())
        self._stopped = False
        self._closed = False  # the client is stopped: no state event comes after the queued ones (_event_cond)
        self._dispatcher = threading.Thread(target=self._dispatch, name="zk-session-events", daemon=True)
        self._dispatched = False  # _dispatch returned or raised (not is_alive(): see health_check)
        self._durations: dict[str, Any] = {}  # operation -> labelled histogram child
        self._last_session_id: int | None = None  # of the last CONNECTED session (kazoo hides it while SUSPENDED)
        self._lifecycle = threading.Lock()  # one of stop() and a reset at a time
        percent = options.session_expiration_percent
        self._watchdog = SuspensionWatchdog(
            options.session_timeout * percent / 100 if percent > 0 else None, self._reset,
            refused=self._refused, check_interval=options.refusal_check_interval,
        )
        self.client.add_listener(self._on_state)
        self._guard = ConnectGuard(options, self.client, watch_files=client is None, on_rotated=self._renew)

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Open the session and check that the chroot (if any) exists.

        Raises:
            ZooKeeperUnavailable: no session within ``connect_timeout`` seconds, or the chroot is missing.
            ZooKeeperNoAuth: the server rejected the auth data.
        """
        if self._dispatcher.ident is None and not self._stopped:
            self._dispatcher.start()
        self._watchdog.start()
        try:
            self._connect()
        except KazooTimeoutError as err:
            if self._guard.last_error:
                raise ZooKeeperUnavailable(
                    f"could not connect to ZooKeeper at {self.options.hosts}: {self._guard.last_error}") from err
            raise ZooKeeperUnavailable(
                f"could not connect to ZooKeeper at {self.options.hosts} within {self.options.connect_timeout:g} s"
            ) from err
        except AuthFailedError as err:
            mapped = map_kazoo_error(err, "connect", self.options.hosts)
            assert mapped is not None
            raise mapped from err
        self._guard.rotation.start()
        if self.options.sasl_mechanism:
            self._check_sasl()
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

    def _connect(self) -> None:
        """kazoo's ``client.start(connect_timeout)``, giving up early when TLS fails at every host.

        A certificate the client refuses (untrusted, wrong host name) or a handshake the server
        refuses fails the same way on every retry until the files change, so waiting out
        ``connect_timeout`` tells nothing more; the reason is in :attr:`last_connect_error`.

        Raises:
            KazooTimeoutError: no session (the client is stopped again, as kazoo's ``start`` does).
            ZooKeeperNoAuth: the server rejected the SASL login or the auth data (``AUTH_FAILED``).
        """
        self._guard.attempt()
        live = self.client.start_async()
        if not live.is_set():
            self._guard.wake.wait(self.options.connect_timeout)
        if not self.client.connected:
            # kazoo announces CONNECTED before the SASL exchange: a rejected login may already have
            # ended the session (AUTH_FAILED) by the time we look.
            rejected = self._guard.sasl_rejected() if self._guard.auth_failed() else None
            self.client.stop()
            self.client.close()
            if rejected is not None:
                raise ZooKeeperNoAuth(rejected)
            raise KazooTimeoutError("Connection time-out")

    def stop(self, timeout: float | None = None) -> None:
        """Close the session (ephemeral nodes of this session, if any, go away) and end every thread it started.

        The order of controller-runtime's shutdown [CR pkg/manager/internal.go ``engageStopProcedure``]:
        stop the sources (the credentials watcher and the suspension watchdog, joined: no session
        renewal or reset starts after that), close the client (kazoo's ``stop`` joins its
        connection thread and its handler's two worker threads, so no state change comes after
        it), then let the dispatcher deliver what is queued (the final LOST) and join it. Each
        join waits at most ``timeout`` seconds (default: the session timeout); a thread still
        running then is logged. Idempotent; called on one of the session's own threads (a
        listener), that thread is not joined.
        """
        bound = self.options.session_timeout if timeout is None else timeout
        self._stopped = True
        self._guard.wake.set()  # ends the wait of a start or a renewal in progress
        self._guard.rotation.stop(bound)
        self._watchdog.stop(bound)
        try:
            with self._lifecycle:
                self.client.stop()
                self.client.close()
        finally:
            with self._event_cond:
                self._closed = True
                self._event_cond.notify_all()
            join_bounded(self._dispatcher, bound)

    def health_check(self) -> str | None:
        """``None``, or which of the session's own threads ended while it is open (an exception nothing caught).

        The event dispatcher delivers state changes (the resync after a reconnect), the suspension
        watchdog resets a session the ensemble lost, the credentials watcher notices rotated
        files; each ends only in :meth:`stop`. kazoo's own threads are kazoo's.
        """
        if self._stopped:
            return None
        ended = [name for name, gone in (
            # Decided by its loop having ended, not by is_alive(): a thread being started has an ident before it
            # is alive, and a check in that moment (the Manager's, while a session starts) took it for dead.
            (self._dispatcher.name, self._dispatched),
            ("zk-session-watchdog", self._watchdog.ended()),
            ("zk-credentials-watch", self._guard.rotation.ended()),
        ) if gone]
        return f"ZooKeeper session threads ended: {', '.join(ended)}" if ended else None

    @property
    def connected(self) -> bool:
        """True while the session is CONNECTED (not SUSPENDED or LOST)."""
        return bool(self.client.connected) and self.client.state == KazooState.CONNECTED

    @property
    def unavailable_reason(self) -> str | None:
        """Why there is no usable session (for readiness and status), or ``None`` while CONNECTED.

        Names the reset while one lasts (from the declaration of LOST until the new session
        is CONNECTED), and how long a SUSPENDED session has left before it is reset.
        """
        if self.connected:
            return None
        return self._watchdog.reason() or f"ZooKeeper session is {self.client.state}"

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
        if state == KazooState.CONNECTED:
            self._last_session_id = self.session_id
        self._watchdog.on_state(str(state))
        with self._event_cond:
            self._state = str(state)
            self._events.append(str(state))
            self._event_cond.notify_all()

    # --- session reset (Curator's rule) ---------------------------------------------------------

    def _refused(self) -> bool:
        """Does the ensemble refuse this session for having seen a newer zxid (:func:`zxid_refused`)?

        Each probe waits at most :data:`PROBE_TIMEOUT` seconds (also its handshake's read timeout):
        a server shutting down or starting accepts TCP connections it does not answer, and a probe
        stuck on one for the whole session timeout would leave only the time rule.
        """
        last_zxid = int(self.client.last_zxid or 0)
        timeout = min(self.options.session_timeout, PROBE_TIMEOUT)
        probe_options = replace(self.options, session_timeout=timeout)
        return zxid_refused(lambda retry, handler, logger: build_client(probe_options, retry, handler, logger),
                            last_zxid, timeout)

    def _reset(self, reason: str) -> None:
        """Declare the session LOST and make a new one from scratch (:func:`restart_from_scratch`).

        Runs on the watchdog's thread. Listeners get LOST (the watch-validated cache is dropped in
        ``on_lost``), then CONNECTED once the new session is up.

        Raises:
            RuntimeError: see :func:`restart_from_scratch` (the watchdog tries again later).
        """
        log.warning(
            "ZooKeeper session %#x given up: %s. Declaring it LOST and starting a new session from scratch "
            "(no session id, zxid 0); every watch is re-armed and every managed znode rewritten.",
            self._last_session_id or 0, reason,
        )
        metrics.ZOOKEEPER_SESSION_RESETS.inc()
        with self._lifecycle:
            if not self._stopped:
                restart_from_scratch(self.client)

    def _dispatch(self) -> None:
        try:
            self._dispatch_events()
        finally:
            self._dispatched = True

    def _dispatch_events(self) -> None:
        while True:
            with self._event_cond:
                while not self._events and not self._closed:
                    self._event_cond.wait()
                if self._closed and not self._events:
                    return
                state = self._events.pop(0)
            if self.options.report_connected:
                metrics.ZOOKEEPER_CONNECTED.set(1 if state == "CONNECTED" else 0)
            log.info("ZooKeeper session state: %s", state)
            for listener in list(self._listeners):
                try:
                    listener(state)
                except Exception:
                    log.exception("session listener failed")

    # --- TLS/SASL: errors and rotated files (zkop.zookeeper.connect_guard) ---------------------

    @property
    def last_connect_error(self) -> str | None:
        """Why the last connection attempt failed (one line), or ``None`` once a connection is up.

        Covers the socket and the TLS handshake and a rejected SASL authentication
        (:meth:`ConnectGuard.describe <zkop.zookeeper.connect_guard.ConnectGuard.describe>`).
        """
        return self._guard.describe(self.connected)

    def _renew(self, changed: list[str]) -> None:
        """Open a new session with the rotated files ``changed`` (called by the rotation watcher).

        A live connection keeps the identity it authenticated with (the TLS handshake and SASL run
        once per connection), so a rotated file takes effect only with a new connection; zkop makes a
        new session, as after a LOST one (every watch re-armed, everything resynced by the listeners).
        """
        if self._stopped:
            return
        log.info("credentials files changed (%s): opening a new ZooKeeper session with them", ", ".join(changed))
        self._guard.reload_credentials()
        with self._lifecycle:  # not at the same time as stop() or a session reset (zookeeper/reset.py)
            if self._stopped:
                return
            self._guard.attempt()
            self.client.stop()
            # kazoo's start() stops the client again on a time-out; start_async keeps it reconnecting instead.
            live = self.client.start_async()
        if not live.is_set():
            self._guard.wake.wait(self.options.connect_timeout)  # settled, or stop() (which joins this thread)
        if not live.is_set() and not self._stopped:
            log.error("no ZooKeeper session with the rotated files yet (still trying): %s",
                      self.last_connect_error or "no answer")

    def _check_sasl(self) -> None:
        """Wait for the SASL exchange that kazoo runs right after CONNECTED, and report a rejection.

        kazoo announces CONNECTED before it authenticates (``ConnectionHandler._connect``), so
        ``start()`` returns before the server has accepted the SASL credentials; a request queued
        now is answered only after the exchange, or fails with ``AuthFailedError``.

        Raises:
            ZooKeeperNoAuth: the server rejected the SASL authentication (the connect guard's message).
            ZooKeeperUnavailable: no answer within the session timeout.
        """
        try:
            with self.mapped("exists", "/"):
                self.wait(self.client.exists_async("/"))
        except (ZooKeeperNoAuth, ZooKeeperUnavailable) as err:
            if isinstance(err, ZooKeeperNoAuth) or self._guard.auth_failed():
                raise ZooKeeperNoAuth(self._guard.sasl_rejected()) from err
            raise
        except SASLException as err:  # pure-sasl missing, or its own failure
            raise ZooKeeperNoAuth(f"SASL {self.options.sasl_mechanism} failed on the client: {err}") from err

    # --- requests -----------------------------------------------------------------------------

    def require_connected(self, what: str) -> None:
        """Refuse ``what`` (``"read"``, ``"writes"``) unless CONNECTED.

        Raises:
            ZooKeeperUnavailable: the session is SUSPENDED or LOST.
        """
        if not self.connected:
            reason = self.unavailable_reason or f"ZooKeeper session is {self.client.state}"
            raise ZooKeeperUnavailable(f"{reason}; {what} refused until it is back")

    def wait(self, result: Any) -> Any:
        """The value of kazoo async ``result``, waiting at most ``options.session_timeout`` seconds.

        A request caught in a connection hand-over, or queued by kazoo while the server is
        away, must not hold a worker forever. Run it inside :meth:`mapped`, which turns the
        timeout into :class:`ZooKeeperUnavailable`.

        Raises:
            KazooTimeoutError: no answer in time; kazoo's own error for a failed request.
        """
        return result.get(timeout=self.options.session_timeout)

    def mapped(self, operation: str, path: str, started: float | None = None) -> _Mapped:
        """Map kazoo's errors (:func:`~zkop.zookeeper.errors.map_kazoo_error`) and time the request.

        ``started`` is when the request was sent (``time.monotonic()`` seconds; default now).
        :data:`~zkop.zookeeper.errors.CONFLICTS` and kazoo errors without a mapping pass through
        unchanged; everything but a conflict is counted in ``zkop_zookeeper_request_errors_total``.

        Raises:
            ZooKeeperUnavailable, ZooKeeperNoAuth: mapped from kazoo's errors.
        """
        return _Mapped(self._duration(operation), operation, path, time.monotonic() if started is None else started)

    def _duration(self, operation: str) -> Any:
        """The ``zkop_zookeeper_request_duration_seconds`` child of ``operation`` (looked up once)."""
        histogram = self._durations.get(operation)
        if histogram is None:
            histogram = self._durations[operation] = metrics.ZOOKEEPER_REQUEST_DURATION.labels(operation)
        return histogram


class _Mapped:
    """The context manager of :meth:`Session.mapped`: a plain class, not a ``contextmanager`` generator,
    since it wraps every ZooKeeper request."""

    __slots__ = ("histogram", "operation", "path", "started")

    def __init__(self, histogram: Any, operation: str, path: str, started: float) -> None:
        self.histogram, self.operation, self.path, self.started = histogram, operation, path, started

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None,
                 ) -> None:
        try:
            if isinstance(err, KazooException | KazooTimeoutError):
                mapped: ZooKeeperError | None = map_kazoo_error(err, self.operation, self.path)
                if isinstance(err, CONFLICTS):
                    return  # passes through unchanged
                metrics.ZOOKEEPER_REQUEST_ERRORS.labels(self.operation, type(err).__name__).inc()
                if mapped is None:
                    return
                raise mapped from err
        finally:
            self.histogram.observe(time.monotonic() - self.started)
