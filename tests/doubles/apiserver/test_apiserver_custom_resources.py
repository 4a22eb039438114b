"""CRDs and custom resources: serving, defaulting, pruning, validation, generation and /status."""

from __future__ import annotations

import copy
from typing import Any

from apiserver_helpers import api_error, zkc, zkc_path
from zkop_testing.apiserver import ApiServer
from zkop_testing.apiserver_fixtures import zookeeperconfig_crd

from zkop.kube.client import JSON_PATCH, MERGE_PATCH, KubeClient, resource_path

CRDS = resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions")
SMP = "application/strategic-merge-patch+json"
JSON = dict[str, Any]


def make_crd(group: str, plural: str, kind: str, schema: JSON, *, scope: str = "Namespaced",
             status: bool = False, versions: list[str] | None = None) -> JSON:
    names = versions or ["v1"]
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": scope, "names": {"plural": plural, "kind": kind},
                     "versions": [{"name": v, "served": True, "storage": i == 0,
                                   "schema": {"openAPIV3Schema": schema},
                                   **({"subresources": {"status": {}}} if status else {})}
                                  for i, v in enumerate(names)]}}


def test_crd_status_names_and_finalizer(kube: KubeClient, crd: JSON) -> None:
    assert crd["metadata"]["generation"] == 1
    assert crd["metadata"]["finalizers"] == ["customresourcecleanup.apiextensions.k8s.io"]
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert crd["status"]["acceptedNames"]["shortNames"] == ["zkc"]
    assert crd["status"]["storedVersions"] == ["v1alpha1"]
    listed = kube.request("GET", zkc_path("default"))
    assert listed == {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfigList",
                      "metadata": {"resourceVersion": listed["metadata"]["resourceVersion"]}, "items": []}


def test_crd_validation(kube: KubeClient) -> None:
    bad = zookeeperconfig_crd()
    bad["metadata"]["name"] = "wrong.platform.example.com"
    status, body = api_error(lambda: kube.request("POST", CRDS, body=bad))
    assert status == 422 and body["details"]["causes"][0]["field"] == "metadata.name"
    no_schema = zookeeperconfig_crd()
    del no_schema["spec"]["versions"][0]["schema"]
    status, body = api_error(lambda: kube.request("POST", CRDS, body=no_schema))
    assert status == 422 and "schemas are required" in body["message"]
    kube.request("POST", CRDS, body=zookeeperconfig_crd())
    status, body = api_error(lambda: kube.request("POST", CRDS, body=zookeeperconfig_crd()))
    assert status == 409 and body["reason"] == "AlreadyExists"


def test_create_defaults_prunes_and_drops_status(kube: KubeClient, crd: JSON, ns: str) -> None:
    body = zkc("a", junk=True)
    body["status"] = {"observedGeneration": 3}
    body["topLevelJunk"] = 1
    created = kube.request("POST", zkc_path(ns), body=body)
    assert created["spec"] == {"path": "/app/config", "data": "x", "encoding": "utf-8", "syncPolicy": "createOrUpdate",
                               "deletionPolicy": "Delete"}
    # the client's status is dropped; the schema's default for status is what reads show
    assert created["status"] == {"state": "Pending", "observedGeneration": -1} and "topLevelJunk" not in created
    assert created["metadata"]["generation"] == 1
    assert created["apiVersion"] == "platform.example.com/v1alpha1" and created["kind"] == "ZooKeeperConfig"
    explicit = kube.request("POST", zkc_path(ns), body=zkc("b", encoding="binary", syncPolicy="createOnly"))
    assert explicit["spec"]["encoding"] == "binary" and explicit["spec"]["syncPolicy"] == "createOnly"
    # the short name is not a URL alias
    status, _ = api_error(lambda: kube.request("GET", resource_path("platform.example.com", "v1alpha1", "zkc", ns)))
    assert status == 404


