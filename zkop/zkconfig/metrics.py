"""Metrics of the ZooKeeperConfig controller, on the default registry at import."""

from __future__ import annotations

import prometheus_client
from prometheus_client import Counter

__all__ = [
    "DRIFT_CORRECTIONS",
]

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

DRIFT_CORRECTIONS = Counter(
    "zkop_drift_corrections_total",
    "Total number of times a controller found ZooKeeper out of line with the desired state and corrected it.",
    ["controller"],
)
