"""Keep-alive HTTP/1.1 connections to one API server for the requests whose whole answer is read at once.

:class:`~zkop.kube.client.KubeClient` sends every request but a watch through a :class:`Transport`: requests
written on the standard library's sockets kept in a LIFO pool, answers read by :func:`read_answer` (RFC 9112's
framing), with the TLS settings, timeouts and retry rules of the official client's urllib3 pool it is built from.
One status PATCH on the real kube-apiserver costs about 400 µs of CPU through this transport, 430 through
``http.client`` alone (whose header parsing goes through the ``email`` package) and 590–615 through urllib3's
``urlopen`` (its retry, timeout and header objects, its response wrapper, its per-checkout liveness probe)
(``python -m hack.bench.request_cost``; docs/performance.md, "Levers of issue 42").
Watches stream and stay on urllib3; so does everything behind an HTTP proxy (:meth:`Transport.for_pool` returns
``None`` then).

The rules kept from urllib3's default ``Retry(3)`` (``Retry.DEFAULT``, which the official client's pool uses when
its configuration sets none) so callers see no difference:

* a connection that cannot be made is retried, up to :data:`CONNECT_RETRIES` times, for every method (nothing was
  sent);
* a failure once the request was sent -- a reset, an answer cut short, a read timeout -- is retried only for an
  idempotent method (``GET``, ``HEAD``, ``PUT``, ``DELETE``, ``OPTIONS``, ``TRACE``: ``Retry.DEFAULT_ALLOWED_METHODS``),
  up to :data:`READ_RETRIES` times; a ``POST`` or ``PATCH`` raises;
* a kept connection the server has closed meanwhile (its idle timeout, a restart) is noticed before reuse and
  replaced, as urllib3's ``is_connection_dropped`` does; one that fails anyway before any answer is retried on a
  newer or new connection if the method is idempotent or the failure came while sending (the server had closed it
  before reading anything), like Go's ``net/http`` transport (``shouldRetryRequest``).

Errors are urllib3's, as callers already handle them: ``NewConnectionError`` / ``ConnectTimeoutError`` (inside
``MaxRetryError`` once the retries are spent, as urllib3 raises them), ``ReadTimeoutError``, ``ProtocolError``;
a cancelled thread gets :class:`~zkop.kube.cancel.RequestCancelled` (:mod:`zkop.kube.cancel`).
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
from collections.abc import Mapping
from typing import Any, BinaryIO, cast

import urllib3
import urllib3.exceptions
import urllib3.util.ssl_
from urllib3 import HTTPHeaderDict

from zkop.kube import cancel

__all__ = ["CONNECT_RETRIES", "MAX_HEADERS", "MAX_LINE", "READ_RETRIES", "Answer", "Transport", "read_answer"]

#: Retries of a connection that could not be made (urllib3 ``Retry.DEFAULT``: ``total=3``).
CONNECT_RETRIES = 3
#: Retries of an idempotent request whose answer failed after it was sent (the same ``total=3``).
READ_RETRIES = 3
#: ``Retry.DEFAULT_ALLOWED_METHODS``: what may be sent again after it may have reached the server.
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})
#: Methods sent with ``Content-Length: 0`` when they carry no body (``http.client``'s ``_METHODS_EXPECTING_BODY``).
_BODY_EXPECTED = frozenset({"PATCH", "POST", "PUT"})
#: The longest status, header or chunk-size line read, and the most header lines, as ``http.client`` allows.
MAX_LINE = 65536
MAX_HEADERS = 100

Timeout = float | tuple[float, float] | None


class Answer:
    """A whole answer, read: what :class:`~zkop.kube.client.KubeClient` and ``ApiException`` read of urllib3's
    ``HTTPResponse`` (``status``, ``reason``, ``headers`` with case-insensitive ``get``, ``data``)."""

    __slots__ = ("data", "headers", "reason", "status", "will_close")

    def __init__(self, status: int, reason: str, headers: HTTPHeaderDict, data: bytes,
                 will_close: bool = False) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.data = data
        #: the server closes the connection after this answer (``Connection: close``, HTTP/1.0, or a body that
        #: ran to the end of the connection)
        self.will_close = will_close

    def getheaders(self) -> HTTPHeaderDict:
        """The headers (urllib3's ``HTTPResponse.getheaders``)."""
        return self.headers

    def getheader(self, name: str, default: str | None = None) -> str | None:
        """One header, case-insensitive, or ``default``."""
        return self.headers.get(name, default)

    def drain_conn(self) -> None:
        """Nothing left to read: the body was read whole and the connection went back to the pool."""

    def release_conn(self) -> None:
        """As :meth:`drain_conn`."""


class _Connection:
    """One keep-alive connection, TLS when ``context`` is given (SNI and the hostname checked against
    ``server_hostname``): a request goes out in one write (head and body together, as ``http.client`` once did to
    spare a delayed-ACK round), its answer is read by :func:`read_answer`."""

    def __init__(self, host: str, port: int, *, context: ssl.SSLContext | None, server_hostname: str,
                 socket_options: list[tuple[int, int, int | bytes]]) -> None:
        self.host, self.port = host, port
        self._context = context
        self._server_hostname = server_hostname
        self._socket_options = socket_options
        self.sock: socket.socket | None = None
        self.used = False  # an answer was read on it: a failure on its first byte may be a stale keep-alive

    def connect(self, timeout: float | None) -> None:
        """Open the TCP connection (``TCP_NODELAY``, the pool's socket options) and start TLS on it, each step
        within ``timeout`` seconds."""
        sock = socket.create_connection((self.host, self.port), timeout)
        try:
            for level, option, value in self._socket_options:
                sock.setsockopt(level, option, value)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._context is not None:
                sock = self._context.wrap_socket(sock, server_hostname=self._server_hostname)
        except BaseException:
            sock.close()
            raise
        self.sock = sock

    def send(self, head: bytes, body: bytes | None, timeout: float | None) -> None:
        """Write the request; the socket's reads from now on wait ``timeout`` seconds at most."""
        sock = self.sock
        assert sock is not None
        sock.settimeout(timeout)
        sock.sendall(head + body if body else head)

    def answer(self, method: str) -> Answer:
        """Read the answer to the request sent (:func:`read_answer`).

        Raises:
            http.client.HTTPException: not an HTTP answer (``RemoteDisconnected`` for none at all).
            OSError: the connection failed or a read timed out.
        """
        assert self.sock is not None
        with self.sock.makefile("rb") as fp:
            return read_answer(fp, method)

    def close(self) -> None:
        """Close the socket (idempotent)."""
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()

    def dropped(self) -> bool:
        """True if the peer closed this kept connection (or sent something unasked): it must not be reused."""
        sock = self.sock
        if sock is None:
            return True
        if isinstance(sock, ssl.SSLSocket) and sock.pending():
            return True
        try:
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)


