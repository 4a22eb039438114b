"""Wire the ZooKeeperConfigTree controller: informers, the ``zookeeper-config-tree`` controller, its reconciler.

:func:`setup` builds the tree informer (indexed by the ConfigMaps and Secrets each tree names), the caches of
exactly those objects (a GET and a WATCH of each by name, as for a ZooKeeperConfig's ``dataFrom``), the reconciler
with the writer ``--dry-run`` chooses, and the controller through the one builder; the adapter's watch listener
maps a changed znode (or its ownership record) to the trees whose root covers it. The flags' ensemble's gate and
the per-ensemble :class:`~zkop.ownership.declared.EnsembleDeclarations` come from the ZooKeeperConfig feature, built
first; a tree naming a ZooKeeperEnsemble (``spec.ensembleRef``) is written through the
:class:`~zkop.feature.ensemble_lookup.EnsembleLookup` the ZooKeeperEnsemble feature provides when it is enabled.
"""

from __future__ import annotations

from dataclasses import dataclass

from zkop.configtree.options import TreeOptions
from zkop.configtree.reconciler import ENSEMBLE_INDEX, TreeReconciler
from zkop.configtree.spec import FINALIZER, GROUP, KIND, PLURAL, VERSION, SourceRef, source_refs
from zkop.configtree.writer import CONTROLLER, ApiWriter, DryRunWriter
from zkop.feature.context import FeatureContext, MissingFeature
from zkop.feature.ensemble_lookup import EnsembleHolds, EnsembleLookup
from zkop.feature.ensemble_ref import DEFAULT_ENSEMBLE, ensemble_of
from zkop.feature.gate import Gate
from zkop.kube.client import JSON
from zkop.ownership.declared import EnsembleDeclarations
from zkop.runtime.builder import ControllerBuilder
from zkop.runtime.cache import Indexer, Informer, NamedObjectInformer, ResourceRef
from zkop.runtime.cache.keys import meta_namespace_key
from zkop.runtime.controller import Controller
from zkop.runtime.ownwrites import OwnWrites

__all__ = ["CONTROLLER", "REF_INDEX", "TREES", "ConfigTrees", "setup"]

TREES = ResourceRef(GROUP, VERSION, PLURAL)
CONFIGMAPS = ResourceRef("", "v1", "configmaps")
SECRETS = ResourceRef("", "v1", "secrets")
#: Informer index: ``ConfigMap/<ns>/<name>`` or ``Secret/<ns>/<name>`` → the trees expanding it.
REF_INDEX = "ref"


@dataclass
class ConfigTrees:
    """The feature's parts: ``informers`` (every replica), ``controllers`` (leader), the reconciler."""

    informers: list[Informer]
    controllers: list[Controller]
    reconciler: TreeReconciler


class _TrackSources:
    """Tree event handler: cache the ConfigMaps/Secrets trees name, stop caching those none names any more."""

    def __init__(self, index: Indexer, caches: dict[str, NamedObjectInformer]) -> None:
        self._index, self._caches = index, caches

    def _track(self, refs: list[str], track: bool) -> None:
        for ref in refs:
            kind, key = ref.split("/", 1)
            if track:
                self._caches[kind].track([key])
            elif not self._index.index_keys(REF_INDEX, ref):
                self._caches[kind].untrack([key])

    def on_add(self, obj: JSON) -> None:
        self._track(source_refs(obj), True)

    def on_update(self, old: JSON, new: JSON) -> None:
        self._track(source_refs(new), True)
        self._track([r for r in source_refs(old) if r not in source_refs(new)], False)

    def on_delete(self, obj: JSON) -> None:
        self._track(source_refs(obj), False)


