"""One list-watch kept alive: client-go ``tools/cache/reflector.go``.

A paginated LIST, then WATCH from the list's resourceVersion with bookmarks, a randomised
server timeout in [300, 600] s and a client read timeout (the *inactivity timeout*).  A watch
that ends cleanly, or stays silent past the inactivity timeout, is reopened from the newest
resourceVersion seen (no relist); 410 Gone (an HTTP status or an ``ERROR`` event) relists and
replaces the store's contents.  Other failures back off exponentially (0.8 s doubling to 30 s,
full jitter, reset after 2 min healthy -- client-go's values, :class:`~.backoff.Backoff`).

The reflector writes through the small :class:`Store` protocol, as client-go's reflector writes
to a ``Store`` (a ``DeltaFIFO``) [CG tools/cache/reflector.go ``syncWith``, ``watchHandler``].
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import urllib3.exceptions

from zkop.kube.client import JSON, ApiException, KubeClient, WatchStream, resource_path
from zkop.runtime.cache.backoff import Backoff
from zkop.runtime.cache.indexer import resource_version
from zkop.runtime.cache.transform import Transform

#: This module's own jitter source: zkop leaves the global ``random`` state alone (the process may share it).
_random = random.Random()

__all__ = ["Reflector", "ResourceRef", "Store"]

log = logging.getLogger(__name__)


class Store(Protocol):
    """What a :class:`Reflector` writes to (the informer).  Called on the reflector's thread."""

    def replace(self, namespace: str | None, items: list[JSON]) -> None:
        """A fresh LIST of ``namespace`` (all if ``None``) replaces what was stored for it."""
        ...

    def on_watch_upsert(self, obj: JSON) -> None:
        """An ``ADDED`` or ``MODIFIED`` watch event."""
        ...

    def on_watch_delete(self, obj: JSON) -> None:
        """A ``DELETED`` watch event."""
        ...


@dataclass(frozen=True)
class ResourceRef:
    """Group/version/plural of a resource, e.g. ``ResourceRef("", "v1", "services")``."""

    group: str
    version: str
    plural: str

    def path(self, namespace: str | None = None) -> str:
        """Collection path, cluster-wide if ``namespace`` is ``None``."""
        return resource_path(self.group, self.version, self.plural, namespace)


class _WatchExpired(Exception):
    """The watch's resourceVersion is too old (HTTP 410 Gone / ERROR event with code 410)."""


