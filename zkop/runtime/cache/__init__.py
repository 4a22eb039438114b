"""List-watch informers: client-go ``tools/cache`` in Python.

* :mod:`.indexer` -- the thread-safe indexed store (the *lister*).
* :mod:`.reflector` -- one list-watch (paginated LIST, WATCH with bookmarks, 410 relist,
  inactivity timeout), writing through the :class:`~.reflector.Store` protocol.
* :mod:`.informer` -- handlers, resync from the cache, ``has_synced``.
* :mod:`.backoff` -- the one retry backoff.
"""

from zkop.runtime.cache.backoff import Backoff
from zkop.runtime.cache.indexer import Indexer, IndexFunc, meta_namespace_key, split_key
from zkop.runtime.cache.informer import EventHandler, FuncHandler, Informer
from zkop.runtime.cache.reflector import Reflector, ResourceRef, Store

__all__ = [
    "Backoff",
    "EventHandler",
    "FuncHandler",
    "IndexFunc",
    "Indexer",
    "Informer",
    "Reflector",
    "ResourceRef",
    "Store",
    "meta_namespace_key",
    "split_key",
]
