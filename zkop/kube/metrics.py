"""Metrics of the Kubernetes API layer: client-go's REST client metrics and the Event budget.

``rest_client_requests_total``, ``rest_client_request_duration_seconds``,
``rest_client_rate_limiter_duration_seconds`` and ``rest_client_request_retries_total`` copy the
names, help, labels and buckets that controller-runtime registers for client-go
(k8s.io/client-go/tools/metrics ``RegisterOpts``; controller-runtime pkg/metrics/client_go_adapter.go
``requestResult``, ``requestLatency``, ``rateLimiterLatency``, ``requestRetry``; component-base
metrics/prometheus/restclient/metrics.go has the same two last ones). Defined on the default
``prometheus_client.REGISTRY`` at import.
"""

from __future__ import annotations

import prometheus_client

from zkop.metric_types import Counter, Histogram

__all__ = [
    "EVENTS_DROPPED",
    "REST_CLIENT_RATE_LIMITER_DURATION",
    "REST_CLIENT_REQUESTS",
    "REST_CLIENT_REQUEST_DURATION",
    "REST_CLIENT_REQUEST_RETRIES",
]

#: client-go's latency buckets (seconds), shared by the request and rate-limiter histograms.
_LATENCY_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

EVENTS_DROPPED = Counter(
    "zkop_events_dropped_total",
    "Kubernetes Events not written: the Normal-event budget or the object's Event budget was spent.",
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
    buckets=_LATENCY_BUCKETS,
)
REST_CLIENT_RATE_LIMITER_DURATION = Histogram(
    "rest_client_rate_limiter_duration_seconds",
    "Client side rate limiter latency in seconds. Broken down by verb, and host.",
    ["verb", "host"],
    buckets=_LATENCY_BUCKETS,
)
REST_CLIENT_REQUEST_RETRIES = Counter(
    "rest_client_request_retries_total",
    "Number of request retries, partitioned by status code, verb, and host.",
    ["code", "verb", "host"],
)
