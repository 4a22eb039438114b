"""EndpointSlice validation as kube-apiserver does it (discovery.k8s.io/v1).

A port of ``pkg/apis/discovery/validation/validation.go`` (release-1.29 … 1.32)
``validateEndpoints`` and ``validatePorts``, with the apimachinery validators they call
(``k8s.io/apimachinery/pkg/util/validation/validation.go``), hooked into
:class:`~zkop_testing.apiserver_kinds.EndpointSliceStrategy` by :func:`endpoint_slice_errors`.
Defaulting (``pkg/apis/discovery/v1/defaults.go`` ``SetDefaults_EndpointPort``: ``name`` ``""``,
``protocol`` ``TCP``) is :func:`default_endpoint_slice`, run before validation as the decoder does.

Rules, per endpoint address and ``addressType``:

* ``IPv4`` — ``IsValidIPv4Address``: Go's ``netutils.ParseIPSloppy`` parses it and ``To4() != nil``
  (so ``::ffff:10.0.0.5`` is a valid *IPv4* address, and ``010.0.0.1`` is ``10.0.0.1``);
* ``IPv6`` — ``IsValidIPv6Address``: it parses and ``To4() == nil`` (an IPv4-mapped address is refused);
* both then ``ValidateNonSpecialIP`` (``pkg/apis/core/validation/validation.go``): not unspecified,
  loopback, link-local unicast or link-local multicast (other multicast passes);
* ``FQDN`` — ``IsFullyQualifiedDomainName``: trailing dot removed, a DNS-1123 subdomain, at least
  two dot-separated labels, each a DNS-1123 label (≤ 63 characters);
* at most 1000 endpoints, 1–100 addresses each; ``hostname`` a DNS-1123 label, ``nodeName`` a subdomain.

Ports: at most 20000; a non-empty ``name`` is a DNS-1123 label; names unique (``""`` counts);
``protocol`` required and one of ``TCP``, ``UDP``, ``SCTP``; ``appProtocol`` a qualified name.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from zkop_testing.apiserver_errors import FieldError
from zkop_testing.apiserver_select import dns1123_label_errors, dns1123_subdomain_errors, qualified_name_errors

__all__ = [
    "MAX_ADDRESSES",
    "MAX_ENDPOINTS",
    "MAX_PORTS",
    "default_endpoint_slice",
    "endpoint_slice_errors",
    "fqdn_errors",
    "go_parse_ip",
]

JSON = dict[str, Any]

#: ``maxEndpoints``, ``maxAddresses``, ``maxPorts`` in discovery validation.
MAX_ENDPOINTS = 1000
MAX_ADDRESSES = 100
MAX_PORTS = 20000
_PROTOCOLS = ["SCTP", "TCP", "UDP"]
_DOTTED_QUAD = re.compile(r"[0-9]{1,3}(\.[0-9]{1,3}){3}")


def go_parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``netutils.ParseIPSloppy``: Go's ``net.ParseIP`` that also accepts IPv4 octets with leading zeros
    (read as decimal). Zones (``%eth0``) and brackets are not IPs. The result keeps the written family:
    ``::ffff:a.b.c.d`` stays an :class:`~ipaddress.IPv6Address` (use :func:`_to4`)."""
    if "%" in text or not text:
        return None
    if _DOTTED_QUAD.fullmatch(text):
        octets = [int(part, 10) for part in text.split(".")]
        return ipaddress.IPv4Address(bytes(octets)) if all(o <= 255 for o in octets) else None
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _to4(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """Go's ``IP.To4()``: the IPv4 address of an IPv4 or IPv4-mapped IPv6 address, else ``None``."""
    if isinstance(ip, ipaddress.IPv4Address):
        return ip
    return ip.ipv4_mapped


def _non_special_errors(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> list[str]:
    """``ValidateNonSpecialIP``; Go's predicates look through IPv4-mapped addresses."""
    effective: ipaddress.IPv4Address | ipaddress.IPv6Address = _to4(ip) or ip
    errors = []
    if effective.is_unspecified:
        errors.append("may not be unspecified (0.0.0.0)")
    if effective.is_loopback:
        errors.append("may not be in the loopback range (127.0.0.0/8, ::1/128)")
    if effective.is_link_local:
        errors.append("may not be in the link-local range (169.254.0.0/16, fe80::/10)")
    if isinstance(effective, ipaddress.IPv4Address):
        link_local_multicast = effective in ipaddress.IPv4Network("224.0.0.0/24")
    else:
        link_local_multicast = effective.packed[0] == 0xFF and effective.packed[1] & 0x0F == 0x02
    if link_local_multicast:
        errors.append("may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)")
    return errors


def fqdn_errors(name: str) -> list[str]:
    """apimachinery ``IsFullyQualifiedDomainName`` (messages as it reports them, ``[]`` if valid)."""
    if not name:
        return ["Required value"]
    name = name.removesuffix(".")
    if errors := dns1123_subdomain_errors(name):
        return [",".join(errors)]
    labels = name.split(".")
    if len(labels) < 2:
        return ["should be a domain with at least two segments separated by dots"]
    for label in labels:
        if errors := dns1123_label_errors(label):
            return [",".join(errors)]
    return []


def _address_errors(address: str, address_type: str) -> list[str]:
    if address_type == "FQDN":
        return fqdn_errors(address)
    if address_type not in ("IPv4", "IPv6"):
        return []  # unknown types are refused on addressType itself
    ip = go_parse_ip(address)
    if address_type == "IPv4" and (ip is None or _to4(ip) is None):
        return ["must be a valid IPv4 address"]
    if address_type == "IPv6" and (ip is None or _to4(ip) is not None):
        return ["must be a valid IPv6 address"]
    assert ip is not None
    return _non_special_errors(ip)


def default_endpoint_slice(obj: JSON) -> None:
    """``SetDefaults_EndpointPort``: a port without ``name`` gets ``""``, without ``protocol`` ``TCP``."""
    for port in obj.get("ports") or []:
        if isinstance(port, dict):
            if port.get("name") is None:
                port["name"] = ""
            if port.get("protocol") is None:
                port["protocol"] = "TCP"


def endpoint_slice_errors(obj: JSON) -> list[FieldError]:
    """``validateEndpoints`` and ``validatePorts`` for ``obj`` (``addressType`` itself is checked by the strategy)."""
    errors: list[FieldError] = []
    address_type = str(obj.get("addressType") or "")
    endpoints = obj.get("endpoints") or []
    if len(endpoints) > MAX_ENDPOINTS:
        errors.append(FieldError.too_many("endpoints", len(endpoints), MAX_ENDPOINTS))
        endpoints = []
    for i, endpoint in enumerate(endpoints):
        endpoint = endpoint or {}
        path = f"endpoints[{i}].addresses"
        addresses = endpoint.get("addresses") or []
        if not addresses:
            errors.append(FieldError.required(path, "must contain at least 1 address"))
        elif len(addresses) > MAX_ADDRESSES:
            errors.append(FieldError.too_many(path, len(addresses), MAX_ADDRESSES))
        for j, address in enumerate(addresses):
            errors.extend(FieldError.invalid(f"{path}[{j}]", address, message)
                          for message in _address_errors(str(address), address_type))
        if endpoint.get("nodeName"):
            errors.extend(FieldError.invalid(f"endpoints[{i}].nodeName", endpoint["nodeName"], m)
                          for m in dns1123_subdomain_errors(str(endpoint["nodeName"])))
        if endpoint.get("hostname"):
            errors.extend(FieldError.invalid(f"endpoints[{i}].hostname", endpoint["hostname"], m)
                          for m in dns1123_label_errors(str(endpoint["hostname"])))
    ports = obj.get("ports") or []
    if len(ports) > MAX_PORTS:
        return [*errors, FieldError.too_many("ports", len(ports), MAX_PORTS)]
    names: set[str] = set()
    for i, port in enumerate(ports):
        port = port or {}
        name = str(port.get("name") or "")
        if name:
            errors.extend(FieldError.invalid(f"ports[{i}].name", name, m) for m in dns1123_label_errors(name))
        if name in names:
            errors.append(FieldError.duplicate(f"ports[{i}].name", name))
        names.add(name)
        protocol = port.get("protocol")
        if protocol is None:
            errors.append(FieldError.required(f"ports[{i}].protocol"))
        elif protocol not in _PROTOCOLS:
            errors.append(FieldError.not_supported(f"ports[{i}].protocol", protocol, _PROTOCOLS))
        if port.get("appProtocol") is not None:
            errors.extend(FieldError.invalid(f"ports[{i}].appProtocol", port["appProtocol"], m)
                          for m in qualified_name_errors(str(port["appProtocol"])))
    return errors
