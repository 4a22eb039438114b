"""kazoo's threading handler with a cheaper ``select``: plain ``select(2)`` instead of a new epoll per call.

kazoo's I/O thread calls ``handler.select`` once per request sent and once per reply read, on two
descriptors only (the socket to ZooKeeper and kazoo's wake-up socket); the stock
:class:`~kazoo.handlers.threading.SequentialThreadingHandler` builds and closes a
``selectors.DefaultSelector`` on every call so that descriptors above ``FD_SETSIZE`` work. Such a
descriptor makes ``select.select`` raise ``ValueError``; then the stock path is used.
"""

from __future__ import annotations

import select
from collections.abc import Callable
from typing import Any

from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.handlers.utils import selector_select

__all__ = ["SelectHandler"]


class SelectHandler(SequentialThreadingHandler):  # type: ignore[misc]
    """A :class:`SequentialThreadingHandler` whose :meth:`select` is ``select.select`` when it can be.

    Pass it to ``KazooClient(handler=SelectHandler())``; everything else (threads,
    queues, timeouts, ``AsyncResult``) is kazoo's own.

    Attributes:
        before_connect: called (no arguments) on kazoo's connection thread before each connection
            attempt (kazoo's ``ConnectionHandler._connect``); may update the client's settings.
        on_connect_error: called with ``(error, "host:port")`` when an attempt fails to open the
            socket or the TLS handshake; kazoo itself only logs ``Connection dropped`` and retries.
        on_connected: called with ``"host:port"`` when a socket (and TLS handshake) is up.
    """

    before_connect: Callable[[], None] | None = None
    on_connect_error: Callable[[BaseException, str], None] | None = None
    on_connected: Callable[[str], None] | None = None

    def create_connection(self, *args: Any, **kwargs: Any) -> Any:
        """kazoo's ``create_connection`` (same arguments) with the hooks above around it.

        Raises:
            OSError, ssl.SSLError: as kazoo's ``create_tcp_connection``.
        """
        address = kwargs.get("address", args[0] if args else ("?", 0))
        where = f"{kwargs.get('hostname') or address[0]}:{address[1]}"
        if self.before_connect is not None:
            self.before_connect()
        try:
            sock = super().create_connection(*args, **kwargs)
        except Exception as err:
            if self.on_connect_error is not None:
                self.on_connect_error(err, where)
            raise
        if self.on_connected is not None:
            self.on_connected(where)
        return sock

    def select(self, rlist: Any, wlist: Any, xlist: Any, timeout: float | None = None) -> Any:
        """``select.select`` semantics (``timeout`` in seconds, ``None`` blocks); see the module docstring.

        Raises:
            ValueError, OSError: as ``select.select`` for invalid descriptors (after the fallback).
        """
        try:
            return select.select(rlist, wlist, xlist, timeout)
        except ValueError:
            # A descriptor beyond FD_SETSIZE (or a closed one, -1): the stock selector handles the first
            # and raises its own ValueError for the second, as kazoo expects.
            return selector_select(rlist, wlist, xlist, timeout)
