"""Metrics of the ZooKeeperEnsembles (``zkop_ensemble_*``), labelled ``ensemble`` (one series per
ZooKeeperEnsemble, removed with it: as many series as ensembles), on the default registry at import."""

from __future__ import annotations

import contextlib

import prometheus_client
from prometheus_client import Gauge

__all__ = ["ENSEMBLE_MANAGED_OBJECTS", "ENSEMBLE_READY", "forget"]

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

ENSEMBLE_READY = Gauge(
    "zkop_ensemble_ready",
    "1 while the ZooKeeperEnsemble's session is established (and its chroot exists), 0 otherwise.",
    ["ensemble"],
)
ENSEMBLE_MANAGED_OBJECTS = Gauge(
    "zkop_ensemble_managed_objects",
    "ZooKeeperConfigs naming the ZooKeeperEnsemble in spec.ensembleRef.",
    ["ensemble"],
)


def forget(name: str) -> None:
    """Remove the series of ensemble ``name`` (it is gone)."""
    for gauge in (ENSEMBLE_READY, ENSEMBLE_MANAGED_OBJECTS):
        with contextlib.suppress(KeyError):
            gauge.remove(name)
