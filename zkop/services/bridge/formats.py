"""The format layer: which znodes a :class:`~zkop.services.bridge.records.ServiceRecord` becomes, and whose a znode is.

The reconciler only calls :meth:`RecordFormat.locate`, :meth:`RecordFormat.nodes` (parents first)
and :func:`parse_owner`; the bytes of one record are the codecs' (:mod:`zkop.services.codecs`). A
new format is one :class:`RecordFormat` subclass registered in :data:`FORMATS`.

Every node zkop writes carries an owner stamp: ``"managedBy": "zkop"`` and
``"owner": {"managedBy", "clusterId", "uid"}`` in ``json`` records and every container node
(containers, being shared, have no ``uid``); the same three values in ``payload.metadata`` of a
Curator instance, so its JSON stays what Curator writes. A node is *ours* when ``managedBy`` is
``zkop`` and ``clusterId`` is this installation's; anything else is foreign and never changed or
deleted. Bytes are deterministic, so an unchanged Service produces no write.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from zkop.kube.client import JSON
from zkop.services.bridge.naming import key_path, namespace_container, service_node_name
from zkop.services.bridge.options import MANAGED_BY, PORT_ANNOTATION, BridgeOptions
from zkop.services.bridge.records import PortRecord, ServiceRecord
from zkop.services.codecs import curator, json_record
from zkop.services.codecs.base import Owner, container_stamp, dumps
from zkop.services.codecs.curator import SPRING_PAYLOAD_CLASS
from zkop.services.codecs.owners import parse_owner
from zkop.services.options import choose

__all__ = [
    "FORMATS",
    "SPRING_PAYLOAD_CLASS",
    "CuratorFormat",
    "DesiredNode",
    "JsonFormat",
    "Location",
    "Owner",
    "RecordFormat",
    "container_stamp",
    "dumps",
    "get_format",
    "parse_owner",
]


@dataclass(frozen=True)
class Location:
    """Where one Service's nodes live.

    Attributes:
        key_path: the node that identifies the Service (collisions are judged on it).
        service_name: the name consumers look up (Curator's ``name``).
        containers: container nodes zkop creates with a container stamp, outermost first.
    """

    key_path: str
    service_name: str
    containers: tuple[str, ...] = ()


@dataclass(frozen=True)
class DesiredNode:
    """A znode as it should be: ``path``, exact ``data``, and whether it is a ``container``."""

    path: str
    data: bytes
    container: bool = False


class RecordFormat(ABC):
    """One way of writing Services into ZooKeeper (see the module docstring)."""

    #: ``--service-bridge-format`` value.
    name: ClassVar[str]
    #: True if a Service's records are the children of its key path (which is then a container).
    records_below_key: ClassVar[bool]

    def locate(self, service: JSON, options: BridgeOptions) -> Location:
        """Where ``service``'s nodes live under ``options.root`` with ``options.layout``."""
        meta = service.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        path = key_path(options.root, options.layout, namespace, name)
        containers = [c for c in (namespace_container(options.root, options.layout, namespace),) if c]
        if self.records_below_key:
            containers.append(path)
        return Location(path, service_node_name(options.layout, namespace, name), tuple(containers))

    @abstractmethod
    def render(self, record: ServiceRecord, location: Location, cluster_id: str) -> tuple[DesiredNode, ...]:
        """The record nodes (not containers) of ``record``, in a stable order."""

    @abstractmethod
    def owner_of(self, path: str, data: bytes) -> Owner | None:
        """The owner stamp in a record node of this format, or ``None`` if it has none."""

    def nodes(self, record: ServiceRecord, location: Location, cluster_id: str) -> tuple[DesiredNode, ...]:
        """Containers (with :func:`container_stamp`) then records: everything to write, parents first."""
        stamp = container_stamp(cluster_id)
        containers = tuple(DesiredNode(path, stamp, container=True) for path in location.containers)
        return containers + self.render(record, location, cluster_id)


class JsonFormat(RecordFormat):
    """``--service-bridge-format json``: one JSON record per Service at its key path.

    Compatible with the original bridge script: a client reading ``clusterIP`` and ``ports``
    from ``<root>/<namespace>-<name>`` keeps working. Keys, in this order: ``name``,
    ``namespace``, ``type``, ``clusterIP`` (``null`` for headless and ExternalName),
    ``clusterIPs``, ``ipFamilies``, ``headless``, ``ports`` (``{name, port, protocol,
    targetPort, nodePort}`` per ``spec.ports`` entry, every protocol), ``externalName``,
    ``externalIPs``, ``loadBalancerIngress`` (``{ip, hostname}``), ``externalAddresses``
    (ingress then external IPs, deduplicated), ``labels`` (the ``--service-bridge-label`` keys),
    ``endpoints`` (only with ``--service-bridge-endpoints``: ``{addresses, ports}``),
    ``managedBy`` and ``owner``.
    """

    name = "json"
    records_below_key = False

    def body(self, record: ServiceRecord, cluster_id: str) -> JSON:
        """The record as a dict in its fixed key order (:func:`zkop.services.codecs.json_record.encode`)."""
        return json_record.encode(record, cluster_id)

    def render(self, record: ServiceRecord, location: Location, cluster_id: str) -> tuple[DesiredNode, ...]:
        """One node at the key path."""
        return (DesiredNode(location.key_path, dumps(self.body(record, cluster_id))),)

    def owner_of(self, path: str, data: bytes) -> Owner | None:
        """The top-level ``owner`` object."""
        return json_record.owner_of(data)


def _primary_port(record: ServiceRecord) -> PortRecord | None:
    wanted = record.annotation(PORT_ANNOTATION)
    if wanted:
        for port in record.ports:
            if port.name == wanted or str(port.port) == wanted:
                return port
    return record.ports[0] if record.ports else None


def _ssl_port(record: ServiceRecord, primary: PortRecord | None) -> PortRecord | None:
    for port in record.ports:
        if port.name == "https" and port != primary:
            return port
    return None


def _endpoint_port(record: ServiceRecord, port: PortRecord | None) -> int | None:
    """The endpoint (container) port behind service port ``port``, via the slices' port names."""
    if port is None:
        return None
    slice_ports = record.endpoints.ports if record.endpoints is not None else ()
    for candidate in slice_ports:
        if candidate.name == port.name and candidate.protocol == port.protocol:
            return candidate.port
    if len(slice_ports) == 1:
        return slice_ports[0].port
    return port.target_port if isinstance(port.target_port, int) else None


class CuratorFormat(RecordFormat):
    """``--service-bridge-format curator``: Apache Curator service-discovery instances.

    Layout ``<key path>/<instance id>`` — Curator's ``basePath/<name>/<id>``
    (``ServiceDiscoveryImpl.pathForInstance``): with the flat layout a Curator or Spring Cloud
    Zookeeper consumer uses ``basePath = <root>`` and the name ``<namespace>-<name>``; with
    the nested layout ``basePath = <root>/<namespace>`` and the Service's own name.

    One instance per address, chosen for reachability from outside the cluster: the
    external addresses (LoadBalancer ingress, ``externalIPs``) if any, else the cluster IP;
    ExternalName: the external name; headless: the ready endpoint addresses (only with
    ``--service-bridge-endpoints``, else no instance). The instance id is the address.

    The instance JSON is :func:`zkop.services.codecs.curator.encode_instance`'s: ``port`` is the port
    named by the ``platform.example.com/zookeeper-port`` annotation, else the first; ``sslPort`` a
    port named ``https``; ``payload.metadata`` holds the owner stamp, the Service's identity, named
    ports and selected labels; ``registrationTimeUTC`` is the Service's creation time (stable
    bytes); ``uriSpec`` is Spring's default ``{scheme}://{address}:{port}``, with an ``sslPort``
    ``{scheme}://{address}:{ssl-port}`` (Curator's ``UriSpec`` then resolves ``{scheme}`` to ``https``);
    ``enabled`` is ``false`` when ``--service-bridge-endpoints`` sees no ready endpoint.
    """

    name = "curator"
    records_below_key = True

    def instances(self, record: ServiceRecord) -> list[tuple[str, int | None, int | None]]:
        """``(address, port, sslPort)`` per instance, in a stable order."""
        primary = _primary_port(record)
        ssl = _ssl_port(record, primary)
        if record.type == "ExternalName":
            return [(record.external_name, primary.port if primary else None, ssl.port if ssl else None)] \
                if record.external_name else []
        if record.headless:
            if record.endpoints is None:
                return []
            port, ssl_port = _endpoint_port(record, primary), _endpoint_port(record, ssl)
            return [(address, port, ssl_port) for address in record.endpoints.addresses]
        addresses = record.external_addresses or ((record.cluster_ip,) if record.cluster_ip else ())
        return [(a, primary.port if primary else None, ssl.port if ssl else None) for a in addresses]

    def instance_body(self, record: ServiceRecord, location: Location, cluster_id: str,
                      address: str, port: int | None, ssl_port: int | None) -> JSON:
        """One Curator ``ServiceInstance`` as a dict in Curator's field order."""
        metadata: dict[str, str] = {
            "managedBy": MANAGED_BY, "clusterId": cluster_id, "uid": record.uid,
            "namespace": record.namespace, "service": record.name, "type": record.type,
        }
        for item in record.ports:
            if item.name:
                metadata[f"port.{item.name}"] = f"{item.port}/{item.protocol}"
        for key, value in record.labels:
            metadata[f"label.{key}"] = value
        enabled = True
        if record.endpoints is not None and record.type != "ExternalName":
            enabled = bool(record.endpoints.addresses)
            metadata["instance_status"] = "UP" if enabled else "OUT_OF_SERVICE"
        return curator.encode_instance(name=location.service_name, address=address, port=port, ssl_port=ssl_port,
                                       metadata=metadata, registration_ms=record.created_ms, enabled=enabled)

    def render(self, record: ServiceRecord, location: Location, cluster_id: str) -> tuple[DesiredNode, ...]:
        """One node per instance below the key path."""
        return tuple(
            DesiredNode(f"{location.key_path}/{address}",
                        dumps(self.instance_body(record, location, cluster_id, address, port, ssl)))
            for address, port, ssl in self.instances(record)
        )

    def owner_of(self, path: str, data: bytes) -> Owner | None:
        """``payload.metadata.{managedBy, clusterId, uid}``."""
        return curator.owner_of(data)


#: Every known format by ``--service-bridge-format`` name.
FORMATS: dict[str, RecordFormat] = {f.name: f for f in (JsonFormat(), CuratorFormat())}


def get_format(name: str) -> RecordFormat:
    """The format called ``name``.

    Raises:
        ValueError: unknown format.
    """
    return choose(FORMATS, name, "service bridge format")
