"""Wire ZooKeeperServiceImports: informers, the ``service-imports`` controller, its reconciler and watches.

The shape of the flags' importer (:mod:`zkop.services.importer.builder`) with the mirror's per-object gate: the
informers (the objects, the imported Services and EndpointSlices of every watched namespace, the address guard's
ServiceCIDRs and the API server's EndpointSlice) start on every replica, the controller only while leading.
"""

from __future__ import annotations

from dataclasses import dataclass

from zkop.feature.context import FeatureContext
from zkop.feature.gate import Gate
from zkop.runtime.builder import ControllerBuilder
from zkop.runtime.cache import Informer, ResourceRef
from zkop.runtime.controller import Controller
from zkop.services.endpoints import slice_service_key
from zkop.services.importer.builder import address_guard
from zkop.services.importer.kind.options import KindOptions
from zkop.services.importer.kind.reconciler import CONTROLLER, ServiceImportObjects, keys_for_path
from zkop.services.importer.kind.spec import GROUP, PLURAL, VERSION
from zkop.services.importer.options import IMPORTED_LABEL
from zkop.services.importer.reader import ZooKeeperReader
from zkop.services.importer.reconciler import SLICE_INDEX
from zkop.services.importer.writer import ApiWriter, DryRunWriter
from zkop.services.wiring import ENDPOINTSLICES, SERVICES

__all__ = ["IMPORTS", "ServiceImports", "setup"]

IMPORTS = ResourceRef(GROUP, VERSION, PLURAL)


@dataclass
class ServiceImports:
    """The feature's parts: ``informers`` (every replica), ``controllers`` (leader), the reconciler."""

    informers: list[Informer]
    controllers: list[Controller]
    reconciler: ServiceImportObjects

    def on_session_reconnected(self) -> None:
        """A new ZooKeeper session (every watch may be gone): every object is read again."""
        for key in self.reconciler.all_keys():
            self.controllers[0].queue.add(key)


def setup(context: FeatureContext, options: KindOptions) -> ServiceImports:
    """Build the ``service-imports`` controller on the flags' session, with the flags' ensemble's gate (provided by
    the ZooKeeperConfig feature, built before it), and add it to ``context.manager``; ``--dry-run`` chooses the
    importer's ``DryRunWriter`` once."""
    settings, client = context.settings, context.client
    timeout = settings.inactivity_timeout
    imports = Informer(client, IMPORTS, namespaces=settings.namespaces, resync_period=settings.sync_period,
                       name="zookeeperserviceimports", inactivity_timeout=timeout)
    services = Informer(client, SERVICES, namespaces=settings.namespaces, resync_period=0, name="imports-services",
                        label_selector=f"{IMPORTED_LABEL}=true", inactivity_timeout=timeout)
    slices = Informer(client, ENDPOINTSLICES, namespaces=settings.namespaces, resync_period=0,
                      name="imports-endpointslices", indexers={SLICE_INDEX: slice_service_key},
                      label_selector=f"{IMPORTED_LABEL}=true", inactivity_timeout=timeout)
    servicecidrs, apiserver, guard = address_guard(client, "imports", options.allowed_cidrs, timeout)

    builder = ControllerBuilder(CONTROLLER, workers=options.workers)
    queue = builder.queue  # a watch event enqueues before the reconciler exists (docs/architecture.md, "Wiring")

    def on_znode_event(path: str) -> None:
        for key in keys_for_path(imports.indexer, path):
            queue.add(key)

    writer_type = DryRunWriter if settings.dry_run else ApiWriter  # the dry-run seam, chosen once
    writers: dict[str, ApiWriter] = {}

    def writer_for(namespace: str) -> ApiWriter:
        return writers.setdefault(namespace, writer_type(client, namespace))

    reconciler = ServiceImportObjects(
        imports.indexer, services.indexer, slices.indexer, ZooKeeperReader(context.zookeeper, on_znode_event),
        client, context.recorder, gate=context.part(Gate), cluster_id=settings.cluster_id, writer_for=writer_for,
        guard=guard, max_services=options.max_services)
    built = (builder.for_(imports)
             .watches(services, reconciler.keys_for_owned)
             .watches(slices, reconciler.keys_for_owned)
             .watches(servicecidrs, reconciler.all_keys)
             .watches(apiserver, reconciler.all_keys)
             .complete(reconciler))
    context.zookeeper.add_watch_listener(on_znode_event)
    parts = ServiceImports(built.informers, [built.controller], reconciler)
    context.manager.add_controllers(parts.informers, parts.controllers)
    context.on_new_session(context.zookeeper, parts.on_session_reconnected)
    return parts
