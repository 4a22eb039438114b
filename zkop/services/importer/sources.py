"""ZooKeeper service-discovery layouts, parsed into one format-neutral model.

Pure functions and small descriptors, no I/O; the bytes are decoded by the codecs the bridge
encodes with (:mod:`zkop.services.codecs`): :mod:`zkop.services.importer.reader` reads the nodes a
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

Metadata. Each instance also carries its registration's metadata (Curator ``payload.metadata``, the JSON record's
``metadata``, Dubbo URL parameters; :attr:`ImportedInstance.metadata`), which the planner turns into the Service's
``zookeeper.platform.example.com/meta-<key>`` annotations by the rules of :mod:`zkop.services.metadata`.

Loop prevention. Nodes stamped by zkop's forward bridge — a top-level ``"owner"`` /
``"managedBy": "zkop"`` (JSON records and container nodes) or ``payload.metadata.managedBy:
"zkop"`` (Curator instances), as :func:`zkop.services.codecs.owners.parse_owner` reads them; for Dubbo a
``managedBy=zkop`` URL parameter — are never imported, whatever their cluster id: a service node
so stamped is skipped entirely, an instance so stamped is skipped on its own.

Addresses (EndpointSlice API reference, ``addressType``): IPv4 and IPv6 literals (``[…]``
brackets allowed, normalised to the compressed form) and DNS names (lower-cased, trailing dot
removed, must be a DNS-1123 subdomain → ``FQDN``). Addresses Kubernetes refuses in an
EndpointSlice (unspecified, loopback, link-local, multicast) are skipped, since one of them would
make the API server reject the whole slice.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from zkop.services.codecs import curator, dubbo, json_record
from zkop.services.codecs.base import (
    AddressType,
    ImportedInstance,
    ImportedPort,
    Skipped,
    SkipReason,
    classify_address,
    parse_address,
)
from zkop.services.codecs.owners import written_by_zkop
from zkop.services.importer.options import ImportFormat
from zkop.services.options import choose

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
    "classify_address",
    "get_source",
    "parse_address",
    "parse_curator_instance",
    "parse_dubbo_provider",
    "parse_json_record",
    "written_by_zkop",
]


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


_BY_ZKOP = "written by zkop's service bridge"


def parse_curator_instance(path: str, name: str, data: bytes) -> ImportedInstance | Skipped:
    """One Curator ``ServiceInstance`` node (:func:`zkop.services.codecs.curator.decode_instance`),
    skipped with reason ``zkop`` if zkop's bridge wrote it."""
    if written_by_zkop(path, data):
        return Skipped(path, "zkop", _BY_ZKOP)
    return curator.decode_instance(path, name, data)


def parse_json_record(path: str, data: bytes) -> tuple[tuple[ImportedInstance, ...], tuple[Skipped, ...]]:
    """One bridge JSON record (:func:`zkop.services.codecs.json_record.decode`), nothing imported if
    zkop's bridge wrote it."""
    if written_by_zkop(path, data):
        return (), (Skipped(path, "zkop", _BY_ZKOP),)
    return json_record.decode(path, data)


def parse_dubbo_provider(path: str, name: str) -> ImportedInstance | Skipped:
    """One Dubbo provider node, whose *name* is the URL-encoded provider URL
    (:func:`zkop.services.codecs.dubbo.decode_provider`)."""
    return dubbo.decode_provider(path, name)


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


def _per_child(node: SourceNode, parse: Callable[[SourceChild], ImportedInstance | Skipped],
               ) -> tuple[tuple[ImportedInstance, ...], tuple[Skipped, ...]]:
    """One instance (or skip) per child; a child that could not be read is skipped as ``unreadable``."""
    instances: list[ImportedInstance] = []
    skipped: list[Skipped] = []
    for child in node.children:
        parsed = Skipped(child.path, "unreadable", child.error) if child.error is not None else parse(child)
        if isinstance(parsed, Skipped):
            skipped.append(parsed)
        else:
            instances.append(parsed)
    return tuple(instances), tuple(skipped)


class CuratorSource(ServiceSource):
    """``<root>/<name>/<id>`` holding Curator ``ServiceInstance`` JSON."""

    name = "curator"
    reads_instance_data = True

    def instance_parent(self, service_path: str) -> str | None:
        """The service node itself."""
        return service_path

    def instances(self, node: SourceNode) -> tuple[tuple[ImportedInstance, ...], tuple[Skipped, ...]]:
        """One instance per child node."""
        return _per_child(node, lambda child: parse_curator_instance(child.path, child.name, child.data or b""))


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
        return f"{service_path}/{dubbo.PROVIDERS}"

    def source_name(self, node_name: str) -> str:
        """The interface name (the node name is URL-encoded)."""
        return dubbo.interface_of(node_name)

    def instances(self, node: SourceNode) -> tuple[tuple[ImportedInstance, ...], tuple[Skipped, ...]]:
        """One instance per provider URL."""
        return _per_child(node, lambda child: parse_dubbo_provider(child.path, child.name))


#: Every layout by ``--import-format`` name.
SOURCES: dict[str, ServiceSource] = {s.name: s for s in (CuratorSource(), JsonSource(), DubboSource())}


def get_source(name: str) -> ServiceSource:
    """The layout called ``name``.

    Raises:
        ValueError: unknown format.
    """
    return choose(SOURCES, name, "import format")
