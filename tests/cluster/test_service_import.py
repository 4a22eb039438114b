"""The service importer end to end on a real control plane, as zkop's ServiceAccount: ZooKeeper → Services + slices.

The importer runs in-process (``build_service_importer`` through the Manager, as ``zkop run`` wires it) on
a client that authenticates as ``zkop-system/zkop`` under the RBAC of ``manifests/components/service-import``,
and once as ``zkop run --import-services`` in its own process. The "legacy applications" register through
their own kazoo sessions, so ephemeral instances vanish when those close.

What the real control plane decides here: the selector-less Service's defaults (``clusterIP`` from
``10.0.0.0/24``, ``ipFamilies``, ``sessionAffinity``, ``internalTrafficPolicy``: a resync that compared
them would write every time), EndpointSlice validation, and two controllers of kube-controller-manager:
the **EndpointSlice mirroring controller** mirrors only core/v1 Endpoints of selector-less Services into
slices it labels ``endpointslice.kubernetes.io/managed-by: endpointslicemirroring-controller.k8s.io``;
zkop writes EndpointSlices itself (``managed-by: zkop``) and no Endpoints, so it neither touches zkop's
slices nor adds any (consumers of the deprecated Endpoints API do not see imported endpoints). The
**garbage collector** deletes zkop's slices with their Service (``ownerReferences``, ``controller: true``)
and strips the reference on an orphaning delete; zkop puts the reference back on the next reconcile.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import pytest
from cluster_support import ServiceAccountClients
from kazoo.client import KazooClient
from zkop_testing.metrics import Metrics
from zkop_testing.operator import OperatorProcess
from zkop_testing.services import (
    children,
    curator_instance,
    endpoints,
    events,
    full_sync_and_wait,
    get_service,
    idle,
    register,
    running_bridge,
    running_importer,
    sample,
    services_in,
    settled,
    slices_of,
    versions,
    writes,
)
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper import ZooKeeperServer, expire_session

from zkop.kube.client import ApiException, KubeClient, resource_path
from zkop.services.bridge.options import BridgeOptions
from zkop.services.importer.options import ImportOptions
from zkop.zookeeper.adapter import ZooKeeperAdapter

GC_DELAY = 0.2  # seconds from a service vanishing to the full sync that collects it
MIRRORED_BY = "endpointslicemirroring-controller.k8s.io"


def options(namespace: str, **more: Any) -> ImportOptions:
    """The importer's options for this test's namespace."""
    return ImportOptions(namespace=namespace, gc_delay=GC_DELAY, **more)


@pytest.fixture
def app(zk_server: ZooKeeperServer, zk_base: str) -> Iterator[KazooClient]:
    """A legacy application with a session of its own (chrooted at ``zk_base``); the test may stop it."""
    client = KazooClient(hosts=f"{zk_server.hosts}{zk_base}")
    client.start(timeout=EVENTUALLY)
    yield client
    client.stop()
    client.close()


def test_curator_instances_come_and_go_as_endpoints(
        zkop_clients: ServiceAccountClients, kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter,
        chrooted: KazooClient, app: KazooClient) -> None:
    ns = namespace
    with running_importer(zkop_clients, adapter, options(ns)) as importer:
        settled(importer)
        register(chrooted, "orders", "i1", "10.1.0.1", ephemeral=False)
        wait_for(lambda: endpoints(kube, "orders", ns) == {"10.1.0.1": True}, message="first instance imported")
        register(app, "orders", "i2", "10.1.0.2")  # DYNAMIC: ephemeral, as Curator writes it
        wait_for(lambda: endpoints(kube, "orders", ns) == {"10.1.0.1": True, "10.1.0.2": True},
                 message="ephemeral instance imported")

        service = get_service(kube, "orders", ns) or {}
        meta, spec = service["metadata"], service["spec"]
        assert meta["labels"]["platform.example.com/imported-from-zookeeper"] == "true"
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "zkop"
        assert meta["annotations"]["platform.example.com/zookeeper-path"] == "/services/orders"
        assert meta["annotations"]["platform.example.com/imported-by"] == "zkop/test"
        assert spec["type"] == "ClusterIP" and "selector" not in spec
        assert spec["clusterIP"].startswith("10.0.0.") and spec["ipFamilies"] == ["IPv4"]
        assert spec["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP", "targetPort": 8080}]
        (item,) = slices_of(kube, "orders", ns)
        assert item["metadata"]["name"] == "orders-zkop-ipv4" and item["addressType"] == "IPv4"
        assert item["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == "zkop"
        assert item["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Service", "name": "orders",
                                                        "uid": meta["uid"], "controller": True}]
        assert item["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
        assert events(kube, "Imported", ns)

        # Instance data changes: disabled (CURATOR-275), then re-registered at another address.
        chrooted.set("/services/orders/i1", curator_instance("orders", "i1", "10.1.0.1", enabled=False))
        wait_for(lambda: endpoints(kube, "orders", ns) == {"10.1.0.1": False, "10.1.0.2": True},
                 message="disabled instance listed as not ready")
        chrooted.set("/services/orders/i1", curator_instance("orders", "i1", "10.1.0.11"))
        wait_for(lambda: endpoints(kube, "orders", ns) == {"10.1.0.11": True, "10.1.0.2": True},
                 message="changed address")

        # The application's session closes: ZooKeeper deletes its ephemeral instance.
        app.stop()
        wait_for(lambda: endpoints(kube, "orders", ns) == {"10.1.0.11": True},
                 message="ephemeral instance gone with its session")
        chrooted.delete("/services/orders/i1")
        wait_for(lambda: endpoints(kube, "orders", ns) == {}, message="deregistered")
        # The service node is still registered: the Service stays, without endpoints.
        assert get_service(kube, "orders", ns) is not None and slices_of(kube, "orders", ns) == []

        # A resync (full sync: every service re-read) writes nothing, though the server defaulted fields.
        register(chrooted, "orders", "i3", "10.1.0.3", ephemeral=False)
        wait_for(lambda: endpoints(kube, "orders", ns) == {"10.1.0.3": True}, message="i3")
        full_sync_and_wait(importer)
        before, count = versions(kube, "orders", ns), writes()
        full_sync_and_wait(importer)
        assert versions(kube, "orders", ns) == before and writes() == count


def test_a_foreign_service_of_the_same_name_is_left_alone(
        zkop_clients: ServiceAccountClients, kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter,
        chrooted: KazooClient) -> None:
    """The foreign Service has a selector; the plane runs no EndpointSlice controller, so it has no slices."""
    ns = namespace
    foreign = kube.request("POST", resource_path("", "v1", "services", ns), body={
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "orders", "labels": {"team": "shop"}},
        "spec": {"selector": {"app": "orders"}, "ports": [{"name": "web", "port": 80, "targetPort": 8080}]}})
    register(chrooted, "orders", "i1", "10.1.0.1", ephemeral=False)
    register(chrooted, "billing", "i1", "10.1.0.9", ephemeral=False)
    with running_importer(zkop_clients, adapter, options(ns)) as importer:
        wait_for(lambda: endpoints(kube, "billing", ns) == {"10.1.0.9": True}, message="billing imported")
        wait_for(lambda: events(kube, "ImportConflict", ns), message="conflict reported")
        (event,) = events(kube, "ImportConflict", ns)
        assert event["type"] == "Warning" and event["involvedObject"]["uid"] == foreign["metadata"]["uid"]
        assert "/services/orders" in event["message"]
        full_sync_and_wait(importer)
        current = get_service(kube, "orders", ns) or {}
        assert current["metadata"]["resourceVersion"] == foreign["metadata"]["resourceVersion"]
        assert current["metadata"]["labels"] == {"team": "shop"} and "annotations" not in current["metadata"]
        assert current["spec"]["selector"] == {"app": "orders"}
        assert slices_of(kube, "orders", ns) == []  # no imported endpoint attaches to someone else's Service
        assert len(events(kube, "ImportConflict", ns)) == 1  # reported once
        assert sample("zkop_service_import_services", {"state": "foreign"}) == 1

        # The owner deletes it: the name is free, the ZooKeeper service is imported.
        kube.request("DELETE", resource_path("", "v1", "services", ns, "orders"))
        wait_for(lambda: endpoints(kube, "orders", ns) == {"10.1.0.1": True}, message="taken over")
        assert (get_service(kube, "orders", ns) or {})["metadata"]["labels"][
            "platform.example.com/imported-from-zookeeper"] == "true"


def test_forward_and_reverse_bridges_together_do_not_loop(
        zkop_clients: ServiceAccountClients, kube: KubeClient, namespace: str, new_namespace: Callable[[], str],
        adapter: ZooKeeperAdapter, chrooted: KazooClient) -> None:
    """Both directions on one ZooKeeper root (``/services``, Curator format, flat layout): the bridge
    publishes Kubernetes Services as ``/services/<namespace>-<name>``, the importer imports
    ``/services/<name>`` into this test's namespace, which the bridge watches too. Neither picks up what
    the other wrote."""
    legacy, apps = namespace, new_namespace()
    bridge_options = BridgeOptions(root="/services", format="curator", namespaces=(legacy, apps), gc_delay=GC_DELAY)
    register(chrooted, "orders", "i1", "10.1.0.1", ephemeral=False)

    def bridge_writes() -> float:
        return sum(sample("zkop_service_bridge_writes_total", {"operation": o}) for o in ("create", "update"))

    with running_bridge(zkop_clients, adapter, bridge_options) as bridge, \
            running_importer(zkop_clients, adapter, options(legacy)) as importer:
        kube.request("POST", resource_path("", "v1", "services", apps), body={
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]}})
        wait_for(lambda: children(chrooted, f"/services/{apps}-web"), message="web exported")
        wait_for(lambda: endpoints(kube, "orders", legacy) == {"10.1.0.1": True}, message="orders imported")
        for _ in range(2):  # a full round in each direction, twice
            bridge.request_full_sync()
            full_sync_and_wait(importer)
        wait_for(lambda: len(bridge.controller.queue) == 0, message="bridge queue drained")
        exported, imports = bridge_writes(), writes()

        # The importer did not import what the bridge wrote; the bridge did not export what the importer created.
        assert services_in(kube, legacy) == {"orders"}
        assert children(chrooted, "/services") == {"orders", f"{apps}-web"}
        assert "imported-by" not in json.dumps(get_service(kube, "web", apps))
        # And it stays that way: another round changes nothing on either side.
        bridge.request_full_sync()
        full_sync_and_wait(importer)
        wait_for(lambda: len(bridge.controller.queue) == 0, message="bridge queue drained")
        assert bridge_writes() == exported and writes() == imports
        assert services_in(kube, legacy) == {"orders"}
        assert children(chrooted, "/services") == {"orders", f"{apps}-web"}


def test_restart_after_zookeeper_side_deletions_cleans_up(
        zkop_clients: ServiceAccountClients, kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter,
        chrooted: KazooClient) -> None:
    ns = namespace
    for name, address in (("a", "10.1.0.1"), ("b", "10.1.0.2"), ("c", "10.1.0.3")):
        register(chrooted, name, "i1", address, ephemeral=False)
    with running_importer(zkop_clients, adapter, options(ns)):
        wait_for(lambda: all(endpoints(kube, n, ns) for n in "abc"), message="a, b, c imported")
    kept = {n: versions(kube, n, ns) for n in "ac"}
    kube.request("POST", resource_path("", "v1", "services", ns), body={
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "hand-made"}, "spec": {"ports": [{"port": 80}]}})
    # zkop is down; b is removed from ZooKeeper.
    chrooted.delete("/services/b", recursive=True)
    with running_importer(zkop_clients, adapter, options(ns)) as importer:
        wait_for(lambda: get_service(kube, "b", ns) is None and not slices_of(kube, "b", ns), message="b collected")
        full_sync_and_wait(importer)
        assert services_in(kube, ns) == {"a", "c", "hand-made"}
        assert {n: versions(kube, n, ns) for n in "ac"} == kept  # untouched: not even rewritten

    # zkop is down again; this time everything goes (say, a wrong chroot): the breaker holds.
    chrooted.delete("/services", recursive=True)
    with running_importer(zkop_clients, adapter, options(ns, max_deletes=1)) as importer:
        settled(importer)
        assert importer.reconciler.breaker_open
        assert sample("zkop_service_import_delete_circuit_breaker_open") == 1
        assert sample("zkop_service_import_services", {"state": "orphaned"}) == 2
        # Not about an object of the namespace: about zkop's Pod, here (no POD_NAME) Namespace default.
        wait_for(lambda: [e for e in events(kube, "DeleteCircuitBreakerOpen", "default") if ns in e["message"]],
                 message="breaker Event")
        assert services_in(kube, ns) == {"a", "c", "hand-made"}
        # a comes back: one orphan left, within the limit: collected, the breaker closes.
        register(chrooted, "a", "i1", "10.1.0.1", ephemeral=False)
        wait_for(lambda: endpoints(kube, "a", ns) == {"10.1.0.1": True}, message="a back")
        importer.request_full_sync()
        wait_for(lambda: get_service(kube, "c", ns) is None, message="c collected")
        assert not importer.reconciler.breaker_open
        assert services_in(kube, ns) == {"a", "hand-made"}


def test_name_collision_the_older_znode_wins(
        zkop_clients: ServiceAccountClients, kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter,
        chrooted: KazooClient) -> None:
    ns = namespace
    register(chrooted, "orders", "i1", "10.2.0.1", ephemeral=False)
    register(chrooted, "Orders", "i1", "10.2.0.2", ephemeral=False)
    with running_importer(zkop_clients, adapter, options(ns)):
        wait_for(lambda: endpoints(kube, "orders", ns) == {"10.2.0.1": True}, message="older imported")
        wait_for(lambda: events(kube, "ImportCollision", ns), message="collision reported")
        (event,) = events(kube, "ImportCollision", ns)
        assert "/services/Orders" in event["message"] and event["involvedObject"]["name"] == "orders"
        chrooted.delete("/services/orders", recursive=True)
        wait_for(lambda: endpoints(kube, "orders", ns) == {"10.2.0.2": True}, message="the other takes over")
        service = get_service(kube, "orders", ns) or {}
        assert service["metadata"]["annotations"]["platform.example.com/zookeeper-path"] == "/services/Orders"


def test_watches_are_rearmed_after_the_importers_session_is_lost(
        zkop_clients: ServiceAccountClients, kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter,
        chrooted: KazooClient, zk_server: ZooKeeperServer, zk_base: str) -> None:
    """Every watch dies with the session; the re-read after the new session arms them again (the
    full sync, 30 s away here, is not what brings these changes in)."""
    ns = namespace
    register(chrooted, "orders", "i1", "10.1.0.1", ephemeral=False)
    with running_importer(zkop_clients, adapter, options(ns)) as importer:
        wait_for(lambda: endpoints(kube, "orders", ns) == {"10.1.0.1": True}, message="imported")
        settled(importer)
        states: list[str] = []
        adapter.add_session_listener(states.append)  # after running_importer's: hears CONNECTED after it
        expire_session(adapter.client, f"{zk_server.hosts}{zk_base}")
        # The new session heard: on_session_reconnected has queued the re-reads; idle waits them out.
        wait_for(lambda: any(s in ("LOST", "SUSPENDED") and "CONNECTED" in states[i + 1:]
                             for i, s in enumerate(states)), message="the new session heard")
        idle(importer)
        register(chrooted, "orders", "i2", "10.1.0.2", ephemeral=False)  # child watch
        chrooted.set("/services/orders/i1", curator_instance("orders", "i1", "10.1.0.1", enabled=False))  # data watch
        register(chrooted, "billing", "i1", "10.1.0.9", ephemeral=False)  # root child watch
        wait_for(lambda: endpoints(kube, "orders", ns) == {"10.1.0.1": False, "10.1.0.2": True},
                 message="changes after the new session")
        wait_for(lambda: endpoints(kube, "billing", ns) == {"10.1.0.9": True}, message="new service")


def test_dubbo_providers_and_json_records(zkop_clients: ServiceAccountClients, kube: KubeClient, namespace: str,
                                          new_namespace: Callable[[], str], adapter: ZooKeeperAdapter,
                                          chrooted: KazooClient) -> None:
    """Two importers at once, as two ``zkop run`` flags would: Dubbo providers, and the original bridge
    script's JSON records (with a name prefix) into a second namespace."""
    ns, imported = namespace, new_namespace()
    interface = "org.apache.dubbo.demo.DemoService"
    providers = f"/dubbo/{quote(interface, safe='')}/providers"
    url = (f"dubbo://10.20.0.5:20880/{interface}?anyhost=true&application=demo-provider&interface={interface}"
           "&methods=sayHello&side=provider&timestamp=1700000000000")
    chrooted.create(f"{providers}/{quote(url, safe='')}", ephemeral=True, makepath=True)
    chrooted.ensure_path(f"/dubbo/{quote(interface, safe='')}/consumers")
    root = "/kubernetes/services"
    record: dict[str, Any] = {"clusterIP": "10.50.0.7", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}
    chrooted.create(f"{root}/shop-cart", json.dumps(record).encode(), makepath=True)
    name = "org-apache-dubbo-demo-demoservice"
    with running_importer(zkop_clients, adapter, options(ns, format="dubbo", root="/dubbo")), \
            running_importer(zkop_clients, adapter, options(imported, format="json", root=root, prefix="zk-")):
        wait_for(lambda: endpoints(kube, name, ns) == {"10.20.0.5": True}, message="provider imported")
        assert (get_service(kube, name, ns) or {})["spec"]["ports"] == [
            {"name": "dubbo", "port": 20880, "protocol": "TCP", "targetPort": 20880}]
        second = url.replace("10.20.0.5", "10.20.0.6") + "&disabled=true"
        chrooted.create(f"{providers}/{quote(second, safe='')}", ephemeral=True)
        wait_for(lambda: endpoints(kube, name, ns) == {"10.20.0.5": True, "10.20.0.6": False},
                 message="second provider, disabled")
        chrooted.delete(f"{providers}/{quote(url, safe='')}")
        wait_for(lambda: endpoints(kube, name, ns) == {"10.20.0.6": False}, message="provider gone")

        wait_for(lambda: endpoints(kube, "zk-shop-cart", imported) == {"10.50.0.7": True}, message="record imported")
        chrooted.set(f"{root}/shop-cart", json.dumps({**record, "clusterIP": "10.50.0.8"}).encode())
        wait_for(lambda: endpoints(kube, "zk-shop-cart", imported) == {"10.50.0.8": True}, message="record change")


