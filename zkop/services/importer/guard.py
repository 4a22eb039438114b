"""Which registered addresses the importer refuses to put in an EndpointSlice: the address guard.

Whoever can write a registration under the import root decides where an imported Service sends
its traffic. kube-apiserver refuses loopback and link-local endpoint addresses (skipped before this,
:func:`zkop.services.codecs.base.classify_address`) but accepts a slice naming another Service's
ClusterIP, the ``kubernetes`` Service's included, or the API server's own addresses: an imported
Service would then lead to the API server (the pattern of CVE-2021-25740). So, pure and table-tested:

==================  ============================================================================
reason              an IP address is skipped when
==================  ============================================================================
``service-range``   it lies in one of the cluster's Service ranges (``networking.k8s.io/v1``
                    ServiceCIDRs, ``spec.cidrs``)
``apiserver``       it is one of the API server's own endpoint addresses (the EndpointSlices of
                    ``default/kubernetes``)
``not-allowed``     ``--import-allowed-cidrs`` is set and it lies in none of them; an ``FQDN``
                    address is then skipped too (it lies in no CIDR)
==================  ============================================================================

The rules apply in that order (the first that matches names the skip). The reconciler builds an
:class:`AddressGuard` from its caches for every pass and applies :func:`guard_service` to every
parsed service before planning, so a refused address is never planned, and its ports count for
nothing.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from zkop.kube.client import JSON
from zkop.services.codecs.base import ImportedInstance, Skipped, SkipReason
from zkop.services.importer.sources import ImportedService

__all__ = [
    "AddressGuard",
    "Network",
    "apiserver_addresses",
    "guard_service",
    "parse_cidr",
    "service_ranges",
]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_cidr(text: str) -> Network:
    """``text`` (``10.0.0.0/8``, ``fd00::/64``, or one address, read as ``/32`` or ``/128``) as a network.

    Raises:
        ValueError: not a CIDR, or host bits set (``10.0.0.1/8``).
    """
    return ipaddress.ip_network(text.strip(), strict=True)


def service_ranges(servicecidrs: Iterable[JSON]) -> tuple[Network, ...]:
    """Every ``spec.cidrs`` entry of the ServiceCIDR objects (unparsable entries ignored), sorted, unique."""
    found: set[Network] = set()
    for obj in servicecidrs:
        for cidr in ((obj.get("spec") or {}).get("cidrs") or []):
            try:
                found.add(ipaddress.ip_network(str(cidr), strict=False))
            except ValueError:
                continue
    return tuple(sorted(found, key=lambda n: (n.version, n.network_address, n.prefixlen)))


def apiserver_addresses(slices: Iterable[JSON]) -> frozenset[str]:
    """Every endpoint address of the EndpointSlices (those of ``default/kubernetes``), normalised."""
    found: set[str] = set()
    for obj in slices:
        for endpoint in obj.get("endpoints") or []:
            for address in (endpoint or {}).get("addresses") or []:
                ip = _ip(str(address))
                if ip is not None:
                    found.add(str(ip))
    return frozenset(found)


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


@dataclass(frozen=True)
class AddressGuard:
    """What the importer refuses (module docstring).

    Attributes:
        service_ranges: the cluster's Service ranges.
        apiserver: the API server's endpoint addresses (normalised text).
        allowed: ``--import-allowed-cidrs``; empty: any address no other rule refuses.
    """

    service_ranges: tuple[Network, ...] = ()
    apiserver: frozenset[str] = frozenset()
    allowed: tuple[Network, ...] = ()

    def refusal(self, address: str, address_type: str) -> tuple[SkipReason, str] | None:
        """Why ``address`` (as :func:`~zkop.services.codecs.base.classify_address` normalised it, of EndpointSlice
        ``address_type``) must not be imported: ``(reason, detail)``, or ``None`` if it may be."""
        ip: Any = _ip(address) if address_type != "FQDN" else None
        if ip is not None:
            for network in self.service_ranges:
                if ip.version == network.version and ip in network:
                    return "service-range", (f"{address} is in the cluster's Service range {network}; an imported "
                                             "Service must not lead to another Service")
            if str(ip) in self.apiserver:
                return "apiserver", f"{address} is an address of the Kubernetes API server"
        if self.allowed and not (ip is not None and any(ip.version == n.version and ip in n for n in self.allowed)):
            return "not-allowed", (f"{address} is outside --import-allowed-cidrs "
                                   f"({', '.join(str(n) for n in self.allowed)})")
        return None


def guard_service(imported: ImportedService, guard: AddressGuard) -> ImportedService:
    """``imported`` with every instance ``guard`` refuses moved to ``skipped`` (its reason and detail); the
    same object if none is refused."""
    kept: list[ImportedInstance] = []
    refused: list[Skipped] = []
    for instance in imported.instances:
        why = guard.refusal(instance.address, instance.address_type)
        if why is None:
            kept.append(instance)
        else:
            refused.append(Skipped(instance.path, why[0], why[1]))
    if not refused:
        return imported
    return replace(imported, instances=tuple(kept), skipped=imported.skipped + tuple(refused))
