"""An in-memory Kubernetes API server: a test double with kube-apiserver semantics.

It serves plain HTTP on 127.0.0.1 and works unchanged with the official
``kubernetes`` client (typed APIs and raw ``ApiClient.call_api`` /
:class:`zkop.kube.client.KubeClient`), so code under test talks to it exactly as
it would to a cluster. Served resources:

* core/v1: namespaces (``default``, ``kube-system``, ``kube-public``,
  ``kube-node-lease`` and the ``default/kubernetes`` Service pre-exist),
  services (+``/status``), configmaps, secrets, events, endpoints;
* events.k8s.io/v1 events (same storage as core events), coordination.k8s.io/v1
  leases, discovery.k8s.io/v1 endpointslices, networking.k8s.io/v1 servicecidrs (the default one seeded);
* apiextensions.k8s.io/v1 customresourcedefinitions: creating a CRD serves its
  custom resources (all served versions, ``/status`` when declared);
* rbac.authorization.k8s.io/v1 clusterroles, clusterrolebindings, roles, rolebindings;
  authentication.k8s.io/v1 tokenreviews and authorization.k8s.io/v1 subjectaccessreviews
  (create only, see :mod:`zkop_testing.apiserver_auth`).

Verbs: get, list, watch, create, update, patch (merge, JSON, strategic merge for
built-ins, server-side apply with ``managedFields`` on every write:
:mod:`zkop_testing.apiserver_apply`), delete, deletecollection. For kubectl: ``Table``
responses (:mod:`zkop_testing.apiserver_table`), ``/openapi/v2`` and ``/openapi/v3``
with ``fieldValidation`` (:mod:`zkop_testing.apiserver_openapi`), protobuf request bodies
for ConfigMaps, Secrets and Namespaces (:mod:`zkop_testing.apiserver_protobuf`). The per-rule semantics (resource
versions, generation, finalizers, status subresource, validation, selectors,
pagination, watch history, bookmarks) live in :mod:`zkop_testing.apiserver_store`
and :mod:`zkop_testing.apiserver_kinds`; this module is the HTTP front end,
the fault-injection hooks and the command line::

    python -m zkop_testing.apiserver --port 0 --kubeconfig-out /tmp/kubeconfig

Points where kube-apiserver behaves in a way one might not expect (all
reproduced here, and checked by ``tests/contract`` against real clusters):

* ``metadata.generation`` exists only for kinds whose registry strategy keeps
  it (custom resources, CRDs, EndpointSlices); ConfigMaps, Secrets, Services,
  Leases and Namespaces have none.
* A PUT without ``metadata.resourceVersion`` is an unconditional update for
  built-in kinds but 422 (``Invalid value: 0x0: must be specified for an
  update``) for custom resources and CRDs.
* A create carrying ``metadata.resourceVersion`` fails with 500 ``resourceVersion
  should not be set on objects to be created``; uid, creationTimestamp,
  generation and deletionTimestamp in a create are overwritten.
* When an update removes the last finalizer of a terminating object, the
  caller gets its updated object back but the ``DELETED`` watch event carries
  the last *stored* state (still listing that finalizer) with the deletion's
  resource version.
* Deleting an object that is already terminating answers the object, writes nothing.
* Services and custom resources answer DELETE with the deleted object, most
  other kinds with a ``Status`` (``ReturnDeletedObject``).
* Deleting a namespace (or a CRD) marks it terminating, deletes its contents
  (or custom resources), and removes it once they are gone; new content is
  refused meanwhile (403, or 405 for custom resources of a terminating CRD).
* Lists of built-in kinds omit ``kind``/``apiVersion`` in items; watch events and GETs include them.
* CRD defaults also apply "on read": objects are stored as written and every
  read is defaulted with the current schema, so a default on ``status`` appears
  right after a create that dropped the request's status, and the first write
  after it (even a no-op) stores it: new resource version, ``MODIFIED``.
* CRD schemas must be structural (:mod:`zkop.kube.structural`); ``/status``
  validates only ``status``; updates ratchet unchanged invalid values; ``null``
  in a non-nullable field is dropped. See ``docs/apiserver-fidelity.md``.

CEL validation rules (``x-kubernetes-validations``) are evaluated with cel-python
(:mod:`zkop_testing.apiserver_cel`), without kube-apiserver's cost estimate and with
standard CEL only.

TokenReview, SubjectAccessReview and the RBAC kinds are served by
:mod:`zkop_testing.apiserver_auth` (reviews decided from the stored RBAC objects).

Deliberately not implemented: authentication/authorization (any token is
accepted), garbage collection of dependents (``ownerReferences``) and
``propagationPolicy``, admission webhooks, the scale subresource, conversion webhooks,
field selectors beyond ``metadata.name``/``metadata.namespace`` (plus a few
per kind and CRD ``selectableFields``), and pods/workloads in general.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import re
import select
import signal
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, unquote, urlsplit

import kubernetes.client
import yaml

from zkop_testing import apiserver_apply as managed_fields
from zkop_testing import apiserver_errors as errs
from zkop_testing import apiserver_openapi as openapi
from zkop_testing import apiserver_openapi_proto as openapi_proto
from zkop_testing import apiserver_protobuf as protobuf
from zkop_testing import apiserver_table as table
from zkop_testing.apiserver_auth import AuthRegistry
from zkop_testing.apiserver_errors import ApiError
from zkop_testing.apiserver_kinds import ResourceType
from zkop_testing.apiserver_store import Store, Watcher
from zkop_testing.server_errors import QuietDisconnects
from zkop_testing.waiting import EVENTUALLY

__all__ = ["ApiServer", "RequestRecord", "main"]

JSON = dict[str, Any]

TOKEN = "zkop-inmemory-token"
KUBE_VERSION = {"major": "1", "minor": "33", "gitVersion": "v1.33.0-zkop.inmemory",
                "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
                "buildDate": "2025-04-23T00:00:00Z", "goVersion": "go1.24.0", "compiler": "gc",
                "platform": "linux/amd64"}
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
            409: "Conflict", 410: "Gone", 415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests",
            500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


class RequestRecord(NamedTuple):
    """One request as an RBAC-style record.

    ``name`` of a LIST or WATCH is the one its ``fieldSelector=metadata.name=`` names, as RBAC sees it.
    ``verb`` is the Kubernetes verb (get, list, watch, create, update, patch,
    delete, deletecollection), ``resource`` the plural; ``subresource``,
    ``namespace`` and ``name`` are ``""`` when absent. ``group`` is the API
    group (``""`` for core) and ``user_agent`` the client's ``User-Agent``.
    """

    verb: str
    resource: str
    subresource: str
    namespace: str
    name: str
    group: str = ""
    user_agent: str = ""


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _no_lone_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_no_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_no_lone_surrogates(k): _no_lone_surrogates(v) for k, v in value.items()}
    return value


def go_json(body: bytes) -> Any:
    """A JSON body decoded as Go's ``encoding/json`` decodes it: a lone UTF-16 surrogate escape (``"\\ud800"``)
    becomes U+FFFD (``unquote`` in ``encoding/json/decode.go``); a valid pair is one code point, as in Python."""
    value = json.loads(body)
    return _no_lone_surrogates(value) if b"\\ud" in body.lower() else value


def _selected_name(verb: str, query: Mapping[str, str]) -> str:
    """The name RBAC sees for a LIST/WATCH: kube-apiserver's ``RequestInfoFactory.NewRequestInfo``
    (``k8s.io/apiserver/pkg/endpoints/request/requestinfo.go``) takes it from a
    ``fieldSelector`` that requires ``metadata.name`` to equal one value (``RequiresExactMatch``)."""
    if verb not in ("list", "watch"):
        return ""
    names = [term.split("=", 1)[1].strip() for term in query.get("fieldSelector", "").split(",")
             if term.replace("==", "=").split("=", 1)[0].strip() == "metadata.name" and "!=" not in term]
    return names[0].lstrip("=") if len(names) == 1 else ""


class _Route(NamedTuple):
    group: str
    version: str
    plural: str
    namespace: str | None
    name: str | None
    subresource: str | None


class _HTTPServer(QuietDisconnects, ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # listen(2) backlog: a Go listener asks for the kernel maximum (golang/go net/sock_linux.go
    # maxListenerBacklog reads net.core.somaxconn; the kernel caps larger values to it), not
    # socketserver's 5, which overflows when a client opens many connections at once.
    request_queue_size = 4096

    def __init__(self, address: tuple[str, int], api: ApiServer) -> None:
        self.api = api
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        # headers and body are separate writes: without TCP_NODELAY, Nagle + delayed ACK add ~40 ms per request
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""

    def _handle(self) -> None:
        """Every verb (``do_GET``, ``do_POST``, …): the API server dispatches on ``self.command``."""
        self.server.api._dispatch(self, self.command)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle


class _WatchAborted(Exception):
    """The watch connection is gone (dropped by a hook, or the client went away)."""


def _version_priority(version: str) -> tuple[int, int, int]:
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not match:
        return (0, 0, 0)
    stage = {"alpha": 1, "beta": 2, None: 3}[match.group(2)]
    return (stage, int(match.group(1)), int(match.group(3) or 0))


class ApiServer:
    """In-memory Kubernetes API server on ``127.0.0.1`` (plain HTTP).

    Args:
        port: TCP port; ``0`` picks a free one.
        history_size: watch events retained; a watch (or exact list) from an
            older resource version gets 410 ``Expired``.

    Attributes:
        bookmark_interval: seconds between ``BOOKMARK`` events on watches that
            asked ``allowWatchBookmarks=true``; 60 as kube-apiserver (``cacher.go``
            ``defaultBookmarkFrequency``). As there, one also comes 2 s before the
            watch's ``timeoutSeconds``, and a bookmark is sent only when the resource
            version has moved past the one the watch started from. Tests that need
            bookmarks soon set it low.
        store: the :class:`~zkop_testing.apiserver_store.Store` (for introspection).

    Use as a context manager or call :meth:`start` / :meth:`stop`.
    """

    def __init__(self, port: int = 0, *, history_size: int = 10000) -> None:
        self._requested_port = port
        self.store = Store(history_size=history_size)
        #: TokenReview / SubjectAccessReview answers and the tokens they know (:mod:`zkop_testing.apiserver_auth`);
        #: :data:`TOKEN` is a ``system:masters`` admin, like a kind cluster's kubeconfig user.
        self.auth = AuthRegistry(self.store)
        self.auth.add_token(TOKEN, "zkop-inmemory-admin", ["system:masters"])
        self.bookmark_interval = 60.0
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._state_lock = threading.Lock()
        self._log: list[RequestRecord] = []
        self._fail_fraction = 0.0
        self._fail_codes: tuple[int, ...] = (500, 429)
        self._fail_methods: frozenset[str] | None = None
        self._fail_rng = random.Random()
        self._fail_remaining: int | None = None
        self._fail_retry_after: str | None = "1"
        self._stall = threading.Condition()  # guards _stalled and _writing
        self._stalled = False
        self._writing = 0  # stream threads between their stall check and the end of their writes
        self._stopping = False

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> ApiServer:
        """Bind and serve in a background daemon thread; returns ``self``.

        Raises:
            OSError: the port is taken.
        """
        if self._httpd is not None:
            return self
        self._httpd = _HTTPServer(("127.0.0.1", self._requested_port), self)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="zkop-apiserver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: watches are cut, connections closed, the port released."""
        httpd = self._httpd
        if httpd is None:
            return
        self._stopping = True
        self.stall_watches(False)
        for watcher in self.store.open_watches():
            watcher.drop()
        httpd.shutdown()
        httpd.server_close()
        with httpd.connections_lock:
            connections = list(httpd.connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=EVENTUALLY)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound TCP port (after :meth:`start`)."""
        if self._httpd is None:
            raise RuntimeError("ApiServer is not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def write_kubeconfig(self, path: str | Path, *, namespace: str = "default") -> Path:
        """Write a kubeconfig (cluster ``server`` = :attr:`url`, a dummy bearer token, current-context set).

        Usable with ``kubernetes.config.load_kube_config(config_file=path)`` and
        :func:`zkop.kube.client.load_api_client`. Returns the path.
        """
        target = Path(path)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "zkop-inmemory", "cluster": {"server": self.url}}],
            "users": [{"name": "zkop-inmemory", "user": {"token": TOKEN}}],
            "contexts": [{"name": "zkop-inmemory",
                          "context": {"cluster": "zkop-inmemory", "user": "zkop-inmemory", "namespace": namespace}}],
            "current-context": "zkop-inmemory",
            "preferences": {},
        }
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(config, sort_keys=False))
        return target

    def api_client(self) -> Any:
        """A new :class:`kubernetes.client.ApiClient` configured for this server."""
        configuration = kubernetes.client.Configuration()
        configuration.host = self.url
        configuration.api_key = {"BearerToken": TOKEN}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
        return kubernetes.client.ApiClient(configuration)

    # ------------------------------------------------------------------ hooks
    def drop_watches(self) -> int:
        """Cut every open watch connection abruptly (the client sees a truncated stream).

        Returns:
            the number of watches dropped.
        """
        watchers = self.store.open_watches()
        for watcher in watchers:
            watcher.drop()
        return len(watchers)

    def expire_history(self) -> None:
        """Forget the event history: a watch from any resource version older than the
        current one gets a 410 ``ERROR`` event; an ``Exact`` list at an older version
        gets 410. Open watches are not affected."""
        self.store.expire_history()

    def fail_requests(self, fraction: float, codes: Sequence[int] = (500, 429), *, seed: int | None = None,
                      methods: Iterable[str] | None = None, count: int | None = None,
                      retry_after: str | None = "1") -> None:
        """Fail ``fraction`` (0..1) of new requests with a ``Status`` error.

        Args:
            fraction: probability per request; ``0`` turns injection off.
            codes: HTTP codes picked uniformly; 429 carries ``Retry-After`` (see
                ``retry_after``) and reason ``TooManyRequests``, 503 the same header and
                reason ``ServiceUnavailable``, 500 reason ``InternalError`` and no header.
            seed: seed of the random generator (deterministic runs).
            methods: limit to these HTTP methods (``"GET"``) and/or verbs
                (``"patch"``, ``"watch"``); ``None`` means all.
            count: fail at most this many requests, then injection is off again
                (``fraction=1.0, count=2``: exactly the next two); ``None``: no limit.
            retry_after: the ``Retry-After`` value of a 429 or 503, sent as given
                (``"7"``, or an HTTP date a client should not read as seconds); the
                ``Status`` carries it as ``details.retryAfterSeconds`` when it is a
                whole number, as kube-apiserver's ``ErrorNegotiated`` writes the header
                from that field. ``None``: no header and no ``details``. kube-apiserver's
                API Priority and Fairness and max-in-flight filters answer 429 with ``1``.

        Watches already open are not affected; new watch requests are.
        Discovery requests (``/api``, ``/apis``, ``/version``) never fail.

        Note that urllib3, as the ``kubernetes`` client configures it, itself
        retries idempotent requests (GET, PUT, DELETE) answered 429 or 503 with
        a ``Retry-After`` header (after sleeping that long), so for clients
        other than :class:`zkop.kube.client.KubeClient` (which turns that off and
        retries every verb itself) such injected failures may be invisible except
        for the delay.

        Raises:
            ValueError: ``fraction`` outside [0, 1], no ``codes``, or a negative ``count``.
        """
        if not 0.0 <= fraction <= 1.0:
            raise ValueError("fraction must be within [0, 1]")
        if fraction and not codes:
            raise ValueError("codes must not be empty")
        if count is not None and count < 0:
            raise ValueError("count must not be negative")
        with self._state_lock:
            self._fail_fraction = float(fraction)
            self._fail_codes = tuple(codes)
            self._fail_rng = random.Random(seed)
            self._fail_methods = frozenset(methods) if methods is not None else None
            self._fail_remaining = count
            self._fail_retry_after = retry_after

    def stall_watches(self, stalled: bool = True) -> None:
        """Make open (and new) watches send nothing at all, keeping connections open; ``False`` resumes.

        Events that happen meanwhile are delivered after resuming. ``stall_watches(True)`` returns
        once no stream can write any more: a stream that passed its stall check before the call
        finishes the writes in hand first (each stream checks and writes inside one section that
        the stall waits out).

        Raises:
            TimeoutError: a stream was still writing after ``EVENTUALLY`` seconds (a client that
                stopped reading with the socket buffers full); the stall stays on.
        """
        with self._stall:
            self._stalled = stalled
            self._stall.notify_all()
            if stalled and not self._stall.wait_for(lambda: self._writing == 0, timeout=EVENTUALLY):
                raise TimeoutError(f"{self._writing} watch stream(s) still writing {EVENTUALLY:g} s after the stall")

    def _begin_writing(self) -> bool:
        """Enter a stream's write section unless watches are stalled (then wait up to 0.1 s; False)."""
        with self._stall:
            if self._stalled:
                self._stall.wait(0.1)
                return False
            self._writing += 1
            return True

    def _end_writing(self) -> None:
        with self._stall:
            self._writing -= 1
            self._stall.notify_all()

    @property
    def request_log(self) -> list[RequestRecord]:
        """A copy of the resource requests received so far (discovery requests are not logged)."""
        with self._state_lock:
            return list(self._log)

    def clear_request_log(self) -> None:
        """Empty :attr:`request_log` (and so :attr:`write_counts`)."""
        with self._state_lock:
            self._log.clear()

    @property
    def write_counts(self) -> Counter[str]:
        """Number of write requests per verb (create, update, patch, delete, deletecollection) in the log."""
        with self._state_lock:
            return Counter(r.verb for r in self._log if r.verb in WRITE_VERBS)

    def count_requests(self, verb: str | None = None, resource: str | None = None, *,
                       subresource: str | None = None, namespace: str | None = None, name: str | None = None) -> int:
        """Count logged requests matching every given criterion (``None`` matches anything)."""
        wanted = {"verb": verb, "resource": resource, "subresource": subresource, "namespace": namespace,
                  "name": name}
        with self._state_lock:
            return sum(1 for r in self._log
                       if all(v is None or getattr(r, k) == v for k, v in wanted.items()))

    @property
    def resource_version(self) -> int:
        """The current global resource version."""
        return self.store.current_rv()

    @property
    def open_watch_count(self) -> int:
        """Number of watches currently streaming: registered, and their response headers sent.

        A watch is registered before its headers go out; a test that waits for this count and
        then cuts the watch must not cut it in between (see :attr:`Watcher.streaming`)."""
        return sum(1 for watcher in self.store.open_watches() if watcher.streaming)

    # ------------------------------------------------------------------ HTTP plumbing
    def _dispatch(self, handler: _Handler, method: str) -> None:
        try:
            self._handle(handler, method)
        except (_WatchAborted, OSError):  # the connection is gone (or was cut on purpose)
            handler.close_connection = True

    @staticmethod
    def _read_body(handler: _Handler) -> bytes:
        if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size_line = handler.rfile.readline()
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    handler.rfile.readline()
                    break
                chunks.append(handler.rfile.read(size))
                handler.rfile.readline()
            return b"".join(chunks)
        length = int(handler.headers.get("Content-Length") or 0)
        return handler.rfile.read(length) if length > 0 else b""

    @staticmethod
    def _send(handler: _Handler, code: int, body: Any, headers: Mapping[str, str] | None = None,
              content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":")).encode()
        handler.send_response(code)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Cache-Control", "no-cache, private")
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(data)

    def _send_error(self, handler: _Handler, error: ApiError) -> None:
        self._send(handler, error.code, error.status(), error.headers)

    def _handle(self, handler: _Handler, method: str) -> None:
        parts = urlsplit(handler.path)
        query: dict[str, str] = {}
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            query.setdefault(key, value)
        body = self._read_body(handler)
        segments = [unquote(s) for s in parts.path.split("/") if s]
        try:
            if not self._serve_discovery(handler, method, segments):
                self._serve_resource(handler, method, segments, query, body)
        except ApiError as error:
            self._send_error(handler, error)
        except (_WatchAborted, OSError):
            raise
        except Exception as exc:  # a bug in the double must still answer like an API server
            self._send_error(handler, errs.internal_error(f"{type(exc).__name__}: {exc}"))

    # ------------------------------------------------------------------ discovery
    def _serve_discovery(self, handler: _Handler, method: str, segments: list[str]) -> bool:
        if self._route(segments) is not None:
            return False
        if method not in ("GET", "HEAD"):
            raise errs.method_not_allowed("the server does not allow this method on the requested resource")
        if not segments:
            paths = sorted({"/api", "/api/v1", "/apis", "/version", "/healthz", "/livez", "/readyz", "/openapi/v2",
                            "/openapi/v3"}
                           | {f"/apis/{g}" for g in self._groups()}
                           | {f"/apis/{g}/{v}" for g, vs in self._groups().items() for v in vs})
            self._send(handler, 200, {"paths": paths})
            return True
        head = segments[0]
        if head == "openapi":
            accept = handler.headers.get("Accept", "") or "application/json"
            kinds = [t.split(";")[0].strip() for t in accept.split(",")]
            if segments == ["openapi", "v2"] and not any(
                    t in ("application/json", "*/*", "application/*") for t in kinds):
                if not any(t in openapi_proto.ACCEPTED for t in kinds):
                    raise ApiError(406, "NotAcceptable", f"only the following media types are accepted: "
                                                         f"application/json, {openapi_proto.OPENAPI_V2_PROTOBUF}"
                                                         f" (asked for {accept})")
                self._send(handler, 200, openapi_proto.encode_document(openapi.openapi_v2(self.store)),
                           content_type=openapi_proto.OPENAPI_V2_PROTOBUF)
                return True
            document = openapi.serve(self.store, segments)
            if document is not None:
                self._send(handler, 200, document)
                return True
        if head == "version" and len(segments) == 1:
            self._send(handler, 200, KUBE_VERSION)
            return True
        if head in ("healthz", "livez", "readyz") and len(segments) == 1:
            self._send(handler, 200, b"ok", content_type="text/plain; charset=utf-8")
            return True
        if head == "api":
            if len(segments) == 1:
                self._send(handler, 200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{self.port}"}]})
                return True
            if len(segments) == 2:
                if segments[1] != "v1":
                    raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
                self._send(handler, 200, self._resource_list("", "v1"))
                return True
        if head == "apis":
            groups = self._groups()
            if len(segments) == 1:
                self._send(handler, 200, {"kind": "APIGroupList", "apiVersion": "v1",
                                          "groups": [self._group_doc(g, vs) for g, vs in sorted(groups.items())]})
                return True
            if len(segments) == 2:
                if segments[1] not in groups:
                    raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
                self._send(handler, 200, {"kind": "APIGroup", "apiVersion": "v1",
                                          **self._group_doc(segments[1], groups[segments[1]])})
                return True
            if len(segments) == 3:
                if segments[2] not in groups.get(segments[1], []):
                    raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
                self._send(handler, 200, self._resource_list(segments[1], segments[2]))
                return True
        raise ApiError(404, "NotFound", "the server could not find the requested resource", {})

    def _groups(self) -> dict[str, list[str]]:
        groups: dict[str, set[str]] = {}
        for rt in self.store.endpoints():
            if rt.group:
                groups.setdefault(rt.group, set()).add(rt.version)
        return {g: sorted(vs, key=_version_priority, reverse=True) for g, vs in groups.items()}

    @staticmethod
    def _group_doc(group: str, versions: list[str]) -> JSON:
        docs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": docs, "preferredVersion": docs[0]}

    def _resource_list(self, group: str, version: str) -> JSON:
        resources: list[JSON] = []
        for rt in sorted(self.store.endpoints(), key=lambda r: r.plural):
            if rt.group != group or rt.version != version:
                continue
            doc: JSON = {"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
                         "kind": rt.kind, "verbs": list(rt.verbs)}
            if rt.short_names:
                doc["shortNames"] = list(rt.short_names)
            if rt.categories:
                doc["categories"] = list(rt.categories)
            resources.append(doc)
            if rt.has_status:
                resources.append({"name": f"{rt.plural}/status", "singularName": "", "namespaced": rt.namespaced,
                                  "kind": rt.kind, "verbs": ["get", "patch", "update"]})
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version, "resources": resources}

    # ------------------------------------------------------------------ resources
    @staticmethod
    def _route(segments: list[str]) -> _Route | None:
        if not segments:
            return None
        if segments[0] == "api" and len(segments) >= 3:
            group, version, rest = "", segments[1], segments[2:]
        elif segments[0] == "apis" and len(segments) >= 4:
            group, version, rest = segments[1], segments[2], segments[3:]
        else:
            return None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            if len(rest) > 5:
                return None
            return _Route(group, version, rest[2], rest[1], rest[3] if len(rest) > 3 else None,
                          rest[4] if len(rest) > 4 else None)
        if len(rest) > 3:
            return None
        return _Route(group, version, rest[0], None, rest[1] if len(rest) > 1 else None,
                      rest[2] if len(rest) > 2 else None)

    @staticmethod
    def _verb(method: str, route: _Route, query: Mapping[str, str]) -> str:
        if method in ("GET", "HEAD"):
            if route.name is not None:
                return "get"
            watch = query.get("watch", "")
            return "watch" if watch in ("1", "t", "T", "true", "TRUE", "True") else "list"
        if method == "POST":
            return "create"
        if method == "PUT":
            return "update"
        if method == "PATCH":
            return "patch"
        if method == "DELETE":
            return "delete" if route.name is not None else "deletecollection"
        return method.lower()

    def _maybe_fail(self, method: str, verb: str) -> ApiError | None:
        with self._state_lock:
            if self._fail_fraction <= 0:
                return None
            if self._fail_methods is not None and method not in self._fail_methods and \
                    verb not in self._fail_methods:
                return None
            if self._fail_rng.random() >= self._fail_fraction:
                return None
            code = self._fail_rng.choice(self._fail_codes)
            if self._fail_remaining is not None:
                self._fail_remaining -= 1
                if self._fail_remaining <= 0:
                    self._fail_fraction = 0.0
            retry_after = self._fail_retry_after
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        details = {"retryAfterSeconds": int(retry_after)} if retry_after is not None and retry_after.isdigit() else None
        if code == 429:
            return ApiError(429, "TooManyRequests", "Too many requests, please try again later.", details, headers)
        if code == 500:
            return errs.internal_error("injected fault (zkop_testing.apiserver.fail_requests)")
        if code == 503:
            return ApiError(503, "ServiceUnavailable", "the server is currently unable to handle the request",
                            details, headers)
        if code == 504:
            return ApiError(504, "Timeout", "the server was unable to return a response in the time allotted, but "
                            "may still be processing the request")
        return ApiError(code, _REASONS.get(code, ""), f"injected fault: HTTP {code}")

    def _serve_resource(self, handler: _Handler, method: str, segments: list[str], query: Mapping[str, str],
                        body: bytes) -> None:
        route = self._route(segments)
        if route is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        verb = self._verb(method, route, query)
        with self._state_lock:
            self._log.append(RequestRecord(verb, route.plural, route.subresource or "", route.namespace or "",
                                           route.name or _selected_name(verb, query), route.group,
                                           handler.headers.get("User-Agent", "")))
        injected = self._maybe_fail(method, verb)
        if injected is not None:
            raise injected
        rt = self.store.resolve(route.group, route.version, route.plural)
        if rt is None or (route.namespace is not None and not rt.namespaced) or (
                route.namespace is None and rt.namespaced and route.name is not None):
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        if route.subresource is not None and (route.subresource != "status" or not rt.has_status):
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        not_allowed = errs.method_not_allowed("the server does not allow this method on the requested resource")
        if verb not in rt.verbs or (route.subresource and verb not in ("get", "update", "patch")):
            raise not_allowed
        if rt.namespaced and route.namespace is None and verb not in ("list", "watch"):
            raise not_allowed
        if route.name is not None and method == "POST":
            raise not_allowed
        if self.auth.serves(rt):
            self._send(handler, 201, self.auth.review(rt, self._decode(handler, body)))
            return
        with managed_fields.request_context(query, handler.headers.get("User-Agent", "")):
            self._serve_verb(handler, rt, route, verb, query, body)

    def _serve_verb(self, handler: _Handler, rt: ResourceType, route: _Route, verb: str, query: Mapping[str, str],
                    body: bytes) -> None:
        not_allowed = errs.method_not_allowed("the server does not allow this method on the requested resource")
        namespace = route.namespace
        name = route.name
        store = self.store
        if verb == "get":
            assert name is not None
            self._send(handler, 200, self._maybe_table(handler, rt, store.get(rt, namespace, name), query))
        elif verb == "list":
            self._send(handler, 200, self._maybe_table(handler, rt, store.list_objects(rt, namespace, query), query))
        elif verb == "watch":
            self._serve_watch(handler, rt, namespace, query)
        elif verb == "create":
            decoded = self._decode(handler, body)
            warnings = self._field_validation(rt, decoded, query)
            self._send(handler, 201, store.create(rt, namespace, decoded, query), warnings)
        elif verb == "update":
            assert name is not None
            decoded = self._decode(handler, body)
            warnings = self._field_validation(rt, decoded, query)
            code, obj = store.update(rt, namespace, name, decoded, route.subresource, query)
            self._send(handler, code, obj, warnings)
        elif verb == "patch":
            assert name is not None
            content_type = handler.headers.get("Content-Type", "")
            media = content_type.split(";")[0].strip().lower()
            if media == managed_fields.APPLY_PATCH:
                self._send(handler, *managed_fields.apply_patch(store, rt, namespace, name, body, route.subresource,
                                                                query))
            else:
                if "force" in query:  # ValidatePatchOptions
                    raise errs.invalid("meta.k8s.io", "PatchOptions", "", [errs.FieldError.forbidden(
                        "force", "may not be specified for non-apply patch")])
                warnings = None
                if media in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                    with contextlib.suppress(ValueError):
                        warnings = self._field_validation(rt, json.loads(body or b"null"), query)
                self._send(handler, 200, store.patch(rt, namespace, name, body, content_type, route.subresource,
                                                     query), warnings)
        elif verb == "delete":
            assert name is not None
            self._send(handler, 200, store.delete(rt, namespace, name, self._delete_options(body, query), query))
        elif verb == "deletecollection":
            self._send(handler, 200, store.delete_collection(rt, namespace, self._delete_options(body, query),
                                                             query))
        else:
            raise not_allowed

    def _field_validation(self, rt: ResourceType, body: Any, query: Mapping[str, str]) -> dict[str, str] | None:
        """``fieldValidation``: ``Strict`` refuses unknown fields (400), ``Warn`` (the default) answers
        ``Warning`` headers, ``Ignore`` nothing (``handlers/create.go``, ``fieldmanager`` strict decoding)."""
        mode = query.get("fieldValidation") or "Warn"
        if mode not in ("Strict", "Warn", "Ignore"):
            raise errs.bad_request(f'fieldValidation must be one of "Ignore", "Warn", or "Strict", got "{mode}"')
        if mode == "Ignore" or not isinstance(body, dict):
            return None
        unknown = openapi.unknown_fields(openapi.object_schema(self.store, rt), body)
        if not unknown:
            return None
        if mode == "Strict":
            listed = ", ".join(f'unknown field "{u}"' for u in unknown)
            raise errs.bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                                   f"strict decoding error: {listed}")
        return {"Warning": ", ".join(f'299 - "unknown field \\"{u}\\""' for u in unknown)}

    def _maybe_table(self, handler: _Handler, rt: ResourceType, result: JSON, query: Mapping[str, str]) -> JSON:
        if table.wants_table(handler.headers.get("Accept", "")):
            return table.table_for(self.store, rt, result, query)
        return result

    @staticmethod
    def _decode(handler: _Handler, body: bytes) -> Any:
        content_type = handler.headers.get("Content-Type", "application/json").split(";")[0].strip().lower()
        if not body:
            raise errs.bad_request("the body of the request is empty")
        try:
            if content_type in ("application/yaml", "text/yaml", "application/x-yaml"):
                return yaml.safe_load(body)
            if content_type in ("application/json", ""):
                return go_json(body)
            if content_type == protobuf.PROTOBUF:
                return protobuf.decode(body, ["application/json", "application/yaml", protobuf.PROTOBUF])
        except (ValueError, yaml.YAMLError) as exc:
            raise errs.bad_request(f"couldn't get version/kind; json parse error: {exc}") from exc
        raise errs.unsupported_media_type(content_type, ["application/json", "application/yaml"])

    @staticmethod
    def _delete_options(body: bytes, query: Mapping[str, str]) -> JSON:
        options: JSON = {}
        if body.strip():
            try:
                decoded = json.loads(body)
            except ValueError as exc:
                raise errs.bad_request(f"couldn't get version/kind; json parse error: {exc}") from exc
            if isinstance(decoded, dict):
                options = decoded
        for key in ("propagationPolicy", "gracePeriodSeconds"):
            if key in query:
                options.setdefault(key, query[key])
        return options

    # ------------------------------------------------------------------ watch streaming
    @staticmethod
    def _client_gone(sock: socket.socket) -> bool:
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return False
            return sock.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    @staticmethod
    def _write_chunk(handler: _Handler, payload: bytes) -> None:
        handler.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
        handler.wfile.flush()

    def _write_event(self, handler: _Handler, event: Mapping[str, Any]) -> None:
        self._write_chunk(handler, json.dumps(event, separators=(",", ":")).encode() + b"\n")

    def _serve_watch(self, handler: _Handler, rt: ResourceType, namespace: str | None,
                     query: Mapping[str, str]) -> None:
        timeout_text = query.get("timeoutSeconds", "")
        timeout: float | None = None
        if timeout_text:
            try:
                timeout = float(int(timeout_text))
            except ValueError as exc:
                raise errs.bad_request(f'invalid timeoutSeconds "{timeout_text}"') from exc
        watcher = self.store.open_watch(rt, namespace, query)
        transform = table.watch_transform(handler.headers.get("Accept", ""), self.store, rt, query)
        sock = handler.connection

        def shutdown() -> None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

        watcher.on_drop = shutdown
        try:
            if self._stopping:
                raise _WatchAborted()
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Cache-Control", "no-cache, private")
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            handler.wfile.flush()
            watcher.start_streaming()  # a drop() before this line is found by _stream's first check
            self._stream(handler, watcher, sock, timeout, transform)  # ends with the last chunk
        finally:
            self.store.close_watch(watcher)

    def _next_bookmark(self, now: float, deadline: float | None) -> float | None:
        """``cacheWatcher.nextBookmarkTime``: every :attr:`bookmark_interval`, and 2 s before the
        watch's timeout; ``None`` once that moment has passed."""
        due = now + max(0.01, float(self.bookmark_interval))
        if deadline is None:
            return due
        due = min(due, deadline - 2.0)
        return due if due >= now else None

    def _stream(self, handler: _Handler, watcher: Watcher, sock: socket.socket, timeout: float | None,
                transform: Callable[[JSON], JSON] | None = None) -> None:
        """Write ``watcher``'s events (and bookmarks) as chunks until it closes, its timeout passes
        (then the last chunk) or it is dropped or the client goes (:class:`_WatchAborted`).

        Every check of the stall and the writes after it are one write section
        (:meth:`_begin_writing`), which :meth:`stall_watches` waits out.
        """
        start = time.monotonic()
        deadline = start + timeout if timeout else None
        next_bookmark = self._next_bookmark(start, deadline) if watcher.bookmarks else None
        while True:
            if watcher.dropped:
                raise _WatchAborted()
            if not self._begin_writing():  # stalled
                if self._client_gone(sock):
                    raise _WatchAborted()
                continue
            try:
                for item in watcher.take():
                    rendered = watcher.render(item)
                    if rendered is not None and transform is not None:
                        rendered = transform(rendered)
                    if rendered is not None:
                        self._write_event(handler, rendered)
                if watcher.dropped:
                    raise _WatchAborted()
                if watcher.closed:
                    with watcher.cond:
                        if not watcher.queue:
                            self._write_chunk(handler, b"")  # the last chunk: the stream ends cleanly
                            return
                    continue
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    self._write_chunk(handler, b"")
                    return
                if next_bookmark is not None and now >= next_bookmark:
                    rv = self.store.bookmark_rv(watcher)
                    if rv is None:  # events still queued: they go first
                        continue
                    # cache_watcher.go processInterval: only a bookmark newer than the watch's start is sent
                    if rv > watcher.start_rv:
                        self._write_event(handler, {"type": "BOOKMARK",
                                                    "object": self.store.bookmark_object(watcher.rt, rv)})
                    next_bookmark = self._next_bookmark(now, deadline)
                    continue
            finally:
                self._end_writing()
            wait = 0.25
            if next_bookmark is not None:
                wait = min(wait, max(0.0, next_bookmark - now))
            if deadline is not None:
                wait = min(wait, max(0.0, deadline - now))
            watcher.wait(max(wait, 0.005))
            if self._client_gone(sock):
                raise _WatchAborted()


# ---------------------------------------------------------------------- command line


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m zkop_testing.apiserver``: serve until SIGTERM/SIGINT, then exit 0.

    Prints the URL on stdout (one line) once listening.
    """
    parser = argparse.ArgumentParser(prog="python -m zkop_testing.apiserver",
                                     description="In-memory Kubernetes API server for tests.")
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: pick a free one)")
    parser.add_argument("--kubeconfig-out", type=Path, default=None, help="write a kubeconfig for the server here")
    parser.add_argument("--history-size", type=int, default=10000, help="watch events retained")
    parser.add_argument("--bookmark-interval", type=float, default=60.0,
                        help="seconds between watch bookmarks (kube-apiserver: 60)")
    args = parser.parse_args(argv)
    server = ApiServer(args.port, history_size=args.history_size)
    server.bookmark_interval = args.bookmark_interval
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    try:
        if args.kubeconfig_out is not None:
            server.write_kubeconfig(args.kubeconfig_out)
        print(server.url, flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
