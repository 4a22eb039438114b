"""Verbs and metadata rules on built-in kinds, through the typed client and zkop's JSON client."""

from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime
from typing import Any

import kubernetes.client as k8s
import pytest
from apiserver_helpers import api_error, cm
from zkop_testing.apiserver import ApiServer

from zkop.kube.client import JSON_PATCH, MERGE_PATCH, KubeClient, resource_path

CM = "/api/v1/namespaces/{ns}/configmaps"
SMP = "application/strategic-merge-patch+json"


def cms(ns: str, name: str | None = None) -> str:
    return resource_path("", "v1", "configmaps", ns, name)


def test_create_get_list_update_delete_with_the_typed_client(core: Any, ns: str) -> None:
    created = core.create_namespaced_config_map(ns, k8s.V1ConfigMap(
        metadata=k8s.V1ObjectMeta(name="a", labels={"app": "x"}), data={"k": "v"}))
    assert created.metadata.namespace == ns and created.data == {"k": "v"}
    got = core.read_namespaced_config_map("a", ns)
    assert got.metadata.uid == created.metadata.uid
    listed = core.list_namespaced_config_map(ns)
    assert [i.metadata.name for i in listed.items] == ["a"]
    got.data["k"] = "w"
    replaced = core.replace_namespaced_config_map("a", ns, got)
    assert replaced.data == {"k": "w"}
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    patched = core.patch_namespaced_config_map("a", ns, {"data": {"extra": "1"}})
    assert patched.data == {"k": "w", "extra": "1"}
    status = core.delete_namespaced_config_map("a", ns)
    assert status["status"] == "Success"
    assert status["details"] == {"name": "a", "kind": "configmaps", "uid": created.metadata.uid}
    assert core.list_namespaced_config_map(ns).items == []


