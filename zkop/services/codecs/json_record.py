"""zkop's JSON service record: one node per Service, ``<root>/<key>``.

Compatible with the original bridge script: a client reading ``clusterIP`` and ``ports`` keeps
working. Keys, in this order: ``name``, ``namespace``, ``type``, ``clusterIP`` (``null`` for
headless and ExternalName), ``clusterIPs``, ``ipFamilies``, ``headless``, ``ports`` (``{name, port,
protocol, targetPort, nodePort}`` per ``spec.ports`` entry, every protocol), ``externalName``,
``externalIPs``, ``loadBalancerIngress`` (``{ip, hostname}``), ``externalAddresses`` (ingress then
external IPs, deduplicated), ``labels``, ``endpoints`` (only with ready endpoints known:
``{addresses, ports}``, and ``draining`` when some endpoint is serving but terminating), ``metadata`` (when
there is some), ``managedBy`` and ``owner`` (:func:`owner_of`).

Decoding (:func:`decode`) reads the addresses as the bridge chooses them for reachability:
``externalAddresses`` if any, else ``clusterIP``, else (a headless record) the ready endpoint
addresses with the endpoint ports; one ready instance per address, each with the record's ``metadata`` (its string
values) as its metadata.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zkop.kube.client import JSON
from zkop.services.codecs.base import (
    PROTOCOLS,
    ImportedInstance,
    ImportedPort,
    Owner,
    PortRecord,
    ServiceRecord,
    Skipped,
    classify_address,
    loads,
    owner_dict,
    valid_port,
)
from zkop.services.metadata import string_entries
from zkop.services.naming import port_name
from zkop.services.options import MANAGED_BY

__all__ = ["decode", "decode_ports", "encode", "owner_of", "owner_of_value"]


def _port_json(port: PortRecord) -> JSON:
    return {"name": port.name, "port": port.port, "protocol": port.protocol,
            "targetPort": port.target_port, "nodePort": port.node_port}


def encode(record: ServiceRecord, cluster_id: str, metadata: Sequence[tuple[str, str]] = ()) -> JSON:
    """The record of ``record``, stamped for ``cluster_id``, as a dict in its fixed key order; ``metadata``
    (``(key, value)`` pairs) goes in ``metadata`` when there is some."""
    body: JSON = {
        "name": record.name,
        "namespace": record.namespace,
        "type": record.type,
        "clusterIP": record.cluster_ip,
        "clusterIPs": list(record.cluster_ips),
        "ipFamilies": list(record.ip_families),
        "headless": record.headless,
        "ports": [_port_json(p) for p in record.ports],
        "externalName": record.external_name,
        "externalIPs": list(record.external_ips),
        "loadBalancerIngress": [{"ip": ip, "hostname": host} for ip, host in record.load_balancer_ingress],
        "externalAddresses": list(record.external_addresses),
        "labels": dict(record.labels),
    }
    if record.endpoints is not None:
        body["endpoints"] = {
            "addresses": list(record.endpoints.addresses),
            "ports": [{"name": p.name, "port": p.port, "protocol": p.protocol} for p in record.endpoints.ports],
        }
        if record.endpoints.draining:
            body["endpoints"]["draining"] = list(record.endpoints.draining)
    if metadata:
        body["metadata"] = dict(metadata)
    body["managedBy"] = MANAGED_BY
    body["owner"] = owner_dict(cluster_id, record.uid)
    return body


def owner_of_value(value: Any) -> Owner | None:
    """The top-level ``owner`` object of a decoded JSON value (records and container nodes)."""
    if not isinstance(value, dict):
        return None
    owner = value.get("owner")
    if not isinstance(owner, dict) or not isinstance(owner.get("managedBy"), str):
        return None
    uid = owner.get("uid")
    return Owner(str(owner["managedBy"]), str(owner.get("clusterId") or ""), str(uid) if uid else None)


def owner_of(data: bytes) -> Owner | None:
    """The top-level ``owner`` object of a node's bytes, or ``None``."""
    return owner_of_value(loads(data))


def decode_ports(raw: Any) -> tuple[ImportedPort, ...]:
    """Ports from ``[{"name", "port", "protocol"}]``: invalid entries dropped, unnamed ones named
    ``<protocol>-<port>``, the first of two equal names kept; sorted."""
    found: dict[str, ImportedPort] = {}
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        number = valid_port(item.get("port"))
        protocol = str(item.get("protocol") or "TCP").upper()
        if number is None or protocol not in PROTOCOLS:
            continue
        name = port_name(str(item["name"])) if item.get("name") else None
        name = name or f"{protocol.lower()}-{number}"
        found.setdefault(name, ImportedPort(name, number, protocol))
    return tuple(sorted(found.values()))


def decode(path: str, data: bytes) -> tuple[tuple[ImportedInstance, ...], tuple[Skipped, ...]]:
    """The instances of the record at ``path`` (see the module docstring), all ready, and what was skipped.

    The owner stamp is not looked at here (the importer refuses zkop's own records before decoding).
    """
    value = loads(data)
    if not isinstance(value, dict):
        return (), (Skipped(path, "invalid", "not a JSON record"),)
    ports = decode_ports(value.get("ports"))
    addresses = [a for a in value.get("externalAddresses") or [] if isinstance(a, str)]
    if not addresses and isinstance(value.get("clusterIP"), str) and value["clusterIP"] not in ("", "None"):
        addresses = [value["clusterIP"]]
    if not addresses:
        endpoints = value.get("endpoints")
        if isinstance(endpoints, dict):
            addresses = [a for a in endpoints.get("addresses") or [] if isinstance(a, str)]
            ports = decode_ports(endpoints.get("ports"))
    if not ports:
        return (), (Skipped(path, "no-port", "the record lists no usable port"),)
    instances: list[ImportedInstance] = []
    skipped: list[Skipped] = []
    metadata = string_entries(value.get("metadata"))
    for raw in addresses:
        address = classify_address(raw)
        if isinstance(address, str):
            skipped.append(Skipped(path, "address", address))
            continue
        instances.append(ImportedInstance(address[0], address[0], address[1], ports, True, path, metadata))
    if not addresses:
        skipped.append(Skipped(path, "invalid", "the record lists no address"))
    return tuple(instances), tuple(skipped)
