"""List-watch informer: reflector, indexed cache and event handlers.

Modelled on client-go ``tools/cache`` (``reflector.go``, ``thread_safe_store.go``,
``shared_informer.go``); see ``docs/architecture.md`` and the reference notes in
``shared/reference/controller-conventions.md`` §3.

* :class:`Indexer` is the thread-safe local cache (the *lister*): objects keyed
  ``namespace/name`` (``name`` for cluster-scoped kinds) with named secondary indexes.
* :class:`Reflector` keeps one list-watch alive: a paginated LIST, then WATCH from
  the list's resourceVersion with bookmarks, a randomised server timeout in
  [300, 600] s and a client read timeout. A watch that ends cleanly is reopened
  from the newest resourceVersion seen (no relist); 410 Gone relists and
  replaces the cache, delivering the differences (deletions included, with the
  last known object). Other failures back off exponentially (0.8 s doubling to
  30 s, full jitter, reset after 2 min healthy — client-go's values).
* :class:`Informer` owns one indexer, one reflector per namespace, handlers, and
  the periodic resync, which re-delivers every cached object as an update
  without any API call (client-go ``DeltaFIFO.Resync``).

Handlers run on the reflector thread and must not block or do I/O: they only
enqueue keys. Objects are plain dicts as the API server sent them; treat them
as read-only.
"""

from __future__ import annotations

import builtins
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import urllib3.exceptions

from zkop.kube.client import JSON, ApiException, KubeClient, WatchStream, resource_path

__all__ = [
    "Backoff",
    "EventHandler",
    "FuncHandler",
    "Indexer",
    "Informer",
    "Reflector",
    "ResourceRef",
    "meta_namespace_key",
]

log = logging.getLogger(__name__)

IndexFunc = Callable[[JSON], Iterable[str]]


