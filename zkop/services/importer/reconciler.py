"""Reconcile ZooKeeper services into Services and EndpointSlices: per-name passes, the root, the full sync.

Three kinds of key share one rate-limited queue (controller ``service-import``):

* ``import:<service name>`` — :meth:`ServiceImportReconciler.sync_service`: the ZooKeeper service
  nodes that map to this Service name (from the last root listing) are read with watches armed
  (:class:`~zkop.services.importer.reader.ZooKeeperReader`), parsed (:mod:`zkop.services.importer.sources`), the
  collision winner picked (:func:`zkop.services.importer.naming.winner`), planned against the informer
  caches (:mod:`zkop.services.importer.plan`) and written. A name with no service node left is never
  deleted from here: if zkop owns objects of that name it schedules a full sync (after
  ``gc_delay``, so a burst of deletions is judged by the circuit breaker as one).
* :data:`ROOT_KEY` — :meth:`ServiceImportReconciler.sync_root`: list the import root (re-arming its
  child watch) and enqueue every name whose set of service nodes changed.
* :data:`FULL_SYNC_KEY` — :meth:`ServiceImportReconciler.full_sync`: only once the informers have
  synced (never on a partial cache) and right after a successful listing of the root, enqueue
  every wanted name (the periodic safety net that re-reads everything) and collect owned objects
  of names no service node wants (:func:`~zkop.services.importer.plan.plan_gc`, with the delete circuit
  breaker); the first one after a start only once every wanted name had its first pass
  (:class:`~zkop.services.fullsync.FirstPass`), so its gauges count them. Repeats every
  ``full_sync_period`` seconds.

Watch events (kazoo's thread) map a path to a key with :func:`key_for_path`
and only enqueue it. Deletes are guarded three ways: only owned objects are planned; right before
each delete the name is checked against the newest root listing (a service that came back keeps
its objects); and each delete carries preconditions on uid and resourceVersion.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from zkop.kube.client import JSON
from zkop.kube.events import EventRecorder
from zkop.runtime.cache import Indexer
from zkop.runtime.controller import Result, RetryableError
from zkop.services.endpoints import SERVICE_NAME_LABEL
from zkop.services.fullsync import (
    FullSyncReconciler,
    delete_unless_wanted,
    next_full_sync,
    postpone_until_synced,
)
from zkop.services.importer import metrics
from zkop.services.importer.guard import AddressGuard, guard_service
from zkop.services.importer.naming import service_name, winner
from zkop.services.importer.options import OWNER_ANNOTATION, ImportOptions, owner_value
from zkop.services.importer.plan import (
    CreateObject,
    DeleteObject,
    GcPlan,
    is_owned,
    plan_gc,
    plan_import,
)
from zkop.services.importer.reader import ZooKeeperReader, child_path
from zkop.services.importer.slices import bind_service_uid
from zkop.services.importer.sources import ImportedService, ServiceSource, get_source, written_by_zkop
from zkop.services.importer.writer import ApiWriter, KubeWriter
from zkop.services.reporting import ReportOnce

__all__ = [
    "FULL_SYNC_KEY",
    "KEY_PREFIX",
    "ROOT_KEY",
    "SLICE_INDEX",
    "KubeWriter",
    "ServiceImportReconciler",
    "report_metadata",
    "service_key",
]

log = logging.getLogger(__name__)

#: Prefix of per-name keys; the special keys below contain ``::``, which no Service name can.
KEY_PREFIX = "import:"
ROOT_KEY = "import::root"
FULL_SYNC_KEY = "import::full-sync"
#: EndpointSlices informer index: slice → ``namespace/service`` (``slice_service_key``).
SLICE_INDEX = "service"


def service_key(name: str) -> str:
    """The queue key of Service ``name``."""
    return f"{KEY_PREFIX}{name}"


def report_metadata(memo: ReportOnce[str, tuple[str, ...]], key: str, problems: tuple[str, ...],
                    imported: ImportedService, target: JSON | None, recorder: EventRecorder) -> None:
    """One Warning ``InvalidMetadata`` Event on the imported Service ``target`` (none before it exists) when the
    metadata entries the annotation rules dropped (:attr:`~zkop.services.importer.plan.ImportPlan.metadata_problems`)
    change to a non-empty set; logged at the same time."""
    if not memo.note(key, problems) or not problems:
        return
    log.warning("service-import: metadata of %s not made annotations: %s", imported.path, "; ".join(problems))
    if target is not None:
        recorder.event(target, "Warning", "InvalidMetadata",
                       f"{len(problems)} metadata entr{'y' if len(problems) == 1 else 'ies'} of ZooKeeper service "
                       f"{imported.path} not made annotations: {'; '.join(problems[:5])}"
                       + (f"; and {len(problems) - 5} more (see the log)" if len(problems) > 5 else ""))


def key_for_path(options: ImportOptions, path: str) -> str | None:
    """The queue key a watch event on ``path`` concerns: :data:`ROOT_KEY` for the import root, the key of the
    service named by the root's child ``path`` is in or below, ``None`` outside the root (or a child no Service name
    comes from). Pure: called on kazoo's event thread before any reconciler exists."""
    root = options.root
    if path == root:
        return ROOT_KEY
    prefix = root.rstrip("/") + "/"
    if not path.startswith(prefix):
        return None
    first = path[len(prefix):].split("/", 1)[0]
    if not first or (root == "/" and first == "zookeeper"):
        return None
    name = service_name(get_source(options.format).source_name(first), options.prefix)
    return service_key(name) if name else None


