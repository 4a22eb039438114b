"""Server-side apply and managedFields in the API double.

Sources: kubernetes.io "Server-Side Apply"; ``k8s.io/apiserver/pkg/endpoints/handlers/patch.go``
(apply can create, ``fieldManager`` required: ``ValidatePatchOptions``);
``k8s.io/apimachinery/pkg/util/managedfields/internal`` (``conflict.go`` messages,
``stripmeta.go``, ``managedfieldsupdater.go``); sigs.k8s.io/structured-merge-diff
``merge/update.go`` (``Update``, ``Apply``, ``prune``, ``addBackOwnedItems``) and ``typed``
(``ToFieldSet``, ``Compare``); ``customresource/strategy.go`` ``GetResetFields`` (status).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import urllib3
from zkop_testing.apiserver_apply import decode_fields, encode_fields

from zkop.kube.client import MERGE_PATCH, ApiException, KubeClient, resource_path

JSON = dict[str, Any]
APPLY = "application/apply-patch+yaml"
ZKC = ("platform.example.com", "v1alpha1", "zookeeperconfigs")


def cm_path(ns: str, name: str = "") -> str:
    return resource_path("", "v1", "configmaps", ns, name or None)


def apply(kube: KubeClient, path: str, body: JSON, manager: str, **query: Any) -> JSON:
    return kube.request("PATCH", path, query={"fieldManager": manager, **query}, body=body, content_type=APPLY)


def managers(obj: JSON) -> dict[tuple[str, str, str], JSON]:
    return {(e["manager"], e["operation"], e.get("subresource", "")): e["fieldsV1"]
            for e in obj["metadata"]["managedFields"]}


def cm(name: str, **data: str) -> JSON:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def test_fieldsv1_round_trip() -> None:
    fields = {"f:metadata": {"f:finalizers": {".": {}, 'v:"a/b"': {}}},
              "f:status": {"f:conditions": {'k:{"type":"Ready"}': {".": {}, "f:status": {}}}}}
    assert encode_fields(decode_fields(fields)) == fields


def test_apply_creates_and_records_only_applied_fields(kube: KubeClient, ns: str) -> None:
    created = apply(kube, cm_path(ns, "a"), {**cm("a", x="1"), "metadata": {"name": "a", "labels": {"l": "v"}}},
                    "flux")
    assert created["data"] == {"x": "1"}
    assert managers(created) == {("flux", "Apply", ""): {"f:data": {"f:x": {}},
                                                         "f:metadata": {"f:labels": {"f:l": {}}}}}
    assert created["metadata"]["managedFields"][0]["apiVersion"] == "v1"


def test_apply_create_answers_201(server: Any, ns: str) -> None:
    body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n"
    answer = urllib3.request("PATCH", f"{server.url}/api/v1/namespaces/{ns}/configmaps/b?fieldManager=m",
                             body=body, headers={"Content-Type": APPLY})
    assert answer.status == 201
    again = urllib3.request("PATCH", f"{server.url}/api/v1/namespaces/{ns}/configmaps/b?fieldManager=m",
                            body=body, headers={"Content-Type": APPLY})
    assert again.status == 200


def test_apply_requires_a_field_manager(kube: KubeClient, ns: str) -> None:
    with pytest.raises(ApiException) as info:
        kube.request("PATCH", cm_path(ns, "a"), body=cm("a"), content_type=APPLY)
    assert info.value.status == 422
    assert "fieldManager: Required value: is required for apply patch" in str(info.value.body)


def test_create_and_updates_are_owned_by_their_manager(kube: KubeClient, ns: str) -> None:
    created = kube.request("POST", cm_path(ns), body=cm("a", x="1"), query={"fieldManager": "creator"})
    assert managers(created) == {("creator", "Update", ""): {"f:data": {".": {}, "f:x": {}}}}
    updated = kube.request("PATCH", cm_path(ns, "a"), body={"data": {"y": "2"}}, content_type=MERGE_PATCH)
    owners = managers(updated)
    # no fieldManager: the User-Agent up to its first "/" (managerOrUserAgent)
    assert owners[("creator", "Update", "")] == {"f:data": {".": {}, "f:x": {}}}
    assert [k for k in owners if k[0] != "creator"] == [("zkop", "Update", "")]
    # a no-op write changes nothing, not even the times
    again = kube.request("PATCH", cm_path(ns, "a"), body={"data": {"y": "2"}}, content_type=MERGE_PATCH)
    assert again["metadata"]["resourceVersion"] == updated["metadata"]["resourceVersion"]


def test_conflict_lists_managers_and_fields_and_force_takes_them(kube: KubeClient, ns: str) -> None:
    apply(kube, cm_path(ns, "a"), cm("a", x="1", y="1"), "first")
    kube.request("PATCH", cm_path(ns, "a"), body={"data": {"y": "2"}}, content_type=MERGE_PATCH,
                 query={"fieldManager": "editor"})
    with pytest.raises(ApiException) as info:
        apply(kube, cm_path(ns, "a"), cm("a", x="3", y="3"), "second")
    assert info.value.status == 409
    status = json.loads(info.value.body or "{}")
    assert status["reason"] == "Conflict"
    assert status["message"] == ('Apply failed with 2 conflicts: conflicts with "editor" using v1:\n- .data.y\n'
                                 'conflicts with "first":\n- .data.x')
    assert {(c["type"], c["field"]) for c in status["details"]["causes"]} == {
        ("FieldManagerConflict", ".data.x"), ("FieldManagerConflict", ".data.y")}
    # the same value is shared ownership, not a conflict
    shared = apply(kube, cm_path(ns, "a"), cm("a", x="1"), "second")
    assert managers(shared)[("second", "Apply", "")] == {"f:data": {"f:x": {}}}
    forced = apply(kube, cm_path(ns, "a"), cm("a", x="3", y="3"), "second", force=True)
    assert forced["data"] == {"x": "3", "y": "3"}
    owners = managers(forced)
    assert ("editor", "Update", "") not in owners and ("first", "Apply", "") not in owners


def test_omitted_field_is_removed_unless_another_manager_owns_it(kube: KubeClient, ns: str) -> None:
    apply(kube, cm_path(ns, "a"), cm("a", x="1", y="1", z="1"), "flux")
    kube.request("PATCH", cm_path(ns, "a"), body={"data": {"z": "2"}}, content_type=MERGE_PATCH,
                 query={"fieldManager": "human"})  # human takes z
    applied = apply(kube, cm_path(ns, "a"), cm("a", x="1"), "flux")
    assert applied["data"] == {"x": "1", "z": "2"}


def test_finalizers_are_a_set_and_survive_an_apply_without_them(kube: KubeClient, ns: str, crd: JSON) -> None:
    body = {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfig",
            "metadata": {"name": "z"}, "spec": {"path": "/a", "data": "eA=="}}
    path = resource_path(*ZKC, ns, "z")
    apply(kube, path, body, "flux")
    kube.request("PATCH", path, body={"metadata": {"finalizers": ["x.io/f"]}}, content_type=MERGE_PATCH,
                 query={"fieldManager": "zkop"})
    changed = apply(kube, path, {**body, "spec": {"path": "/a", "data": "eQ=="}}, "flux")
    assert changed["metadata"]["finalizers"] == ["x.io/f"]
    assert managers(changed)[("zkop", "Update", "")] == {"f:metadata": {"f:finalizers": {".": {}, 'v:"x.io/f"': {}}}}
    # an applier listing a finalizer shares it (set item v:"...")
    shared = apply(kube, path, {**body, "metadata": {"name": "z", "finalizers": ["x.io/f", "y.io/g"]}}, "flux")
    assert shared["metadata"]["finalizers"] == ["x.io/f", "y.io/g"]


def test_status_is_reset_on_the_main_resource_and_owned_on_status(kube: KubeClient, ns: str, crd: JSON) -> None:
    body = {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfig",
            "metadata": {"name": "z"}, "spec": {"path": "/a", "data": "eA=="}, "status": {"observedGeneration": 7}}
    path = resource_path(*ZKC, ns, "z")
    created = apply(kube, path, body, "flux")
    assert (created.get("status") or {}).get("observedGeneration") != 7
    assert "f:status" not in managers(created)[("flux", "Apply", "")]
    written = kube.request("PATCH", path + "/status", body={"status": {"observedGeneration": 1}},
                           content_type=MERGE_PATCH, query={"fieldManager": "zkop"})
    # the CRD's status default (observedGeneration -1) exists already: only the changed field is owned
    assert managers(written)[("zkop", "Update", "status")] == {"f:status": {"f:observedGeneration": {}}}
    applied = apply(kube, path, {**body, "status": {"observedGeneration": 9}}, "flux")
    assert applied["status"]["observedGeneration"] == 1


def test_apply_of_an_undeclared_field_fails_as_kube_does(kube: KubeClient, ns: str, crd: JSON) -> None:
    body = {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfig",
            "metadata": {"name": "z"}, "spec": {"path": "/a", "data": "eA==", "syncPolicyy": "x"}}
    with pytest.raises(ApiException) as info:
        apply(kube, resource_path(*ZKC, ns, "z"), body, "flux")
    assert info.value.status == 500  # kubernetes/kubernetes#122480: a plain error from structuredmerge.go
    assert json.loads(info.value.body or "{}")["message"] == (
        f"failed to create typed patch object ({ns}/z; platform.example.com/v1alpha1, Kind=ZooKeeperConfig): "
        ".spec.syncPolicyy: field not declared in schema")


def test_managed_fields_sent_by_a_client_replace_the_live_ones(kube: KubeClient, ns: str) -> None:
    apply(kube, cm_path(ns, "a"), cm("a", x="1"), "old-owner")
    entry = {"manager": "new-owner", "operation": "Apply", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:x": {}}}}
    moved = kube.request("PATCH", cm_path(ns, "a"), body=[
        {"op": "replace", "path": "/metadata/managedFields", "value": [entry]}],
        content_type="application/json-patch+json")
    assert moved["metadata"]["managedFields"] == [entry]
    reset = kube.request("PATCH", cm_path(ns, "a"), body={"metadata": {"managedFields": [{}]}},
                         content_type=MERGE_PATCH)
    assert "managedFields" not in reset["metadata"]


def test_apply_patch_must_name_the_version(kube: KubeClient, ns: str) -> None:
    with pytest.raises(ApiException) as info:
        apply(kube, cm_path(ns, "a"), {"kind": "ConfigMap", "metadata": {"name": "a"}}, "m")
    assert info.value.status == 400
    assert json.loads(info.value.body or "{}")["message"] == (
        "Incorrect version specified in apply patch. Specified patch version: , expected: v1")