class _HoldEnsembles:
    """Tree event handler: a ZooKeeperEnsemble being deleted waits for the trees naming it that hold zkop's
    finalizer (their children are on it), so a tree that releases it, leaves the ensemble or goes re-enqueues the
    ensemble (as a ZooKeeperConfig does: :class:`zkop.ensembles.controller.EnsembleMembership`)."""

    def __init__(self, trees: Indexer, holds: EnsembleHolds) -> None:
        self._trees, self._holds = trees, holds
        holds.add(self.needing)

    def needing(self, name: str) -> list[str]:
        """``ZooKeeperConfigTree namespace/name`` of the trees naming ensemble ``name`` that hold the finalizer."""
        return [f"{KIND} {key}" for key in self._trees.index_keys(ENSEMBLE_INDEX, name)
                if FINALIZER in ((self._trees.get(key) or {}).get("metadata") or {}).get("finalizers", [])]

    def _recheck(self, obj: JSON) -> None:
        name = ensemble_of(obj)
        if name != DEFAULT_ENSEMBLE:
            self._holds.recheck(name)

    def on_add(self, obj: JSON) -> None:
        self._recheck(obj)

    def on_update(self, old: JSON, new: JSON) -> None:
        def held(obj: JSON) -> bool:
            return FINALIZER in ((obj.get("metadata") or {}).get("finalizers") or [])
        if ensemble_of(old) != ensemble_of(new) or held(old) != held(new):
            self._recheck(old)
            self._recheck(new)

    def on_delete(self, obj: JSON) -> None:
        self._recheck(obj)


def setup(context: FeatureContext, options: TreeOptions) -> ConfigTrees:
    """Build the ZooKeeperConfigTree controller on the flags' ensemble and add its parts to ``context.manager``
    (informers everywhere, the controller while leading); ``--dry-run`` chooses its planning-only writer. Its trees
    pass the flags' ensemble's admission gate, or the one of the ZooKeeperEnsemble they name, and share the path
    declarations of that ensemble's ZooKeeperConfigs."""
    settings = context.settings
    try:
        ensembles: EnsembleLookup | None = context.part(EnsembleLookup)
    except MissingFeature:
        ensembles = None  # --zookeeper-ensembles off: a tree naming one is told EnsembleNotFound
    builder = ControllerBuilder(CONTROLLER, workers=settings.workers)
    queue = builder.queue  # the znode listener enqueues before the reconciler runs (docs/architecture.md, "Wiring")
    trees = Informer(context.client, TREES, namespaces=settings.namespaces, resync_period=settings.sync_period,
                     name="zookeeperconfigtrees",
                     indexers={REF_INDEX: source_refs, ENSEMBLE_INDEX: lambda obj: [ensemble_of(obj)]},
                     inactivity_timeout=settings.inactivity_timeout)
    configmaps = NamedObjectInformer(context.client, CONFIGMAPS, name="tree-configmaps",
                                     inactivity_timeout=settings.inactivity_timeout)
    secrets = NamedObjectInformer(context.client, SECRETS, name="tree-secrets",
                                  inactivity_timeout=settings.inactivity_timeout)
    caches = {"ConfigMap": configmaps, "Secret": secrets}
    trees.add_event_handler(_TrackSources(trees.indexer, caches))

    def lookup(namespace: str, source: SourceRef) -> JSON | None:
        return caches[source.kind].get(f"{namespace}/{source.name}")

    def referencing(kind: str, obj: JSON) -> list[str]:
        meta = obj.get("metadata") or {}
        return trees.indexer.index_keys(REF_INDEX, f"{kind}/{meta.get('namespace')}/{meta.get('name')}")

    # The echo of our own finalizer or status write is not an event (the pass went on with the response), and a
    # held update that was not the echo after all is enqueued (runtime.ownwrites).
    own_writes = OwnWrites(CONTROLLER, release=queue.add, recorded=trees.expect_echo)
    reconciler = TreeReconciler(
        trees.indexer, lookup, context.zookeeper,
        (DryRunWriter if settings.dry_run else ApiWriter)(context.client, context.recorder, context.zookeeper,
                                                          own_writes),
        gate=context.part(Gate), declared=context.part(EnsembleDeclarations), cluster_id=settings.cluster_id,
        registry_root=options.registry_root, max_znodes=options.max_znodes, enqueue=queue.add, ensembles=ensembles)
    built = (builder.for_(trees, update_filter=lambda old, new: not own_writes.is_echo(meta_namespace_key(new),
                                                                                       old, new))
             .watches(configmaps, lambda obj: referencing("ConfigMap", obj))
             .watches(secrets, lambda obj: referencing("Secret", obj))
             .complete(reconciler))
    context.zookeeper.add_watch_listener(reconciler.on_znode_changed)
    if ensembles is not None:
        ensembles.on_change(reconciler.enqueue_naming)
        trees.add_event_handler(_HoldEnsembles(trees.indexer, context.part(EnsembleHolds)))
    context.manager.add_controllers(built.informers, [built.controller])
    context.on_new_session(context.zookeeper, reconciler.on_session_reconnected)
    return ConfigTrees(built.informers, [built.controller], reconciler)
