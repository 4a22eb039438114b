"""Cancelling the API requests of a group of threads: what a cancelled ``context.Context`` does to client-go calls.

controller-runtime hands every reconcile the controller's context and cancels it when the manager
stops; client-go then aborts the reconcile's requests in flight and refuses to send new ones
(``rest.Request.Do`` returns ``context canceled``) [CR pkg/internal/controller/controller.go
``Controller.Start``; client-go rest/request.go ``request``]. Python's blocking sockets know no
context, so a :class:`CancelToken` plays its part for the threads that run inside
:func:`cancel_scope`:

* while one of them waits for a connection, sends a request or reads its answer, the token knows
  the connection; :meth:`CancelToken.cancel` shuts its socket down (``shutdown(SHUT_RDWR)``, as
  :meth:`zkop.kube.client.WatchStream.close` does), so a read blocked on a peer that never answers
  (a dead TCP path, a server that does not reply) ends at once;
* once cancelled, a request of such a thread is refused before it is sent.

Either way the caller gets :class:`RequestCancelled`, an ``urllib3.exceptions.HTTPError`` (callers
handle it with the other transport failures); urllib3 does not retry it. Connections are
registered by the urllib3 connection classes of :func:`install`, which
:class:`~zkop.kube.client.KubeClient` puts into its pool manager. A thread outside any scope (an
informer's watch, the leader election) is never affected.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import urllib3
import urllib3.connection
import urllib3.connectionpool
import urllib3.exceptions

__all__ = ["CancelToken", "RequestCancelled", "cancel_scope", "install"]

_local = threading.local()


class RequestCancelled(urllib3.exceptions.HTTPError):
    """The request was cancelled (:meth:`CancelToken.cancel`): not sent, or its answer abandoned."""


class CancelToken:
    """Cancels the requests of the threads running under it (:func:`cancel_scope`); thread-safe.

    Args:
        name: says whose requests were cancelled, in :class:`RequestCancelled`'s message.
    """

    def __init__(self, name: str = "") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._cancelled = False
        self._in_flight: set[Any] = set()

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return self._cancelled

    def cancel(self) -> int:
        """Refuse every later request and abort those in flight; returns how many were aborted. Idempotent."""
        with self._lock:
            self._cancelled = True
            connections = list(self._in_flight)
        aborted = 0
        for conn in connections:
            sock = getattr(conn, "sock", None)
            if sock is None:
                continue
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
                aborted += 1
        return aborted

    def error(self) -> RequestCancelled:
        """The exception a cancelled request raises."""
        return RequestCancelled(f"request cancelled{f' ({self.name} stopping)' if self.name else ''}")

    def _enter(self, conn: Any) -> None:
        """``conn`` begins work for a thread of this token; refused once cancelled."""
        with self._lock:
            if self._cancelled:
                raise self.error()
            self._in_flight.add(conn)

    def _leave(self, conn: Any) -> None:
        with self._lock:
            self._in_flight.discard(conn)


@contextlib.contextmanager
def cancel_scope(token: CancelToken) -> Iterator[CancelToken]:
    """Run the body with ``token`` as the calling thread's: its API requests are cancelled by ``token.cancel()``."""
    previous = getattr(_local, "token", None)
    _local.token = token
    try:
        yield token
    finally:
        _local.token = previous


def current() -> CancelToken | None:
    """The calling thread's token (:func:`cancel_scope`), or ``None``."""
    token: CancelToken | None = getattr(_local, "token", None)
    return token


class _Cancellable:
    """Mixin for urllib3 connections: registered with the calling thread's token from connect (or send) until the
    answer has been read (``getresponse``; with ``preload_content`` that includes the body)."""

    def _token_enter(self) -> CancelToken | None:
        token = current()
        if token is not None:
            token._enter(self)
        return token

    def _entered(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``call(*args, **kwargs)`` registered with the thread's token; a failure once it is cancelled is its error."""
        token = self._token_enter()
        try:
            return call(*args, **kwargs)
        except Exception as err:
            if token is not None:
                token._leave(self)
                if token.cancelled:
                    raise token.error() from err
            raise

    def connect(self) -> None:
        self._entered(super().connect)  # type: ignore[misc]

    def request(self, *args: Any, **kwargs: Any) -> None:
        self._entered(super().request, *args, **kwargs)  # type: ignore[misc]

    def getresponse(self) -> Any:
        token = current()
        try:
            return super().getresponse()  # type: ignore[misc]
        except Exception as err:
            if token is not None and token.cancelled:
                raise token.error() from err
            raise
        finally:
            if token is not None:
                token._leave(self)


class _HTTPConnection(_Cancellable, urllib3.connection.HTTPConnection):
    pass


class _HTTPSConnection(_Cancellable, urllib3.connection.HTTPSConnection):
    pass


class _HTTPConnectionPool(urllib3.connectionpool.HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSConnectionPool(urllib3.connectionpool.HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


def install(manager: urllib3.PoolManager) -> None:
    """Make the pools ``manager`` creates from now on use cancellable connections (pools it made before keep theirs).

    Only this manager's classes change (urllib3's module-wide table is left alone).
    """
    manager.pool_classes_by_scheme = {"http": _HTTPConnectionPool, "https": _HTTPSConnectionPool}
