"""Naming rules both service directions share: "oldest wins" and DNS-label slugs.

Collision rule (:func:`oldest`): when several candidates want one name (a ZooKeeper key path for
the bridge, a Service name for the importer), the one that was created first keeps it, ties broken
by a stable identity (``namespace/name``, a path). The age comes only from what every replica sees
(the informer cache, ZooKeeper's ``czxid``), so every reconcile and every replica computes the
same winner, ownership never flaps, and a newcomer never takes a name over from an established one.

Slugs (:func:`squash`, :func:`port_name`) follow "Object Names and IDs"; the validators themselves
live in :mod:`zkop.kube.validation`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TypeVar

from zkop.kube.validation import DNS1123_LABEL_MAX

__all__ = ["oldest", "port_name", "squash"]

T = TypeVar("T")

_INVALID = re.compile(r"[^a-z0-9-]+")
_DASHES = re.compile(r"-{2,}")


def oldest(candidates: Iterable[T], age: Callable[[T], tuple[int, str]]) -> T | None:
    """The candidate with the smallest ``age(candidate)`` = ``(creation order, identity)``.

    Args:
        candidates: anything; iterated once.
        age: ``(creation time or zxid, tie-breaking identity)``; smaller is older.

    Returns:
        The oldest candidate (the first of equals), or ``None`` for no candidates.
    """
    best: T | None = None
    best_age: tuple[int, str] | None = None
    for candidate in candidates:
        candidate_age = age(candidate)
        if best_age is None or candidate_age < best_age:
            best, best_age = candidate, candidate_age
    return best


def squash(value: str) -> str:
    """``value`` lower-cased, every run of characters outside ``[a-z0-9-]`` and of ``-`` made one ``-``,
    ``-`` trimmed at both ends (may be empty)."""
    return _DASHES.sub("-", _INVALID.sub("-", value.lower())).strip("-")


def port_name(raw: str) -> str | None:
    """``raw`` as a DNS-1123 label port name (lower-cased, invalid characters to ``-``, at most 63).

    Returns:
        The name, or ``None`` when nothing usable is left.
    """
    name = squash(raw)[:DNS1123_LABEL_MAX].strip("-")
    return name or None
