"""Wire the ZooKeeperMirror controller: informers, the ``zookeeper-mirror`` controller, its reconciler and watches.

The same shape as the service importer (:mod:`zkop.services.importer.builder`): :func:`setup` adds
them to the manager, which starts the informers on every replica and the controller only while
leading; the caller hooks :meth:`ZooKeeperMirrors.on_session_reconnected` to a new ZooKeeper session.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from zkop.feature.context import FeatureContext, MissingFeature
from zkop.feature.ensemble_lookup import EnsembleAccess, EnsembleLookup
from zkop.feature.gate import Gate
from zkop.feature.session import resync_on_new_session
from zkop.kube.client import KubeClient
from zkop.kube.events import EventRecorder
from zkop.mirror.decide import MANAGED_LABEL
from zkop.mirror.options import MirrorOptions
from zkop.mirror.reconciler import MirrorReconciler, keys_for_path, keys_naming
from zkop.mirror.sources import MirrorSource, MirrorSources
from zkop.mirror.tree import NO_LIMITS, Limits, TreeReader
from zkop.mirror.writer import GROUP, PLURAL, VERSION, ApiWriter, DryRunWriter
from zkop.runtime.builder import ControllerBuilder
from zkop.runtime.cache import Informer, ResourceRef
from zkop.runtime.controller import Controller
from zkop.zookeeper.adapter import ZooKeeperAdapter

__all__ = ["CONTROLLER_NAME", "MIRRORS", "ZooKeeperMirrors", "build_mirrors", "setup"]

log = logging.getLogger(__name__)

CONTROLLER_NAME = "zookeeper-mirror"
MIRRORS = ResourceRef(GROUP, VERSION, PLURAL)
CONFIGMAPS = ResourceRef("", "v1", "configmaps")


@dataclass
class ZooKeeperMirrors:
    """The mirror feature's parts for the manager: ``informers`` (every replica), ``controllers`` (leader)."""

    informers: list[Informer]
    controllers: list[Controller]
    reconciler: MirrorReconciler
    reader: TreeReader

    def on_session_reconnected(self) -> None:
        """A new ZooKeeper session (every watch is gone): forget the listings, re-read every mirror."""
        self.reader.forget_all()
        for key in self.reconciler.all_keys():
            self.controllers[0].queue.add(key)


def build_mirrors(client: KubeClient, zookeeper: ZooKeeperAdapter, recorder: EventRecorder, *,
                  namespaces: Sequence[str] | None, workers: int, dry_run: bool, resync_period: float,
                  inactivity_timeout: float, gate: Gate, limits: Limits = NO_LIMITS,
                  ensembles: EnsembleLookup | None = None) -> ZooKeeperMirrors:
    """Build (not start) the mirror controller; ZooKeeper is only read (:class:`~zkop.mirror.tree.ReadOnlyZooKeeper`).

    Args:
        namespaces: the namespaces watched (``None``: all).
        dry_run: ``zkop run --dry-run``: the reconciler is built with the :class:`~zkop.mirror.writer.DryRunWriter`
            (no ConfigMap written, no Normal Event; status and Warnings still reported).
        resync_period: seconds between re-reads of every mirror (the informers' resync).
        inactivity_timeout: seconds a silent API watch is kept before it is reopened.
        gate: the admission gate of ``zookeeper``'s ensemble (reserved roots, tenancy), which every mirror without
            ``spec.ensembleRef`` passes.
        limits: how much one mirror may have zkop read.
        ensembles: the running ZooKeeperEnsembles (``--zookeeper-ensembles``); a mirror naming one reads it through
            its adapter and passes its gate; ``None``: a mirror naming one is told ``EnsembleNotFound``.
    """
    builder = ControllerBuilder(CONTROLLER_NAME, workers=workers)
    queue = builder.queue  # the znode listeners enqueue before the reconciler exists (docs/architecture.md, "Wiring")
    mirrors = Informer(client, MIRRORS, namespaces=namespaces, resync_period=resync_period, name="zookeepermirrors",
                       inactivity_timeout=inactivity_timeout)

    def on_change(path: str) -> None:
        for key in keys_for_path(mirrors.indexer, gate, path):
            queue.add(key)

    config_maps = Informer(client, CONFIGMAPS, namespaces=namespaces, resync_period=0, name="mirror-configmaps",
                           label_selector=MANAGED_LABEL, inactivity_timeout=inactivity_timeout)
    def enqueue_naming(name: str) -> None:
        for key in keys_naming(mirrors.indexer, name):
            queue.add(key)

    def make_source(name: str, access: EnsembleAccess) -> MirrorSource:
        """A ZooKeeperEnsemble's source: a reader on its adapter whose watches enqueue its admitted mirrors; a
        session made or re-established there re-reads them (a new session: the listings forgotten first)."""
        adapter, ensemble_gate = access.adapter, access.gate

        def on_ensemble_change(path: str) -> None:
            for key in keys_for_path(mirrors.indexer, ensemble_gate, path, name):
                queue.add(key)

        ensemble_reader = TreeReader(adapter, on_ensemble_change)
        adapter.add_watch_listener(on_ensemble_change)
        resync_on_new_session(adapter, [ensemble_reader.forget_all])
        adapter.add_session_listener(lambda state: enqueue_naming(name) if state == "CONNECTED" else None)
        return MirrorSource(ensemble_gate, ensemble_reader,
                            lambda roots: adapter.watch_subtrees(CONTROLLER_NAME, roots, whole=True), adapter)

    reader = TreeReader(zookeeper, on_change)
    sources = MirrorSources(
        MirrorSource(gate, reader, lambda roots: zookeeper.watch_subtrees(CONTROLLER_NAME, roots, whole=True)),
        ensembles, make_source)
    reconciler = MirrorReconciler(mirrors.indexer, config_maps.indexer,
                                  (DryRunWriter if dry_run else ApiWriter)(client, recorder),
                                  sources=sources, limits=limits)
    built = builder.for_(mirrors).watches(config_maps, reconciler.keys_for_config_map).complete(reconciler)
    zookeeper.add_watch_listener(on_change)
    if ensembles is not None:
        ensembles.on_change(enqueue_naming)
    return ZooKeeperMirrors(built.informers, [built.controller], reconciler, reader)


def setup(context: FeatureContext, options: MirrorOptions) -> ZooKeeperMirrors:
    """:func:`build_mirrors` on the flags' session and add its parts to ``context.manager`` (informers everywhere,
    the controller while leading); ``--dry-run`` (``context.settings.dry_run``) chooses its planning-only writer.
    A mirror without ``spec.ensembleRef`` passes the flags' ensemble's admission gate, the one its ZooKeeperConfigs
    pass (provided by the ZooKeeperConfig feature, built before it); one naming a ZooKeeperEnsemble reads it with
    its gate, through the lookup the ZooKeeperEnsemble feature provides when it is enabled (built before it)."""
    settings = context.settings
    try:
        ensembles: EnsembleLookup | None = context.part(EnsembleLookup)
    except MissingFeature:
        ensembles = None  # --zookeeper-ensembles off
    mirrors = build_mirrors(context.client, context.zookeeper, context.recorder, namespaces=settings.namespaces,
                            workers=settings.workers, dry_run=settings.dry_run, resync_period=settings.sync_period,
                            inactivity_timeout=settings.inactivity_timeout, gate=context.part(Gate),
                            limits=Limits(options.max_znodes, options.max_bytes), ensembles=ensembles)
    context.manager.add_controllers(mirrors.informers, mirrors.controllers)
    context.on_new_session(context.zookeeper, mirrors.on_session_reconnected)
    return mirrors
