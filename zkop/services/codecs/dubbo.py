"""Apache Dubbo's ZooKeeper registry (``ZookeeperRegistry``): provider URLs as node names.

Layout ``/<group>/<URL-encoded interface>/providers/<URL-encoded provider URL>``: the whole provider
URL is the node *name* (``dubbo://10.0.0.5:20880/com.example.Api?side=provider&…``, encoded as
Java's ``URLEncoder.encode`` does). The port is named after the URL's protocol (``dubbo``, ``tri``,
…); URL parameters ``enabled=false`` or ``disabled=true`` mark the provider not ready; a URL whose
``category`` is not ``providers`` or whose ``side`` is not ``provider`` is not a provider. zkop's
owner stamp, if any, is the URL parameter ``managedBy=zkop`` (with ``clusterId``). The provider's metadata is its
URL parameters (the importer's rules, :mod:`zkop.services.metadata`, leave Dubbo's own ones out).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from urllib.parse import parse_qsl, quote, quote_plus, unquote, unquote_plus, urlencode, urlsplit

from zkop.services.codecs.base import ImportedInstance, ImportedPort, Skipped, classify_address, valid_port
from zkop.services.metadata import string_entries
from zkop.services.naming import port_name
from zkop.services.options import MANAGED_BY

__all__ = ["PROVIDERS", "decode_provider", "encode_provider", "interface_node", "interface_of"]

#: The child of an interface node that holds its providers.
PROVIDERS = "providers"


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
