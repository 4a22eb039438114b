"""Metrics of the ZooKeeperConfig controller, on the default registry at import."""

from __future__ import annotations

import prometheus_client

from zkop.metric_types import Counter

__all__ = [
    "DRIFT_CORRECTIONS",
    "ZOOKEEPER_QUIET_RETRIES",
]

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

DRIFT_CORRECTIONS = Counter(
    "zkop_drift_corrections_total",
    "Total number of times a controller found ZooKeeper out of line with the desired state and corrected it.",
    ["controller"],
)

ZOOKEEPER_QUIET_RETRIES = Counter(
    "zkop_zookeeper_quiet_retries_total",
    "Reconciles that found ZooKeeper unavailable and were retried without a status or Event: the object had "
    "been failing for less than the grace period (a blip).",
    ["controller"],
)
