"""Thread-based work queues with client-go ``util/workqueue`` semantics.

Three layers, each a subclass of the previous one:

* :class:`WorkQueue` (:mod:`.queue`) -- the plain queue [CG util/workqueue/queue.go].
* :class:`DelayingQueue` (:mod:`.delaying`) -- adds ``add_after`` [CG util/workqueue/delaying_queue.go].
* :class:`RateLimitingQueue` (:mod:`.ratelimiting`) -- adds ``add_rate_limited``, ``forget`` and
  ``num_requeues`` [CG util/workqueue/rate_limiting_queue.go], with the limiters of
  :mod:`.ratelimit` [CG util/workqueue/default_rate_limiters.go].

Metrics go through the provider installed with :func:`.metrics.set_provider`
[CG util/workqueue/metrics.go]; this package imports no metrics library.
"""

from zkop.runtime.workqueue.delaying import MAX_WAIT, DelayingQueue
from zkop.runtime.workqueue.metrics import (
    CounterMetric,
    GaugeMetric,
    HistogramMetric,
    InFlightSource,
    MetricsProvider,
    NoopMetricsProvider,
    set_provider,
)
from zkop.runtime.workqueue.queue import WorkQueue
from zkop.runtime.workqueue.ratelimiting import RateLimitingQueue

__all__ = [
    "MAX_WAIT",
    "CounterMetric",
    "DelayingQueue",
    "GaugeMetric",
    "HistogramMetric",
    "InFlightSource",
    "MetricsProvider",
    "NoopMetricsProvider",
    "RateLimitingQueue",
    "WorkQueue",
    "set_provider",
]