class Reflector:
    """Keeps the part of an :class:`Indexer` for one list-watch in sync with the API server.

    Args:
        resource: what to list and watch.
        namespace: a namespace, or ``None`` for all.
        store: where LIST results and watch events go (the informer), see :class:`Store`.
        label_selector, field_selector: passed to LIST and WATCH.
        page_size: LIST ``limit``.
        watch_timeout_range: server-side ``timeoutSeconds`` is drawn from this range, seconds.
        inactivity_timeout: client read timeout on the watch stream, seconds: a stream
            silent for this long (no event, no bookmark) is abandoned and reopened.
        transform: applied to each object as its LIST page or watch event is decoded, before the
            store sees it (client-go ``SetTransform``; see :mod:`.transform`). Per page, so the
            decoded form of a whole paginated LIST is never alive at once.
        raw_event_filter: shown each watch event undecoded first; returns the event's
            ``resourceVersion`` if it applied the event itself (nothing more is done with it), else
            ``""`` (the event is decoded and handled as usual). The informer's own-write echoes
            (:mod:`.echoes`).
    """

    def __init__(
        self, client: KubeClient, resource: ResourceRef, namespace: str | None, store: Store, *,
        label_selector: str | None = None, field_selector: str | None = None, page_size: int = 500,
        watch_timeout_range: tuple[int, int] = (300, 600), inactivity_timeout: float = 90.0,
        backoff: Backoff | None = None, transform: Transform | None = None,
        raw_event_filter: Callable[[bytes], str] | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.namespace = namespace
        self.store = store
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.page_size = page_size
        self.watch_timeout_range = watch_timeout_range
        self.inactivity_timeout = inactivity_timeout
        self.backoff = backoff or Backoff()
        self.transform = transform
        self.raw_event_filter = raw_event_filter
        self.last_sync_resource_version = ""
        self.synced = threading.Event()
        self.relists = 0
        self._stop = threading.Event()
        self._response_lock = threading.Lock()
        self._watch_stream: WatchStream | None = None

    def _selectors(self) -> dict[str, Any]:
        return {"labelSelector": self.label_selector, "fieldSelector": self.field_selector}

    def list(self) -> tuple[list[JSON], str]:
        """Paginated LIST; returns ``(items, resourceVersion of the list)``.

        Raises:
            ApiException, urllib3.exceptions.HTTPError.
        """
        items: list[JSON] = []
        cont: str | None = None
        path = self.resource.path(self.namespace)
        while True:
            query = {**self._selectors(), "limit": self.page_size, "continue": cont}
            page = self.client.request("GET", path, query=query)
            kind = str(page.get("kind", "")).removesuffix("List")
            api_version = page.get("apiVersion")
            for item in page.get("items") or []:
                # LIST items omit kind/apiVersion; restore them as a watch would deliver them.
                item.setdefault("kind", kind)
                item.setdefault("apiVersion", api_version)
                items.append(self.transform(item) if self.transform is not None else item)
            meta = page.get("metadata") or {}
            cont = meta.get("continue") or None
            if not cont:
                return items, str(meta.get("resourceVersion", ""))

    def run(self) -> None:
        """List and watch until :meth:`stop`; never raises."""
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    items, rv = self.list()
                    self.store.replace(self.namespace, items)
                    # Not kept alive by this frame while the watch below runs.
                    del items
                    self.last_sync_resource_version = rv
                    self.relists += 1
                    self.synced.set()
                    need_list = False
                self._watch()
            except _WatchExpired:
                log.info("%s: resourceVersion %s expired; relisting", self._name(), self.last_sync_resource_version)
                need_list = True
            except ApiException as err:
                if err.status == 410:
                    need_list = True
                    continue
                self._sleep_backoff(f"API error {err.status} {err.reason}")
            except (urllib3.exceptions.ReadTimeoutError, TimeoutError):
                log.debug("%s: watch silent for %.0f s; reopening", self._name(), self.inactivity_timeout)
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as err:
                if self._stop.is_set():
                    return
                self._sleep_backoff(f"{type(err).__name__}: {err}")
            except Exception:  # never let the informer thread die
                log.exception("%s: unexpected error", self._name())
                self._sleep_backoff("unexpected error")

    def _name(self) -> str:
        return f"reflector {self.resource.plural}@{self.namespace or '*'}"

    def _sleep_backoff(self, why: str) -> None:
        delay = self.backoff.next()
        log.warning("%s: %s; retrying in %.1f s", self._name(), why, delay)
        self._stop.wait(delay)

    def _watch(self) -> None:
        timeout_seconds = _random.randint(*self.watch_timeout_range)
        query = {
            **self._selectors(),
            "resourceVersion": self.last_sync_resource_version,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout_seconds,
        }
        events = self.client.watch(
            self.resource.path(self.namespace), query=query, timeout=(10.0, self.inactivity_timeout)
        )
        with self._response_lock:
            self._watch_stream = events
        if self._stop.is_set():
            events.close()
        loads, claim = json.loads, self.raw_event_filter
        try:
            for line in events.lines():
                if self._stop.is_set():
                    return
                if claim is not None:
                    rv = claim(line)
                    if rv:
                        self.last_sync_resource_version = rv
                        continue
                self._handle(loads(line))
        finally:
            with self._response_lock:
                self._watch_stream = None
            events.close()

    def _handle(self, event: JSON) -> None:
        etype = event.get("type")
        obj = event.get("object") or {}
        if etype == "ERROR":
            code = obj.get("code")
            if code == 410 or obj.get("reason") in ("Expired", "Gone"):
                raise _WatchExpired()
            raise ApiException(status=int(code or 500), reason=f"{obj.get('reason')}: {obj.get('message')}")
        rv = resource_version(obj)
        if etype == "BOOKMARK":
            if rv:
                self.last_sync_resource_version = rv
            return
        if etype in ("ADDED", "MODIFIED", "DELETED") and self.transform is not None:
            obj = self.transform(obj)
        if etype in ("ADDED", "MODIFIED"):
            self.store.on_watch_upsert(obj)
        elif etype == "DELETED":
            self.store.on_watch_delete(obj)
        else:
            log.warning("%s: unknown watch event type %r", self._name(), etype)
            return
        if rv:
            self.last_sync_resource_version = rv

    def stop(self) -> None:
        """Ask :meth:`run` to return; closes an open watch stream."""
        self._stop.set()
        with self._response_lock:
            events = self._watch_stream
        if events is not None:
            events.close()
