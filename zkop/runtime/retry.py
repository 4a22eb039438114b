"""The one retry boundary: where a reconciler turns a dependency's failure into a retry of its key.

Every controller of zkop meets ZooKeeper failures (session unavailable, NoAuth, a conflict that
persisted) at a :class:`RetryBoundary` over :class:`~zkop.zookeeper.errors.ZooKeeperError`; the
work queue's rate limiter then retries the key with backoff.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from zkop.runtime.controller import RetryableError

__all__ = ["RetryBoundary"]


class RetryBoundary:
    """Turns the failures ``errors`` into retries, and counts each key's streak of ``streak_of`` failures.

    Two rules share it:

    * the service bridge, the service import and the mirror retry every failure quietly and report
      nothing on the object: ``with boundary.retrying(key):`` re-raises a failure as
      ``RetryableError("<key>: <failure>")``, logged by the controller without a traceback;
    * the ZooKeeperConfig reconciler reports a failure in the object's status before it retries
      (:func:`zkop.zkconfig.decide.decide_failure`) — except a blip: ``ZooKeeperUnavailable`` is
      reported only once :meth:`failed` counts ``failure_threshold`` (3) consecutive failing passes
      of the key that have lasted ``unavailable_grace`` (3 s), issue 23's rule. It calls
      :meth:`failed` for each failing pass and :meth:`passed` for every other ending, and raises
      :class:`~zkop.runtime.controller.RetryableError` itself, after the status write.

    Thread-safe: the controller's workers share one boundary.

    Args:
        errors: the exception types that are retried.
        streak_of: the exception types whose consecutive occurrences :meth:`failed` counts (any
            other failure ends a streak).
        clock: monotonic seconds.
    """

    def __init__(self, errors: type[Exception] | tuple[type[Exception], ...], *,
                 streak_of: type[Exception] | tuple[type[Exception], ...] = (),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.errors = errors
        self.streak_of = streak_of
        self._clock = clock
        self._streaks: dict[str, tuple[int, float]] = {}  # key → (failing passes, when the first failed)
        self._lock = threading.Lock()

    @contextmanager
    def retrying(self, key: str) -> Iterator[None]:
        """Run the body; a failure of :attr:`errors` leaves it as ``RetryableError("<key>: <failure>")``.

        Raises:
            RetryableError: chained to the failure.
        """
        try:
            yield
        except self.errors as err:
            raise RetryableError(f"{key}: {err}") from err

    def failed(self, key: str, err: Exception) -> tuple[int, float]:
        """Count a pass of ``key`` that failed with ``err``.

        Returns:
            The consecutive passes of ``key`` that failed with :attr:`streak_of`, this one included,
            and the seconds since the first of them failed; ``(0, 0.0)`` (the streak ends) for any
            other failure.
        """
        if not isinstance(err, self.streak_of):
            self.passed(key)
            return 0, 0.0
        now = self._clock()
        with self._lock:
            count, since = self._streaks.get(key, (0, now))
            self._streaks[key] = (count + 1, since)
        return count + 1, now - since

    def passed(self, key: str) -> None:
        """A pass of ``key`` ended otherwise (or the key is gone): its streak ends."""
        with self._lock:
            self._streaks.pop(key, None)
