"""Metrics of the ZooKeeper session layer (``zkop_zookeeper_*``), on the default registry at import."""

from __future__ import annotations

import prometheus_client

from zkop.metric_types import Counter, Gauge, Histogram

__all__ = [
    "ZOOKEEPER_CONNECTED",
    "ZOOKEEPER_REQUEST_DURATION",
    "ZOOKEEPER_REQUEST_DURATION_BUCKETS",
    "ZOOKEEPER_REQUEST_ERRORS",
    "ZOOKEEPER_SESSION_RESETS",
]

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

#: ZooKeeper round trips are milliseconds when healthy; the top buckets catch session trouble.
ZOOKEEPER_REQUEST_DURATION_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
ZOOKEEPER_CONNECTED = Gauge(
    "zkop_zookeeper_connected",
    "1 while the ZooKeeper session is connected, 0 otherwise.",
)
ZOOKEEPER_REQUEST_DURATION = Histogram(
    "zkop_zookeeper_request_duration_seconds",
    "Duration in seconds of ZooKeeper requests, by operation (get, set, create, delete, ...).",
    ["operation"],
    buckets=ZOOKEEPER_REQUEST_DURATION_BUCKETS,
)
ZOOKEEPER_REQUEST_ERRORS = Counter(
    "zkop_zookeeper_request_errors_total",
    "Total number of failed ZooKeeper requests, by operation and error class.",
    ["operation", "error"],
)
ZOOKEEPER_SESSION_RESETS = Counter(
    "zkop_zookeeper_session_resets_total",
    "Total number of ZooKeeper sessions given up and replaced by a new session made from scratch: refused by "
    "an ensemble that lost its data, or suspended for longer than the session timeout.",
)
