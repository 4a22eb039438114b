"""Parsing the ZooKeeper layouts (``zkop.services.importer.sources``): Curator, bridge JSON, Dubbo.

Nodes written by zkop's own forward bridge are produced with the bridge's real formats, so the
loop-prevention rule is pinned against exactly what the bridge writes.
"""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from zkop_testing.services import curator_instance

from zkop.services.bridge.formats import CuratorFormat, JsonFormat, container_stamp
from zkop.services.bridge.options import BridgeOptions
from zkop.services.bridge.records import service_record
from zkop.services.importer.sources import (
    CuratorSource,
    DubboSource,
    ImportedInstance,
    ImportedPort,
    JsonSource,
    Skipped,
    SourceChild,
    SourceNode,
    classify_address,
    get_source,
    parse_address,
    parse_curator_instance,
    parse_dubbo_provider,
    parse_json_record,
)

#: A Spring Cloud Zookeeper instance exactly as stored (survey §3; zkCli ``get`` output).
SPRING = (b'{"name":"cloud-provider-payment","id":"dbac9cf3-6555-40e2-996e-d2686190f47e","address":"PIG",'
          b'"port":8004,"sslPort":null,"payload":{"@class":"org.springframework.cloud.zookeeper.discovery.'
          b'ZookeeperInstance","id":"application-1","name":"cloud-provider-payment","metadata":{}},'
          b'"registrationTimeUTC":1621155920122,"serviceType":"DYNAMIC","uriSpec":{"parts":[{"value":"scheme",'
          b'"variable":true},{"value":"://","variable":false},{"value":"address","variable":true},{"value":":",'
          b'"variable":false},{"value":"port","variable":true}]}}')


def bridge_service(name: str = "web", namespace: str = "default") -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": namespace, "uid": "u-1",
                         "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                     "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]}}


# --- addresses ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "expected"), [
    ("10.1.2.3", ("10.1.2.3", "IPv4")),
    (" 10.1.2.3 ", ("10.1.2.3", "IPv4")),
    ("2001:db8:0:0::7", ("2001:db8::7", "IPv6")),
    ("[2001:db8::7]", ("2001:db8::7", "IPv6")),
    ("PIG.example", ("pig.example", "FQDN")),
    ("PIG", None),              # a single label: IsFullyQualifiedDomainName wants two or more
    ("a" * 64 + ".example.com", None),  # a label longer than 63
    ("::ffff:10.0.0.5", ("10.0.0.5", "IPv4")),  # IPv4-mapped: an IPv6 slice refuses it; it is this IPv4 host
    ("[::ffff:10.0.0.5]", ("10.0.0.5", "IPv4")),
    ("::ffff:127.0.0.1", None),  # mapped loopback is still loopback (Go looks through the mapping)
    ("010.001.002.003", ("10.1.2.3", "IPv4")),  # ParseIPSloppy: leading zeros are decimal
    ("::10.0.0.5", ("::a00:5", "IPv6")),  # IPv4-compatible is not IPv4-mapped: IPv6
    ("orders-1.legacy.example.com.", ("orders-1.legacy.example.com", "FQDN")),
    ("127.0.0.1", None),        # loopback: the API server refuses it in an EndpointSlice
    ("::1", None),
    ("169.254.0.9", None),      # link-local
    ("0.0.0.0", None),          # unspecified
    ("224.0.0.1", None),        # multicast
    ("fe80::1%eth0", None),
    ("under_score.example", None),
    ("", None),
])
def test_addresses(raw: str, expected: tuple[str, str] | None) -> None:
    assert parse_address(raw) == expected
    classified = classify_address(raw)
    assert classified == expected if expected is not None else isinstance(classified, str)


def test_a_single_label_host_is_refused_with_the_reason() -> None:
    assert classify_address("pig") == ("'pig' is a single-label host name; an EndpointSlice FQDN needs at least "
                                      "two dot-separated labels")


# --- Curator -----------------------------------------------------------------------------------


def test_the_spring_cloud_zookeeper_instance_from_the_wild() -> None:
    # Its address is the single-label host name "pig": no EndpointSlice can hold it (a real API
    # server answers 422 for an FQDN slice with it), so it is skipped with the reason.
    instance = parse_curator_instance("/services/cloud-provider-payment/dbac9cf3", "dbac9cf3", SPRING)
    assert isinstance(instance, Skipped) and instance.reason == "address" and "'PIG'" in instance.detail
    served = SPRING.replace(b'"address":"PIG"', b'"address":"PIG.legacy.example"')
    assert served != SPRING
    assert parse_curator_instance("/services/cloud-provider-payment/dbac9cf3", "dbac9cf3", served) == ImportedInstance(
        id="dbac9cf3-6555-40e2-996e-d2686190f47e", address="pig.legacy.example", address_type="FQDN",
        ports=(ImportedPort("http", 8004),), ready=True, path="/services/cloud-provider-payment/dbac9cf3")


