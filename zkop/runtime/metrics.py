"""The runtime's Prometheus metrics, named, typed, labelled and bucketed as controller-runtime's.

Created at import on the default registry; importing also calls
:func:`prometheus_client.disable_created_metrics` (no ``<name>_created`` series, which
prometheus-client would add per counter/histogram child).

* work queue -- ``workqueue_*``, labels ``name`` and ``controller`` (both the queue name),
  ``priority=""`` on ``workqueue_depth`` only [CR pkg/internal/metrics/workqueue.go]; fed through
  :data:`WORKQUEUE_METRICS_PROVIDER`, installed at import.
* controller -- ``controller_runtime_*`` [CR pkg/internal/controller/metrics/metrics.go];
  :func:`init_controller_metrics` when a controller starts.
* leader election -- ``leader_election_master_status{name}`` [CR pkg/metrics/leaderelection.go].

``workqueue_unfinished_work_seconds`` and ``workqueue_longest_running_processor_seconds`` are
computed at scrape time (:data:`WORKQUEUE_IN_FLIGHT`), not by client-go's updater goroutine
[CG util/workqueue/queue.go ``updateUnfinishedWorkLoop``]; a queue's series last as long as the
queue object.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import Any

import prometheus_client
from prometheus_client import REGISTRY
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from zkop.metric_types import Counter, Gauge, Histogram
from zkop.runtime.workqueue import metrics as workqueue_metrics
from zkop.runtime.workqueue.metrics import InFlightSource

__all__ = [
    "ACTIVE_WORKERS",
    "LEADER_ELECTION_MASTER_STATUS",
    "MAX_CONCURRENT_RECONCILES",
    "RECONCILE_ERRORS",
    "RECONCILE_PANICS",
    "RECONCILE_RESULTS",
    "RECONCILE_TIME",
    "RECONCILE_TIMEOUTS",
    "RECONCILE_TIME_BUCKETS",
    "RECONCILE_TOTAL",
    "RESULT_ERROR",
    "RESULT_REQUEUE",
    "RESULT_REQUEUE_AFTER",
    "RESULT_SUCCESS",
    "TERMINAL_RECONCILE_ERRORS",
    "WORKQUEUE_ADDS",
    "WORKQUEUE_BUCKETS",
    "WORKQUEUE_DEPTH",
    "WORKQUEUE_IN_FLIGHT",
    "WORKQUEUE_METRICS_PROVIDER",
    "WORKQUEUE_QUEUE_DURATION",
    "WORKQUEUE_RETRIES",
    "WORKQUEUE_WORK_DURATION",
    "InFlightSource",
    "PrometheusWorkqueueMetricsProvider",
    "WorkqueueInFlightCollector",
    "init_controller_metrics",
]

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

# --------------------------------------------------------------------------------------------
# Work queue [CR pkg/internal/metrics/workqueue.go; CG util/workqueue/metrics.go]
# --------------------------------------------------------------------------------------------

#: ``prometheus.ExponentialBuckets(10e-9, 10, 12)``: 1e-8 s .. 1e3 s.
WORKQUEUE_BUCKETS: tuple[float, ...] = tuple(1e-8 * 10**i for i in range(12))

_WQ_LABELS = ("name", "controller")

WORKQUEUE_DEPTH = Gauge(
    "workqueue_depth",
    "Current depth of workqueue",
    [*_WQ_LABELS, "priority"],
)
WORKQUEUE_ADDS = Counter(
    "workqueue_adds_total",
    "Total number of adds handled by workqueue",
    _WQ_LABELS,
)
WORKQUEUE_QUEUE_DURATION = Histogram(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested",
    _WQ_LABELS,
    buckets=WORKQUEUE_BUCKETS,
)
WORKQUEUE_WORK_DURATION = Histogram(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from workqueue takes.",
    _WQ_LABELS,
    buckets=WORKQUEUE_BUCKETS,
)
WORKQUEUE_RETRIES = Counter(
    "workqueue_retries_total",
    "Total number of retries handled by workqueue",
    _WQ_LABELS,
)

_UNFINISHED_NAME = "workqueue_unfinished_work_seconds"
_UNFINISHED_HELP = (
    "How many seconds of work has been done that is in progress and hasn't been observed by "
    "work_duration. Large values indicate stuck threads. One can deduce the number of stuck "
    "threads by observing the rate at which this increases."
)
_LONGEST_NAME = "workqueue_longest_running_processor_seconds"
_LONGEST_HELP = "How many seconds has the longest running processor for workqueue been running."

class WorkqueueInFlightCollector(Collector):
    """Exports ``workqueue_unfinished_work_seconds`` and ``workqueue_longest_running_processor_seconds``.

    Each named queue registers a source (:meth:`register`) returning
    ``(sum of ages of in-flight items, age of the oldest one)`` in seconds; the collector calls
    the sources when Prometheus scrapes.  This replaces client-go's 500 ms updater goroutine
    ([CG util/workqueue/queue.go ``updateUnfinishedWorkLoop``]).  Sources are held weakly;
    when several live queues share a name their figures are combined (sum of unfinished work,
    max of longest runner), matching how they would share one Prometheus child.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sources: list[tuple[str, weakref.ReferenceType[Any]]] = []

    def register(self, name: str, source: InFlightSource) -> None:
        """Start exporting ``source``'s figures under ``name``.

        ``source`` is held weakly: pass a bound method of an object that lives as long as the
        queue (a bare lambda would be dropped at once).
        """
        ref: weakref.ReferenceType[Any]
        if hasattr(source, "__self__") and hasattr(source, "__func__"):
            ref = weakref.WeakMethod(source)
        else:
            ref = weakref.ref(source)
        with self._lock:
            self._sources.append((name, ref))

    def describe(self) -> Iterable[Metric]:
        """Names only, so the registry can detect duplicate registrations."""
        return [
            GaugeMetricFamily(_UNFINISHED_NAME, _UNFINISHED_HELP, labels=_WQ_LABELS),
            GaugeMetricFamily(_LONGEST_NAME, _LONGEST_HELP, labels=_WQ_LABELS),
        ]

    def collect(self) -> Iterable[Metric]:
        """Call every live source and yield the two gauge families."""
        with self._lock:
            live: list[tuple[str, InFlightSource]] = []
            kept: list[tuple[str, weakref.ReferenceType[Any]]] = []
            for name, ref in self._sources:
                fn = ref()
                if fn is not None:
                    live.append((name, fn))
                    kept.append((name, ref))
            self._sources = kept
        totals: dict[str, list[float]] = {}
        for name, fn in live:
            unfinished, longest = fn()
            acc = totals.setdefault(name, [0.0, 0.0])
            acc[0] += unfinished
            acc[1] = max(acc[1], longest)
        unfinished_family = GaugeMetricFamily(_UNFINISHED_NAME, _UNFINISHED_HELP, labels=_WQ_LABELS)
        longest_family = GaugeMetricFamily(_LONGEST_NAME, _LONGEST_HELP, labels=_WQ_LABELS)
        for name, (unfinished, longest) in sorted(totals.items()):
            unfinished_family.add_metric([name, name], unfinished)
            longest_family.add_metric([name, name], longest)
        return [unfinished_family, longest_family]


