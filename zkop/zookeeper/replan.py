"""Read, plan and write again after a concurrent change: the one replan loop of every feature.

Every write zkop makes is conditional on the version it was planned from, so a znode changed
between the read and the write fails the write as a whole (:class:`ConcurrentModification`);
the caller reads and plans again, a few times, before leaving the key to the rate limiter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from zkop.zookeeper.errors import ConcurrentModification

__all__ = ["MAX_REPLANS", "with_replans"]

T = TypeVar("T")

#: Plans made in all (the first and the replans) before the conflict is raised to the caller.
MAX_REPLANS = 3


def with_replans(attempt: Callable[[int], T],
                 on_conflict: Callable[[int, ConcurrentModification], None] = lambda n, err: None) -> T:
    """Return ``attempt(n)`` for the first ``n`` (from 0) that meets no concurrent change.

    ``on_conflict(n, err)`` runs after attempt ``n`` met one (log it, forget what it read).

    Raises:
        ConcurrentModification: the last attempt's, when all :data:`MAX_REPLANS` met one.
    """
    last: ConcurrentModification | None = None
    for n in range(MAX_REPLANS):
        try:
            return attempt(n)
        except ConcurrentModification as err:
            on_conflict(n, err)
            last = err
    assert last is not None
    raise last