def test_schema_validation_errors_look_like_kube(kube: KubeClient, crd: JSON, ns: str) -> None:
    bad = {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfig", "metadata": {"name": "bad"},
           "spec": {"data": 5, "encoding": "latin1"}}
    status, body = api_error(lambda: kube.request("POST", zkc_path(ns), body=bad))
    assert status == 422 and body["reason"] == "Invalid"
    assert body["details"]["group"] == "platform.example.com" and body["details"]["kind"] == "ZooKeeperConfig"
    causes = {c["field"]: c for c in body["details"]["causes"]}
    assert causes["spec.data"] == {"reason": "FieldValueTypeInvalid", "field": "spec.data",
                                   "message": 'Invalid value: "integer": spec.data in body must be of type string: '
                                              '"integer"'}
    assert causes["spec.encoding"] == {"reason": "FieldValueNotSupported", "field": "spec.encoding",
                                       "message": 'Unsupported value: "latin1": supported values: "utf-8", "binary"'}
    assert causes["spec.path"] == {"reason": "FieldValueRequired", "field": "spec.path", "message": "Required value"}
    assert body["message"].startswith('ZooKeeperConfig.platform.example.com "bad" is invalid: [')
    assert 'spec.path: Required value' in body["message"]
    one = zkc("one")
    del one["spec"]["path"]
    _, body = api_error(lambda: kube.request("POST", zkc_path(ns), body=one))
    # A Required error keeps the CEL rules from running, which kube-apiserver says (strategy.go hasBlockingErr).
    assert body["message"] == ('ZooKeeperConfig.platform.example.com "one" is invalid: [spec.path: Required value, '
                               "<nil>: Invalid value: null: some validation rules were not checked because the object "
                               "was invalid; correct the existing errors to complete validation]")
    status, body = api_error(lambda: kube.request("POST", zkc_path(ns), body=zkc("Upper")))
    assert status == 422 and "RFC 1123 subdomain" in body["message"]


def test_update_requires_resource_version_and_detects_conflicts(kube: KubeClient, crd: JSON, ns: str) -> None:
    created = kube.request("POST", zkc_path(ns), body=zkc("a"))
    status, body = api_error(lambda: kube.request("PUT", zkc_path(ns, "a"), body=zkc("a", data="y")))
    assert status == 422
    assert body["message"] == ('ZooKeeperConfig.platform.example.com "a" is invalid: metadata.resourceVersion: '
                               "Invalid value: 0x0: must be specified for an update")
    kube.request("PUT", zkc_path(ns, "a"), body={**created, "spec": {**created["spec"], "data": "y"}})
    status, body = api_error(lambda: kube.request("PUT", zkc_path(ns, "a"),
                                                  body={**created, "spec": {**created["spec"], "data": "z"}}))
    assert status == 409
    assert body["message"] == ('Operation cannot be fulfilled on zookeeperconfigs.platform.example.com "a": the '
                               "object has been modified; please apply your changes to the latest version and try "
                               "again")
    assert body["details"] == {"name": "a", "group": "platform.example.com", "kind": "zookeeperconfigs"}


