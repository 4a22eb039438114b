"""The importer end to end: real ZooKeeper, the in-memory API server, and the importer's real informers,
watches and controller (``build_service_importer``, as the manager wires it).

The importer's adapter is chrooted at the test's ``zk_base``; the "legacy applications" register
through their own kazoo sessions (``chrooted``), so ephemeral instances vanish when those close.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from kazoo.client import KazooClient
from service_testing import running_bridge
from zkop_testing.apiserver import ApiServer
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper import ZooKeeperServer, expire_session

from zkop.kube.client import KubeClient, resource_path
from zkop.services.bridge.options import BridgeOptions
from zkop.services.importer.builder import ServiceImporter
from zkop.services.importer.options import ImportOptions
from zkop.zookeeper.adapter import ZooKeeperAdapter

from .conftest import (
    GC_DELAY,
    NAMESPACE,
    create_namespace,
    curator_instance,
    endpoints,
    events,
    get_service,
    register,
    running_importer,
    sample,
    services_in,
    slices_of,
)

OPTIONS = ImportOptions(namespace=NAMESPACE, gc_delay=GC_DELAY)
#: How long a test waits for a registration change to reach the EndpointSlices: generous, only to stop waiting.
#: The importer polls nothing (a full sync runs only GC_DELAY after a service vanished), so a change that arrives
#: came through a watch; how fast it arrives is the benchmark's business, not a test's.
CHANGE = 30.0


def settled(importer: ServiceImporter) -> None:
    """Wait for the first full sync (the initial listing and garbage collection) to have run."""
    wait_for(lambda: importer.reconciler.last_gc is not None, message="first full sync")


def idle(importer: ServiceImporter) -> None:
    """Wait until no key of the importer's queue waits for pickup and none is being reconciled.

    Reads the queue's own ``queue`` and ``processing`` sets under its lock (client-go's
    ``Type.queue``/``processing``): a key is in one of them from ``add`` to ``done``, so no moment
    between them looks idle (``controller_runtime_active_workers`` counts a key only after the
    worker took it, and not while its requeue is added). Keys waiting in ``add_after`` do not count.
    """
    queue = importer.controller.queue

    def quiet() -> bool:
        with queue._cond:
            return not queue._queue and not queue._processing

    wait_for(quiet, message="importer idle")


def full_sync_and_wait(importer: ServiceImporter) -> None:
    """Run a full sync now and wait until it and the reconciles it enqueued are done."""
    before = sample("zkop_service_import_last_full_sync_timestamp_seconds")
    importer.request_full_sync()
    wait_for(lambda: sample("zkop_service_import_last_full_sync_timestamp_seconds") > before,
             message="full sync completed")
    idle(importer)


def writes() -> float:
    return sum(sample("zkop_service_import_writes_total", {"resource": r, "operation": o})
               for r in ("services", "endpointslices") for o in ("create", "update")) + sum(
        sample("zkop_service_import_deletes_total", {"resource": r}) for r in ("services", "endpointslices"))


def versions(kube: KubeClient, name: str) -> dict[str, str]:
    found = {f"svc/{name}": str((get_service(kube, name) or {}).get("metadata", {}).get("resourceVersion"))}
    for item in slices_of(kube, name):
        found[str(item["metadata"]["name"])] = str(item["metadata"]["resourceVersion"])
    return found


def test_curator_instances_come_and_go_as_endpoints(
        apiserver: ApiServer, kube: KubeClient, adapter: ZooKeeperAdapter, chrooted: KazooClient,
        zk_server: ZooKeeperServer, zk_base: str) -> None:
    app = KazooClient(hosts=f"{zk_server.hosts}{zk_base}")  # a legacy application with its own session
    app.start(timeout=EVENTUALLY)
    try:
        with running_importer(apiserver, adapter, OPTIONS) as importer:
            settled(importer)
            register(chrooted, "orders", "i1", "10.1.0.1", ephemeral=False)
            wait_for(lambda: endpoints(kube, "orders") == {"10.1.0.1": True}, timeout=CHANGE,
                     message="first instance imported")
            register(app, "orders", "i2", "10.1.0.2")  # DYNAMIC: ephemeral, as Curator writes it
            wait_for(lambda: endpoints(kube, "orders") == {"10.1.0.1": True, "10.1.0.2": True}, timeout=CHANGE,
                     message="ephemeral instance imported")

            service = get_service(kube, "orders") or {}
            meta, spec = service["metadata"], service["spec"]
            assert meta["labels"]["platform.example.com/imported-from-zookeeper"] == "true"
            assert meta["labels"]["app.kubernetes.io/managed-by"] == "zkop"
            assert meta["annotations"]["platform.example.com/zookeeper-path"] == "/services/orders"
            assert meta["annotations"]["platform.example.com/imported-by"] == "zkop/test"
            assert spec["type"] == "ClusterIP" and "selector" not in spec
            assert spec["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP", "targetPort": 8080}]
            (item,) = slices_of(kube, "orders")
            assert item["metadata"]["name"] == "orders-zkop-ipv4" and item["addressType"] == "IPv4"
            assert item["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == "zkop"
            assert item["metadata"]["ownerReferences"][0]["uid"] == meta["uid"]
            assert item["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
            assert events(kube, "Imported")

            # Instance data changes: disabled (CURATOR-275), then re-registered at another address.
            chrooted.set("/services/orders/i1", curator_instance("orders", "i1", "10.1.0.1", enabled=False))
            wait_for(lambda: endpoints(kube, "orders") == {"10.1.0.1": False, "10.1.0.2": True}, timeout=CHANGE,
                     message="disabled instance listed as not ready")
            chrooted.set("/services/orders/i1", curator_instance("orders", "i1", "10.1.0.11"))
            wait_for(lambda: endpoints(kube, "orders") == {"10.1.0.11": True, "10.1.0.2": True}, timeout=CHANGE,
                     message="changed address")

            # The application's session closes: ZooKeeper deletes its ephemeral instance.
            app.stop()
            wait_for(lambda: endpoints(kube, "orders") == {"10.1.0.11": True}, timeout=CHANGE,
                     message="ephemeral instance gone with its session")
            chrooted.delete("/services/orders/i1")
            wait_for(lambda: endpoints(kube, "orders") == {}, timeout=CHANGE, message="deregistered")
            # The service node is still registered: the Service stays, without endpoints.
            assert get_service(kube, "orders") is not None and slices_of(kube, "orders") == []

            # A resync (full sync: every service re-read) writes nothing.
            register(chrooted, "orders", "i3", "10.1.0.3", ephemeral=False)
            wait_for(lambda: endpoints(kube, "orders") == {"10.1.0.3": True}, timeout=CHANGE, message="i3")
            full_sync_and_wait(importer)
            before, count = versions(kube, "orders"), writes()
            full_sync_and_wait(importer)
            assert versions(kube, "orders") == before and writes() == count
    finally:
        app.stop()
        app.close()


def test_a_foreign_service_of_the_same_name_is_left_alone(
        apiserver: ApiServer, kube: KubeClient, adapter: ZooKeeperAdapter, chrooted: KazooClient) -> None:
    foreign = kube.request("POST", resource_path("", "v1", "services", NAMESPACE), body={
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "orders", "labels": {"team": "shop"}},
        "spec": {"selector": {"app": "orders"}, "ports": [{"name": "web", "port": 80, "targetPort": 8080}]}})
    register(chrooted, "orders", "i1", "10.1.0.1", ephemeral=False)
    register(chrooted, "billing", "i1", "10.1.0.9", ephemeral=False)
    with running_importer(apiserver, adapter, OPTIONS) as importer:
        wait_for(lambda: endpoints(kube, "billing") == {"10.1.0.9": True}, message="billing imported")
        wait_for(lambda: events(kube, "ImportConflict"), message="conflict reported")
        (event,) = events(kube, "ImportConflict")
        assert event["type"] == "Warning" and event["involvedObject"]["uid"] == foreign["metadata"]["uid"]
        assert "/services/orders" in event["message"]
        full_sync_and_wait(importer)
        current = get_service(kube, "orders") or {}
        assert current["metadata"]["resourceVersion"] == foreign["metadata"]["resourceVersion"]
        assert current["metadata"]["labels"] == {"team": "shop"} and "annotations" not in current["metadata"]
        assert current["spec"]["selector"] == {"app": "orders"}
        assert slices_of(kube, "orders") == []  # no imported endpoint attaches to someone else's Service
        assert len(events(kube, "ImportConflict")) == 1  # reported once
        assert sample("zkop_service_import_services", {"state": "foreign"}) == 1

        # The owner deletes it: the name is free, the ZooKeeper service is imported.
        kube.request("DELETE", resource_path("", "v1", "services", NAMESPACE, "orders"))
        wait_for(lambda: endpoints(kube, "orders") == {"10.1.0.1": True}, message="taken over")
        assert (get_service(kube, "orders") or {})["metadata"]["labels"][
            "platform.example.com/imported-from-zookeeper"] == "true"


def children(zk: KazooClient, path: str) -> set[str]:
    return set(zk.get_children(path)) if zk.exists(path) else set()


def test_forward_and_reverse_bridges_together_do_not_loop(
        apiserver: ApiServer, kube: KubeClient, adapter: ZooKeeperAdapter, chrooted: KazooClient) -> None:
    """Both directions on one ZooKeeper root (``/services``, Curator format, flat layout): the bridge
    publishes Kubernetes Services as ``/services/<namespace>-<name>``, the importer imports
    ``/services/<name>`` into namespace ``legacy``. Neither picks up what the other wrote."""
    bridge_options = BridgeOptions(root="/services", format="curator", gc_delay=GC_DELAY)
    register(chrooted, "orders", "i1", "10.1.0.1", ephemeral=False)
    with running_bridge(apiserver, adapter, bridge_options) as bridge, \
            running_importer(apiserver, adapter, OPTIONS) as importer:
        kube.request("POST", resource_path("", "v1", "services", "default"), body={
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]}})
        wait_for(lambda: children(chrooted, "/services/default-web"), message="web exported")
        wait_for(lambda: endpoints(kube, "orders") == {"10.1.0.1": True}, message="orders imported")
        for _ in range(2):  # a full round in each direction, twice
            bridge.request_full_sync()
            full_sync_and_wait(importer)
        wait_for(lambda: len(bridge.controller.queue) == 0, message="bridge queue drained")
        bridge_writes = sample("zkop_service_bridge_writes_total", {"operation": "create"}) + sample(
            "zkop_service_bridge_writes_total", {"operation": "update"})
        imports = writes()

        # The importer did not import what the bridge wrote; the bridge did not export what the importer created.
        assert services_in(kube) == {"orders"}
        assert children(chrooted, "/services") == {"orders", "default-web", "default-kubernetes"}
        assert "imported-by" not in json.dumps(get_service(kube, "web", "default"))
        # And it stays that way: another round changes nothing on either side.
        bridge.request_full_sync()
        full_sync_and_wait(importer)
        wait_for(lambda: len(bridge.controller.queue) == 0, message="bridge queue drained")
        assert sample("zkop_service_bridge_writes_total", {"operation": "create"}) + sample(
            "zkop_service_bridge_writes_total", {"operation": "update"}) == bridge_writes
        assert writes() == imports
        assert services_in(kube) == {"orders"}
        assert children(chrooted, "/services") == {"orders", "default-web", "default-kubernetes"}


def test_restart_after_zookeeper_side_deletions_cleans_up(
        apiserver: ApiServer, kube: KubeClient, adapter: ZooKeeperAdapter, chrooted: KazooClient) -> None:
    for name, address in (("a", "10.1.0.1"), ("b", "10.1.0.2"), ("c", "10.1.0.3")):
        register(chrooted, name, "i1", address, ephemeral=False)
    with running_importer(apiserver, adapter, OPTIONS):
        wait_for(lambda: all(endpoints(kube, n) for n in "abc"), message="a, b, c imported")
    kept = {n: versions(kube, n) for n in "ac"}
    kube.request("POST", resource_path("", "v1", "services", NAMESPACE), body={
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "hand-made"},
        "spec": {"ports": [{"port": 80}]}})
    # zkop is down; b is removed from ZooKeeper.
    chrooted.delete("/services/b", recursive=True)
    with running_importer(apiserver, adapter, OPTIONS) as importer:
        wait_for(lambda: get_service(kube, "b") is None and not slices_of(kube, "b"),
                 message="b collected")
        full_sync_and_wait(importer)
        assert services_in(kube) == {"a", "c", "hand-made"}
        assert {n: versions(kube, n) for n in "ac"} == kept  # untouched: not even rewritten

    # zkop is down again; this time everything goes (say, a wrong chroot): the breaker holds.
    chrooted.delete("/services", recursive=True)
    limited = ImportOptions(namespace=NAMESPACE, gc_delay=GC_DELAY, max_deletes=1)
    with running_importer(apiserver, adapter, limited) as importer:
        settled(importer)
        assert importer.reconciler.breaker_open
        assert sample("zkop_service_import_delete_circuit_breaker_open") == 1
        assert sample("zkop_service_import_services", {"state": "orphaned"}) == 2
        wait_for(lambda: events(kube, "DeleteCircuitBreakerOpen"), message="breaker Event")
        assert services_in(kube) == {"a", "c", "hand-made"}
        # a comes back: one orphan left, within the limit: collected, the breaker closes.
        register(chrooted, "a", "i1", "10.1.0.1", ephemeral=False)
        wait_for(lambda: endpoints(kube, "a") == {"10.1.0.1": True}, message="a back")
        importer.request_full_sync()
        wait_for(lambda: get_service(kube, "c") is None, message="c collected")
        assert not importer.reconciler.breaker_open
        assert services_in(kube) == {"a", "hand-made"}


def test_name_collision_the_older_znode_wins(
        apiserver: ApiServer, kube: KubeClient, adapter: ZooKeeperAdapter, chrooted: KazooClient) -> None:
    register(chrooted, "orders", "i1", "10.2.0.1", ephemeral=False)
    register(chrooted, "Orders", "i1", "10.2.0.2", ephemeral=False)
    with running_importer(apiserver, adapter, OPTIONS):
        wait_for(lambda: endpoints(kube, "orders") == {"10.2.0.1": True}, message="older imported")
        wait_for(lambda: events(kube, "ImportCollision"), message="collision reported")
        (event,) = events(kube, "ImportCollision")
        assert "/services/Orders" in event["message"] and event["involvedObject"]["name"] == "orders"
        chrooted.delete("/services/orders", recursive=True)
        wait_for(lambda: endpoints(kube, "orders") == {"10.2.0.2": True}, message="the other takes over")
        service = get_service(kube, "orders") or {}
        assert service["metadata"]["annotations"]["platform.example.com/zookeeper-path"] == "/services/Orders"


def test_watches_are_rearmed_after_the_importers_session_is_lost(
        apiserver: ApiServer, kube: KubeClient, adapter: ZooKeeperAdapter, chrooted: KazooClient,
        zk_server: ZooKeeperServer, zk_base: str) -> None:
    """Every watch dies with the session; the re-read after the new session arms them again (the
    full sync, 30 s away here, is not what brings these changes in)."""
    register(chrooted, "orders", "i1", "10.1.0.1", ephemeral=False)
    with running_importer(apiserver, adapter, OPTIONS) as importer:
        wait_for(lambda: endpoints(kube, "orders") == {"10.1.0.1": True}, message="imported")
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
        wait_for(lambda: endpoints(kube, "orders") == {"10.1.0.1": False, "10.1.0.2": True},
                 message="changes after the new session")
        wait_for(lambda: endpoints(kube, "billing") == {"10.1.0.9": True}, message="new service")


def test_dubbo_providers(apiserver: ApiServer, kube: KubeClient, adapter: ZooKeeperAdapter,
                         chrooted: KazooClient) -> None:
    interface = "org.apache.dubbo.demo.DemoService"
    providers = f"/dubbo/{quote(interface, safe='')}/providers"
    url = (f"dubbo://10.20.0.5:20880/{interface}?anyhost=true&application=demo-provider&interface={interface}"
           "&methods=sayHello&side=provider&timestamp=1700000000000")
    chrooted.create(f"{providers}/{quote(url, safe='')}", ephemeral=True, makepath=True)
    chrooted.ensure_path(f"/dubbo/{quote(interface, safe='')}/consumers")
    options = ImportOptions(namespace=NAMESPACE, format="dubbo", root="/dubbo", gc_delay=GC_DELAY)
    name = "org-apache-dubbo-demo-demoservice"
    with running_importer(apiserver, adapter, options):
        wait_for(lambda: endpoints(kube, name) == {"10.20.0.5": True}, message="provider imported")
        assert (get_service(kube, name) or {})["spec"]["ports"] == [
            {"name": "dubbo", "port": 20880, "protocol": "TCP", "targetPort": 20880}]
        second = url.replace("10.20.0.5", "10.20.0.6") + "&disabled=true"
        chrooted.create(f"{providers}/{quote(second, safe='')}", ephemeral=True)
        wait_for(lambda: endpoints(kube, name) == {"10.20.0.5": True, "10.20.0.6": False}, timeout=CHANGE,
                 message="second provider, disabled")
        chrooted.delete(f"{providers}/{quote(url, safe='')}")
        wait_for(lambda: endpoints(kube, name) == {"10.20.0.6": False}, timeout=CHANGE, message="provider gone")


def test_bridge_json_records_of_the_original_script(apiserver: ApiServer, kube: KubeClient, adapter: ZooKeeperAdapter,
                                                    chrooted: KazooClient) -> None:
    root = "/kubernetes/services"
    record: dict[str, Any] = {"clusterIP": "10.50.0.7", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}
    chrooted.create(f"{root}/shop-cart", json.dumps(record).encode(), makepath=True)
    options = ImportOptions(namespace="imported", format="json", root=root, gc_delay=GC_DELAY, prefix="zk-")
    create_namespace(kube, "imported")
    with running_importer(apiserver, adapter, options):
        wait_for(lambda: endpoints(kube, "zk-shop-cart", "imported") == {"10.50.0.7": True},
                 message="record imported")
        chrooted.set(f"{root}/shop-cart", json.dumps({**record, "clusterIP": "10.50.0.8"}).encode())
        wait_for(lambda: endpoints(kube, "zk-shop-cart", "imported") == {"10.50.0.8": True}, timeout=CHANGE,
                 message="record change")
