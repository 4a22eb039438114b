"""Apache Dubbo's ZooKeeper registry (``ZookeeperRegistry``): provider URLs as node names.

Layout ``/<group>/<URL-encoded interface>/providers/<URL-encoded provider URL>``: the whole provider
URL is the node *name* (``dubbo://10.0.0.5:20880/com.example.Api?side=provider&…``, encoded as
Java's ``URLEncoder.encode`` does). The port is named after the URL's protocol (``dubbo``, ``tri``,
…); URL parameters ``enabled=false`` or ``disabled=true`` mark the provider not ready; a URL whose
``category`` is not ``providers`` or whose ``side`` is not ``provider`` is not a provider. zkop's
owner stamp, if any, is the URL parameter ``managedBy=zkop`` (with ``clusterId``). The provider's metadata is its
URL parameters (the importer's rules, :mod:`zkop.services.metadata`, leave Dubbo's own ones out).

Dubbo 3's application-level registration (``ZookeeperServiceDiscovery`` and ``ZookeeperMetadataReport``, read in
Dubbo 3.3.6's source and checked against what its provider writes) has three parts, encoded here:

* an instance per address at ``/services/<application>/<host>:<port>``: a Curator ``ServiceInstance`` whose payload
  is Dubbo's ``ZookeeperInstance`` (:func:`encode_instance`), with the metadata a consumer reads:
  ``dubbo.endpoints`` (the port of each protocol), ``dubbo.metadata.revision`` and
  ``dubbo.metadata.storage-type`` (``remote``: the consumer reads the metadata from ZooKeeper instead of calling the
  instance's ``MetadataService``);
* the application's metadata at ``/dubbo/metadata/<application>/<revision>`` (:func:`metadata_info`): the
  ``MetadataInfo`` JSON naming the services the application provides, its revision computed as Dubbo's
  ``MetadataInfo.calRevision`` does (:func:`revision`);
* the interface → application mapping at ``/dubbo/mapping/<interface>``, whose data is the comma-separated
  application names (:func:`mapping_names`, :func:`mapping_with`, :func:`mapping_without`).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, quote_plus, unquote, unquote_plus, urlencode, urlsplit

from zkop.kube.types import JSON
from zkop.services.codecs.base import ImportedInstance, ImportedPort, Skipped, classify_address, valid_port
from zkop.services.metadata import string_entries
from zkop.services.naming import port_name
from zkop.services.options import MANAGED_BY

__all__ = [
    "INSTANCE_PAYLOAD_CLASS",
    "MAPPING",
    "METADATA",
    "PROVIDERS",
    "ServiceInfo",
    "decode_provider",
    "encode_instance",
    "encode_provider",
    "instance_id",
    "interface_node",
    "interface_of",
    "mapping_names",
    "mapping_with",
    "mapping_without",
    "match_key",
    "metadata_info",
    "revision",
]

#: The child of an interface node that holds its providers.
PROVIDERS = "providers"
#: The child of Dubbo's root holding the interface → application mapping (``ServiceNameMapping.DEFAULT_MAPPING_GROUP``).
MAPPING = "mapping"
#: The child of Dubbo's root holding the metadata report (an application's ``MetadataInfo`` per revision).
METADATA = "metadata"
#: The payload class of an application-level instance (Dubbo's, not Spring's).
INSTANCE_PAYLOAD_CLASS = "org.apache.dubbo.registry.zookeeper.ZookeeperInstance"


@dataclass(frozen=True)
class ServiceInfo:
    """One service of an application's ``MetadataInfo`` (Dubbo's ``MetadataInfo.ServiceInfo``).

    Attributes:
        name: the interface (also the ``path``).
        protocol: the protocol (``dubbo``, ``tri``…).
        port: the protocol's port.
        params: the service's URL parameters (the consumer reads them as the provider's URL's).
        group, version: the service's group and version (``None``: none).
    """

    name: str
    protocol: str
    port: int
    params: Mapping[str, str]
    group: str | None = None
    version: str | None = None

    @property
    def match_key(self) -> str:
        """Dubbo's match key, the key of the service in ``MetadataInfo.services``: :func:`match_key`."""
        return match_key(self.name, self.group, self.version, self.protocol)

    def desc(self) -> str:
        """``ServiceInfo.toDescString()``: match key, port, path, then the params as Java's ``TreeMap.toString()``."""
        params = ", ".join(f"{k}={self.params[k]}" for k in sorted(self.params))
        return f"{self.match_key}{self.port}{self.name}{{{params}}}"

    def to_json(self) -> JSON:
        """The service as Dubbo serialises it (fields in alphabetical order, absent group and version left out)."""
        body: JSON = {}
        if self.group:
            body["group"] = self.group
        body.update({"name": self.name, "params": dict(sorted(self.params.items())), "path": self.name,
                     "port": self.port, "protocol": self.protocol})
        if self.version:
            body["version"] = self.version
        return body


def match_key(interface: str, group: str | None, version: str | None, protocol: str) -> str:
    """``[group/]interface[:version]:protocol`` (``BaseServiceMetadata.buildServiceKey`` plus the protocol)."""
    key = f"{group}/{interface}" if group else interface
    if version:
        key += f":{version}"
    return f"{key}:{protocol}"


