"""Authentication and authorisation of ``/metrics`` requests through the API server (``--metrics-secure``).

controller-runtime's ``filters.WithAuthenticationAndAuthorization`` [CR pkg/metrics/filters/filters.go]:

1. **Authentication**: the bearer token in a ``TokenReview`` [k8s.io/apiserver
   pkg/authentication/request/bearertoken, plugin/pkg/authenticator/token/webhook]; none or not
   authenticated → **401**. Results cached ``token_ttl`` seconds (CR ``CacheTTL``), keyed by the
   token's SHA-256.
2. **Authorisation**: a ``SubjectAccessReview`` with ``nonResourceAttributes`` ``{path, verb:
   lower-case method}`` (CR ``strings.ToLower(req.Method)``); not allowed → **403**. Cached
   ``allow_ttl``/``deny_ttl`` (CR ``AllowCacheTTL``, ``DenyCacheTTL``).
3. An API server error after ``attempts`` tries (CR ``WebhookRetryBackoff``) → **500**, never cached.

RBAC: ``manifests/rbac/metrics_auth_role.yaml`` (zkop), ``metrics_reader_role.yaml`` (a scraper).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import urllib3
from kubernetes.client.exceptions import ApiException

from zkop.kube.client import KubeClient

__all__ = ["AuthError", "DelegatingAuth", "UserInfo", "bearer_token", "with_authentication_and_authorization"]

log = logging.getLogger(__name__)

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
K = TypeVar("K")
V = TypeVar("V")


class AuthError(Exception):
    """The API server could not answer a review (transport error or non-2xx after the retries)."""


@dataclass(frozen=True)
class UserInfo:
    """The user a TokenReview authenticated (``status.user``)."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())


