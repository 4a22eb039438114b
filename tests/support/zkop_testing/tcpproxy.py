"""A TCP proxy on a free loopback port that a test can cut: a client disconnected on demand.

``with TcpProxy(("127.0.0.1", port)) as proxy:`` forwards every connection to the target;
``proxy.cut()`` closes every forwarded connection and refuses new ones (accepted, then closed at
once) until ``proxy.restore()``. Nothing is left behind: on exit the sockets are closed and the
threads have ended.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from types import TracebackType

from zkop_testing.waiting import EVENTUALLY

__all__ = ["TcpProxy"]


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target``; :meth:`cut` and :meth:`restore` the link."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._cut = threading.Event()
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._links: list[tuple[socket.socket, socket.socket]] = []
        self._pumps: list[threading.Thread] = []
        self._thread = threading.Thread(target=self._accept, name="tcp-proxy", daemon=True)

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>`` for a connect string."""
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> TcpProxy:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stopped.set()
        # close() alone does not wake a thread blocked in accept(); shutdown() does (it then fails).
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._thread.join(EVENTUALLY)
        self._listener.close()
        self._close_links()
        with self._lock:
            pumps, self._pumps = self._pumps, []
        for pump in pumps:
            pump.join(EVENTUALLY)

    def cut(self) -> None:
        """Close every forwarded connection and refuse new ones until :meth:`restore`."""
        self._cut.set()
        self._close_links()

    def restore(self) -> None:
        """Forward new connections again."""
        self._cut.clear()

    def _close_links(self) -> None:
        with self._lock:
            links, self._links = self._links, []
        for a, b in links:
            for sock in (a, b):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._cut.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            pump = threading.Thread(target=self._pump, args=(client, upstream), name="tcp-proxy-pump", daemon=True)
            with self._lock:
                self._links.append((client, upstream))
                self._pumps = [p for p in self._pumps if p.is_alive()]
                self._pumps.append(pump)
            pump.start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        peers = {a: b, b: a}
        try:
            while True:
                readable, _, _ = select.select([a, b], [], [], 1.0)
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    peers[sock].sendall(data)
        except (OSError, ValueError):
            return
        finally:
            for sock in (a, b):
                with contextlib.suppress(OSError):
                    sock.close()
