"""API-server semantics zkop relies on, checked against zkop_testing.apiserver or a real cluster.

Run against a cluster with ``ZKOP_CONTRACT_KUBECONFIG=~/.kube/config pytest -m contract tests/contract``.
Resource versions are compared for equality only (they are opaque on a real cluster).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import urllib3
from contract_support import GROUP, PLURAL, VERSION, Cluster
from zkop_testing.apiserver_fixtures import wait_for
from zkop_testing.waiting import EVENTUALLY

from zkop.kube.client import JSON_PATCH, MERGE_PATCH, ApiException, KubeClient, resource_path

pytestmark = pytest.mark.contract

JSON = dict[str, Any]
SMP = "application/strategic-merge-patch+json"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def zkc_path(ns: str, name: str | None = None, subresource: str | None = None) -> str:
    return resource_path(GROUP, VERSION, PLURAL, ns, name, subresource)


def zkc(name: str, **metadata: Any) -> JSON:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ZooKeeperConfig",
            "metadata": {"name": name, **metadata}, "spec": {"path": f"/contract/{name}", "data": "v1"}}


def error(call: Callable[[], Any]) -> tuple[int, JSON]:
    with pytest.raises(ApiException) as info:
        call()
    return int(info.value.status), json.loads(info.value.body or "{}")


def collect(kube: KubeClient, path: str, query: dict[str, Any], until: Callable[[list[JSON]], bool],
            timeout_seconds: int = 20) -> list[JSON]:
    """Watch until ``until(events)`` holds (then close the stream) or the server ends the watch."""
    events: list[JSON] = []
    for event in kube.watch(path, query={**query, "timeoutSeconds": timeout_seconds},
                            timeout=(10, timeout_seconds + 10)):
        events.append(event)
        if until(events):
            break
    return events


def test_defaults_are_applied_on_create(cluster: Cluster) -> None:
    created = cluster.kube.request("POST", zkc_path(cluster.namespace), body=zkc(unique("d")))
    assert created["spec"]["encoding"] == "utf-8" and created["spec"]["syncPolicy"] == "createOrUpdate"
    assert created["metadata"]["generation"] == 1


def test_stale_resource_version_is_a_conflict(cluster: Cluster) -> None:
    kube, ns, name = cluster.kube, cluster.namespace, unique("c")
    first = kube.request("POST", zkc_path(ns), body=zkc(name))
    kube.request("PUT", zkc_path(ns, name), body={**first, "spec": {**first["spec"], "data": "v2"}})
    status, body = error(lambda: kube.request("PUT", zkc_path(ns, name),
                                              body={**first, "spec": {**first["spec"], "data": "v3"}}))
    assert status == 409 and body["reason"] == "Conflict"
    status, body = error(lambda: kube.request("PATCH", zkc_path(ns, name), body={
        "metadata": {"resourceVersion": first["metadata"]["resourceVersion"]}, "spec": {"data": "v4"}},
        content_type=MERGE_PATCH))
    assert status == 409 and body["reason"] == "Conflict"
    status, body = error(lambda: kube.request("PUT", zkc_path(ns, name), body=zkc(name)))
    assert status == 422 and body["details"]["causes"][0]["field"] == "metadata.resourceVersion"


def test_errors_have_kube_status_bodies(cluster: Cluster) -> None:
    kube, ns, name = cluster.kube, cluster.namespace, unique("e")
    kube.request("POST", zkc_path(ns), body=zkc(name))
    status, body = error(lambda: kube.request("POST", zkc_path(ns), body=zkc(name)))
    assert status == 409 and body["reason"] == "AlreadyExists" and body["details"]["name"] == name
    status, body = error(lambda: kube.request("GET", zkc_path(ns, unique("missing"))))
    assert status == 404 and body["reason"] == "NotFound" and body["kind"] == "Status"
    bad = zkc(unique("bad"))
    bad["spec"]["encoding"] = "latin1"
    status, body = error(lambda: kube.request("POST", zkc_path(ns), body=bad))
    assert status == 422 and body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "spec.encoding"
    assert body["details"]["causes"][0]["reason"] == "FieldValueNotSupported"
    status, body = error(lambda: kube.request("PATCH", zkc_path(ns, name), body={"spec": {"data": "x"}},
                                              content_type=SMP))
    assert status == 415
    status, body = error(lambda: kube.request("PATCH", zkc_path(ns, name), body=[
        {"op": "test", "path": "/spec/data", "value": "not-this"}], content_type=JSON_PATCH))
    assert status == 422


def test_create_in_a_missing_namespace_is_not_found(cluster: Cluster) -> None:
    missing = unique("no-such-ns")
    status, body = error(lambda: cluster.kube.request("POST", zkc_path(missing), body=zkc("x")))
    assert status == 404 and body["reason"] == "NotFound"
    assert body["details"] == {"name": missing, "kind": "namespaces"}


def test_generation_tracks_spec_only(cluster: Cluster) -> None:
    kube, ns, name = cluster.kube, cluster.namespace, unique("g")
    kube.request("POST", zkc_path(ns), body=zkc(name))
    labelled = kube.request("PATCH", zkc_path(ns, name), body={"metadata": {"labels": {"a": "b"}}},
                            content_type=MERGE_PATCH)
    assert labelled["metadata"]["generation"] == 1
    changed = kube.request("PATCH", zkc_path(ns, name), body={"spec": {"data": "v2"}}, content_type=MERGE_PATCH)
    assert changed["metadata"]["generation"] == 2
    status = kube.request("PATCH", zkc_path(ns, name, "status"), body={"status": {"observedGeneration": 2}},
                          content_type=MERGE_PATCH)
    assert status["metadata"]["generation"] == 2


def test_no_op_writes_keep_the_resource_version(cluster: Cluster) -> None:
    kube, ns, name = cluster.kube, cluster.namespace, unique("n")
    created = kube.request("POST", zkc_path(ns), body=zkc(name))
    # The create stored no status (the status subresource drops it) but reads default it; the first
    # write stores that default, even when it changes nothing else: a new resourceVersion.
    first = kube.request("PUT", zkc_path(ns, name), body=created)
    assert first["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]
    assert first["status"] == created["status"]
    same = kube.request("PUT", zkc_path(ns, name), body=first)
    assert same["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    same = kube.request("PATCH", zkc_path(ns, name), body={"spec": {"data": "v1"}}, content_type=MERGE_PATCH)
    assert same["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


def test_first_write_after_create_materialises_read_defaults(cluster: Cluster) -> None:
    kube, ns, name = cluster.kube, cluster.namespace, unique("m")
    created = kube.request("POST", zkc_path(ns), body=zkc(name))
    assert created["status"] == {"state": "Pending", "observedGeneration": -1}
    written = kube.request("PATCH", zkc_path(ns, name), body={"spec": {"data": "v1"}}, content_type=MERGE_PATCH)
    assert written["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]
    assert written["metadata"]["generation"] == 1
    events = collect(kube, zkc_path(ns), {"resourceVersion": created["metadata"]["resourceVersion"],
                                          "fieldSelector": f"metadata.name={name}"}, lambda evs: True)
    assert [e["type"] for e in events] == ["MODIFIED"]
    assert events[0]["object"]["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]


def test_status_subresource_splits_spec_and_status(cluster: Cluster) -> None:
    kube, ns, name = cluster.kube, cluster.namespace, unique("s")
    body = zkc(name)
    body["status"] = {"observedGeneration": 5}
    created = kube.request("POST", zkc_path(ns), body=body)
    # the request's status is dropped (a CRD may still default one, which then shows on read)
    assert created.get("status", {}).get("observedGeneration") != 5
    ignored = kube.request("PATCH", zkc_path(ns, name), body={"status": {"observedGeneration": 1}},
                           content_type=MERGE_PATCH)
    assert ignored.get("status") == created.get("status")
    again = kube.request("PATCH", zkc_path(ns, name), body={"status": {"observedGeneration": 1}},
                         content_type=MERGE_PATCH)
    assert again["metadata"]["resourceVersion"] == ignored["metadata"]["resourceVersion"]
    written = kube.request("PATCH", zkc_path(ns, name, "status"), body={
        "status": {"observedGeneration": 1}, "spec": {"data": "ignored"}, "metadata": {"labels": {"x": "y"}}},
        content_type=MERGE_PATCH)
    assert written["status"]["observedGeneration"] == 1
    assert written["spec"]["data"] == "v1" and "labels" not in written["metadata"]


def test_finalizers_delay_deletion(cluster: Cluster) -> None:
    kube, ns, name = cluster.kube, cluster.namespace, unique("f")
    created = kube.request("POST", zkc_path(ns), body=zkc(name, finalizers=["zkop.example.com/contract"]))
    start = created["metadata"]["resourceVersion"]
    terminating = kube.request("DELETE", zkc_path(ns, name))
    assert terminating["metadata"]["deletionTimestamp"]
    assert terminating["metadata"]["generation"] == 2
    again = kube.request("DELETE", zkc_path(ns, name))
    assert again["metadata"]["resourceVersion"] == terminating["metadata"]["resourceVersion"]
    status, body = error(lambda: kube.request("PATCH", zkc_path(ns, name), body={"metadata": {"finalizers": [
        "zkop.example.com/contract", "zkop.example.com/late"]}}, content_type=MERGE_PATCH))
    assert status == 422 and body["reason"] == "Invalid"
    kube.request("PATCH", zkc_path(ns, name), body={"metadata": {"finalizers": None}}, content_type=MERGE_PATCH)
    status, _ = error(lambda: kube.request("GET", zkc_path(ns, name)))
    assert status == 404
    events = collect(kube, zkc_path(ns), {"resourceVersion": start, "fieldSelector": f"metadata.name={name}"},
                     lambda evs: evs[-1]["type"] == "DELETED")
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]


def test_label_selectors_on_list_and_watch(cluster: Cluster) -> None:
    kube, ns = cluster.kube, cluster.namespace
    app = unique("app")
    start = kube.request("GET", zkc_path(ns))["metadata"]["resourceVersion"]
    a, b = unique("a"), unique("b")
    kube.request("POST", zkc_path(ns), body=zkc(a, labels={"app": app, "tier": "x"}))
    kube.request("POST", zkc_path(ns), body=zkc(b, labels={"app": app, "tier": "y"}))
    listing = kube.request("GET", zkc_path(ns), query={"labelSelector": f"app={app},tier in (x)"})
    assert [i["metadata"]["name"] for i in listing["items"]] == [a]
    kube.request("PATCH", zkc_path(ns, a), body={"metadata": {"labels": {"tier": "z"}}}, content_type=MERGE_PATCH)
    kube.request("PATCH", zkc_path(ns, b), body={"metadata": {"labels": {"tier": "x"}}}, content_type=MERGE_PATCH)
    events = collect(kube, zkc_path(ns), {"resourceVersion": start, "labelSelector": f"app={app},tier=x"},
                     lambda evs: len(evs) >= 3)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", a), ("DELETED", a),
                                                                           ("ADDED", b)]


def test_list_then_watch_misses_nothing(cluster: Cluster) -> None:
    kube, ns = cluster.kube, cluster.namespace
    app = unique("lw")
    listing = kube.request("GET", zkc_path(ns), query={"labelSelector": f"app={app}"})
    names = [unique("o") for _ in range(3)]
    for name in names:
        kube.request("POST", zkc_path(ns), body=zkc(name, labels={"app": app}))
    events = collect(kube, zkc_path(ns), {"resourceVersion": listing["metadata"]["resourceVersion"],
                                          "labelSelector": f"app={app}"}, lambda evs: len(evs) >= 3)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", n) for n in names]


def test_watch_from_an_ancient_version_is_gone(cluster: Cluster) -> None:
    events = collect(cluster.kube, zkc_path(cluster.namespace), {"resourceVersion": "1"}, lambda evs: True)
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert status["kind"] == "Status" and status["code"] == 410 and status["reason"] == "Expired"
    assert status["message"].startswith("too old resource version: 1 (")


def test_bookmarks_arrive(cluster: Cluster) -> None:
    # kube-apiserver sends one 2 s before timeoutSeconds (and every minute), but only once the resource
    # version is past the watch's start (cache_watcher.go): a write the selector hides moves it.
    kube, ns = cluster.kube, cluster.namespace
    start = kube.request("GET", zkc_path(ns))["metadata"]["resourceVersion"]
    hidden = unique("hidden")
    results: list[list[JSON]] = []
    watcher = threading.Thread(target=lambda: results.append(collect(
        kube, zkc_path(ns), {"allowWatchBookmarks": "true", "resourceVersion": start,
                             "labelSelector": f"app={hidden}"},
        lambda evs: evs[-1]["type"] == "BOOKMARK", timeout_seconds=6)))
    watcher.start()
    time.sleep(0.5)
    kube.request("POST", zkc_path(ns), body=zkc(unique("b")))
    watcher.join(timeout=EVENTUALLY)
    events = results[0]
    assert [e["type"] for e in events] == ["BOOKMARK"]
    bookmark = events[-1]["object"]
    assert bookmark["kind"] == "ZooKeeperConfig" and bookmark["metadata"]["resourceVersion"] != start


def test_no_bookmark_while_the_resource_version_stands_still(cluster: Cluster) -> None:
    server = cluster.hooks()  # on a real cluster other writes move the version (etcd progress notify)
    kube, ns = cluster.kube, cluster.namespace
    start = kube.request("GET", zkc_path(ns))["metadata"]["resourceVersion"]
    events = collect(kube, zkc_path(ns), {"allowWatchBookmarks": "true", "resourceVersion": start},
                     lambda evs: True, timeout_seconds=3)
    assert events == [] and server.bookmark_interval == 60


def test_expired_history_gives_410_for_watch_and_exact_list(cluster: Cluster) -> None:
    server = cluster.hooks()
    kube, ns = cluster.kube, cluster.namespace
    rv = kube.request("POST", zkc_path(ns), body=zkc(unique("x")))["metadata"]["resourceVersion"]
    kube.request("POST", zkc_path(ns), body=zkc(unique("y")))
    server.expire_history()
    events = collect(kube, zkc_path(ns), {"resourceVersion": rv}, lambda evs: True)
    assert events[0]["object"]["code"] == 410
    status, body = error(lambda: kube.request("GET", zkc_path(ns), query={"resourceVersion": rv,
                                                                          "resourceVersionMatch": "Exact"}))
    assert status == 410 and body["reason"] == "Expired"


def test_dropped_watch_is_visible_to_the_client(cluster: Cluster) -> None:
    server = cluster.hooks()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            for _ in cluster.kube.watch(zkc_path(cluster.namespace), query={}, timeout=(5, 30)):
                pass
        except BaseException as exc:  # reported below
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    wait_for(lambda: server.open_watch_count == 1, message="watch open")
    server.drop_watches()
    thread.join(timeout=EVENTUALLY)
    # The stream ends at once: urllib3 reports the cut chunked body as ProtocolError, or, when the cut
    # falls between chunks before any byte of the next one, as a plain end of stream.
    assert not thread.is_alive(), "the client did not notice the dropped watch"
    assert all(isinstance(exc, urllib3.exceptions.ProtocolError) for exc in failure), failure


def test_injected_failures_are_status_errors(cluster: Cluster) -> None:
    server = cluster.hooks()
    server.fail_requests(1.0, codes=(500,), methods=["create"])
    try:
        status, body = error(lambda: cluster.kube.request("POST", zkc_path(cluster.namespace), body=zkc("z")))
        assert status == 500 and body["reason"] == "InternalError"
    finally:
        server.fail_requests(0)
    # Injection off: the next create succeeds in one request (no failure left over, nothing retried).
    creates = server.count_requests("create", "zookeeperconfigs")
    created = cluster.kube.request("POST", zkc_path(cluster.namespace), body=zkc("z"))
    assert created["metadata"]["name"] == "z"
    assert server.count_requests("create", "zookeeperconfigs") == creates + 1


def test_kubectls_server_side_apply_takes_over_fields_client_side_apply_left(cluster: Cluster) -> None:
    """A field owned by ``kubectl-client-side-apply`` whose live value is still the one in the
    ``last-applied-configuration`` annotation is no conflict for an apply by the field manager ``kubectl``,
    which the server forces and then writes into the annotation; any other manager gets the 409
    (``lastappliedmanager.go``, ``lastappliedupdater.go``: what Debian's kubectl 1.20 depends on)."""
    kube, ns, name = cluster.kube, cluster.namespace, unique("csa")
    path = resource_path("", "v1", "configmaps", ns, name)
    meta = {"name": name, "namespace": ns}
    applied: JSON = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"x": "1"}}
    annotation = "kubectl.kubernetes.io/last-applied-configuration"
    kube.request("POST", resource_path("", "v1", "configmaps", ns), query={"fieldManager": "kubectl-client-side-apply"},
                 body={**applied, "metadata": {**meta, "annotations": {annotation: json.dumps(applied)}}})
    changed = {**applied, "data": {"x": "2"}}

    def apply(manager: str) -> JSON:
        return kube.request("PATCH", path, body=changed, content_type="application/apply-patch+yaml",
                            query={"fieldManager": manager})

    status, body = error(lambda: apply("flux"))
    assert status == 409 and 'conflict with "kubectl-client-side-apply"' in body["message"] and ".data.x" in \
        body["message"]
    result = apply("kubectl")
    assert result["data"] == {"x": "2"}
    assert json.loads(result["metadata"]["annotations"][annotation]) == changed
    owners = {e["manager"]: e["fieldsV1"] for e in result["metadata"]["managedFields"]}
    assert "f:x" in owners["kubectl"]["f:data"] and "f:x" not in owners["kubectl-client-side-apply"].get("f:data", {})

    # A live value that no longer matches the annotation (a hand edit) is a conflict for kubectl too.
    kube.request("PATCH", path, body={"data": {"x": "3"}}, content_type=MERGE_PATCH, query={"fieldManager": "editor"})
    changed = {**applied, "data": {"x": "4"}}
    status, body = error(lambda: apply("kubectl"))
    assert status == 409 and 'conflict with "editor"' in body["message"]
