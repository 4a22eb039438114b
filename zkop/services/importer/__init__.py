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
``sources``         the ZooKeeper layouts (curator, json, dubbo) → ``ImportedService``, over the codecs
``reader``          watched ZooKeeper reads (child watches, data watches)
``naming``          DNS-1035 Service names, port names, the collision rule
``plan``            pure planning: Service, EndpointSlices, garbage collection with the breaker
``reconciler``      reads ZooKeeper and the caches, plans, writes through the API
``writer``          the writes: merge patches and deletes with preconditions
``builder``         informers + the ``service-import`` controller for the manager
``metrics``         the importer's Prometheus metrics
==================  ==============================================================

Shared with the bridge through the services core (:mod:`zkop.services`), never with the bridge
itself: the codecs, the EndpointSlice view, the full-sync rules and report-once memos.
"""

from typing import TYPE_CHECKING

from zkop.services.importer.options import ImportOptions
from zkop.services.lazy import lazy_attributes

if TYPE_CHECKING:
    from zkop.services.importer.builder import ServiceImporter, build_service_importer

__all__ = ["ImportOptions", "ServiceImporter", "build_service_importer"]

# The builder (and the informer and controller machinery behind it) is imported on first use.
__getattr__ = lazy_attributes("zkop.services.importer.builder", ("ServiceImporter", "build_service_importer"),
                              __name__)
