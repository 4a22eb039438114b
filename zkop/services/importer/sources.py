"""ZooKeeper service-discovery layouts, parsed into one format-neutral model.

Pure functions and small descriptors, no I/O: :mod:`zkop.services.importer.reader` reads the nodes a
:class:`ServiceSource` asks for into a :class:`SourceNode`, and :meth:`ServiceSource.parse` turns
that into an :class:`ImportedService` — a list of :class:`ImportedInstance` (address, ports,
readiness) plus the instances it had to skip and why.

Layouts (``--import-format``):

``curator`` (default root ``/services``)
    Apache Curator service discovery (``curator-x-discovery``, also Spring Cloud Zookeeper and
    Dubbo 3 application-level discovery): ``<root>/<service name>/<instance id>``, each instance
    node holding a JSON ``ServiceInstance`` (``ServiceDiscoveryImpl.pathForInstance``;
    ``JsonInstanceSerializer``). Used fields: ``address``, ``port`` and ``sslPort`` (either may
    be ``null``; exposed as ports named ``http`` and ``https``, the schemes Curator's ``UriSpec``
    resolves ``{scheme}`` to), ``id``, ``enabled`` (CURATOR-275; absent means enabled) and the
    Spring Cloud Zookeeper status ``payload.metadata.instance_status`` (absent or ``UP`` means
    serving, anything else such as ``OUT_OF_SERVICE`` does not). Unknown fields are ignored, as
    Curator's serializer does (``FAIL_ON_UNKNOWN_PROPERTIES=false``).

``json`` (default root ``/kubernetes/services``)
    zkop's forward bridge JSON records and the original bridge script's: ``<root>/<key>``
    holding ``{"clusterIP", "ports": [{"name", "port", "protocol"}], "externalAddresses",
    "endpoints": {"addresses", "ports"}, …}``. The addresses are chosen as the forward bridge
    chooses them for reachability: ``externalAddresses`` if any, else ``clusterIP``, else (a
    headless record) the ready endpoint addresses with the endpoint ports. Only the flat layout
    is read (the nested layout's namespace nodes are zkop's own, see below).

``dubbo`` (default root ``/dubbo``)
    Apache Dubbo's ZooKeeper registry (``ZookeeperRegistry``):
    ``/<group>/<URL-encoded interface>/providers/<URL-encoded provider URL>``, the whole
    provider URL being the node *name* (``dubbo://10.0.0.5:20880/com.example.Api?side=provider&…``).
    The port is named after the URL's protocol (``dubbo``, ``tri``, …); URL parameters
    ``enabled=false`` or ``disabled=true`` mark the provider not ready.

Loop prevention. Nodes stamped by zkop's forward bridge — a top-level ``"owner"`` /
``"managedBy": "zkop"`` (JSON records and container nodes) or ``payload.metadata.managedBy:
"zkop"`` (Curator instances), as :func:`zkop.services.bridge.formats.parse_owner` reads them; for Dubbo a
``managedBy=zkop`` URL parameter — are never imported, whatever their cluster id: a service node
so stamped is skipped entirely, an instance so stamped is skipped on its own.

Addresses (EndpointSlice API reference, ``addressType``): IPv4 and IPv6 literals (``[…]``
brackets allowed, normalised to the compressed form) and DNS names (lower-cased, trailing dot
removed, must be a DNS-1123 subdomain → ``FQDN``). Addresses Kubernetes refuses in an
EndpointSlice (unspecified, loopback, link-local, multicast) are skipped, since one of them would
make the API server reject the whole slice.
"""

from __future__ import annotations

import ipaddress
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Literal
from urllib.parse import parse_qsl, unquote, unquote_plus, urlsplit

from zkop.services.bridge.formats import parse_owner
from zkop.services.importer.naming import is_dns1123_subdomain, port_name
from zkop.services.importer.options import MANAGED_BY, ImportFormat

__all__ = [
    "SOURCES",
    "AddressType",
    "CuratorSource",
    "DubboSource",
    "ImportedInstance",
    "ImportedPort",
    "ImportedService",
    "JsonSource",
    "ServiceSource",
    "SkipReason",
    "Skipped",
    "SourceChild",
    "SourceNode",
    "get_source",
    "parse_address",
    "parse_curator_instance",
    "parse_dubbo_provider",
    "parse_json_record",
    "written_by_zkop",
]

