"""From a Service object (as the informer caches it) to a normalised :class:`ServiceRecord`; pure.

:func:`is_selected` says whether a Service is published at all; :func:`service_record` what there
is to say about it, whatever the format (:mod:`zkop.services.bridge.formats`). :class:`ServiceRecord`
and :class:`PortRecord` are the codecs' (:mod:`zkop.services.codecs.base`), re-exported. Fields as
the core/v1 Service API reference: ``spec.clusterIP`` ``"None"`` marks a headless Service
(published as ``null``); ExternalName Services have no cluster IP; ``status.loadBalancer.ingress``
entries carry an ``ip`` and/or a ``hostname``.
"""

from __future__ import annotations

import logging

from zkop.kube.client import JSON
from zkop.ownership.oldest import creation_seconds
from zkop.services.bridge.options import IMPORTED_LABEL, SYNC_ANNOTATION, BridgeOptions
from zkop.services.codecs.base import PortRecord, ServiceRecord
from zkop.services.endpoints import EndpointsView

__all__ = [
    "PortRecord",
    "ServiceRecord",
    "creation_millis",
    "is_selected",
    "parse_bool",
    "service_record",
    "service_type",
]

log = logging.getLogger(__name__)

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_bool(value: str) -> bool | None:
    """Go's ``strconv.ParseBool`` (which consul-k8s uses for its sync annotation); ``None`` if unparsable."""
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    return None


def service_type(obj: JSON) -> str:
    """``spec.type``, defaulting to ``ClusterIP`` as the API server does."""
    return str((obj.get("spec") or {}).get("type") or "ClusterIP")


def is_selected(obj: JSON, options: BridgeOptions) -> bool:
    """Whether the Service is published.

    Rules, in order: a namespace in ``exclude_namespaces`` is never published (exclude wins);
    with a non-empty ``namespaces`` only those are; with a non-empty ``types`` only those
    ``spec.type`` values are; a Service being deleted is not; a Service labelled
    ``platform.example.com/imported-from-zookeeper: "true"`` (created by zkop's service importer
    from ZooKeeper) never is, whatever its annotations say (loop prevention); then the
    ``platform.example.com/zookeeper-sync`` annotation decides if it parses as a boolean
    (Go ``ParseBool``), else ``default_sync`` does (consul-k8s: an unparsable value falls back
    to the default).
    """
    meta = obj.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    if namespace in options.exclude_namespaces:
        return False
    if options.namespaces and namespace not in options.namespaces:
        return False
    if options.types and service_type(obj) not in options.types:
        return False
    if meta.get("deletionTimestamp"):
        return False
    if (meta.get("labels") or {}).get(IMPORTED_LABEL) == "true":
        return False
    annotation = (meta.get("annotations") or {}).get(SYNC_ANNOTATION)
    if annotation is not None:
        parsed = parse_bool(str(annotation).strip())
        if parsed is not None:
            return parsed
        log.debug("service %s/%s: unparsable %s=%r; using the default", namespace, meta.get("name"),
                  SYNC_ANNOTATION, annotation)
    return options.default_sync


def creation_millis(obj: JSON) -> int:
    """``metadata.creationTimestamp`` (RFC 3339) as Unix milliseconds, the records' registration time; 0 if
    missing or unparsable (who wins a key path is decided by :func:`zkop.ownership.oldest.object_age`)."""
    seconds = creation_seconds(obj)
    return 0 if seconds is None else int(seconds * 1000)


def _port(raw: JSON) -> PortRecord:
    port = int(raw.get("port") or 0)
    target = raw.get("targetPort")
    if target is None or target == "":
        target = port
    node_port = raw.get("nodePort")
    return PortRecord(
        name=str(raw["name"]) if raw.get("name") else None,
        port=port,
        protocol=str(raw.get("protocol") or "TCP"),
        target_port=target if isinstance(target, int) else str(target),
        node_port=int(node_port) if node_port else None,
    )


def service_record(obj: JSON, options: BridgeOptions, endpoints: EndpointsView | None = None) -> ServiceRecord:
    """Normalise a Service into a :class:`ServiceRecord`.

    Args:
        obj: the Service as cached (``metadata``, ``spec``, ``status``).
        options: which labels to copy.
        endpoints: ready endpoints, when ``--service-bridge-endpoints`` is on.
    """
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    kind = service_type(obj)
    raw_ip = spec.get("clusterIP")
    headless = raw_ip == "None"
    cluster_ip = None if headless or not raw_ip or kind == "ExternalName" else str(raw_ip)
    cluster_ips: tuple[str, ...] = ()
    if cluster_ip is not None:
        cluster_ips = tuple(str(ip) for ip in spec.get("clusterIPs") or [cluster_ip] if ip and ip != "None")
    labels = meta.get("labels") or {}
    ingress = ((status.get("loadBalancer") or {}).get("ingress")) or []
    return ServiceRecord(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        type=kind,
        headless=headless,
        cluster_ip=cluster_ip,
        cluster_ips=cluster_ips,
        ip_families=tuple(str(f) for f in spec.get("ipFamilies") or []) if cluster_ip is not None else (),
        ports=tuple(_port(p) for p in spec.get("ports") or []),
        external_name=str(spec["externalName"]) if kind == "ExternalName" and spec.get("externalName") else None,
        external_ips=tuple(str(ip) for ip in spec.get("externalIPs") or []),
        load_balancer_ingress=tuple(
            (str(i["ip"]) if i.get("ip") else None, str(i["hostname"]) if i.get("hostname") else None)
            for i in ingress if i.get("ip") or i.get("hostname")
        ),
        labels=tuple(sorted((k, str(labels[k])) for k in options.labels if k in labels)),
        created_ms=creation_millis(obj),
        annotations=tuple(sorted((str(k), str(v)) for k, v in (meta.get("annotations") or {}).items())),
        endpoints=endpoints,
    )
