"""One owner per znode across zkop: the service bridge claims its records in the ownership registry.

The bridge runs in-process on a real kube-apiserver as zkop's ServiceAccount (``running_bridge``), against a
real ZooKeeper; the registry is at its default root (``/zkop/owners``) inside the test's chroot, and a
ZooKeeperConfig's claim is written there exactly as the ZooKeeperConfig reconciler writes it
(``OwnerStamp.to_bytes``).
"""

from __future__ import annotations

from typing import Any

from cluster_support import ServiceAccountClients
from kazoo.client import KazooClient
from zkop_testing.services import BRIDGE_ROOT as ROOT
from zkop_testing.services import events, record, running_bridge, svc
from zkop_testing.waiting import wait_for

from zkop.kube.client import KubeClient, resource_path
from zkop.ownership.registry import DEFAULT_REGISTRY_ROOT, OwnerStamp
from zkop.services.bridge.formats import JsonFormat
from zkop.services.bridge.options import BridgeOptions
from zkop.services.bridge.records import service_record
from zkop.zookeeper.adapter import ZooKeeperAdapter

CLUSTER = "test"  # running_bridge's cluster id
GC_DELAY = 0.2


def create(kube: KubeClient, obj: dict[str, Any]) -> dict[str, Any]:
    """POST a Service; the object as the server stored it."""
    return kube.request("POST", resource_path("", "v1", "services", obj["metadata"]["namespace"]), body=obj)


def claim(zk: KazooClient, zk_base: str, path: str) -> OwnerStamp | None:
    """The stamp in the registry record of the bridge's ``path``; ``None`` if there is none."""
    found = zk.exists(f"{zk_base}{DEFAULT_REGISTRY_ROOT}{path}")
    return OwnerStamp.from_bytes(zk.get(f"{zk_base}{DEFAULT_REGISTRY_ROOT}{path}")[0]) if found else None


def test_a_record_path_a_zookeeperconfig_owns_is_not_written_by_the_bridge(
        zkop_clients: ServiceAccountClients, kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter,
        zk: KazooClient, zk_base: str) -> None:
    ns = namespace
    path = f"{ROOT}/{ns}-web"
    config = OwnerStamp(CLUSTER, ns, "web-flags", "uid-config")  # a ZooKeeperConfig of this very installation
    zk.create(f"{zk_base}{DEFAULT_REGISTRY_ROOT}{path}", config.to_bytes(), makepath=True)
    with running_bridge(zkop_clients, adapter, BridgeOptions(namespaces=(ns,), gc_delay=GC_DELAY)):
        create(kube, svc("web", ns))
        conflict = wait_for(lambda: events(kube, "RecordConflict", ns), message="RecordConflict reported")
    assert conflict[0]["involvedObject"]["name"] == "web" and conflict[0]["type"] == "Warning"
    assert f"owned by {config.describe()}" in conflict[0]["message"]
    assert record(zk, zk_base, f"{ns}-web") is None  # never written
    assert claim(zk, zk_base, path) == config  # the ZooKeeperConfig's claim untouched


def test_the_bridges_record_is_claimed_and_deleting_the_service_removes_record_and_claim(
        zkop_clients: ServiceAccountClients, kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter,
        zk: KazooClient, zk_base: str) -> None:
    ns = namespace
    path = f"{ROOT}/{ns}-web"
    with running_bridge(zkop_clients, adapter, BridgeOptions(namespaces=(ns,), gc_delay=GC_DELAY)):
        uid = create(kube, svc("web", ns))["metadata"]["uid"]
        wait_for(lambda: record(zk, zk_base, f"{ns}-web"), message="published")
        # The claim was written in the same multi as the record: there is no moment with one and not the other.
        assert claim(zk, zk_base, path) == OwnerStamp(CLUSTER, ns, "web", uid, "Service")
        kube.request("DELETE", resource_path("", "v1", "services", ns, "web"))
        wait_for(lambda: record(zk, zk_base, f"{ns}-web") is None, message="record collected")
        assert claim(zk, zk_base, path) is None


def test_a_record_an_older_zkop_published_without_a_claim_is_adopted(
        zkop_clients: ServiceAccountClients, kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter,
        zk: KazooClient, zk_base: str) -> None:
    ns = namespace
    path = f"{ROOT}/{ns}-web"
    options = BridgeOptions(namespaces=(ns,), gc_delay=GC_DELAY)
    obj = create(kube, svc("web", ns))
    fmt = JsonFormat()
    # What an older zkop (records stamped with the cluster id, no registry claim) left: the same bytes.
    [node] = fmt.nodes(service_record(obj, options), fmt.locate(obj, options), CLUSTER)
    zk.create(f"{zk_base}{node.path}", node.data, makepath=True)
    with running_bridge(zkop_clients, adapter, options):
        wait_for(lambda: claim(zk, zk_base, path), message="older record claimed")
    assert claim(zk, zk_base, path) == OwnerStamp(CLUSTER, ns, "web", obj["metadata"]["uid"], "Service")
    data, stat = zk.get(f"{zk_base}{path}")
    assert (data, stat.version) == (node.data, 0)  # adopted as it was, not rewritten
    assert events(kube, "RecordConflict", ns) == []
