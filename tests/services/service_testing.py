"""Helpers both directions' tests use: metric samples, the API server fixture's server, the bridge
running as the manager wires it (the importer's loop-prevention tests run it next to the importer)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from prometheus_client import REGISTRY
from zkop_testing.apiserver import ApiServer
from zkop_testing.controllers import running

from zkop.kube.client import KubeClient
from zkop.kube.events import EventRecorder
from zkop.services.bridge.builder import ServiceBridge, build_service_bridge
from zkop.services.bridge.options import BridgeOptions
from zkop.zookeeper.adapter import ZooKeeperAdapter

__all__ = ["running_bridge", "sample"]


def sample(name: str, labels: dict[str, str] | None = None) -> float:
    """The current value of a metric sample (0 if it was never set)."""
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


@contextlib.contextmanager
def running_bridge(apiserver: ApiServer, adapter: ZooKeeperAdapter, options: BridgeOptions, *,
                   cluster_id: str = "test", client: KubeClient | None = None,
                   clock: Callable[[], float] = time.monotonic) -> Iterator[ServiceBridge]:
    """Build the bridge as the manager would, start informers, wait for sync, start the controller.

    ``clock`` (monotonic seconds) drives the endpoint debounce; a test passes one it moves itself.
    """
    client = client or KubeClient(apiserver.api_client())
    recorder = EventRecorder(client, component="zkop")
    recorder.start()
    bridge = build_service_bridge(client, adapter, recorder, options, cluster_id=cluster_id, resync_period=30.0,
                                  inactivity_timeout=10.0, clock=clock)
    try:
        with running(bridge.informers, bridge.controllers):
            yield bridge
    finally:
        recorder.stop()
        client.close()
