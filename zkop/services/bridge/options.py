"""Settings of the service bridge (``zkop run --service-bridge …``) and its fixed names.

One frozen :class:`BridgeOptions` value is built by :func:`zkop.cmd.bridge_flags.options_from_args`
and handed to :func:`zkop.services.bridge.builder.build_service_bridge`; everything downstream
(selection, naming, formats, planning) reads it and never mutates it. The names both directions
share (:data:`SYNC_ANNOTATION`, :data:`IMPORTED_LABEL`, :data:`MANAGED_BY`, :data:`DEFAULT_ROOT`) live
in :mod:`zkop.services.options` and the policies in :mod:`zkop.services.policy`; they are
re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from zkop.services.options import DEFAULT_ROOT, IMPORTED_LABEL, MANAGED_BY, SYNC_ANNOTATION
from zkop.services.policy import Policy

__all__ = [
    "DEFAULT_DUBBO_ROOT",
    "DEFAULT_DUBBO_SERVICES_ROOT",
    "DEFAULT_EXCLUDED_NAMESPACES",
    "DEFAULT_ROOT",
    "IMPORTED_LABEL",
    "MANAGED_BY",
    "PORT_ANNOTATION",
    "SERVICE_TYPES",
    "SYNC_ANNOTATION",
    "BridgeOptions",
    "Format",
    "Layout",
    "Policy",
]

#: Names the port (by name or number) a Curator instance advertises; default: the first port.
PORT_ANNOTATION = "platform.example.com/zookeeper-port"
#: Left out unless ``--service-bridge-exclude-namespace`` is given (which replaces this list).
DEFAULT_EXCLUDED_NAMESPACES: tuple[str, ...] = ("kube-system", "kube-public")
#: ``spec.type`` values ``--service-bridge-type`` accepts (external-dns ``--service-type-filter``).
SERVICE_TYPES: tuple[str, ...] = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")

Layout = Literal["flat", "nested"]
Format = Literal["json", "curator", "dubbo"]
#: Where Dubbo providers are published by default: Dubbo's registry root for its default group ``dubbo``.
DEFAULT_DUBBO_ROOT = "/dubbo"
#: Where Dubbo 3's application-level instances live by default (``ZookeeperServiceDiscovery``'s root path).
DEFAULT_DUBBO_SERVICES_ROOT = "/services"


@dataclass(frozen=True)
class BridgeOptions:
    """Everything the bridge can be told. Durations are seconds.

    Attributes:
        root: znode under which every record lives (a valid absolute ZooKeeper path).
        default_sync: publish Services without the :data:`SYNC_ANNOTATION` (True), or only those
            annotated ``"true"`` (False); consul-k8s ``-k8s-default-sync``.
        namespaces: publish only these namespaces (empty: all). Also limits what the informer lists.
        exclude_namespaces: never publish these; wins over ``namespaces``.
        types: publish only these ``spec.type`` values (empty: all four).
        labels: label keys copied into each record.
        layout: ``flat`` (``<root>/<namespace>-<name>``, the original script's, ambiguous) or
            ``nested`` (``<root>/<namespace>/<name>``, collision-free).
        format: ``json`` (one record per Service), ``curator`` (Curator ServiceInstance nodes) or ``dubbo``
            (Dubbo provider URLs); a Service's ``zookeeper.platform.example.com/format`` annotation may choose another.
        dubbo_root: Dubbo's registry root the ``dubbo`` format publishes under (``--service-bridge-dubbo-root``):
            interface-level providers, the interface → application mapping and the application metadata.
        dubbo_services_root: where the ``dubbo`` format publishes application-level instances
            (``--service-bridge-dubbo-services-root``).
        policy: ``sync`` (create, update, delete), ``upsert-only`` (never delete), ``create-only``
            (never update or delete); external-dns ``--policy``.
        max_deletes: a full sync that would remove records of more Services than this removes
            none (the delete circuit breaker); ``0`` disables the limit.
        endpoints: add ready EndpointSlice addresses to records (and Curator ``enabled``).
        endpoints_debounce: an endpoint change is published once the ready set has been
            stable this long …
        endpoints_max_delay: … or at the latest this long after the first unpublished change.
        workers: concurrent reconciles of the ``service-bridge`` controller.
        ensemble: the ZooKeeperEnsemble published into (``--service-bridge-ensemble``); ``None``: the flags'.
        gc_delay: a Service that disappears triggers a full sync after this delay, so a burst of
            deletions is judged (and, if too large, refused) as one.
    """

    root: str = DEFAULT_ROOT
    default_sync: bool = True
    namespaces: tuple[str, ...] = ()
    exclude_namespaces: tuple[str, ...] = DEFAULT_EXCLUDED_NAMESPACES
    types: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    layout: Layout = "flat"
    format: Format = "json"
    dubbo_root: str = DEFAULT_DUBBO_ROOT
    dubbo_services_root: str = DEFAULT_DUBBO_SERVICES_ROOT
    policy: Policy = "sync"
    max_deletes: int = 10
    endpoints: bool = False
    endpoints_debounce: float = 5.0
    endpoints_max_delay: float = 30.0
    workers: int = 2
    gc_delay: float = 1.0
    ensemble: str | None = None
