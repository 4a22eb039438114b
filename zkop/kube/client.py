"""A thin JSON client over the official ``kubernetes`` Python client: plain dicts, not generated models.

It uses :class:`kubernetes.client.ApiClient` for configuration, authentication and TLS, and sends
requests straight to its urllib3 pool. Every call goes through :meth:`KubeClient.request` or
:meth:`KubeClient.watch`, which apply client-go's ``rest.Request`` flow control once, for every
verb (rest/request.go ``request``, ``Watch``, ``tryThrottleWithInfo``; rest/with_retry.go):

* **Client-side rate limit**: with a ``rate_limiter`` every request waits for a token (never
  dropped); a watch's first request takes none ("We specifically don't want to rate limit
  watches"), its retries do (``withRetry.Before``).
* **Retry-After**: a 429 or 5xx carrying ``Retry-After: <seconds>`` is retried after that long, up
  to :data:`MAX_RETRIES` times (``checkWait``, ``IsNextRetry``), but never past the request's
  ``timeout`` (client-go: the context deadline); then the caller gets the last answer as
  :class:`ApiException`. urllib3's own ``Retry-After`` handling is off: one retry layer.
* **Cancellation**: a thread running under a :class:`~zkop.kube.cancel.CancelToken` (a controller's
  workers) has its requests aborted when the token is cancelled, and later ones refused
  (:class:`~zkop.kube.cancel.RequestCancelled`), as a cancelled context aborts client-go's.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import kubernetes.client
import kubernetes.config
import urllib3
from kubernetes.client.exceptions import ApiException

from zkop.kube import cancel, metrics
from zkop.kube.flowcontrol import TokenBucket
from zkop.kube.transport import Transport
from zkop.kube.types import JSON as JSON

__all__ = [
    "MAX_RETRIES",
    "MUTATING",
    "ApiException",
    "KubeClient",
    "WatchStream",
    "WritePolicy",
    "WriteRefused",
    "load_api_client",
    "resource_path",
    "retry_after_seconds",
]

log = logging.getLogger(__name__)

#: The HTTP methods that change something on the API server.
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})

#: ``policy(method, path, body)``: ``None`` lets a mutating request through, a sentence refuses it (why).
WritePolicy = Callable[[str, str, Any], str | None]


class WriteRefused(RuntimeError):
    """A mutating request the client's :data:`WritePolicy` refuses (``zkop run --dry-run``); nothing was sent."""

Timeout = float | tuple[float, float] | None

MERGE_PATCH = "application/merge-patch+json"
#: Seconds between recomputations of the authentication headers (in-cluster tokens rotate hourly).
AUTH_REFRESH_SECONDS = 60.0
JSON_PATCH = "application/json-patch+json"
#: Retries of an answer that carries ``Retry-After`` (client-go ``rest.NewRequest``: ``maxRetries: 10``).
MAX_RETRIES = 10
#: Waits for a token longer than these many seconds are logged at DEBUG, and at INFO at most once per
#: :data:`THROTTLE_LOG_INTERVAL` (client-go ``longThrottleLatency``, ``extraLongThrottleLatency`` and
#: ``globalThrottledLogger``'s level-0 interval).
LONG_THROTTLE_LATENCY = 0.05
EXTRA_LONG_THROTTLE_LATENCY = 1.0
THROTTLE_LOG_INTERVAL = 10.0
#: API Priority and Fairness names the FlowSchema that matched a request in this response header.
FLOW_SCHEMA_UID_HEADER = "X-Kubernetes-PF-FlowSchema-UID"
#: What Go's ``strconv.Atoi`` accepts.
_ATOI = re.compile(r"[+-]?[0-9]+")


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