class Transport:
    """Sends whole requests to one API server on kept connections; thread-safe.

    Args:
        scheme: ``"http"`` or ``"https"``.
        host: the server's host name or address.
        port: its port.
        context: the TLS context (``None`` for ``http``).
        server_hostname: the name sent in SNI and checked against the certificate.
        maxsize: connections kept idle at most (more may be open while busy; those are closed after use).
        socket_options: ``setsockopt`` triples applied to each new socket.
    """

    def __init__(self, scheme: str, host: str, port: int, *, context: ssl.SSLContext | None,
                 server_hostname: str, maxsize: int,
                 socket_options: list[tuple[int, int, int | bytes]] | None = None) -> None:
        self.scheme, self.host, self.port = scheme, host, port
        self._context = context
        self._server_hostname = server_hostname
        self.maxsize = max(1, maxsize)
        self._socket_options = list(socket_options or [])
        self._lock = threading.Lock()
        self._idle: list[_Connection] = []
        self._closed = False
        default_port = 443 if scheme == "https" else 80
        name = f"[{host}]" if ":" in host else host
        self._host_header = name if port == default_port else f"{name}:{port}"

    @classmethod
    def for_pool(cls, pool: urllib3.HTTPConnectionPool) -> Transport | None:
        """A transport with the TLS settings of the official client's urllib3 ``pool`` (CA, client certificate,
        hostname check, SNI name), or ``None`` when ``pool`` uses something this transport does not reproduce
        (an explicit ``ssl_context``, a proxy, a scheme but ``http``/``https``): then urllib3 keeps the request.

        Raises:
            ssl.SSLError, OSError: the CA or client certificate files cannot be loaded.
        """
        scheme = pool.scheme
        host = str(pool.host).strip("[]")
        port = int(pool.port or (443 if scheme == "https" else 80))
        kw: Mapping[str, Any] = pool.conn_kw
        if pool.proxy is not None or kw.get("ssl_context") is not None:
            return None
        options = list(kw.get("socket_options") or [])
        size = int(pool.pool.maxsize) if pool.pool is not None else 1
        if scheme == "http":
            return cls(scheme, host, port, context=None, server_hostname=host, maxsize=size, socket_options=options)
        if scheme != "https" or not isinstance(pool, urllib3.HTTPSConnectionPool):
            return None
        if getattr(pool, "ssl_context", None) is not None or pool.assert_fingerprint or pool.ssl_version:
            return None
        cert_reqs = urllib3.util.ssl_.resolve_cert_reqs(pool.cert_reqs)
        context = urllib3.util.ssl_.create_urllib3_context(
            ssl_minimum_version=pool.ssl_minimum_version, ssl_maximum_version=pool.ssl_maximum_version,
            cert_reqs=cert_reqs)
        assert_hostname = pool.assert_hostname
        if cert_reqs == ssl.CERT_NONE:
            context.check_hostname = False
        else:
            cadata = kw.get("ca_cert_data")
            if pool.ca_certs or pool.ca_cert_dir or cadata:
                context.load_verify_locations(cafile=pool.ca_certs, capath=pool.ca_cert_dir, cadata=cadata)
            else:
                context.load_default_certs()
            context.check_hostname = assert_hostname is not False
            context.hostname_checks_common_name = False
        if pool.cert_file:
            context.load_cert_chain(pool.cert_file, pool.key_file, pool.key_password)
        name = kw.get("server_hostname") or (assert_hostname if isinstance(assert_hostname, str) else None) or host
        return cls(scheme, host, port, context=context, server_hostname=name, maxsize=size, socket_options=options)

    def grow(self, maxsize: int) -> None:
        """Keep up to ``maxsize`` idle connections from now on (never fewer than now)."""
        with self._lock:
            self.maxsize = max(self.maxsize, maxsize)

    def close(self) -> None:
        """Close the idle connections; later requests open new ones and close them after use."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._closed = True
        for conn in idle:
            conn.close()

    def request(self, method: str, target: str, *, body: bytes | None, headers: Mapping[str, str],
                timeout: Timeout) -> Answer:
        """Send ``method target`` (``target``: the path and query) and read the whole answer.

        Args:
            method: the HTTP method.
            target: what follows the host in the URL.
            body: the body, or ``None``.
            headers: the request's headers (``Host`` and ``Content-Length`` are added).
            timeout: seconds for the connection and for each read, or ``(connect, read)``; ``None``: no limit.

        Raises:
            urllib3.exceptions.MaxRetryError: no connection after the retries (its ``reason`` says why).
            urllib3.exceptions.ReadTimeoutError: no answer within the read timeout (after the retries an
                idempotent method gets).
            urllib3.exceptions.ProtocolError: the connection failed after the request was sent.
            zkop.kube.cancel.RequestCancelled: the calling thread's token was cancelled.
        """
        connect_timeout, read_timeout = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        url = f"{self.scheme}://{self.host}:{self.port}{target}"
        head = self._head(method, target, headers, body)
        connect_failures = read_failures = 0
        while True:
            conn = self._checkout()
            token = cancel.current()
            if token is not None:
                try:
                    token._enter(conn)
                except BaseException:
                    self._checkin(conn)
                    raise
            reused, phase = conn.used, "connect"
            try:
                if conn.sock is None:
                    conn.connect(connect_timeout)
                phase = "send"
                conn.send(head, body, read_timeout)
                phase = "read"
                answer = conn.answer(method)
            except (OSError, http.client.HTTPException) as err:
                conn.close()
                if token is not None:
                    token._leave(conn)
                    if token.cancelled:
                        raise token.error() from err
                if phase == "connect":
                    connect_failures += 1
                    if connect_failures > CONNECT_RETRIES:
                        raise urllib3.exceptions.MaxRetryError(
                            None, url, _connect_error(err, url)) from err  # type: ignore[arg-type]
                    continue
                if reused and _first_byte_failure(err) and (method in IDEMPOTENT or phase == "send"):
                    continue  # a kept connection the server had closed: the next is newer, or new
                read_failures += 1
                if method not in IDEMPOTENT or read_failures > READ_RETRIES:
                    raise _read_error(err, url) from err
                continue
            if token is not None:
                token._leave(conn)
            conn.used = True
            if answer.will_close:
                conn.close()
            else:
                self._checkin(conn)
            return answer

    def _head(self, method: str, target: str, headers: Mapping[str, str], body: bytes | None) -> bytes:
        """The request line and headers (``Host``, ``Content-Length`` where a body is sent or expected).

        Raises:
            ValueError: a line break in the target or a header (header injection), as ``http.client`` refuses.
        """
        for part in (method, target, *headers, *headers.values()):
            if "\r" in part or "\n" in part:
                raise ValueError(f"a line break in the request line or a header of {method} {target!r}")
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._host_header}", "Accept-Encoding: identity"]
        lines.extend(f"{name}: {value}" for name, value in headers.items())
        if body is not None or method in _BODY_EXPECTED:
            lines.append(f"Content-Length: {len(body or b'')}")
        lines.append("\r\n")
        return "\r\n".join(lines).encode("latin-1")

    def _checkout(self) -> _Connection:
        with self._lock:
            while self._idle:
                conn = self._idle.pop()
                if not conn.dropped():
                    return conn
                conn.close()
        return _Connection(self.host, self.port, context=self._context, server_hostname=self._server_hostname,
                           socket_options=self._socket_options)

    def _checkin(self, conn: _Connection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self.maxsize:
                self._idle.append(conn)
                return
        conn.close()


def _line(fp: BinaryIO) -> bytes:
    line = fp.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise http.client.LineTooLong("header line")
    return line


def _status_line(fp: BinaryIO) -> tuple[str, int, str]:
    line = _line(fp)
    if not line:
        raise http.client.RemoteDisconnected("Remote end closed connection without response")
    version, status, reason = [*line.decode("iso-8859-1").rstrip("\r\n").split(None, 2), "", ""][:3]
    code = int(status) if len(status) == 3 and status.isascii() and status.isdigit() else -1
    if not version.startswith("HTTP/") or code < 100:
        raise http.client.BadStatusLine(repr(line))
    return version, code, reason.strip()


def _headers(fp: BinaryIO) -> HTTPHeaderDict:
    headers = HTTPHeaderDict()
    name = ""
    for _ in range(MAX_HEADERS + 1):
        line = _line(fp)
        if line in (b"\r\n", b"\n", b""):
            return headers
        text = line.decode("iso-8859-1").rstrip("\r\n")
        if text[:1] in (" ", "\t") and name:  # obsolete line folding (RFC 9112 section 5.2): one value
            values = headers.getlist(name)
            values[-1] = f"{values[-1]} {text.strip()}"
            headers.discard(name)
            for value in values:
                headers.add(name, value)
            continue
        name, colon, value = text.partition(":")
        if not colon or not name or name != name.strip():
            raise http.client.HTTPException(f"invalid header line {text!r}")
        headers.add(name, value.strip())
    raise http.client.HTTPException(f"got more than {MAX_HEADERS} headers")


def _exactly(fp: BinaryIO, size: int) -> bytes:
    data = fp.read(size)
    if len(data) < size:
        raise http.client.IncompleteRead(data, size - len(data))
    return data


def _chunked(fp: BinaryIO) -> bytes:
    parts: list[bytes] = []
    while True:
        line = _line(fp)
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise http.client.IncompleteRead(b"".join(parts)) from None
        if size < 0:
            raise http.client.IncompleteRead(b"".join(parts))
        if size == 0:
            while _line(fp) not in (b"\r\n", b"\n", b""):  # trailer fields, dropped as http.client does
                pass
            return b"".join(parts)
        parts.append(_exactly(fp, size))
        _exactly(fp, 2)  # the CRLF after the chunk's data


def read_answer(fp: BinaryIO, method: str) -> Answer:
    """Read one HTTP/1.1 answer to ``method`` from ``fp`` (RFC 9112): the status line (interim 1xx answers
    skipped), the header fields, and the body framed by section 6.3's rules in their order -- none for ``HEAD``,
    1xx, 204 and 304; chunked when ``Transfer-Encoding`` ends in ``chunked``; ``Content-Length`` bytes; else up
    to the end of the connection. What ``http.client.HTTPResponse`` reads, without its ``email`` header parser
    (about 30 µs less CPU per answer of the API server, measured with ``python -m hack.bench.request_cost``).

    Raises:
        http.client.RemoteDisconnected: the connection closed before a status line.
        http.client.BadStatusLine: the first line is not an HTTP status line.
        http.client.LineTooLong: a line longer than :data:`MAX_LINE` bytes.
        http.client.HTTPException: more than :data:`MAX_HEADERS` header lines, a malformed header line, or an
            invalid or conflicting ``Content-Length``.
        http.client.IncompleteRead: the body ended before its framing said.
        OSError: the connection failed or a read timed out.
    """
    while True:
        version, status, reason = _status_line(fp)
        headers = _headers(fp)
        if not 100 <= status < 200 or status == 101:
            break
    tokens = {token.strip().lower() for token in ",".join(headers.getlist("connection")).split(",")}
    will_close = "close" in tokens or (version == "HTTP/1.0" and "keep-alive" not in tokens)
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return Answer(status, reason, headers, b"", will_close)
    encodings = [e.strip().lower() for e in ",".join(headers.getlist("transfer-encoding")).split(",") if e.strip()]
    if encodings:
        if encodings[-1] == "chunked":
            return Answer(status, reason, headers, _chunked(fp), will_close)
        return Answer(status, reason, headers, fp.read(), True)
    lengths = {value.strip() for value in ",".join(headers.getlist("content-length")).split(",") if value.strip()}
    if lengths:
        length = next(iter(lengths))
        if len(lengths) > 1 or not (length.isascii() and length.isdigit()):
            raise http.client.HTTPException(f"invalid Content-Length {sorted(lengths)}")
        return Answer(status, reason, headers, _exactly(fp, int(length)), will_close)
    return Answer(status, reason, headers, fp.read(), True)


def _connect_failure(err: BaseException) -> bool:
    """A failure to make the connection (refused, unreachable, timed out, TLS handshake), nothing sent."""
    return isinstance(err, OSError)


def _first_byte_failure(err: BaseException) -> bool:
    """What a kept connection the server closed looks like on the next request."""
    return isinstance(err, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                            ConnectionAbortedError))


def _connect_error(err: BaseException, url: str) -> urllib3.exceptions.HTTPError:
    if isinstance(err, (TimeoutError, socket.timeout)):
        return urllib3.exceptions.ConnectTimeoutError(None, f"connection to {url} timed out: {err}")
    return urllib3.exceptions.NewConnectionError(None, f"failed to establish a new connection to {url}: {err}")  # type: ignore[arg-type]


def _read_error(err: BaseException, url: str) -> urllib3.exceptions.HTTPError:
    if isinstance(err, (TimeoutError, socket.timeout)):
        return urllib3.exceptions.ReadTimeoutError(cast(Any, None), url, f"read timed out: {err}")
    return urllib3.exceptions.ProtocolError("Connection aborted.", err)

