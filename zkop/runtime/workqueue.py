"""Thread-based work queues with client-go ``util/workqueue`` semantics.

Three layers, each a subclass of the previous one:

* :class:`WorkQueue` -- the plain queue [CG util/workqueue/queue.go].  Guarantees
  [CG util/workqueue/doc.go:17-27]: **fair** (FIFO), **stingy** (an item is never handed to two
  workers at once, and repeated adds before pickup collapse into one), an item added again
  while it is processed is processed once more after :meth:`WorkQueue.done`, and workers learn
  about shutdown from :meth:`WorkQueue.get`.
* :class:`DelayingQueue` -- adds :meth:`DelayingQueue.add_after` [CG util/workqueue/delaying_queue.go].
* :class:`RateLimitingQueue` -- adds :meth:`RateLimitingQueue.add_rate_limited`,
  :meth:`~RateLimitingQueue.forget` and :meth:`~RateLimitingQueue.num_requeues`
  [CG util/workqueue/rate_limiting_queue.go].

Items must be hashable (typically a ``(namespace, name)`` key).  Times are ``float`` seconds.
A queue with a non-empty ``name`` records the ``workqueue_*`` Prometheus metrics (see
:mod:`zkop.runtime.metrics`); an unnamed queue records none
[CG util/workqueue/metrics.go ``newQueueMetrics``].

Typical worker loop (controller-runtime's ``processNextWorkItem``
[CR pkg/internal/controller/controller.go:422-440])::

    while True:
        key, shutdown = queue.get()
        if shutdown:
            return
        try:
            reconcile(key)
        except Exception:
            queue.add_rate_limited(key)
        else:
            queue.forget(key)
        finally:
            queue.done(key)
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

from zkop.runtime.metrics import WORKQUEUE_METRICS_PROVIDER, InFlightSource
from zkop.runtime.ratelimit import RateLimiter, default_controller_rate_limiter

__all__ = [
    "MAX_WAIT",
    "CounterMetric",
    "DelayingQueue",
    "GaugeMetric",
    "HistogramMetric",
    "MetricsProvider",
    "NoopMetricsProvider",
    "RateLimitingQueue",
    "WorkQueue",
]

T = TypeVar("T", bound=Hashable)

Clock = Callable[[], float]

#: The delaying loop wakes at least this often (seconds) [CG util/workqueue/delaying_queue.go:273].
MAX_WAIT = 10.0


# --------------------------------------------------------------------------------------------
# Metrics plumbing [CG util/workqueue/metrics.go]
# --------------------------------------------------------------------------------------------


class GaugeMetric(Protocol):
    """A gauge the queue moves up and down (``workqueue_depth``)."""

    def inc(self, amount: float = 1) -> None: ...
    def dec(self, amount: float = 1) -> None: ...


class CounterMetric(Protocol):
    """A counter the queue increments (``workqueue_adds_total``, ``workqueue_retries_total``)."""

    def inc(self, amount: float = 1) -> None: ...


class HistogramMetric(Protocol):
    """A histogram of seconds (``workqueue_queue_duration_seconds``, ``..._work_duration_seconds``)."""

    def observe(self, amount: float) -> None: ...


class MetricsProvider(Protocol):
    """Where a named queue gets its metrics; client-go's ``MetricsProvider`` in Python.

    The default, :data:`zkop.runtime.metrics.WORKQUEUE_METRICS_PROVIDER`, returns Prometheus
    children labelled like controller-runtime.  ``register_in_flight`` replaces client-go's two
    settable gauges (unfinished work, longest running processor): the provider pulls
    ``(unfinished_seconds, longest_seconds)`` from the queue when it needs them.
    """

    def new_depth_metric(self, name: str) -> GaugeMetric: ...
    def new_adds_metric(self, name: str) -> CounterMetric: ...
    def new_latency_metric(self, name: str) -> HistogramMetric: ...
    def new_work_duration_metric(self, name: str) -> HistogramMetric: ...
    def new_retries_metric(self, name: str) -> CounterMetric: ...
    def register_in_flight(self, name: str, source: InFlightSource) -> None: ...


class _Noop:
    def inc(self, amount: float = 1) -> None:
        pass

    def dec(self, amount: float = 1) -> None:
        pass

    def observe(self, amount: float) -> None:
        pass


_NOOP = _Noop()


class NoopMetricsProvider:
    """Records nothing.  Used automatically for unnamed queues."""

    def new_depth_metric(self, name: str) -> GaugeMetric:
        return _NOOP

    def new_adds_metric(self, name: str) -> CounterMetric:
        return _NOOP

    def new_latency_metric(self, name: str) -> HistogramMetric:
        return _NOOP

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        return _NOOP

    def new_retries_metric(self, name: str) -> CounterMetric:
        return _NOOP

    def register_in_flight(self, name: str, source: InFlightSource) -> None:
        pass


class _QueueMetrics(Generic[T]):
    """client-go's ``defaultQueueMetrics``; every method is called with the queue lock held."""

    def __init__(self, name: str, provider: MetricsProvider, clock: Clock, lock: threading.Condition) -> None:
        self._clock = clock
        self._lock = lock
        self._depth = provider.new_depth_metric(name)
        self._adds = provider.new_adds_metric(name)
        self._latency = provider.new_latency_metric(name)
        self._work_duration = provider.new_work_duration_metric(name)
        self.retries = provider.new_retries_metric(name)
        self._add_times: dict[T, float] = {}
        self._processing_start_times: dict[T, float] = {}
        provider.register_in_flight(name, self.in_flight)

    def add(self, item: T) -> None:
        self._adds.inc()
        self._depth.inc()
        if item not in self._add_times:
            self._add_times[item] = self._clock()

    def get(self, item: T) -> None:
        self._depth.dec()
        now = self._clock()
        self._processing_start_times[item] = now
        start = self._add_times.pop(item, None)
        if start is not None:
            self._latency.observe(max(0.0, now - start))

    def done(self, item: T) -> None:
        start = self._processing_start_times.pop(item, None)
        if start is not None:
            self._work_duration.observe(max(0.0, self._clock() - start))

    def in_flight(self) -> tuple[float, float]:
        """``(sum of ages, oldest age)`` of the items being processed, in seconds."""
        with self._lock:
            now = self._clock()
            ages = [max(0.0, now - start) for start in self._processing_start_times.values()]
        return (sum(ages), max(ages, default=0.0))


