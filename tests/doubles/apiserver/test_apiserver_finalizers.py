"""Finalizers, graceful deletion and namespace termination."""

from __future__ import annotations

import re
from typing import Any

from apiserver_helpers import WatchCollector, api_error, cm, zkc, zkc_path
from zkop_testing.apiserver import ApiServer
from zkop_testing.apiserver_fixtures import wait_for

from zkop.kube.client import JSON_PATCH, MERGE_PATCH, KubeClient, resource_path

JSON = dict[str, Any]


def test_finalizers_keep_a_deleted_object_until_removed(kube: KubeClient, crd: JSON, ns: str,
                                                        server: ApiServer) -> None:
    created = kube.request("POST", zkc_path(ns), body=zkc("a", finalizers=["zkop.example.com/cleanup",
                                                                          "other.example.com/x"]))
    rv = created["metadata"]["resourceVersion"]
    watch = WatchCollector(kube, zkc_path(ns), {"resourceVersion": rv})
    wait_for(lambda: server.open_watch_count == 1, message="watch open")

    terminating = kube.request("DELETE", zkc_path(ns, "a"))
    meta = terminating["metadata"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["deletionTimestamp"])
    assert meta["deletionGracePeriodSeconds"] == 0
    assert meta["generation"] == 2  # kube bumps generation when deletion starts
    again = kube.request("DELETE", zkc_path(ns, "a"))  # no-op, answers the object
    assert again["metadata"]["resourceVersion"] == meta["resourceVersion"]
    status, body = api_error(lambda: kube.request("PATCH", zkc_path(ns, "a"), body={"metadata": {"finalizers": [
        "zkop.example.com/cleanup", "other.example.com/x", "late.example.com/y"]}}, content_type=MERGE_PATCH))
    assert status == 422
    assert body["message"] == ('ZooKeeperConfig.platform.example.com "a" is invalid: metadata.finalizers: Forbidden: '
                               'no new finalizers can be added if the object is being deleted, found new finalizers '
                               '[]string{"late.example.com/y"}')
    # removing one of two finalizers keeps the object
    one = kube.request("PATCH", zkc_path(ns, "a"), body=[{"op": "remove", "path": "/metadata/finalizers/1"}],
                       content_type=JSON_PATCH)
    assert one["metadata"]["finalizers"] == ["zkop.example.com/cleanup"]
    # spec changes are still allowed while terminating
    kube.request("PATCH", zkc_path(ns, "a"), body={"spec": {"data": "late"}}, content_type=MERGE_PATCH)
    # removing the last one deletes it; the caller gets its own object back
    last = kube.request("PATCH", zkc_path(ns, "a"), body={"metadata": {"finalizers": None}}, content_type=MERGE_PATCH)
    assert "finalizers" not in last["metadata"]
    status, _ = api_error(lambda: kube.request("GET", zkc_path(ns, "a")))
    assert status == 404

    events = watch.events
    wait_for(lambda: events and events[-1]["type"] == "DELETED", message="DELETED event")
    watch.stop(server)
    types = watch.types()
    assert types == ["MODIFIED", "MODIFIED", "MODIFIED", "DELETED"]
    assert events[0]["object"]["metadata"]["deletionTimestamp"] == meta["deletionTimestamp"]
    deleted = events[-1]["object"]
    # like kube-apiserver: the DELETED event carries the last stored state (with the deletion's resourceVersion)
    assert deleted["metadata"]["finalizers"] == ["zkop.example.com/cleanup"] and deleted["spec"]["data"] == "late"
    assert int(deleted["metadata"]["resourceVersion"]) == server.resource_version


def test_update_with_put_removing_finalizers(kube: KubeClient, ns: str) -> None:
    path = resource_path("", "v1", "configmaps", ns)
    kube.request("POST", path, body=cm("a", finalizers=["x.example.com/f"]))
    status = kube.request("DELETE", f"{path}/a")
    assert status["kind"] == "ConfigMap" and status["metadata"]["deletionTimestamp"]
    assert "generation" not in status["metadata"]
    current = kube.request("GET", f"{path}/a")
    current["metadata"]["finalizers"] = []
    kube.request("PUT", f"{path}/a", body=current)
    assert kube.request("GET", path)["items"] == []


def test_deleting_a_namespace_terminates_its_contents(kube: KubeClient, crd: JSON, ns: str) -> None:
    kube.request("POST", resource_path("", "v1", "configmaps", ns), body=cm("plain"))
    kube.request("POST", zkc_path(ns), body=zkc("held", finalizers=["zkop.example.com/cleanup"]))
    answer = kube.request("DELETE", f"/api/v1/namespaces/{ns}")
    assert answer["kind"] == "Namespace" and answer["status"]["phase"] == "Terminating"
    assert answer["metadata"]["deletionTimestamp"]
    # the namespace waits for the finalizer of "held"; "plain" is gone already
    assert kube.request("GET", resource_path("", "v1", "configmaps", ns))["items"] == []
    held = kube.request("GET", zkc_path(ns, "held"))
    assert held["metadata"]["deletionTimestamp"]
    assert kube.request("GET", f"/api/v1/namespaces/{ns}")["status"]["phase"] == "Terminating"
    status, body = api_error(lambda: kube.request("POST", resource_path("", "v1", "configmaps", ns), body=cm("new")))
    assert status == 403 and body["reason"] == "Forbidden"
    assert body["message"] == (f'configmaps "new" is forbidden: unable to create new content in namespace {ns} '
                               "because it is being terminated")
    kube.request("PATCH", zkc_path(ns, "held"), body={"metadata": {"finalizers": None}}, content_type=MERGE_PATCH)
    status, _ = api_error(lambda: kube.request("GET", f"/api/v1/namespaces/{ns}"))
    assert status == 404


def test_empty_namespace_is_removed_at_once_and_system_namespaces_are_protected(kube: KubeClient, ns: str) -> None:
    kube.request("DELETE", f"/api/v1/namespaces/{ns}")
    status, _ = api_error(lambda: kube.request("GET", f"/api/v1/namespaces/{ns}"))
    assert status == 404
    status, body = api_error(lambda: kube.request("DELETE", "/api/v1/namespaces/default"))
    assert status == 403 and body["message"] == 'namespaces "default" is forbidden: this namespace may not be deleted'
