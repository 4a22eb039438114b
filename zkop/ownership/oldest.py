""""Oldest wins": the one rule every feature uses when several candidates want one thing.

A ZooKeeperConfig path, a bridge key path, an imported Service name: the candidate created first
keeps it, ties broken by a stable identity (``namespace/name``, a path). The age comes only from
what every replica sees (the informer cache, ZooKeeper's ``czxid``), so every reconcile and every
replica computes the same winner, ownership never flaps, and a newcomer never takes a name over
from an established one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from zkop.kube.client import JSON
from zkop.runtime.cache.indexer import meta_namespace_key

__all__ = ["object_age", "oldest"]

T = TypeVar("T")


def oldest(candidates: Iterable[T], age: Callable[[T], tuple[Any, str]]) -> T | None:
    """The candidate with the smallest ``age(candidate)`` = ``(creation order, identity)``; ``None`` for none.

    ``candidates`` is iterated once; of equals the first is returned.
    """
    best: T | None = None
    best_age: tuple[Any, str] | None = None
    for candidate in candidates:
        candidate_age = age(candidate)
        if best_age is None or candidate_age < best_age:
            best, best_age = candidate, candidate_age
    return best


def object_age(obj: JSON) -> tuple[str, str]:
    """``(metadata.creationTimestamp, namespace/name)`` of an API object, for :func:`oldest`.

    The API server writes RFC 3339 timestamps in UTC at one-second precision, so text order is time order.
    """
    return str((obj.get("metadata") or {}).get("creationTimestamp", "")), meta_namespace_key(obj)
