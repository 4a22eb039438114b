"""Metrics of the Kubernetes API layer: client-go's REST client metrics and the Event budget.

``rest_client_requests_total`` and ``rest_client_request_duration_seconds`` copy the names, labels
and buckets that controller-runtime registers for client-go (k8s.io/client-go/tools/metrics,
controller-runtime pkg/metrics/client_go_adapter.go). Defined on the default
``prometheus_client.REGISTRY`` at import.
"""

from __future__ import annotations

import prometheus_client
from prometheus_client import Counter, Histogram

__all__ = [
    "EVENTS_DROPPED",
    "REST_CLIENT_REQUESTS",
    "REST_CLIENT_REQUEST_DURATION",
]

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

EVENTS_DROPPED = Counter(
    "zkop_events_dropped_total",
    "Kubernetes Events not written because the Normal-event budget was spent.",
    ["type"],
)
REST_CLIENT_REQUESTS = Counter(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"],
)
REST_CLIENT_REQUEST_DURATION = Histogram(
    "rest_client_request_duration_seconds",
    "Request latency in seconds. Broken down by verb, and host.",
    ["verb", "host"],
    buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0),
)