def retry_after_seconds(status: int, headers: Mapping[str, str] | None) -> int | None:
    """Seconds to wait before retrying an answer, or ``None`` when it is not to be retried.

    client-go ``checkWait`` (rest/with_retry.go) and ``retryAfterSeconds`` (rest/request.go): only
    429 and 5xx answers, and only with a ``Retry-After`` header that ``strconv.Atoi`` reads (whole
    seconds; the HTTP-date form is not honoured, as in client-go). A negative value is 0 s.

    Args:
        status: the HTTP status code.
        headers: the response headers (case-insensitive lookup, as urllib3's), or ``None``.
    """
    if status != 429 and status < 500:
        return None
    value = headers.get("Retry-After") if headers is not None else None
    if value is None or not _ATOI.fullmatch(value.strip()):
        return None
    return max(0, int(value))


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
    """JSON-in, JSON-out access to the Kubernetes API, rate-limited, retried on ``Retry-After``, counted
    in ``rest_client_*`` metrics (the module docstring has the rules).

    Thread-safe: the underlying urllib3 pool and the rate limiter are shared by all threads.

    Args:
        api_client: an authenticated official client.
        default_timeout: seconds for a non-watch request (connect and read).
        user_agent: sent as ``User-Agent``.
        rate_limiter: the one token bucket every request of this client waits on (client-go
            ``rest.Config.RateLimiter``); ``None``: no client-side limit (``QPS < 0``).
        max_retries: retries of an answer with ``Retry-After`` (client-go ``Request.MaxRetries``); 0: none.
        clock: monotonic seconds for the waits and latencies (the same clock as ``rate_limiter``'s).
        sleep: how to wait that many seconds (tests pass a fake clock's).
        refuse_writes: asked about every mutating request (:data:`MUTATING`) before it is sent; one it refuses
            raises :class:`WriteRefused` and is logged at ``error`` (``REFUSED an API write``): the net under
            ``zkop run --dry-run``'s writers. ``None``: every request is sent.
    """

    def __init__(
        self, api_client: kubernetes.client.ApiClient, *, default_timeout: float = 30.0,
        user_agent: str = "zkop", rate_limiter: TokenBucket | None = None, max_retries: int = MAX_RETRIES,
        clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
        refuse_writes: WritePolicy | None = None,
    ) -> None:
        self.api_client = api_client
        self.refuse_writes = refuse_writes
        self.default_timeout = default_timeout
        self.api_client.user_agent = user_agent
        self.rate_limiter = rate_limiter
        self.max_retries = max(0, max_retries)
        self._clock = clock
        self._sleep = sleep
        self._throttle_logged_at = -math.inf
        self._retries = _without_retry_after(api_client.rest_client.pool_manager)
        cancel.install(api_client.rest_client.pool_manager)
        self._lock = threading.Lock()
        self._host = api_client.configuration.host.rstrip("/")
        self._auth: dict[str, str] = {}
        self._auth_at = -AUTH_REFRESH_SECONDS
        self._pool: urllib3.HTTPConnectionPool | None = None
        self._transport: Transport | None = None
        self._transport_checked = False
        self._reserved: set[str] = set()  # reserve_connections' holders
        server = urlsplit(self._host)
        self._netloc = server.netloc
        # A server URL may carry a path (Rancher's /k8s/clusters/<id>, an API gateway's prefix).
        self._prefix = server.path.rstrip("/")
        self._metric_children: dict[tuple[Any, tuple[str, ...]], Any] = {}

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

    def _whole_answers(self) -> Transport | None:
        """The :class:`~zkop.kube.transport.Transport` for requests read whole, built once from the urllib3 pool's
        settings; ``None`` where urllib3 keeps them (an HTTP proxy, TLS settings the transport does not reproduce)."""
        if not self._transport_checked:
            with self._lock:
                if not self._transport_checked:
                    pool = self._connection_pool()
                    self._transport = Transport.for_pool(pool) if pool is not None else None
                    self._transport_checked = True
        return self._transport

    def reserve_connections(self, holder: str, count: int) -> None:
        """Keep ``count`` more connections to the API server for ``holder``'s threads, once per holder.

        For threads that start after the client is built (a ZooKeeperEnsemble's workers): urllib3
        opens a connection when every kept one is in use and closes it after the request ("Connection
        pool is full, discarding connection"), a new TCP and TLS handshake each time. The room grows
        the pool that exists (its queue's ``maxsize``) and the size of any made later
        (``connection_pool_kw``); it is never given back, so it follows the most holders seen.
        Behind an HTTP proxy (the official client's ``ProxyManager``) nothing changes.
        """
        manager = self.api_client.rest_client.pool_manager
        with self._lock:
            if count <= 0 or holder in self._reserved or isinstance(manager, urllib3.ProxyManager):
                return
            self._reserved.add(holder)
            size = manager.connection_pool_kw["maxsize"] = int(manager.connection_pool_kw.get("maxsize") or 1) + count
            if self._transport is not None:
                self._transport.grow(size)
        pool = self._connection_pool()
        if pool is not None and pool.pool is not None:
            kept = pool.pool
            with kept.mutex:  # queue.Queue reads maxsize under this lock in put()
                kept.maxsize = max(kept.maxsize, size)

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

    def _metric(self, metric: Any, *labels: str) -> Any:
        """The child of ``metric`` for ``labels`` and this client's host, looked up once."""
        key = (metric, labels)
        child = self._metric_children.get(key)
        if child is None:
            child = self._metric_children[key] = metric.labels(*labels, self._netloc)
        return child

    def retry_after_handled(self, err: ApiException) -> bool:
        """True when ``err`` is an answer this client retries as its ``Retry-After`` asks (429 or 5xx
        with ``Retry-After``, retries on), so it was retried already -- up to :attr:`max_retries`
        times or until the wait would outlast the request's timeout.

        A caller with a retry loop of its own retries ``err`` only if this is False: otherwise each
        of its attempts would be another round of the client's retries (a retry storm).
        """
        return self.max_retries > 0 and retry_after_seconds(int(err.status or 0), err.headers) is not None

    def _throttle(self, verb: str, path: str, reason: str = "") -> None:
        """Wait for a token of :attr:`rate_limiter` (none: return at once) and observe the wait.

        client-go ``Request.tryThrottleWithInfo``: ``rateLimiter.Wait``, its latency into
        ``rest_client_rate_limiter_duration_seconds`` (also when it is 0), a line when it was long.
        """
        limiter = self.rate_limiter
        if limiter is None:
            return
        started = self._clock()
        delay = limiter.reserve()
        if delay > 0:
            self._sleep(delay)
        now = self._clock()
        waited = now - started
        self._metric(metrics.REST_CLIENT_RATE_LIMITER_DURATION, verb).observe(waited)
        if waited <= LONG_THROTTLE_LATENCY:
            return
        why = reason or "client-side throttling, not priority and fairness"
        level = logging.DEBUG
        if waited > EXTRA_LONG_THROTTLE_LATENCY:
            with self._lock:
                if now - self._throttle_logged_at >= THROTTLE_LOG_INTERVAL:
                    self._throttle_logged_at = now
                    level = logging.INFO
        log.log(level, "waited %.3f s before sending %s %s (%s)", waited, verb, path, why)

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
        for attempt in range(2):
            headers = self._headers(refresh=attempt > 0)
            headers["Accept"] = "application/json"
            if body is not None:
                headers["Content-Type"] = content_type or "application/json"
            transport = None if stream else self._whole_answers()
            if transport is not None:
                response: Any = transport.request(method, self._prefix + url, body=payload, headers=headers,
                                                  timeout=timeout)
                if response.status != 401 or attempt:
                    return response
                continue  # a rotated token: refresh the credentials once and retry
            pool = self._connection_pool()
            if pool is not None:
                # The pool's own retry policy (the official client's configuration) without Retry-After.
                response = pool.urlopen(method, self._prefix + url, body=payload, headers=headers,
                                        timeout=_urllib3_timeout(timeout), preload_content=not stream,
                                        retries=self._retries)
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

    def _send(
        self, method: str, path: str, query: Mapping[str, Any] | None, body: Any,
        content_type: str | None, timeout: Timeout, *, stream: bool = False,
    ) -> Any:
        """:meth:`_call`, again after ``Retry-After`` seconds while the answer asks for it; the last answer.

        client-go ``Request.request`` / ``Request.Watch`` with ``withRetry.IsNextRetry`` and
        ``Before``: each attempt is counted; a retry waits the header's seconds, then for a token.
        Stops after :attr:`max_retries` retries, or when the wait would end more than the request's
        timeout (for ``(connect, read)`` their sum) after the first attempt began.
        """
        budget = _seconds(timeout)
        first = self._clock()
        retries = 0
        while True:
            _refuse_if_cancelled()
            response = self._call(method, path, query, body, content_type, timeout, stream=stream)
            status = response.status
            self._metric(metrics.REST_CLIENT_REQUESTS, str(status), method).inc()
            if retries:
                self._metric(metrics.REST_CLIENT_REQUEST_RETRIES, str(status), method).inc()
            wait = retry_after_seconds(status, response.headers)
            if wait is None or retries >= self.max_retries or self._clock() - first + wait > budget:
                return response
            retries += 1
            reason = _retry_reason(response, retries, wait)
            log.debug("%s %s answered %d; retrying (%s)", method, path, status, reason)
            _discard(response)
            if wait:
                self._sleep(wait)
            self._throttle(method, path, reason)

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

        Waits for a token first and retries an answer that carries ``Retry-After`` (module docstring).
        ``rest_client_request_duration_seconds`` is the whole call, that wait and the retries included
        (client-go ``Request.request``).

        Raises:
            ApiException: a non-2xx answer (after the retries); ``status`` is the HTTP code, ``body`` the
                ``Status`` JSON text, ``headers`` the response headers.
            urllib3.exceptions.HTTPError: transport failures (connection refused, read timeout), and
                :class:`~zkop.kube.cancel.RequestCancelled` for a cancelled thread (module docstring).
            WriteRefused: :attr:`refuse_writes` refused this mutating request; nothing was sent.
        """
        _refuse_if_cancelled()
        if self.refuse_writes is not None and method.upper() in MUTATING:
            why = self.refuse_writes(method.upper(), path, body)
            if why is not None:
                log.error("REFUSED an API write: %s %s (%s)", method.upper(), path, why)
                raise WriteRefused(f"{method.upper()} {path} refused: {why}")
        started = self._clock()
        self._throttle(method, path)
        response = self._send(method, path, query, body, content_type, timeout or self.default_timeout)
        data = response.data
        self._metric(metrics.REST_CLIENT_REQUEST_DURATION, method).observe(self._clock() - started)
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

        The first request takes no token of the rate limiter; a ``Retry-After`` answer is retried as
        for :meth:`request`, each retry after a token (client-go ``Request.Watch``).
        ``rest_client_request_duration_seconds`` is the time until the response headers.

        Raises:
            ApiException: the watch request itself was refused (e.g. 410, 403; 429 after the retries).
        """
        q = dict(query)
        q["watch"] = True
        started = self._clock()
        response = self._send("GET", path, q, None, None, timeout, stream=True)
        self._metric(metrics.REST_CLIENT_REQUEST_DURATION, "GET").observe(self._clock() - started)
        if not 200 <= response.status <= 299:
            response.data  # noqa: B018 - read (and keep) the Status body for the exception
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        return WatchStream(response)

    def close(self) -> None:
        """Close the connection pools."""
        if self._transport is not None:
            self._transport.close()
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