def test_curator_ports_and_readiness() -> None:
    path = "/services/orders/i1"
    both = parse_curator_instance(path, "i1", curator_instance("orders", "i1", "10.0.0.1", 8080, ssl_port=8443))
    assert isinstance(both, ImportedInstance)
    assert both.ports == (ImportedPort("http", 8080), ImportedPort("https", 8443)) and both.ready
    ssl_only = parse_curator_instance(path, "i1", curator_instance("orders", "i1", "10.0.0.1", None, ssl_port=8443))
    assert isinstance(ssl_only, ImportedInstance) and ssl_only.ports == (ImportedPort("https", 8443),)
    # CURATOR-275 "enabled": false, and Spring's instance_status (OUT_OF_SERVICE, DOWN, …): not ready.
    disabled = parse_curator_instance(path, "i1", curator_instance("orders", "i1", "10.0.0.1", enabled=False))
    out = parse_curator_instance(path, "i1", curator_instance("orders", "i1", "10.0.0.1", status="OUT_OF_SERVICE"))
    up = parse_curator_instance(path, "i1", curator_instance("orders", "i1", "10.0.0.1", status="UP", enabled=None))
    assert isinstance(disabled, ImportedInstance) and not disabled.ready
    assert isinstance(out, ImportedInstance) and not out.ready
    assert isinstance(up, ImportedInstance) and up.ready
    # The id falls back to the node name (old serializers leave it out).
    bare = parse_curator_instance(path, "i1", b'{"address":"10.0.0.2","port":80}')
    assert isinstance(bare, ImportedInstance) and (bare.id, bare.ready) == ("i1", True)


@pytest.mark.parametrize(("data", "reason"), [
    (b"not json", "invalid"),
    (b'["a list"]', "invalid"),
    (b'{"address":"10.0.0.1","port":null,"sslPort":null}', "no-port"),
    (b'{"address":"10.0.0.1","port":70000}', "no-port"),
    (b'{"address":"10.0.0.1","port":"80"}', "no-port"),
    (b'{"address":"127.0.0.1","port":80}', "address"),
    (b'{"address":"pig","port":80}', "address"),
    (b'{"port":80}', "address"),
])
def test_unusable_curator_instances_are_skipped_with_a_reason(data: bytes, reason: str) -> None:
    skipped = parse_curator_instance("/services/x/1", "1", data)
    assert isinstance(skipped, Skipped) and skipped.reason == reason and skipped.path == "/services/x/1"


def test_curator_nodes_written_by_the_forward_bridge_are_never_imported() -> None:
    fmt, options = CuratorFormat(), BridgeOptions(format="curator", root="/services")
    obj = bridge_service()
    location = fmt.locate(obj, options)
    (instance,) = fmt.render(service_record(obj, options), location, "another-cluster")
    assert location.key_path == "/services/default-web"
    skipped = parse_curator_instance(instance.path, "10.96.0.10", instance.data)
    assert isinstance(skipped, Skipped) and skipped.reason == "zkop"
    # The service node itself carries the container stamp: nothing below it is even parsed.
    node = SourceNode("default-web", location.key_path, 7, container_stamp("another-cluster"),
                      (SourceChild("10.96.0.10", instance.path, instance.data),))
    parsed = CuratorSource().parse(node)
    assert parsed.written_by_zkop and parsed.instances == () and parsed.skipped == ()


def test_a_curator_service_node() -> None:
    node = SourceNode("orders", "/services/orders", 42, b"", (
        SourceChild("a", "/services/orders/a", curator_instance("orders", "a", "10.0.0.1")),
        SourceChild("b", "/services/orders/b", b"garbage"),
        SourceChild("c", "/services/orders/c", error="not authorised"),
    ))
    parsed = get_source("curator").parse(node)
    assert (parsed.source_name, parsed.path, parsed.created_zxid) == ("orders", "/services/orders", 42)
    assert [i.address for i in parsed.instances] == ["10.0.0.1"]
    assert [(s.path, s.reason) for s in parsed.skipped] == [("/services/orders/b", "invalid"),
                                                           ("/services/orders/c", "unreadable")]
    assert CuratorSource().instance_parent("/services/orders") == "/services/orders"


# --- bridge JSON records -----------------------------------------------------------------------


def test_a_record_of_the_original_bridge_script() -> None:
    data = json.dumps({"clusterIP": "10.96.4.2", "ports": [
        {"name": "http", "port": 80, "protocol": "TCP"}, {"name": None, "port": 53, "protocol": "UDP"},
        {"name": "bad", "port": 0}, {"port": 9000, "protocol": "ICMP"}]}).encode()
    instances, skipped = parse_json_record("/kubernetes/services/default-web", data)
    assert skipped == ()
    (instance,) = instances
    assert (instance.address, instance.address_type, instance.ready) == ("10.96.4.2", "IPv4", True)
    assert instance.ports == (ImportedPort("http", 80), ImportedPort("udp-53", 53, "UDP"))