# --------------------------------------------------------------------------------------------
# WorkQueue [CG util/workqueue/queue.go]
# --------------------------------------------------------------------------------------------


class WorkQueue(Generic[T]):
    """FIFO work queue with client-go's dedup / never-twice-at-once / requeue-on-done rules.

    State, all guarded by one :class:`threading.Condition` [CG util/workqueue/queue.go:190-205]:
    ``queue`` (order of pickup; every entry is dirty and not processing), ``dirty`` (items that
    need work) and ``processing`` (items handed out by :meth:`get` and not yet :meth:`done`; an
    item can be dirty at the same time).

    ``name`` -- non-empty to record the ``workqueue_*`` metrics under that name.
    ``clock`` -- monotonic seconds, used for metrics and (in :class:`DelayingQueue`) ready times;
    blocking waits always use real time.
    ``metrics_provider`` -- where the metrics go; defaults to the Prometheus provider in
    :mod:`zkop.runtime.metrics`.  Ignored (no metrics) when ``name`` is empty.
    """

    def __init__(
        self,
        name: str = "",
        *,
        clock: Clock = time.monotonic,
        metrics_provider: MetricsProvider | None = None,
    ) -> None:
        self.name = name
        self._clock = clock
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._shutting_down = False
        self._drain = False
        provider: MetricsProvider
        if not name:
            provider = NoopMetricsProvider()
        elif metrics_provider is None:
            provider = WORKQUEUE_METRICS_PROVIDER
        else:
            provider = metrics_provider
        self._metrics: _QueueMetrics[T] = _QueueMetrics(name, provider, clock, self._cond)

    def add(self, item: T) -> None:
        """Mark ``item`` as needing processing.  Never blocks.

        Dropped while shutting down; a no-op if ``item`` is already dirty (waiting, or re-added
        while processing).  If ``item`` is being processed it is only marked dirty and goes back
        in the queue on :meth:`done`.  [CG util/workqueue/queue.go:227-251]
        """
        with self._cond:
            if self._shutting_down or item in self._dirty:
                return
            self._metrics.add(item)
            self._dirty.add(item)
            if item in self._processing:
                return
            self._queue.append(item)
            self._cond.notify()

    def get(self, timeout: float | None = None) -> tuple[T | None, bool]:
        """Take the next item: returns ``(item, shutdown)``.

        Blocks while the queue is empty and not shut down.  Returns ``(None, True)`` only when
        the queue is empty *and* shutting down (queued items are still handed out after
        :meth:`shutdown`); the worker should then exit.  With ``timeout`` (seconds) it returns
        ``(None, False)`` if nothing arrived in time (``timeout=0`` polls).  The caller must
        call :meth:`done` with the item when finished.  [CG util/workqueue/queue.go:265-285]
        """
        with self._cond:
            if timeout is None:
                while not self._queue and not self._shutting_down:
                    self._cond.wait()
            else:
                deadline = time.monotonic() + timeout
                while not self._queue and not self._shutting_down:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None, False
                    self._cond.wait(remaining)
            if not self._queue:
                return None, True
            item = self._queue.popleft()
            self._metrics.get(item)
            self._processing.add(item)
            self._dirty.discard(item)
            return item, False

    def done(self, item: T) -> None:
        """Mark ``item`` as finished; if it was added again meanwhile, queue it (once) at the back.

        Calling it for an item that is not being processed is harmless.
        [CG util/workqueue/queue.go:289-301]
        """
        with self._cond:
            self._metrics.done(item)
            self._processing.discard(item)
            if item in self._dirty:
                self._queue.append(item)
                self._cond.notify()
            if self._drain and not self._processing:
                # Wake every shutdown_with_drain() waiter (getters do not wait once shut down).
                self._cond.notify_all()

    def __len__(self) -> int:
        """Number of items waiting for pickup.  Informational only: never gate add/get on it."""
        with self._cond:
            return len(self._queue)

    def shutdown(self) -> None:
        """Stop accepting adds; :meth:`get` hands out what is queued, then reports shutdown.

        Also ends any :meth:`shutdown_with_drain` wait.  Idempotent.
        [CG util/workqueue/queue.go:304-319]
        """
        with self._cond:
            self._drain = False
            self._shutting_down = True
            self._cond.notify_all()
        self._on_shutdown()

    def shutdown_with_drain(self, timeout: float | None = None) -> bool:
        """Like :meth:`shutdown`, then wait until no item is being processed.

        Returns ``True`` once ``processing`` is empty, ``False`` if ``timeout`` (seconds) passed
        first or a concurrent :meth:`shutdown` cancelled the drain.  Items still waiting in the
        queue do not hold it up (workers keep receiving them from :meth:`get`).  Without a
        timeout a worker that never calls :meth:`done` blocks it forever, as in client-go.
        [CG util/workqueue/queue.go:321-341]
        """
        with self._cond:
            self._drain = True
            self._shutting_down = True
            self._cond.notify_all()
        self._on_shutdown()
        with self._cond:
            deadline = None if timeout is None else time.monotonic() + timeout
            while self._processing:
                if not self._drain:
                    return False
                if deadline is None:
                    self._cond.wait()
                else:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._cond.wait(remaining)
            return True

    def shutting_down(self) -> bool:
        """Whether :meth:`shutdown` or :meth:`shutdown_with_drain` has been called."""
        with self._cond:
            return self._shutting_down

    def _on_shutdown(self) -> None:
        """Hook for subclasses; called (without the lock) after every shutdown call."""