WORKQUEUE_IN_FLIGHT = WorkqueueInFlightCollector()
REGISTRY.register(WORKQUEUE_IN_FLIGHT)


class PrometheusWorkqueueMetricsProvider:
    """Hands a named work queue its label children, like controller-runtime's ``WorkqueueMetricsProvider``.

    [CR pkg/internal/metrics/workqueue.go]: ``name`` and ``controller`` both carry the queue name;
    ``workqueue_depth`` also gets ``priority=""``.  Satisfies
    :class:`zkop.runtime.workqueue.metrics.MetricsProvider`.  Creating a child makes its series appear
    at 0 immediately, as ``WithLabelValues`` does in Go.
    """

    def new_depth_metric(self, name: str) -> Gauge:
        """``workqueue_depth{name,controller,priority=""}``."""
        return WORKQUEUE_DEPTH.labels(name, name, "")

    def new_adds_metric(self, name: str) -> Counter:
        """``workqueue_adds_total{name,controller}``."""
        return WORKQUEUE_ADDS.labels(name, name)

    def new_latency_metric(self, name: str) -> Histogram:
        """``workqueue_queue_duration_seconds{name,controller}``."""
        return WORKQUEUE_QUEUE_DURATION.labels(name, name)

    def new_work_duration_metric(self, name: str) -> Histogram:
        """``workqueue_work_duration_seconds{name,controller}``."""
        return WORKQUEUE_WORK_DURATION.labels(name, name)

    def new_retries_metric(self, name: str) -> Counter:
        """``workqueue_retries_total{name,controller}``."""
        return WORKQUEUE_RETRIES.labels(name, name)

    def register_in_flight(self, name: str, source: InFlightSource) -> None:
        """Export ``source`` as the queue's unfinished-work / longest-running gauges."""
        WORKQUEUE_IN_FLIGHT.register(name, source)


