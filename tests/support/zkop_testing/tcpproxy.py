"""A TCP proxy on a free loopback port that a test can cut: a client disconnected on demand.

``with TcpProxy(("127.0.0.1", port)) as proxy:`` forwards every connection to the target;
``proxy.cut()`` closes every forwarded connection and refuses new ones (accepted, then closed at
once) until ``proxy.restore()``. ``proxy.freeze()`` keeps every connection open but delivers nothing
more either way, as a dead network path does (no FIN, no RST: a request sent then never gets an
answer); ``proxy.held`` counts the bytes clients sent since. Nothing is left behind: on exit the
sockets are closed and the threads have ended.

``TcpProxy(target, framed=True)`` forwards a length-prefixed protocol (a 4-byte big-endian length,
then that many bytes: jute's framing, ZooKeeper's wire format) frame by frame, and
:meth:`TcpProxy.cut_after` cuts one connection at a chosen point of a conversation: right after
the server answered a chosen request, the answer withheld. :mod:`zkop_testing.zkwire` says which
ZooKeeper frames are writes and which reply answers them.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType

from zkop_testing.waiting import EVENTUALLY

__all__ = ["Cut", "FrameMatcher", "ReplyMatcher", "TcpProxy"]

#: ``(index, payload) -> token or None``: the ``index``-th frame a client sent on its connection
#: (0 is the first); a token other than ``None`` selects it (it is handed to the reply matcher).
FrameMatcher = Callable[[int, bytes], object | None]
#: ``(index, payload, token) -> bool``: the ``index``-th frame the server sent answers the selected request.
ReplyMatcher = Callable[[int, bytes, object], bool]


@dataclass
class Cut:
    """One armed :meth:`TcpProxy.cut_after`: ``done`` is set once the connection was cut.

    Attributes:
        request: the selected client frame's token.
        withheld: the payloads of the server's frames that were not delivered (the matching reply last).
    """

    request_matcher: FrameMatcher
    reply_matcher: ReplyMatcher
    done: threading.Event = field(default_factory=threading.Event)
    request: object | None = None
    withheld: list[bytes] = field(default_factory=list)


def _as_is(sock: socket.socket, data: bytes) -> bytes:
    """An unframed connection's relay: every read forwarded as it came."""
    return data


class _Frames:
    """Splits one direction of a framed connection into frames (length prefix included)."""

    def __init__(self) -> None:
        self.buffer = b""
        self.count = 0

    def feed(self, data: bytes) -> list[tuple[int, bytes, bytes]]:
        """The complete frames in ``data`` and what came before: ``(index, payload, raw frame)`` each."""
        self.buffer += data
        frames = []
        while len(self.buffer) >= 4:
            length = int.from_bytes(self.buffer[:4], "big")
            if len(self.buffer) < 4 + length:
                break
            raw, self.buffer = self.buffer[:4 + length], self.buffer[4 + length:]
            frames.append((self.count, raw[4:], raw))
            self.count += 1
        return frames


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target``; :meth:`cut` and :meth:`restore` the link.

    Args:
        target: ``(host, port)`` every accepted connection is forwarded to.
        framed: the protocol is length-prefixed (4-byte big-endian length): forward whole frames,
            and allow :meth:`cut_after`.
    """

    def __init__(self, target: tuple[str, int], *, framed: bool = False) -> None:
        self.target = target
        self.framed = framed
        self._armed: Cut | None = None
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._cut = threading.Event()
        self._frozen = threading.Event()
        #: Bytes clients sent while :meth:`freeze` held everything (never delivered).
        self.held = 0
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

    def freeze(self) -> None:
        """From now on deliver nothing, either way, on any connection (new ones included); close none.

        What arrives is read and dropped (clients' bytes counted in :attr:`held`), so neither side
        sees a closed connection or a full window: a client waits for an answer until its own timeout.
        """
        self._frozen.set()

    def restore(self) -> None:
        """Forward new connections again."""
        self._cut.clear()

    def cut_after(self, request: FrameMatcher, reply: ReplyMatcher) -> Cut:
        """Cut the next connection on which a client frame matches ``request``, once the server answered it.

        The selected frame is forwarded; from then on the server's frames on that connection are
        withheld until one matches ``reply`` (with the request's token), and then both sockets of
        that connection are closed: the server has handled the request, the client never hears
        back. Other connections, and new ones, are forwarded as before. One at a time: a second
        call replaces one not yet triggered.

        Returns:
            The armed cut; wait on its ``done`` event.

        Raises:
            ValueError: the proxy was not made with ``framed=True``.
        """
        if not self.framed:
            raise ValueError("cut_after needs a framed proxy (TcpProxy(target, framed=True))")
        cut = Cut(request, reply)
        with self._lock:
            self._armed = cut
        return cut

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

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        """Forward both ways until either side closes (or a :meth:`cut_after` cuts), then close both."""
        relay = self._frame_relay(client) if self.framed else _as_is
        peers = {client: upstream, upstream: client}
        try:
            while True:
                readable, _, _ = select.select([client, upstream], [], [], 1.0)
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    if self._frozen.is_set():
                        if sock is client:
                            with self._lock:
                                self.held += len(data)
                        continue
                    out = relay(sock, data)
                    if out is None:
                        return
                    if out:
                        peers[sock].sendall(out)
        except (OSError, ValueError):
            return
        finally:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()

    def _frame_relay(self, client: socket.socket) -> Callable[[socket.socket, bytes], bytes | None]:
        """What to forward of each read on a framed connection: whole frames, and an armed :meth:`cut_after`
        applied (``None``: cut now)."""
        frames: dict[socket.socket, _Frames] = {}
        mine: list[Cut] = []  # the cut this connection triggered: from then on the server's frames are withheld

        def relay(sock: socket.socket, data: bytes) -> bytes | None:
            out = b""
            for index, payload, raw in frames.setdefault(sock, _Frames()).feed(data):
                if sock is client:
                    out += raw
                    if not mine and (cut := self._select(index, payload)) is not None:
                        mine.append(cut)
                elif mine:
                    mine[0].withheld.append(payload)
                    if mine[0].reply_matcher(index, payload, mine[0].request):
                        mine[0].done.set()
                        return None
                else:
                    out += raw
            return out

        return relay

    def _select(self, index: int, payload: bytes) -> Cut | None:
        """The armed cut if the client's ``index``-th frame triggers it (it is then disarmed)."""
        with self._lock:
            cut = self._armed
            if cut is None:
                return None
            token = cut.request_matcher(index, payload)
            if token is None:
                return None
            self._armed = None
        cut.request = token
        return cut