def meta_namespace_key(obj: JSON) -> str:
    """client-go's ``MetaNamespaceKeyFunc``: ``namespace/name``, or ``name`` for cluster-scoped objects."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    name = str(meta.get("name", ""))
    return f"{namespace}/{name}" if namespace else name


def split_key(key: str) -> tuple[str | None, str]:
    """Inverse of :func:`meta_namespace_key`: ``"ns/name"`` → ``("ns", "name")``, ``"name"`` → ``(None, "name")``."""
    if "/" in key:
        namespace, name = key.split("/", 1)
        return namespace, name
    return None, key


def _rv(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


class Indexer:
    """Thread-safe object cache with secondary indexes (client-go ``cache.Indexer``).

    Args:
        indexers: ``{index_name: func(obj) -> iterable of index values}``.
    """

    def __init__(self, indexers: dict[str, IndexFunc] | None = None) -> None:
        self._lock = threading.RLock()
        self._items: dict[str, JSON] = {}
        self._indexers: dict[str, IndexFunc] = dict(indexers or {})
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}

    def add_indexer(self, name: str, func: IndexFunc) -> None:
        """Add an index and build it over the current contents.

        Raises:
            ValueError: an index of that name exists.
        """
        with self._lock:
            if name in self._indexers:
                raise ValueError(f"indexer {name!r} already exists")
            self._indexers[name] = func
            self._indices[name] = {}
            for key, obj in self._items.items():
                self._index(name, key, obj)

    def _index(self, name: str, key: str, obj: JSON) -> None:
        for value in self._indexers[name](obj):
            self._indices[name].setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: JSON) -> None:
        for name, func in self._indexers.items():
            index = self._indices[name]
            for value in func(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]

    def upsert(self, obj: JSON) -> JSON | None:
        """Store ``obj`` under its key; return the previous object, if any."""
        key = meta_namespace_key(obj)
        with self._lock:
            old = self._items.get(key)
            if old is not None:
                self._unindex(key, old)
            self._items[key] = obj
            for name in self._indexers:
                self._index(name, key, obj)
            return old

    def delete(self, key: str) -> JSON | None:
        """Remove the object under ``key``; return it, or ``None`` if absent."""
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._unindex(key, old)
            return old

    def get(self, key: str) -> JSON | None:
        """The cached object under ``key`` (``namespace/name``), or ``None``."""
        with self._lock:
            return self._items.get(key)

    def list(self) -> builtins.list[JSON]:
        """A snapshot list of every cached object."""
        with self._lock:
            return list(self._items.values())

    def list_keys(self) -> builtins.list[str]:
        """A snapshot list of every key."""
        with self._lock:
            return list(self._items)

    def by_index(self, name: str, value: str) -> builtins.list[JSON]:
        """Objects whose index ``name`` yields ``value``.

        Raises:
            KeyError: no such index.
        """
        with self._lock:
            return [self._items[k] for k in sorted(self._indices[name].get(value, ()))]

    def index_keys(self, name: str, value: str) -> builtins.list[str]:
        """Keys whose index ``name`` yields ``value``, sorted."""
        with self._lock:
            return sorted(self._indices[name].get(value, ()))

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


class EventHandler(Protocol):
    """client-go ``ResourceEventHandler``. Implementations must not block or do I/O."""

    def on_add(self, obj: JSON) -> None: ...

    def on_update(self, old: JSON, new: JSON) -> None: ...

    def on_delete(self, obj: JSON) -> None: ...


@dataclass
class FuncHandler:
    """An :class:`EventHandler` that maps every event to ``enqueue(obj)``.

    ``update_filter(old, new)`` returning False drops an update (controller-runtime's
    ``predicate.Funcs.UpdateFunc``); adds and deletes always pass.
    """

    enqueue: Callable[[JSON], None]
    update_filter: Callable[[JSON, JSON], bool] | None = None

    def on_add(self, obj: JSON) -> None:
        self.enqueue(obj)

    def on_update(self, old: JSON, new: JSON) -> None:
        if self.update_filter is None or self.update_filter(old, new):
            self.enqueue(new)

    def on_delete(self, obj: JSON) -> None:
        self.enqueue(obj)


@dataclass(frozen=True)
class ResourceRef:
    """Group/version/plural of a resource, e.g. ``ResourceRef("", "v1", "services")``."""

    group: str
    version: str
    plural: str

    def path(self, namespace: str | None = None) -> str:
        """Collection path, cluster-wide if ``namespace`` is ``None``."""
        return resource_path(self.group, self.version, self.plural, namespace)


class Backoff:
    """Exponential backoff with full jitter and a reset after a healthy period.

    client-go's reflector uses 800 ms initial, factor 2, cap 30 s, jitter 1.0,
    reset after 2 min (``reflector.go`` ``NewReflectorWithOptions``).

    Args:
        initial, cap, reset_after: seconds.
    """

    def __init__(self, initial: float = 0.8, cap: float = 30.0, reset_after: float = 120.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.initial, self.cap, self.reset_after, self.clock = initial, cap, reset_after, clock
        self._current = 0.0
        self._last = 0.0

    def next(self) -> float:
        """Return the next delay in seconds, a random value in [d, 2d) for the current step d."""
        now = self.clock()
        if self._current and now - self._last > self.reset_after:
            self._current = 0.0
        self._current = self.initial if not self._current else min(self._current * 2, self.cap)
        self._last = now
        return self._current * (1 + random.random())


class _WatchExpired(Exception):
    """The watch's resourceVersion is too old (HTTP 410 Gone / ERROR event with code 410)."""


