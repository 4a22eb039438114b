"""Dry runs (``zkop run --dry-run``): every change a controller would make, logged and counted, none made.

Each controller decides as usual and, where it would write, calls :func:`planned` instead: one
log line per change (``dry-run <controller> <key>: would <change>``, sizes and versions only,
never data, so no Secret bytes reach the log) and one count in
``zkop_dry_run_planned_changes_total{controller,operation}``. A pass that is repeated (a resync,
a retry) plans, logs and counts its changes again: the counter measures planning, the log says
what the latest plan is.
"""

from __future__ import annotations

import logging

import prometheus_client
from prometheus_client import Counter

__all__ = ["PLANNED_CHANGES", "planned"]

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

PLANNED_CHANGES = Counter(
    "zkop_dry_run_planned_changes_total",
    "Changes a controller planned but did not make because zkop runs with --dry-run.",
    ["controller", "operation"],
)


def planned(log: logging.Logger, controller: str, key: str, operation: str, change: str) -> None:
    """Log (on the controller's ``log``) and count one change ``controller`` would make for ``key``.

    ``change`` is what :func:`zkop.zookeeper.actions.describe` says, e.g. ``create /app/flag (4 bytes)``.
    """
    PLANNED_CHANGES.labels(controller, operation).inc()
    log.info("dry-run %s %s: would %s", controller, key, change)
