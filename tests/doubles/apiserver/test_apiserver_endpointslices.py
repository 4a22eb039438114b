"""EndpointSlice validation as kube-apiserver does it (``zkop_testing.apiserver_discovery``).

Each rule follows ``pkg/apis/discovery/validation/validation.go`` (``validateEndpoints``,
``validatePorts``, release-1.29 … 1.32), apimachinery ``IsFullyQualifiedDomainName`` /
``IsValidIPv4Address`` / ``IsValidIPv6Address`` and ``ValidateNonSpecialIP``; defaults from
``pkg/apis/discovery/v1/defaults.go``.
"""

from __future__ import annotations

from typing import Any

import pytest
from apiserver_helpers import api_error

from zkop.kube.client import KubeClient, resource_path

JSON = dict[str, Any]


def path(ns: str) -> str:
    return resource_path("discovery.k8s.io", "v1", "endpointslices", ns)


def eps(name: str, address_type: str, *addresses: str, ports: list[JSON] | None = None) -> JSON:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": name},
            "addressType": address_type, "endpoints": [{"addresses": [a]} for a in addresses],
            "ports": ports if ports is not None else [{"name": "http", "port": 80}]}


@pytest.mark.parametrize(("address_type", "address"), [
    ("IPv4", "10.0.0.5"),
    ("IPv4", "::ffff:10.0.0.5"),     # To4() != nil: Go calls it IPv4
    ("IPv4", "010.0.0.5"),           # ParseIPSloppy: leading zeros read as decimal
    ("IPv4", "239.1.2.3"),           # only link-local multicast is special
    ("IPv6", "2001:db8::5"),
    ("IPv6", "::10.0.0.5"),          # IPv4-compatible, not IPv4-mapped: IPv6
    ("FQDN", "orders.legacy.example.com"),
    ("FQDN", "orders.example.com."),  # the trailing dot is ignored
])
def test_addresses_the_api_server_accepts(kube: KubeClient, ns: str, address_type: str, address: str) -> None:
    created = kube.request("POST", path(ns), body=eps("ok", address_type, address))
    assert created["endpoints"][0]["addresses"] == [address]


@pytest.mark.parametrize(("address_type", "address", "message"), [
    ("FQDN", "pig", "should be a domain with at least two segments separated by dots"),
    ("FQDN", "under_score.example.com", "RFC 1123 subdomain"),
    ("FQDN", "a" * 64 + ".example.com", "must be no more than 63 characters"),
    ("IPv6", "::ffff:10.0.0.5", "must be a valid IPv6 address"),
    ("IPv6", "10.0.0.5", "must be a valid IPv6 address"),
    ("IPv4", "2001:db8::5", "must be a valid IPv4 address"),
    ("IPv4", "pig", "must be a valid IPv4 address"),
    ("IPv4", "127.0.0.1", "loopback"),
    ("IPv6", "::1", "loopback"),
    ("IPv4", "0.0.0.0", "unspecified"),
    ("IPv4", "169.254.1.1", "link-local range"),
    ("IPv6", "fe80::1", "link-local range"),
    ("IPv4", "224.0.0.5", "link-local multicast"),
    ("IPv6", "ff02::1", "link-local multicast"),
    ("IPv6", "fe80::1%eth0", "must be a valid IPv6 address"),
])
def test_addresses_the_api_server_refuses(kube: KubeClient, ns: str, address_type: str, address: str,
                                          message: str) -> None:
    body = eps("bad", address_type, "10.0.0.9" if address_type == "IPv4" else "orders.example.com"
               if address_type == "FQDN" else "2001:db8::9", address)
    status, answer = api_error(lambda: kube.request("POST", path(ns), body=body))
    assert status == 422 and answer["reason"] == "Invalid"
    (cause,) = answer["details"]["causes"]
    assert cause["field"] == "endpoints[1].addresses[0]" and message in cause["message"]


def test_ports_are_defaulted_and_validated(kube: KubeClient, ns: str) -> None:
    created = kube.request("POST", path(ns), body=eps("p", "IPv4", "10.0.0.1", ports=[{"port": 80}]))
    assert created["ports"] == [{"name": "", "port": 80, "protocol": "TCP"}]
    for ports, field, fragment in [
        ([{"name": "HTTP", "port": 80}], "ports[0].name", "RFC 1123 label"),
        ([{"name": "a", "port": 80}, {"name": "a", "port": 81}], "ports[1].name", "Duplicate value"),
        ([{"port": 80}, {"port": 81}], "ports[1].name", "Duplicate value"),
        ([{"name": "a", "port": 80, "protocol": "ICMP"}], "ports[0].protocol", "Unsupported value"),
        ([{"name": "a", "port": 80, "appProtocol": "not valid!"}], "ports[0].appProtocol", "name part must consist"),
    ]:
        status, answer = api_error(lambda ports=ports: kube.request(  # type: ignore[misc]
            "POST", path(ns), body=eps("q", "IPv4", "10.0.0.1", ports=ports)))
        assert status == 422, ports
        causes = answer["details"]["causes"]
        assert any(c["field"] == field and fragment in c["message"] for c in causes), causes


def test_updates_are_validated_too(kube: KubeClient, ns: str) -> None:
    kube.request("POST", path(ns), body=eps("u", "FQDN", "a.example.com"))
    status, _ = api_error(lambda: kube.request(
        "PATCH", path(ns) + "/u", body={"endpoints": [{"addresses": ["pig"]}]},
        content_type="application/merge-patch+json"))
    assert status == 422