class ServiceImportReconciler(FullSyncReconciler):
    """Imports the services under ``options.root`` into ``options.namespace``.

    Args:
        services: the import namespace's Services informer indexer (every Service, owned or not).
        slices: the EndpointSlices indexer (imported ones only) with :data:`SLICE_INDEX`.
        reader: watched ZooKeeper reads.
        client: writes Services and EndpointSlices.
        recorder: Kubernetes Events.
        options: importer settings.
        cluster_id: this installation's ``--cluster-id`` (the owner annotation).
        enqueue: adds a key to the controller's queue (thread-safe, non-blocking).
        synced: True once both informers have listed.
        request_full_sync: ``f(delay_seconds)`` enqueues :data:`FULL_SYNC_KEY` after a delay.
        full_sync_period: seconds between full syncs.
        event_object: what breaker Events are about (default: zkop's Pod, see
            :func:`zkop.services.fullsync.default_event_object`).
        writer: every Service and EndpointSlice write goes through it (default: an
            :class:`~zkop.services.importer.writer.ApiWriter` on ``client``;
            :class:`~zkop.services.importer.writer.DryRunWriter` under ``--dry-run``).
        guard: the address guard of this pass (:mod:`zkop.services.importer.guard`: the cluster's Service
            ranges, the API server's addresses, ``--import-allowed-cidrs``), from the caches; it may raise
            what an API read raises (the key is retried).
    """

    def __init__(
        self, services: Indexer, slices: Indexer, reader: ZooKeeperReader, client: KubeWriter,
        recorder: EventRecorder, options: ImportOptions, *, cluster_id: str, enqueue: Callable[[str], None],
        synced: Callable[[], bool] = lambda: True, request_full_sync: Callable[[float], None] = lambda delay: None,
        full_sync_period: float = 600.0, event_object: JSON | None = None, writer: ApiWriter | None = None,
        guard: Callable[[], AddressGuard],
    ) -> None:
        super().__init__(
            who="service-import", log=log, breaker_gauge=metrics.DELETE_CIRCUIT_BREAKER_OPEN,
            closed_message="service import: delete circuit breaker closed; garbage collection resumed",
            recorder=recorder, synced=synced, request_full_sync=request_full_sync,
            full_sync_period=full_sync_period, event_object=event_object)
        self.services = services
        self.slices = slices
        self.reader = reader
        self.client = client
        #: Every Service and EndpointSlice write goes through it: the dry-run seam, chosen once.
        self.writer = writer if writer is not None else ApiWriter(client, options.namespace)
        self.options = options
        self.cluster_id = cluster_id
        self.source: ServiceSource = get_source(options.format)
        self.enqueue = enqueue
        self.guard = guard
        self._lock = threading.Lock()
        self._root_lock = threading.Lock()
        self._listing: dict[str, tuple[str, ...]] = {}  # Service name → service node names
        self._listed = False
        self._unnamed: ReportOnce[str, bool] = ReportOnce()  # node names with no usable Service name
        self._collisions: ReportOnce[str, tuple[str, ...]] = ReportOnce()  # name → losing paths
        self._conflicts: ReportOnce[str, str] = ReportOnce()  # name → uid of the foreign Service
        self._skips: ReportOnce[str, dict[str, str]] = ReportOnce()  # name → instance path → reason
        self._metadata: ReportOnce[str, tuple[str, ...]] = ReportOnce()  # name → metadata problems
        self.last_gc: GcPlan | None = None

    # --- mapping (event handlers and watch callbacks: no I/O) ---------------------------------

    def name_for_node(self, node_name: str) -> str | None:
        """The Service name of the service node called ``node_name`` (a child of the root)."""
        return service_name(self.source.source_name(node_name), self.options.prefix)

    def key_for_path(self, path: str) -> str | None:
        """:func:`key_for_path` under this importer's options."""
        return key_for_path(self.options, path)

    def on_znode_event(self, path: str) -> None:
        """Watch callback (kazoo's thread): enqueue the key of ``path``, if it is the importer's."""
        key = self.key_for_path(path)
        if key is not None:
            self.enqueue(key)

    def keys_for_service(self, obj: JSON) -> list[str]:
        """Services informer mapping: owned Services and Services whose name ZooKeeper wants."""
        name = str((obj.get("metadata") or {}).get("name") or "")
        with self._lock:
            wanted = name in self._listing
        return [service_key(name)] if wanted or is_owned(obj, self.cluster_id) else []

    def keys_for_slice(self, obj: JSON) -> list[str]:
        """EndpointSlices informer mapping: the Service the slice belongs to."""
        name = ((obj.get("metadata") or {}).get("labels") or {}).get(SERVICE_NAME_LABEL)
        return [service_key(str(name))] if name else []

    def keys_for_guard(self, obj: JSON) -> list[str]:
        """ServiceCIDRs and the API server's EndpointSlices informer mapping: every known name (the guard changed)."""
        return [service_key(name) for name in self.known_names()]

    def known_names(self) -> list[str]:
        """Every Service name of the last root listing."""
        with self._lock:
            return sorted(self._listing)

    # --- entry point --------------------------------------------------------------------------

    def reconcile(self, key: str) -> Result:
        """Reconcile one queue key (see the module docstring).

        Raises:
            RetryableError: ZooKeeper unavailable or refused, or the API server refused a write
                for a reason that retrying can fix (conflict, not found, unavailable).
            TerminalError: the API server rejected an object as invalid.
        """
        with self.retry.retrying(key):
            if key == ROOT_KEY:
                self.sync_root()
                return Result()
            if key == FULL_SYNC_KEY:
                return self.full_sync()
            if key.startswith(KEY_PREFIX):
                return self.sync_service(key[len(KEY_PREFIX):])
            log.warning("service-import: ignoring unknown key %r", key)
            return Result()

    # --- the root -----------------------------------------------------------------------------

    def sync_root(self) -> dict[str, tuple[str, ...]]:
        """List the root (arming its watch), remember which node names map to which Service name,
        and enqueue every name whose nodes changed. Returns the new listing."""
        with self._root_lock:  # two listings must not land out of order (a stale one would hide a new service)
            return self._sync_root()

    def _sync_root(self) -> dict[str, tuple[str, ...]]:
        listing = self.reader.list(self.options.root)
        names = listing.children if listing is not None else ()
        if listing is None:
            log.info("service-import: %s does not exist (yet); nothing to import", self.options.root)
        fresh: dict[str, list[str]] = {}
        for node in names:
            if self.options.root == "/" and node == "zookeeper":
                continue
            name = self.name_for_node(node)
            if name is None:
                if self._unnamed.note(node, True):
                    log.warning("service-import: %s has no usable Kubernetes name; not imported",
                                child_path(self.options.root, node))
                continue
            fresh.setdefault(name, []).append(node)
        result = {name: tuple(nodes) for name, nodes in fresh.items()}
        with self._lock:
            old, self._listing, self._listed = self._listing, result, True
        for name in sorted(set(old) | set(result)):
            if old.get(name) != result.get(name):
                self.enqueue(service_key(name))
        return result

    # --- one Service name ---------------------------------------------------------------------

    def sync_service(self, name: str) -> Result:
        """Import the service(s) that map to Service ``name`` (see the module docstring).

        A pass that created the Service counts as the name's first pass (:class:`~zkop.services.fullsync.FirstPass`)
        only at the next one, which the new Service's informer event enqueues: the first full sync counts
        imported Services in the informer cache, which holds the new one by then.
        """
        if not self.synced():
            return Result(requeue_after=1.0)
        created = False
        try:
            result, created = self._sync_service(name)
            return result
        finally:
            if not created:
                self.first_pass.passed(service_key(name))

    def _sync_service(self, name: str) -> tuple[Result, bool]:
        """:meth:`sync_service` once the informers synced; the result, and whether it created the Service."""
        with self._lock:
            listed = self._listed
        if not listed:
            self.sync_root()
        with self._lock:
            nodes = self._listing.get(name, ())
        found: list[ImportedService] = []
        guard = self.guard()
        for node in nodes:
            source_node = self.reader.read_service(self.source, node, child_path(self.options.root, node))
            if source_node is None:
                continue
            imported = self.source.parse(source_node)
            if imported.written_by_zkop:
                log.debug("service-import: %s was written by zkop's service bridge; not imported", imported.path)
                continue
            found.append(guard_service(imported, guard))
        best = winner(found)
        namespace = self.options.namespace
        existing = self.services.get(f"{namespace}/{name}")
        slices = self.slices.by_index(SLICE_INDEX, f"{namespace}/{name}")
        if best is None:
            self._forget(name)
            if (existing is not None and is_owned(existing, self.cluster_id)) or any(
                    is_owned(s, self.cluster_id) for s in slices):
                self.request_full_sync(self.options.gc_delay)
            return Result(), False
        plan = plan_import(best, name, namespace, self.cluster_id, existing, slices)  # decide once
        step = plan.service
        if step.foreign:
            assert existing is not None
            self._report_conflict(name, existing, best)
            self.writer.execute(plan.slices.actions)  # zkop's slices never attach to someone else's Service
            return Result(), False
        self._conflicts.clear(name)
        live = existing
        created = False
        if step.action is not None:
            live = self.writer.execute_one(step.action) or existing
        # None for a Service a dry run only planned (the writer answers with the body it would send).
        uid = str(((live or {}).get("metadata") or {}).get("uid") or "") or None
        if isinstance(step.action, CreateObject) and uid is not None:
            created = True
            self.recorder.event(live or step.action.body, "Normal", "Imported",
                                f"imported from ZooKeeper {best.path} ({len(best.instances)} instance(s))")
        # Events go to what exists: not to a Service a dry run only planned.
        event_target = live if uid is not None else existing
        self._report_collision(name, best, found, event_target)
        self._report_skips(name, best, event_target)
        report_metadata(self._metadata, name, plan.metadata_problems, best, event_target, self.recorder)
        for foreign in plan.slices.foreign:
            log.warning("service-import: EndpointSlice %s/%s exists and is not owned by this zkop; left unchanged",
                        namespace, foreign)
        actions = bind_service_uid(plan.slices.actions, uid)  # a new Service's uid, known once it was created
        failures = self.writer.execute_each(actions)
        if failures:
            raise RetryableError(f"service-import: {len(failures)} of {len(actions)} EndpointSlice writes for "
                                 f"{namespace}/{name} failed; retrying: {'; '.join(failures)}")
        return Result(), created

    def _forget(self, name: str) -> None:
        self._collisions.clear(name)
        self._conflicts.clear(name)
        self._skips.clear(name)
        self._metadata.clear(name)

    def _report_skips(self, name: str, imported: ImportedService, live: JSON | None) -> None:
        """Log and count each skipped instance once (per path and reason, while it stays skipped), and
        tell the Service's users with one Warning ``InstanceSkipped`` Event for what is newly skipped."""
        current: dict[str, str] = {s.path: s.reason for s in imported.skipped}
        previous = self._skips.swap(name, current) or {}
        news: list[str] = []
        for skipped in imported.skipped:
            if previous.get(skipped.path) == skipped.reason:
                continue
            metrics.SKIPPED_INSTANCES.labels(skipped.reason).inc()
            level = logging.DEBUG if skipped.reason == "zkop" else logging.WARNING
            log.log(level, "service-import: %s not imported (%s): %s", skipped.path, skipped.reason, skipped.detail)
            if skipped.reason != "zkop":
                news.append(f"{skipped.path} ({skipped.reason}: {skipped.detail})")
        if news:
            self.recorder.event(
                live or self.event_object, "Warning", "InstanceSkipped",
                f"{len(news)} instance(s) of ZooKeeper service {imported.path} not imported: {'; '.join(news[:5])}"
                + (f"; and {len(news) - 5} more (see the log)" if len(news) > 5 else ""),
            )

    def _report_conflict(self, name: str, existing: JSON, imported: ImportedService) -> None:
        uid = str((existing.get("metadata") or {}).get("uid") or "")
        if self._conflicts.note(name, uid):
            self.recorder.event(
                existing, "Warning", "ImportConflict",
                f"ZooKeeper service {imported.path} maps to this Service's name, but this Service was not "
                f"created by zkop (no {OWNER_ANNOTATION}: {owner_value(self.cluster_id)}); it is left unchanged "
                "and the ZooKeeper service is not imported",
            )

    def _report_collision(self, name: str, best: ImportedService, found: Sequence[ImportedService],
                          live: JSON | None) -> None:
        losers = tuple(sorted(s.path for s in found if s is not best))
        if not losers:
            self._collisions.clear(name)
        elif self._collisions.note(name, losers):
            self.recorder.event(
                live or self.event_object, "Warning", "ImportCollision",
                f"ZooKeeper services {', '.join(losers)} also map to Service name {name}; {best.path}, "
                "created first, is the one imported",
            )

    # --- full sync ----------------------------------------------------------------------------

    def _wanted(self, listing: dict[str, tuple[str, ...]]) -> set[str]:
        """Names with at least one service node that zkop's forward bridge did not write."""
        wanted: set[str] = set()
        for name, nodes in listing.items():
            for node in nodes:
                path = child_path(self.options.root, node)
                observed = self.reader.read(path)
                if observed is not None and not written_by_zkop(path, observed.data):
                    wanted.add(name)
                    break
        return wanted

    def full_sync(self) -> Result:
        """Re-read everything and collect orphans (see the module docstring); never before the informers synced."""
        postponed = postpone_until_synced(self.synced, log, "service-import")
        if postponed is not None:
            return postponed
        listing = self.sync_root()
        wanted = self._wanted(listing)
        if not self.first_pass.waiting:  # a poll of the first full sync enqueued them already
            for name in sorted(wanted):
                self.enqueue(service_key(name))
        pending = self.first_pass.pending(service_key(name) for name in sorted(wanted))
        if pending:
            return self.first_pass.wait(pending, log, "service-import")
        plan = plan_gc(self.services.list(), self.slices.list(), wanted=wanted, cluster_id=self.cluster_id,
                       max_deletes=self.options.max_deletes)
        self.last_gc = plan
        self.breaker.judge(
            plan.breaker_open,
            f"delete circuit breaker open: {len(plan.orphaned)} imported Services in namespace "
            f"{self.options.namespace} have no service under {self.options.root} in ZooKeeper any more, more "
            f"than --import-max-deletes={self.options.max_deletes}; nothing was deleted. If this is intended, "
            "raise the limit",
            plan.orphaned,
        )

        def wanted_again(action: DeleteObject) -> str | None:
            name = action.name if action.resource == "services" else self._slice_service(action.name)
            with self._lock:
                back = name in self._listing and self._listing[name] != listing.get(name)
            return f"{name} is wanted again; {action.resource}/{action.name} not deleted" if back else None

        outcome = delete_unless_wanted(
            plan.actions, wanted_again=wanted_again, delete=self.writer.execute_one, lost_race=RetryableError,
            lost=lambda action, err: f"{action.name} not deleted: {err}", log=log, who="service-import",
        )
        metrics.SERVICES.labels("imported").set(plan.imported)
        metrics.SERVICES.labels("foreign").set(len(self._conflicts))
        metrics.SERVICES.labels("collided").set(len(self._collisions))
        metrics.SERVICES.labels("orphaned").set(len(plan.orphaned) if plan.breaker_open else 0)
        self.first_pass.done()
        return next_full_sync(self.full_sync_period, breaker_open=plan.breaker_open, complete=outcome.complete,
                              last_full_sync=metrics.LAST_FULL_SYNC)

    def _slice_service(self, slice_name: str) -> str:
        obj = self.slices.get(f"{self.options.namespace}/{slice_name}") or {}
        return str(((obj.get("metadata") or {}).get("labels") or {}).get(SERVICE_NAME_LABEL) or "")
