"""Apache Curator service discovery: ``ServiceInstance`` JSON (also Spring Cloud Zookeeper, Dubbo 3).

Layout ``<base path>/<service name>/<instance id>`` (``ServiceDiscoveryImpl.pathForInstance``), each
instance node holding a JSON ``ServiceInstance`` as Curator's ``JsonInstanceSerializer`` writes it,
fields in declaration order: ``name``, ``id``, ``address``, ``port``, ``sslPort``, ``payload``,
``registrationTimeUTC``, ``serviceType``, ``uriSpec``, ``enabled``.

Encoding (:func:`encode_instance`) writes Spring Cloud Zookeeper's payload
(``ZookeeperInstance{id, name, metadata}`` with its ``@class``), the owner stamp in
``payload.metadata`` (:func:`owner_of`), ``serviceType`` ``PERMANENT`` (Curator's ``InstanceCleanup``
purges ``STATIC`` ones; only ``DYNAMIC`` means ephemeral) and Spring's default URI spec
``{scheme}://{address}:{port}``, or ``{scheme}://{address}:{ssl-port}`` when ``sslPort`` is set
(Curator's ``UriSpec`` makes ``{scheme}`` ``https`` then: :data:`SSL_URI_SPEC`).

Decoding (:func:`decode_instance`) uses ``address``, ``port`` and ``sslPort`` (either may be
``null``; exposed as ports named ``http`` and ``https``, the schemes Curator's ``UriSpec`` resolves
``{scheme}`` to; a Dubbo 3 application-level instance's ports are named after the protocols its
``dubbo.endpoints`` metadata lists instead: :func:`dubbo_endpoints`), ``id``, ``enabled``
(CURATOR-275; absent means enabled) and the Spring Cloud Zookeeper status
``payload.metadata.instance_status`` (absent or ``UP`` means serving). Unknown fields are ignored,
as Curator's serializer does (``FAIL_ON_UNKNOWN_PROPERTIES=false``). The instance's metadata
(:attr:`~zkop.services.codecs.base.ImportedInstance.metadata`) is ``payload.metadata`` when the payload has such an
object (Spring Cloud Zookeeper's and Dubbo 3's ``ZookeeperInstance``, zkop's own), else the payload object's own
top-level fields but ``@class`` (a plain ``Map`` or details class); string values only.
"""

from __future__ import annotations

from collections.abc import Mapping

from zkop.kube.client import JSON
from zkop.services.codecs.base import (
    ImportedInstance,
    ImportedPort,
    Owner,
    Skipped,
    classify_address,
    loads,
    valid_port,
)
from zkop.services.metadata import string_entries
from zkop.services.naming import port_name

__all__ = [
    "CURATOR_SERVICE_TYPE",
    "DUBBO_PAYLOAD_CLASS",
    "SPRING_PAYLOAD_CLASS",
    "SPRING_URI_SPEC",
    "SSL_URI_SPEC",
    "decode_instance",
    "dubbo_endpoints",
    "encode_instance",
    "owner_of",
    "payload_metadata",
]

#: Payload class of Dubbo 3's application-level instances (``ZookeeperServiceDiscovery``).
DUBBO_PAYLOAD_CLASS = "org.apache.dubbo.registry.zookeeper.ZookeeperInstance"
#: Payload class of Spring Cloud Zookeeper instances (``ZookeeperInstance{id, name, metadata}``).
SPRING_PAYLOAD_CLASS = "org.springframework.cloud.zookeeper.discovery.ZookeeperInstance"
#: Curator ``ServiceType`` written by zkop (see the module docstring).
CURATOR_SERVICE_TYPE = "PERMANENT"
#: Spring Cloud Zookeeper's default URI spec ``{scheme}://{address}:{port}`` as Curator's ``UriSpec`` serialises it.
SPRING_URI_SPEC: JSON = {"parts": [
    {"value": "scheme", "variable": True},
    {"value": "://", "variable": False},
    {"value": "address", "variable": True},
    {"value": ":", "variable": False},
    {"value": "port", "variable": True},
]}
#: The URI spec of an instance with an ``sslPort``: ``{scheme}://{address}:{ssl-port}``. Curator's ``UriSpec.build``
#: resolves ``{scheme}`` to ``https`` whenever ``sslPort`` is set, and Spring Cloud Zookeeper's
#: ``ZookeeperServiceInstance`` then reports ``sslPort`` as its port and ``secure``; with ``{port}`` its
#: ``getUri()`` would be ``https://`` to the plain port (seen with Curator 5.9.0's ``buildUriSpec``).
SSL_URI_SPEC: JSON = {"parts": [
    {"value": "scheme", "variable": True},
    {"value": "://", "variable": False},
    {"value": "address", "variable": True},
    {"value": ":", "variable": False},
    {"value": "ssl-port", "variable": True},
]}