def test_json_addresses_follow_the_bridges_reachability_rule() -> None:
    external = json.dumps({"clusterIP": "10.96.4.2", "externalAddresses": ["203.0.113.7", "lb.example.com"],
                           "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}).encode()
    instances, _ = parse_json_record("/r", external)
    assert [(i.address, i.address_type) for i in instances] == [("203.0.113.7", "IPv4"), ("lb.example.com", "FQDN")]
    headless = json.dumps({"clusterIP": None, "headless": True, "ports": [{"name": "pg", "port": 5432}],
                           "endpoints": {"addresses": ["10.244.0.5", "10.244.0.6"],
                                         "ports": [{"name": "pg", "port": 15432, "protocol": "TCP"}]}}).encode()
    instances, _ = parse_json_record("/r", headless)
    assert [i.address for i in instances] == ["10.244.0.5", "10.244.0.6"]
    assert instances[0].ports == (ImportedPort("pg", 15432),)
    _, skipped = parse_json_record("/r", b'{"clusterIP": null, "ports": [{"port": 80}]}')
    assert [s.reason for s in skipped] == ["invalid"]
    _, skipped = parse_json_record("/r", b'{"clusterIP": "10.0.0.1", "ports": []}')
    assert [s.reason for s in skipped] == ["no-port"]


def test_json_records_written_by_the_forward_bridge_are_never_imported() -> None:
    fmt, options = JsonFormat(), BridgeOptions()
    obj = bridge_service()
    (record,) = fmt.render(service_record(obj, options), fmt.locate(obj, options), "prod")
    instances, skipped = parse_json_record(record.path, record.data)
    assert instances == () and [s.reason for s in skipped] == ["zkop"]
    parsed = JsonSource().parse(SourceNode("default-web", record.path, 3, record.data))
    assert parsed.written_by_zkop and JsonSource().instance_parent(record.path) is None


# --- Dubbo -------------------------------------------------------------------------------------

PROVIDER = ("dubbo://10.20.0.5:20880/org.apache.dubbo.demo.DemoService?anyhost=true&application=demo-provider"
            "&dubbo=2.0.2&interface=org.apache.dubbo.demo.DemoService&methods=sayHello&pid=4321&side=provider"
            "&timestamp=1700000000000")


def test_a_dubbo_provider_url() -> None:
    name = quote(PROVIDER, safe="")  # URL.encode(url.toFullString())
    path = f"/dubbo/org.apache.dubbo.demo.DemoService/providers/{name}"
    instance = parse_dubbo_provider(path, name)
    assert instance == ImportedInstance(PROVIDER, "10.20.0.5", "IPv4", (ImportedPort("dubbo", 20880),), True, path)
    tri = parse_dubbo_provider(path, quote("tri://[2001:db8::5]:50051/x.Api?side=provider&enabled=false", safe=""))
    assert isinstance(tri, ImportedInstance)
    assert (tri.address, tri.address_type, tri.ports, tri.ready) == (
        "2001:db8::5", "IPv6", (ImportedPort("tri", 50051),), False)
    disabled = parse_dubbo_provider(path, quote(PROVIDER + "&disabled=true", safe=""))
    assert isinstance(disabled, ImportedInstance) and not disabled.ready


@pytest.mark.parametrize(("url", "reason"), [
    (PROVIDER + "&managedBy=zkop", "zkop"),
    ("dubbo://10.20.0.5/x.Api?side=provider", "no-port"),
    ("consumer://10.20.0.9/x.Api?category=consumers&side=consumer", "invalid"),
    ("dubbo://10.20.0.5:99999/x.Api", "invalid"),
    ("not a url", "invalid"),
])
def test_unusable_dubbo_providers(url: str, reason: str) -> None:
    skipped = parse_dubbo_provider("/dubbo/x/providers/p", quote(url, safe=""))
    assert isinstance(skipped, Skipped) and skipped.reason == reason


def test_a_dubbo_interface_node() -> None:
    source = DubboSource()
    iface = quote("org.apache.dubbo.demo.DemoService", safe="")
    assert source.source_name(iface) == "org.apache.dubbo.demo.DemoService"
    assert source.instance_parent("/dubbo/x") == "/dubbo/x/providers"
    name = quote(PROVIDER, safe="")
    node = SourceNode(iface, f"/dubbo/{iface}", 1, b"10.20.0.5",
                      (SourceChild(name, f"/dubbo/{iface}/providers/{name}"),))
    parsed = source.parse(node)
    assert parsed.source_name == "org.apache.dubbo.demo.DemoService" and len(parsed.instances) == 1


def test_unknown_format() -> None:
    with pytest.raises(ValueError, match="unknown import format"):
        get_source("eureka")