def test_generation_bumps_only_for_spec_changes(kube: KubeClient, crd: JSON, ns: str) -> None:
    created = kube.request("POST", zkc_path(ns), body=zkc("a"))
    labelled = kube.request("PATCH", zkc_path(ns, "a"), body={"metadata": {"labels": {"a": "b"}}},
                            content_type=MERGE_PATCH)
    assert labelled["metadata"]["generation"] == 1
    assert int(labelled["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    changed = kube.request("PATCH", zkc_path(ns, "a"), body={"spec": {"data": "new"}}, content_type=MERGE_PATCH)
    assert changed["metadata"]["generation"] == 2
    status = kube.request("PATCH", zkc_path(ns, "a", "status"), body={"status": {"observedGeneration": 2}},
                          content_type=MERGE_PATCH)
    assert status["metadata"]["generation"] == 2 and status["status"] == {"state": "Pending", "observedGeneration": 2}
    again = kube.request("PATCH", zkc_path(ns, "a"), body={"spec": {"data": "new"}}, content_type=MERGE_PATCH)
    assert again["metadata"]["generation"] == 2
    assert again["metadata"]["resourceVersion"] == status["metadata"]["resourceVersion"]  # no-op


def test_status_subresource_splits_writes(kube: KubeClient, crd: JSON, ns: str, server: ApiServer) -> None:
    kube.request("POST", zkc_path(ns), body=zkc("a"))
    written = kube.request("PUT", zkc_path(ns, "a", "status"), body={
        **kube.request("GET", zkc_path(ns, "a")), "status": {"observedGeneration": 1},
        "spec": {"path": "/other", "data": "changed"}, "metadata": {
            **kube.request("GET", zkc_path(ns, "a"))["metadata"], "labels": {"ignored": "yes"}}})
    assert written["status"] == {"observedGeneration": 1}
    assert written["spec"]["path"] == "/app/config" and "labels" not in written["metadata"]
    rv = server.resource_version
    # status through the main endpoint is ignored: this patch changes nothing at all
    same = kube.request("PATCH", zkc_path(ns, "a"), body={"status": {"observedGeneration": 9}},
                        content_type=MERGE_PATCH)
    assert same["status"] == {"observedGeneration": 1} and server.resource_version == rv
    # /status writes are validated against the schema
    status, body = api_error(lambda: kube.request("PATCH", zkc_path(ns, "a", "status"), body={"status": {
        "conditions": [{"type": "Ready", "status": "Maybe", "lastTransitionTime": "2026-01-01T00:00:00Z",
                        "reason": "Synced", "message": ""}]}}, content_type=MERGE_PATCH))
    assert status == 422 and body["details"]["causes"][0]["field"] == "status.conditions[0].status"
    # stale resourceVersion on /status conflicts too
    status, _ = api_error(lambda: kube.request("PATCH", zkc_path(ns, "a", "status"), body={
        "metadata": {"resourceVersion": "2"}, "status": {"observedGeneration": 5}}, content_type=MERGE_PATCH))
    assert status == 409
    status, _ = api_error(lambda: kube.request("DELETE", zkc_path(ns, "a", "status")))
    assert status == 405


def test_without_status_subresource_status_is_a_normal_field(kube: KubeClient, ns: str) -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                               "status": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}
    kube.request("POST", CRDS, body=make_crd("ex.example.com", "things", "Thing", schema))
    path = resource_path("ex.example.com", "v1", "things", ns)
    created = kube.request("POST", path, body={"metadata": {"name": "t"}, "spec": {"a": 1}, "status": {"s": 1}})
    assert created["status"] == {"s": 1}
    updated = kube.request("PATCH", f"{path}/t", body={"status": {"s": 2}}, content_type=MERGE_PATCH)
    assert updated["status"] == {"s": 2} and updated["metadata"]["generation"] == 2
    status, _ = api_error(lambda: kube.request("GET", f"{path}/t/status"))
    assert status == 404


def test_strategic_merge_patch_is_unsupported_for_custom_resources(kube: KubeClient, crd: JSON, ns: str) -> None:
    kube.request("POST", zkc_path(ns), body=zkc("a"))
    status, body = api_error(lambda: kube.request("PATCH", zkc_path(ns, "a"), body={"spec": {"data": "q"}},
                                                  content_type=SMP))
    assert status == 415 and body["reason"] == "UnsupportedMediaType"
    assert body["message"] == ("the body of the request was in an unknown format - accepted media types include: "
                               "application/json-patch+json, application/merge-patch+json, "
                               "application/apply-patch+yaml")
    patched = kube.request("PATCH", zkc_path(ns, "a"), body=[{"op": "replace", "path": "/spec/data", "value": "j"}],
                           content_type=JSON_PATCH)
    assert patched["spec"]["data"] == "j"


def test_typed_custom_objects_api(custom: Any, crd: JSON, ns: str) -> None:
    created = custom.create_namespaced_custom_object("platform.example.com", "v1alpha1", ns, "zookeeperconfigs",
                                                     zkc("a"))
    assert created["spec"]["encoding"] == "utf-8"
    patched = custom.patch_namespaced_custom_object("platform.example.com", "v1alpha1", ns, "zookeeperconfigs", "a",
                                                    {"spec": {"data": "typed"}})
    assert patched["metadata"]["generation"] == 2
    status = custom.patch_namespaced_custom_object_status("platform.example.com", "v1alpha1", ns, "zookeeperconfigs",
                                                          "a", {"status": {"observedGeneration": 2}})
    assert status["status"]["observedGeneration"] == 2
    everywhere = custom.list_cluster_custom_object("platform.example.com", "v1alpha1", "zookeeperconfigs")
    assert [i["metadata"]["name"] for i in everywhere["items"]] == ["a"]
    deleted = custom.delete_namespaced_custom_object("platform.example.com", "v1alpha1", ns, "zookeeperconfigs", "a")
    assert deleted["kind"] == "ZooKeeperConfig"  # custom resources return the deleted object


def test_cluster_scoped_and_multi_version_crds(kube: KubeClient, ns: str) -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "size": {"type": "integer", "default": 3}}}}}
    kube.request("POST", CRDS, body=make_crd("multi.example.com", "widgets", "Widget", schema, scope="Cluster",
                                             versions=["v1", "v1beta1"]))
    v1 = resource_path("multi.example.com", "v1", "widgets")
    beta = resource_path("multi.example.com", "v1beta1", "widgets")
    created = kube.request("POST", beta, body={"apiVersion": "multi.example.com/v1beta1", "kind": "Widget",
                                               "metadata": {"name": "w"}, "spec": {}})
    assert created["apiVersion"] == "multi.example.com/v1beta1" and created["spec"] == {"size": 3}
    assert "namespace" not in created["metadata"]
    assert kube.request("GET", f"{v1}/w")["apiVersion"] == "multi.example.com/v1"
    status, _ = api_error(lambda: kube.request("GET", resource_path("multi.example.com", "v1", "widgets", ns, "w")))
    assert status == 404
    status, body = api_error(lambda: kube.request("POST", v1, body={"apiVersion": "multi.example.com/v1beta1",
                                                                    "kind": "Widget", "metadata": {"name": "x"}}))
    assert status == 400 and "does not match the expected API version" in body["message"]
    assert kube.request("GET", "/apis/multi.example.com")["preferredVersion"]["version"] == "v1"


