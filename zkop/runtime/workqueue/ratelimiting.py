"""A delaying queue whose retries a rate limiter spaces: client-go ``util/workqueue/rate_limiting_queue.go``."""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import TypeVar

from zkop.runtime.workqueue.delaying import DelayingQueue
from zkop.runtime.workqueue.metrics import MetricsProvider
from zkop.runtime.workqueue.queue import Clock
from zkop.runtime.workqueue.ratelimit import RateLimiter, default_controller_rate_limiter

__all__ = ["RateLimitingQueue"]

T = TypeVar("T", bound=Hashable)


class RateLimitingQueue(DelayingQueue[T]):
    """A :class:`DelayingQueue` whose retries are spaced by a :class:`~zkop.runtime.workqueue.ratelimit.RateLimiter`.

    ``rate_limiter`` defaults to
    :func:`~zkop.runtime.workqueue.ratelimit.default_controller_rate_limiter` (5 ms doubling to 1000 s
    per item, max'ed with a shared 10 qps / burst 100 bucket) -- a fresh one per queue.
    [CG util/workqueue/rate_limiting_queue.go ``TypedRateLimitingInterface``]
    """

    def __init__(
        self,
        name: str = "",
        *,
        rate_limiter: RateLimiter[T] | None = None,
        clock: Clock = time.monotonic,
        metrics_provider: MetricsProvider | None = None,
    ) -> None:
        super().__init__(name, clock=clock, metrics_provider=metrics_provider)
        self.rate_limiter: RateLimiter[T] = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter()
        )

    def add_rate_limited(self, item: T) -> None:
        """``add_after(item, rate_limiter.when(item))``: add once the limiter says it may."""
        self.add_after(item, self.rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """Reset ``item``'s failure history in the limiter.  It does not remove ``item`` from the
        queue, and :meth:`done` is still required."""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """How many rate-limited retries of ``item`` the limiter remembers."""
        return self.rate_limiter.num_requeues(item)