def test_server_sets_uid_timestamp_and_one_global_resource_version(kube: KubeClient, ns: str) -> None:
    before = int(kube.request("GET", "/api/v1/namespaces")["metadata"]["resourceVersion"])
    a = kube.request("POST", cms(ns), body=cm("a"))
    lease = kube.request("POST", resource_path("coordination.k8s.io", "v1", "leases", ns),
                         body={"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}})
    b = kube.request("POST", cms(ns), body=cm("b"))
    rvs = [int(o["metadata"]["resourceVersion"]) for o in (a, lease, b)]
    assert rvs == [before + 1, before + 2, before + 3]
    assert all(isinstance(o["metadata"]["resourceVersion"], str) for o in (a, lease, b))
    assert uuid.UUID(a["metadata"]["uid"]).version == 4
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", a["metadata"]["creationTimestamp"])
    assert "generation" not in a["metadata"]  # like kube: ConfigMaps, Services, Leases have no generation
    listed = kube.request("GET", cms(ns))
    assert listed["metadata"]["resourceVersion"] == str(before + 3)


def test_server_set_fields_in_requests_are_ignored(kube: KubeClient, ns: str) -> None:
    body = cm("a", uid="not-a-uuid", creationTimestamp="2000-01-01T00:00:00Z", generation=7,
              deletionTimestamp="2000-01-01T00:00:00Z", managedFields=[{"manager": "me"}])
    created = kube.request("POST", cms(ns), body=body)
    meta = created["metadata"]
    assert meta["uid"] != "not-a-uuid" and meta["creationTimestamp"] != "2000-01-01T00:00:00Z"
    assert "deletionTimestamp" not in meta and "generation" not in meta
    # managedFields are the server's record (fieldManager / User-Agent), never the client's
    assert [e["manager"] for e in meta["managedFields"]] != ["me"]
    # a PUT cannot change them either
    updated = kube.request("PUT", cms(ns, "a"), body={**created, "metadata": {
        **meta, "creationTimestamp": "2001-01-01T00:00:00Z", "deletionTimestamp": "2001-01-01T00:00:00Z"},
        "data": {"k": "changed"}})
    assert updated["metadata"]["creationTimestamp"] == meta["creationTimestamp"]
    assert "deletionTimestamp" not in updated["metadata"]
    status, body = api_error(lambda: kube.request("PUT", cms(ns, "a"), body={
        **updated, "metadata": {**updated["metadata"], "uid": str(uuid.uuid4())}}))
    assert status == 422 and body["details"]["causes"][0]["field"] == "metadata.uid"


def test_resource_version_on_create_is_rejected_like_etcd3_store(kube: KubeClient, ns: str) -> None:
    status, body = api_error(lambda: kube.request("POST", cms(ns), body=cm("a", resourceVersion="5")))
    assert status == 500
    assert body["message"] == "resourceVersion should not be set on objects to be created"


def test_already_exists_and_not_found_status_bodies(kube: KubeClient, ns: str) -> None:
    kube.request("POST", cms(ns), body=cm("a"))
    status, body = api_error(lambda: kube.request("POST", cms(ns), body=cm("a")))
    assert status == 409
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": 'configmaps "a" already exists', "reason": "AlreadyExists",
                    "details": {"name": "a", "kind": "configmaps"}, "code": 409}
    for method, body_ in (("GET", None), ("PUT", cm("missing")), ("PATCH", {"data": {}}), ("DELETE", None)):
        def request_missing(m: str = method, b: Any = body_) -> Any:
            return kube.request(m, cms(ns, "missing"), body=b, content_type=MERGE_PATCH if m == "PATCH" else None)

        status, err = api_error(request_missing)
        assert status == 404, method
        assert err["reason"] == "NotFound" and err["message"] == 'configmaps "missing" not found'
        assert err["details"] == {"name": "missing", "kind": "configmaps"}
    lease = resource_path("coordination.k8s.io", "v1", "leases", ns, "nope")
    _, err = api_error(lambda: kube.request("GET", lease))
    assert err["message"] == 'leases.coordination.k8s.io "nope" not found'
    assert err["details"] == {"name": "nope", "group": "coordination.k8s.io", "kind": "leases"}


def test_create_in_a_missing_namespace_is_not_found(kube: KubeClient, core: Any) -> None:
    status, body = api_error(lambda: kube.request("POST", cms("no-such-ns"), body=cm("a")))
    assert status == 404
    assert body["message"] == 'namespaces "no-such-ns" not found'
    assert body["details"] == {"name": "no-such-ns", "kind": "namespaces"}
    # reads in a missing namespace are plain not-found / empty
    assert core.list_namespaced_config_map("no-such-ns").items == []


def test_namespace_and_name_mismatches_are_bad_requests(kube: KubeClient, ns: str) -> None:
    status, body = api_error(lambda: kube.request("POST", cms(ns), body=cm("a", namespace="other")))
    assert status == 400
    assert body["message"] == "the namespace of the provided object does not match the namespace sent on the request"
    created = kube.request("POST", cms(ns), body=cm("a"))
    status, body = api_error(lambda: kube.request("PUT", cms(ns, "a"), body={
        **created, "metadata": {**created["metadata"], "name": "b"}}))
    assert status == 400
    assert body["message"] == "the name of the object (b) does not match the name on the URL (a)"
    status, _ = api_error(lambda: kube.request("POST", cms(ns), body={**cm("x"), "kind": "Secret"}))
    assert status == 400
    status, _ = api_error(lambda: kube.request("POST", cms(ns), body={**cm("x"), "apiVersion": "v2"}))
    assert status == 400


def test_generate_name(kube: KubeClient, ns: str) -> None:
    a = kube.request("POST", cms(ns), body={"metadata": {"generateName": "job-"}, "data": {}})
    b = kube.request("POST", cms(ns), body={"metadata": {"generateName": "job-"}, "data": {}})
    assert re.fullmatch(r"job-[a-z0-9]{5}", a["metadata"]["name"])
    assert a["metadata"]["name"] != b["metadata"]["name"]
    assert a["metadata"]["generateName"] == "job-"
    status, body = api_error(lambda: kube.request("POST", cms(ns), body={"metadata": {}, "data": {}}))
    assert status == 422
    assert body["details"]["causes"] == [{"reason": "FieldValueRequired", "field": "metadata.name",
                                          "message": "Required value: name or generateName is required"}]


def test_name_validation(kube: KubeClient, ns: str) -> None:
    status, body = api_error(lambda: kube.request("POST", cms(ns), body=cm("Bad_Name")))
    assert status == 422 and body["reason"] == "Invalid"
    assert body["message"].startswith('ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": '
                                      "a lowercase RFC 1123 subdomain must consist of")
    assert body["details"]["kind"] == "ConfigMap" and body["details"]["name"] == "Bad_Name"
    # Services are DNS-1035 labels: no leading digit, no dots
    svc = {"metadata": {"name": "1svc"}, "spec": {"ports": [{"port": 80}]}}
    status, body = api_error(lambda: kube.request("POST", resource_path("", "v1", "services", ns), body=svc))
    assert status == 422 and "DNS-1035 label" in body["message"]
    # Namespaces are DNS-1123 labels: no dots
    status, body = api_error(lambda: kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": "a.b"}}))
    assert status == 422 and "RFC 1123 label" in body["message"]
    # labels and finalizers are validated too
    status, body = api_error(lambda: kube.request("POST", cms(ns), body=cm("x", labels={"ok": "bad value!"})))
    assert status == 422 and body["details"]["causes"][0]["field"] == "metadata.labels"
    status, body = api_error(lambda: kube.request("POST", cms(ns), body=cm("x", finalizers=["a/b/c"])))
    assert status == 422 and body["details"]["causes"][0]["field"] == "metadata.finalizers[0]"


def test_update_with_a_stale_resource_version_conflicts(kube: KubeClient, ns: str) -> None:
    first = kube.request("POST", cms(ns), body=cm("a"))
    kube.request("PUT", cms(ns, "a"), body={**first, "data": {"k": "2"}})
    status, body = api_error(lambda: kube.request("PUT", cms(ns, "a"), body={**first, "data": {"k": "3"}}))
    assert status == 409 and body["reason"] == "Conflict"
    assert body["message"] == ('Operation cannot be fulfilled on configmaps "a": the object has been modified; '
                               "please apply your changes to the latest version and try again")
    assert body["details"] == {"name": "a", "kind": "configmaps"}


def test_update_without_resource_version_is_unconditional_for_built_ins(kube: KubeClient, ns: str) -> None:
    kube.request("POST", cms(ns), body=cm("a"))
    updated = kube.request("PUT", cms(ns, "a"), body=cm("a", data={"k": "unconditional"}))
    assert updated["data"] == {"k": "unconditional"}


def test_no_op_writes_do_not_bump_the_resource_version(kube: KubeClient, server: ApiServer, ns: str) -> None:
    created = kube.request("POST", cms(ns), body=cm("a", labels={"x": "y"}))
    rv = server.resource_version
    same = kube.request("PUT", cms(ns, "a"), body=created)
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    patched = kube.request("PATCH", cms(ns, "a"), body={"data": {"k": "v"}}, content_type=MERGE_PATCH)
    assert patched["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    # empty optional maps/lists are dropped like Go's omitempty, so they are no change either
    kube.request("PATCH", cms(ns, "a"), body={"metadata": {"annotations": {}, "finalizers": []}},
                 content_type=MERGE_PATCH)
    assert server.resource_version == rv
    assert server.write_counts["update"] == 1 and server.write_counts["patch"] == 2


def test_merge_json_and_strategic_merge_patches(kube: KubeClient, core: Any, ns: str) -> None:
    kube.request("POST", cms(ns), body=cm("a", data={"a": "1", "b": "2"}, finalizers=["x.io/one"]))
    merged = kube.request("PATCH", cms(ns, "a"), body={"data": {"a": None, "c": "3"}}, content_type=MERGE_PATCH)
    assert merged["data"] == {"b": "2", "c": "3"}
    jp = kube.request("PATCH", cms(ns, "a"), body=[{"op": "replace", "path": "/data/b", "value": "20"},
                                                   {"op": "add", "path": "/metadata/labels", "value": {"l": "1"}}],
                      content_type=JSON_PATCH)
    assert jp["data"]["b"] == "20" and jp["metadata"]["labels"] == {"l": "1"}
    # strategic merge: finalizers merge as a set, unlike a merge patch
    smp = kube.request("PATCH", cms(ns, "a"), body={"metadata": {"finalizers": ["x.io/two"]}}, content_type=SMP)
    assert smp["metadata"]["finalizers"] == ["x.io/one", "x.io/two"]
    smp = kube.request("PATCH", cms(ns, "a"), body={"metadata": {"$deleteFromPrimitiveList/finalizers": ["x.io/one"]}},
                       content_type=SMP)
    assert smp["metadata"]["finalizers"] == ["x.io/two"]
    mp = kube.request("PATCH", cms(ns, "a"), body={"metadata": {"finalizers": ["x.io/three"]}},
                      content_type=MERGE_PATCH)
    assert mp["metadata"]["finalizers"] == ["x.io/three"]
    # the typed client sends dict patches as strategic merge patches
    typed = core.patch_namespaced_config_map("a", ns, {"metadata": {"finalizers": None}, "data": {"c": None}})
    assert typed.metadata.finalizers is None and typed.data == {"b": "20"}


def test_failed_json_patch_test_operation_is_unprocessable(kube: KubeClient, server: ApiServer, ns: str) -> None:
    kube.request("POST", cms(ns), body=cm("a"))
    status, body = api_error(lambda: kube.request(
        "PATCH", cms(ns, "a"), body=[{"op": "test", "path": "/data/k", "value": "other"}], content_type=JSON_PATCH))
    assert status == 422 and body["reason"] == "Invalid"
    assert body["message"] == "the server rejected our request due to an error in our request"
    assert body["details"]["causes"][0]["reason"] == "UnexpectedServerResponse"
    # (a dict body with the JSON patch type is turned into a strategic merge patch by the client: use raw HTTP)
    request = urllib.request.Request(f"{server.url}{cms(ns, 'a')}", data=b'{"op": "test"}', method="PATCH",
                                     headers={"Content-Type": JSON_PATCH})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=5)
    assert info.value.code == 400
    request = urllib.request.Request(f"{server.url}{cms(ns, 'a')}", data=b"{}", method="PATCH",
                                     headers={"Content-Type": "text/plain"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=5)
    assert info.value.code == 415
    assert json.loads(info.value.read())["reason"] == "UnsupportedMediaType"


def test_patch_resource_version_is_a_precondition(kube: KubeClient, ns: str) -> None:
    created = kube.request("POST", cms(ns), body=cm("a"))
    rv = created["metadata"]["resourceVersion"]
    kube.request("PATCH", cms(ns, "a"), body={"data": {"k": "2"}}, content_type=MERGE_PATCH)
    status, body = api_error(lambda: kube.request(
        "PATCH", cms(ns, "a"), body={"metadata": {"resourceVersion": rv}, "data": {"k": "3"}},
        content_type=MERGE_PATCH))
    assert status == 409 and body["reason"] == "Conflict"
    current = kube.request("GET", cms(ns, "a"))["metadata"]["resourceVersion"]
    ok = kube.request("PATCH", cms(ns, "a"), body={"metadata": {"resourceVersion": current}, "data": {"k": "3"}},
                      content_type=MERGE_PATCH)
    assert ok["data"] == {"k": "3"}


def test_delete_answers_status_or_the_object_like_kube(kube: KubeClient, ns: str) -> None:
    kube.request("POST", cms(ns), body=cm("a"))
    answer = kube.request("DELETE", cms(ns, "a"))
    assert answer["kind"] == "Status" and answer["status"] == "Success"
    svc = kube.request("POST", resource_path("", "v1", "services", ns),
                       body={"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}})
    deleted = kube.request("DELETE", resource_path("", "v1", "services", ns, "s"))
    assert deleted["kind"] == "Service" and deleted["metadata"]["uid"] == svc["metadata"]["uid"]
    assert int(deleted["metadata"]["resourceVersion"]) > int(svc["metadata"]["resourceVersion"])


def test_delete_preconditions(kube: KubeClient, ns: str) -> None:
    created = kube.request("POST", cms(ns), body=cm("a"))
    status, body = api_error(lambda: kube.request("DELETE", cms(ns, "a"), body={
        "kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": str(uuid.uuid4())}}))
    assert status == 409 and "the UID in the precondition" in body["message"]
    status, body = api_error(lambda: kube.request("DELETE", cms(ns, "a"), body={
        "preconditions": {"resourceVersion": "1"}}))
    assert status == 409 and "the ResourceVersion in the precondition (1)" in body["message"]
    kube.request("DELETE", cms(ns, "a"), body={"preconditions": {"uid": created["metadata"]["uid"]}})


def test_delete_collection_with_a_label_selector(kube: KubeClient, ns: str) -> None:
    for name, tier in (("a", "web"), ("b", "web"), ("c", "db")):
        kube.request("POST", cms(ns), body=cm(name, labels={"tier": tier}))
    deleted = kube.request("DELETE", cms(ns), query={"labelSelector": "tier=web"})
    assert deleted["kind"] == "ConfigMapList"
    assert [i["metadata"]["name"] for i in deleted["items"]] == ["a", "b"]
    assert [i["metadata"]["name"] for i in kube.request("GET", cms(ns))["items"]] == ["c"]


def test_dry_run_does_not_persist(kube: KubeClient, server: ApiServer, ns: str) -> None:
    rv = server.resource_version
    created = kube.request("POST", cms(ns), body=cm("a"), query={"dryRun": "All"})
    assert created["metadata"]["name"] == "a" and "resourceVersion" not in created["metadata"]
    assert server.resource_version == rv
    status, _ = api_error(lambda: kube.request("GET", cms(ns, "a")))
    assert status == 404
    status, _ = api_error(lambda: kube.request("POST", cms(ns), body=cm("a"), query={"dryRun": "Maybe"}))
    assert status == 400


def test_unknown_fields_are_dropped_and_wrong_types_rejected_for_built_ins(kube: KubeClient, ns: str) -> None:
    created = kube.request("POST", cms(ns), body={**cm("a"), "bogus": 1, "metadata": {"name": "a", "junk": True}})
    assert "bogus" not in created and "junk" not in created["metadata"]
    status, body = api_error(lambda: kube.request("POST", cms(ns), body={**cm("b"), "data": {"k": 5}}))
    assert status == 400 and body["reason"] == "BadRequest"
    assert body["message"].startswith('ConfigMap in version "v1" cannot be handled as a ConfigMap')


def test_secrets_string_data_base64_and_immutable_type(kube: KubeClient, core: Any, ns: str) -> None:
    path = resource_path("", "v1", "secrets", ns)
    secret = kube.request("POST", path, body={"metadata": {"name": "s"}, "data": {"a": base64.b64encode(b"1").decode()},
                                              "stringData": {"b": "two", "a": "one"}})
    assert secret["type"] == "Opaque" and "stringData" not in secret
    assert {k: base64.b64decode(v) for k, v in secret["data"].items()} == {"a": b"one", "b": b"two"}
    typed = core.read_namespaced_secret("s", ns)
    assert base64.b64decode(typed.data["b"]) == b"two"
    status, body = api_error(lambda: kube.request("POST", path, body={"metadata": {"name": "t"},
                                                                      "data": {"a": "not base64!"}}))
    assert status == 400
    status, body = api_error(lambda: kube.request("PATCH", f"{path}/s", body={"type": "kubernetes.io/tls"},
                                                  content_type=MERGE_PATCH))
    assert status == 422 and {c["field"] for c in body["details"]["causes"]} >= {"type"}
    patched = kube.request("PATCH", f"{path}/s", body={"stringData": {"c": "3"}}, content_type=MERGE_PATCH)
    assert set(patched["data"]) == {"a", "b", "c"}
    status, _ = api_error(lambda: kube.request("POST", path, body={"metadata": {"name": "bad"},
                                                                   "data": {"no spaces": "eA=="}}))
    assert status == 422


def test_immutable_config_maps(kube: KubeClient, ns: str) -> None:
    kube.request("POST", cms(ns), body={**cm("a"), "immutable": True})
    status, body = api_error(lambda: kube.request("PATCH", cms(ns, "a"), body={"data": {"k": "x"}},
                                                  content_type=MERGE_PATCH))
    assert status == 422 and "field is immutable when `immutable` is set" in body["message"]
    labelled = kube.request("PATCH", cms(ns, "a"), body={"metadata": {"labels": {"ok": "yes"}}},
                            content_type=MERGE_PATCH)
    assert labelled["metadata"]["labels"] == {"ok": "yes"}


def test_leases_use_micro_time(api: Any, ns: str) -> None:
    coordination = k8s.CoordinationV1Api(api)
    now = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    lease = coordination.create_namespaced_lease(ns, k8s.V1Lease(
        metadata=k8s.V1ObjectMeta(name="leader"),
        spec=k8s.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15, renew_time=now, acquire_time=now,
                             lease_transitions=0)))
    assert lease.spec is not None
    assert lease.spec.renew_time == now and lease.spec.lease_transitions == 0
    raw = k8s.CustomObjectsApi(api).api_client.call_api(
        "GET", f"{api.configuration.host}/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/leader")
    assert b'"renewTime":"2024-05-06T07:08:09.123456Z"' in raw.read()
    status = None
    try:
        coordination.patch_namespaced_lease("leader", ns, {"spec": {"leaseDurationSeconds": 0}})
    except k8s.ApiException as exc:
        status = exc.status
    assert status == 422


def test_micro_time_takes_exactly_six_fractional_digits(kube: KubeClient, ns: str) -> None:
    # apimachinery pkg/apis/meta/v1/micro_time.go UnmarshalJSON: time.Parse(RFC3339Micro, ...).
    leases = resource_path("coordination.k8s.io", "v1", "leases", ns)
    for i, text in enumerate(("2024-01-01T00:00:00Z", "2024-01-01T00:00:00.123Z", "2024-01-01T00:00:00.1234567Z")):
        def create(name: str = f"l{i}", renew: str = text) -> Any:
            return kube.request("POST", leases, body={"metadata": {"name": name}, "spec": {"renewTime": renew}})

        status, body = api_error(create)
        assert status == 400 and "2006-01-02T15:04:05.000000Z07:00" in body["message"]
    ok = kube.request("POST", leases, body={"metadata": {"name": "ok"},
                                            "spec": {"renewTime": "2024-01-01T01:00:00.000000+01:00"}})
    assert ok["spec"]["renewTime"] == "2024-01-01T00:00:00.000000Z"


def test_naive_timestamps_are_rejected(kube: KubeClient, ns: str) -> None:
    status, _ = api_error(lambda: kube.request(
        "POST", resource_path("coordination.k8s.io", "v1", "leases", ns),
        body={"metadata": {"name": "l"}, "spec": {"renewTime": "2024-01-01T00:00:00.000000"}}))
    assert status == 400


def test_core_and_events_k8s_io_events_share_storage(kube: KubeClient, api: Any, ns: str) -> None:
    core_event = kube.request("POST", resource_path("", "v1", "events", ns), body={
        "metadata": {"name": "e1"}, "involvedObject": {"kind": "ConfigMap", "name": "a", "namespace": ns},
        "reason": "Synced", "message": "done", "type": "Normal", "source": {"component": "zkop"}})
    assert core_event["message"] == "done"
    v1 = kube.request("GET", resource_path("events.k8s.io", "v1", "events", ns, "e1"))
    assert v1["apiVersion"] == "events.k8s.io/v1" and v1["note"] == "done"
    assert v1["regarding"]["name"] == "a" and "message" not in v1
    events_api = k8s.EventsV1Api(api)
    created = events_api.create_namespaced_event(ns, k8s.EventsV1Event(
        metadata=k8s.V1ObjectMeta(name="e2"), event_time=datetime.now(UTC), reporting_controller="zkop",
        reporting_instance="zkop-0", action="Sync", reason="Synced", type="Warning", note="n",
        regarding=k8s.V1ObjectReference(kind="ConfigMap", name="b", namespace=ns)))
    assert created.note == "n"
    core = kube.request("GET", resource_path("", "v1", "events", ns, "e2"))
    assert core["message"] == "n" and core["reportingComponent"] == "zkop"
    assert core["involvedObject"]["name"] == "b"
    names = kube.request("GET", resource_path("", "v1", "events", ns),
                         query={"fieldSelector": "involvedObject.name=b"})["items"]
    assert [e["metadata"]["name"] for e in names] == ["e2"]
    status, body = api_error(lambda: kube.request("POST", resource_path("events.k8s.io", "v1", "events", ns), body={
        "metadata": {"name": "e3"}, "reason": "x"}))
    # pkg/apis/core/validation/events.go: without eventTime only the legacy rules and the strict
    # events.k8s.io ones apply (reportingController is required only next to an eventTime)
    assert status == 422 and "eventTime: Required value" in body["message"]
    assert "reportingController" not in body["message"]


def test_endpoint_slices_and_endpoints(kube: KubeClient, ns: str) -> None:
    path = resource_path("discovery.k8s.io", "v1", "endpointslices", ns)
    created = kube.request("POST", path, body={
        "metadata": {"name": "s-abc", "labels": {"kubernetes.io/service-name": "s"}}, "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}}],
        "ports": [{"name": "client", "port": 2181, "protocol": "TCP"}]})
    assert created["metadata"]["generation"] == 1
    status, body = api_error(lambda: kube.request("POST", path, body={"metadata": {"name": "bad"},
                                                                      "addressType": "Nope", "endpoints": []}))
    assert status == 422 and body["details"]["causes"][0]["field"] == "addressType"
    # Endpoints allow create-on-update (PUT to a missing name answers 201)
    ep = kube.request("PUT", resource_path("", "v1", "endpoints", ns, "s"), body={
        "metadata": {"name": "s"}, "subsets": [{"addresses": [{"ip": "10.0.0.2"}], "ports": [{"port": 2181}]}]})
    assert ep["subsets"][0]["addresses"][0]["ip"] == "10.0.0.2"


def test_typed_watch_and_list_deserialize(core: Any, ns: str) -> None:
    core.create_namespaced_config_map(ns, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="a"), data={"x": "y"}))
    items = core.list_config_map_for_all_namespaces(label_selector="").items
    assert any(i.metadata.name == "a" and i.metadata.namespace == ns for i in items)
