"""A token bucket: client-go ``util/flowcontrol`` on ``golang.org/x/time/rate``; thread-safe.

:class:`TokenBucket` holds at most ``burst`` tokens, refills at ``qps`` per second and starts full:

* :meth:`TokenBucket.reserve` always takes one (the balance may go negative) and returns the
  seconds to wait -- ``Reserve().Delay()`` [x/time/rate rate.go ``reserveN``]; the work queue's
  bucket rate limiter [CG util/workqueue/default_rate_limiters.go ``TypedBucketRateLimiter.When``];
* :meth:`TokenBucket.allow` takes one only if available now -- ``Allow()`` [x/time/rate rate.go
  ``AllowN``]; the Events budget (client-go's ``EventSourceObjectSpamFilter``).

:func:`client_rate_limiter` is client-go's ``NewTokenBucketRateLimiter`` for ``rest.Config``'s
``QPS``/``Burst``. Imports nothing else of zkop.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

__all__ = ["TokenBucket", "client_rate_limiter"]


class TokenBucket:
    """``burst`` tokens refilled at ``qps`` per second; starts full.

    Args:
        qps: refill rate, tokens per second; ``math.inf`` means "never limit".
        burst: bucket size, tokens.
        clock: monotonic seconds (inject a fake one in tests).

    Raises:
        ValueError: ``qps <= 0`` or ``burst < 1`` (x/time/rate would answer "never" there; a
            zero-qps limiter is meaningless for zkop's uses).
    """

    def __init__(self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        if not qps > 0:
            raise ValueError(f"qps must be > 0, got {qps!r}")
        if burst < 1:
            raise ValueError(f"burst must be >= 1, got {burst!r}")
        self._qps = float(qps)
        self._burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    @property
    def qps(self) -> float:
        """Refill rate, tokens per second."""
        return self._qps

    @property
    def burst(self) -> int:
        """Bucket size, tokens."""
        return self._burst

    def _advance(self, now: float) -> float:
        # x/time/rate advance(): a clock that went backwards counts as "no time passed".
        last = min(self._last, now)
        return min(float(self._burst), self._tokens + (now - last) * self._qps)

    def reserve(self) -> float:
        """Take one token and return the wait (seconds, ``>= 0``) until it is available."""
        with self._lock:
            now = self._clock()
            if math.isinf(self._qps):
                return 0.0
            tokens = self._advance(now) - 1.0
            wait = -tokens / self._qps if tokens < 0 else 0.0
            self._tokens = tokens
            self._last = now
            return wait

    def allow(self) -> bool:
        """Take a token if one is available now; never waits, never goes negative."""
        with self._lock:
            now = self._clock()
            tokens = self._advance(now)
            self._last = now
            if tokens >= 1.0:
                self._tokens = tokens - 1.0
                return True
            self._tokens = tokens
            return False


def client_rate_limiter(qps: float, burst: int, *,
                        clock: Callable[[], float] = time.monotonic) -> TokenBucket | None:
    """The API client's token bucket for ``qps``/``burst``, or ``None`` (no client-side limit) when ``qps < 0``.

    client-go ``rest.RESTClientFor``: a negative ``QPS`` disables the limiter (controller-runtime's
    ``GetConfig`` sets ``-1``: "rely on API Priority and Fairness"), a positive one makes
    ``flowcontrol.NewTokenBucketRateLimiter(qps, burst)``. client-go reads ``0`` as "unset" and
    substitutes ``DefaultQPS`` 5 / ``DefaultBurst`` 10; here a zero is refused instead, since a
    caller that passes it means something else than 5.

    Args:
        qps: requests per second; negative: no limiter.
        burst: requests that may go at once from a full bucket (ignored when ``qps < 0``).
        clock: monotonic seconds, for the bucket (tests pass a fake one).

    Raises:
        ValueError: ``qps == 0``, or ``burst < 1`` with ``qps > 0`` (:class:`TokenBucket`).
    """
    if qps < 0:
        return None
    return TokenBucket(qps, burst, clock=clock)
