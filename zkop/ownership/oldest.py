""""Oldest wins": the one rule every feature uses when several candidates want one thing.

A ZooKeeperConfig path, a bridge key path, an imported Service name: the candidate created first
keeps it, ties broken by a stable identity (``namespace/name``, a path). The age comes only from
what every replica sees (the informer cache, ZooKeeper's ``czxid``), so every reconcile and every
replica computes the same winner, ownership never flaps, and a newcomer never takes a name over
from an established one.

An API object's age is :func:`object_age`, for every feature (a ZooKeeperConfig's path, a bridged
Service's key path). An object without a ``metadata.creationTimestamp`` (or with one that is not
RFC 3339) counts as the newest: it sorts after every object that has one, so it never takes a path
or a name from one that has; among several without, ``namespace/name`` decides. The API server
always sets the timestamp; only an object built by hand (a test, a manifest) lacks it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, TypeVar

from zkop.kube.types import JSON
from zkop.runtime.cache.keys import meta_namespace_key

__all__ = ["creation_seconds", "object_age", "oldest"]

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


def creation_seconds(obj: JSON) -> float | None:
    """``metadata.creationTimestamp`` (RFC 3339; without an offset, UTC) as Unix seconds; ``None`` if it is
    missing or not a timestamp."""
    raw = (obj.get("metadata") or {}).get("creationTimestamp")
    if not raw:
        return None
    try:
        stamp = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.timestamp()


def object_age(obj: JSON) -> tuple[float, str]:
    """``(creation time in Unix seconds, namespace/name)`` of an API object, for :func:`oldest`.

    No (readable) ``metadata.creationTimestamp``: ``math.inf``, the newest (the module docstring).
    """
    created = creation_seconds(obj)
    return (math.inf if created is None else created), meta_namespace_key(obj)
