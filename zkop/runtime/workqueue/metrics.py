"""How a work queue reports metrics: client-go's ``MetricsProvider`` and ``SetProvider`` [CG util/workqueue/metrics.go].

A named queue asks the installed provider (:func:`set_provider`; default
:class:`NoopMetricsProvider`) for its metrics when it is created. The Prometheus provider is
:mod:`zkop.runtime.metrics`, which installs itself on import, as controller-runtime's
``pkg/metrics/workqueue.go`` ``init`` does. ``register_in_flight`` replaces client-go's two
settable gauges: the provider pulls ``(unfinished_seconds, longest_seconds)`` from the queue at
scrape time [CG util/workqueue/queue.go ``updateUnfinishedWorkLoop``].
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

__all__ = [
    "CounterMetric",
    "GaugeMetric",
    "HistogramMetric",
    "InFlightSource",
    "MetricsProvider",
    "NoopMetricsProvider",
    "global_provider",
    "set_provider",
]

log = logging.getLogger(__name__)

T = TypeVar("T", bound=Hashable)

Clock = Callable[[], float]

#: A source of in-flight figures: returns ``(unfinished_work_seconds, longest_running_seconds)``.
InFlightSource = Callable[[], tuple[float, float]]


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

    :class:`zkop.runtime.metrics.PrometheusWorkqueueMetricsProvider` returns Prometheus
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


_lock = threading.Lock()
_provider: MetricsProvider = NoopMetricsProvider()
_provider_set = False


def set_provider(provider: MetricsProvider) -> None:
    """Install the provider every named queue created from now on reports to.

    Only the first call has an effect (later ones are logged and ignored), as client-go's
    ``SetProvider`` [CG util/workqueue/metrics.go ``globalMetricsFactory.setProvider``, a
    ``sync.Once``].  Queues created earlier keep the provider they were given.
    """
    global _provider, _provider_set
    with _lock:
        if _provider_set:
            if provider is not _provider:
                log.debug("workqueue metrics provider already set; ignoring %r", provider)
            return
        _provider, _provider_set = provider, True


def global_provider() -> MetricsProvider:
    """The provider installed with :func:`set_provider`, or the no-op one."""
    with _lock:
        return _provider


class QueueMetrics(Generic[T]):
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