def encode_instance(*, name: str, address: str, port: int | None, ssl_port: int | None,
                    metadata: Mapping[str, str], registration_ms: int, enabled: bool) -> JSON:
    """One ``ServiceInstance`` with id ``address``, as a dict in Curator's field order.

    Args:
        name: the service name consumers look up.
        address: the instance's address (also its id).
        port, ssl_port: the ports (``None``: ``null``).
        metadata: ``payload.metadata`` (written sorted by key), including zkop's owner stamp.
        registration_ms: ``registrationTimeUTC``, Unix milliseconds (a stable value keeps bytes stable).
        enabled: Curator's ``enabled``.
    """
    return {
        "name": name,
        "id": address,
        "address": address,
        "port": port,
        "sslPort": ssl_port,
        "payload": {"@class": SPRING_PAYLOAD_CLASS, "id": address, "name": name,
                    "metadata": dict(sorted(metadata.items()))},
        "registrationTimeUTC": registration_ms,
        "serviceType": CURATOR_SERVICE_TYPE,
        "uriSpec": SPRING_URI_SPEC if ssl_port is None else SSL_URI_SPEC,
        "enabled": enabled,
    }


def owner_of(data: bytes) -> Owner | None:
    """``payload.metadata.{managedBy, clusterId, uid}``, or ``None`` if the node has no such stamp."""
    value = loads(data)
    if not isinstance(value, dict) or not isinstance(value.get("payload"), dict):
        return None
    metadata = value["payload"].get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("managedBy"), str):
        return None
    uid = metadata.get("uid")
    return Owner(str(metadata["managedBy"]), str(metadata.get("clusterId") or ""), str(uid) if uid else None)


def decode_instance(path: str, name: str, data: bytes) -> ImportedInstance | Skipped:
    """The instance in node ``path`` (called ``name``), or why it cannot be imported.

    The owner stamp is not looked at here (the importer refuses zkop's own nodes before decoding).
    """
    value = loads(data)
    if not isinstance(value, dict):
        return Skipped(path, "invalid", "not a JSON ServiceInstance")
    address = classify_address(str(value.get("address") or ""))
    if isinstance(address, str):
        return Skipped(path, "address", address)
    payload = value.get("payload")
    metadata = payload.get("metadata") if isinstance(payload, dict) else None
    named = dubbo_endpoints(payload) if isinstance(payload, dict) else []
    ports = list(named)
    port, ssl_port = valid_port(value.get("port")), valid_port(value.get("sslPort"))
    if port is not None and port not in (p.port for p in named):
        ports.append(ImportedPort("http", port))
    if ssl_port is not None and ssl_port not in (p.port for p in named):
        ports.append(ImportedPort("https", ssl_port))
    if not ports:
        return Skipped(path, "no-port", "neither port nor sslPort is set")
    ready = value.get("enabled") is not False
    if isinstance(metadata, dict):
        status = metadata.get("instance_status")
        if status is not None and str(status).upper() != "UP":
            ready = False
    return ImportedInstance(str(value.get("id") or name), address[0], address[1], tuple(sorted(ports)), ready, path,
                            payload_metadata(payload))


def payload_metadata(payload: object) -> tuple[tuple[str, str], ...]:
    """The string entries of ``payload.metadata`` if the payload has that object, else of the payload's own fields
    but ``@class``; none for a payload that is not an object (see the module docstring)."""
    if not isinstance(payload, dict):
        return ()
    metadata = payload.get("metadata")
    if isinstance(metadata, dict):
        return string_entries(metadata)
    return string_entries(payload, skip=("@class",))


def dubbo_endpoints(payload: Mapping[str, object]) -> list[ImportedPort]:
    """The ports a Dubbo 3 application-level instance lists, named after their protocols (``dubbo``, ``tri``…).

    Dubbo's ``ZookeeperServiceDiscovery`` registers a Curator instance whose payload is
    ``org.apache.dubbo.registry.zookeeper.ZookeeperInstance`` and whose ``metadata["dubbo.endpoints"]`` is a JSON
    list ``[{"port": 20880, "protocol": "dubbo"}, …]`` (``ServiceInstanceMetadataUtils.ENDPOINTS``; seen from
    Dubbo 3.3.6). Any other payload, or an unreadable list, gives none (the instance's ``port`` is then ``http``).
    """
    metadata = payload.get("metadata")
    if payload.get("@class") != DUBBO_PAYLOAD_CLASS or not isinstance(metadata, dict):
        return []
    endpoints = loads(str(metadata.get("dubbo.endpoints") or "").encode("utf-8"))
    found: dict[str, ImportedPort] = {}
    for item in endpoints if isinstance(endpoints, list) else []:
        if not isinstance(item, dict):
            continue
        number, name = valid_port(item.get("port")), port_name(str(item.get("protocol") or ""))
        if number is not None and name:
            found.setdefault(name, ImportedPort(name, number))
    return list(found.values())