# --------------------------------------------------------------------------------------------
# DelayingQueue [CG util/workqueue/delaying_queue.go]
# --------------------------------------------------------------------------------------------


class _WaitFor(Generic[T]):
    """A heap entry: ``item`` becomes ready at ``ready_at``; ``seq`` keeps equal times FIFO."""

    __slots__ = ("item", "ready_at", "seq")

    def __init__(self, item: T, ready_at: float, seq: int) -> None:
        self.item = item
        self.ready_at = ready_at
        self.seq = seq

    def __lt__(self, other: _WaitFor[T]) -> bool:
        return (self.ready_at, self.seq) < (other.ready_at, other.seq)


class DelayingQueue(WorkQueue[T]):
    """A :class:`WorkQueue` that can add an item later: :meth:`add_after`.

    Waiting items sit in a min-heap ordered by ready time, with at most one entry per item.  A
    daemon thread (started on the first delayed add, stopped by shutdown) moves ready items into
    the queue, waking when the earliest one is due, on every new delayed add, and at least every
    :data:`MAX_WAIT` (10 s) seconds [CG util/workqueue/delaying_queue.go:273].  Items still
    waiting at shutdown are dropped.
    """

    def __init__(
        self,
        name: str = "",
        *,
        clock: Clock = time.monotonic,
        metrics_provider: MetricsProvider | None = None,
    ) -> None:
        super().__init__(name, clock=clock, metrics_provider=metrics_provider)
        self._delay_cond = threading.Condition(threading.Lock())
        self._heap: list[_WaitFor[T]] = []
        self._waiting: dict[T, _WaitFor[T]] = {}
        self._seq = itertools.count()
        self._delay_stopped = False
        self._delay_thread: threading.Thread | None = None

    def add_after(self, item: T, delay: float) -> None:
        """Add ``item`` once ``delay`` seconds have passed.

        Ignored while shutting down.  Otherwise counts one ``workqueue_retries_total`` (every
        call, as client-go does) and: ``delay <= 0`` -> :meth:`add` now; else if ``item`` is
        already waiting, the **earlier** of the two ready times wins
        [CG util/workqueue/delaying_queue.go:249-266, 355-369].  A waiting item can still be
        added directly with :meth:`add`; the delayed add then fires too (usually a dedup no-op).
        """
        if self.shutting_down():
            return
        with self._cond:
            self._metrics.retries.inc()
        if delay <= 0:
            self.add(item)
            return
        with self._delay_cond:
            if self._delay_stopped:
                return
            ready_at = self._clock() + delay
            existing = self._waiting.get(item)
            if existing is not None:
                if ready_at < existing.ready_at:
                    existing.ready_at = ready_at
                    heapq.heapify(self._heap)
            else:
                entry = _WaitFor(item, ready_at, next(self._seq))
                self._waiting[item] = entry
                heapq.heappush(self._heap, entry)
            if self._delay_thread is None:
                self._delay_thread = threading.Thread(
                    target=self._waiting_loop, name=f"workqueue-delay-{self.name or 'unnamed'}", daemon=True
                )
                self._delay_thread.start()
            self._delay_cond.notify()

    def _waiting_loop(self) -> None:
        """Move ready items into the queue until shutdown."""
        while True:
            ready: list[T] = []
            with self._delay_cond:
                if self._delay_stopped:
                    return
                now = self._clock()
                while self._heap and self._heap[0].ready_at <= now:
                    entry = heapq.heappop(self._heap)
                    del self._waiting[entry.item]
                    ready.append(entry.item)
                if not ready:
                    wait = MAX_WAIT
                    if self._heap:
                        wait = min(wait, self._heap[0].ready_at - now)
                    self._delay_cond.wait(wait)
                    continue
            # Outside the delay lock, so the two locks are never held together.
            for item in ready:
                self.add(item)

    def _on_shutdown(self) -> None:
        with self._delay_cond:
            self._delay_stopped = True
            self._heap.clear()
            self._waiting.clear()
            self._delay_cond.notify_all()

    def _num_waiting(self) -> int:
        """Items waiting for their ready time (for tests and debugging)."""
        with self._delay_cond:
            return len(self._waiting)


# --------------------------------------------------------------------------------------------
# RateLimitingQueue [CG util/workqueue/rate_limiting_queue.go]
# --------------------------------------------------------------------------------------------


class RateLimitingQueue(DelayingQueue[T]):
    """A :class:`DelayingQueue` whose retries are spaced by a :class:`~zkop.runtime.ratelimit.RateLimiter`.

    ``rate_limiter`` defaults to
    :func:`~zkop.runtime.ratelimit.default_controller_rate_limiter` (5 ms doubling to 1000 s
    per item, max'ed with a shared 10 qps / burst 100 bucket) -- a fresh one per queue.
    [CG util/workqueue/rate_limiting_queue.go:33-40, 137-147]
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
