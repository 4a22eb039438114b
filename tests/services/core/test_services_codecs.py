"""Codecs round-trip: what the bridge encodes, the importer decodes back to the same instance.

Each wire format (:mod:`zkop.services.codecs`) has one module that encodes and decodes; these
tests pin that the two halves agree (encode → decode equals the input), for generated inputs.
The exact bytes and the decoding of foreign registrations are pinned by the bridge's format tests
and the importer's source tests.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import unquote_plus

from hypothesis import given
from hypothesis import strategies as st

from zkop.services.codecs import curator, dubbo, json_record
from zkop.services.codecs.base import (
    AddressType,
    ImportedInstance,
    ImportedPort,
    Owner,
    PortRecord,
    ServiceRecord,
    Skipped,
    container_stamp,
    dumps,
)
from zkop.services.codecs.owners import parse_owner, written_by_zkop
from zkop.services.endpoints import EndpointPort, EndpointsView

ports = st.integers(min_value=1, max_value=65535)
ipv4 = st.ip_addresses(v=4).filter(
    lambda ip: not (ip.is_unspecified or ip.is_loopback or ip.is_link_local or ip.is_multicast)).map(str)
# IPv4-mapped IPv6 addresses are imported as their IPv4 address (an IPv6 EndpointSlice refuses them).
ipv6 = st.ip_addresses(v=6).filter(
    lambda ip: not (ip.is_unspecified or ip.is_loopback or ip.is_link_local or ip.is_multicast)).filter(
    lambda ip: isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is None).map(str)
# At least two labels: an EndpointSlice FQDN must have them (IsFullyQualifiedDomainName).
hostnames = st.from_regex(r"[a-z][a-z0-9]{0,10}(\.[a-z][a-z0-9]{0,10}){1,3}", fullmatch=True)
addresses = st.one_of(ipv4, ipv6, hostnames)


def _type(address: str) -> AddressType:
    try:
        return "IPv4" if ipaddress.ip_address(address).version == 4 else "IPv6"
    except ValueError:
        return "FQDN"


def _record(**fields: object) -> ServiceRecord:
    base: dict[str, object] = dict(
        namespace="shop", name="orders", uid="u-1", type="ClusterIP", headless=False, cluster_ip="10.96.0.7",
        cluster_ips=("10.96.0.7",), ip_families=("IPv4",), ports=(PortRecord("http", 80, "TCP", 8080, None),),
        external_name=None, external_ips=(), load_balancer_ingress=(), labels=(), created_ms=1_700_000_000_000,
    )
    base.update(fields)
    return ServiceRecord(**base)  # type: ignore[arg-type]


# --- Curator ServiceInstance ---------------------------------------------------------------------


@given(address=addresses, port=st.none() | ports, ssl_port=st.none() | ports, enabled=st.booleans())
def test_curator_instance_round_trips(address: str, port: int | None, ssl_port: int | None, enabled: bool) -> None:
    body = curator.encode_instance(name="orders", address=address, port=port, ssl_port=ssl_port,
                                   metadata={"zone": "a"}, registration_ms=1, enabled=enabled)
    decoded = curator.decode_instance("/services/orders/x", address, dumps(body))
    if port is None and ssl_port is None:
        assert decoded == Skipped("/services/orders/x", "no-port", "neither port nor sslPort is set")
        return
    expected = [ImportedPort("http", port)] if port is not None else []
    expected += [ImportedPort("https", ssl_port)] if ssl_port is not None else []
    normal = str(ipaddress.ip_address(address)) if _type(address) != "FQDN" else address
    assert decoded == ImportedInstance(address, normal, _type(address), tuple(sorted(expected)), enabled,
                                       "/services/orders/x", (("zone", "a"),))


def test_curator_status_metadata_round_trips_as_readiness() -> None:
    down = curator.encode_instance(name="o", address="10.0.0.1", port=80, ssl_port=None,
                                   metadata={"instance_status": "OUT_OF_SERVICE"}, registration_ms=0, enabled=True)
    up = curator.encode_instance(name="o", address="10.0.0.1", port=80, ssl_port=None,
                                 metadata={"instance_status": "UP"}, registration_ms=0, enabled=True)
    assert isinstance(d := curator.decode_instance("/p", "x", dumps(down)), ImportedInstance) and not d.ready
    assert isinstance(u := curator.decode_instance("/p", "x", dumps(up)), ImportedInstance) and u.ready


def test_curator_owner_stamp_round_trips() -> None:
    body = curator.encode_instance(name="o", address="10.0.0.1", port=80, ssl_port=None,
                                   metadata={"managedBy": "zkop", "clusterId": "prod", "uid": "u-1"},
                                   registration_ms=0, enabled=True)
    assert curator.owner_of(dumps(body)) == Owner("zkop", "prod", "u-1")
    assert parse_owner("/p", dumps(body)) == Owner("zkop", "prod", "u-1") and written_by_zkop("/p", dumps(body))


# --- zkop's JSON record ------------------------------------------------------------------------


@given(external=st.lists(ipv4, min_size=1, max_size=3, unique=True), port=ports, protocol=st.sampled_from(
    ["TCP", "UDP", "SCTP"]))
def test_json_record_round_trips_external_addresses_and_ports(external: list[str], port: int, protocol: str) -> None:
    record = _record(external_ips=tuple(external), ports=(PortRecord("web", port, protocol, port, None),))
    instances, skipped = json_record.decode("/k/shop-orders", dumps(json_record.encode(record, "prod")))
    assert skipped == ()
    assert instances == tuple(ImportedInstance(a, a, "IPv4", (ImportedPort("web", port, protocol),), True,
                                               "/k/shop-orders") for a in external)


def test_json_record_round_trips_the_cluster_ip_and_the_owner() -> None:
    data = dumps(json_record.encode(_record(), "prod"))
    instances, _ = json_record.decode("/k/shop-orders", data)
    assert [(i.address, i.ports) for i in instances] == [("10.96.0.7", (ImportedPort("http", 80),))]
    assert json_record.owner_of(data) == Owner("zkop", "prod", "u-1") == parse_owner("/k/shop-orders", data)


def test_json_record_round_trips_headless_endpoints() -> None:
    view = EndpointsView(("10.1.0.4", "10.1.0.5"), (EndpointPort("http", 8080, "TCP"),))
    record = _record(headless=True, cluster_ip=None, cluster_ips=(), endpoints=view)
    instances, _ = json_record.decode("/k/shop-orders", dumps(json_record.encode(record, "prod")))
    assert [(i.address, i.ports) for i in instances] == [
        ("10.1.0.4", (ImportedPort("http", 8080),)), ("10.1.0.5", (ImportedPort("http", 8080),))]


def test_container_stamp_is_ours_without_a_uid() -> None:
    assert parse_owner("/k/shop", container_stamp("prod")) == Owner("zkop", "prod", None)


# --- Dubbo provider URLs -----------------------------------------------------------------------


@given(address=addresses, port=ports, protocol=st.sampled_from(["dubbo", "tri", "rest"]), ready=st.booleans(),
       interface=st.from_regex(r"[a-z]{1,5}(\.[A-Za-z]{1,8}){1,3}", fullmatch=True))
def test_dubbo_provider_round_trips(address: str, port: int, protocol: str, ready: bool, interface: str) -> None:
    name = dubbo.encode_provider(interface, address, port, protocol=protocol, ready=ready)
    assert "/" not in name
    path = f"/dubbo/{dubbo.interface_node(interface)}/providers/{name}"
    decoded = dubbo.decode_provider(path, name)
    normal = str(ipaddress.ip_address(address)) if _type(address) != "FQDN" else address
    assert decoded == ImportedInstance(unquote_plus(name), normal, _type(address), (ImportedPort(protocol, port),),
                                       ready, path)
    assert dubbo.interface_of(dubbo.interface_node(interface)) == interface


def test_dubbo_provider_stamped_by_zkop_decodes_as_a_skip() -> None:
    name = dubbo.encode_provider("com.example.Api", "10.0.0.5", 20880, params={"managedBy": "zkop", "clusterId": "p"})
    assert dubbo.decode_provider("/d", name) == Skipped("/d", "zkop", "written by zkop")
