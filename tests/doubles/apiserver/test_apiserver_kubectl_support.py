"""What kubectl needs from the double, without kubectl: Table, OpenAPI, protobuf bodies, fieldValidation.

Sources: ``k8s.io/apiserver/pkg/endpoints/handlers/response.go`` (``asTable``), ``handlers/watch.go``
(column definitions on the first watch event only), ``apiextensions-apiserver/pkg/registry/
customresource/tableconvertor``, ``kubernetes/pkg/printers/internalversion/printers.go``,
apimachinery ``util/duration.HumanDuration``, kubectl ``pkg/util/openapi`` / client-go
``openapi3`` (``QueryParamVerifierV3``), ``runtime/types_proto.go`` (the ``k8s\\x00`` envelope).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import urllib3
from zkop_testing.apiserver import ApiServer
from zkop_testing.apiserver_protobuf import _fields, decode
from zkop_testing.apiserver_table import human_duration, wants_table

from zkop.kube.client import ApiException, KubeClient, resource_path

JSON = dict[str, Any]
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io," \
        "application/json"
# kubectl 1.37 `create configmap x --from-literal=a=b`: the body its -v=9 log shows
KUBECTL_CONFIGMAP = bytes.fromhex(
    "6b387300 0a0f0a0276311209436f6e6669674d6170 121b0a110a0178120 01a00220 02a00320038004200"
    "12060a0161120162 1a002200".replace(" ", ""))


def get(server: ApiServer, path: str, accept: str = "application/json") -> JSON:
    answer = urllib3.request("GET", server.url + path, headers={"Accept": accept})
    assert answer.status == 200, answer.data
    return dict(json.loads(answer.data))


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (119, "119s"), (125, "2m5s"), (600, "10m"),
                                               (3 * 3600 + 60, "3h1m"), (30 * 3600, "30h"), (50 * 3600, "2d2h"),
                                               (800 * 86400, "2y70d")])
def test_human_duration(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def test_accept_negotiation() -> None:
    assert wants_table(TABLE)
    assert not wants_table("application/json")
    assert not wants_table("application/json,application/json;as=Table;v=v1;g=meta.k8s.io")


def test_custom_resource_table_uses_printer_columns(server: ApiServer, kube: KubeClient, ns: str, crd: JSON) -> None:
    kube.request("POST", resource_path("platform.example.com", "v1alpha1", "zookeeperconfigs", ns),
                 body={"metadata": {"name": "z"}, "spec": {"path": "/a", "data": "eA=="}})
    table = get(server, f"/apis/platform.example.com/v1alpha1/namespaces/{ns}/zookeeperconfigs", TABLE)
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names[0] == "Name" and table["columnDefinitions"][0]["format"] == "name"
    assert table["rows"][0]["cells"][0] == "z"
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert table["metadata"]["resourceVersion"]
    single = get(server, f"/apis/platform.example.com/v1alpha1/namespaces/{ns}/zookeeperconfigs/z", TABLE)
    assert len(single["rows"]) == 1


def test_builtin_tables(server: ApiServer, kube: KubeClient, ns: str) -> None:
    kube.request("POST", resource_path("", "v1", "configmaps", ns), body={"metadata": {"name": "c"},
                                                                        "data": {"a": "1", "b": "2"}})
    table = get(server, f"/api/v1/namespaces/{ns}/configmaps?includeObject=Object", TABLE)
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert table["rows"][0]["cells"][:2] == ["c", 2]
    assert table["rows"][0]["object"]["data"] == {"a": "1", "b": "2"}
    kube.request("POST", resource_path("", "v1", "events", ns), body={
        "metadata": {"name": "e"}, "type": "Warning", "reason": "Failed", "message": " boom ",
        "involvedObject": {"kind": "Service", "name": "s", "namespace": ns},
        "lastTimestamp": "2020-01-01T00:00:00Z"})
    events = get(server, f"/api/v1/namespaces/{ns}/events", TABLE)
    assert [c["name"] for c in events["columnDefinitions"] if c["priority"] == 0] == [
        "Last Seen", "Type", "Reason", "Object", "Message"]
    cells = events["rows"][0]["cells"]
    assert cells[1:4] == ["Warning", "Failed", "service/s"] and cells[6] == "boom"
    assert cells[0].endswith("y") or "y" in cells[0]


def test_openapi_v3_advertises_field_validation(server: ApiServer, crd: JSON) -> None:
    index = get(server, "/openapi/v3")["paths"]
    assert {"api/v1", "apis/platform.example.com/v1alpha1"} <= set(index)
    doc = get(server, index["apis/platform.example.com/v1alpha1"]["serverRelativeURL"])
    patch = doc["paths"]["/apis/platform.example.com/v1alpha1/namespaces/{namespace}/zookeeperconfigs/{name}"][
        "patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "platform.example.com", "version": "v1alpha1",
                                                        "kind": "ZooKeeperConfig"}
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    schema = doc["components"]["schemas"]["com.example.platform.v1alpha1.ZooKeeperConfig"]
    assert "path" in schema["properties"]["spec"]["properties"]
    assert get(server, "/openapi/v2")["definitions"]["io.k8s.api.core.v1.ConfigMap"]["properties"]["data"]


def test_protobuf_configmap_as_kubectl_sends_it() -> None:
    assert decode(KUBECTL_CONFIGMAP, []) == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
                                "data": {"a": "b"}}


def test_field_validation(kube: KubeClient, ns: str, crd: JSON) -> None:
    path = resource_path("platform.example.com", "v1alpha1", "zookeeperconfigs", ns)
    body = {"metadata": {"name": "z"}, "spec": {"path": "/a", "data": "eA==", "typo": 1}}
    with pytest.raises(ApiException) as info:
        kube.request("POST", path, body=body, query={"fieldValidation": "Strict"})
    assert info.value.status == 400
    assert json.loads(info.value.body or "{}")["message"] == (
        'ZooKeeperConfig in version "v1alpha1" cannot be handled as a ZooKeeperConfig: strict decoding error: '
        'unknown field "spec.typo"')
    created = kube.request("POST", path, body=body, query={"fieldValidation": "Ignore"})
    assert "typo" not in created["spec"]  # pruned


def test_force_is_only_for_apply(kube: KubeClient, ns: str) -> None:
    kube.request("POST", resource_path("", "v1", "configmaps", ns), body={"metadata": {"name": "c"}})
    with pytest.raises(ApiException) as info:
        kube.request("PATCH", resource_path("", "v1", "configmaps", ns, "c"), body={"data": {"a": "b"}},
                     content_type="application/merge-patch+json", query={"force": True})
    assert info.value.status == 422
    assert "force: Forbidden: may not be specified for non-apply patch" in str(info.value.body)


def test_openapi_v2_as_protobuf_for_kubectl_before_openapi_v3(server: ApiServer) -> None:
    """kube-openapi ``pkg/handler/handler.go``: either protobuf spelling in ``Accept`` is answered with
    gnostic's ``openapi.v2.Document`` and the dotted ``Content-Type``; anything else is 406."""
    for accept in ("application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
                   "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"):
        answer = urllib3.request("GET", server.url + "/openapi/v2", headers={"Accept": accept})
        assert answer.status == 200
        assert answer.headers["Content-Type"] == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
        document = dict(_fields(answer.data))
        assert document[1] == b"2.0"  # swagger = 1
        definitions = [dict(_fields(entry)) for number, entry in _fields(document[9]) if number == 1]  # type: ignore[arg-type]
        assert b"io.k8s.api.core.v1.ConfigMap" in [d[1] for d in definitions]
        paths = [dict(_fields(entry))[1] for number, entry in _fields(document[8]) if number == 2]  # type: ignore[arg-type]
        assert b"/api/v1/namespaces/{namespace}/configmaps/{name}" in paths
    assert urllib3.request("GET", server.url + "/openapi/v2", headers={"Accept": "application/yaml"}).status == 406


