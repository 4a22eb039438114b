"""Record formats: exact bytes, owner stamps, Curator's ServiceInstance shape (pure)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from zkop.services.bridge.formats import (
    SPRING_PAYLOAD_CLASS,
    CuratorFormat,
    JsonFormat,
    Owner,
    container_stamp,
    get_format,
    parse_owner,
)
from zkop.services.bridge.options import PORT_ANNOTATION, BridgeOptions
from zkop.services.bridge.records import service_record
from zkop.services.endpoints import EndpointPort, EndpointsView

from .factories import service

GOLDEN_JSON = (
    b'{"name":"my-web-app","namespace":"default","type":"ClusterIP","clusterIP":"10.96.0.10",'
    b'"clusterIPs":["10.96.0.10"],"ipFamilies":["IPv4"],"headless":false,"ports":['
    b'{"name":"http","port":80,"protocol":"TCP","targetPort":8080,"nodePort":null},'
    b'{"name":"dns","port":53,"protocol":"UDP","targetPort":53,"nodePort":null}],'
    b'"externalName":null,"externalIPs":[],"loadBalancerIngress":[],"externalAddresses":[],'
    b'"labels":{"app":"web"},"managedBy":"zkop",'
    b'"owner":{"managedBy":"zkop","clusterId":"prod","uid":"u-1"}}'
)


def web() -> dict[str, Any]:
    ports = [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080},
             {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53}]
    return service("my-web-app", uid="u-1", labels={"app": "web", "other": "x"}, ports=ports)


def test_json_record_bytes_are_exact_and_deterministic() -> None:
    options = BridgeOptions(labels=("app",))
    fmt = JsonFormat()
    location = fmt.locate(web(), options)
    nodes = fmt.nodes(service_record(web(), options), location, "prod")
    assert [(n.path, n.container) for n in nodes] == [("/kubernetes/services/default-my-web-app", False)]
    assert nodes[0].data == GOLDEN_JSON
    # Same Service again (e.g. a resync): identical bytes, so the planner writes nothing.
    assert fmt.nodes(service_record(web(), options), location, "prod") == nodes


def test_json_record_with_endpoints_and_nested_layout() -> None:
    options = BridgeOptions(layout="nested")
    fmt = JsonFormat()
    view = EndpointsView(("10.244.0.5", "10.244.1.7"), (EndpointPort("http", 8080, "TCP"),))
    location = fmt.locate(web(), options)
    nodes = fmt.nodes(service_record(web(), options, view), location, "prod")
    assert [(n.path, n.container) for n in nodes] == [
        ("/kubernetes/services/default", True), ("/kubernetes/services/default/my-web-app", False)]
    assert nodes[0].data == container_stamp("prod")
    body = json.loads(nodes[1].data)
    assert body["endpoints"] == {"addresses": ["10.244.0.5", "10.244.1.7"],
                                 "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}


def test_curator_instance_is_what_curators_json_instance_serializer_writes() -> None:
    obj = service(
        "orders", "shop", uid="u-2", type="LoadBalancer", externalIPs=["198.51.100.7"],
        ports=[{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080, "nodePort": 30080},
               {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8443, "nodePort": 30443}],
        status={"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}},
    )
    options = BridgeOptions()
    fmt = CuratorFormat()
    location = fmt.locate(obj, options)
    nodes = fmt.nodes(service_record(obj, options), location, "prod")
    assert [(n.path, n.container) for n in nodes] == [
        ("/kubernetes/services/shop-orders", True),
        ("/kubernetes/services/shop-orders/203.0.113.7", False),
        ("/kubernetes/services/shop-orders/198.51.100.7", False),
    ]
    instance = json.loads(nodes[1].data)
    # ServiceInstance's fields in declaration order, then `enabled` (CURATOR-275).
    assert list(instance) == ["name", "id", "address", "port", "sslPort", "payload", "registrationTimeUTC",
                              "serviceType", "uriSpec", "enabled"]
    assert instance["name"] == "shop-orders"
    assert instance["id"] == instance["address"] == "203.0.113.7"
    assert (instance["port"], instance["sslPort"]) == (80, 443)
    assert instance["serviceType"] == "PERMANENT"
    assert instance["registrationTimeUTC"] == 1704067200000
    assert instance["enabled"] is True
    # With an sslPort, Curator's UriSpec resolves {scheme} to https: the spec names the TLS port.
    assert [p["value"] for p in instance["uriSpec"]["parts"]] == ["scheme", "://", "address", ":", "ssl-port"]
    payload = instance["payload"]
    assert payload["@class"] == SPRING_PAYLOAD_CLASS
    assert payload["metadata"]["managedBy"] == "zkop" and payload["metadata"]["uid"] == "u-2"
    assert payload["metadata"]["port.https"] == "443/TCP"
    assert parse_owner(nodes[1].path, nodes[1].data) == Owner("zkop", "prod", "u-2")


def test_curator_addresses_by_service_kind() -> None:
    fmt = CuratorFormat()
    options = BridgeOptions()
    cluster = service_record(service("a", ports=[{"port": 8080, "protocol": "TCP", "targetPort": 8080}]), options)
    assert fmt.instances(cluster) == [("10.96.0.10", 8080, None)]
    external = service_record(service("e", type="ExternalName", externalName="db.example.com", ports=[]), options)
    assert fmt.instances(external) == [("db.example.com", None, None)]
    headless = service("h", clusterIP="None", ports=[{"name": "http", "port": 80, "protocol": "TCP",
                                                      "targetPort": 8080}])
    assert fmt.instances(service_record(headless, options)) == []
    view = EndpointsView(("10.244.0.5", "10.244.0.6"), (EndpointPort("http", 8080, "TCP"),))
    assert fmt.instances(service_record(headless, options, view)) == [("10.244.0.5", 8080, None),
                                                                        ("10.244.0.6", 8080, None)]


def test_curator_port_annotation_and_readiness() -> None:
    obj = service("multi", annotations={PORT_ANNOTATION: "grpc"}, ports=[
        {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080},
        {"name": "grpc", "port": 9090, "protocol": "TCP", "targetPort": 9090}])
    fmt = CuratorFormat()
    options = BridgeOptions(format="curator")
    location = fmt.locate(obj, options)
    assert fmt.instances(service_record(obj, options)) == [("10.96.0.10", 9090, None)]
    not_ready = fmt.nodes(service_record(obj, options, EndpointsView()), location, "prod")[1]
    body = json.loads(not_ready.data)
    assert body["enabled"] is False and body["payload"]["metadata"]["instance_status"] == "OUT_OF_SERVICE"


@pytest.mark.parametrize(("data", "owner"), [
    (container_stamp("prod"), Owner("zkop", "prod", None)),
    (GOLDEN_JSON, Owner("zkop", "prod", "u-1")),
    (b'{"clusterIP": "10.0.0.1", "ports": []}', None),  # the original script's records: no stamp
    (b"not json", None),
    (b"", None),
    (b'{"owner": "zkop"}', None),
    (b'{"owner": {"managedBy": "someone-else", "clusterId": "prod"}}', Owner("someone-else", "prod", None)),
])
def test_parse_owner(data: bytes, owner: Owner | None) -> None:
    assert parse_owner("/x", data) == owner


def test_ownership_needs_zkop_and_the_same_cluster_id() -> None:
    assert Owner("zkop", "prod", "u").is_ours("prod")
    assert not Owner("zkop", "staging", "u").is_ours("prod")
    assert not Owner("external-dns", "prod", "u").is_ours("prod")


def test_get_format_rejects_unknown_names() -> None:
    assert get_format("curator").name == "curator"
    with pytest.raises(ValueError, match="unknown service bridge format 'etcd'"):
        get_format("etcd")
