"""zkop under its manifests' RBAC on a real kube-apiserver: nothing it needs is missing, nothing granted is unused.

One ``zkop run`` with every feature on (leader election, ZooKeeperConfigs with data, ConfigMap
and Secret references, an invalid spec, a path conflict, drift, deletion; the service bridge; the
service importer; a ZooKeeperMirror; a ZooKeeperConfigTree, then its deletion; a ZooKeeperServiceImport;
``--metrics-secure`` scraped by a ServiceAccount bound to the shipped reader role,
so zkop sends TokenReviews and SubjectAccessReviews) authenticates as ``zkop-system/zkop`` with a
token from the TokenRequest API. kube-apiserver's RBAC authorizer decides every request, and its
audit log (``Metadata`` level) records each one with the verb and resource RBAC saw. A request it
refused (403) fails the test; a rule the manifests grant that zkop never exercised is reported.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from zkop_testing.controlplane import ControlPlane
from zkop_testing.kustomize import Obj, rbac_rules
from zkop_testing.metrics_access import bind_shipped_reader_role, service_account_token
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import OPEN_ACL, ZKC, create, create_service_with_endpoints, get, read, synced, zkc
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import MERGE_PATCH, ApiException, KubeClient, resource_path

ZKOP_USER = "system:serviceaccount:zkop-system:zkop"
#: Permissions the API server checks in admission, not per request: setting finalizers on an
#: object whose owner references block deletion (OwnerReferencesPermissionEnforcement).
ADMISSION_ONLY = {("platform.example.com", "zookeeperconfigs/finalizers", "update"),
                  ("platform.example.com", "zookeeperconfigtrees/finalizers", "update")}



def _audited(plane: ControlPlane, user: str) -> list[dict[str, Any]]:
    return [e for e in plane.audit_events() if e.get("user", {}).get("username") == user
            and e.get("stage") == "ResponseComplete"]


def _triple(event: dict[str, Any]) -> tuple[str, str, str]:
    ref = event.get("objectRef", {})
    resource = ref.get("resource", "")
    if ref.get("subresource"):
        resource = f"{resource}/{ref['subresource']}"
    return ref.get("apiGroup", ""), resource, event["verb"]


def _events(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kube.request("GET", resource_path("", "v1", "events", namespace))["items"]
    return items


def _scraper_token(plane: ControlPlane, kube: KubeClient, namespace: str) -> str:
    token = service_account_token(kube, namespace, "prometheus")
    bind_shipped_reader_role(kube, namespace, "prometheus")
    return token


def test_rbac_covers_exactly_what_zkop_sends(plane: ControlPlane, installed: list[Obj],
                                            zkop_kubeconfig: str, kube: KubeClient, namespace: str,
                                            zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient,
                                            tmp_path: Path) -> None:
    ns = namespace
    zk.ensure_path(zk_base + "/services")
    args = ["--leader-elect", "--leader-election-namespace", "zkop-system", "--service-bridge",
            "--service-bridge-endpoints", "--service-bridge-endpoints-debounce", "0.1",
            "--import-services", "--import-root", "/services", "--import-namespace", ns,
            "--zookeeper-mirrors", "--config-trees", "--service-imports", "--sync-period", "2s", "--metrics-secure"]
    audit_mark = len(_audited(plane, ZKOP_USER))
    with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        create(kube, zkc("flag", "/app/flag", b"on", namespace=ns))
        kube.request("POST", resource_path("", "v1", "configmaps", ns), body={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"k": "v"}})
        kube.request("POST", resource_path("", "v1", "secrets", ns), body={
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"k": base64.b64encode(b"secret").decode()}})
        create(kube, zkc("from-cm", "/app/cm", namespace=ns, dataFrom={"configMapKeyRef": {"name": "cm", "key": "k"}}))
        # spec.acl open on purpose: zkop has no ZooKeeper credential here, and a value from a Secret is otherwise
        # refused (SecretNeedsAcl); this test is about the API requests zkop sends.
        create(kube, zkc("from-secret", "/app/secret", namespace=ns,
                         dataFrom={"secretKeyRef": {"name": "s", "key": "k"}}, acl=OPEN_ACL))
        create(kube, zkc("bad", "/app/bad", b"\xff", namespace=ns))  # InvalidSpec (not UTF-8): a Warning Event
        # A path conflict reported for two generations: the same Event again is aggregated (PATCH count).
        create(kube, zkc("shadow", "/app/cm", b"x", namespace=ns))
        wait_for(lambda: any(e["reason"] == "PathConflict" for e in _events(kube, ns)), message="PathConflict")
        kube.request("PATCH", resource_path(*ZKC, ns, "shadow"), body={"spec": {"data": "eQ=="}},
                     content_type=MERGE_PATCH)
        wait_for(lambda: any(e["reason"] == "PathConflict" and int(str(e.get("count", 1))) > 1
                             for e in _events(kube, ns)), message="repeated event aggregated")
        for name in ("flag", "from-cm", "from-secret"):
            wait_for(lambda name=name: synced(kube, name, ns), message=f"{name} synced")  # type: ignore[misc]
        kube.request("PATCH", resource_path(*ZKC, ns, "flag"), body={"spec": {"stringData": "off", "data": None}},
                     content_type=MERGE_PATCH)
        wait_for(lambda: read(zk, zk_base + "/app/flag") == b"off")
        zk.set(zk_base + "/app/flag", b"hand edit")  # drift → put back, Event
        wait_for(lambda: read(zk, zk_base + "/app/flag") == b"off")
        kube.request("DELETE", resource_path(*ZKC, ns, "flag"))
        wait_for(lambda: get(kube, "flag", ns) is None, message="flag deleted through its finalizer")

        # Service bridge: a Service with endpoints is published, then removed.
        create_service_with_endpoints(kube, namespace=ns)
        published = f"{zk_base}/kubernetes/services/{ns}-web"
        wait_for(lambda: zk.exists(published) is not None, message="service published")
        kube.request("DELETE", resource_path("", "v1", "services", ns, "web"))
        wait_for(lambda: zk.exists(published) is None, message="service unpublished")

        # Service import: a Curator instance becomes a Service + EndpointSlice, changes, then goes away.
        instance = {"name": "legacy-orders", "id": "i-1", "address": "192.0.2.10", "port": 9000, "sslPort": None,
                    "payload": None, "registrationTimeUTC": 0, "serviceType": "DYNAMIC", "uriSpec": None,
                    "enabled": True}
        zk.create(zk_base + "/services/legacy-orders/i-1", json.dumps(instance).encode(), makepath=True)

        def imported() -> bool:
            services = kube.request("GET", resource_path("", "v1", "services", ns))["items"]
            return "legacy-orders" in [s["metadata"]["name"] for s in services]

        wait_for(imported, message="service imported")
        instance["port"] = 9001
        zk.set(zk_base + "/services/legacy-orders/i-1", json.dumps(instance).encode())

        def port() -> int:
            svc = kube.request("GET", resource_path("", "v1", "services", ns, "legacy-orders"))
            return int(svc["spec"]["ports"][0]["port"])

        wait_for(lambda: port() == 9001, message="imported service updated")
        zk.delete(zk_base + "/services/legacy-orders", recursive=True)
        wait_for(lambda: not imported(), message="imported service removed")
        # ZooKeeperMirror: a subtree mirrored into a ConfigMap, then a change of it.
        zk.create(zk_base + "/mirrored/k", b"1", makepath=True)
        kube.request("POST", resource_path("platform.example.com", "v1alpha1", "zookeepermirrors", ns), body={
            "apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperMirror", "metadata": {"name": "m"},
            "spec": {"path": "/mirrored", "recursive": True}})

        def mirrored() -> str | None:
            try:
                cm = kube.request("GET", resource_path("", "v1", "configmaps", ns, "m"))
            except ApiException:
                return None
            return str((cm.get("data") or {}).get("k"))

        wait_for(lambda: mirrored() == "1", message="subtree mirrored")
        zk.set(zk_base + "/mirrored/k", b"2")
        wait_for(lambda: mirrored() == "2", message="change mirrored")

        # ZooKeeperConfigTree: a subtree from one object, then deleted through its finalizer.
        trees = ("platform.example.com", "v1alpha1", "zookeeperconfigtrees")
        kube.request("POST", resource_path(*trees, ns), body={
            "apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfigTree", "metadata": {"name": "t"},
            "spec": {"path": "/tree", "entries": [{"path": "a", "stringData": "1"}]}})
        wait_for(lambda: read(zk, zk_base + "/tree/a") == b"1", message="tree written")

        def tree_gone() -> bool:
            try:
                kube.request("GET", resource_path(*trees, ns, "t"))
            except ApiException as err:
                return bool(err.status == 404)
            return False

        kube.request("DELETE", resource_path(*trees, ns, "t"))
        wait_for(tree_gone, message="tree deleted through its finalizer")

        # ZooKeeperServiceImport: the namespace's own import of a registration under another root.
        billing = {**instance, "name": "billing", "id": "i-2", "address": "192.0.2.11"}
        zk.create(zk_base + "/team-services/billing/i-2", json.dumps(billing).encode(), makepath=True)
        kube.request("POST", resource_path("platform.example.com", "v1alpha1", "zookeeperserviceimports", ns), body={
            "apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperServiceImport",
            "metadata": {"name": "team"}, "spec": {"format": "curator", "root": "/team-services"}})

        def billing_imported() -> bool:
            services = kube.request("GET", resource_path("", "v1", "services", ns))["items"]
            return "billing" in [s["metadata"]["name"] for s in services]

        wait_for(billing_imported, message="service imported by the ZooKeeperServiceImport")
        assert proc.probe("/readyz") == 200

        # Secure metrics: a scraper bound to the shipped reader role (TokenReview + SubjectAccessReview).
        assert proc.scrape(_scraper_token(plane, kube, ns))[0] == 200

    events = _audited(plane, ZKOP_USER)[audit_mark:]
    assert events, "the audit log has no request of zkop's ServiceAccount"
    # RBAC's own refusals: a 403 of admission (NamespaceLifecycle refuses an Event in a namespace being
    # deleted, as one of an earlier test's may be while this cluster-wide zkop starts) was authorized.
    refused = sorted({(*_triple(e), e.get("requestURI", "")) for e in events
                      if e.get("responseStatus", {}).get("code") == 403
                      and e.get("annotations", {}).get("authorization.k8s.io/decision") != "allow"})
    assert not refused, f"requests RBAC refused zkop: {refused}"
    used = {_triple(e) for e in events}
    # ConfigMaps and Secrets: only the ones ZooKeeperConfigs name, one by one (GET, and WATCH with
    # fieldSelector=metadata.name=, which kube-apiserver authorizes as that name); never a LIST.
    # The mirror's ConfigMap informer lists and watches only its own label; it writes only its own ConfigMap.
    config_maps = [e for e in events if e.get("objectRef", {}).get("resource") in ("configmaps", "secrets")]
    mirror_reads = [e for e in config_maps if e["verb"] in ("list", "watch") and not e["objectRef"].get("name")]
    assert mirror_reads and all(e["objectRef"]["resource"] == "configmaps" and
                                "labelSelector=platform.example.com%2Fzookeeper-mirror" in e["requestURI"]
                                for e in mirror_reads), sorted(e["requestURI"] for e in mirror_reads)
    # (A cluster-wide zkop also mirrors what earlier tests' namespaces, still being deleted, hold.)
    writes = {(e["verb"], e["objectRef"].get("namespace")) for e in config_maps if e["verb"] in ("create", "patch")}
    assert {("create", ns), ("patch", ns)} <= writes, writes
    assert {e["objectRef"].get("name") for e in config_maps
            if e["verb"] == "patch" and e["objectRef"].get("namespace") == ns} == {"m"}
    reads = {(e["verb"], e["objectRef"]["resource"], e["objectRef"].get("namespace"), e["objectRef"].get("name"))
             for e in config_maps if e not in mirror_reads and e["verb"] not in ("create", "patch")}
    # Outside this test's namespace: a mirror's look at a ConfigMap its create found taken (a GET), and the sources
    # that earlier tests' ZooKeeperConfigTrees name (their namespaces still being deleted; a GET and a WATCH by name):
    # every one of them by name, never a LIST.
    assert {verb for verb, _, where, _ in reads if where != ns} <= {"get", "watch"}, sorted(reads)
    assert all(name for _, _, where, name in reads if where != ns), sorted(reads)
    assert {r for r in reads if r[2] == ns} == {(verb, resource, ns, name) for verb in ("get", "watch")
                                                for resource, name in (("configmaps", "cm"), ("secrets", "s"))}, \
        sorted(reads)
    rules = rbac_rules(installed)
    assert rules - used - ADMISSION_ONLY == set(), f"granted but never used: {sorted(rules - used - ADMISSION_ONLY)}"
