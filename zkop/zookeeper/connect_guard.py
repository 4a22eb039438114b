"""The connect guard: why a kazoo client cannot connect (socket, TLS, SASL), and its rotated credentials files.

kazoo retries a failed connection forever and only logs ``Connection dropped``; a certificate the
client refuses or a SASL login the server rejects fails the same way on every retry until the
files change. :class:`ConnectGuard` hooks into :class:`~zkop.zookeeper.handler.SelectHandler` to
keep the last reason (one line, for readiness and status), to tell the session's start when TLS
failed at every host (waiting out ``connect_timeout`` tells nothing more), and to absorb rotated
TLS/SASL/digest files before each connection attempt (:class:`~zkop.zookeeper.security.RotationWatcher`).
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.protocol.states import KeeperState

from zkop.zookeeper.connection import ConnectionOptions
from zkop.zookeeper.handler import SelectHandler
from zkop.zookeeper.security import (
    CredentialsError,
    RotationWatcher,
    WatchedFiles,
    describe_connect_error,
    read_digest_file,
    sasl_options,
)

__all__ = ["ConnectGuard"]

log = logging.getLogger("zkop.zookeeper.session")  # the session's log, as before the guard had its own module


class ConnectGuard:
    """Connection errors and credentials rotation of one kazoo client.

    Args:
        options: the session's connection settings (hosts, TLS, SASL and digest files).
        client: the session's client; a :class:`SelectHandler` gets the guard's hooks.
        watch_files: watch the credentials files of ``options`` (False for a client built by a test).
        on_rotated: ``on_rotated(paths)`` is called on the rotation watcher's thread when files
            changed while connected (the session opens a new one with them).

    Attributes:
        wake: set when a connection attempt settled: CONNECTED, or TLS refused at every host
            (:meth:`attempt` clears it); the session's ``stop`` sets it to end a wait on it.
        rotation: the watcher of the credentials files (started by the session once connected).
    """

    def __init__(self, options: ConnectionOptions, client: KazooClient, *, watch_files: bool,
                 on_rotated: Callable[[list[str]], None]) -> None:
        self.options = options
        self.client = client
        self.last_error: str | None = None
        self.wake = threading.Event()
        self._tls_refusals = 0
        self.rotation = RotationWatcher(
            WatchedFiles((options.tls_ca_file, options.tls_cert_file, options.tls_key_file,
                          options.sasl_credentials_file, options.auth_file) if watch_files else ()),
            options.credentials_check_period, on_rotated)
        client.add_listener(lambda state: self.wake.set() if state == KazooState.CONNECTED else None)
        handler = client.handler
        if isinstance(handler, SelectHandler):
            handler.before_connect = self._before_connect
            handler.on_connect_error = self._on_connect_error
            handler.on_connected = self._on_connected

    def attempt(self) -> None:
        """A new connection attempt starts: count TLS refusals from zero and clear :attr:`wake`."""
        self._tls_refusals = 0
        self.wake.clear()

    def describe(self, connected: bool) -> str | None:
        """Why the last connection attempt failed (one line), or ``None`` once a connection is up.

        Covers the socket and the TLS handshake (``SelectHandler.on_connect_error``) and a rejected
        SASL authentication (kazoo's ``AUTH_FAILED`` state, after which kazoo stops reconnecting
        until the credentials files change). ``connected``: the session is CONNECTED.
        """
        if not connected and self.auth_failed():
            return self.sasl_rejected()
        return self.last_error

    def auth_failed(self) -> bool:
        """True if the server rejected the SASL login or the auth data (kazoo's ``AUTH_FAILED``)."""
        # kazoo moves on from AUTH_FAILED to CLOSED when its connection loop ends, so the state alone
        # is not enough: SaslConnectionHandler remembers a failed SASL exchange until one succeeds.
        return (self.client._state == KeeperState.AUTH_FAILED
                or getattr(self.client._connection, "sasl_failure", None) is not None)

    def sasl_rejected(self) -> str:
        """The message of a rejected login: which mechanism, whose credentials file, and the server's reason."""
        if not self.options.sasl_mechanism:
            return f"ZooKeeper at {self.options.hosts} rejected the credentials (auth data: AUTH_FAILED)"
        who = ""
        if self.options.sasl_mechanism == "DIGEST-MD5" and self.options.sasl_credentials_file:
            who = f" (user from {self.options.sasl_credentials_file})"
        why = getattr(self.client._connection, "sasl_failure", None)
        return (f"ZooKeeper at {self.options.hosts} rejected the SASL {self.options.sasl_mechanism or ''} "
                f"authentication{who}" + (f" ({why})" if why else "")
                + ": check the credentials and the server's JAAS configuration")

    def reload_credentials(self) -> None:
        """Give the client the digest and SASL credentials now in their files (a bad file keeps the old ones)."""
        # kazoo sends client.auth_data (a set of (scheme, credential)) on every new connection
        # (ConnectionHandler._connect), and keeps sasl_options on its ConnectionHandler, read by
        # _authenticate_with_sasl on every connection: replacing them takes effect on the next one.
        if self.options.auth_file:
            try:
                self.client.auth_data = set(read_digest_file(self.options.auth_file))
            except CredentialsError as err:
                log.error("keeping the previous digest credentials: %s", err)
        if not self.options.sasl_mechanism:
            return
        try:
            self.client._connection.sasl_options = sasl_options(
                self.options.sasl_mechanism, self.options.sasl_credentials_file,
                self.options.sasl_principal, self.options.sasl_service)
        except CredentialsError as err:
            log.error("keeping the previous SASL credentials: %s", err)

    def _on_connect_error(self, err: BaseException, where: str) -> None:
        message = describe_connect_error(err, where)
        if isinstance(err, ssl.SSLError):
            self._tls_refusals += 1
            if self._tls_refusals >= len(self.client.hosts):
                self.wake.set()
        if message != self.last_error:
            log.warning("ZooKeeper connection failed: %s", message)  # once per distinct reason, not per retry
        self.last_error = message

    def _on_connected(self, where: str) -> None:
        if self.last_error is not None:
            log.info("ZooKeeper connection to %s is up again", where)
        self.last_error = None

    def _before_connect(self) -> None:
        # On kazoo's connection thread, before each attempt: absorb rotated files (kazoo re-reads the
        # TLS files itself on every attempt).
        changed = self.rotation.check()
        if changed:
            log.info("rotated credentials files %s used for this connection", ", ".join(changed))
            self.reload_credentials()
