"""A TCP server on loopback that reads HTTP/1.1 requests and does with each what a script says: answer it, answer
and close the connection (a server whose keep-alive timeout passed), cut the connection (an RST, no answer), or
never answer (a dead TCP path, a stuck server). For tests of zkop's API client below the HTTP semantics."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from types import TracebackType

from zkop_testing.waiting import EVENTUALLY

__all__ = ["ANSWER", "ANSWER_AND_CLOSE", "CUT", "HANG", "ScriptedServer"]

#: What the server does with one request.
ANSWER, ANSWER_AND_CLOSE, CUT, HANG = "answer", "answer-and-close", "cut", "hang"

#: ``script(n, request_line)``: what to do with the n-th request (0-based, over every connection).
Script = Callable[[int, bytes], str]


class ScriptedServer:
    """Serves each connection on a thread; use as a context manager (it stops and joins everything on exit).

    Args:
        script: what to do with each request.
        body: the JSON body of every answer (``200 OK``).

    Attributes:
        port: where it listens on 127.0.0.1.
        connections: connections accepted so far.
        closed: released once per connection the server closed (``ANSWER_AND_CLOSE``, ``CUT``).
    """

    def __init__(self, script: Script, body: bytes = b"{}") -> None:
        self.script = script
        self.answer = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                       + str(len(body)).encode() + b"\r\n\r\n" + body)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.connections = 0
        self.closed = threading.Semaphore(0)
        self._requests: list[bytes] = []
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, name="scripted-server", daemon=True)

    def __enter__(self) -> ScriptedServer:
        self._accepting.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self._accepting.join(EVENTUALLY)
        with self._lock:
            socks, threads = list(self._socks), list(self._threads)
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in threads:
            thread.join(EVENTUALLY)

    def lines(self) -> list[bytes]:
        """The request lines received so far (``b"GET /path HTTP/1.1"``), in order."""
        with self._lock:
            return list(self._requests)

    def seen(self, needle: bytes) -> bool:
        """Whether a request line containing ``needle`` arrived."""
        return any(needle in line for line in self.lines())

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(sock,), name="scripted-server-conn", daemon=True)
            with self._lock:
                self.connections += 1
                self._socks.append(sock)
                self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError), sock:
            if self._answer(sock):
                self.closed.release()

    def _answer(self, sock: socket.socket) -> bool:
        """Serve one connection; True if the script had it closed."""
        buffer = b""
        while data := sock.recv(65536):
            buffer += data
            while b"\r\n\r\n" in buffer:
                head, _, rest = buffer.partition(b"\r\n\r\n")
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                if len(rest) < length:
                    break
                buffer = rest[length:]
                line = head.split(b"\r\n", 1)[0]
                with self._lock:
                    n = len(self._requests)
                    self._requests.append(line)
                action = self.script(n, line)
                if action == HANG:
                    continue  # read, never answered
                if action == CUT:  # an RST: SO_LINGER with a zero timeout, then close
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return True
                sock.sendall(self.answer)
                if action == ANSWER_AND_CLOSE:
                    sock.shutdown(socket.SHUT_RDWR)
                    return True
        return False
