"""The importer's address guard (``zkop.services.importer.guard``): one row per rule, pure."""

from __future__ import annotations

from typing import Any

import pytest

from zkop.services.codecs.base import ImportedInstance, ImportedPort
from zkop.services.importer.guard import (
    AddressGuard,
    apiserver_addresses,
    guard_service,
    parse_cidr,
    service_ranges,
)
from zkop.services.importer.sources import ImportedService

RANGES = (parse_cidr("10.96.0.0/12"), parse_cidr("fd00:10:96::/108"))
APISERVER = frozenset({"192.168.1.10", "2001:db8::10"})
DEFAULT = AddressGuard(RANGES, APISERVER)
CONFINED = AddressGuard(RANGES, APISERVER, (parse_cidr("10.1.0.0/16"), parse_cidr("2001:db8:1::/48")))


@pytest.mark.parametrize(("rule", "guard", "address", "address_type", "reason"), [
    ("service-range: the kubernetes Service's ClusterIP", DEFAULT, "10.96.0.1", "IPv4", "service-range"),
    ("service-range: the last address of the range", DEFAULT, "10.111.255.254", "IPv4", "service-range"),
    ("service-range: IPv6", DEFAULT, "fd00:10:96::a", "IPv6", "service-range"),
    ("service-range: just outside is fine", DEFAULT, "10.112.0.1", "IPv4", None),
    ("apiserver: an endpoint address of default/kubernetes", DEFAULT, "192.168.1.10", "IPv4", "apiserver"),
    ("apiserver: IPv6", DEFAULT, "2001:db8::10", "IPv6", "apiserver"),
    ("apiserver: a neighbour is fine", DEFAULT, "192.168.1.11", "IPv4", None),
    ("no allow list: any other address", DEFAULT, "203.0.113.7", "IPv4", None),
    ("no allow list: an FQDN", DEFAULT, "orders.example.com", "FQDN", None),
    ("not-allowed: outside --import-allowed-cidrs", CONFINED, "10.2.0.1", "IPv4", "not-allowed"),
    ("not-allowed: an FQDN lies in no CIDR", CONFINED, "orders.example.com", "FQDN", "not-allowed"),
    ("not-allowed: the other family", CONFINED, "2001:db8:2::1", "IPv6", "not-allowed"),
    ("allowed: inside --import-allowed-cidrs", CONFINED, "10.1.4.2", "IPv4", None),
    ("allowed: IPv6 inside", CONFINED, "2001:db8:1::1", "IPv6", None),
    ("an allow list does not admit the Service range", AddressGuard(RANGES, APISERVER, (parse_cidr("10.0.0.0/8"),)),
     "10.96.0.1", "IPv4", "service-range"),
    ("an allow list does not admit the API server", AddressGuard(RANGES, APISERVER, (parse_cidr("0.0.0.0/0"),)),
     "192.168.1.10", "IPv4", "apiserver"),
])
def test_rule(rule: str, guard: AddressGuard, address: str, address_type: str, reason: str | None) -> None:
    refusal = guard.refusal(address, address_type)
    assert (refusal[0] if refusal else None) == reason, rule
    if refusal:
        assert address in refusal[1]


def test_the_facts_from_the_api_objects() -> None:
    cidrs: list[dict[str, Any]] = [{"spec": {"cidrs": ["10.0.0.0/24", "fd00:10:96::/112"]}},
                                   {"spec": {"cidrs": ["10.0.0.0/24"]}}, {"spec": {"cidrs": ["nonsense"]}},
                                   {"spec": {}}]
    assert service_ranges(cidrs) == (parse_cidr("10.0.0.0/24"), parse_cidr("fd00:10:96::/112"))
    slices: list[dict[str, Any]] = [
        {"endpoints": [{"addresses": ["192.168.1.10"]}, {"addresses": ["2001:DB8::10", "x"]}]}, {}]
    assert apiserver_addresses(slices) == APISERVER


@pytest.mark.parametrize("text", ["10.0.0.1/8", "ten", "10.0.0.0/33", ""])
def test_a_cidr_with_host_bits_or_none_at_all_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_cidr(text)


def test_refused_instances_are_reported_as_skipped_and_their_ports_dropped() -> None:
    def instance(address: str, port: int) -> ImportedInstance:
        return ImportedInstance(address, address, "IPv4", (ImportedPort("http", port, "TCP"),), True,
                                f"/services/orders/{address}")

    service = ImportedService("orders", "/services/orders", 1, (instance("10.96.0.1", 443), instance("10.1.0.1", 80)))
    guarded = guard_service(service, DEFAULT)
    assert [i.address for i in guarded.instances] == ["10.1.0.1"]
    assert [(s.path, s.reason) for s in guarded.skipped] == [("/services/orders/10.96.0.1", "service-range")]
    untouched = ImportedService("orders", "/services/orders", 1, (instance("10.1.0.1", 80),))
    assert guard_service(untouched, DEFAULT) is untouched
