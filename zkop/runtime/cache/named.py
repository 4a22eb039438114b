"""A cache of a changing set of *named* objects: one GET + WATCH per object, GET on demand.

:class:`NamedObjectInformer` holds only the objects :meth:`~NamedObjectInformer.track` was told
about (the ConfigMaps and Secrets ZooKeeperConfigs name), so it needs RBAC ``get`` and ``watch``,
never ``list``; docs/performance.md, "Real-cluster footprint", compares the alternatives.

* Per tracked object one :class:`SingleObjectReflector`: a ``GET``, then a ``WATCH`` with
  ``fieldSelector=metadata.name=<name>`` and ``resourceVersion`` *unset* ("Get State and Start at
  Most Recent", kubernetes.io "Resource versions"), which opens with a synthetic ``ADDED``, so a
  change between the two is not lost. Not from the object's own ``resourceVersion``: that of an
  object untouched for an hour is compacted out of the watch cache, and every watch would answer
  410 (a GET, unlike a LIST, returns no collection version to watch from). Later watches resume
  from the last event or bookmark, as the :class:`~.reflector.Reflector` does.
* :meth:`~NamedObjectInformer.get` of an object not yet fetched does the GET itself (kept for
  ``get_ttl`` seconds, so a hundred objects naming one Secret send one GET) and starts tracking it.

One watch and one thread per tracked object: fine for hundreds, not for tens of thousands.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from zkop.kube.client import JSON, ApiException, KubeClient, resource_path
from zkop.runtime.cache.indexer import meta_namespace_key, resource_version, split_key
from zkop.runtime.cache.informer import Informer
from zkop.runtime.cache.reflector import Reflector, ResourceRef
from zkop.runtime.cache.transform import Transform, default_transform

__all__ = ["NamedObjectInformer", "SingleObjectReflector"]

log = logging.getLogger(__name__)


class SingleObjectReflector(Reflector):
    """A :class:`~.reflector.Reflector` for one object: GET instead of LIST, a ``metadata.name`` field selector.

    Args:
        name: the object's name; the other arguments as for :class:`~.reflector.Reflector`.
    """

    def __init__(self, client: KubeClient, resource: ResourceRef, namespace: str | None, name: str, store: Any,
                 **options: Any) -> None:
        super().__init__(client, resource, namespace, store, field_selector=f"metadata.name={name}", **options)
        self.name = name

    def list(self) -> tuple[list[JSON], str]:
        """GET the object: ``([obj], "")``, or ``([], "")`` if it does not exist; the ``""`` makes the
        next watch start at the most recent state (see the module docstring)."""
        path = resource_path(self.resource.group, self.resource.version, self.resource.plural, self.namespace,
                             self.name)
        try:
            obj = self.client.request("GET", path)
        except ApiException as err:
            if err.status == 404:
                return [], ""
            raise
        return [self.transform(obj) if self.transform is not None else obj], ""


class _OneKey:
    """The :class:`~.reflector.Store` of one :class:`SingleObjectReflector`: its "list" replaces one key only."""

    def __init__(self, informer: NamedObjectInformer, key: str) -> None:
        self.informer, self.key = informer, key

    def replace(self, namespace: str | None, items: list[JSON]) -> None:
        self.informer.replace_key(self.key, items)

    def on_watch_upsert(self, obj: JSON) -> None:
        cached = self.informer.indexer.get(self.key)
        if cached is not None and resource_version(cached) == resource_version(obj):
            return  # the synthetic ADDED that opens a watch, of the object the GET already delivered
        self.informer.on_watch_upsert(obj)

    def on_watch_delete(self, obj: JSON) -> None:
        self.informer.on_watch_delete(obj)


class NamedObjectInformer(Informer):
    """An :class:`~.informer.Informer` over the objects named by :meth:`track` (see the module docstring).

    Args:
        resource: group/version/plural (namespaced).
        name: for logs and thread names.
        get_ttl: seconds an on-demand GET answers later :meth:`get` calls of a not yet synced object.
        transform: as for :class:`~.informer.Informer`.
        reflector_options: for each :class:`SingleObjectReflector` (``inactivity_timeout`` …).
    """

    def __init__(self, client: KubeClient, resource: ResourceRef, *, name: str = "", get_ttl: float = 5.0,
                 transform: Transform | None = default_transform, clock: Callable[[], float] = time.monotonic,
                 **reflector_options: Any) -> None:
        super().__init__(client, resource, name=name, resync_period=0, transform=transform)
        self.client = client
        self.get_ttl = get_ttl
        self.clock = clock
        self.reflectors = []
        self._options = reflector_options
        self._tracked: dict[str, tuple[SingleObjectReflector, threading.Thread | None]] = {}
        self._fetched: dict[str, tuple[float, JSON | None]] = {}
        self._started = False

    # --- the set of objects --------------------------------------------------------------------

    def track(self, keys: Iterable[str]) -> None:
        """Cache (and watch) the objects ``namespace/name`` in ``keys``; known ones are left as they are.

        Non-blocking (starts a thread per new key), so it may run in an event handler."""
        with self._lock:
            for key in keys:
                if key in self._tracked:
                    continue
                namespace, name = split_key(key)
                reflector = SingleObjectReflector(self.client, self.resource, namespace, name, _OneKey(self, key),
                                                  transform=self.transform, **self._options)
                self.reflectors.append(reflector)
                self._tracked[key] = (reflector, self._run(reflector) if self._started else None)

    def untrack(self, keys: Iterable[str]) -> None:
        """Stop caching the objects in ``keys`` (no event is delivered: nobody reads them any more)."""
        with self._lock:
            for key in keys:
                entry = self._tracked.pop(key, None)
                if entry is None:
                    continue
                # forgotten before it is told to stop: health_check reads the threads without the lock, and a
                # thread that ended between the two would read as one that died (the Manager ends the run)
                if entry[1] is not None:
                    self._threads.forget(entry[1])
                entry[0].stop()
                self.reflectors.remove(entry[0])
                self.indexer.delete(key)
                self._fetched.pop(key, None)

    def tracked(self) -> list[str]:
        """The keys being cached, sorted."""
        with self._lock:
            return sorted(self._tracked)

    # --- reads ------------------------------------------------------------------------------------

    def get(self, key: str) -> JSON | None:
        """The object ``namespace/name``, or ``None`` if it does not exist.

        From the cache once its reflector has synced; before that from a GET (kept ``get_ttl``
        seconds), and the key is tracked from then on.

        Raises:
            ApiException: the GET failed other than with 404 (the caller retries).
        """
        with self._lock:
            entry = self._tracked.get(key)
            if entry is not None and entry[0].synced.is_set():
                return self.indexer.get(key)
            fetched = self._fetched.get(key)
            if fetched is not None and fetched[0] > self.clock():
                return fetched[1]
        self.track([key])
        namespace, name = split_key(key)
        try:
            found: JSON | None = self.client.request("GET", resource_path(
                self.resource.group, self.resource.version, self.resource.plural, namespace, name))
        except ApiException as err:
            if err.status != 404:
                raise
            found = None
        if found is not None:
            found = self._transformed(found)
        with self._lock:
            self._fetched[key] = (self.clock() + self.get_ttl, found)
        return found

    # --- store callbacks ------------------------------------------------------------------------

    def replace_key(self, key: str, items: list[JSON]) -> None:
        """A :class:`SingleObjectReflector`'s GET: ``items`` is ``[obj]`` or ``[]`` (absent)."""
        with self._lock:
            self._fetched.pop(key, None)
            if not items:
                old = self.indexer.delete(key)
                if old is not None:
                    self._dispatch("delete", old, old)
                return
            (obj,) = items
            if meta_namespace_key(obj) != key:
                return
            old = self.indexer.upsert(obj)
            if old is None:
                self._dispatch("add", obj, obj)
            elif resource_version(old) != resource_version(obj):
                self._dispatch("update", old, obj)

    # --- lifecycle ------------------------------------------------------------------------------

    def has_synced(self) -> bool:
        """True once started: reads of objects whose first GET is still out are served by :meth:`get`."""
        return self._started

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._started

    def start(self) -> None:
        """Start a reflector thread per tracked object; objects tracked later start at once."""
        with self._lock:
            self._started = True
            for key, (reflector, thread) in list(self._tracked.items()):
                if thread is None:
                    self._tracked[key] = (reflector, self._run(reflector))

    def _run(self, reflector: SingleObjectReflector) -> threading.Thread:
        return self._threads.start(reflector.run, f"informer-{self.name}-{reflector.namespace}/{reflector.name}")

    def health_check(self) -> str | None:
        """``None``, or which tracked objects' reflector threads ended while started (as ``Informer.health_check``)."""
        if not self._started:  # no lock: a thread that died may hold it
            return None
        return super().health_check()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every reflector; waits up to ``timeout`` seconds per thread."""
        with self._lock:
            self._started = False
            entries = list(self._tracked.values())
        for reflector, _ in entries:
            reflector.stop()
        for _, thread in entries:
            if thread is not None:
                thread.join(timeout)
