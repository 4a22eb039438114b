"""List-watch informers: client-go ``tools/cache`` in Python.

* :mod:`.indexer` -- the thread-safe indexed store (the *lister*).
* :mod:`.reflector` -- one list-watch (paginated LIST, WATCH with bookmarks, 410 relist,
  inactivity timeout), writing through the :class:`~.reflector.Store` protocol.
* :mod:`.informer` -- handlers, resync from the cache, ``has_synced``.
* :mod:`.filtered` -- one index value's slice of a cache, and the handler that feeds only its events.
* :mod:`.named` -- a cache of a changing set of named objects (GET + WATCH each, GET on demand).
* :mod:`.transform` -- what informers drop before caching (client-go ``SetTransform``).
* :mod:`.backoff` -- the one retry backoff.
"""

from zkop.runtime.cache.backoff import Backoff
from zkop.runtime.cache.filtered import FilteredHandler, FilteredIndexer
from zkop.runtime.cache.indexer import Indexer, IndexFunc, ObjectGetter, meta_namespace_key, split_key
from zkop.runtime.cache.informer import EventHandler, FuncHandler, Informer
from zkop.runtime.cache.named import NamedObjectInformer, SingleObjectReflector
from zkop.runtime.cache.reflector import Reflector, ResourceRef, Store
from zkop.runtime.cache.transform import Transform, compact, default_transform, strip_unused_fields

__all__ = [
    "Backoff",
    "EventHandler",
    "FilteredHandler",
    "FilteredIndexer",
    "FuncHandler",
    "IndexFunc",
    "Indexer",
    "Informer",
    "NamedObjectInformer",
    "ObjectGetter",
    "Reflector",
    "ResourceRef",
    "SingleObjectReflector",
    "Store",
    "Transform",
    "compact",
    "default_transform",
    "meta_namespace_key",
    "split_key",
    "strip_unused_fields",
]