def test_watch_as_table_sends_columns_once(server: ApiServer, kube: KubeClient, ns: str) -> None:
    rv = kube.request("GET", resource_path("", "v1", "configmaps", ns))["metadata"]["resourceVersion"]
    for name in ("a", "b"):
        kube.request("POST", resource_path("", "v1", "configmaps", ns), body={"metadata": {"name": name}})
    answer = urllib3.request("GET", f"{server.url}/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={rv}"
                             "&timeoutSeconds=1", headers={"Accept": TABLE}, preload_content=True)
    events = [json.loads(line) for line in answer.data.splitlines() if line.strip()]
    assert [e["type"] for e in events] == ["ADDED", "ADDED"]
    assert [e["object"]["kind"] for e in events] == ["Table", "Table"]
    assert events[0]["object"]["columnDefinitions"][0]["name"] == "Name"
    assert events[1]["object"]["columnDefinitions"] is None
    assert [e["object"]["rows"][0]["cells"][0] for e in events] == ["a", "b"]


def test_every_openapi_v2_reference_resolves(server: ApiServer) -> None:
    """kubectl < 1.27 parses every model of ``/openapi/v2`` before any command (kube-openapi
    ``pkg/util/proto`` ``NewOpenAPIData``): one dangling ``$ref`` ("unknown model in reference")
    fails ``apply``, ``create -f`` and ``explain`` alike. Names follow kube-apiserver's
    (``io.k8s.api.rbac.v1.Subject``, not the Python client's ``RbacV1Subject``)."""
    document = get(server, "/openapi/v2")
    refs = set(re.findall(r'"#/definitions/([^"]+)"', json.dumps(document)))
    assert refs and refs <= set(document["definitions"])
    assert "io.k8s.api.rbac.v1.Subject" in refs
