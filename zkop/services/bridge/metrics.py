"""Metrics of the service bridge (``zkop_service_bridge_*``), on the default registry at import."""

from __future__ import annotations

import prometheus_client
from prometheus_client import Counter, Gauge

__all__ = [
    "SERVICE_BRIDGE_COLLISIONS",
    "SERVICE_BRIDGE_DELETES",
    "SERVICE_BRIDGE_DELETE_CIRCUIT_BREAKER_OPEN",
    "SERVICE_BRIDGE_LAST_FULL_SYNC",
    "SERVICE_BRIDGE_RECORDS",
    "SERVICE_BRIDGE_SKIPPED_FOREIGN",
    "SERVICE_BRIDGE_WRITES",
]

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

SERVICE_BRIDGE_RECORDS = Gauge(
    "zkop_service_bridge_records",
    "Number of service records known to the service bridge, by state.",
    ["state"],
)
SERVICE_BRIDGE_WRITES = Counter(
    "zkop_service_bridge_writes_total",
    "Total number of znode writes made by the service bridge, by operation.",
    ["operation"],
)
SERVICE_BRIDGE_DELETES = Counter(
    "zkop_service_bridge_deletes_total",
    "Total number of znodes deleted by the service bridge.",
)
SERVICE_BRIDGE_SKIPPED_FOREIGN = Counter(
    "zkop_service_bridge_skipped_foreign_total",
    "Total number of znodes the service bridge left alone because another owner wrote them.",
)
SERVICE_BRIDGE_COLLISIONS = Counter(
    "zkop_service_bridge_collisions_total",
    "Total number of times two Services mapped to the same znode.",
)
SERVICE_BRIDGE_LAST_FULL_SYNC = Gauge(
    "zkop_service_bridge_last_full_sync_timestamp_seconds",
    "Unix time in seconds of the last completed full sync of the service bridge.",
)
SERVICE_BRIDGE_DELETE_CIRCUIT_BREAKER_OPEN = Gauge(
    "zkop_service_bridge_delete_circuit_breaker_open",
    "1 while the service bridge refuses deletes because too many were requested at once, else 0.",
)