def revision(application: str, services: Iterable[ServiceInfo]) -> str:
    """The metadata revision Dubbo computes (``MetadataInfo.calRevision``): the MD5, in lower-case hex, of the
    application name followed by each service's :meth:`ServiceInfo.desc` in match-key order; ``"0"`` for none."""
    ordered = sorted(services, key=lambda s: s.match_key)
    if not ordered:
        return "0"
    text = application + "".join(s.desc() for s in ordered)
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def metadata_info(application: str, services: Iterable[ServiceInfo], extra: Mapping[str, object] | None = None) -> JSON:
    """The ``MetadataInfo`` JSON of ``application`` (``app``, ``revision``, ``services`` by match key), with
    ``extra`` top-level fields after them (zkop's owner stamp; Dubbo ignores unknown fields)."""
    ordered = sorted(services, key=lambda s: s.match_key)
    return {"app": application, "revision": revision(application, ordered),
            "services": {s.match_key: s.to_json() for s in ordered}, **(extra or {})}


def instance_id(address: str, port: int) -> str:
    """The instance id and node name Dubbo uses: ``<host>:<port>`` (``CuratorFrameworkUtils.generateId``)."""
    return f"{address}:{port}"


def encode_instance(*, application: str, address: str, port: int, protocol: str, metadata: Mapping[str, str],
                    registration_ms: int, service_type: str) -> JSON:
    """One application-level instance as ``ZookeeperServiceDiscovery`` writes it, fields in Curator's order.

    Args:
        application: the application name (Curator's ``name``).
        address: the instance's host; ``port`` its protocol port (the instance port and the one endpoint).
        protocol: the endpoint's protocol, written into ``dubbo.endpoints``.
        metadata: further instance metadata (revision, storage type, zkop's owner stamp…); written sorted by key.
        registration_ms: ``registrationTimeUTC``, Unix milliseconds (a stable value keeps the bytes stable).
        service_type: Curator's ``serviceType`` (``DYNAMIC`` as Dubbo's ephemeral nodes, ``PERMANENT`` for zkop's).
    """
    ident = instance_id(address, port)
    endpoints = json.dumps([{"port": port, "protocol": protocol}], separators=(",", ":"))
    meta = dict(sorted({**metadata, "dubbo.endpoints": endpoints}.items()))
    return {"name": application, "id": ident, "address": address, "port": port, "sslPort": None,
            "payload": {"@class": INSTANCE_PAYLOAD_CLASS, "id": ident, "name": application, "metadata": meta},
            "registrationTimeUTC": registration_ms, "serviceType": service_type, "uriSpec": None}


def mapping_names(data: bytes) -> list[str]:
    """The application names in a mapping node's data, in order (``ServiceNameMapping.getAppNames``: comma-separated,
    trimmed, empty ones dropped); undecodable bytes name none."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return []
    return [name for name in (part.strip() for part in text.split(",")) if name]


def mapping_with(data: bytes, application: str) -> bytes:
    """``data`` with ``application`` appended as ``ZookeeperMetadataReport.registerServiceAppMapping`` does
    (``old,app``); unchanged if it is already named."""
    if application in mapping_names(data):
        return data
    return (data.decode("utf-8") + "," + application if data.strip() else application).encode("utf-8")


def mapping_without(data: bytes, application: str) -> bytes:
    """``data`` without ``application``; every other name kept in its order."""
    names = mapping_names(data)
    if application not in names:
        return data
    return ",".join(n for n in names if n != application).encode("utf-8")


def interface_node(interface: str) -> str:
    """The node name of ``interface`` (URL-encoded)."""
    return quote(interface, safe="")


def interface_of(node_name: str) -> str:
    """The interface named by an interface node (the node name is URL-encoded)."""
    return unquote(node_name)


def encode_provider(interface: str, address: str, port: int, *, protocol: str = "dubbo", ready: bool = True,
                    params: Mapping[str, str] | None = None) -> str:
    """The node name of a provider of ``interface`` at ``address:port``.

    Args:
        interface: the service interface (the URL path).
        address: an IP literal (IPv6 is bracketed in the URL) or a DNS name.
        port: the provider's port.
        protocol: the URL scheme (also the decoded port's name).
        ready: ``False`` adds ``enabled=false``.
        params: further URL parameters (e.g. ``managedBy``/``clusterId``), after ``interface`` and ``side``.
    """
    try:
        host = f"[{address}]" if ipaddress.ip_address(address).version == 6 else address
    except ValueError:
        host = address
    query = {"interface": interface, "side": "provider", **(params or {})}
    if not ready:
        query["enabled"] = "false"
    url = f"{protocol}://{host}:{port}/{interface}?{urlencode(query)}"
    return quote_plus(url, safe="")


def decode_provider(path: str, name: str) -> ImportedInstance | Skipped:
    """The instance of provider node ``path`` (called ``name``, the encoded URL), or why not.

    A provider stamped ``managedBy=zkop`` is skipped with reason ``zkop`` (loop prevention).
    """
    url = unquote_plus(name)
    try:
        parts = urlsplit(url)
        number = parts.port
    except ValueError:
        return Skipped(path, "invalid", "not a provider URL")
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    if params.get("managedBy") == MANAGED_BY:
        return Skipped(path, "zkop", "written by zkop")
    if params.get("category", PROVIDERS) != PROVIDERS or params.get("side", "provider") != "provider":
        return Skipped(path, "invalid", "not a provider URL")
    if not parts.scheme:
        return Skipped(path, "invalid", f"unusable provider URL {url!r}")
    address = classify_address(parts.hostname or "")
    if isinstance(address, str):
        return Skipped(path, "address", address)
    port = valid_port(number)
    if port is None:
        return Skipped(path, "no-port", "the provider URL has no port")
    ready = params.get("enabled", "true").lower() != "false" and params.get("disabled", "false").lower() != "true"
    ports = (ImportedPort(port_name(parts.scheme) or "dubbo", port),)
    return ImportedInstance(url, address[0], address[1], ports, ready, path, string_entries(params))
