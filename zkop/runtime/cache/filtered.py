"""One slice of an informer's cache: the objects of one value of one of its indexes (read-only).

Several controllers may share one informer while each works on its own objects (zkop runs one
ZooKeeperConfig controller per ZooKeeper ensemble over one ZooKeeperConfig informer): each reads
through a :class:`FilteredIndexer` and is fed by a :class:`FilteredHandler`, so neither sees the
others' objects, and one LIST/WATCH serves all of them.
"""

from __future__ import annotations

import builtins

from zkop.kube.client import JSON
from zkop.runtime.cache.indexer import Indexer, IndexFunc
from zkop.runtime.cache.informer import EventHandler

__all__ = ["FilteredHandler", "FilteredIndexer"]


class FilteredIndexer(Indexer):
    """A read-only view of ``base`` holding the objects whose ``func`` values include ``value``.

    ``base`` must index by ``func`` under ``index``: :meth:`list`, :meth:`get`, :meth:`by_index` and
    :meth:`index_keys` are lookups in that index (set membership), not calls of ``func`` on each object
    (a reconcile reads its object several times; see docs/performance.md, "Levers: filtered views").
    The writers :meth:`upsert` and :meth:`delete` raise ``TypeError``: the informer writes ``base``.
    """

    def __init__(self, base: Indexer, index: str, func: IndexFunc, value: str) -> None:
        super().__init__()
        self.base, self.index, self.func, self.value = base, index, func, value

    def belongs(self, obj: JSON | None) -> bool:
        """True if ``obj`` is in this view."""
        return obj is not None and self.value in self.func(obj)

    def upsert(self, obj: JSON) -> JSON | None:
        raise TypeError("a FilteredIndexer is read-only")

    def delete(self, key: str) -> JSON | None:
        raise TypeError("a FilteredIndexer is read-only")

    def get(self, key: str) -> JSON | None:
        return self.base.get_indexed(key, self.index, self.value)

    def list(self) -> builtins.list[JSON]:
        return self.base.by_index(self.index, self.value)

    def list_keys(self) -> builtins.list[str]:
        return self.base.index_keys(self.index, self.value)

    def by_index(self, name: str, value: str) -> builtins.list[JSON]:
        return self.base.by_index_within(name, value, self.index, self.value)

    def index_keys(self, name: str, value: str) -> builtins.list[str]:
        return self.base.index_keys_within(name, value, self.index, self.value)

    def get_indexed(self, key: str, name: str, value: str) -> JSON | None:
        obj = self.base.get_indexed(key, name, value)
        return obj if obj is not None and self.get(key) is obj else None

    def index_keys_within(self, name: str, value: str, within: str, within_value: str) -> builtins.list[str]:
        return [key for key in self.base.index_keys_within(name, value, within, within_value) if self.get(key)]

    def by_index_within(self, name: str, value: str, within: str, within_value: str) -> builtins.list[JSON]:
        return [obj for key in self.index_keys_within(name, value, within, within_value)
                if (obj := self.get(key)) is not None]

    def __len__(self) -> int:
        return len(self.base.index_keys(self.index, self.value))


class FilteredHandler:
    """An :class:`~.informer.EventHandler` passing on only the events of ``view``'s objects.

    An update that moves an object out of the view is a delete for ``handler``; one that moves it in, an add.
    """

    def __init__(self, view: FilteredIndexer, handler: EventHandler) -> None:
        self.view, self.handler = view, handler

    def on_add(self, obj: JSON) -> None:
        if self.view.belongs(obj):
            self.handler.on_add(obj)

    def on_update(self, old: JSON, new: JSON) -> None:
        was, now = self.view.belongs(old), self.view.belongs(new)
        if was and now:
            self.handler.on_update(old, new)
        elif now:
            self.handler.on_add(new)
        elif was:
            self.handler.on_delete(old)

    def on_delete(self, obj: JSON) -> None:
        if self.view.belongs(obj):
            self.handler.on_delete(obj)
