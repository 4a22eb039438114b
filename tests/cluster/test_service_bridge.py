"""The service bridge end to end on a real kube-apiserver, as zkop's ServiceAccount: Services → ZooKeeper records.

The bridge runs in-process (``build_service_bridge`` through the Manager, as ``zkop run`` wires it) on a
client that authenticates as ``zkop-system/zkop`` under the RBAC of ``manifests/components/service-bridge``,
and once as ``zkop run --service-bridge`` in its own process. kube-apiserver decides what the double
imitates elsewhere: ClusterIPs allocated from the plane's service ranges (``10.0.0.0/24``, and
``fd00:10:96::/112`` for dual-stack), NodePorts from 30000-32767, defaulting (``targetPort``, ``protocol``),
the ``/status`` subresource of a LoadBalancer, EndpointSlice validation, second-resolution
``creationTimestamp``. Each test names its own namespaces and limits the bridge to them (the plane is
shared by the session), except where the namespace filters themselves are the subject.

The delete circuit breaker's test stays on the double (``tests/services/bridge/test_bridge_e2e.py``): it
needs the API server to answer a relist with nothing and to drop every watch on demand.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from cluster_support import ServiceAccountClients
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from zkop_testing.controlplane import REPO
from zkop_testing.operator import OperatorProcess
from zkop_testing.services import BRIDGE_ROOT as ROOT
from zkop_testing.services import children, events, record, running_bridge, sample, svc
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import MERGE_PATCH, KubeClient, resource_path
from zkop.services.bridge import reconciler as bridge_reconciler
from zkop.services.bridge.options import SYNC_ANNOTATION, BridgeOptions
from zkop.services.endpoints import EndpointsView, endpoints_view
from zkop.zookeeper.adapter import ZooKeeperAdapter

GC_DELAY = 0.2  # seconds from a Service disappearing to the full sync that collects it


def create(kube: KubeClient, obj: dict[str, Any]) -> dict[str, Any]:
    """POST a Service or an EndpointSlice into its namespace; the object as the server stored it."""
    namespace = obj["metadata"]["namespace"]
    if obj["kind"] == "EndpointSlice":
        return kube.request("POST", resource_path("discovery.k8s.io", "v1", "endpointslices", namespace), body=obj)
    return kube.request("POST", resource_path("", "v1", "services", namespace), body=obj)


def patch(kube: KubeClient, namespace: str, name: str, body: dict[str, Any],
          subresource: str | None = None) -> dict[str, Any]:
    """Merge-patch a Service (or its ``subresource``)."""
    return kube.request("PATCH", resource_path("", "v1", "services", namespace, name, subresource), body=body,
                        content_type=MERGE_PATCH)


def delete(kube: KubeClient, namespace: str, name: str) -> None:
    """Delete a Service."""
    kube.request("DELETE", resource_path("", "v1", "services", namespace, name))


def reconciles() -> float:
    """Successful ``service-bridge`` reconciles so far (the progress signal for "nothing changed" checks)."""
    return sample("controller_runtime_reconcile_total", {"controller": "service-bridge", "result": "success"})


def test_every_kind_of_service_is_published_and_the_original_client_still_works(
        zkop_clients: ServiceAccountClients, kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter,
        zk: KazooClient, zk_base: str, zk_server: ZooKeeperServer) -> None:
    ns = namespace
    options = BridgeOptions(namespaces=(ns,), labels=("app",), gc_delay=GC_DELAY)
    with running_bridge(zkop_clients, adapter, options):
        web = create(kube, svc("my-web-app", ns, labels={"app": "web", "team": "x"}, ports=[
            {"name": "http", "port": 80, "targetPort": 8080},
            {"name": "dns-udp", "port": 53, "protocol": "UDP", "targetPort": 5353},
            {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 5353}]))
        create(kube, svc("single", ns, ports=[{"port": 8080}]))
        create(kube, svc("db", ns, clusterIP="None", ports=[{"name": "pg", "port": 5432}]))
        create(kube, svc("ext", ns, type="ExternalName", externalName="db.example.com", ports=[]))
        node = create(kube, svc("np", ns, type="NodePort"))
        create(kube, svc("lb", ns, type="LoadBalancer", externalIPs=["198.51.100.7"]))
        patch(kube, ns, "lb", {"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"},
                                                                       {"hostname": "lb.example.com"}]}}},
              subresource="status")
        dual = create(kube, svc("ds", ns, ipFamilyPolicy="RequireDualStack", ipFamilies=["IPv4", "IPv6"]))

        def lb_ready() -> dict[str, Any] | None:
            rec = record(zk, zk_base, f"{ns}-lb")
            return rec if rec and rec["loadBalancerIngress"] else None

        lb = wait_for(lb_ready, message="LoadBalancer record with ingress") or {}
        keys = {f"{ns}-{name}" for name in ("my-web-app", "single", "db", "ext", "np", "ds")}
        wait_for(lambda: keys <= children(zk, f"{zk_base}{ROOT}"), message=f"records {keys}")

        # kube-apiserver allocated the ClusterIP from the plane's IPv4 range.
        assert web["spec"]["clusterIP"].startswith("10.0.0.")
        rec = record(zk, zk_base, f"{ns}-my-web-app") or {}
        assert rec["clusterIP"] == web["spec"]["clusterIP"] and rec["clusterIPs"] == [rec["clusterIP"]]
        assert rec["ports"] == [
            {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080, "nodePort": None},
            {"name": "dns-udp", "port": 53, "protocol": "UDP", "targetPort": 5353, "nodePort": None},
            {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 5353, "nodePort": None}]
        assert rec["labels"] == {"app": "web"}
        assert rec["managedBy"] == "zkop"
        assert rec["owner"] == {"managedBy": "zkop", "clusterId": "test", "uid": web["metadata"]["uid"]}
        # targetPort and protocol defaulted by the server.
        assert (record(zk, zk_base, f"{ns}-single") or {})["ports"] == [
            {"name": None, "port": 8080, "protocol": "TCP", "targetPort": 8080, "nodePort": None}]
        db = record(zk, zk_base, f"{ns}-db") or {}
        assert db["clusterIP"] is None and db["clusterIPs"] == [] and db["headless"] is True
        ext = record(zk, zk_base, f"{ns}-ext") or {}
        assert (ext["type"], ext["clusterIP"], ext["externalName"]) == ("ExternalName", None, "db.example.com")
        np = record(zk, zk_base, f"{ns}-np") or {}
        assert np["ports"][0]["nodePort"] == node["spec"]["ports"][0]["nodePort"]
        assert 30000 <= np["ports"][0]["nodePort"] <= 32767
        assert lb["loadBalancerIngress"] == [{"ip": "203.0.113.7", "hostname": None},
                                             {"ip": None, "hostname": "lb.example.com"}]
        assert lb["externalAddresses"] == ["203.0.113.7", "lb.example.com", "198.51.100.7"]
        assert lb["ports"][0]["nodePort"] is not None  # allocateLoadBalancerNodePorts defaults to true
        ds = record(zk, zk_base, f"{ns}-ds") or {}
        # Dual-stack: both families published, the IPv4 primary also as clusterIP.
        assert ds["clusterIPs"] == dual["spec"]["clusterIPs"] and ds["ipFamilies"] == ["IPv4", "IPv6"]
        assert ds["clusterIPs"][1].startswith("fd00:10:96::") and ds["clusterIP"] == ds["clusterIPs"][0]

        # The original bridge script's consumer, unchanged: read <root>/<ns>-my-web-app, use clusterIP + ports.
        legacy = json.loads(zk.get(f"{zk_base}{ROOT}/{ns}-my-web-app")[0])
        targets = [f"{legacy['clusterIP']}:{p['port']}" for p in legacy["ports"] if p["protocol"] == "TCP"]
        assert targets == [f"{web['spec']['clusterIP']}:80", f"{web['spec']['clusterIP']}:53"]
        out = subprocess.run([sys.executable, str(REPO / "examples" / "external-client.py"), "--zk-hosts",
                              f"{zk_server.hosts}{zk_base}", ns, "my-web-app"],
                             capture_output=True, text=True, timeout=30, check=True)
        assert f"http {web['spec']['clusterIP']}:80/TCP" in out.stdout.splitlines()


def test_updates_opt_out_and_namespace_filters(zkop_clients: ServiceAccountClients, kube: KubeClient,
                                              namespace: str, new_namespace: Callable[[], str],
                                              adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    """Every namespace of the plane is watched here (no ``namespaces``): what is published from this test's
    namespaces is checked, and that ``default/kubernetes``, which kube-apiserver itself creates, is too."""
    ns, team, hidden = namespace, new_namespace(), new_namespace()
    options = BridgeOptions(exclude_namespaces=("kube-system", hidden), gc_delay=GC_DELAY)
    with running_bridge(zkop_clients, adapter, options):
        create(kube, svc("web", ns))
        create(kube, svc("quiet", ns, annotations={SYNC_ANNOTATION: "false"}))
        create(kube, svc("secret", hidden))
        create(kube, svc("api", team))
        wait_for(lambda: record(zk, zk_base, f"{team}-api"), message="team/api published")
        wait_for(lambda: record(zk, zk_base, f"{ns}-web"), message="web published")
        kubernetes = wait_for(lambda: record(zk, zk_base, "default-kubernetes"), message="default/kubernetes")
        assert kubernetes["clusterIP"] == "10.0.0.1" and kubernetes["ports"][0]["port"] == 443

        patch(kube, ns, "web", {"spec": {"ports": [{"name": "http", "port": 8081, "targetPort": 8080}]}})
        wait_for(lambda: (record(zk, zk_base, f"{ns}-web") or {}).get("ports", [{}])[0].get("port") == 8081,
                 message="port change propagated")

        # Flipping the annotation to "false" removes the record (consul-k8s #76); back to "true" restores it.
        patch(kube, ns, "web", {"metadata": {"annotations": {SYNC_ANNOTATION: "false"}}})
        wait_for(lambda: record(zk, zk_base, f"{ns}-web") is None, message="opted out")
        patch(kube, ns, "web", {"metadata": {"annotations": {SYNC_ANNOTATION: "true"}}})
        wait_for(lambda: record(zk, zk_base, f"{ns}-web"), message="opted in again")

        delete(kube, team, "api")
        wait_for(lambda: record(zk, zk_base, f"{team}-api") is None, message="deleted Service collected")
        ours = {key for key in children(zk, f"{zk_base}{ROOT}") if key.startswith((f"{ns}-", f"{hidden}-"))}
        assert ours == {f"{ns}-web"}


def test_only_listed_namespaces(zkop_clients: ServiceAccountClients, kube: KubeClient, namespace: str,
                                new_namespace: Callable[[], str], adapter: ZooKeeperAdapter, zk: KazooClient,
                                zk_base: str) -> None:
    listed, other = namespace, new_namespace()
    options = BridgeOptions(namespaces=(listed,), layout="nested", gc_delay=GC_DELAY)
    create(kube, svc("api", listed))
    create(kube, svc("api", other))
    with running_bridge(zkop_clients, adapter, options) as bridge:
        wait_for(lambda: record(zk, zk_base, f"{listed}/api"), message="listed/api published")
        create(kube, svc("web", listed))
        wait_for(lambda: record(zk, zk_base, f"{listed}/web"), message="listed/web published")
        assert zk.get_children(f"{zk_base}{ROOT}") == [listed]
        container = json.loads(zk.get(f"{zk_base}{ROOT}/{listed}")[0])
        assert container == {"managedBy": "zkop", "owner": {"managedBy": "zkop", "clusterId": "test"}}
        # A record lost behind zkop's back (say, a restored ZooKeeper snapshot) comes back on a new session.
        zk.delete(f"{zk_base}{ROOT}/{listed}/web")
        bridge.on_session_reconnected()
        wait_for(lambda: record(zk, zk_base, f"{listed}/web"), message="re-published after reconnect")


def test_service_deleted_while_zkop_was_down_is_collected_after_restart_but_foreign_nodes_survive(
        zkop_clients: ServiceAccountClients, kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter,
        zk: KazooClient, zk_base: str) -> None:
    ns = namespace
    options = BridgeOptions(namespaces=(ns,), gc_delay=GC_DELAY)
    with running_bridge(zkop_clients, adapter, options):
        create(kube, svc("keep", ns))
        create(kube, svc("gone", ns))
        wait_for(lambda: record(zk, zk_base, f"{ns}-gone") and record(zk, zk_base, f"{ns}-keep"),
                 message="both published")
    # zkop is down: the Service goes, someone else writes under the root, another cluster shares the root.
    delete(kube, ns, "gone")
    zk.create(f"{zk_base}{ROOT}/legacy-orders", b'{"clusterIP":"10.1.2.3","ports":[]}')
    other = {"managedBy": "zkop", "owner": {"managedBy": "zkop", "clusterId": "other-cluster", "uid": "x"}}
    zk.create(f"{zk_base}{ROOT}/{ns}-elsewhere", json.dumps(other).encode())
    keep_version = zk.exists(f"{zk_base}{ROOT}/{ns}-keep").version
    before = time.time()
    with running_bridge(zkop_clients, adapter, options) as bridge:
        wait_for(lambda: record(zk, zk_base, f"{ns}-gone") is None, message="orphan collected")
        wait_for(lambda: bridge.reconciler.last_sweep is not None, message="full sync ran")
        assert set(zk.get_children(f"{zk_base}{ROOT}")) == {f"{ns}-keep", "legacy-orders", f"{ns}-elsewhere"}
        assert zk.exists(f"{zk_base}{ROOT}/{ns}-keep").version == keep_version  # unchanged: not rewritten
        assert sample("zkop_service_bridge_records", {"state": "foreign"}) == 2
        assert sample("zkop_service_bridge_last_full_sync_timestamp_seconds") >= before  # this bridge's sweep


def test_collision_older_service_keeps_the_key(zkop_clients: ServiceAccountClients, kube: KubeClient,
                                               namespace: str, new_namespace: Callable[[], str],
                                               adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    team = namespace
    team_a = f"{team}-a"  # "<team>/a-web" and "<team>-a/web" share the flat key "<team>-a-web"
    kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": team_a}})
    key = f"{team}-a-web"
    try:
        with running_bridge(zkop_clients, adapter, BridgeOptions(namespaces=(team, team_a), gc_delay=GC_DELAY)):
            older = create(kube, svc("a-web", team))
            wait_for(lambda: record(zk, zk_base, key), message="team/a-web published")
            # creationTimestamp has second resolution: make the second Service strictly younger.
            second = int(time.time())
            wait_for(lambda: int(time.time()) > second, interval=0.05)
            younger = create(kube, svc("web", team_a))
            assert younger["metadata"]["creationTimestamp"] > older["metadata"]["creationTimestamp"]
            wait_for(lambda: events(kube, "RecordCollision", team_a), message="collision Event")
            event = events(kube, "RecordCollision", team_a)[0]
            assert event["type"] == "Warning" and event["involvedObject"]["name"] == "web"
            assert f"{team}/a-web" in event["message"]
            rec = record(zk, zk_base, key) or {}
            # "<team>-a/web" sorts first by name, so only the age rule explains this winner.
            assert (rec["namespace"], rec["name"]) == (team, "a-web")
            version = zk.exists(f"{zk_base}{ROOT}/{key}").version
            before = reconciles()
            patch(kube, team_a, "web", {"metadata": {"labels": {"touched": "yes"}}})
            patch(kube, team, "a-web", {"metadata": {"labels": {"touched": "yes"}}})
            # Each event maps to both keys: wait until both Services were reconciled again, then: no flapping.
            wait_for(lambda: reconciles() >= before + 2, message="both Services reconciled again")
            assert zk.exists(f"{zk_base}{ROOT}/{key}").version == version
            delete(kube, team, "a-web")
            wait_for(lambda: (record(zk, zk_base, key) or {}).get("namespace") == team_a,
                     message="the remaining Service takes the key over")
    finally:
        kube.request("DELETE", f"/api/v1/namespaces/{team_a}")


def test_curator_format_reads_back_like_curator(zkop_clients: ServiceAccountClients, kube: KubeClient,
                                                namespace: str, adapter: ZooKeeperAdapter, zk: KazooClient,
                                                zk_base: str) -> None:
    ns = namespace
    options = BridgeOptions(namespaces=(ns,), format="curator", layout="nested", gc_delay=GC_DELAY)
    with running_bridge(zkop_clients, adapter, options):
        obj = create(kube, svc("orders", ns, type="LoadBalancer", ports=[
            {"name": "http", "port": 80, "targetPort": 8080}, {"name": "https", "port": 443, "targetPort": 8443}]))
        patch(kube, ns, "orders", {"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}]}}},
              subresource="status")
        base = f"{zk_base}{ROOT}/{ns}"  # a Curator consumer's basePath

        def instances() -> list[dict[str, Any]]:
            # ServiceDiscoveryImpl.queryForNames / queryForInstances: children of basePath, then of basePath/name.
            found = []
            for name in zk.get_children(base):
                for instance_id in zk.get_children(f"{base}/{name}"):
                    found.append(json.loads(zk.get(f"{base}/{name}/{instance_id}")[0]))
            return found

        def published() -> list[dict[str, Any]] | None:
            with contextlib.suppress(NoNodeError):
                found = instances()
                return found if [i["address"] for i in found] == ["203.0.113.9"] else None
            return None

        (instance,) = wait_for(published, message="Curator instance at the LB address") or []
        assert list(instance) == ["name", "id", "address", "port", "sslPort", "payload", "registrationTimeUTC",
                                  "serviceType", "uriSpec", "enabled"]
        assert (instance["name"], instance["id"], instance["port"], instance["sslPort"]) == (
            "orders", "203.0.113.9", 80, 443)
        assert instance["serviceType"] == "PERMANENT" and instance["enabled"] is True
        assert isinstance(instance["registrationTimeUTC"], int) and instance["registrationTimeUTC"] > 0
        payload = instance["payload"]
        assert payload["@class"] == "org.springframework.cloud.zookeeper.discovery.ZookeeperInstance"
        assert payload["metadata"]["uid"] == obj["metadata"]["uid"] and payload["metadata"]["clusterId"] == "test"
        assert [p["value"] for p in instance["uriSpec"]["parts"]] == ["scheme", "://", "address", ":", "ssl-port"]
        assert zk.exists(f"{base}/orders/203.0.113.9").ephemeralOwner == 0  # persistent: survives zkop's session


def test_ready_endpoints_are_published_with_a_debounce(
        zkop_clients: ServiceAccountClients, kube: KubeClient, namespace: str, adapter: ZooKeeperAdapter,
        zk: KazooClient, zk_base: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A blip inside the debounce is not published; a lasting change is, once stable for the debounce.

    The debounce runs on a clock only the test moves, and every step waits until a reconcile has read
    the slice version it is about, so a stalled machine can neither stretch the blip past the debounce
    nor let an assertion run before the reconcile it is about. The Service has no selector and no
    Endpoints object, so kube-controller-manager's EndpointSlice mirroring leaves the hand-made slice alone.
    """
    ns = namespace
    options = BridgeOptions(namespaces=(ns,), endpoints=True, endpoints_debounce=0.5, endpoints_max_delay=3.0,
                            gc_delay=GC_DELAY)
    path = f"{zk_base}{ROOT}/{ns}-web"
    now = [100.0]  # the debouncer's monotonic seconds
    read: list[str] = []  # resourceVersion of every slice a reconcile read, in order

    def reading(objs: Iterable[dict[str, Any]], *, publish_not_ready: bool = False) -> EndpointsView:
        objs = list(objs)
        read.extend(o["metadata"]["resourceVersion"] for o in objs)
        return endpoints_view(objs, publish_not_ready=publish_not_ready)

    monkeypatch.setattr(bridge_reconciler, "endpoints_view", reading)

    def slice_(ready: Mapping[str, bool]) -> dict[str, Any]:
        return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": "web-x1", "namespace": ns, "labels": {"kubernetes.io/service-name": "web"}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": [a], "conditions": {"ready": r}} for a, r in ready.items()],
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}

    def addresses() -> list[str] | None:
        rec = record(zk, zk_base, f"{ns}-web")
        return rec["endpoints"]["addresses"] if rec else None

    with running_bridge(zkop_clients, adapter, options, clock=lambda: now[0]):
        create(kube, slice_({"10.244.0.5": True, "10.244.0.6": True}))
        create(kube, svc("web", ns))
        wait_for(lambda: addresses() == ["10.244.0.5", "10.244.0.6"], message="ready endpoints")
        version = zk.exists(path).version
        slices = resource_path("discovery.k8s.io", "v1", "endpointslices", ns, "web-x1")

        def put(ready: Mapping[str, bool]) -> str:
            body = {**slice_(ready), "metadata": kube.request("GET", slices)["metadata"]}
            return str(kube.request("PUT", slices, body=body)["metadata"]["resourceVersion"])

        def held(rv: str, what: str) -> None:
            # A held change is rechecked: the second read of ``rv`` starts after the first reconcile
            # (the queue never runs one key twice at once) has finished, writing nothing.
            wait_for(lambda: read.count(rv) >= 2, message=f"{what} read and held back by the debounce")
            assert zk.exists(path).version == version

        # A pod blips not-ready and back within the debounce (no debounce time passes): the record is
        # not rewritten, though a reconcile saw the not-ready slice.
        held(put({"10.244.0.5": True, "10.244.0.6": False}), "the not-ready blip")
        back = put({"10.244.0.5": True, "10.244.0.6": True})
        wait_for(lambda: back in read, message="the debounced reconcile read the pod ready again")
        assert zk.exists(path).version == version
        # A lasting change is held until it has been stable for the debounce, then published once.
        held(put({"10.244.0.5": True, "10.244.0.6": False}), "the lasting change")
        now[0] += options.endpoints_debounce
        wait_for(lambda: addresses() == ["10.244.0.5"], message="not-ready endpoint dropped")
        assert zk.exists(path).version == version + 1


def test_zkop_run_with_service_bridge(zkop_kubeconfig: str, kube: KubeClient, namespace: str,
                                      zk_server: ZooKeeperServer, zk: KazooClient, zk_base: str,
                                      tmp_path: Path) -> None:
    """The flags as users give them: ``zkop run --service-bridge`` in its own process, as its ServiceAccount."""
    ns = namespace
    args = ["--namespace", ns, "--service-bridge", "--service-bridge-namespace", ns, "--cluster-id", "prod",
            "--service-bridge-format", "curator"]
    with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        created = create(kube, svc("my-web-app", ns))
        instance_dir = f"{zk_base}{ROOT}/{ns}-my-web-app"
        wait_for(lambda: children(zk, instance_dir), message="Curator instance published")
        (instance_id,) = children(zk, instance_dir)
        assert instance_id == created["spec"]["clusterIP"]
        metadata = json.loads(zk.get(f"{instance_dir}/{instance_id}")[0])["payload"]["metadata"]
        assert (metadata["managedBy"], metadata["clusterId"]) == ("zkop", "prod")
        delete(kube, ns, "my-web-app")
        wait_for(lambda: zk.exists(instance_dir) is None, message="record and service node collected")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()
