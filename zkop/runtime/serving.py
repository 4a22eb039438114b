"""The manager's HTTP endpoints: ``/metrics`` on one port, ``/healthz`` and ``/readyz`` on another.

As controller-runtime's ``--metrics-bind-address`` [CR pkg/metrics/server/server.go] and
``--health-probe-bind-address`` [CR pkg/manager/internal.go ``addHealthProbeServer``]: WSGI servers
on daemon threads (:class:`Server`).

* ``/metrics`` serves ``prometheus_client.REGISTRY`` (anything else on that port is 404); with
  :class:`SecureServing` it is HTTPS [CR ``SecureServing``] (:mod:`zkop.runtime.certs`) and
  authenticated through the API server (:mod:`zkop.runtime.metrics_auth`). The probes stay plain
  HTTP for the kubelet.
* ``/healthz`` (alias ``/livez``) and ``/readyz`` answer 200 ``ok`` or 500 with one
  ``[-]name failed: reason`` line per failing check (a check that raises fails); ``?verbose``
  lists every check [CR pkg/healthz/healthz.go].

A client that goes away mid-request is logged at debug, any other exception at error with its
traceback on this module's logger, never printed by ``socketserver``. Bind addresses as
controller-runtime's: ``":8080"``, ``"127.0.0.1:8080"``, ``"[::1]:0"`` (any free port), ``"0"`` (off).
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler

from prometheus_client import REGISTRY
from prometheus_client.exposition import ThreadingWSGIServer, make_wsgi_app

from zkop.runtime.certs import WatchedCertificate, self_signed
from zkop.runtime.metrics_auth import DelegatingAuth, with_authentication_and_authorization

__all__ = [
    "Check",
    "HealthServer",
    "MetricsServer",
    "SecureServing",
    "Server",
    "parse_bind_address",
    "start_metrics_server",
]

#: A health or readiness check: ``None`` when healthy, else why not.
Check = Callable[[], str | None]

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

log = logging.getLogger(__name__)

#: Seconds a new HTTPS connection has to complete its TLS handshake.
HANDSHAKE_TIMEOUT = 10.0


def parse_bind_address(bind_address: str) -> tuple[str, int] | None:
    """Parse a controller-runtime style bind address into ``(host, port)``, or ``None`` for "off".

    ``"0"`` disables serving (controller-runtime's convention); ``":8080"`` means every
    interface (host ``""``); ``"127.0.0.1:8080"``, ``"[::1]:8080"`` and ``"localhost:0"`` (any
    free port) are accepted.  Raises :class:`ValueError` for anything else, including ``""``.
    """
    if bind_address == "0":
        return None
    host, sep, port_text = bind_address.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ValueError(f"invalid bind address {bind_address!r}: want [host]:port or '0'")
    port = int(port_text)
    if port > 65535:
        raise ValueError(f"invalid bind address {bind_address!r}: port out of range")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"invalid bind address {bind_address!r}: put IPv6 hosts in brackets")
    return host, port


#: What a client that went away makes a server read or write raise: a reset or closed connection, a TLS
#: connection ended without ``close_notify``, a connection idle past :data:`HANDSHAKE_TIMEOUT`.
DISCONNECTS: tuple[type[BaseException], ...] = (ConnectionError, ssl.SSLEOFError, ssl.SSLZeroReturnError,
                                                TimeoutError)


def _log_failure(error: BaseException | None, client_address: Any) -> None:
    """Debug for a client that went away (:data:`DISCONNECTS`), error with the traceback for anything else."""
    if isinstance(error, DISCONNECTS):
        log.debug("client %s went away: %s", client_address, error)
    elif error is not None:
        log.error("unexpected error serving a request from %s", client_address,
                  exc_info=(type(error), error, error.__traceback__))


class _ServerHandler(ServerHandler):
    """wsgiref's handler with its errors logged (:func:`_log_failure`) instead of printed to stderr."""

    client_address: Any = None

    def _write(self, data: bytes) -> None:
        """Write to the client; one that went away is logged at debug and ends the request quietly (wsgiref's
        ``BaseHandler.run`` returns on ``ConnectionAbortedError``)."""
        try:
            super()._write(data)
        except DISCONNECTS as err:
            _log_failure(err, self.client_address)
            raise ConnectionAbortedError(str(err)) from err

    def log_exception(self, exc_info: Any) -> None:
        """Log the application's exception (:func:`_log_failure`) instead of printing it to stderr."""
        _log_failure(exc_info[1], self.client_address)

    def handle_error(self) -> None:
        """As ``wsgiref.handlers.BaseHandler.handle_error`` (log, then a 500 page if no header was sent yet),
        except that a client that went away gets no error page: there is no one to read it."""
        error = sys.exc_info()[1]
        if isinstance(error, DISCONNECTS):
            _log_failure(error, self.client_address)
            return
        super().handle_error()


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Do not write one access-log line per request to stderr."""

    def handle(self) -> None:
        """Handle one request as ``wsgiref.simple_server.WSGIRequestHandler.handle`` does, through
        :class:`_ServerHandler`."""
        self.raw_requestline = self.rfile.readline(65537)
        if len(self.raw_requestline) > 65536:
            self.requestline = ""
            self.request_version = ""
            self.command = ""
            self.send_error(414)
            return
        if not self.parse_request():  # an error response has been sent
            return
        handler = _ServerHandler(self.rfile, self.wfile, self.get_stderr(), self.get_environ(),  # type: ignore[arg-type]
                                 multithread=False)
        handler.request_handler = self  # type: ignore[attr-defined]  # wsgiref's back-pointer for logging
        handler.client_address = self.client_address
        app = self.server.get_app()  # type: ignore[attr-defined]
        handler.run(app)


class _WSGIServer(ThreadingWSGIServer):
    """prometheus_client's threading WSGI server, a request's failure logged (:func:`_log_failure`)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Log instead of ``socketserver.BaseServer.handle_error``'s traceback on stderr."""
        _log_failure(sys.exc_info()[1], client_address)


class _DualStackServer(_WSGIServer):
    address_family = socket.AF_INET6

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


class _IPv6Server(_WSGIServer):
    address_family = socket.AF_INET6


_Socket = socket.socket


class _TLSMixin:
    """Wraps each accepted connection in TLS with the context current at that moment.

    The handshake runs on the connection's own thread (not the accepting one), bounded by
    :data:`HANDSHAKE_TIMEOUT`; a failed handshake (a plain-HTTP client, an untrusting one) just
    closes that connection.
    """

    tls_context: Callable[[], ssl.SSLContext]
    socket: _Socket

    def get_request(self) -> tuple[_Socket, Any]:
        sock, address = self.socket.accept()
        sock.settimeout(HANDSHAKE_TIMEOUT)
        wrapped = self.tls_context().wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return wrapped, address

    def finish_request(self, request: Any, client_address: Any) -> None:
        try:
            request.do_handshake()
        except (ssl.SSLError, OSError) as err:
            log.debug("TLS handshake with %s failed: %s", client_address, err)
            return
        super().finish_request(request, client_address)  # type: ignore[misc]


class _TLSServer(_TLSMixin, _WSGIServer):
    pass


class _TLSDualStackServer(_TLSMixin, _DualStackServer):
    pass


class _TLSIPv6Server(_TLSMixin, _IPv6Server):
    pass


def _bind(server_class: type[ThreadingWSGIServer], host: str, port: int, app: WsgiApp) -> ThreadingWSGIServer:
    """wsgiref's ``make_server`` without the ``listen``: the socket is bound, and nobody can connect before
    :meth:`Server.serve` (so an address that cannot be bound fails before any server listens)."""
    server = server_class((host, port), _QuietHandler, bind_and_activate=False)
    try:
        server.server_bind()
    except BaseException:
        server.server_close()
        raise
    server.set_app(app)
    return server


def _make_server(host: str, port: int, app: WsgiApp,
                 tls_context: Callable[[], ssl.SSLContext] | None = None) -> ThreadingWSGIServer:
    """Bind (not yet listen) a threading WSGI server; with ``tls_context`` every connection is wrapped in TLS.

    Raises:
        OSError: the address cannot be bound.
    """
    plain: type[ThreadingWSGIServer] = _WSGIServer if tls_context is None else _TLSServer
    dual: type[ThreadingWSGIServer] = _DualStackServer if tls_context is None else _TLSDualStackServer
    ipv6: type[ThreadingWSGIServer] = _IPv6Server if tls_context is None else _TLSIPv6Server
    if host == "":
        # Go's ":8080" listens on every interface, IPv4 and IPv6; fall back to IPv4 only where
        # IPv6 is unavailable (common in containers).
        try:
            server = _bind(dual, "::", port, app)
        except OSError:
            server = _bind(plain, "0.0.0.0", port, app)
    else:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, sockaddr = infos[0]
        server_class = ipv6 if family == socket.AF_INET6 else plain
        server = _bind(server_class, str(sockaddr[0]), port, app)
    if isinstance(server, _TLSMixin) and tls_context is not None:
        server.tls_context = tls_context  # set before serve_forever accepts the first connection
    return server


class Server:
    """A WSGI server on a daemon thread, from a bound socket (:func:`_make_server`).

    ``host`` and ``port`` are the address actually bound (``port`` is the real one when 0 was
    asked for). It listens and serves from :meth:`serve` on (at once unless ``serve=False``).
    Usable as a context manager; :meth:`shutdown` is idempotent, also for a server never served.
    """

    path = "/"
    #: ``http`` or ``https``.
    scheme = "http"

    def __init__(self, server: ThreadingWSGIServer, name: str, *, serve: bool = True) -> None:
        self._server = server
        address = server.server_address
        self.host: str = str(address[0])
        self.port: int = int(address[1])
        self._thread = threading.Thread(target=server.serve_forever, name=f"{name}-{self.port}", daemon=True)
        self._closed = False
        self._lock = threading.Lock()
        if serve:
            self.serve()

    def serve(self) -> None:
        """Listen on the bound socket and serve from the daemon thread (once; a second call does nothing).

        Raises:
            OSError: ``listen`` failed (the socket is closed).
        """
        with self._lock:
            if self._closed or self._thread.ident is not None:
                return
            try:
                self._server.server_activate()
            except BaseException:
                self._closed = True
                self._server.server_close()
                raise
            self._thread.start()

    @property
    def url(self) -> str:
        """``<scheme>://host:port`` + :attr:`path`, a wildcard host replaced by the loopback address."""
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self.host, self.host)
        if ":" in host:
            host = f"[{host}]"
        return f"{self.scheme}://{host}:{self.port}{self.path}"

    def shutdown(self) -> None:
        """Stop serving, close the socket and join the serving thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            served = self._thread.ident is not None
        if served:  # socketserver's shutdown waits for serve_forever to end: never for one that never ran
            self._server.shutdown()
        self._server.server_close()
        if served:
            self._thread.join()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


# --------------------------------------------------------------------------------------------
# /metrics [CR pkg/metrics/server/server.go]
# --------------------------------------------------------------------------------------------

_PROMETHEUS_APP = make_wsgi_app(REGISTRY)


def _metrics_only_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    if environ.get("PATH_INFO", "") != "/metrics":
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [b"404 page not found\n"]
    return _PROMETHEUS_APP(environ, start_response)  # type: ignore[no-any-return]


class MetricsServer(Server):
    """A running ``/metrics`` server; :attr:`url` ends in ``/metrics`` (``https://`` when secure)."""

    path = "/metrics"


@dataclass(frozen=True)
class SecureServing:
    """``/metrics`` over HTTPS behind TokenReview + SubjectAccessReview (controller-runtime's
    ``SecureServing`` with ``filters.WithAuthenticationAndAuthorization``).

    Attributes:
        auth: the delegating authenticator/authoriser (holds the API client and the caches).
        cert_dir: directory holding ``cert_name`` and ``key_name`` (cert-manager's Secret keys
            ``tls.crt``/``tls.key``); ``None``, or either file missing, means a self-signed
            certificate generated at start, as controller-runtime falls back to one.
        cert_name, key_name: file names inside ``cert_dir``.
    """

    auth: DelegatingAuth
    cert_dir: str | None = None
    cert_name: str = "tls.crt"
    key_name: str = "tls.key"

    def tls_context(self) -> Callable[[], ssl.SSLContext]:
        """A function returning the context for each new connection.

        Raises:
            zkop.runtime.certs.CertificateError: the mounted pair is unusable, or no self-signed
                certificate could be generated.
        """
        if self.cert_dir is not None:
            cert = os.path.join(self.cert_dir, self.cert_name)
            key = os.path.join(self.cert_dir, self.key_name)
            if os.path.exists(cert) and os.path.exists(key):
                watched = WatchedCertificate(cert, key)
                log.info("metrics serving certificate from %s (reloaded when it changes)", cert)
                return watched.context
            log.warning("%s or %s does not exist; serving metrics with a self-signed certificate", cert, key)
        context = self_signed()
        log.info("metrics served with a self-signed certificate")
        return lambda: context


def start_metrics_server(bind_address: str, secure: SecureServing | None = None, *,
                         serve: bool = True) -> MetricsServer | None:
    """Serve ``/metrics`` on ``bind_address`` from a daemon thread; ``None`` when it is ``"0"``.

    ``serve=False`` only binds the address: the server listens from :meth:`Server.serve` on.

    With ``secure`` the server speaks HTTPS and ``/metrics`` requests need a bearer token the API
    server authenticates (else 401) and authorises for ``get`` on ``/metrics`` (else 403).

    Raises:
        ValueError: a malformed address.
        OSError: the address cannot be bound (e.g. port in use).
        zkop.runtime.certs.CertificateError: see :meth:`SecureServing.tls_context`.
    """
    parsed = parse_bind_address(bind_address)
    if parsed is None:
        return None
    if secure is None:
        return MetricsServer(_make_server(*parsed, _metrics_only_app), "metrics-server", serve=serve)
    guarded = with_authentication_and_authorization(_PROMETHEUS_APP, secure.auth)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO", "") != "/metrics":  # only the /metrics handler is filtered, as in CR's mux
            start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
            return [b"404 page not found\n"]
        return guarded(environ, start_response)

    server = MetricsServer(_make_server(*parsed, app, secure.tls_context()), "metrics-server", serve=False)
    server.scheme = "https"
    if serve:
        server.serve()
    return server


# --------------------------------------------------------------------------------------------
# /healthz, /readyz [CR pkg/healthz/healthz.go]
# --------------------------------------------------------------------------------------------


def _run(check: Check) -> str | None:
    try:
        return check()
    except Exception as err:  # a failing check is unhealthy, not a crash
        return f"{type(err).__name__}: {err}"


def _probe_body(checks: Mapping[str, Check], verbose: bool) -> tuple[bool, bytes]:
    failures = {name: why for name, check in list(checks.items()) if (why := _run(check))}
    lines = [f"[-]{name} failed: {failures[name]}" if name in failures else f"[+]{name} ok" for name in checks]
    body = "\n".join(lines) + "\n" if verbose or failures else "ok\n"
    return not failures, body.encode()


class HealthServer:
    """Serves ``/healthz`` (and ``/livez``) and ``/readyz`` from named checks.

    Register checks in :attr:`liveness` and :attr:`readiness` (``{name: check}``, insertion
    order is the report order) before or after :meth:`start`.

    Args:
        host, port: where to listen, as parsed by :func:`parse_bind_address` (host ``""`` means
            every interface; port 0 picks a free port, see :attr:`port` after :meth:`start`).
    """

    def __init__(self, host: str, port: int) -> None:
        self.liveness: dict[str, Check] = {}
        self.readiness: dict[str, Check] = {}
        self._server: Server | None = None
        self._address = (host, port)
        self.host = host
        self.port = port

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        probes = {"/healthz": self.liveness, "/livez": self.liveness, "/readyz": self.readiness}
        checks = probes.get(environ.get("PATH_INFO", ""))
        if checks is None:
            start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
            return [b"404 page not found\n"]
        verbose = "verbose" in parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        ok, body = _probe_body(checks, verbose)
        start_response("200 OK" if ok else "500 Internal Server Error",
                       [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))])
        return [body]

    def bind(self) -> None:
        """Bind the address without listening yet (:meth:`start` listens); once.

        Raises:
            OSError: the address cannot be bound.
        """
        if self._server is None:
            self._server = Server(_make_server(*self._address, self._app), "health", serve=False)
            self.port = self._server.port

    def start(self) -> None:
        """Bind (unless :meth:`bind` did) and start serving.  Raises :class:`OSError` when the address cannot be
        bound."""
        self.bind()
        assert self._server is not None
        self._server.serve()

    def shutdown(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        if self._server is not None:
            self._server.shutdown()
