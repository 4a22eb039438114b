"""Prometheus metrics of the service importer (registered on the default registry at import).

The reconcile, queue and ZooKeeper request metrics come from :mod:`zkop.runtime.metrics` under
``controller="service-import"`` / ``name="service-import"``; these are the importer's own.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

__all__ = [
    "DELETES",
    "DELETE_CIRCUIT_BREAKER_OPEN",
    "LAST_FULL_SYNC",
    "SERVICES",
    "SKIPPED_INSTANCES",
    "WRITES",
]

WRITES = Counter(
    "zkop_service_import_writes_total",
    "Total number of Kubernetes objects the service importer created or updated, by resource and operation.",
    ["resource", "operation"],
)
DELETES = Counter(
    "zkop_service_import_deletes_total",
    "Total number of Kubernetes objects the service importer deleted, by resource.",
    ["resource"],
)
SKIPPED_INSTANCES = Counter(
    "zkop_service_import_skipped_instances_total",
    "Total number of ZooKeeper instance nodes the service importer found unusable, by reason "
    "(counted once per node and reason).",
    ["reason"],
)
SERVICES = Gauge(
    "zkop_service_import_services",
    "Number of imported services by state (imported, foreign, collided, orphaned) as of the last full sync.",
    ["state"],
)
DELETE_CIRCUIT_BREAKER_OPEN = Gauge(
    "zkop_service_import_delete_circuit_breaker_open",
    "1 while the service importer refuses deletes because too many were requested at once, else 0.",
)
LAST_FULL_SYNC = Gauge(
    "zkop_service_import_last_full_sync_timestamp_seconds",
    "Unix time in seconds of the last completed full sync of the service importer.",
)
