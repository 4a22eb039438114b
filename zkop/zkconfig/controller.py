"""Wire the ZooKeeperConfig controller into a Manager (controller-runtime's ``SetupWithManager``).

:func:`setup` adds:

* informers (every replica, warm caches): ZooKeeperConfigs, indexed by declared path and by
  referenced ConfigMap/Secret; and only the ConfigMaps and Secrets a ZooKeeperConfig names, each
  watched on its own (:class:`~zkop.runtime.cache.NamedObjectInformer`, kept in step by
  :class:`_TrackReferences`): the cluster's other Secrets are never listed or held;
* with ``watch_namespaces`` (a tenancy rule with a ``namespaceSelector``): a Namespace informer, whose
  cache answers the reconciler's label lookups (never a GET per reconcile);
* key mappers (``handler.EnqueueRequestsFromMapFunc``): an object's event also enqueues every other
  object declaring its path (ownership may move); a ConfigMap/Secret event, its referrers; a znode
  or ownership-record change, the objects declaring that path; a Namespace whose labels changed,
  its objects and the objects sharing their paths (admission, and with it ownership, may move);
* leader-only: the watched roots (:class:`~zkop.zkconfig.watchroots.WatchRoots`), registered before
  the workers start; the ``zookeeperconfig`` controller, after one
  :meth:`~zkop.zkconfig.reconciler.ZooKeeperConfigReconciler.learn_absent` pass; the periodic ACL
  check (:class:`~zkop.zkconfig.aclcheck.AclCheck`: ZooKeeper fires no watch on ``setACL``);
* the ``zkop_zookeeperconfig_*`` status collector, while the manager runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client import REGISTRY

from zkop.feature.context import FeatureContext
from zkop.feature.tenancy import TenancyPolicy
from zkop.kube.client import JSON, KubeClient
from zkop.kube.events import EventRecorder
from zkop.ownership.declared import DeclaredPaths, EnsembleDeclarations
from zkop.runtime.builder import Built, ControllerBuilder
from zkop.runtime.cache import (
    FilteredHandler,
    FilteredIndexer,
    FuncHandler,
    Indexer,
    IndexFunc,
    Informer,
    NamedObjectInformer,
    ResourceRef,
    meta_namespace_key,
)
from zkop.runtime.controller import Controller
from zkop.runtime.manager import Manager
from zkop.runtime.ownwrites import OwnWrites
from zkop.runtime.taskloop import TaskLoop
from zkop.runtime.workerpool import WorkerPool
from zkop.zkconfig import metrics
from zkop.zkconfig.aclcheck import AclCheck
from zkop.zkconfig.objects import DEFAULT_ENSEMBLE, ensemble_of
from zkop.zkconfig.reconciler import (
    PATH_INDEX,
    REF_INDEX,
    ReconcilerOptions,
    ZooKeeperConfigReconciler,
    index_by_path,
    index_by_ref,
)
from zkop.zkconfig.spec import DEFAULT_MAX_DATA_BYTES, GROUP, PLURAL, VERSION
from zkop.zkconfig.status_metrics import ZooKeeperConfigStatusCollector
from zkop.zkconfig.watchroots import WatchRoots
from zkop.zookeeper.adapter import ZooKeeperAdapter

__all__ = ["CONFIGMAPS", "CONTROLLER_NAME", "ENSEMBLE_INDEX", "NAMESPACES", "SECRETS", "ZOOKEEPERCONFIGS",
           "SharedInformers", "SharedLoops", "ZooKeeperConfigController", "ZooKeeperConfigOptions", "add_to_manager",
           "build_ensemble", "build_informers", "index_by_ensemble", "setup"]

CONTROLLER_NAME = "zookeeperconfig"
ZOOKEEPERCONFIGS = ResourceRef(GROUP, VERSION, PLURAL)
CONFIGMAPS = ResourceRef("", "v1", "configmaps")
SECRETS = ResourceRef("", "v1", "secrets")
NAMESPACES = ResourceRef("", "v1", "namespaces")
#: Informer index: namespace → ZooKeeperConfigs in it (only with a Namespace informer).
NAMESPACE_INDEX = "namespace"


def index_by_namespace(obj: JSON) -> list[str]:
    """Index function for :data:`NAMESPACE_INDEX`."""
    return [str((obj.get("metadata") or {}).get("namespace"))]


def labels_of(namespaces: Informer) -> Callable[[str], Mapping[str, str] | None]:
    """A namespace's labels from ``namespaces``' cache (``None``: not seen yet)."""
    def labels(namespace: str) -> Mapping[str, str] | None:
        found = namespaces.indexer.get(namespace)
        return (found.get("metadata") or {}).get("labels") or {} if found is not None else None
    return labels


def namespace_labels_changed(old: JSON, new: JSON) -> bool:
    """Update filter of the Namespace informer: only a change of labels can change admission."""
    return (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels")
#: Informer index: the ensemble an object names (:func:`~zkop.zkconfig.objects.ensemble_of`) → its objects.
ENSEMBLE_INDEX = "ensemble"


def index_by_ensemble(obj: JSON) -> list[str]:
    """Index function for :data:`ENSEMBLE_INDEX`: ``[ensemble_of(obj)]`` (``""``: the flags' ensemble)."""
    return [ensemble_of(obj)]


@dataclass
class SharedInformers:
    """The caches every ensemble's controller reads (one LIST/WATCH each, whatever the number of ensembles)."""

    informer: Informer
    configmaps: NamedObjectInformer
    secrets: NamedObjectInformer
    namespaces: Informer | None = None

    @property
    def informers(self) -> list[Informer]:
        """ZooKeeperConfigs, ConfigMaps, Secrets, and Namespaces if watched."""
        return [self.informer, self.configmaps, self.secrets, *([self.namespaces] if self.namespaces else [])]


class _Keys:
    """The key mappers of one ensemble's controller (``handler.EnqueueRequestsFromMapFunc``) over its objects
    (``view``): what an event of each source enqueues. Read-only, no I/O: they run on informer and kazoo threads."""

    def __init__(self, view: Indexer, reconciler: ZooKeeperConfigReconciler) -> None:
        self._view, self._registry = view, reconciler.registry

    def sharing_path(self, obj: JSON) -> list[str]:
        """``obj``'s key plus every other object declaring one of its paths (ownership may move)."""
        keys = [meta_namespace_key(obj)]
        for path in index_by_path(obj):
            keys.extend(k for k in self._view.index_keys(PATH_INDEX, path) if k != keys[0])
        return keys

    def referencing(self, kind: str, obj: JSON) -> list[str]:
        """Keys of the ZooKeeperConfigs whose ``spec.dataFrom`` names ``obj`` (a ``kind`` object)."""
        meta = obj.get("metadata") or {}
        return self._view.index_keys(REF_INDEX, f"{kind}/{meta.get('namespace')}/{meta.get('name')}")

    def in_namespace(self, namespace_obj: JSON) -> list[str]:
        """The keys of the ZooKeeperConfigs in a Namespace, and of every object sharing one of their paths."""
        name = str((namespace_obj.get("metadata") or {}).get("name"))
        keys: dict[str, None] = {}
        for obj in self._view.by_index(NAMESPACE_INDEX, name):
            keys.update(dict.fromkeys(self.sharing_path(obj)))
        return list(keys)

    def for_znode(self, path: str) -> list[str]:
        """The objects declaring ``path`` (a znode, or the ownership record of one)."""
        registry = self._registry
        managed = registry.managed_path(path) if registry.is_registry_path(path) else path
        return [] if managed is None else self._view.index_keys(PATH_INDEX, managed)

    def on_znode_changed(self, enqueue: Callable[[str], None]) -> Callable[[str], None]:
        """The adapter's watch listener: a fired watch (kazoo's event thread) enqueues the objects declaring the
        path."""
        def listener(path: str) -> None:
            for key in self.for_znode(path):
                enqueue(key)
        return listener


@dataclass(frozen=True)
class SharedLoops:
    """The two threads every ensemble's ZooKeeperConfig controller runs its background loops on (issue 42, item 4).

    Attributes:
        watch_roots: the debounced passes of every ensemble's :class:`~zkop.zkconfig.watchroots.WatchRoots`.
        acl_check: the periodic checks of every ensemble's :class:`~zkop.zkconfig.aclcheck.AclCheck`.
    """

    watch_roots: TaskLoop
    acl_check: TaskLoop

    @classmethod
    def new(cls) -> SharedLoops:
        """Both loops, not started (each thread starts with its first task), named as their components."""
        return cls(TaskLoop(WatchRoots.name), TaskLoop(AclCheck.name))


@dataclass
class ZooKeeperConfigController:
    """What :func:`build_ensemble` built, for the caller's session wiring, tests and diagnostics.

    Attributes:
        shared: the caches every ensemble's controller reads.
        built: the controller and the handlers its builder registered on ``shared``'s informers.
        reconciler: the controller's reconciler.
        keys: its key mappers.
        acl_check: the periodic ACL check (``None``: disabled).
        watch_roots: the watched roots of its objects.
        ensemble: a ZooKeeperEnsemble's name, ``""`` for the one zkop's flags describe.
    """

    shared: SharedInformers
    built: Built
    reconciler: ZooKeeperConfigReconciler
    keys: _Keys
    acl_check: AclCheck | None = None
    watch_roots: WatchRoots | None = None
    ensemble: str = DEFAULT_ENSEMBLE
    #: The worker pool every ensemble's controller shares (``None``: workers of its own).
    pool: WorkerPool | None = None
    #: The loops every ensemble's watch-root follower and ACL check share (``None``: a thread of their own each).
    loops: SharedLoops | None = None
    #: Undo what :func:`build_ensemble` registered outside ``built`` (its path declarations), run by :meth:`detach`.
    undo: list[Callable[[], None]] = field(default_factory=list)

    @property
    def controller(self) -> Controller:
        """The ensemble's controller (its work queue and workers)."""
        return self.built.controller

    @property
    def informer(self) -> Informer:
        """The ZooKeeperConfig informer (every ensemble's objects)."""
        return self.shared.informer

    @property
    def configmaps(self) -> NamedObjectInformer:
        """The ConfigMaps ZooKeeperConfigs name."""
        return self.shared.configmaps

    @property
    def secrets(self) -> NamedObjectInformer:
        """The Secrets ZooKeeperConfigs name."""
        return self.shared.secrets

    @property
    def namespaces(self) -> Informer | None:
        """The Namespace informer, if Namespaces are watched."""
        return self.shared.namespaces

    @property
    def cache(self) -> Indexer:
        """This ensemble's objects (a view of the informer's cache, which holds every ensemble's)."""
        return self.reconciler.cache

    @property
    def informers(self) -> list[Informer]:
        """ZooKeeperConfigs, ConfigMaps, Secrets, and Namespaces if watched."""
        return self.shared.informers

    def detach(self) -> None:
        """Remove every event handler :func:`build_ensemble` registered and its path declarations (the ensemble is
        going away)."""
        self.built.detach()
        for undo in self.undo:
            undo()

    def on_session_reconnected(self) -> None:
        """A ZooKeeper session came back (after LOST or SUSPENDED): re-deliver every object of the ensemble.

        After a LOST session every watch is gone and the data may have changed; after SUSPENDED,
        keys may sit in long backoffs.  A resync is cheap where the watch-validated cache holds.
        """
        for key in self.cache.list_keys():
            self.controller.queue.add(key)

    def admission_changed(self) -> None:
        """The tenancy policy changed: re-deliver every object of the ensemble and re-register the watched roots."""
        if self.watch_roots is not None:
            self.watch_roots.admission_changed()
        self.on_session_reconnected()


class _TrackReferences:
    """ZooKeeperConfig event handler: track the ConfigMaps/Secrets named in ``spec.dataFrom``,
    untrack those no ZooKeeperConfig names any more (after the cache and its index were updated)."""

    def __init__(self, index: Indexer, caches: dict[str, NamedObjectInformer]) -> None:
        self._index, self._caches = index, caches

    def _split(self, refs: list[str]) -> dict[str, list[str]]:
        by_kind: dict[str, list[str]] = {}
        for ref in refs:
            kind, key = ref.split("/", 1)
            if kind in self._caches:
                by_kind.setdefault(kind, []).append(key)
        return by_kind

    def on_add(self, obj: JSON) -> None:
        refs = index_by_ref(obj)
        if not refs:  # most objects, on each of their events
            return
        for kind, keys in self._split(refs).items():
            self._caches[kind].track(keys)

    def on_update(self, old: JSON, new: JSON) -> None:
        self.on_add(new)
        self._release(old)

    def on_delete(self, obj: JSON) -> None:
        self._release(obj)

    def _release(self, obj: JSON) -> None:
        refs = index_by_ref(obj)
        if not refs:
            return
        unused = [ref for ref in refs if not self._index.index_keys(REF_INDEX, ref)]
        for kind, keys in self._split(unused).items():
            self._caches[kind].untrack(keys)


class _LearnAbsent:
    """Leader runnable: one ``learn_absent`` pass before the controller's workers start."""

    name = "zookeeperconfig-learn-absent"

    def __init__(self, reconciler: ZooKeeperConfigReconciler) -> None:
        self._reconciler = reconciler

    def start(self) -> None:
        self._reconciler.learn_absent()

    def stop(self, timeout: float, /) -> None:
        """Nothing runs in the background."""


class _StatusCollector:
    """Non-leader runnable: exports the status collector while the manager runs."""

    name = "zookeeperconfig-status-metrics"

    def __init__(self, collector: ZooKeeperConfigStatusCollector) -> None:
        self._collector = collector

    def start(self) -> None:
        with contextlib.suppress(ValueError):  # already registered by another in-process manager (tests)
            REGISTRY.register(self._collector)

    def stop(self, timeout: float, /) -> None:
        with contextlib.suppress(KeyError):
            REGISTRY.unregister(self._collector)


def build_informers(client: KubeClient, *, namespaces: list[str] | None, sync_period: float,
                    inactivity_timeout: float, watch_namespaces: bool = False) -> SharedInformers:
    """The ZooKeeperConfig informer (indexed by path, reference and ensemble) and the ConfigMap/Secret caches of
    ``spec.dataFrom`` (only the objects ZooKeeperConfigs name), not started.

    Args:
        namespaces: namespaces to watch, ``None`` for all.
        sync_period: seconds between resyncs of the ZooKeeperConfig informer.
        inactivity_timeout: seconds a silent watch is kept before it is reopened.
        watch_namespaces: also a Namespace informer (tenancy rules with a ``namespaceSelector``).
    """
    indexers: dict[str, IndexFunc] = {PATH_INDEX: index_by_path, REF_INDEX: index_by_ref,
                                      ENSEMBLE_INDEX: index_by_ensemble}
    if watch_namespaces:
        indexers[NAMESPACE_INDEX] = index_by_namespace
    informer = Informer(
        client, ZOOKEEPERCONFIGS, name="zookeeperconfigs", namespaces=namespaces,
        indexers=indexers, resync_period=sync_period, inactivity_timeout=inactivity_timeout,
    )
    namespace_informer = Informer(client, NAMESPACES, name="namespaces", resync_period=0,
                                  inactivity_timeout=inactivity_timeout) if watch_namespaces else None
    configmaps = NamedObjectInformer(client, CONFIGMAPS, name="configmaps", inactivity_timeout=inactivity_timeout)
    secrets = NamedObjectInformer(client, SECRETS, name="secrets", inactivity_timeout=inactivity_timeout)
    informer.add_event_handler(_TrackReferences(informer.indexer, {"ConfigMap": configmaps, "Secret": secrets}))
    return SharedInformers(informer, configmaps, secrets, namespace_informer)


def build_ensemble(
    shared: SharedInformers, client: KubeClient, zookeeper: ZooKeeperAdapter, recorder: EventRecorder,
    options: ReconcilerOptions, *, ensemble: str = DEFAULT_ENSEMBLE, workers: int, acl_check_period: float = 60.0,
    policy_for: Callable[[JSON], TenancyPolicy] | None = None, pool: WorkerPool | None = None,
    declared: DeclaredPaths | None = None, loops: SharedLoops | None = None,
) -> ZooKeeperConfigController:
    """The ZooKeeperConfig controller of one ensemble: its reconciler (ownership registry), work queue and
    workers, watched roots and ACL check, over the objects of ``shared`` that name ``ensemble``; the
    event handlers are registered on ``shared``'s informers (:meth:`ZooKeeperConfigController.detach` removes
    them), nothing is started.

    With ``pool`` the ensembles' controllers share its workers, round-robin between them (threads grow with
    ``--workers``, not with ensembles); an ensemble that is down holds up only its own objects' keys, each of which
    fails fast (its session's bounded waits), so it takes its turn and never starves another's.

    Args:
        zookeeper: the ensemble's adapter; its watch listener enqueues the objects declaring a
            fired path (:meth:`_Keys.for_znode`).
        options: reconciler settings (size limit, cluster id, registry root).
        ensemble: a ZooKeeperEnsemble's name; ``""`` for the one zkop's flags describe (controller
            ``zookeeperconfig``; another's is ``zookeeperconfig/<name>``).
        workers: concurrent reconciles of this ensemble when it has workers of its own (no ``pool``).
        acl_check_period: seconds between ACL checks of znodes declaring ``spec.acl``; 0 disables.
        policy_for: the tenancy policy of an object (:class:`~zkop.feature.tenancy.TenancyPolicy`); ``None``: none.
        pool: the worker pool every ensemble's controller shares (:class:`~zkop.runtime.workerpool.WorkerPool`).
        declared: the paths other kinds declare (ZooKeeperConfigTrees on this ensemble): this kind's declarations
            are registered there, and a path another kind starts or stops declaring enqueues the objects declaring
            it; ``None``: no other kind writes on this ensemble.
        loops: the threads every ensemble's watch-root follower and ACL check share (:class:`SharedLoops`): their
            tasks are named after the controller; ``None``: each of the two runs on a thread of its own.
    """
    informer = shared.informer
    name = CONTROLLER_NAME if ensemble == DEFAULT_ENSEMBLE else f"{CONTROLLER_NAME}/{ensemble}"
    view = FilteredIndexer(informer.indexer, ENSEMBLE_INDEX, index_by_ensemble, ensemble)
    builder = ControllerBuilder(name, workers=workers, pool=pool)
    queue = builder.queue  # own writes and znode watches enqueue on it (docs/architecture.md, "Wiring")
    # An update held while our own write of it was in flight, and not its echo after all, is enqueued;
    # the echo of a write whose response is in is cached from that response, not decoded (runtime.cache.echoes).
    own_writes = OwnWrites(release=queue.add, recorded=informer.expect_echo, wait_past=informer.wait_past)
    reconciler = ZooKeeperConfigReconciler(
        view, client, zookeeper, recorder, options,
        configmaps=shared.configmaps, secrets=shared.secrets, own_writes=own_writes, policy_for=policy_for,
        namespace_labels=labels_of(shared.namespaces) if shared.namespaces is not None else None,
        declared=declared,
    )
    undo: list[Callable[[], None]] = []
    if declared is not None:
        on_ensemble = declared
        on_ensemble.add_source(reconciler.declarers)

        def enqueue_declaring(paths: Iterable[str]) -> None:
            for path in paths:
                for key in view.index_keys(PATH_INDEX, path):
                    queue.add(key)
        on_ensemble.add_listener(enqueue_declaring)
        undo = [lambda: on_ensemble.remove_source(reconciler.declarers),
                lambda: on_ensemble.remove_listener(enqueue_declaring)]
    watch_roots = WatchRoots(view, zookeeper, reconciler.registry, wait=zookeeper.options.session_timeout,
                             admits=reconciler.admits, loop=loops.watch_roots if loops else None, task=name)
    acl_check = (AclCheck(view, zookeeper, queue.add, acl_check_period, admits=reconciler.admits,
                          loop=loops.acl_check if loops else None, task=name)
                 if acl_check_period > 0 else None)
    keys = _Keys(view, reconciler)

    def enqueue_sharing_path(obj: JSON) -> None:
        for key in keys.sharing_path(obj):
            queue.add(key)

    builder.handles(informer, FilteredHandler(view, FuncHandler(enqueue_sharing_path, reconciler.wants_update)))
    builder.watches(shared.configmaps, lambda obj: keys.referencing("ConfigMap", obj))
    builder.watches(shared.secrets, lambda obj: keys.referencing("Secret", obj))
    if shared.namespaces is not None:
        builder.watches(shared.namespaces, keys.in_namespace, update_filter=namespace_labels_changed)
    builder.handles(informer, FilteredHandler(view, watch_roots))
    if shared.namespaces is not None:
        builder.handles(shared.namespaces, FuncHandler(watch_roots.admission_changed, namespace_labels_changed))
    built = builder.complete(reconciler)
    zookeeper.add_watch_listener(keys.on_znode_changed(queue.add))
    return ZooKeeperConfigController(shared, built, reconciler, keys, acl_check=acl_check, watch_roots=watch_roots,
                                     ensemble=ensemble, pool=pool, loops=loops, undo=undo)


@dataclass(frozen=True)
class ZooKeeperConfigOptions:
    """The ZooKeeperConfig feature's own options (``zkop run``'s flags of the same names).

    Attributes:
        max_data_bytes: largest decoded data, bytes (``--max-data-bytes``).
        registry_root: where ownership records live (``--registry-root``).
        tenancy: the flags' ensemble's tenancy rules and adoption mode (``--tenancy-policy-file``); ``None``:
            every namespace may manage every path and pre-existing znodes are adopted.
        watch_namespaces: watch Namespaces even without a ``namespaceSelector`` in ``tenancy`` (with
            ZooKeeperEnsembles any ensemble's ``spec.tenancy`` may select namespaces by label, at any time).
    """

    max_data_bytes: int = DEFAULT_MAX_DATA_BYTES
    registry_root: str = "/zkop/owners"
    tenancy: TenancyPolicy | None = None
    watch_namespaces: bool = False

    def needs_namespaces(self) -> bool:
        """Whether Namespaces are watched (list/watch RBAC): for :attr:`watch_namespaces`, or a ``tenancy`` rule
        with a ``namespaceSelector`` (its cache answers the label lookups; never a GET per reconcile)."""
        return self.watch_namespaces or (self.tenancy is not None and self.tenancy.needs_namespace_labels)


def setup(context: FeatureContext, options: ZooKeeperConfigOptions) -> ZooKeeperConfigController:
    """Build the ZooKeeperConfig controller of the flags' ensemble and add its parts to ``context.manager``.

    Only the objects without ``spec.ensembleRef`` are its own (:func:`build_ensemble`); the informers it adds
    serve every ensemble (:attr:`ZooKeeperConfigController.informers`). Its resync hook is registered for the
    flags' session; ``--dry-run`` (``context.settings.dry_run``) chooses its planning-only writer.
    """
    settings = context.settings
    policy = options.tenancy
    by_ensemble = EnsembleDeclarations()
    declared = by_ensemble.of(DEFAULT_ENSEMBLE)
    parts = add_to_manager(
        context.manager, context.client, context.zookeeper, context.recorder,
        ReconcilerOptions(max_data_bytes=options.max_data_bytes, cluster_id=settings.cluster_id,
                          registry_root=options.registry_root, dry_run=settings.dry_run, reserved=settings.reserved),
        namespaces=list(settings.namespaces) if settings.namespaces else None, workers=settings.workers,
        sync_period=settings.sync_period, inactivity_timeout=settings.inactivity_timeout,
        acl_check_period=settings.acl_check_period,
        policy_for=None if policy is None else (lambda obj: policy),
        watch_namespaces=options.needs_namespaces(), declared=declared)
    context.on_new_session(context.zookeeper, parts.on_session_reconnected)
    context.built(parts.reconciler.gate)  # the flags' ensemble's gate: every kind on that ensemble passes it
    context.built(declared)  # the paths each kind declares on the flags' ensemble: the oldest of any kind wins
    context.built(by_ensemble)  # the same on every ensemble, by name (a ZooKeeperEnsemble's controller registers)
    return parts


def add_to_manager(
    manager: Manager, client: KubeClient, zookeeper: ZooKeeperAdapter, recorder: EventRecorder,
    options: ReconcilerOptions, *, namespaces: list[str] | None, workers: int, sync_period: float,
    inactivity_timeout: float, acl_check_period: float = 60.0,
    policy_for: Callable[[JSON], TenancyPolicy] | None = None, watch_namespaces: bool = False,
    declared: DeclaredPaths | None = None,
) -> ZooKeeperConfigController:
    """Build the ZooKeeperConfig controller of ``zookeeper`` and add its parts to ``manager`` (:func:`setup`'s
    work, for a caller that holds the collaborators itself).

    Args:
        manager: where informers (non-leader) and the controller (leader) go.
        client: JSON client the informers list and watch with, and the reconciler writes with.
        zookeeper: the adapter; its watch listener enqueues the objects declaring a
            fired path (:meth:`_Keys.for_znode`).
        options: reconciler settings (size limit, cluster id, registry root, dry run).
        namespaces: namespaces to watch, ``None`` for all.
        workers: concurrent reconciles.
        sync_period: seconds between resyncs of the ZooKeeperConfig informer.
        inactivity_timeout: seconds a silent watch is kept before it is reopened.
        acl_check_period: seconds between ACL checks of znodes declaring ``spec.acl``; 0 disables.
        policy_for: the tenancy policy an object is held to (its ensemble's,
            :class:`~zkop.feature.tenancy.TenancyPolicy`); ``None``: everything is admitted and adopted.
            Called on every reconcile: it must read only memory.
        watch_namespaces: watch Namespaces (list/watch RBAC) so that ``namespaceSelector`` rules see
            namespace labels, and a label change re-reconciles the namespace's objects.
        declared: the paths other kinds declare (see :func:`build_ensemble`).

    Returns:
        The parts, e.g. for :meth:`ZooKeeperConfigController.on_session_reconnected`.
    """
    # Series known up front start at 0 (Prometheus' advice), so ``increase()`` sees the first one.
    for counter in (metrics.DRIFT_CORRECTIONS, metrics.ZOOKEEPER_QUIET_RETRIES):
        counter.labels(CONTROLLER_NAME).inc(0)
    shared = build_informers(client, namespaces=namespaces, sync_period=sync_period,
                             inactivity_timeout=inactivity_timeout, watch_namespaces=watch_namespaces)
    # One pool of ``workers`` threads for the flags' ensemble and every ZooKeeperEnsemble's controller (leader-only:
    # started by the first controller attached, stopped after them).
    pool = WorkerPool(CONTROLLER_NAME, workers)
    manager.add(pool, needs_leader=True)
    # Likewise one thread for every ensemble's watch-root follower and one for every ensemble's ACL check (each
    # started by its first task, stopped after the tasks' owners).
    loops = SharedLoops.new()
    manager.add(loops.watch_roots, needs_leader=True)
    manager.add(loops.acl_check, needs_leader=True)
    parts = build_ensemble(shared, client, zookeeper, recorder, options, workers=workers,
                           acl_check_period=acl_check_period, policy_for=policy_for, pool=pool, declared=declared,
                           loops=loops)
    manager.add(_StatusCollector(ZooKeeperConfigStatusCollector(shared.informer.indexer)), needs_leader=False)
    for each in parts.informers:
        manager.add(each, needs_leader=False)
    assert parts.watch_roots is not None
    manager.add(parts.watch_roots, needs_leader=True)
    manager.add(_LearnAbsent(parts.reconciler), needs_leader=True)
    manager.add(parts.controller, needs_leader=True)
    if parts.acl_check is not None:
        manager.add(parts.acl_check, needs_leader=True)
    return parts
