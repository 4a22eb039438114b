"""A thin JSON client over the official ``kubernetes`` Python client.

zkop talks to the API server through :class:`kubernetes.client.ApiClient`
(its configuration, authentication, TLS and urllib3 connection pool) but keeps
objects as plain ``dict`` values instead of the generated Pydantic models, and
sends requests straight to the urllib3 connection pool the official client
configured (no per-request URL parsing, serialisation hooks or token refresh):
the models of client 37.x reject unknown fields and cost memory and CPU per
object (see docs/performance.md). Every call goes through :meth:`KubeClient.request`
or :meth:`KubeClient.watch`, which is also where API request counts are taken.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import kubernetes.client
import kubernetes.config
import urllib3
from kubernetes.client.exceptions import ApiException

from zkop.kube import metrics

__all__ = ["ApiException", "KubeClient", "WatchStream", "load_api_client", "resource_path"]

JSON = dict[str, Any]
Timeout = float | tuple[float, float] | None

MERGE_PATCH = "application/merge-patch+json"
#: Seconds between recomputations of the authentication headers (in-cluster tokens rotate hourly).
AUTH_REFRESH_SECONDS = 60.0
JSON_PATCH = "application/json-patch+json"


def load_api_client(kubeconfig: str | None = None, *, pool_size: int = 8) -> kubernetes.client.ApiClient:
    """Build an :class:`~kubernetes.client.ApiClient` the way ``kubectl`` would find a cluster.

    Order: the explicit ``kubeconfig`` path, then ``$KUBECONFIG``, then the
    in-cluster service account (``KUBERNETES_SERVICE_HOST``), then ``~/.kube/config``.

    Args:
        kubeconfig: path to a kubeconfig file, or ``None``.
        pool_size: urllib3 connections kept per host; size it to the number of
            threads that call the API at once (workers + informers + election).

    Raises:
        kubernetes.config.ConfigException: no usable configuration was found.
    """
    configuration = kubernetes.client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path:
        kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=path, client_configuration=configuration
        )
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        kubernetes.config.load_incluster_config(  # type: ignore[no-untyped-call]
            client_configuration=configuration
        )
    else:
        kubernetes.config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    configuration.connection_pool_maxsize = max(pool_size, 4)
    return kubernetes.client.ApiClient(configuration)


def resource_path(
    group: str, version: str, plural: str, namespace: str | None = None, name: str | None = None,
    subresource: str | None = None,
) -> str:
    """Return the REST path of a collection or an object.

    ``group`` is ``""`` for the core API (``/api/v1``), anything else lives under
    ``/apis/<group>/<version>`` (Kubernetes API concepts, "Resource URIs").
    """
    base = f"/api/{version}" if group == "" else f"/apis/{group}/{version}"
    if namespace is not None:
        base += f"/namespaces/{quote(namespace, safe='')}"
    base += f"/{plural}"
    if name is not None:
        base += f"/{quote(name, safe='')}"
        if subresource:
            base += f"/{subresource}"
    return base


class KubeClient:
    """JSON-in, JSON-out access to the Kubernetes API, counted in ``rest_client_*`` metrics.

    Thread-safe: the underlying urllib3 pool is shared by all threads.

    Args:
        api_client: an authenticated official client.
        default_timeout: seconds for a non-watch request (connect and read).
        user_agent: sent as ``User-Agent``.
    """

    def __init__(
        self, api_client: kubernetes.client.ApiClient, *, default_timeout: float = 30.0,
        user_agent: str = "zkop",
    ) -> None:
        self.api_client = api_client
        self.default_timeout = default_timeout
        self.api_client.user_agent = user_agent
        self._lock = threading.Lock()
        self._host = api_client.configuration.host.rstrip("/")
        self._auth: dict[str, str] = {}
        self._auth_at = -AUTH_REFRESH_SECONDS
        self._pool: urllib3.HTTPConnectionPool | None = None
        server = urlsplit(self._host)
        self._netloc = server.netloc
        # A server URL may carry a path (Rancher's /k8s/clusters/<id>, an API gateway's prefix).
        self._prefix = server.path.rstrip("/")
        self._metric_children: dict[tuple[str, int], tuple[Any, Any]] = {}

    def _connection_pool(self) -> urllib3.HTTPConnectionPool | None:
        """The official client's urllib3 pool for the API server, or ``None`` behind an HTTP proxy.

        A proxy needs urllib3's ``ProxyManager`` to rewrite each request, so then every
        request takes the official client's own REST path instead.
        """
        manager = self.api_client.rest_client.pool_manager
        if isinstance(manager, urllib3.ProxyManager):
            return None
        pool = self._pool
        if pool is None or pool.pool is None:  # first use, or closed (PoolManager eviction, close())
            pool = self._pool = manager.connection_from_url(self._host)
        return pool

    def _headers(self, *, refresh: bool = False) -> dict[str, str]:
        """Default headers plus authentication, the latter recomputed at most every
        :data:`AUTH_REFRESH_SECONDS` (or on ``refresh``): the generated client runs its
        token-refresh hook on every request, which costs more than the request itself.
        """
        now = time.monotonic()
        with self._lock:
            if refresh or now - self._auth_at >= AUTH_REFRESH_SECONDS:
                auth: dict[str, str] = {}
                self.api_client.update_params_for_auth(auth, [], ["BearerToken"], "", "GET", None)
                self._auth, self._auth_at = auth, now
            return {**self.api_client.default_headers, **self._auth}

    def _observe(self, verb: str, status: int, seconds: float) -> None:
        """client-go's ``rest_client_requests_total`` and ``rest_client_request_duration_seconds``
        (``verb`` is the HTTP method; for a watch the time until the response headers)."""
        children = self._metric_children.get((verb, status))
        if children is None:
            children = self._metric_children[(verb, status)] = (
                metrics.REST_CLIENT_REQUESTS.labels(str(status), verb, self._netloc),
                metrics.REST_CLIENT_REQUEST_DURATION.labels(verb, self._netloc),
            )
        children[0].inc()
        children[1].observe(seconds)

    def _call(
        self, method: str, path: str, query: Mapping[str, Any] | None, body: Any,
        content_type: str | None, timeout: Timeout, *, stream: bool = False,
    ) -> Any:
        """Send one request; return the urllib3 response (``status``, ``reason``, ``headers``, ``data``).

        ``stream=True`` leaves the body unread (a watch); otherwise ``data`` holds it.
        """
        url = path
        params = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        if params:
            url += "?" + urlencode(params)
        payload = None if body is None else json.dumps(body).encode()
        if timeout is None or isinstance(timeout, (int, float)):
            request_timeout = urllib3.Timeout(total=timeout)
        else:
            request_timeout = urllib3.Timeout(connect=timeout[0], read=timeout[1])
        for attempt in range(2):
            headers = self._headers(refresh=attempt > 0)
            headers["Accept"] = "application/json"
            if body is not None:
                headers["Content-Type"] = content_type or "application/json"
            pool = self._connection_pool()
            if pool is not None:
                # The pool's own retry policy (the official client's configuration), as before.
                response = pool.urlopen(method, self._prefix + url, body=payload, headers=headers,
                                        timeout=request_timeout, preload_content=not stream)
            else:
                response = self.api_client.rest_client.request(  # type: ignore[no-untyped-call]
                    method, self._host + url, headers=headers, body=body, _request_timeout=timeout,
                ).response
                if not stream:
                    response.data  # noqa: B018 - read it now, like preload_content
            if response.status != 401 or attempt:
                return response
            response.drain_conn()  # a rotated token: refresh the credentials once and retry
        raise AssertionError("unreachable")  # pragma: no cover

    def request(
        self, method: str, path: str, *, query: Mapping[str, Any] | None = None, body: Any = None,
        content_type: str | None = None, timeout: Timeout = None,
    ) -> JSON:
        """Send one request and return the decoded JSON body.

        Args:
            method: HTTP method (``GET``, ``POST``, ``PUT``, ``PATCH``, ``DELETE``).
            path: REST path, see :func:`resource_path`.
            query: query parameters; ``None`` values are left out, booleans become ``true``/``false``.
            body: JSON-serialisable body (a list for JSON patch).
            content_type: for ``PATCH``: :data:`MERGE_PATCH` or :data:`JSON_PATCH`.
            timeout: seconds, or ``(connect, read)``; default :attr:`default_timeout`.

        Raises:
            ApiException: a non-2xx answer; ``status`` is the HTTP code, ``body`` the ``Status`` JSON text.
            urllib3.exceptions.HTTPError: transport failures (connection refused, read timeout).
        """
        started = time.monotonic()
        response = self._call(method, path, query, body, content_type, timeout or self.default_timeout)
        data = response.data
        self._observe(method, response.status, time.monotonic() - started)
        if not 200 <= response.status <= 299:
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        if not data:
            return {}
        result: JSON = json.loads(data)
        return result

    def watch(self, path: str, *, query: Mapping[str, Any], timeout: Timeout) -> WatchStream:
        """Open a watch; iterate the returned :class:`WatchStream` for its events.

        The caller passes ``resourceVersion``, ``timeoutSeconds`` and
        ``allowWatchBookmarks`` in ``query``; ``watch=true`` is added here.
        ``timeout`` should be ``(connect, read)``: a stream silent for ``read``
        seconds raises ``urllib3.exceptions.ReadTimeoutError``, so a silently dead
        TCP connection is noticed (kubernetes-client/python#1148).

        Raises:
            ApiException: the watch request itself was refused (e.g. 410, 403, 429).
        """
        q = dict(query)
        q["watch"] = True
        started = time.monotonic()
        response = self._call("GET", path, q, None, None, timeout, stream=True)
        self._observe("GET", response.status, time.monotonic() - started)
        if not 200 <= response.status <= 299:
            response.data  # noqa: B018 - read (and keep) the Status body for the exception
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        return WatchStream(response)

    def close(self) -> None:
        """Close the connection pool."""
        self.api_client.close()  # type: ignore[no-untyped-call]


class WatchStream:
    """The events of one watch request, as dicts ``{"type": ..., "object": {...}}``.

    ``ERROR`` events are yielded as they are; interpreting them (410 Gone) is the
    reflector's job. :meth:`close` may be called from another thread to unblock
    a reader (it shuts the socket down, like the official client's ``Watch.stop``).
    """

    def __init__(self, response: Any) -> None:
        self._response = response
        self._closed = False

    def __iter__(self) -> Iterator[JSON]:
        loads = json.loads
        for line in self.lines():
            yield loads(line)

    def lines(self) -> Iterator[bytes]:
        """The events undecoded: one JSON document per item, as the server sent it (newline-delimited)."""
        raw = self._response
        buffer = b""
        try:
            for chunk in raw.stream(65536, decode_content=True):
                if b"\n" not in chunk:
                    buffer += chunk
                    continue
                # One split per chunk (a chunk is usually one whole event, newline included).
                lines = (buffer + chunk if buffer else chunk).split(b"\n")
                buffer = lines.pop()
                for line in lines:
                    if line and not line.isspace():
                        yield line
            if buffer.strip() and not self._closed:
                yield buffer
        finally:
            self.close()

    def close(self) -> None:
        """Close the stream; safe to call more than once and from any thread."""
        if self._closed:
            return
        self._closed = True
        conn = getattr(self._response, "connection", None)
        sock = getattr(conn, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(Exception):
            self._response.close()


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
