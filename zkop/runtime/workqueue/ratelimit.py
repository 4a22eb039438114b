"""Work-queue rate limiters: how long an item waits before its retry, in seconds; thread-safe.

Each class ports the client-go limiter of the same name (``Typed…`` there), and
:func:`default_controller_rate_limiter` ports ``DefaultTypedControllerRateLimiter``
[CG util/workqueue/default_rate_limiters.go].
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

from zkop.kube.flowcontrol import TokenBucket

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "default_controller_rate_limiter",
    "default_item_based_rate_limiter",
]

T = TypeVar("T", bound=Hashable)
T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)

# 2.0 ** 1024 overflows a float; any exponent at or beyond this is "infinitely" long anyway.
_MAX_EXPONENT = 1023


class RateLimiter(Protocol[T_contra]):
    """What a :class:`~zkop.runtime.workqueue.ratelimiting.RateLimitingQueue` needs from a limiter.

    Mirrors client-go's ``TypedRateLimiter[T]`` [CG util/workqueue/default_rate_limiters.go].
    """

    def when(self, item: T_contra) -> float:
        """Record one more failure of ``item`` and return how long (seconds, ``>= 0``) to wait."""
        ...

    def forget(self, item: T_contra) -> None:
        """Stop tracking ``item``: its failure history is reset (it is *not* removed from a queue)."""
        ...

    def num_requeues(self, item: T_contra) -> int:
        """How many failures of ``item`` the limiter currently remembers."""
        ...


class ItemExponentialFailureRateLimiter(Generic[T]):
    """Per-item exponential backoff: ``base_delay * 2**failures`` seconds, capped at ``max_delay``.

    The n-th call of :meth:`when` for an item (counting from 1) returns ``base_delay * 2**(n-1)``;
    with the defaults that is 5 ms, 10 ms, 20 ms, ... 655.36 s on the 18th call and ``max_delay``
    (1000 s) from the 19th on.  Follows ``ItemExponentialFailureRateLimiter.When``
    [CG util/workqueue/default_rate_limiters.go], including its overflow guard (a huge
    exponent returns ``max_delay`` instead of raising :class:`OverflowError`).

    Raises :class:`ValueError` if ``base_delay`` or ``max_delay`` is negative.
    """

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        if base_delay < 0 or max_delay < 0:
            raise ValueError(f"delays must be >= 0, got base_delay={base_delay!r} max_delay={max_delay!r}")
        self._base_delay = float(base_delay)
        self._max_delay = float(max_delay)
        self._failures: dict[T, int] = {}
        self._lock = threading.Lock()

    def when(self, item: T) -> float:
        """Return the backoff for ``item`` (seconds) and count one more failure."""
        with self._lock:
            exp = self._failures.get(item, 0)
            self._failures[item] = exp + 1
        if exp > _MAX_EXPONENT:
            return self._max_delay if self._base_delay > 0 else 0.0
        backoff = self._base_delay * (2.0**exp)
        if math.isinf(backoff) or backoff > self._max_delay:
            return self._max_delay
        return backoff

    def forget(self, item: T) -> None:
        """Reset the failure count of ``item``."""
        with self._lock:
            self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        """Number of :meth:`when` calls for ``item`` since the last :meth:`forget`."""
        with self._lock:
            return self._failures.get(item, 0)


class ItemFastSlowRateLimiter(Generic[T]):
    """``fast_delay`` seconds for the first ``max_fast_attempts`` failures of an item, then ``slow_delay``.

    Follows ``ItemFastSlowRateLimiter.When`` [CG util/workqueue/default_rate_limiters.go]: the
    failure count is incremented *before* the comparison, so attempt ``max_fast_attempts`` is
    still fast.  Raises :class:`ValueError` on negative delays or a negative attempt count.
    """

    def __init__(self, fast_delay: float, slow_delay: float, max_fast_attempts: int) -> None:
        if fast_delay < 0 or slow_delay < 0:
            raise ValueError("delays must be >= 0")
        if max_fast_attempts < 0:
            raise ValueError("max_fast_attempts must be >= 0")
        self._fast_delay = float(fast_delay)
        self._slow_delay = float(slow_delay)
        self._max_fast_attempts = max_fast_attempts
        self._failures: dict[T, int] = {}
        self._lock = threading.Lock()

    def when(self, item: T) -> float:
        """Count one more failure of ``item`` and return the fast or slow delay (seconds)."""
        with self._lock:
            n = self._failures.get(item, 0) + 1
            self._failures[item] = n
        return self._fast_delay if n <= self._max_fast_attempts else self._slow_delay

    def forget(self, item: T) -> None:
        """Reset the failure count of ``item``."""
        with self._lock:
            self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        """Number of :meth:`when` calls for ``item`` since the last :meth:`forget`."""
        with self._lock:
            return self._failures.get(item, 0)


class BucketRateLimiter:
    """One token bucket shared by every item: an overall retry-speed cap, not per item.

    :meth:`when` always *reserves* a token of a :class:`zkop.kube.flowcontrol.TokenBucket` (``burst``
    tokens, ``qps`` per second, starts full) and returns how long to wait for it: with 10 qps and
    burst 100, 100 calls return 0, then 0.1 s, 0.2 s, ... (``TypedBucketRateLimiter.When``
    [CG util/workqueue/default_rate_limiters.go]). :meth:`forget` does nothing and
    :meth:`num_requeues` is always 0, as in client-go.

    ``clock`` returns monotonic seconds. Raises :class:`ValueError` if ``qps <= 0`` or ``burst < 1``.
    """

    def __init__(
        self, qps: float = 10.0, burst: int = 100, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._bucket = TokenBucket(qps, burst, clock=clock)

    def when(self, item: object) -> float:
        """Reserve one token and return the wait (seconds) until it is available."""
        return self._bucket.reserve()

    def allow(self) -> bool:
        """Take a token if one is available now (x/time/rate ``Allow()``); never waits, never goes negative."""
        return self._bucket.allow()

    def forget(self, item: object) -> None:
        """No-op: the bucket is shared, there is nothing per item to forget."""

    def num_requeues(self, item: object) -> int:
        """Always 0: the bucket does not count per-item failures."""
        return 0


class MaxOfRateLimiter(Generic[T]):
    """Combine limiters: the largest :meth:`when` and :meth:`num_requeues` of its members win.

    Every member sees every call (so each one's own state advances).  Follows
    ``TypedMaxOfRateLimiter`` [CG util/workqueue/default_rate_limiters.go].  Raises
    :class:`ValueError` when given no limiters.
    """

    def __init__(self, *limiters: RateLimiter[T]) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self._limiters: tuple[RateLimiter[T], ...] = limiters

    def when(self, item: T) -> float:
        """Ask every member and return the longest delay (seconds)."""
        return max(limiter.when(item) for limiter in self._limiters)

    def forget(self, item: T) -> None:
        """Forget ``item`` in every member."""
        for limiter in self._limiters:
            limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """The largest failure count any member remembers for ``item``."""
        return max(limiter.num_requeues(item) for limiter in self._limiters)


def default_controller_rate_limiter(
    base_delay: float = 0.005,
    max_delay: float = 1000.0,
    qps: float = 10.0,
    burst: int = 100,
) -> MaxOfRateLimiter[Hashable]:
    """``MaxOf(ItemExponentialFailure(base_delay, max_delay), Bucket(qps, burst))``.

    client-go's ``DefaultTypedControllerRateLimiter`` (alias ``DefaultControllerRateLimiter``)
    [CG util/workqueue/default_rate_limiters.go]: per item 5 ms doubling up to 1000 s,
    and overall no more than 10 retries per second after a burst of 100.  This is what
    controller-runtime uses when its priority queue is off [CR pkg/controller/controller.go ``NewTypedUnmanaged``].
    """
    return MaxOfRateLimiter[Hashable](
        ItemExponentialFailureRateLimiter[Hashable](base_delay, max_delay),
        BucketRateLimiter(qps, burst),
    )


def default_item_based_rate_limiter() -> ItemExponentialFailureRateLimiter[Hashable]:
    """Per-item exponential 1 ms .. 1000 s: client-go's ``DefaultTypedItemBasedRateLimiter``
    [CG util/workqueue/default_rate_limiters.go]."""
    return ItemExponentialFailureRateLimiter[Hashable](0.001, 1000.0)