class _TTLCache(Generic[K, V]):
    """A thread-safe map whose entries expire; the oldest entry goes when ``size`` is exceeded."""

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> tuple[bool, V | None]:
        now = time.monotonic()
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return False, None
            if item[0] <= now:
                del self._items[key]
                return False, None
            return True, item[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        if ttl <= 0:
            return
        with self._lock:
            self._items[key] = (time.monotonic() + ttl, value)
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


def bearer_token(authorization: str) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value, else ``None``.

    Like kube-apiserver's bearer token authenticator [k8s.io/apiserver
    pkg/authentication/request/bearertoken/bearertoken.go]: the scheme is case-insensitive,
    surrounding blanks are ignored, an empty token counts as none.
    """
    parts = authorization.strip().split(" ")
    if len(parts) < 2 or parts[0].lower() != "bearer":
        return None
    token = parts[1].strip() if len(parts) == 2 else None
    return token or None


class DelegatingAuth:
    """TokenReview + SubjectAccessReview with caches, as controller-runtime's metrics filter.

    Args:
        client: the operator's API client (its ServiceAccount needs ``create`` on both reviews).
        token_ttl: seconds a TokenReview result (either way) is reused.
        allow_ttl, deny_ttl: seconds an allowed / denied SubjectAccessReview is reused.
        attempts: tries per review on transport errors, 429 and 5xx (not those the client retried on its
            ``Retry-After`` already: :meth:`~zkop.kube.client.KubeClient.retry_after_handled`).
        backoff: seconds before the second try, growing ×1.5 per try.
        timeout: seconds per review request (CR: ``TokenAccessReviewTimeout: 10s``).
    """

    def __init__(self, client: KubeClient, *, token_ttl: float = 60.0, allow_ttl: float = 300.0,
                 deny_ttl: float = 30.0, attempts: int = 5, backoff: float = 0.5, timeout: float = 10.0) -> None:
        self.client = client
        self.token_ttl = token_ttl
        self.allow_ttl = allow_ttl
        self.deny_ttl = deny_ttl
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.timeout = timeout
        self._tokens: _TTLCache[str, UserInfo | None] = _TTLCache()
        self._decisions: _TTLCache[tuple[UserInfo, str, str], tuple[bool, str]] = _TTLCache()

    def _review(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        delay = self.backoff
        for attempt in range(self.attempts):
            try:
                return self.client.request("POST", path, body=body, timeout=self.timeout)
            except ApiException as err:
                # An answer with Retry-After was retried by the client already, at the server's pace: again
                # here, each of these attempts would be another round of those (a retry storm).
                retriable = (err.status == 429 or (err.status or 0) >= 500) and not self.client.retry_after_handled(err)
                if not retriable or attempt + 1 == self.attempts:
                    raise AuthError(f"{body['kind']}: HTTP {err.status} {err.reason}") from err
            except urllib3.exceptions.HTTPError as err:
                if attempt + 1 == self.attempts:
                    raise AuthError(f"{body['kind']}: {err}") from err
            time.sleep(delay)
            delay *= 1.5
        raise AssertionError("unreachable")  # pragma: no cover

    def authenticate(self, token: str) -> UserInfo | None:
        """The user ``token`` belongs to, or ``None`` when the API server does not know it.

        Raises:
            AuthError: the TokenReview could not be made.
        """
        key = hashlib.sha256(token.encode()).hexdigest()
        hit, cached = self._tokens.get(key)
        if hit:
            return cached
        review = self._review(TOKEN_REVIEWS, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                              "spec": {"token": token}})
        status = review.get("status") or {}
        user: UserInfo | None = None
        if status.get("authenticated"):
            raw = status.get("user") or {}
            extra = tuple(sorted((str(k), tuple(str(x) for x in v or ())) for k, v in (raw.get("extra") or {}).items()))
            user = UserInfo(str(raw.get("username", "")), str(raw.get("uid", "")),
                            tuple(str(g) for g in raw.get("groups") or ()), extra)
        elif status.get("error"):
            log.debug("TokenReview: token not authenticated: %s", status["error"])
        self._tokens.put(key, user, self.token_ttl)
        return user

    def authorize(self, user: UserInfo, verb: str, path: str) -> tuple[bool, str]:
        """``(allowed, reason)`` for ``user`` doing ``verb`` on the non-resource URL ``path``.

        Raises:
            AuthError: the SubjectAccessReview could not be made.
        """
        key = (user, verb, path)
        hit, cached = self._decisions.get(key)
        if hit and cached is not None:
            return cached
        spec: dict[str, Any] = {"user": user.username, "groups": list(user.groups),
                                "nonResourceAttributes": {"path": path, "verb": verb}}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        review = self._review(SUBJECT_ACCESS_REVIEWS, {"apiVersion": "authorization.k8s.io/v1",
                                                       "kind": "SubjectAccessReview", "spec": spec})
        status = review.get("status") or {}
        decision = (bool(status.get("allowed")) and not status.get("denied"), str(status.get("reason") or ""))
        self._decisions.put(key, decision, self.allow_ttl if decision[0] else self.deny_ttl)
        return decision


def _plain(start_response: Callable[..., Any], status: str, text: str) -> list[bytes]:
    """Go's ``http.Error``: text/plain, nosniff, the message and a newline."""
    body = (text + "\n").encode()
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("X-Content-Type-Options", "nosniff"),
                            ("Content-Length", str(len(body)))])
    return [body]


def with_authentication_and_authorization(app: WsgiApp, auth: DelegatingAuth) -> WsgiApp:
    """Wrap the WSGI ``app`` so every request is authenticated and authorised first (see module doc)."""

    def filtered(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        token = bearer_token(str(environ.get("HTTP_AUTHORIZATION", "")))
        try:
            user = auth.authenticate(token) if token is not None else None
        except AuthError as err:
            log.error("Authentication failed: %s", err)
            return _plain(start_response, "500 Internal Server Error", "Authentication failed")
        if user is None:
            return _plain(start_response, "401 Unauthorized", "Unauthorized")
        verb = str(environ.get("REQUEST_METHOD", "GET")).lower()
        path = str(environ.get("PATH_INFO", "")) or "/"
        try:
            allowed, reason = auth.authorize(user, verb, path)
        except AuthError as err:
            message = f"Authorization for user {user.username} failed"
            log.error("%s: %s", message, err)
            return _plain(start_response, "500 Internal Server Error", message)
        if not allowed:
            message = f"Authorization denied for user {user.username}"
            log.debug("%s: %s", message, reason)
            return _plain(start_response, "403 Forbidden", message)
        return app(environ, start_response)

    return filtered
