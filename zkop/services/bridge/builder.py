"""Wire the service bridge: informers, the ``service-bridge`` controller and its reconciler.

:func:`setup` adds them to the manager (as every feature wires itself), which owns the lifecycle
(:mod:`zkop.services.wiring`): it starts the informers on every replica and waits for them to
sync, starts the controllers only while leading; the caller hooks
:meth:`ServiceBridge.on_session_reconnected` to a new ZooKeeper session.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from zkop.feature.context import FeatureContext
from zkop.kube.client import JSON, KubeClient
from zkop.kube.events import EventRecorder
from zkop.ownership.registry import DEFAULT_REGISTRY_ROOT
from zkop.runtime.builder import ControllerBuilder
from zkop.runtime.cache import FuncHandler, Informer, meta_namespace_key
from zkop.services.bridge.options import BridgeOptions
from zkop.services.bridge.reconciler import FULL_SYNC_KEY, KEY_INDEX, SLICE_INDEX, ServiceBridgeReconciler
from zkop.services.bridge.records import is_selected
from zkop.services.bridge.writer import DryRunWriter, ZooKeeperWriter
from zkop.services.endpoints import slice_service_key
from zkop.services.wiring import ENDPOINTSLICES, SERVICES, ServiceSync, all_synced, setup_direction
from zkop.zookeeper.adapter import ZooKeeperAdapter

__all__ = ["CONTROLLER_NAME", "ENDPOINTSLICES", "SERVICES", "ServiceBridge", "build_service_bridge", "setup"]

log = logging.getLogger(__name__)

CONTROLLER_NAME = "service-bridge"


@dataclass
class ServiceBridge(ServiceSync[ServiceBridgeReconciler]):
    """The bridge's parts, for the manager (:class:`~zkop.services.wiring.ServiceSync`).

    ``informers`` are the Services (and EndpointSlices with ``--service-bridge-endpoints``),
    ``controllers`` the ``service-bridge`` controller; a full sync is garbage collection.
    """

    FULL_SYNC_KEY: ClassVar[str] = FULL_SYNC_KEY

    def on_session_reconnected(self) -> None:
        """A new ZooKeeper session: re-check every published Service and run a full sync."""
        log.info("service-bridge: new ZooKeeper session; full resync")
        for obj in self.informers[0].indexer.list():
            if is_selected(obj, self.reconciler.options):
                self.controller.queue.add(meta_namespace_key(obj))
        self.controller.queue.add(FULL_SYNC_KEY)


def build_service_bridge(
    client: KubeClient, zookeeper: ZooKeeperAdapter, recorder: EventRecorder, options: BridgeOptions, *,
    cluster_id: str, resync_period: float, inactivity_timeout: float,
    clock: Callable[[], float] = time.monotonic, dry_run: bool = False, registry_root: str = DEFAULT_REGISTRY_ROOT,
) -> ServiceBridge:
    """Build (not start) the service bridge.

    Args:
        client: JSON client the informers list and watch with.
        zookeeper: the adapter every write goes through.
        options: bridge settings (:func:`zkop.cmd.bridge_flags.options_from_args`).
        cluster_id: the global ``--cluster-id``; stamped into every node as the owner.
        resync_period: seconds between informer resyncs, and between full syncs (garbage collection).
        inactivity_timeout: seconds a silent watch is kept before it is reopened.
        clock: monotonic seconds, for the endpoint debounce.
        dry_run: ``zkop run --dry-run``: the reconciler is built with the
            :class:`~zkop.services.bridge.writer.DryRunWriter` (plans, logs and counts; writes nothing).
        registry_root: the ownership registry (``--registry-root``) every record is claimed in.

    The full sync key is enqueued at once; it runs when the workers start, and waits for the
    informers' first LIST if they have not completed it.
    """
    namespaces = list(options.namespaces) or None
    services = Informer(
        client, SERVICES, namespaces=namespaces, resync_period=resync_period, name="bridge-services",
        inactivity_timeout=inactivity_timeout,
    )
    informers = [services]
    slices: Informer | None = None
    if options.endpoints:
        slices = Informer(
            client, ENDPOINTSLICES, namespaces=namespaces, resync_period=resync_period, name="bridge-endpointslices",
            indexers={SLICE_INDEX: slice_service_key}, label_selector="kubernetes.io/service-name",
            inactivity_timeout=inactivity_timeout,
        )
        informers.append(slices)
    builder = ControllerBuilder(CONTROLLER_NAME, workers=options.workers)
    queue = builder.queue  # the reconciler requests full syncs on it (docs/architecture.md, "Wiring")
    reconciler = ServiceBridgeReconciler(
        services.indexer, zookeeper, recorder, options, cluster_id=cluster_id,
        slices=slices.indexer if slices is not None else None, synced=all_synced(informers),
        request_full_sync=lambda delay: queue.add_after(FULL_SYNC_KEY, delay),
        full_sync_period=resync_period, clock=clock,
        writer=(DryRunWriter if dry_run else ZooKeeperWriter)(zookeeper),  # the dry-run seam, chosen once
        registry_root=registry_root,
    )
    services.indexer.add_indexer(KEY_INDEX, reconciler.key_index)
    builder.watches(services, reconciler.keys_for)
    if slices is not None:
        delay = options.endpoints_debounce

        def on_slice(obj: JSON) -> None:
            for key in slice_service_key(obj):
                owner = services.indexer.get(key)
                if owner is not None and is_selected(owner, options):
                    queue.add_after(key, delay)  # debounced: a rollout's slice updates come in bursts

        builder.handles(slices, FuncHandler(on_slice))
    built = builder.complete(reconciler)
    queue.add(FULL_SYNC_KEY)
    return ServiceBridge(built.informers, [built.controller], reconciler)


def setup(context: FeatureContext, options: BridgeOptions) -> ServiceBridge:
    """:func:`build_service_bridge` on the session of ``options.ensemble`` (``--service-bridge-ensemble``),
    claiming in the ownership registry of ``--registry-root``, added to the Manager
    (:func:`~zkop.services.wiring.setup_direction`)."""
    registry_root = context.settings.registry_root

    def build(client: KubeClient, zookeeper: ZooKeeperAdapter, recorder: EventRecorder, bridge: BridgeOptions, *,
              cluster_id: str, resync_period: float, inactivity_timeout: float, dry_run: bool = False) -> ServiceBridge:
        return build_service_bridge(client, zookeeper, recorder, bridge, cluster_id=cluster_id,
                                    resync_period=resync_period, inactivity_timeout=inactivity_timeout,
                                    dry_run=dry_run, registry_root=registry_root)

    return setup_direction(context, options, options.ensemble, build)
