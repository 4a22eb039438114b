"""The service bridge end to end: the in-memory API server, the real informers and controller
(``build_service_bridge``, as the manager wires it), and a real ZooKeeper.

Each test runs the bridge in-process against a ZooKeeper chroot (``zk_base``), so the paths in
assertions are the real ones under ``/kubernetes/services``.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from service_testing import running_bridge
from zkop_testing.apiserver import ApiServer
from zkop_testing.operator import OperatorProcess
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import MERGE_PATCH, ApiException, KubeClient, WatchStream, resource_path
from zkop.services.bridge import reconciler as bridge_reconciler
from zkop.services.bridge.options import SYNC_ANNOTATION, BridgeOptions
from zkop.services.endpoints import EndpointsView, endpoints_view
from zkop.zookeeper.adapter import ZooKeeperAdapter

from .conftest import sample

ROOT = "/kubernetes/services"
REPO = Path(__file__).resolve().parents[3]
GC_DELAY = 0.2  # seconds from a Service disappearing to the full sync that collects it


def svc(name: str, namespace: str = "default", *, annotations: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    spec.setdefault("ports", [{"name": "http", "port": 80, "targetPort": 8080}])
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = dict(annotations)
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}


def create(kube: KubeClient, obj: dict[str, Any]) -> dict[str, Any]:
    namespace = obj["metadata"]["namespace"]
    with contextlib.suppress(ApiException):
        kube.request("POST", resource_path("", "v1", "namespaces"),
                     body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    plural = "endpointslices" if obj["kind"] == "EndpointSlice" else "services"
    group, version = ("discovery.k8s.io", "v1") if plural == "endpointslices" else ("", "v1")
    return kube.request("POST", resource_path(group, version, plural, namespace), body=obj)


def patch(kube: KubeClient, name: str, body: dict[str, Any], namespace: str = "default",
          subresource: str | None = None) -> dict[str, Any]:
    return kube.request("PATCH", resource_path("", "v1", "services", namespace, name, subresource), body=body,
                        content_type=MERGE_PATCH)


def delete(kube: KubeClient, name: str, namespace: str = "default") -> None:
    kube.request("DELETE", resource_path("", "v1", "services", namespace, name))


def record(zk: KazooClient, base: str, key: str) -> dict[str, Any] | None:
    try:
        return json.loads(zk.get(f"{base}{ROOT}/{key}")[0])  # type: ignore[no-any-return]
    except NoNodeError:
        return None


def children(zk: KazooClient, path: str) -> set[str]:
    """Children of ``path``; empty while it does not exist yet."""
    try:
        return set(zk.get_children(path))
    except NoNodeError:
        return set()


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


def reconciles() -> float:
    """Successful ``service-bridge`` reconciles so far (the progress signal for "nothing changed" checks)."""
    return sample("controller_runtime_reconcile_total", {"controller": "service-bridge", "result": "success"})


def events(kube: KubeClient, reason: str) -> list[dict[str, Any]]:
    items = kube.request("GET", resource_path("", "v1", "events"))["items"]
    return [e for e in items if e.get("reason") == reason]


def test_every_kind_of_service_is_published_and_the_original_client_still_works(
        apiserver: ApiServer, kube: KubeClient, adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str,
        zk_server: ZooKeeperServer) -> None:
    with running_bridge(apiserver, adapter, BridgeOptions(labels=("app",), gc_delay=GC_DELAY)):
        web = create(kube, svc("my-web-app", labels={"app": "web", "team": "x"}, ports=[
            {"name": "http", "port": 80, "targetPort": 8080},
            {"name": "dns-udp", "port": 53, "protocol": "UDP", "targetPort": 5353},
            {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 5353}]))
        create(kube, svc("single", ports=[{"port": 8080}]))
        create(kube, svc("db", clusterIP="None", ports=[{"name": "pg", "port": 5432}]))
        create(kube, svc("ext", type="ExternalName", externalName="db.example.com", ports=[]))
        node = create(kube, svc("np", type="NodePort"))
        create(kube, svc("lb", type="LoadBalancer", externalIPs=["198.51.100.7"]))
        patch(kube, "lb", {"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"},
                                                                   {"hostname": "lb.example.com"}]}}},
              subresource="status")
        dual = create(kube, svc("ds", ipFamilyPolicy="RequireDualStack", ipFamilies=["IPv4", "IPv6"]))

        def lb_ready() -> dict[str, Any] | None:
            rec = record(zk, zk_base, "default-lb")
            return rec if rec and rec["loadBalancerIngress"] else None

        lb = wait_for(lb_ready, message="LoadBalancer record with ingress") or {}
        keys = {"default-my-web-app", "default-single", "default-db", "default-ext", "default-np", "default-ds"}
        wait_for(lambda: keys <= children(zk, f"{zk_base}{ROOT}"), message=f"records {keys}")

        rec = record(zk, zk_base, "default-my-web-app") or {}
        assert rec["clusterIP"] == web["spec"]["clusterIP"] and rec["clusterIPs"] == [rec["clusterIP"]]
        assert rec["ports"] == [
            {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080, "nodePort": None},
            {"name": "dns-udp", "port": 53, "protocol": "UDP", "targetPort": 5353, "nodePort": None},
            {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 5353, "nodePort": None}]
        assert rec["labels"] == {"app": "web"}
        assert rec["managedBy"] == "zkop"
        assert rec["owner"] == {"managedBy": "zkop", "clusterId": "test", "uid": web["metadata"]["uid"]}
        assert (record(zk, zk_base, "default-single") or {})["ports"] == [
            {"name": None, "port": 8080, "protocol": "TCP", "targetPort": 8080, "nodePort": None}]
        db = record(zk, zk_base, "default-db") or {}
        assert db["clusterIP"] is None and db["clusterIPs"] == [] and db["headless"] is True
        ext = record(zk, zk_base, "default-ext") or {}
        assert (ext["type"], ext["clusterIP"], ext["externalName"]) == ("ExternalName", None, "db.example.com")
        np = record(zk, zk_base, "default-np") or {}
        assert np["ports"][0]["nodePort"] == node["spec"]["ports"][0]["nodePort"] >= 30000
        assert lb["loadBalancerIngress"] == [{"ip": "203.0.113.7", "hostname": None},
                                             {"ip": None, "hostname": "lb.example.com"}]
        assert lb["externalAddresses"] == ["203.0.113.7", "lb.example.com", "198.51.100.7"]
        assert lb["ports"][0]["nodePort"] is not None
        ds = record(zk, zk_base, "default-ds") or {}
        # Dual-stack: both families published, the IPv4 primary also as clusterIP.
        assert ds["clusterIPs"] == dual["spec"]["clusterIPs"] and ds["ipFamilies"] == ["IPv4", "IPv6"]
        assert len(ds["clusterIPs"]) == 2 and ":" in ds["clusterIPs"][1] and ds["clusterIP"] == ds["clusterIPs"][0]

        # The original bridge script's consumer, unchanged: read <root>/default-my-web-app, use clusterIP + ports.
        data, _ = zk.get(f"{zk_base}{ROOT}/default-my-web-app")
        legacy = json.loads(data)
        targets = [f"{legacy['clusterIP']}:{p['port']}" for p in legacy["ports"] if p["protocol"] == "TCP"]
        assert targets == [f"{web['spec']['clusterIP']}:80", f"{web['spec']['clusterIP']}:53"]
        example = REPO / "examples" / "external-client.py"
        if example.exists():
            out = subprocess.run([sys.executable, str(example), "--zk-hosts", f"{zk_server.hosts}{zk_base}",
                                  "default", "my-web-app"], capture_output=True, text=True, timeout=30, check=True)
            assert f"http {web['spec']['clusterIP']}:80/TCP" in out.stdout.splitlines()
        assert sample("controller_runtime_reconcile_total", {"controller": "service-bridge", "result": "success"}) > 0


def test_updates_opt_out_and_namespace_filters(apiserver: ApiServer, kube: KubeClient, adapter: ZooKeeperAdapter,
                                              zk: KazooClient, zk_base: str) -> None:
    options = BridgeOptions(exclude_namespaces=("kube-system", "hidden"), gc_delay=GC_DELAY)
    with running_bridge(apiserver, adapter, options):
        create(kube, svc("web"))
        create(kube, svc("quiet", annotations={SYNC_ANNOTATION: "false"}))
        create(kube, svc("dns", "kube-system"))
        create(kube, svc("secret", "hidden"))
        create(kube, svc("api", "team-a"))
        wait_for(lambda: record(zk, zk_base, "team-a-api"), message="team-a/api published")
        wait_for(lambda: record(zk, zk_base, "default-web"), message="default/web published")

        patch(kube, "web", {"spec": {"ports": [{"name": "http", "port": 8081, "targetPort": 8080}]}})
        wait_for(lambda: (record(zk, zk_base, "default-web") or {}).get("ports", [{}])[0].get("port") == 8081,
                 message="port change propagated")

        # Flipping the annotation to "false" removes the record (consul-k8s #76); back to "true" restores it.
        patch(kube, "web", {"metadata": {"annotations": {SYNC_ANNOTATION: "false"}}})
        wait_for(lambda: record(zk, zk_base, "default-web") is None, message="opted out")
        patch(kube, "web", {"metadata": {"annotations": {SYNC_ANNOTATION: "true"}}})
        wait_for(lambda: record(zk, zk_base, "default-web"), message="opted in again")

        delete(kube, "api", "team-a")
        wait_for(lambda: record(zk, zk_base, "team-a-api") is None, message="deleted Service collected")
        published = children(zk, f"{zk_base}{ROOT}")
        assert {"default-quiet", "kube-system-dns", "hidden-secret"}.isdisjoint(published)
        assert published == {"default-web", "default-kubernetes"}


def test_only_listed_namespaces(apiserver: ApiServer, kube: KubeClient, adapter: ZooKeeperAdapter, zk: KazooClient,
                                zk_base: str) -> None:
    options = BridgeOptions(namespaces=("team-a",), layout="nested", gc_delay=GC_DELAY)
    create(kube, svc("api", "team-a"))
    create(kube, svc("api", "team-b"))
    with running_bridge(apiserver, adapter, options) as bridge:
        wait_for(lambda: record(zk, zk_base, "team-a/api"), message="team-a/api published")
        create(kube, svc("web", "team-a"))
        wait_for(lambda: record(zk, zk_base, "team-a/web"), message="team-a/web published")
        assert zk.get_children(f"{zk_base}{ROOT}") == ["team-a"]
        container = json.loads(zk.get(f"{zk_base}{ROOT}/team-a")[0])
        assert container == {"managedBy": "zkop", "owner": {"managedBy": "zkop", "clusterId": "test"}}
        # A record lost behind zkop's back (say, a restored ZooKeeper snapshot) comes back on a new session.
        zk.delete(f"{zk_base}{ROOT}/team-a/web")
        bridge.on_session_reconnected()
        wait_for(lambda: record(zk, zk_base, "team-a/web"), message="re-published after reconnect")


def test_service_deleted_while_zkop_was_down_is_collected_after_restart_but_foreign_nodes_survive(
        apiserver: ApiServer, kube: KubeClient, adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str) -> None:
    options = BridgeOptions(gc_delay=GC_DELAY)
    with running_bridge(apiserver, adapter, options):
        create(kube, svc("keep"))
        create(kube, svc("gone"))
        wait_for(lambda: record(zk, zk_base, "default-gone") and record(zk, zk_base, "default-keep"),
                 message="both published")
    # zkop is down: the Service goes, someone else writes under the root, another cluster shares the root.
    delete(kube, "gone")
    zk.create(f"{zk_base}{ROOT}/legacy-orders", b'{"clusterIP":"10.1.2.3","ports":[]}')
    other = {"managedBy": "zkop", "owner": {"managedBy": "zkop", "clusterId": "other-cluster", "uid": "x"}}
    zk.create(f"{zk_base}{ROOT}/default-elsewhere", json.dumps(other).encode())
    keep_version = zk.exists(f"{zk_base}{ROOT}/default-keep").version
    before = time.time()
    with running_bridge(apiserver, adapter, options) as bridge:
        wait_for(lambda: record(zk, zk_base, "default-gone") is None, message="orphan collected")
        wait_for(lambda: bridge.reconciler.last_sweep is not None, message="full sync ran")
        assert set(zk.get_children(f"{zk_base}{ROOT}")) == {
            "default-keep", "default-kubernetes", "legacy-orders", "default-elsewhere"}
        assert zk.exists(f"{zk_base}{ROOT}/default-keep").version == keep_version  # unchanged: not rewritten
        assert sample("zkop_service_bridge_records", {"state": "foreign"}) == 2
        assert sample("zkop_service_bridge_last_full_sync_timestamp_seconds") >= before  # this bridge's sweep


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


def test_collision_older_service_keeps_the_key(apiserver: ApiServer, kube: KubeClient, adapter: ZooKeeperAdapter,
                                               zk: KazooClient, zk_base: str) -> None:
    with running_bridge(apiserver, adapter, BridgeOptions(gc_delay=GC_DELAY)):
        older = create(kube, svc("a-web", "team"))
        wait_for(lambda: record(zk, zk_base, "team-a-web"), message="team/a-web published")
        # creationTimestamp has second resolution: make the second Service strictly younger.
        second = int(time.time())
        wait_for(lambda: int(time.time()) > second, interval=0.05)
        younger = create(kube, svc("web", "team-a"))
        assert younger["metadata"]["creationTimestamp"] > older["metadata"]["creationTimestamp"]
        wait_for(lambda: events(kube, "RecordCollision"), message="collision Event")
        event = events(kube, "RecordCollision")[0]
        assert event["type"] == "Warning" and event["involvedObject"]["name"] == "web"
        assert "team/a-web" in event["message"]
        rec = record(zk, zk_base, "team-a-web") or {}
        # "team-a/web" sorts first by name, so only the age rule explains this winner.
        assert (rec["namespace"], rec["name"]) == ("team", "a-web")
        version = zk.exists(f"{zk_base}{ROOT}/team-a-web").version
        before = reconciles()
        patch(kube, "web", {"metadata": {"labels": {"touched": "yes"}}}, namespace="team-a")
        patch(kube, "a-web", {"metadata": {"labels": {"touched": "yes"}}}, namespace="team")
        # Each event maps to both keys: wait until both Services were reconciled again, then: no flapping.
        wait_for(lambda: reconciles() >= before + 2, message="both Services reconciled again")
        assert zk.exists(f"{zk_base}{ROOT}/team-a-web").version == version
        delete(kube, "a-web", "team")
        wait_for(lambda: (record(zk, zk_base, "team-a-web") or {}).get("namespace") == "team-a",
                 message="the remaining Service takes the key over")


def test_curator_format_reads_back_like_curator(apiserver: ApiServer, kube: KubeClient, adapter: ZooKeeperAdapter,
                                                zk: KazooClient, zk_base: str) -> None:
    options = BridgeOptions(format="curator", layout="nested", gc_delay=GC_DELAY)
    with running_bridge(apiserver, adapter, options):
        obj = create(kube, svc("orders", "shop", type="LoadBalancer", ports=[
            {"name": "http", "port": 80, "targetPort": 8080}, {"name": "https", "port": 443, "targetPort": 8443}]))
        patch(kube, "orders", {"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}]}}}, namespace="shop",
              subresource="status")
        base = f"{zk_base}{ROOT}/shop"  # a Curator consumer's basePath

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
        assert [p["value"] for p in instance["uriSpec"]["parts"]] == ["scheme", "://", "address", ":", "port"]
        stat = zk.exists(f"{base}/orders/203.0.113.9")
        assert stat.ephemeralOwner == 0  # persistent: survives zkop's session


def test_ready_endpoints_are_published_with_a_debounce(
        apiserver: ApiServer, kube: KubeClient, adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A blip inside the debounce is not published; a lasting change is, once stable for the debounce.

    The debounce runs on a clock only the test moves, and every step waits until a reconcile has read
    the slice version it is about, so a stalled machine can neither stretch the blip past the debounce
    nor let an assertion run before the reconcile it is about.
    """
    options = BridgeOptions(endpoints=True, endpoints_debounce=0.5, endpoints_max_delay=3.0,
                            gc_delay=GC_DELAY)
    path = f"{zk_base}{ROOT}/default-web"
    now = [100.0]  # the debouncer's monotonic seconds
    read: list[str] = []  # resourceVersion of every slice a reconcile read, in order

    def reading(objs: Iterable[dict[str, Any]]) -> EndpointsView:
        objs = list(objs)
        read.extend(o["metadata"]["resourceVersion"] for o in objs)
        return endpoints_view(objs)

    monkeypatch.setattr(bridge_reconciler, "endpoints_view", reading)

    def slice_(ready: Mapping[str, bool]) -> dict[str, Any]:
        return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": "web-x1", "namespace": "default",
                             "labels": {"kubernetes.io/service-name": "web"}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": [a], "conditions": {"ready": r}} for a, r in ready.items()],
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}

    def addresses() -> list[str] | None:
        rec = record(zk, zk_base, "default-web")
        return rec["endpoints"]["addresses"] if rec else None

    with running_bridge(apiserver, adapter, options, clock=lambda: now[0]):
        create(kube, slice_({"10.244.0.5": True, "10.244.0.6": True}))
        create(kube, svc("web"))
        wait_for(lambda: addresses() == ["10.244.0.5", "10.244.0.6"], message="ready endpoints")
        version = zk.exists(path).version
        slices = resource_path("discovery.k8s.io", "v1", "endpointslices", "default", "web-x1")

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


def test_zkop_run_with_service_bridge(apiserver: ApiServer, kube: KubeClient, zk_server: ZooKeeperServer,
                                      zk: KazooClient, zk_base: str, tmp_path: Path) -> None:
    """The flags as users give them: ``zkop run --service-bridge`` in its own process."""
    crd = REPO / "manifests" / "crd" / "zookeeperconfigs.yaml"
    kube.request("POST", resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
                 body=yaml.safe_load(crd.read_text()))
    kubeconfig = str(apiserver.write_kubeconfig(tmp_path / "kubeconfig"))
    args = ["--service-bridge", "--cluster-id", "prod", "--service-bridge-format", "curator"]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        create(kube, svc("my-web-app"))
        instance_dir = f"{zk_base}{ROOT}/default-my-web-app"
        wait_for(lambda: children(zk, instance_dir), message="Curator instance published")
        (instance_id,) = children(zk, instance_dir)
        metadata = json.loads(zk.get(f"{instance_dir}/{instance_id}")[0])["payload"]["metadata"]
        assert (metadata["managedBy"], metadata["clusterId"]) == ("zkop", "prod")
        delete(kube, "my-web-app")
        wait_for(lambda: zk.exists(instance_dir) is None, message="record and service node collected")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()
