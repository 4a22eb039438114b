"""A cache of one resource kind with event handlers: client-go ``tools/cache/shared_informer.go``.

:class:`Informer` owns one :class:`~.indexer.Indexer`, one :class:`~.reflector.Reflector` per
namespace, the event handlers and the periodic resync, which re-delivers every cached object as
an update without any API call (client-go ``DeltaFIFO.Resync``).

Handlers run on the reflector thread and must not block or do I/O: they only enqueue keys.
Objects are plain dicts as the API server sent them; treat them as read-only.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from zkop.kube.client import JSON, KubeClient
from zkop.runtime.cache.echoes import EchoRegistry, modified_resource_version
from zkop.runtime.cache.indexer import Indexer, IndexFunc, meta_namespace_key, resource_version
from zkop.runtime.cache.reflector import Reflector, ResourceRef
from zkop.runtime.cache.transform import Transform, default_transform, default_transform_copy
from zkop.runtime.threads import OwnedThreads

#: This module's own jitter source: zkop leaves the global ``random`` state alone (the process may share it).
_random = random.Random()

__all__ = ["EventHandler", "FuncHandler", "Informer"]

log = logging.getLogger(__name__)


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


class Informer:
    """A cache of one resource kind, kept current by reflectors, with event handlers.

    Args:
        namespaces: namespaces to watch (one reflector each), or ``None`` for all.
        indexers: secondary indexes, see :class:`Indexer`.
        resync_period: seconds between re-deliveries of every cached object (jittered ±10 %); 0 disables.
        transform: applied by the reflectors to every object from a LIST page or watch event, before
            it is cached or handed to a handler (client-go ``SetTransform``); default
            :func:`~.transform.default_transform`, ``None`` keeps objects whole.
        reflector_options: extra keyword arguments for :class:`Reflector`.
    """

    def __init__(
        self, client: KubeClient, resource: ResourceRef, *, namespaces: Sequence[str] | None = None,
        indexers: dict[str, IndexFunc] | None = None, resync_period: float = 600.0, name: str = "",
        transform: Transform | None = default_transform, **reflector_options: Any,
    ) -> None:
        self.resource = resource
        self.transform = transform
        self.name = name or resource.plural
        self.indexer = Indexer(indexers)
        self.resync_period = resync_period
        self._handlers: list[EventHandler] = []
        self._lock = threading.RLock()  # serialises cache mutation + handler delivery
        self._threads = OwnedThreads()
        self._stop = threading.Event()
        #: Own writes whose echo is applied undecoded (:mod:`.echoes`); only with the default transform,
        #: the one :meth:`expect_echo` knows how to apply to a copy.
        self._echoes: EchoRegistry | None = EchoRegistry() if transform is default_transform else None
        #: Echoes applied undecoded (for tests and logs).
        self.echoes_applied = 0
        #: Keys a thread waits to see change (:meth:`wait_past`), each with the event set at the key's next change.
        self._awaited: dict[str, tuple[threading.Event, list[int]]] = {}
        claim = self._claim_echo if self._echoes is not None else None
        scopes: list[str | None] = [*namespaces] if namespaces else [None]
        self.reflectors = [Reflector(client, resource, ns, self, transform=transform, raw_event_filter=claim,
                                     **reflector_options)
                           for ns in scopes]

    def add_event_handler(self, handler: EventHandler) -> None:
        """Register a handler; it receives adds for objects already cached."""
        with self._lock:
            self._handlers.append(handler)
            for obj in self.indexer.list():
                handler.on_add(obj)

    def remove_event_handler(self, handler: EventHandler) -> None:
        """Unregister ``handler`` (client-go ``RemoveEventHandler``); it receives no event after this returns.

        A handler not registered is ignored.
        """
        with self._lock:
            if handler in self._handlers:
                self._handlers.remove(handler)

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
            if self._echoes is not None:
                self._echoes.clear()
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
                elif resource_version(old) != resource_version(obj):
                    self._dispatch("update", old, obj)

    def on_watch_upsert(self, obj: JSON) -> None:
        """Apply an ADDED or MODIFIED watch event."""
        with self._lock:
            if self._echoes:
                self._echoes.drop(meta_namespace_key(obj))
            old = self.indexer.upsert(obj)
            if old is None:
                self._dispatch("add", obj, obj)
            else:
                self._dispatch("update", old, obj)

    def on_watch_delete(self, obj: JSON) -> None:
        """Apply a DELETED watch event."""
        with self._lock:
            key = meta_namespace_key(obj)
            if self._echoes:
                self._echoes.drop(key)
            self.indexer.delete(key)
            self._dispatch("delete", obj, obj)

    def expect_echo(self, key: str, base: str, response: JSON) -> None:
        """Our write of ``key``, computed from version ``base``, returned ``response``: apply its echo undecoded.

        Called by the writer once the response is in (:attr:`~zkop.runtime.ownwrites.OwnWrites.recorded`),
        never under a lock the informer's handlers take. ``response`` is not modified (the writer
        goes on with it); a transformed copy is remembered until the echo comes (see :mod:`.echoes`).
        Nothing is remembered if the cache is no longer at ``base`` (the echo, or something newer,
        is in already) or the informer has no default transform.
        """
        if self._echoes is None:
            return
        written = resource_version(response)
        if not base or not written or written == base:
            return
        with self._lock:
            cached = self.indexer.get(key)
            if cached is None or resource_version(cached) != base:
                return  # the echo (about half of them in a cold sync), or something newer, is in: no copy
        obj = default_transform_copy(response)
        with self._lock:  # again: the echo may have come while the copy was made
            cached = self.indexer.get(key)
            if cached is not None and resource_version(cached) == base:
                self._echoes.expect(key, base, written, obj)

    def wait_past(self, key: str, version: str, timeout: float) -> bool:
        """Wait until the cache no longer holds ``key`` at resourceVersion ``version`` (it holds a later one, or
        none); True if so within ``timeout`` seconds, False if it still holds ``version`` then.

        A cache only moves forward (watch events arrive in resourceVersion order), so this is "the cache has seen
        what came after ``version``": for a write of ours computed from ``version``, that its echo is in. The
        waiting thread holds no lock; every change of ``key`` wakes it.
        """
        with self._lock:
            cached = self.indexer.get(key)
            if cached is None or resource_version(cached) != version:
                return True
            event, waiters = self._awaited.setdefault(key, (threading.Event(), [0]))
            waiters[0] += 1
        try:
            event.wait(timeout)
        finally:
            with self._lock:
                waiters[0] -= 1
                if not waiters[0] and self._awaited.get(key, (None,))[0] is event:
                    del self._awaited[key]
                cached = self.indexer.get(key)
        return cached is None or resource_version(cached) != version

    def pending_echoes(self) -> int:
        """Writes whose echo :meth:`expect_echo` is waiting for."""
        with self._lock:
            return len(self._echoes or ())

    def _claim_echo(self, line: bytes) -> str:
        """The reflector's raw event filter: apply ``line`` if it is a remembered write's echo (see :mod:`.echoes`).

        Returns:
            The event's ``resourceVersion`` if it was applied, else ``""`` (decode it).
        """
        echoes = self._echoes
        if not echoes:  # nothing awaited: no scan of the line
            return ""
        written = modified_resource_version(line)
        if not written:
            return ""
        with self._lock:
            entry = echoes.take(written)
            if entry is None:
                return ""
            key, base, obj = entry
            old = self.indexer.get(key)
            if old is None or resource_version(old) != base:
                return ""
            self.indexer.upsert(obj)
            self.echoes_applied += 1
            self._dispatch("update", old, obj)
        return written

    def _transformed(self, obj: JSON) -> JSON:
        return self.transform(obj) if self.transform is not None else obj

    def _dispatch(self, kind: str, old: JSON, new: JSON) -> None:
        if self._awaited:
            awaited = self._awaited.get(meta_namespace_key(new))
            if awaited is not None:
                awaited[0].set()
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
            self._threads.start(reflector.run, f"informer-{self.name}-{reflector.namespace or 'all'}")
        if self.resync_period > 0:
            self._threads.start(self._resync_loop, f"resync-{self.name}")

    def health_check(self) -> str | None:
        """``None``, or which of its threads ended before :meth:`stop`: the cache would go stale.

        A reflector never returns on its own (every ``Exception`` is retried with backoff), so an
        ended one was ended by a ``BaseException``; the :class:`~zkop.runtime.manager.Manager` then
        ends the run (a standby too: it would take over with a stale cache).
        """
        if self._stop.is_set():
            return None
        dead = self._threads.ended()
        return f"informer threads ended: {', '.join(dead)}" if dead else None

    def _resync_loop(self) -> None:
        while not self._stop.wait(self.resync_period * _random.uniform(0.9, 1.1)):
            if self.has_synced():
                self.resync()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop reflectors and the resync timer; waits up to ``timeout`` seconds per thread."""
        self._stop.set()
        for reflector in self.reflectors:
            reflector.stop()
        for thread in self._threads:
            thread.join(timeout)
