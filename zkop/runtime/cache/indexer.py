"""The informer's local cache: a thread-safe, indexed object store (client-go ``cache.Indexer``).

Objects are plain dicts as the API server sent them, keyed ``namespace/name`` (``name`` for
cluster-scoped kinds) [CG tools/cache/store.go ``MetaNamespaceKeyFunc``], with named secondary
indexes [CG tools/cache/thread_safe_store.go].  Treat stored objects as read-only.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable
from typing import Protocol

from zkop.kube.types import JSON
from zkop.runtime.cache.keys import meta_namespace_key, split_key

__all__ = ["IndexFunc", "Indexer", "ObjectGetter", "meta_namespace_key", "resource_version", "split_key"]

#: ``func(obj) -> index values`` [CG tools/cache/index.go ``IndexFunc``].
IndexFunc = Callable[[JSON], Iterable[str]]


class ObjectGetter(Protocol):
    """What a reader of cached objects needs: :meth:`Indexer.get` (client-go ``GetByKey``)."""

    def get(self, key: str) -> JSON | None: ...


def resource_version(obj: JSON) -> str:
    """``metadata.resourceVersion``, ``""`` if absent."""
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

    def get_indexed(self, key: str, name: str, value: str) -> JSON | None:
        """The object under ``key`` if index ``name`` yields ``value`` for it, else ``None`` (one set lookup).

        Raises:
            KeyError: no such index.
        """
        with self._lock:
            return self._items.get(key) if key in self._indices[name].get(value, ()) else None

    def index_keys_within(self, name: str, value: str, within: str, within_value: str) -> builtins.list[str]:
        """Keys whose index ``name`` yields ``value`` and index ``within`` yields ``within_value``, sorted.

        Raises:
            KeyError: no such index.
        """
        with self._lock:
            return sorted(self._indices[name].get(value, set()) & self._indices[within].get(within_value, set()))

    def by_index_within(self, name: str, value: str, within: str, within_value: str) -> builtins.list[JSON]:
        """The objects of :meth:`index_keys_within`, in its order.

        Raises:
            KeyError: no such index.
        """
        with self._lock:
            return [self._items[k] for k in self.index_keys_within(name, value, within, within_value)]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
