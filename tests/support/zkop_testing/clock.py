"""A fake monotonic clock for tests that must not time anything with the wall clock."""

from __future__ import annotations

__all__ = ["FakeClock"]


class FakeClock:
    """Seconds that pass only when something sleeps on this clock; every sleep is recorded.

    Stands in for ``time`` (``monotonic`` and ``sleep``, e.g. monkeypatched over a module's ``time``)
    or for an injected ``clock`` callable and ``sleep`` function (``KubeClient(clock=c, sleep=c.sleep)``).

    Attributes:
        now: the current reading, seconds; a test may move it on by hand (idle time).
        slept: each sleep's seconds, in order.
    """

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        """The current reading (a ``clock`` callable)."""
        return self.now

    def monotonic(self) -> float:
        """The current reading (``time.monotonic``)."""
        return self.now

    def sleep(self, seconds: float) -> None:
        """Record ``seconds`` and move the clock on by them (``time.sleep``)."""
        self.slept.append(seconds)
        self.now += seconds
