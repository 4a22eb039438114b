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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar
from urllib.parse import unquote

from zkop.kube.client import JSON
from zkop.services.bridge.annotations import FORMAT, DubboSettings, ServiceAnnotations, read_annotations
from zkop.services.bridge.naming import key_path, namespace_container, service_node_name
from zkop.services.bridge.options import MANAGED_BY, PORT_ANNOTATION, BridgeOptions
from zkop.services.bridge.records import PortRecord, ServiceRecord
from zkop.services.codecs import curator, dubbo, json_record
from zkop.services.codecs.base import Owner, container_stamp, dumps, owner_dict
from zkop.services.codecs.curator import SPRING_PAYLOAD_CLASS
from zkop.services.codecs.owners import parse_owner
from zkop.services.options import choose

__all__ = [
    "APPLICATION_ROLE",
    "FORMATS",
    "INTERFACE_ROLE",
    "METADATA_ROLE",
    "SPRING_PAYLOAD_CLASS",
    "CuratorFormat",
    "DesiredNode",
    "DubboFormat",
    "JsonFormat",
    "Location",
    "Owner",
    "RecordFormat",
    "container_stamp",
    "dubbo_application",
    "dumps",
    "format_for",
    "get_format",
    "parse_owner",
]


@dataclass(frozen=True)
class Location:
    """Where one Service's nodes live.

    Attributes:
        key_path: the node that identifies the Service (collisions are judged on it); ``""`` when the Service
            names nothing to publish (a Dubbo Service without an interface).
        service_name: the name consumers look up (Curator's ``name``).
        containers: container nodes zkop creates with a container stamp, outermost first.
        extra_keys: further key paths of the same Service (a Dubbo Service's other interfaces, its application's
            instance and metadata nodes), each judged alone.
        roles: what a key path is, when a format has several kinds of them (Dubbo: ``interface``, ``application``,
            ``metadata``); a key path not named here is the format's only kind.
    """

    key_path: str
    service_name: str
    containers: tuple[str, ...] = ()
    extra_keys: tuple[str, ...] = ()
    roles: tuple[tuple[str, str], ...] = ()

    def role(self, key: str) -> str:
        """The role of key path ``key`` (``""`` when the format has one kind of key path)."""
        return dict(self.roles).get(key, "")

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key path of the Service: ``key_path`` then ``extra_keys`` (none when ``key_path`` is empty)."""
        return ((self.key_path,) if self.key_path else ()) + self.extra_keys


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
    ``endpoints`` (only with ``--service-bridge-endpoints``: ``{addresses, ports}``, plus ``draining`` when an
    endpoint is serving but terminating), ``metadata`` (the ``…/meta-<key>`` annotations, only when there are
    some), ``managedBy`` and ``owner``.
    """

    name = "json"
    records_below_key = False

    def body(self, record: ServiceRecord, cluster_id: str) -> JSON:
        """The record as a dict in its fixed key order (:func:`zkop.services.codecs.json_record.encode`)."""
        return json_record.encode(record, cluster_id, read_annotations(dict(record.annotations)).metadata)

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
    ``enabled`` is ``false`` when ``--service-bridge-endpoints`` sees no ready endpoint, and for a headless
    Service's draining (serving but terminating) endpoint, which is published with ``enabled`` false and
    ``instance_status`` ``OUT_OF_SERVICE`` until it goes (a Curator ``ServiceProvider`` filtering on
    ``isEnabled``, or Spring Cloud Zookeeper, stops choosing it). The ``…/meta-<key>`` annotations go into
    ``payload.metadata`` under their own keys (what Spring Cloud Zookeeper exposes as the instance's metadata).
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
            return [(address, port, ssl_port) for address in (*record.endpoints.addresses, *record.endpoints.draining)]
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
        for key, value in read_annotations(dict(record.annotations)).metadata:
            metadata.setdefault(key, value)
        enabled = True
        if record.endpoints is not None and record.type != "ExternalName":
            # A headless Service's draining endpoint is published with enabled false.
            enabled = address in record.endpoints.addresses if record.headless else bool(record.endpoints.addresses)
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


def _dubbo_port(record: ServiceRecord, settings: DubboSettings) -> PortRecord | None:
    """The Service port behind the Dubbo protocol: the ``dubbo-port`` annotation's (name or number), else a port
    named like the protocol, else the first."""
    for wanted in (settings.port, settings.protocol):
        for port in record.ports:
            if wanted and (port.name == wanted or str(port.port) == wanted):
                return port
    return record.ports[0] if record.ports else None


#: Key path roles of the Dubbo format (:attr:`Location.roles`).
INTERFACE_ROLE, APPLICATION_ROLE, METADATA_ROLE = "interface", "application", "metadata"


def dubbo_application(record_or_service: ServiceRecord | JSON, settings: DubboSettings) -> str:
    """The Dubbo application a Service publishes as: the ``…/dubbo-application`` annotation, else
    ``<namespace>-<name>``."""
    if isinstance(record_or_service, ServiceRecord):
        namespace, name = record_or_service.namespace, record_or_service.name
    else:
        meta = record_or_service.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    return settings.application or f"{namespace}-{name}"


class DubboFormat(RecordFormat):
    """``--service-bridge-format dubbo`` (or the ``zookeeper.platform.example.com/format: dubbo`` annotation):
    Apache Dubbo providers as Dubbo 3.3 registers them with ``register-mode`` ``all`` (the
    ``…/dubbo-registration`` annotation chooses ``interface`` or ``application`` alone).

    **Interface-level** (Dubbo 2 and 3's ``ZookeeperRegistry``): ``<dubbo root>/<URL-encoded interface>/providers/
    <URL-encoded provider URL>`` for each interface the ``…/dubbo-interfaces`` annotation names. One provider URL per
    address (:func:`zkop.services.codecs.dubbo.encode_provider`): with ``--service-bridge-endpoints`` one per ready
    endpoint at the endpoint port (a serving but terminating endpoint with ``weight=0``: Dubbo's load balancers pick
    it only while every provider has weight 0), else the external addresses or the cluster IP at the Service port
    (ExternalName: its name). URL parameters, in order: ``interface``, ``side=provider``, ``application``
    (annotation, else ``<namespace>-<name>``), ``version`` and ``group`` (if annotated), ``dubbo=2.0.2``, the
    metadata (``…/meta-<key>``, sorted), ``weight=0`` if draining, then zkop's ``managedBy`` and ``clusterId`` (the
    importer never imports it back). The node's data is the owner stamp (JSON, as a container's plus the Service
    uid); Dubbo reads only the node's name.

    **Application-level** (Dubbo 3's ``ZookeeperServiceDiscovery`` and ``ZookeeperMetadataReport``, what a consumer
    with ``registry-type=service`` or ``migration FORCE_APPLICATION`` reads): the same addresses as instances
    ``<services root>/<application>/<host>:<port>`` (:func:`zkop.services.codecs.dubbo.encode_instance`, the owner
    stamp in the payload's metadata as a Curator instance's, ``serviceType`` ``PERMANENT``), each naming the metadata
    revision of its services at ``<dubbo root>/metadata/<application>/<revision>``
    (:func:`zkop.services.codecs.dubbo.metadata_info`, storage type ``remote``; one revision per port, and one for
    draining instances, whose services carry ``weight=0``). The interface → application mapping
    (``<dubbo root>/mapping/<interface>``) is shared with other applications and is not a record of this format:
    the reconciler merges the application's name into it (:mod:`zkop.services.bridge.mapping`).

    Key paths, each judged alone (among Services naming one, the oldest publishes it): each interface's
    ``…/providers`` node (also with ``application`` alone, so one Service owns an interface whatever its
    registration), and with application-level registration the application's instance node and metadata node.
    """

    name = "dubbo"
    records_below_key = True
    #: Dubbo's protocol version parameter, as Dubbo 2.7 and 3 providers write it.
    PROTOCOL_VERSION = "2.0.2"
    #: The metadata storage type zkop's instances name: the consumer reads the metadata from ZooKeeper.
    STORAGE_TYPE = "remote"

    def locate(self, service: JSON, options: BridgeOptions) -> Location:
        """One key path ``<dubbo root>/<interface>/providers`` per annotated interface, then (application-level)
        ``<services root>/<application>`` and ``<dubbo root>/metadata/<application>``; none: ``key_path`` empty."""
        meta = service.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        settings = read_annotations(meta.get("annotations") or {}).dubbo
        root = options.dubbo_root.rstrip("/")
        keys = [f"{root}/{dubbo.interface_node(i)}/{dubbo.PROVIDERS}" for i in settings.interfaces]
        roles = [(key, INTERFACE_ROLE) for key in keys]
        containers = [c for key in keys for c in (key.rsplit("/", 1)[0], key)] if settings.interface_level else []
        if keys and settings.application_level:
            application = dubbo_application(service, settings)
            app_key = f"{options.dubbo_services_root.rstrip('/')}/{application}"
            meta_key = f"{root}/{dubbo.METADATA}/{application}"
            keys += [app_key, meta_key]
            roles += [(app_key, APPLICATION_ROLE), (meta_key, METADATA_ROLE)]
            containers += [app_key, meta_key]
        return Location(keys[0] if keys else "", service_node_name(options.layout, namespace, name),
                        tuple(containers), tuple(keys[1:]), tuple(roles))

    def providers(self, record: ServiceRecord) -> list[tuple[str, int, bool]]:
        """``(address, port, draining)`` per provider, in a stable order (see the class docstring)."""
        settings = read_annotations(dict(record.annotations)).dubbo
        port = _dubbo_port(record, settings)
        if port is None:
            return []
        if record.type == "ExternalName":
            return [(record.external_name, port.port, False)] if record.external_name else []
        if record.endpoints is not None:
            number = _endpoint_port(record, port)
            if number is None:
                return []
            return [(a, number, False) for a in record.endpoints.addresses] + \
                [(a, number, True) for a in record.endpoints.draining]
        if record.headless:
            return []
        addresses = record.external_addresses or ((record.cluster_ip,) if record.cluster_ip else ())
        return [(a, port.port, False) for a in addresses]

    def _params(self, record: ServiceRecord, annotations: ServiceAnnotations, draining: bool,
                cluster_id: str) -> dict[str, str]:
        settings = annotations.dubbo
        params: dict[str, str] = {"application": dubbo_application(record, settings)}
        if settings.version:
            params["version"] = settings.version
        if settings.group:
            params["group"] = settings.group
        params["dubbo"] = self.PROTOCOL_VERSION
        params.update(annotations.metadata)
        if draining:
            params["weight"] = "0"
        params["managedBy"] = MANAGED_BY
        params["clusterId"] = cluster_id
        return params

    def provider_url(self, record: ServiceRecord, interface: str, address: str, port: int, draining: bool,
                     cluster_id: str) -> str:
        """The node name (URL-encoded provider URL) of one provider of ``interface``."""
        annotations = read_annotations(dict(record.annotations))
        params = self._params(record, annotations, draining, cluster_id)
        return dubbo.encode_provider(interface, address, port, protocol=annotations.dubbo.protocol, params=params)

    def service_infos(self, record: ServiceRecord, interfaces: Sequence[str], port: int, draining: bool,
                      cluster_id: str) -> list[dubbo.ServiceInfo]:
        """The ``MetadataInfo`` services of ``interfaces`` served at ``port`` (``weight=0`` when ``draining``): the
        provider URL's parameters plus ``interface``, ``side`` and ``metadata-type``, as Dubbo's provider writes."""
        annotations = read_annotations(dict(record.annotations))
        settings = annotations.dubbo
        infos = []
        for interface in interfaces:
            params = {"interface": interface, "side": "provider", "metadata-type": self.STORAGE_TYPE,
                      **self._params(record, annotations, draining, cluster_id)}
            infos.append(dubbo.ServiceInfo(interface, settings.protocol, port, params, settings.group,
                                           settings.version))
        return infos

    def render(self, record: ServiceRecord, location: Location, cluster_id: str) -> tuple[DesiredNode, ...]:
        """Interface-level: one node per provider below each interface key path; application-level: the metadata
        revisions (first, so an instance never names a revision not yet written), then one node per instance."""
        settings = read_annotations(dict(record.annotations)).dubbo
        stamp = {"managedBy": MANAGED_BY, "owner": owner_dict(cluster_id, record.uid)}
        data = dumps(stamp)
        interface_keys = [k for k in location.keys if location.role(k) in (INTERFACE_ROLE, "")]
        interfaces = [unquote(key.rsplit("/", 2)[-2]) for key in interface_keys]
        providers = self.providers(record)
        nodes: list[DesiredNode] = []
        if settings.interface_level:
            for key, interface in zip(interface_keys, interfaces, strict=True):
                for address, port, draining in providers:
                    nodes.append(DesiredNode(
                        f"{key}/{self.provider_url(record, interface, address, port, draining, cluster_id)}", data))
        app_keys = [k for k in location.keys if location.role(k) == APPLICATION_ROLE]
        meta_keys = [k for k in location.keys if location.role(k) == METADATA_ROLE]
        if not (settings.application_level and app_keys and meta_keys and interfaces):
            return tuple(nodes)
        application = dubbo_application(record, settings)
        revisions: dict[tuple[int, bool], str] = {}
        for _address, port, draining in providers:
            if (port, draining) in revisions:
                continue
            infos = self.service_infos(record, interfaces, port, draining, cluster_id)
            body = dubbo.metadata_info(application, infos, stamp)
            revisions[(port, draining)] = str(body["revision"])
            nodes.append(DesiredNode(f"{meta_keys[0]}/{body['revision']}", dumps(body)))
        user_metadata = dict(read_annotations(dict(record.annotations)).metadata)
        for address, port, draining in providers:
            metadata = {**user_metadata, "managedBy": MANAGED_BY, "clusterId": cluster_id, "uid": record.uid,
                        "namespace": record.namespace, "service": record.name,
                        "dubbo.metadata.revision": revisions[(port, draining)],
                        "dubbo.metadata.storage-type": self.STORAGE_TYPE}
            body = dubbo.encode_instance(application=application, address=address, port=port,
                                         protocol=settings.protocol, metadata=metadata,
                                         registration_ms=record.created_ms, service_type=curator.CURATOR_SERVICE_TYPE)
            nodes.append(DesiredNode(f"{app_keys[0]}/{dubbo.instance_id(address, port)}", dumps(body)))
        return tuple(nodes)

    def mapping_entries(self, location: Location, options: BridgeOptions) -> tuple[tuple[str, str], ...]:
        """``(mapping node, application)`` for each interface key path of ``location`` when it holds the
        application's keys (application-level registration, and the Service won its application): the interface →
        application mapping nodes (``<dubbo root>/mapping/<interface>``) that should name the application."""
        apps = [k for k in location.keys if location.role(k) == APPLICATION_ROLE]
        if not apps or not any(location.role(k) == METADATA_ROLE for k in location.keys):
            return ()
        application = apps[0].rsplit("/", 1)[1]
        root = options.dubbo_root.rstrip("/")
        return tuple((f"{root}/{dubbo.MAPPING}/{key.rsplit('/', 2)[-2]}", application) for key in location.keys
                     if location.role(key) in (INTERFACE_ROLE, ""))

    def owner_of(self, path: str, data: bytes) -> Owner | None:
        """The top-level ``owner`` object of the node's data (providers, metadata), else the instance payload's."""
        return json_record.owner_of(data) or curator.owner_of(data)


#: Every known format by ``--service-bridge-format`` name.
FORMATS: dict[str, RecordFormat] = {f.name: f for f in (JsonFormat(), CuratorFormat(), DubboFormat())}


def format_for(service: JSON, default: RecordFormat) -> RecordFormat:
    """The format ``service`` is published in: its ``zookeeper.platform.example.com/format`` annotation when that
    names a known format, else ``default`` (``--service-bridge-format``)."""
    named = str(((service.get("metadata") or {}).get("annotations") or {}).get(FORMAT) or "").strip()
    return FORMATS.get(named, default)


def get_format(name: str) -> RecordFormat:
    """The format called ``name``.

    Raises:
        ValueError: unknown format.
    """
    return choose(FORMATS, name, "service bridge format")
