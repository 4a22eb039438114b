"""The reflector's retry backoff: client-go ``wait.Backoff`` as ``NewReflectorWithOptions`` sets it up."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

#: This module's own jitter source: zkop leaves the global ``random`` state alone (the process may share it).
_random = random.Random()

__all__ = ["Backoff"]


class Backoff:
    """Exponential backoff with full jitter and a reset after a healthy period.

    client-go's reflector uses 800 ms initial, factor 2, cap 30 s, jitter 1.0,
    reset after 2 min (``reflector.go`` ``NewReflectorWithOptions``).

    Args:
        initial, cap, reset_after: seconds.
    """

    def __init__(self, initial: float = 0.8, cap: float = 30.0, reset_after: float = 120.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.initial, self.cap, self.reset_after, self.clock = initial, cap, reset_after, clock
        self._current = 0.0
        self._last = 0.0

    def next(self) -> float:
        """Return the next delay in seconds, a random value in [d, 2d) for the current step d."""
        now = self.clock()
        if self._current and now - self._last > self.reset_after:
            self._current = 0.0
        self._current = self.initial if not self._current else min(self._current * 2, self.cap)
        self._last = now
        return self._current * (1 + _random.random())