class Reflector:
    """Keeps the part of an :class:`Indexer` for one list-watch in sync with the API server.

    Args:
        client: the JSON client.
        resource: what to list and watch.
        namespace: a namespace, or ``None`` for all.
        store: the informer's callback sink, see :class:`Informer`.
        label_selector, field_selector: passed to LIST and WATCH.
        page_size: LIST ``limit``.
        watch_timeout_range: server-side ``timeoutSeconds`` is drawn from this range, seconds.
        inactivity_timeout: client read timeout on the watch stream, seconds: a stream
            silent for this long (no event, no bookmark) is abandoned and reopened.
    """

    def __init__(
        self, client: KubeClient, resource: ResourceRef, namespace: str | None, store: Informer, *,
        label_selector: str | None = None, field_selector: str | None = None, page_size: int = 500,
        watch_timeout_range: tuple[int, int] = (300, 600), inactivity_timeout: float = 90.0,
        backoff: Backoff | None = None,
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
                items.append(item)
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
        timeout_seconds = random.randint(*self.watch_timeout_range)
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
        try:
            for event in events:
                if self._stop.is_set():
                    return
                self._handle(event)
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
        rv = _rv(obj)
        if etype == "BOOKMARK":
            if rv:
                self.last_sync_resource_version = rv
            return
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


class Informer:
    """A cache of one resource kind, kept current by reflectors, with event handlers.

    Args:
        client: the JSON client.
        resource: group/version/plural.
        namespaces: namespaces to watch (one reflector each), or ``None`` for all.
        indexers: secondary indexes, see :class:`Indexer`.
        resync_period: seconds between re-deliveries of every cached object (jittered ±10 %); 0 disables.
        name: for logs.
        reflector_options: extra keyword arguments for :class:`Reflector`.
    """

    def __init__(
        self, client: KubeClient, resource: ResourceRef, *, namespaces: Sequence[str] | None = None,
        indexers: dict[str, IndexFunc] | None = None, resync_period: float = 600.0, name: str = "",
        **reflector_options: Any,
    ) -> None:
        self.resource = resource
        self.name = name or resource.plural
        self.indexer = Indexer(indexers)
        self.resync_period = resync_period
        self._handlers: list[EventHandler] = []
        self._lock = threading.RLock()  # serialises cache mutation + handler delivery
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        scopes: list[str | None] = [*namespaces] if namespaces else [None]
        self.reflectors = [Reflector(client, resource, ns, self, **reflector_options) for ns in scopes]

    def add_event_handler(self, handler: EventHandler) -> None:
        """Register a handler; it receives adds for objects already cached."""
        with self._lock:
            self._handlers.append(handler)
            for obj in self.indexer.list():
                handler.on_add(obj)

    def has_synced(self) -> bool:
        """True once every reflector has completed its first LIST."""
        return all(r.synced.is_set() for r in self.reflectors)

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Block until :meth:`has_synced`; returns it (False on timeout). ``timeout`` in seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for reflector in self.reflectors:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not reflector.synced.wait(remaining):
                return False
        return True

    # --- store callbacks (called by reflectors) ------------------------------------------------

    def replace(self, namespace: str | None, items: list[JSON]) -> None:
        """Replace the cached objects in ``namespace`` (all if ``None``) with a fresh LIST.

        Delivers the difference: adds for new keys, updates for changed resourceVersions,
        deletes (with the last known object) for keys that vanished during the gap.
        """
        with self._lock:
            fresh = {meta_namespace_key(o): o for o in items}
            for key in self.indexer.list_keys():
                if namespace is not None and not key.startswith(namespace + "/"):
                    continue
                if key not in fresh:
                    old = self.indexer.delete(key)
                    if old is not None:
                        self._dispatch("delete", old, old)
            for obj in items:
                old = self.indexer.upsert(obj)
                if old is None:
                    self._dispatch("add", obj, obj)
                elif _rv(old) != _rv(obj):
                    self._dispatch("update", old, obj)

    def on_watch_upsert(self, obj: JSON) -> None:
        """Apply an ADDED or MODIFIED watch event."""
        with self._lock:
            old = self.indexer.upsert(obj)
            if old is None:
                self._dispatch("add", obj, obj)
            else:
                self._dispatch("update", old, obj)

    def on_watch_delete(self, obj: JSON) -> None:
        """Apply a DELETED watch event."""
        with self._lock:
            self.indexer.delete(meta_namespace_key(obj))
            self._dispatch("delete", obj, obj)

    def _dispatch(self, kind: str, old: JSON, new: JSON) -> None:
        for handler in self._handlers:
            try:
                if kind == "add":
                    handler.on_add(new)
                elif kind == "update":
                    handler.on_update(old, new)
                else:
                    handler.on_delete(new)
            except Exception:
                log.exception("%s: event handler failed", self.name)

    def resync(self) -> None:
        """Re-deliver every cached object as ``on_update(obj, obj)``; no API call."""
        with self._lock:
            for obj in self.indexer.list():
                self._dispatch("update", obj, obj)

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start the reflector threads (and the resync timer); returns at once."""
        for reflector in self.reflectors:
            thread = threading.Thread(
                target=reflector.run, name=f"informer-{self.name}-{reflector.namespace or 'all'}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        if self.resync_period > 0:
            thread = threading.Thread(target=self._resync_loop, name=f"resync-{self.name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _resync_loop(self) -> None:
        while not self._stop.wait(self.resync_period * random.uniform(0.9, 1.1)):
            if self.has_synced():
                self.resync()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop reflectors and the resync timer; waits up to ``timeout`` seconds per thread."""
        self._stop.set()
        for reflector in self.reflectors:
            reflector.stop()
        for thread in self._threads:
            thread.join(timeout)