#: The Prometheus provider; installed for every named work queue created after this module is
#: imported (controller-runtime registers its provider in ``pkg/metrics/workqueue.go`` ``init``).
WORKQUEUE_METRICS_PROVIDER = PrometheusWorkqueueMetricsProvider()
workqueue_metrics.set_provider(WORKQUEUE_METRICS_PROVIDER)

# --------------------------------------------------------------------------------------------
# Controller [CR pkg/internal/controller/metrics/metrics.go]
# --------------------------------------------------------------------------------------------

RESULT_SUCCESS = "success"
RESULT_ERROR = "error"
RESULT_REQUEUE = "requeue"
RESULT_REQUEUE_AFTER = "requeue_after"
#: Every value of the ``result`` label of ``controller_runtime_reconcile_total``.
RECONCILE_RESULTS: tuple[str, ...] = (RESULT_SUCCESS, RESULT_ERROR, RESULT_REQUEUE, RESULT_REQUEUE_AFTER)

#: [CR pkg/internal/controller/metrics/metrics.go ``ReconcileTime``]
RECONCILE_TIME_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
)  # fmt: skip

RECONCILE_TOTAL = Counter(
    "controller_runtime_reconcile_total",
    "Total number of reconciliations per controller",
    ["controller", "result"],
)
RECONCILE_ERRORS = Counter(
    "controller_runtime_reconcile_errors_total",
    "Total number of reconciliation errors per controller",
    ["controller"],
)
TERMINAL_RECONCILE_ERRORS = Counter(
    "controller_runtime_terminal_reconcile_errors_total",
    "Total number of terminal reconciliation errors per controller",
    ["controller"],
)
RECONCILE_PANICS = Counter(
    "controller_runtime_reconcile_panics_total",
    "Total number of reconciliation panics per controller",
    ["controller"],
)
RECONCILE_TIMEOUTS = Counter(
    "controller_runtime_reconcile_timeouts_total",
    "Total number of reconciliation timeouts per controller",
    ["controller"],
)
RECONCILE_TIME = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Length of time per reconciliation per controller",
    ["controller"],
    buckets=RECONCILE_TIME_BUCKETS,
)
MAX_CONCURRENT_RECONCILES = Gauge(
    "controller_runtime_max_concurrent_reconciles",
    "Maximum number of concurrent reconciles per controller",
    ["controller"],
)
ACTIVE_WORKERS = Gauge(
    "controller_runtime_active_workers",
    "Number of currently used workers per controller",
    ["controller"],
)


def init_controller_metrics(controller: str, max_concurrent: int) -> None:
    """Pre-create a controller's series the way controller-runtime does when it starts.

    Every ``controller_runtime_reconcile_total{result=...}`` series and the error, terminal
    error, panic and timeout counters are created at 0 (``Add(0)``);
    ``controller_runtime_max_concurrent_reconciles`` is set to ``max_concurrent`` and
    ``controller_runtime_active_workers`` to 0 [CR pkg/internal/controller/controller.go ``initMetrics``].
    The reconcile-time histogram is left alone (Go does not pre-create it either).  Idempotent
    except that it resets ``active_workers`` to 0: call it before starting workers.

    Raises :class:`ValueError` if ``controller`` is empty or ``max_concurrent < 1``.
    """
    if not controller:
        raise ValueError("controller name must not be empty")
    if max_concurrent < 1:
        raise ValueError(f"max_concurrent must be >= 1, got {max_concurrent!r}")
    for result in RECONCILE_RESULTS:
        RECONCILE_TOTAL.labels(controller, result).inc(0)
    for counter in (RECONCILE_ERRORS, TERMINAL_RECONCILE_ERRORS, RECONCILE_PANICS, RECONCILE_TIMEOUTS):
        counter.labels(controller).inc(0)
    MAX_CONCURRENT_RECONCILES.labels(controller).set(max_concurrent)
    ACTIVE_WORKERS.labels(controller).set(0)


# --------------------------------------------------------------------------------------------
# Leader election [CR pkg/metrics/leaderelection.go ``leaderGauge``]
# --------------------------------------------------------------------------------------------

#: 1 = this process holds the lease ``name``, 0 = backup.  Set it to 0 when the elector starts.
LEADER_ELECTION_MASTER_STATUS = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
    "1 indicates master. 'name' is the string used to identify the lease. Please make sure to "
    "group by name.",
    ["name"],
)

# --------------------------------------------------------------------------------------------
# zkop: own-write echoes
# --------------------------------------------------------------------------------------------


OWN_WRITE_ECHOES_DROPPED = Counter(
    "zkop_own_write_echoes_dropped_total",
    "Watch events not enqueued because they only echoed the controller's own finalizer or status write.",
    ["controller"],
)