AddressType = Literal["IPv4", "IPv6", "FQDN"]
#: Why an instance was not imported: ``zkop`` (written by zkop's forward bridge), ``invalid``
#: (unparsable, or an address Kubernetes refuses), ``no-port`` (no usable port), ``unreadable``
#: (ZooKeeper refused the read, e.g. an ACL).
SkipReason = Literal["zkop", "invalid", "no-port", "unreadable"]

PROTOCOLS = ("TCP", "UDP", "SCTP")


@dataclass(frozen=True, order=True)
class ImportedPort:
    """One port of an instance: ``name`` (a DNS-1123 label), ``port`` (1–65535), ``protocol``."""

    name: str
    port: int
    protocol: str = "TCP"


@dataclass(frozen=True)
class ImportedInstance:
    """One instance of an imported service.

    Attributes:
        id: the instance id in its registry (Curator ``id``, the address for JSON, the URL for Dubbo).
        address: the normalised address.
        address_type: ``IPv4``, ``IPv6`` or ``FQDN`` (EndpointSlice ``addressType``).
        ports: at least one, sorted, unique names.
        ready: False when the registry marks the instance disabled or not serving.
        path: the znode it was read from.
    """

    id: str
    address: str
    address_type: AddressType
    ports: tuple[ImportedPort, ...]
    ready: bool
    path: str


@dataclass(frozen=True)
class Skipped:
    """An instance (or record) that was not imported: its ``path``, the ``reason`` and a ``detail`` for logs."""

    path: str
    reason: SkipReason
    detail: str = ""


@dataclass(frozen=True)
class SourceChild:
    """One child of a service's instance parent, as read.

    Attributes:
        name: the node name.
        path: its absolute path.
        data: its bytes; ``None`` when the source reads names only (Dubbo) or the read failed.
        error: why the read failed (``None`` if it did not).
    """

    name: str
    path: str
    data: bytes | None = None
    error: str | None = None


@dataclass(frozen=True)
class SourceNode:
    """One service node and its instances as read from ZooKeeper.

    Attributes:
        name: the node name (a child of the import root).
        path: its absolute path.
        created_zxid: ``Stat.czxid`` (the collision rule's age).
        data: the node's own bytes (a JSON record for the ``json`` format).
        children: the instances (children of :meth:`ServiceSource.instance_parent`), sorted by name.
    """

    name: str
    path: str
    created_zxid: int
    data: bytes
    children: tuple[SourceChild, ...] = ()