def _mirrored(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kube.request(
        "GET", resource_path("discovery.k8s.io", "v1", "endpointslices", namespace),
        query={"labelSelector": f"endpointslice.kubernetes.io/managed-by={MIRRORED_BY}"})["items"]
    return items


def test_the_mirroring_controller_and_the_garbage_collector_on_imported_services(
        zkop_clients: ServiceAccountClients, kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter,
        chrooted: KazooClient) -> None:
    ns = namespace
    register(chrooted, "orders", "i1", "10.1.0.1", ephemeral=False)
    with running_importer(zkop_clients, adapter, options(ns)):
        wait_for(lambda: endpoints(kube, "orders", ns) == {"10.1.0.1": True}, message="imported")
    first = versions(kube, "orders", ns)
    uid = (get_service(kube, "orders", ns) or {})["metadata"]["uid"]

    # EndpointSlice mirroring is running: a selector-less Service with a hand-made Endpoints is mirrored.
    kube.request("POST", resource_path("", "v1", "services", ns), body={
        "metadata": {"name": "control"}, "spec": {"ports": [{"name": "http", "port": 80}]}})
    kube.request("POST", resource_path("", "v1", "endpoints", ns), body={
        "metadata": {"name": "control"},
        "subsets": [{"addresses": [{"ip": "10.9.0.1"}], "ports": [{"name": "http", "port": 80}]}]})
    mirrored = wait_for(lambda: _mirrored(kube, ns), message="the control Endpoints mirrored into a slice")
    assert [m["metadata"]["labels"]["kubernetes.io/service-name"] for m in mirrored] == ["control"]
    # … and it mirrored nothing for the imported Service (zkop writes no Endpoints) nor touched zkop's slice.
    with pytest.raises(ApiException) as missing:
        kube.request("GET", resource_path("", "v1", "endpoints", ns, "orders"))
    assert missing.value.status == 404
    assert versions(kube, "orders", ns) == first

    # zkop is down. An orphaning delete: the garbage collector strips the slice's ownerReference.
    kube.request("DELETE", resource_path("", "v1", "services", ns, "orders"),
                 body={"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Orphan"})

    def orphaned() -> bool:
        (item,) = slices_of(kube, "orders", ns)
        return not item["metadata"].get("ownerReferences") and get_service(kube, "orders", ns) is None

    wait_for(orphaned, message="the slice orphaned by the garbage collector")
    with running_importer(zkop_clients, adapter, options(ns)) as importer:
        def adopted() -> str | None:
            service = get_service(kube, "orders", ns)
            refs = [r["uid"] for s in slices_of(kube, "orders", ns) for r in s["metadata"].get("ownerReferences", [])]
            return service["metadata"]["uid"] if service and refs == [service["metadata"]["uid"]] else None

        second_uid = wait_for(adopted, message="the Service re-created and its slice owned by it again")
        assert second_uid != uid and endpoints(kube, "orders", ns) == {"10.1.0.1": True}
        full_sync_and_wait(importer)

    # zkop is down again. A plain (background) delete: the garbage collector deletes the slice with it.
    kube.request("DELETE", resource_path("", "v1", "services", ns, "orders"))
    wait_for(lambda: slices_of(kube, "orders", ns) == [], message="the slice deleted with its Service")
    with running_importer(zkop_clients, adapter, options(ns)):
        wait_for(lambda: endpoints(kube, "orders", ns) == {"10.1.0.1": True}, message="imported again")


def test_zkop_run_with_import_services(zkop_kubeconfig: str, kube: KubeClient, namespace: str,
                                       zk_server: ZooKeeperServer, chrooted: KazooClient, zk_base: str) -> None:
    """The flags as users give them: ``zkop run --import-services`` in its own process, as its ServiceAccount."""
    ns = namespace
    register(chrooted, "payments", "i1", "10.3.0.1", ephemeral=False)
    args = ["--namespace", ns, "--import-services", "--import-namespace", ns, "--cluster-id", "prod",
            "--sync-period", "5"]
    with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        wait_for(lambda: endpoints(kube, "payments", ns) == {"10.3.0.1": True}, message="imported")
        service = get_service(kube, "payments", ns) or {}
        assert service["metadata"]["annotations"]["platform.example.com/imported-by"] == "zkop/prod"
        register(chrooted, "payments", "i2", "10.3.0.2")
        wait_for(lambda: endpoints(kube, "payments", ns) == {"10.3.0.1": True, "10.3.0.2": True},
                 message="second instance")
        chrooted.delete("/services/payments", recursive=True)
        wait_for(lambda: get_service(kube, "payments", ns) is None and not slices_of(kube, "payments", ns),
                 message="collected")
        # Imported, updated, collected: three successful reconciles (the series exists at 0 from start-up).
        wait_for(lambda: Metrics(proc.metrics()).reconciles("service-import") >= 3,
                 message="three successful service-import reconciles counted")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()


def test_a_registration_cannot_aim_a_service_at_the_control_plane(
        zkop_clients: ServiceAccountClients, kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter,
        chrooted: KazooClient) -> None:
    """kube-apiserver accepts the ``kubernetes`` Service's ClusterIP and its own addresses in a slice; zkop does not."""
    ns = namespace
    cluster_ip = str((get_service(kube, "kubernetes", "default") or {})["spec"]["clusterIP"])
    # The plane runs --endpoint-reconciler-type=none (its address is loopback): the slice a real kube-apiserver
    # keeps of its own addresses, written here as its endpoint reconciler would.
    apiserver_address = "192.0.2.250"
    slices = resource_path("discovery.k8s.io", "v1", "endpointslices", "default")
    kube.request("POST", slices, body={
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "kubernetes", "labels": {"kubernetes.io/service-name": "kubernetes"}},
        "addressType": "IPv4", "endpoints": [{"addresses": [apiserver_address], "conditions": {"ready": True}}],
        "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]})
    try:
        allowed = ("10.0.0.0/8", "192.0.2.0/24", "fd00::/8")
        with running_importer(zkop_clients, adapter, options(ns, allowed_cidrs=allowed)) as importer:
            settled(importer)
            refused = {"cluster-ip": (cluster_ip, "service-range"), "second-range": ("fd00:10:96::1", "service-range"),
                       "apiserver": (apiserver_address, "apiserver"), "outside": ("203.0.113.5", "not-allowed")}
            register(chrooted, "orders", "fine", "10.1.0.1", ephemeral=False)  # first: the Events go to its Service
            wait_for(lambda: endpoints(kube, "orders", ns) == {"10.1.0.1": True}, message="allowed address imported")
            for instance, (address, _) in refused.items():
                register(chrooted, "orders", instance, address, ephemeral=False)

            def skipped() -> set[tuple[str, str]]:
                text = " ".join(str(e.get("message")) for e in events(kube, "InstanceSkipped", ns))
                return {(i, why) for i, (_, why) in refused.items() if f"/services/orders/{i} ({why}:" in text}

            wait_for(lambda: skipped() == {(i, why) for i, (_, why) in refused.items()},
                     message="every refused address reported")
            idle(importer)
            assert endpoints(kube, "orders", ns) == {"10.1.0.1": True}
    finally:
        kube.request("DELETE", resource_path("discovery.k8s.io", "v1", "endpointslices", "default", "kubernetes"))
