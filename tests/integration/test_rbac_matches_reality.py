"""RBAC checked against reality: every (group, resource, verb) zkop sends is granted, and nothing more.

One ``zkop run`` with every feature on (leader election, ZooKeeperConfigs with data,
ConfigMap and Secret references, invalid specs, deletion; the service bridge with
endpoints; the service importer; ``--metrics-secure`` scraped with a token, so zkop sends
its TokenReviews and SubjectAccessReviews) is driven through its life cycle against the
in-memory API server, whose request log records the operator's own requests
(by ``User-Agent``). The rendered ClusterRoles/Roles of ``manifests/default`` plus the
``service-bridge`` and ``service-import`` components must cover exactly those.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from kazoo.client import KazooClient
from zkop_testing.apiserver import ApiServer
from zkop_testing.kustomize import REPO, rbac_rules, render
from zkop_testing.metrics_access import reader_token
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import ZKC, create, create_service_with_endpoints, get, read, synced, zkc
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import MERGE_PATCH, KubeClient, resource_path

#: Permissions the API server checks in admission, not per request: setting finalizers on an
#: object whose owner references block deletion (OwnerReferencesPermissionEnforcement).
ADMISSION_ONLY = {("platform.example.com", "zookeeperconfigs/finalizers", "update")}


def _events(kube: KubeClient) -> list[dict[str, object]]:
    items: list[dict[str, object]] = kube.request("GET", resource_path("", "v1", "events", "default"))["items"]
    return items


def granted(tmp_path: Path) -> set[tuple[str, str, str]]:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [{REPO / 'manifests/default'}]\n"
        f"components: [{REPO / 'manifests/components/service-bridge'}, "
        f"{REPO / 'manifests/components/service-import'}]\n"
    )
    return rbac_rules(render(overlay))


def test_rbac_covers_exactly_what_zkop_sends(kubeconfig: str, kube: KubeClient, apiserver: ApiServer,
                                            zk_server: ZooKeeperServer, zk_base: str, zk: KazooClient,
                                            tmp_path: Path) -> None:
    zk.ensure_path(zk_base + "/services")
    args = ["--leader-elect", "--leader-election-namespace", "default", "--service-bridge",
            "--service-bridge-endpoints", "--service-bridge-endpoints-debounce", "0.1",
            "--import-services", "--import-root", "/services", "--sync-period", "2", "--metrics-secure"]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        # ZooKeeperConfigs: create, update, data from a ConfigMap and a Secret, an invalid one, deletion.
        create(kube, zkc("flag", "/app/flag", b"on"))
        kube.request("POST", resource_path("", "v1", "configmaps", "default"), body={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"},
            "data": {"k": "v"}})
        kube.request("POST", resource_path("", "v1", "secrets", "default"), body={
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"},
            "data": {"k": base64.b64encode(b"secret").decode()}})
        create(kube, zkc("from-cm", "/app/cm", dataFrom={"configMapKeyRef": {"name": "cm", "key": "k"}}))
        create(kube, zkc("from-secret", "/app/secret", dataFrom={"secretKeyRef": {"name": "s", "key": "k"}}))
        create(kube, zkc("bad", "/app/bad", b"\xff"))  # InvalidSpec (not UTF-8): a Warning Event
        # A path conflict reported for two generations: the same Event again is aggregated (PATCH count).
        create(kube, zkc("shadow", "/app/cm", b"x"))
        wait_for(lambda: any(e["reason"] == "PathConflict" for e in _events(kube)), timeout=15)
        kube.request("PATCH", resource_path(*ZKC, "default", "shadow"), body={"spec": {"data": "eQ=="}},
                     content_type=MERGE_PATCH)
        wait_for(lambda: any(e["reason"] == "PathConflict" and int(str(e.get("count", 1))) > 1 for e in _events(kube)),
                 timeout=15, message="repeated event aggregated")
        for name in ("flag", "from-cm", "from-secret"):
            wait_for(lambda name=name: synced(kube, name), timeout=20, message=f"{name} synced")  # type: ignore[misc]
        kube.request("PATCH", resource_path(*ZKC, "default", "flag"),
                     body={"spec": {"stringData": "off", "data": None}}, content_type=MERGE_PATCH)
        wait_for(lambda: read(zk, zk_base + "/app/flag") == b"off", timeout=10)
        zk.set(zk_base + "/app/flag", b"hand edit")  # drift → event
        wait_for(lambda: read(zk, zk_base + "/app/flag") == b"off", timeout=10)
        kube.request("DELETE", resource_path(*ZKC, "default", "flag"))
        wait_for(lambda: get(kube, "flag") is None, timeout=15)

        # Service bridge: a Service with endpoints is published, then removed.
        create_service_with_endpoints(kube)
        wait_for(lambda: zk.exists(zk_base + "/kubernetes/services/default-web") is not None, timeout=15)
        kube.request("DELETE", resource_path("", "v1", "services", "default", "web"))
        wait_for(lambda: zk.exists(zk_base + "/kubernetes/services/default-web") is None, timeout=15)

        # Service import: a Curator instance becomes a Service + EndpointSlice, then goes away.
        instance = {"name": "legacy-orders", "id": "i-1", "address": "192.0.2.10", "port": 9000, "sslPort": None,
                    "payload": None, "registrationTimeUTC": 0, "serviceType": "DYNAMIC", "uriSpec": None,
                    "enabled": True}
        zk.create(zk_base + "/services/legacy-orders/i-1", json.dumps(instance).encode(), makepath=True)

        def imported() -> bool:
            names = [i["metadata"]["name"] for i in
                     kube.request("GET", resource_path("", "v1", "services", "default"))["items"]]
            return "legacy-orders" in names

        wait_for(imported, timeout=15, message="service imported")
        instance["port"] = 9001  # the registration changes: Service and EndpointSlice are patched
        zk.set(zk_base + "/services/legacy-orders/i-1", json.dumps(instance).encode())

        def port() -> int:
            svc = kube.request("GET", resource_path("", "v1", "services", "default", "legacy-orders"))
            return int(svc["spec"]["ports"][0]["port"])

        wait_for(lambda: port() == 9001, timeout=15, message="imported service updated")
        zk.delete(zk_base + "/services/legacy-orders", recursive=True)
        wait_for(lambda: not imported(), timeout=15, message="imported service removed")
        assert proc.probe("/readyz") == 200

        # Secure metrics: a scraper bound to the shipped reader role (TokenReview + SubjectAccessReview).
        assert proc.scrape(reader_token(apiserver, kube))[0] == 200

    used = {(r.group, f"{r.resource}/{r.subresource}" if r.subresource else r.resource, r.verb)
            for r in apiserver.request_log if r.user_agent.startswith("zkop-operator/")}
    assert used, "no requests from the operator were recorded"
    # ConfigMaps and Secrets: only the ones ZooKeeperConfigs name, one by one (GET, and WATCH
    # with fieldSelector=metadata.name=, which RBAC sees as that name); never a LIST.
    reads = {(r.verb, r.resource, r.namespace, r.name) for r in apiserver.request_log
             if r.user_agent.startswith("zkop-operator/") and r.resource in ("configmaps", "secrets")}
    assert reads == {(verb, resource, "default", name) for verb in ("get", "watch")
                     for resource, name in (("configmaps", "cm"), ("secrets", "s"))}, sorted(reads)
    rules = granted(tmp_path)
    assert used - rules == set(), f"requests zkop sends that RBAC does not grant: {sorted(used - rules)}"
    assert rules - used - ADMISSION_ONLY == set(), f"granted but never used: {sorted(rules - used - ADMISSION_ONLY)}"
