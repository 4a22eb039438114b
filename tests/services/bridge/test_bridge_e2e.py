"""The service bridge end to end on the in-memory API server: only what the real control plane cannot be made to do.

Every other end-to-end test of the bridge runs on a real kube-apiserver (``tests/cluster/test_service_bridge.py``).
This one needs the API server to answer a relist with nothing and to drop every watch on demand
(``BlackoutClient`` + ``ApiServer.drop_watches``): kube-apiserver ends a watch only at its timeout.
"""

from __future__ import annotations

from typing import Any

from kazoo.client import KazooClient
from zkop_testing.apiserver import ApiServer
from zkop_testing.services import BRIDGE_ROOT as ROOT
from zkop_testing.services import children, events, running_bridge, sample, svc
from zkop_testing.waiting import wait_for

from zkop.kube.client import ApiException, KubeClient, WatchStream, resource_path
from zkop.services.bridge.options import BridgeOptions
from zkop.zookeeper.adapter import ZooKeeperAdapter

GC_DELAY = 0.2  # seconds from a Service disappearing to the full sync that collects it


def create(kube: KubeClient, obj: dict[str, Any]) -> dict[str, Any]:
    return kube.request("POST", resource_path("", "v1", "services", obj["metadata"]["namespace"]), body=obj)


class BlackoutClient(KubeClient):
    """A client whose Service LISTs come back empty while ``blackout`` is set, and whose next watch
    fails with 410 Gone once :meth:`force_relist` was called (so the reflector relists)."""

    blackout = False
    _relist = False

    def force_relist(self) -> None:
        self._relist = True

    def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        result = super().request(method, path, **kwargs)
        if self.blackout and method == "GET" and path.endswith("/services"):
            result["items"] = []
        return result

    def watch(self, path: str, **kwargs: Any) -> WatchStream:
        if self._relist and path.endswith("/services"):
            self._relist = False
            raise ApiException(status=410, reason="Gone")
        return super().watch(path, **kwargs)


def test_circuit_breaker_holds_when_the_api_suddenly_lists_nothing(
        apiserver: ApiServer, kube: KubeClient, adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    client = BlackoutClient(apiserver.api_client())
    options = BridgeOptions(max_deletes=2, gc_delay=GC_DELAY)
    with running_bridge(apiserver, adapter, options, client=client) as bridge:
        for name in ("a", "b", "c"):
            create(kube, svc(name))
        published = {"default-a", "default-b", "default-c", "default-kubernetes"}
        wait_for(lambda: children(zk, f"{zk_base}{ROOT}") == published, message="published")

        client.blackout = True
        client.force_relist()
        apiserver.drop_watches()
        informer = bridge.informers[0]
        wait_for(lambda: len(informer.indexer) == 0, message="the informer relisted nothing")
        wait_for(lambda: sample("zkop_service_bridge_delete_circuit_breaker_open") == 1,
                 message="breaker open")
        assert set(zk.get_children(f"{zk_base}{ROOT}")) == published
        wait_for(lambda: events(kube, "DeleteCircuitBreakerOpen"), message="breaker Event")

        client.blackout = False
        client.force_relist()
        apiserver.drop_watches()
        wait_for(lambda: len(informer.indexer) == 4, message="the informer relisted everything")
        bridge.request_full_sync()
        wait_for(lambda: sample("zkop_service_bridge_delete_circuit_breaker_open") == 0,
                 message="breaker closed")
        assert set(zk.get_children(f"{zk_base}{ROOT}")) == published