def test_schema_features_through_the_server(kube: KubeClient, ns: str) -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "replicas": {"type": "integer", "minimum": 1, "maximum": 5},
        "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
        "port": {"x-kubernetes-int-or-string": True},
        "blob": {"type": "string", "format": "byte"},
        "note": {"type": "string", "nullable": True},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "items": {"type": "array", "maxItems": 2, "items": {"type": "object", "properties": {
            "k": {"type": "string"}, "mode": {"type": "string", "default": "ro"}}}},
        "nested": {"type": "object", "properties": {"deep": {"type": "object", "default": {},
                                                             "properties": {"x": {"type": "integer",
                                                                                  "default": 7}}}}},
    }}}}
    kube.request("POST", CRDS, body=make_crd("feat.example.com", "feats", "Feat", schema))
    path = resource_path("feat.example.com", "v1", "feats", ns)
    created = kube.request("POST", path, body={"metadata": {"name": "f"}, "spec": {
        "replicas": 3, "name": "abc", "port": "http", "blob": "aGk=", "note": None,
        "free": {"any": {"thing": [1]}}, "items": [{"k": "a"}, {"k": "b", "mode": "rw", "drop": 1}],
        "nested": {}}})
    spec = created["spec"]
    assert spec["items"] == [{"k": "a", "mode": "ro"}, {"k": "b", "mode": "rw"}]
    assert spec["nested"] == {"deep": {"x": 7}} and spec["free"] == {"any": {"thing": [1]}}
    assert spec["note"] is None and spec["port"] == "http"
    bad = {"metadata": {"name": "g"}, "spec": {"replicas": 9, "name": "ABCDEFGHIJ", "port": 1.5, "blob": "!!",
                                               "items": [{}, {}, {}]}}
    status, body = api_error(lambda: kube.request("POST", path, body=bad))
    causes = {c["field"]: c for c in body["details"]["causes"]}
    assert status == 422
    assert causes["spec.replicas"]["message"] == "Invalid value: 9: spec.replicas in body should be less than or " \
                                                 "equal to 5"
    assert causes["spec.name"]["reason"] in ("FieldValueInvalid", "FieldValueTooLong")
    assert causes["spec.blob"]["message"] == 'Invalid value: "!!": spec.blob in body must be of type byte: "!!"'
    assert causes["spec.items"]["reason"] == "FieldValueTooMany"
    assert "spec.port" in causes


