"""Report-once memos: an Event, a log line or a counter per distinct situation, not per reconcile.

Reconciles repeat (resyncs, watches, full syncs); a collision or a conflict that persists must be
reported when it starts or changes, not every time it is seen again. A :class:`ReportOnce` keeps
the last reported value per key (thread-safe: several workers reconcile at once).
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

__all__ = ["ReportOnce"]

K = TypeVar("K")
V = TypeVar("V")


class ReportOnce(Generic[K, V]):
    """The last reported value per key.

    Typical use: ``if memo.note(key, value): report(...)`` — reports when ``value`` first appears for
    ``key`` or differs from the last one; :meth:`clear` once the situation is over, so a recurrence
    is reported again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[K, V] = {}

    def note(self, key: K, value: V) -> bool:
        """Remember ``value`` for ``key``; True if it is new (absent or different before)."""
        with self._lock:
            new = key not in self._values or self._values[key] != value
            self._values[key] = value
            return new

    def swap(self, key: K, value: V) -> V | None:
        """Remember ``value`` for ``key`` and return the previous value (``None`` if none)."""
        with self._lock:
            previous = self._values.get(key)
            self._values[key] = value
            return previous

    def clear(self, key: K) -> None:
        """Forget ``key`` (its situation is over)."""
        with self._lock:
            self._values.pop(key, None)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._values

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)
