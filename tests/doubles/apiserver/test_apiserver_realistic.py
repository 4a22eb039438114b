"""``zkop_testing.apiserver_realistic.seed``: the double holds what a real cluster holds."""

from __future__ import annotations

import base64
from typing import Any

import kubernetes.client as k8s
from apiserver_helpers import zkc, zkc_path
from zkop_testing.apiserver import ApiServer
from zkop_testing.apiserver_realistic import HELM_RELEASE_TYPE, ROOT_CA_CONFIGMAP, fields_v1, seed

from zkop.kube.client import MERGE_PATCH, KubeClient, resource_path

JSON = dict[str, Any]


def items(kube: KubeClient, plural: str, **query: str) -> list[JSON]:
    found: list[JSON] = kube.request("GET", resource_path("", "v1", plural), query=query or None)["items"]
    return found


def test_every_namespace_has_the_root_ca_configmap(server: ApiServer, kube: KubeClient) -> None:
    report = seed(server, namespaces=["team-a", "team-b"], helm_secrets=0)
    assert set(report.namespaces) == {"default", "kube-system", "kube-public", "kube-node-lease", "team-a", "team-b"}
    ca = [c for c in items(kube, "configmaps") if c["metadata"]["name"] == ROOT_CA_CONFIGMAP]
    assert {c["metadata"]["namespace"] for c in ca} == set(report.namespaces)
    pem = ca[0]["data"]["ca.crt"]
    assert pem.startswith("-----BEGIN CERTIFICATE-----\n") and 1000 < len(pem) < 1300
    assert seed(server, namespaces=["team-a"], helm_secrets=0).configmaps == 0  # idempotent


def test_helm_release_secrets_have_helms_shape_and_size(server: ApiServer, kube: KubeClient,
                                                        api: Any) -> None:
    report = seed(server, namespaces=3, helm_secrets=7, secret_kb=20, helm_revisions=3)
    assert report.secrets == 7 and 7 * 20 * 1024 * 0.95 < report.secret_bytes <= 7 * 20 * 1024
    secrets = items(kube, "secrets", labelSelector="owner=helm")
    assert len(secrets) == 7
    first = next(s for s in secrets if s["metadata"]["name"] == "sh.helm.release.v1.release-0.v1")
    assert first["type"] == HELM_RELEASE_TYPE and first["metadata"]["namespace"] == "app-0"
    assert first["metadata"]["labels"] == {"name": "release-0", "owner": "helm", "version": "1",
                                           "status": "superseded"}
    helm_encoded = base64.b64decode(first["data"]["release"])  # the Secret's own encoding
    assert base64.b64decode(helm_encoded)[:2] == b"\x1f\x8b"  # Helm's base64 of gzip
    # The official client reads them as typed objects.
    typed = k8s.CoreV1Api(api).read_namespaced_secret("sh.helm.release.v1.release-0.v3", "app-0")
    assert typed.type == HELM_RELEASE_TYPE and typed.metadata is not None
    assert (typed.metadata.labels or {})["status"] == "deployed"


def test_managed_fields_on_everything_including_later_writes(server: ApiServer, kube: KubeClient, crd: JSON,
                                                             ns: str) -> None:
    seed(server, namespaces=1, helm_secrets=1, secret_kb=1)
    ca = kube.request("GET", resource_path("", "v1", "configmaps", "app-0", ROOT_CA_CONFIGMAP))
    managed = ca["metadata"]["managedFields"]
    assert len(managed) >= 3 and {"kubectl-edit", "kube-controller-manager"} <= {m["manager"] for m in managed}
    assert all(m["fieldsType"] == "FieldsV1" and m["apiVersion"] == "v1" for m in managed)
    assert any(m["fieldsV1"].get("f:data") == {".": {}, "f:ca.crt": {}} for m in managed)
    # An object written after seeding (a GitOps tool's ZooKeeperConfig, then zkop's status) has them too.
    kube.request("POST", zkc_path(ns), body=zkc("a"))
    kube.request("PATCH", zkc_path(ns, "a", "status"), body={"status": {"state": "Synced"}},
                 content_type=MERGE_PATCH)
    obj = kube.request("GET", zkc_path(ns, "a"))
    assert any("f:spec" in m["fieldsV1"] for m in obj["metadata"]["managedFields"])
    assert any(m.get("subresource") == "status" for m in obj["metadata"]["managedFields"])
    listed = kube.request("GET", zkc_path(ns))["items"][0]
    assert listed["metadata"]["managedFields"] == obj["metadata"]["managedFields"]


def test_without_synthesized_managers(server: ApiServer, kube: KubeClient) -> None:
    seed(server, namespaces=1, helm_secrets=1, secret_kb=1, managed_fields=False)
    assert all(len(c["metadata"].get("managedFields") or []) <= 1 for c in items(kube, "configmaps"))


def test_fields_v1_keys_lists_of_maps_by_name() -> None:
    assert fields_v1({"ports": [{"name": "http", "port": 80}], "selector": {"app": "x"}}) == {
        "f:ports": {'k:{"name":"http"}': {".": {}, "f:name": {}, "f:port": {}}},
        "f:selector": {".": {}, "f:app": {}},
    }