def test_crd_deletion_removes_its_objects_and_endpoints(kube: KubeClient, crd: JSON, ns: str) -> None:
    kube.request("POST", zkc_path(ns), body=zkc("a"))
    kube.request("POST", zkc_path(ns), body=zkc("b", finalizers=["example.com/hold"]))
    answer = kube.request("DELETE", f"{CRDS}/zookeeperconfigs.platform.example.com")
    assert answer["metadata"]["deletionTimestamp"]
    # "b" has a finalizer: the CRD stays Terminating and new objects are refused
    crd_now = kube.request("GET", f"{CRDS}/zookeeperconfigs.platform.example.com")
    assert any(c["type"] == "Terminating" for c in crd_now["status"]["conditions"])
    status, body = api_error(lambda: kube.request("POST", zkc_path(ns), body=zkc("c")))
    assert status == 405 and body["reason"] == "MethodNotAllowed"
    assert [i["metadata"]["name"] for i in kube.request("GET", zkc_path(ns))["items"]] == ["b"]
    kube.request("PATCH", zkc_path(ns, "b"), body={"metadata": {"finalizers": None}}, content_type=MERGE_PATCH)
    status, _ = api_error(lambda: kube.request("GET", f"{CRDS}/zookeeperconfigs.platform.example.com"))
    assert status == 404
    status, _ = api_error(lambda: kube.request("GET", zkc_path(ns)))
    assert status == 404
    # and it can be installed again, empty
    kube.request("POST", CRDS, body=zookeeperconfig_crd())
    assert kube.request("GET", zkc_path(ns))["items"] == []


def test_crd_update_changes_what_is_served(kube: KubeClient, crd: JSON, ns: str) -> None:
    updated = copy.deepcopy(crd)
    updated["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["extra"] = {
        "type": "string", "default": "yes"}
    result = kube.request("PUT", f"{CRDS}/{crd['metadata']['name']}", body=updated)
    assert result["metadata"]["generation"] == 2
    assert kube.request("POST", zkc_path(ns), body=zkc("a"))["spec"]["extra"] == "yes"
    scoped = copy.deepcopy(result)
    scoped["spec"]["scope"] = "Cluster"
    status, body = api_error(lambda: kube.request("PUT", f"{CRDS}/{crd['metadata']['name']}", body=scoped))
    assert status == 422 and body["details"]["causes"][0]["field"] == "spec.scope"


def test_the_repository_crd_manifest_installs(kube: KubeClient, ns: str) -> None:
    kube.request("POST", CRDS, body=zookeeperconfig_crd())
    created = kube.request("POST", zkc_path(ns), body=zkc("from-manifest"))
    assert created["spec"]["encoding"] == "utf-8" and created["spec"]["syncPolicy"] == "createOrUpdate"
    missing = zkc("nope")
    del missing["spec"]["path"]
    status, body = api_error(lambda: kube.request("POST", zkc_path(ns), body=missing))
    assert status == 422 and any(c["field"] == "spec.path" for c in body["details"]["causes"])


def test_defaults_also_apply_as_on_read_from_storage(kube: KubeClient, ns: str, server: ApiServer) -> None:
    schema = {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"a": {"type": "string"}}},
        "status": {"type": "object", "default": {"state": "Pending"},
                   "properties": {"state": {"type": "string"}}}}}
    kube.request("POST", CRDS, body=make_crd("st.example.com", "things", "Thing", schema, status=True))
    path = resource_path("st.example.com", "v1", "things", ns)
    created = kube.request("POST", path, body={"metadata": {"name": "t"}, "spec": {"a": "x"},
                                               "status": {"state": "Done"}})
    # the status of the request is dropped, then the default shows up as kube-apiserver defaults on read
    assert created["status"] == {"state": "Pending"}
    # what the create stored has no status (etcd3/store.go keeps the bytes written); the first write,
    # even a no-op one, starts from the defaulted read and so stores the default: new RV + MODIFIED
    # (GuaranteedUpdate compares with the stored bytes).
    things = server.store.resolve("st.example.com", "v1", "things")
    assert things is not None and "status" not in next(iter(server.store.iter_objects(things)))
    rv = server.resource_version
    first = kube.request("PUT", f"{path}/t", body=created)
    assert first["status"] == {"state": "Pending"} and server.resource_version == rv + 1
    again = kube.request("PUT", f"{path}/t", body=first)
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert again["status"] == {"state": "Pending"} and server.resource_version == rv + 1
    cleared = kube.request("PUT", f"{path}/t/status", body={**again, "status": None})
    assert cleared["status"] == {"state": "Pending"}
