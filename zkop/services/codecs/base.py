"""What every codec shares: owner stamps, compact JSON, the encode input and the decode output.

Ownership. Every node zkop writes carries an owner stamp (``managedBy``, ``clusterId``, and for
records the Service ``uid``); a node is *ours* when the stamp says ``managedBy == "zkop"`` and
``clusterId`` is this installation's. Everything else (no stamp, unparsable data, another cluster
id, an ephemeral node) is *foreign* and is never changed or deleted.

Decoding (EndpointSlice API reference, ``addressType``): addresses are IPv4 and IPv6 literals
(``[…]`` brackets allowed, normalised to the compressed form) and DNS names (lower-cased, trailing
dot removed, must be a DNS-1123 subdomain → ``FQDN``). Addresses Kubernetes refuses in an
EndpointSlice (unspecified, loopback, link-local, multicast, IPv6 with a zone) are refused, since
one of them would make the API server reject the whole slice.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from zkop.kube.client import JSON
from zkop.kube.validation import is_dns1123_label, is_dns1123_subdomain
from zkop.services.endpoints import EndpointsView
from zkop.services.options import MANAGED_BY

__all__ = [
    "PROTOCOLS",
    "AddressType",
    "ImportedInstance",
    "ImportedPort",
    "Owner",
    "PortRecord",
    "ServiceRecord",
    "SkipReason",
    "Skipped",
    "classify_address",
    "container_stamp",
    "dumps",
    "loads",
    "owner_dict",
    "parse_address",
    "valid_port",
]

AddressType = Literal["IPv4", "IPv6", "FQDN"]
#: Why an instance was not imported: ``zkop`` (written by zkop's forward bridge), ``invalid``
#: (unparsable), ``address`` (an address no EndpointSlice can hold), ``no-port`` (no usable port), ``unreadable``
#: (ZooKeeper refused the read, e.g. an ACL); the importer's address guard adds ``service-range``, ``apiserver``
#: and ``not-allowed`` (:mod:`zkop.services.importer.guard`).
SkipReason = Literal["zkop", "invalid", "address", "no-port", "unreadable", "service-range", "apiserver",
                     "not-allowed"]
_DOTTED_QUAD = re.compile(r"[0-9]{1,3}(\.[0-9]{1,3}){3}")
#: Port protocols Kubernetes knows.
PROTOCOLS = ("TCP", "UDP", "SCTP")


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON with the key order of ``value`` (dicts are built in a fixed order)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def loads(data: bytes) -> Any:
    """``data`` as JSON, or ``None`` if it is not UTF-8 JSON."""
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None


# --- ownership ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Owner:
    """An owner stamp as read from a node.

    Attributes:
        managed_by: ``managedBy`` (zkop writes ``"zkop"``).
        cluster_id: the writing installation's ``--cluster-id``.
        uid: the Service's uid for records; ``None`` for container nodes.
    """

    managed_by: str
    cluster_id: str
    uid: str | None = None

    def is_ours(self, cluster_id: str) -> bool:
        """True if this installation (``cluster_id``) wrote the node."""
        return self.managed_by == MANAGED_BY and self.cluster_id == cluster_id


def owner_dict(cluster_id: str, uid: str) -> JSON:
    """The stamp of a record: ``{"managedBy": "zkop", "clusterId": …, "uid": …}``."""
    return {"managedBy": MANAGED_BY, "clusterId": cluster_id, "uid": uid}


def container_stamp(cluster_id: str) -> bytes:
    """The data of a container node zkop creates: just the owner stamp, without a uid."""
    return dumps({"managedBy": MANAGED_BY, "owner": {"managedBy": MANAGED_BY, "clusterId": cluster_id}})


# --- the encode input: a Service, format-neutral ----------------------------------------------


@dataclass(frozen=True)
class PortRecord:
    """One ``spec.ports`` entry.

    Attributes:
        name: the port's name, ``None`` when unnamed (allowed for a single port).
        port: the Service port.
        protocol: ``TCP`` (default), ``UDP`` or ``SCTP``.
        target_port: number or named container port; defaults to ``port`` like the API server.
        node_port: allocated node port (NodePort/LoadBalancer), else ``None``.
    """

    name: str | None
    port: int
    protocol: str
    target_port: int | str
    node_port: int | None


@dataclass(frozen=True)
class ServiceRecord:
    """What the bridge publishes about one Service, before formatting.

    Attributes:
        namespace, name, uid: identity; ``uid`` goes into the owner stamp.
        type: ``spec.type``.
        headless: ``spec.clusterIP == "None"``.
        cluster_ip: the primary cluster IP, ``None`` for headless and ExternalName Services.
        cluster_ips: ``spec.clusterIPs`` (dual-stack: one per family), empty when headless.
        ip_families: ``spec.ipFamilies``.
        ports: ``spec.ports`` in spec order, every protocol.
        external_name: ``spec.externalName`` for ExternalName Services.
        external_ips: ``spec.externalIPs`` in spec order.
        load_balancer_ingress: ``(ip, hostname)`` per ``status.loadBalancer.ingress`` entry.
        labels: the selected labels, sorted by key.
        created_ms: creation time, Unix milliseconds.
        annotations: ``metadata.annotations`` (formats may read their own).
        endpoints: ready endpoints (``--service-bridge-endpoints``), else ``None``.
    """

    namespace: str
    name: str
    uid: str
    type: str
    headless: bool
    cluster_ip: str | None
    cluster_ips: tuple[str, ...]
    ip_families: tuple[str, ...]
    ports: tuple[PortRecord, ...]
    external_name: str | None
    external_ips: tuple[str, ...]
    load_balancer_ingress: tuple[tuple[str | None, str | None], ...]
    labels: tuple[tuple[str, str], ...]
    created_ms: int
    annotations: tuple[tuple[str, str], ...] = ()
    endpoints: EndpointsView | None = None

    @property
    def external_addresses(self) -> tuple[str, ...]:
        """Addresses reachable from outside: LB ingress IPs/hostnames, then ``externalIPs``, deduplicated."""
        seen: list[str] = []
        for ip, hostname in self.load_balancer_ingress:
            for address in (ip, hostname):
                if address and address not in seen:
                    seen.append(address)
                    break
        for address in self.external_ips:
            if address not in seen:
                seen.append(address)
        return tuple(seen)

    def annotation(self, name: str) -> str | None:
        """The value of annotation ``name``, or ``None``."""
        return dict(self.annotations).get(name)


# --- the decode output: instances, format-neutral ---------------------------------------------


@dataclass(frozen=True, order=True)
class ImportedPort:
    """One port of an instance: ``name`` (a DNS-1123 label), ``port`` (1–65535), ``protocol``."""

    name: str
    port: int
    protocol: str = "TCP"


@dataclass(frozen=True)
class ImportedInstance:
    """One instance of a service as found in ZooKeeper.

    Attributes:
        id: the instance id in its registry (Curator ``id``, the address for JSON, the URL for Dubbo).
        address: the normalised address.
        address_type: ``IPv4``, ``IPv6`` or ``FQDN`` (EndpointSlice ``addressType``).
        ports: at least one, sorted, unique names.
        ready: False when the registry marks the instance disabled or not serving.
        path: the znode it was read from.
        metadata: the registration's string metadata entries as read, sorted by key, not yet held to the annotation
            rules (:mod:`zkop.services.metadata`): Curator ``payload.metadata``, the JSON record's ``metadata``,
            the Dubbo URL's parameters.
    """

    id: str
    address: str
    address_type: AddressType
    ports: tuple[ImportedPort, ...]
    ready: bool
    path: str
    metadata: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Skipped:
    """An instance (or record) that was not imported: its ``path``, the ``reason`` and a ``detail`` for logs."""

    path: str
    reason: SkipReason
    detail: str = ""


def classify_address(raw: str) -> tuple[str, AddressType] | str:
    """Normalise an address and pick the EndpointSlice ``addressType`` the API server accepts it under.

    Follows ``pkg/apis/discovery/validation/validation.go`` ``validateEndpoints`` (kube-apiserver
    1.29 … 1.32) and the apimachinery validators it calls
    (``k8s.io/apimachinery/pkg/util/validation/validation.go``):

    * an IP literal is parsed as Go's ``netutils.ParseIPSloppy`` does (IPv4 octets with leading
      zeros are decimal; brackets are removed first; a zone such as ``%eth0`` is not an IP);
    * an IPv4-mapped IPv6 address (``::ffff:a.b.c.d``) is *mapped to its IPv4 address*: an IPv6
      slice refuses it (``IsValidIPv6Address``: ``To4() != nil``), and it is that IPv4 host (a
      JVM on a dual-stack socket reports IPv4 peers this way), so it goes in the IPv4 slice,
      written the way every IPv4 consumer reads it;
    * IPs must pass ``ValidateNonSpecialIP`` (``pkg/apis/core/validation/validation.go``): not
      unspecified, loopback, link-local unicast or link-local multicast. Other multicast addresses
      pass the API server but no instance listens on one, so they are refused here too;
    * anything else must be ``IsFullyQualifiedDomainName``: lower-cased, the trailing dot removed,
      a DNS-1123 subdomain of *at least two* labels, each a DNS-1123 label of ≤ 63 characters. A
      single-label host (``pig``, as Spring Cloud Zookeeper registers the local host name) fits no
      slice and is refused.

    Returns:
        ``(address, addressType)``, or why no EndpointSlice can hold it (for the skip report).
    """
    text = raw.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if not text:
        return "no address"
    ip = _parse_ip_sloppy(text)
    if ip is None:
        host = text.lower().removesuffix(".")
        if not is_dns1123_subdomain(host) or not all(is_dns1123_label(label) for label in host.split(".")):
            return f"{raw.strip()!r} is neither an IP address nor a DNS name"
        if "." not in host:
            return (f"{raw.strip()!r} is a single-label host name; an EndpointSlice FQDN needs at least two "
                    "dot-separated labels")
        return host, "FQDN"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for special, why in ((ip.is_unspecified, "unspecified"), (ip.is_loopback, "loopback"),
                         (ip.is_link_local, "link-local"), (ip.is_multicast, "multicast")):
        if special:
            return f"{raw.strip()!r} is a {why} address, which the API server refuses in an EndpointSlice"
    return (str(ip), "IPv4") if ip.version == 4 else (str(ip), "IPv6")


def _parse_ip_sloppy(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """k8s.io/utils/net ``ParseIPSloppy``: ``net.ParseIP`` that reads leading-zero IPv4 octets as decimal."""
    if "%" in text:
        return None
    if _DOTTED_QUAD.fullmatch(text):
        octets = [int(part, 10) for part in text.split(".")]
        return ipaddress.IPv4Address(bytes(octets)) if max(octets) <= 255 else None
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def parse_address(raw: str) -> tuple[str, AddressType] | None:
    """:func:`classify_address` without the reason: ``(address, addressType)`` or ``None``."""
    classified = classify_address(raw)
    return None if isinstance(classified, str) else classified


def valid_port(value: Any) -> int | None:
    """``value`` if it is an int port number 1–65535 (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        return None
    return value
