"""Wire the service importer: informers, the ``service-import`` controller, its reconciler and watches.

:func:`setup` adds them to the manager (as every feature wires itself), which owns the lifecycle
(:mod:`zkop.services.wiring`), exactly as for the service bridge: it starts the informers on every
replica and waits for their sync, starts the controller only while leading; the caller hooks
:meth:`ServiceImporter.on_session_reconnected` to the ZooKeeper session coming back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from zkop.feature.context import FeatureContext
from zkop.kube.client import KubeClient
from zkop.kube.events import EventRecorder
from zkop.runtime.builder import ControllerBuilder
from zkop.runtime.cache import Informer, NamedObjectInformer, ResourceRef
from zkop.services.endpoints import slice_service_key
from zkop.services.importer.guard import AddressGuard, apiserver_addresses, parse_cidr, service_ranges
from zkop.services.importer.options import IMPORTED_LABEL, ImportOptions
from zkop.services.importer.reader import ZooKeeperReader
from zkop.services.importer.reconciler import (
    FULL_SYNC_KEY,
    ROOT_KEY,
    SLICE_INDEX,
    ServiceImportReconciler,
    key_for_path,
    service_key,
)
from zkop.services.importer.writer import ApiWriter, DryRunWriter
from zkop.services.wiring import ENDPOINTSLICES, SERVICES, ServiceSync, all_synced, setup_direction
from zkop.zookeeper.adapter import ZooKeeperAdapter

__all__ = ["CONTROLLER_NAME", "ServiceImporter", "build_service_importer", "setup"]

log = logging.getLogger(__name__)

CONTROLLER_NAME = "service-import"
#: networking.k8s.io/v1 ServiceCIDRs (GA in Kubernetes 1.33): the cluster's Service ranges.
SERVICECIDRS = ResourceRef("networking.k8s.io", "v1", "servicecidrs")
#: The EndpointSlice kube-apiserver keeps of its own addresses (``kubernetes.io/service-name: kubernetes``).
APISERVER_SLICE = "default/kubernetes"


@dataclass
class ServiceImporter(ServiceSync[ServiceImportReconciler]):
    """The importer's parts, for the manager (:class:`~zkop.services.wiring.ServiceSync`).

    ``informers`` are the import namespace's Services (all of them: a foreign Service of a wanted
    name must be seen), its imported EndpointSlices (label-selected), the cluster's ServiceCIDRs and the
    API server's own EndpointSlice ``default/kubernetes`` (the address guard's facts); ``controllers`` the
    ``service-import`` controller; a full sync re-reads everything and collects garbage.
    """

    FULL_SYNC_KEY: ClassVar[str] = FULL_SYNC_KEY

    def on_session_reconnected(self) -> None:
        """A new ZooKeeper session (every watch may be gone): re-list the root, re-read every known
        service (which re-arms their watches) and run a full sync."""
        log.info("service-import: new ZooKeeper session; re-reading everything")
        self.controller.queue.add(ROOT_KEY)
        for name in self.reconciler.known_names():
            self.controller.queue.add(service_key(name))
        self.controller.queue.add(FULL_SYNC_KEY)


def address_guard(client: KubeClient, prefix: str, allowed_cidrs: Sequence[str], inactivity_timeout: float
                  ) -> tuple[Informer, NamedObjectInformer, Callable[[], AddressGuard]]:
    """The address guard's facts (:mod:`zkop.services.importer.guard`) and the guard of a pass: an informer of the
    cluster's ServiceCIDRs, one of the API server's own EndpointSlice (``<prefix>-servicecidrs``,
    ``<prefix>-apiserver-endpointslices``; not started) and ``guard()``, which builds the guard from their caches
    and ``allowed_cidrs`` (``--import-allowed-cidrs``). Nothing is imported before the ServiceCIDRs have listed (not
    served, not permitted: never).

    Raises:
        ValueError: an entry of ``allowed_cidrs`` is not a CIDR.
    """
    servicecidrs = Informer(client, SERVICECIDRS, resync_period=0, name=f"{prefix}-servicecidrs",
                            inactivity_timeout=inactivity_timeout)
    apiserver = NamedObjectInformer(client, ENDPOINTSLICES, name=f"{prefix}-apiserver-endpointslices",
                                    inactivity_timeout=inactivity_timeout)
    apiserver.track([APISERVER_SLICE])
    allowed = tuple(parse_cidr(cidr) for cidr in allowed_cidrs)

    def guard() -> AddressGuard:
        own = apiserver.get(APISERVER_SLICE)
        return AddressGuard(service_ranges(servicecidrs.indexer.list()),
                            apiserver_addresses([own] if own is not None else []), allowed)

    return servicecidrs, apiserver, guard


def build_service_importer(
    client: KubeClient, zookeeper: ZooKeeperAdapter, recorder: EventRecorder, options: ImportOptions, *,
    cluster_id: str, resync_period: float, inactivity_timeout: float, dry_run: bool = False,
) -> ServiceImporter:
    """Build (not start) the service importer.

    Args:
        client: JSON client for the informers and the writes.
        zookeeper: the adapter whose session (and watched reads) the importer uses; the importer
            registers a watch listener on it.
        recorder: Kubernetes Events.
        options: importer settings (:func:`zkop.cmd.import_flags.options_from_args`).
        cluster_id: the global ``--cluster-id``, written into the owner annotation.
        resync_period: seconds between full syncs (the informers' own resync is off: the full
            sync re-reads every service anyway).
        inactivity_timeout: seconds a silent watch is kept before it is reopened.
        dry_run: ``zkop run --dry-run``: the reconciler is built with the
            :class:`~zkop.services.importer.writer.DryRunWriter` (plans, logs and counts; writes nothing).

    The root and full-sync keys are enqueued at once; they run when the workers start (the full
    sync waits for the informers' first LIST).
    """
    namespaces = [options.namespace]
    services = Informer(
        client, SERVICES, namespaces=namespaces, resync_period=0, name="import-services",
        inactivity_timeout=inactivity_timeout,
    )
    slices = Informer(
        client, ENDPOINTSLICES, namespaces=namespaces, resync_period=0, name="import-endpointslices",
        indexers={SLICE_INDEX: slice_service_key}, label_selector=f"{IMPORTED_LABEL}=true",
        inactivity_timeout=inactivity_timeout,
    )
    servicecidrs, apiserver, guard = address_guard(client, "import", options.allowed_cidrs, inactivity_timeout)
    builder = ControllerBuilder(CONTROLLER_NAME, workers=options.workers)
    queue = builder.queue  # a watch event enqueues before the reconciler exists (docs/architecture.md, "Wiring")

    def on_znode_event(path: str) -> None:
        key = key_for_path(options, path)
        if key is not None:
            queue.add(key)

    informers = [services, slices, servicecidrs, apiserver]
    reconciler = ServiceImportReconciler(
        services.indexer, slices.indexer, ZooKeeperReader(zookeeper, on_znode_event),
        client, recorder, options, cluster_id=cluster_id, enqueue=queue.add, synced=all_synced(informers),
        request_full_sync=lambda delay: queue.add_after(FULL_SYNC_KEY, delay), full_sync_period=resync_period,
        writer=(DryRunWriter if dry_run else ApiWriter)(client, options.namespace),  # the dry-run seam, chosen once
        guard=guard,
    )
    built = (builder.watches(services, reconciler.keys_for_service)
             .watches(slices, reconciler.keys_for_slice)
             .watches(servicecidrs, reconciler.keys_for_guard)
             .watches(apiserver, reconciler.keys_for_guard)
             .complete(reconciler))
    zookeeper.add_watch_listener(on_znode_event)
    queue.add(ROOT_KEY)
    queue.add(FULL_SYNC_KEY)
    return ServiceImporter(built.informers, [built.controller], reconciler)


def setup(context: FeatureContext, options: ImportOptions) -> ServiceImporter:
    """:func:`build_service_importer` on the session of ``options.ensemble`` (``--import-ensemble``),
    added to the Manager (:func:`~zkop.services.wiring.setup_direction`)."""
    return setup_direction(context, options, options.ensemble, build_service_importer)