def _refuse_if_cancelled() -> None:
    """Raise :class:`~zkop.kube.cancel.RequestCancelled` if the calling thread's token is cancelled (before a wait
    for the rate limiter or a retry, not only before the send)."""
    token = cancel.current()
    if token is not None and token.cancelled:
        raise token.error()


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _urllib3_timeout(timeout: Timeout) -> urllib3.Timeout:
    """``timeout`` as urllib3 takes it: seconds for the whole request, or ``(connect, read)``."""
    if timeout is None or isinstance(timeout, (int, float)):
        return urllib3.Timeout(total=timeout)
    return urllib3.Timeout(connect=timeout[0], read=timeout[1])


def _seconds(timeout: Timeout) -> float:
    """A request's time budget: the timeout, ``connect + read`` for a pair, unbounded for ``None``."""
    if timeout is None:
        return math.inf
    if isinstance(timeout, tuple):
        return float(timeout[0] + timeout[1])
    return float(timeout)


def _retry_reason(response: Any, retries: int, wait: int) -> str:
    """client-go ``getRetryReason``: which retry, how long, and why (APF names its FlowSchema)."""
    message = f"retries: {retries}, retry-after: {wait}s"
    if response.status == 429:
        uid = (response.headers or {}).get(FLOW_SCHEMA_UID_HEADER, "")
        return f"{message} - retry-reason: due to server-side throttling, FlowSchema UID: {uid!r}"
    return f"{message} - retry-reason: {response.status}"


def _discard(response: Any) -> None:
    """Read what is left of an answer that will be retried and give its connection back to the pool."""
    with contextlib.suppress(Exception):
        response.drain_conn()
        response.release_conn()


def _without_retry_after(manager: urllib3.PoolManager) -> urllib3.Retry:
    """The pool manager's urllib3 retry policy without its own ``Retry-After`` handling.

    urllib3's ``Retry`` (the default ``Retry(3)`` when the official configuration sets none) sleeps
    and resends GET, PUT and DELETE answered 413, 429 or 503 with ``Retry-After``
    (``respect_retry_after_header``); left on, each of :meth:`KubeClient._send`'s attempts would be
    up to four. Set on the manager too, so the pools a proxy path makes get it; connection retries
    are kept as configured.
    """
    retries = urllib3.Retry.from_int(manager.connection_pool_kw.get("retries")).new(respect_retry_after_header=False)
    manager.connection_pool_kw["retries"] = retries
    return retries
