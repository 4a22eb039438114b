"""What kube-apiserver does with a CRD's schema around reads and writes of custom resources.

Sources: staging/src/k8s.io/apiextensions-apiserver ``pkg/apiserver/customresource_handler.go``
(decoding from storage prunes, drops non-nullable nulls and defaults), ``pkg/apiserver/schema/defaulting/
prunenulls.go``, ``pkg/registry/customresource/{strategy,status_strategy,validator}.go``,
``pkg/apiserver/validation/ratcheting.go``; staging/src/k8s.io/apiserver ``pkg/storage/etcd3/store.go``
(``GuaranteedUpdate`` compares the new bytes with the stored ones).
"""

from __future__ import annotations

import copy
from typing import Any

from apiserver_helpers import WatchCollector, api_error, zkc, zkc_path
from zkop_testing.apiserver import ApiServer
from zkop_testing.apiserver_fixtures import wait_for, zookeeperconfig_crd
from zkop_testing.waiting import EVENTUALLY

from zkop.kube.client import MERGE_PATCH, KubeClient, resource_path
from zkop.kube.schema import StructuralSchema, crd_version_schema

CRDS = resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions")
JSON = dict[str, Any]


def _spec_props(crd: JSON) -> JSON:
    props: JSON = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    return props


def test_a_new_crd_default_appears_on_old_objects_when_read(kube: KubeClient, server: ApiServer, ns: str) -> None:
    crd = kube.request("POST", CRDS, body=zookeeperconfig_crd())
    kube.request("POST", zkc_path(ns), body=zkc("old"))
    crd = kube.request("GET", f"{CRDS}/{crd['metadata']['name']}")
    _spec_props(crd)["owner"] = {"type": "string", "default": "platform"}
    kube.request("PUT", f"{CRDS}/{crd['metadata']['name']}", body=crd)
    wait_for(lambda: "owner" in kube.request("GET", zkc_path(ns, "old"))["spec"], message="the new default on read")
    read = kube.request("GET", zkc_path(ns, "old"))
    assert read["spec"]["owner"] == "platform"
    listed = kube.request("GET", zkc_path(ns))["items"][0]
    assert listed["spec"]["owner"] == "platform"
    # not written back: the stored object still lacks it until the next write
    rt = server.store.resolve("platform.example.com", "v1alpha1", "zookeeperconfigs")
    assert rt is not None
    assert "owner" not in next(iter(server.store.iter_objects(rt)))["spec"]
    written = kube.request("PATCH", zkc_path(ns, "old"), body={"metadata": {"labels": {"a": "b"}}},
                           content_type=MERGE_PATCH)
    assert written["metadata"]["generation"] == read["metadata"]["generation"]  # a default is no spec change
    assert next(iter(server.store.iter_objects(rt)))["spec"]["owner"] == "platform"


def test_a_crd_spec_change_ends_custom_resource_watches(kube: KubeClient, server: ApiServer, ns: str) -> None:
    crd = kube.request("POST", CRDS, body=zookeeperconfig_crd())
    watch = WatchCollector(kube, zkc_path(ns), {"resourceVersion": str(server.resource_version)})
    wait_for(lambda: server.open_watch_count == 1, message="watch open")
    kube.request("PATCH", f"{CRDS}/{crd['metadata']['name']}", body={"metadata": {"labels": {"x": "y"}}},
                 content_type=MERGE_PATCH)
    # Metadata only: the storage stays, so the same watch delivers a write made after the patch.
    kube.request("POST", zkc_path(ns), body=zkc("after-metadata-patch"))
    wait_for(lambda: watch.names() == [("ADDED", "after-metadata-patch")], message="the watch still streams")
    assert not watch.finished.is_set()
    crd = kube.request("GET", f"{CRDS}/{crd['metadata']['name']}")
    _spec_props(crd)["owner"] = {"type": "string"}
    kube.request("PUT", f"{CRDS}/{crd['metadata']['name']}", body=crd)
    assert watch.finished.wait(EVENTUALLY) and watch.error is None
    assert watch.names() == [("ADDED", "after-metadata-patch")]  # the spec change ends it without an event


def test_non_nullable_nulls_are_pruned_before_validation(kube: KubeClient, ns: str) -> None:
    # prunenulls.go PruneNonNullableNullsWithoutDefaults; a null with a default is defaulted instead.
    kube.request("POST", CRDS, body=zookeeperconfig_crd())
    created = kube.request("POST", zkc_path(ns), body=zkc("n", acl=None, encoding=None))
    assert "acl" not in created["spec"] and created["spec"]["encoding"] == "utf-8"


