"""Scrape-time gauges of ZooKeeperConfig health, computed from the informer cache.

``zkop_zookeeperconfigs{state}`` counts objects by ``status.state`` and
``zkop_zookeeperconfig_condition{type,status}`` by condition, so alerts can
fire on stalled objects (``type="Stalled"``) without a series per object.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from zkop.runtime.cache import Indexer

__all__ = ["ZooKeeperConfigStatusCollector"]

STATES = ("Pending", "Synced", "Error", "OutOfSync")


class ZooKeeperConfigStatusCollector(Collector):
    """A Prometheus collector over the ZooKeeperConfig cache (no API call at scrape time)."""

    def __init__(self, cache: Indexer) -> None:
        self.cache = cache

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """Yield the two gauge families."""
        states: Counter[str] = Counter()
        conditions: Counter[tuple[str, str]] = Counter()
        for obj in self.cache.list():
            status = obj.get("status") or {}
            states[str(status.get("state") or "Pending")] += 1
            for condition in status.get("conditions") or []:
                conditions[(str(condition.get("type")), str(condition.get("status")))] += 1
        by_state = GaugeMetricFamily("zkop_zookeeperconfigs", "ZooKeeperConfig objects by status.state.",
                                     labels=["state"])
        for state in sorted(set(STATES) | set(states)):
            by_state.add_metric([state], states.get(state, 0))
        yield by_state
        by_condition = GaugeMetricFamily("zkop_zookeeperconfig_condition",
                                         "ZooKeeperConfig objects by condition type and status.",
                                         labels=["type", "status"])
        for type_ in ("Ready", "Reconciling", "Stalled"):
            for value in ("True", "False"):
                by_condition.add_metric([type_, value], conditions.get((type_, value), 0))
        yield by_condition