@dataclass(frozen=True)
class ImportedService:
    """A service as found in ZooKeeper.

    Attributes:
        source_name: its name in the registry (Curator name, Dubbo interface, record key).
        path: the service node.
        created_zxid: ``czxid`` of the service node.
        instances: what is imported, in node-name order.
        skipped: what is not, with reasons.
        written_by_zkop: the service node itself carries zkop's owner stamp; nothing is imported.
    """

    source_name: str
    path: str
    created_zxid: int
    instances: tuple[ImportedInstance, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    written_by_zkop: bool = False


def _loads(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None


def written_by_zkop(path: str, data: bytes) -> bool:
    """True if ``data`` has a zkop owner stamp (``parse_owner``), whatever its cluster id."""
    owner = parse_owner(path, data)
    return owner is not None and owner.managed_by == MANAGED_BY


def parse_address(raw: str) -> tuple[str, AddressType] | None:
    """Normalise an address and classify it (see the module docstring).

    Returns:
        ``(address, addressType)``, or ``None`` if it is neither an IP literal nor a DNS name, or
        is an IP Kubernetes does not accept as an endpoint (unspecified, loopback, link-local, multicast).
    """
    text = raw.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if not text:
        return None
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        host = text.lower().rstrip(".")
        return (host, "FQDN") if is_dns1123_subdomain(host) else None
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
        return None
    if ip.is_unspecified or ip.is_loopback or ip.is_link_local or ip.is_multicast:
        return None
    return (str(ip), "IPv4") if ip.version == 4 else (str(ip), "IPv6")


def _valid_port(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        return None
    return value


def _ports(raw: Any) -> tuple[ImportedPort, ...]:
    """Ports from ``[{"name", "port", "protocol"}]`` (bridge records): invalid entries dropped, unnamed
    ones named ``<protocol>-<port>``, the first of two equal names kept."""
    found: dict[str, ImportedPort] = {}
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        number = _valid_port(item.get("port"))
        protocol = str(item.get("protocol") or "TCP").upper()
        if number is None or protocol not in PROTOCOLS:
            continue
        name = port_name(str(item["name"])) if item.get("name") else None
        name = name or f"{protocol.lower()}-{number}"
        found.setdefault(name, ImportedPort(name, number, protocol))
    return tuple(sorted(found.values()))


def parse_curator_instance(path: str, name: str, data: bytes) -> ImportedInstance | Skipped:
    """One Curator ``ServiceInstance`` node (see the module docstring for the fields used)."""
    value = _loads(data)
    if not isinstance(value, dict):
        return Skipped(path, "invalid", "not a JSON ServiceInstance")
    if written_by_zkop(path, data):
        return Skipped(path, "zkop", "written by zkop's service bridge")
    address = parse_address(str(value.get("address") or ""))
    if address is None:
        return Skipped(path, "invalid", f"unusable address {value.get('address')!r}")
    ports = []
    port, ssl_port = _valid_port(value.get("port")), _valid_port(value.get("sslPort"))
    if port is not None:
        ports.append(ImportedPort("http", port))
    if ssl_port is not None:
        ports.append(ImportedPort("https", ssl_port))
    if not ports:
        return Skipped(path, "no-port", "neither port nor sslPort is set")
    ready = value.get("enabled") is not False
    payload = value.get("payload")
    metadata = payload.get("metadata") if isinstance(payload, dict) else None
    if isinstance(metadata, dict):
        status = metadata.get("instance_status")
        if status is not None and str(status).upper() != "UP":
            ready = False
    return ImportedInstance(str(value.get("id") or name), address[0], address[1], tuple(sorted(ports)), ready, path)


def parse_json_record(path: str, data: bytes) -> tuple[tuple[ImportedInstance, ...], tuple[Skipped, ...]]:
    """One bridge JSON record: an instance per address (see the module docstring), all ready."""
    value = _loads(data)
    if not isinstance(value, dict):
        return (), (Skipped(path, "invalid", "not a JSON record"),)
    if written_by_zkop(path, data):
        return (), (Skipped(path, "zkop", "written by zkop's service bridge"),)
    ports = _ports(value.get("ports"))
    addresses = [a for a in value.get("externalAddresses") or [] if isinstance(a, str)]
    if not addresses and isinstance(value.get("clusterIP"), str) and value["clusterIP"] not in ("", "None"):
        addresses = [value["clusterIP"]]
    if not addresses:
        endpoints = value.get("endpoints")
        if isinstance(endpoints, dict):
            addresses = [a for a in endpoints.get("addresses") or [] if isinstance(a, str)]
            ports = _ports(endpoints.get("ports"))
    if not ports:
        return (), (Skipped(path, "no-port", "the record lists no usable port"),)
    instances: list[ImportedInstance] = []
    skipped: list[Skipped] = []
    for raw in addresses:
        address = parse_address(raw)
        if address is None:
            skipped.append(Skipped(path, "invalid", f"unusable address {raw!r}"))
            continue
        instances.append(ImportedInstance(address[0], address[0], address[1], ports, True, path))
    if not addresses:
        skipped.append(Skipped(path, "invalid", "the record lists no address"))
    return tuple(instances), tuple(skipped)


def parse_dubbo_provider(path: str, name: str) -> ImportedInstance | Skipped:
    """One Dubbo provider node, whose *name* is the URL-encoded provider URL."""
    url = unquote_plus(name)
    try:
        parts = urlsplit(url)
        number = parts.port
    except ValueError:
        return Skipped(path, "invalid", "not a provider URL")
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    if params.get("managedBy") == MANAGED_BY:
        return Skipped(path, "zkop", "written by zkop")
    if params.get("category", "providers") != "providers" or params.get("side", "provider") != "provider":
        return Skipped(path, "invalid", "not a provider URL")
    address = parse_address(parts.hostname or "")
    if not parts.scheme or address is None:
        return Skipped(path, "invalid", f"unusable provider URL {url!r}")
    port = _valid_port(number)
    if port is None:
        return Skipped(path, "no-port", "the provider URL has no port")
    ready = params.get("enabled", "true").lower() != "false" and params.get("disabled", "false").lower() != "true"
    ports = (ImportedPort(port_name(parts.scheme) or "dubbo", port),)
    return ImportedInstance(url, address[0], address[1], ports, ready, path)


class ServiceSource(ABC):
    """One ZooKeeper layout: which nodes hold a service's instances, and how to parse them."""

    #: ``--import-format`` value.
    name: ClassVar[ImportFormat]
    #: True if each instance node's bytes must be read (False: the node name says everything).
    reads_instance_data: ClassVar[bool]

    @abstractmethod
    def instance_parent(self, service_path: str) -> str | None:
        """The node whose children are the instances of ``service_path`` (``None``: the service node is the record)."""

    @abstractmethod
    def instances(self, node: SourceNode) -> tuple[tuple[ImportedInstance, ...], tuple[Skipped, ...]]:
        """Parse the instances of a service node that is not itself written by zkop."""

    def source_name(self, node_name: str) -> str:
        """The registry's name of the service whose node is called ``node_name``."""
        return node_name

    def parse(self, node: SourceNode) -> ImportedService:
        """The :class:`ImportedService` of ``node`` (nothing imported if zkop wrote the node itself)."""
        if written_by_zkop(node.path, node.data):
            return ImportedService(self.source_name(node.name), node.path, node.created_zxid, written_by_zkop=True)
        instances, skipped = self.instances(node)
        return ImportedService(self.source_name(node.name), node.path, node.created_zxid, instances, skipped)


def _unreadable(child: SourceChild) -> Skipped | None:
    if child.error is not None:
        return Skipped(child.path, "unreadable", child.error)
    return None


class CuratorSource(ServiceSource):
    """``<root>/<name>/<id>`` holding Curator ``ServiceInstance`` JSON."""

    name = "curator"
    reads_instance_data = True

    def instance_parent(self, service_path: str) -> str | None:
        """The service node itself."""
        return service_path

    def instances(self, node: SourceNode) -> tuple[tuple[ImportedInstance, ...], tuple[Skipped, ...]]:
        """One instance per child node."""
        instances: list[ImportedInstance] = []
        skipped: list[Skipped] = []
        for child in node.children:
            failed = _unreadable(child)
            if failed is not None:
                skipped.append(failed)
                continue
            parsed = parse_curator_instance(child.path, child.name, child.data or b"")
            if isinstance(parsed, Skipped):
                skipped.append(parsed)
            else:
                instances.append(parsed)
        return tuple(instances), tuple(skipped)


class JsonSource(ServiceSource):
    """``<root>/<key>`` holding one bridge JSON record."""

    name = "json"
    reads_instance_data = False

    def instance_parent(self, service_path: str) -> str | None:
        """None: the service node is the record."""
        return None

    def instances(self, node: SourceNode) -> tuple[tuple[ImportedInstance, ...], tuple[Skipped, ...]]:
        """The record's addresses."""
        return parse_json_record(node.path, node.data)


class DubboSource(ServiceSource):
    """``<root>/<interface>/providers/<provider URL>``."""

    name = "dubbo"
    reads_instance_data = False

    def instance_parent(self, service_path: str) -> str | None:
        """``<service>/providers``."""
        return f"{service_path}/providers"

    def source_name(self, node_name: str) -> str:
        """The interface name (the node name is URL-encoded)."""
        return unquote(node_name)

    def instances(self, node: SourceNode) -> tuple[tuple[ImportedInstance, ...], tuple[Skipped, ...]]:
        """One instance per provider URL."""
        instances: list[ImportedInstance] = []
        skipped: list[Skipped] = []
        for child in node.children:
            parsed = parse_dubbo_provider(child.path, child.name)
            if isinstance(parsed, Skipped):
                skipped.append(parsed)
            else:
                instances.append(parsed)
        return tuple(instances), tuple(skipped)


#: Every layout by ``--import-format`` name.
SOURCES: dict[str, ServiceSource] = {s.name: s for s in (CuratorSource(), JsonSource(), DubboSource())}


def get_source(name: str) -> ServiceSource:
    """The layout called ``name``.

    Raises:
        ValueError: unknown format.
    """
    try:
        return SOURCES[name]
    except KeyError:
        raise ValueError(f"unknown import format {name!r} (known: {', '.join(SOURCES)})") from None
