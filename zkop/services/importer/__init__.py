"""The service importer: services registered in ZooKeeper become Kubernetes Services with real endpoints.

The reverse of :mod:`zkop.services.bridge`. While legacy services still register themselves in ZooKeeper
(Curator / Spring Cloud Zookeeper, Dubbo, or zkop's bridge records), Kubernetes workloads reach
them by a normal Service name: each service becomes a selector-less Service plus EndpointSlices
listing its instances (consul-k8s's Consul → Kubernetes sync does this with ExternalName Services).

==================  ==============================================================
module              role
==================  ==============================================================
``options``         :class:`ImportOptions` and the ownership label and annotations
``cli``             ``zkop run --import-*`` flags → options
``sources``         the ZooKeeper layouts (curator, json, dubbo) → ``ImportedService``
``reader``          watched ZooKeeper reads (child watches, data watches)
``naming``          DNS-1035 Service names, port names, the collision rule
``plan``            pure planning: Service, EndpointSlices, garbage collection with the breaker
``reconciler``      reads ZooKeeper and the caches, plans, writes through the API
``builder``         informers + the ``service-import`` controller for the manager
``metrics``         the importer's Prometheus metrics
==================  ==============================================================
"""

from typing import TYPE_CHECKING, Any

from zkop.services.importer.options import ImportOptions

if TYPE_CHECKING:
    from zkop.services.importer.builder import ServiceImporter, build_service_importer

__all__ = ["ImportOptions", "ServiceImporter", "build_service_importer"]


def __getattr__(name: str) -> Any:
    # The builder (and the informer and controller machinery behind it) is imported on first use,
    # so a process that only needs the options (``zkop run`` without this feature) starts faster.
    if name in ("ServiceImporter", "build_service_importer"):
        from zkop.services.importer import builder

        return getattr(builder, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