def test_zkop_validate_prunes_nulls_too() -> None:
    schema = StructuralSchema(crd_version_schema(zookeeperconfig_crd(), "v1alpha1"))
    obj = {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfig", "metadata": {"name": "a"},
           "spec": {"path": "/a", "data": "", "acl": None, "syncPolicy": None}}
    defaulted = schema.with_defaults(obj)
    assert schema.check(defaulted) == []
    assert "acl" not in defaulted["spec"] and defaulted["spec"]["syncPolicy"] == "createOrUpdate"


def _tightened(crd: JSON) -> JSON:
    # the path pattern now refuses upper case: old objects become invalid
    tight = copy.deepcopy(crd)
    _spec_props(tight)["path"]["pattern"] = "^(/[a-z0-9._-]+)+$"
    return tight


def test_status_writes_validate_only_status(kube: KubeClient, ns: str) -> None:
    # status_strategy.go ValidateUpdate -> validator.go ValidateStatusUpdate: status schema + metadata only.
    crd = kube.request("POST", CRDS, body=zookeeperconfig_crd())
    kube.request("POST", zkc_path(ns), body=zkc("s", path="/App/Config"))
    crd = kube.request("GET", f"{CRDS}/{crd['metadata']['name']}")
    kube.request("PUT", f"{CRDS}/{crd['metadata']['name']}", body=_tightened(crd))
    status = kube.request("PATCH", zkc_path(ns, "s", "status"), body={"status": {"state": "Synced",
                                                                                 "observedGeneration": 1}},
                          content_type=MERGE_PATCH)
    assert status["status"]["state"] == "Synced"
    code, body = api_error(lambda: kube.request("PATCH", zkc_path(ns, "s", "status"), body={
        "status": {"observedGeneration": "one"}}, content_type=MERGE_PATCH))
    # status_strategy.go: a type error blocks the CEL rules (hasBlockingErr), and says so at the nil path.
    assert code == 422 and [c["field"] for c in body["details"]["causes"]] == ["status.observedGeneration", "<nil>"]


def test_main_resource_updates_ratchet_unchanged_invalid_fields(kube: KubeClient, ns: str) -> None:
    # CRDValidationRatcheting (beta, on since 1.30): apiserver/validation/ratcheting.go.
    crd = kube.request("POST", CRDS, body=zookeeperconfig_crd())
    kube.request("POST", zkc_path(ns), body=zkc("r", path="/App/Config"))
    crd = kube.request("GET", f"{CRDS}/{crd['metadata']['name']}")
    kube.request("PUT", f"{CRDS}/{crd['metadata']['name']}", body=_tightened(crd))
    # zkop's finalizer patch and a data change leave the invalid path alone: accepted
    with_finalizer = kube.request("PATCH", zkc_path(ns, "r"), body={"metadata": {"finalizers": ["zkop.example.com/x"]},
                                                                    "spec": {"data": "eA=="}}, content_type=MERGE_PATCH)
    assert with_finalizer["metadata"]["finalizers"] == ["zkop.example.com/x"]
    # changing the invalid field to another invalid value is refused
    code, body = api_error(lambda: kube.request("PATCH", zkc_path(ns, "r"), body={"spec": {"path": "/App/Other"}},
                                                content_type=MERGE_PATCH))
    assert code == 422 and body["details"]["causes"][0]["field"] == "spec.path"
    # a new object must be valid
    code, _ = api_error(lambda: kube.request("POST", zkc_path(ns), body=zkc("new", path="/App/Config")))
    assert code == 422


def test_list_map_keys_are_unique(kube: KubeClient, ns: str) -> None:
    # listtype/validation.go ValidateListSetsAndMaps, from strategy.go / status_strategy.go ValidateUpdate.
    kube.request("POST", CRDS, body=zookeeperconfig_crd())
    kube.request("POST", zkc_path(ns), body=zkc("l"))
    condition = {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "Synced",
                 "message": ""}
    code, body = api_error(lambda: kube.request("PATCH", zkc_path(ns, "l", "status"), body={"status": {
        "conditions": [condition, {**condition, "status": "False"}]}}, content_type=MERGE_PATCH))
    assert code == 422 and body["details"]["causes"] == [{
        "reason": "FieldValueDuplicate", "field": "status.conditions[1]",
        "message": 'Duplicate value: map[string]interface {}{"type":"Ready"}'}]
    ok = kube.request("PATCH", zkc_path(ns, "l", "status"), body={"status": {"conditions": [condition]}},
                      content_type=MERGE_PATCH)
    assert ok["status"]["conditions"] == [condition]
