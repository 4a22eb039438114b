"""Reconcile one ZooKeeperServiceImport: pre-checks, gather, decide once per Service, apply, status.

1. pure pre-checks: the spec (:func:`~.spec.parse_spec`), then the admission gate for a **read** of the root in the
   object's namespace (:meth:`zkop.feature.gate.Gate.admit`: reserved roots, the tenancy rules). A refused object
   reads and watches nothing; what it created before is collected (it owns nothing it may not read).
2. gather: the root's listing and each selected service node (:class:`~zkop.services.importer.reader.ZooKeeperReader`,
   watched), parsed by the importer's sources, held to the importer's address guard
   (:func:`~zkop.services.importer.guard.guard_service`); the collision winner per Service name
   (:func:`~zkop.services.importer.naming.winner`); the owned Services and EndpointSlices from the caches.
3. decide: the importer's :func:`~zkop.services.importer.plan.plan_import` per name, with this object's owner identity
   (:func:`~.spec.owner_id`) and namespace, and :func:`~zkop.services.importer.plan.plan_gc` for names no longer
   selected; the Service gets this object's ``ownerReference`` (:func:`~.spec.with_owner`).
4. apply through the importer's writer of that namespace (:class:`~zkop.services.importer.writer.ApiWriter`, or its
   ``DryRunWriter``: chosen once); then the status and, when the outcome changes, Events.

A Service of a wanted name that this object did not create (a team's own, the flags' importer's, another
ZooKeeperServiceImport's) is left alone: the name is reported in ``status.conflicts`` (``Conflict``) with a Warning
Event. The labelled cache does not hold a foreign Service, so a name about to be created is looked up by a GET first.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from zkop.feature.gate import Gate
from zkop.kube.client import JSON, ApiException, KubeClient, resource_path
from zkop.kube.events import EventRecorder, now_rfc3339
from zkop.runtime.cache import Indexer
from zkop.runtime.controller import Result, RetryableError
from zkop.runtime.retry import RetryBoundary
from zkop.runtime.statuspatch import patch_status
from zkop.services.importer.guard import AddressGuard, guard_service
from zkop.services.importer.kind.spec import (
    GROUP,
    PLURAL,
    VERSION,
    ImportSpec,
    Outcome,
    SpecError,
    desired_status,
    key_of_owned,
    owner_id,
    owner_reference,
    parse_spec,
    with_owner,
)
from zkop.services.importer.naming import service_name, winner
from zkop.services.importer.plan import CreateObject, ImportPlan, is_owned, plan_gc, plan_import
from zkop.services.importer.reader import ZooKeeperReader, child_path
from zkop.services.importer.reconciler import SLICE_INDEX, report_metadata
from zkop.services.importer.slices import bind_service_uid
from zkop.services.importer.sources import ImportedService, get_source
from zkop.services.importer.writer import ApiWriter
from zkop.services.reporting import ReportOnce
from zkop.zookeeper.adapter import ZooKeeperError
from zkop.zookeeper.paths import is_within

__all__ = ["CONTROLLER", "ServiceImportObjects"]

log = logging.getLogger(__name__)

CONTROLLER = "service-imports"


def keys_for_path(imports: Indexer, path: str) -> list[str]:
    """The keys of the ZooKeeperServiceImports in ``imports`` whose root is ``path`` or above it (a watch event on
    kazoo's thread: memory only; an object whose spec does not parse is left out)."""
    keys = []
    for obj in imports.list():
        try:
            spec = parse_spec(obj)
        except SpecError:
            continue
        if is_within(path, spec.root):
            meta = obj.get("metadata") or {}
            keys.append(f"{meta.get('namespace')}/{meta.get('name')}")
    return keys


class ServiceImportObjects:
    """Reconciles ZooKeeperServiceImports (keys ``namespace/name``).

    Args:
        imports: the ZooKeeperServiceImports informer's indexer.
        services: Services labelled as imported (every watched namespace).
        slices: EndpointSlices labelled as imported, with the importer's ``SLICE_INDEX``.
        reader: watched ZooKeeper reads on the flags' ensemble.
        client: reads a Service the labelled cache does not hold, patches status.
        recorder: Events.
        gate: the flags' ensemble's admission gate.
        cluster_id: ``--cluster-id``.
        writer_for: ``namespace`` → the importer's writer there (the dry-run seam, chosen once by the builder).
        guard: the address guard of this pass, from the caches.
        max_services: Service names one object may select (0: no limit).
    """

    def __init__(self, imports: Indexer, services: Indexer, slices: Indexer, reader: ZooKeeperReader,
                 client: KubeClient, recorder: EventRecorder, *, gate: Gate, cluster_id: str,
                 writer_for: Callable[[str], ApiWriter], guard: Callable[[], AddressGuard], max_services: int) -> None:
        self.imports, self.services, self.slices, self.reader = imports, services, slices, reader
        self.client, self.recorder, self.gate, self.cluster_id = client, recorder, gate, cluster_id
        self.writer_for, self.guard, self.max_services = writer_for, guard, max_services
        self.retry = RetryBoundary(ZooKeeperError)
        self._lock = threading.Lock()
        self._reported: dict[str, tuple[str, tuple[str, ...]]] = {}  # key → (reason, conflicts) last reported
        self._metadata: ReportOnce[str, tuple[str, ...]] = ReportOnce()  # namespace/Service → metadata problems

    # --- mappings (no I/O) ----------------------------------------------------------------------

    def keys_for_path(self, path: str) -> list[str]:
        """:func:`keys_for_path` over this reconciler's objects."""
        return keys_for_path(self.imports, path)

    def keys_for_owned(self, obj: JSON) -> list[str]:
        """Services and EndpointSlices informer mapping: the object whose owner annotation it carries."""
        key = key_of_owned(obj, self.cluster_id)
        return [key] if key is not None else []

    def all_keys(self, obj: JSON | None = None) -> list[str]:
        """Every object's key (the guard changed; a new session)."""
        return [f"{(o.get('metadata') or {}).get('namespace')}/{(o.get('metadata') or {}).get('name')}"
                for o in self.imports.list()]

    # --- a pass ---------------------------------------------------------------------------------

    def reconcile(self, key: str) -> Result:
        """One pass for ``key`` (the module docstring).

        Raises:
            RetryableError: ZooKeeper or the API server failed; the key is retried with backoff.
            TerminalError: the API server refused an object as invalid.
        """
        obj = self.imports.get(key)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            with self._lock:
                self._reported.pop(key, None)
            return Result()  # the garbage collector deletes what it owns
        namespace = str(obj["metadata"]["namespace"])
        owner = owner_id(self.cluster_id, str(obj["metadata"]["name"]))
        writer = self.writer_for(namespace)
        try:
            spec = parse_spec(obj)
        except SpecError as err:
            self._report(key, obj, Outcome("InvalidSpec", str(err), stalled=True))
            return Result()
        refusal = self.gate.admit(obj, spec.root, "read")
        if refusal is not None:
            self._collect(writer, namespace, owner, set())  # API only: nothing is read for it
            self._report(key, obj, Outcome(refusal.reason, refusal.message, stalled=True))
            return Result()
        with self.retry.retrying(key):
            found = self._gather(spec)
        if self.max_services and len(found) > self.max_services:
            self._collect(writer, namespace, owner, set())
            self._report(key, obj, Outcome(
                "LimitExceeded", f"{len(found)} services selected under {spec.root}, more than "
                f"--service-import-max-services={self.max_services}; nothing imported", stalled=True))
            return Result()
        imported: list[str] = []
        conflicts: list[str] = []
        planned: list[str] = []
        for name, best in sorted(found.items()):
            result = self._import(obj, writer, namespace, owner, name, best)
            if result == "conflict":
                conflicts.append(name)
            elif result == "planned":
                planned.append(name)
            elif result == "imported":
                imported.append(name)
        self._collect(writer, namespace, owner, set(found))
        if conflicts:
            outcome = Outcome("Conflict", f"Services {', '.join(conflicts)} exist and were not created by this "
                              "ZooKeeperServiceImport; they are left alone and those services not imported",
                              stalled=True, services=tuple(imported), conflicts=tuple(conflicts))
        elif planned:
            outcome = Outcome("DryRun", f"dry run, nothing written: would import {', '.join(planned)}",
                              services=tuple(imported))
        else:
            outcome = Outcome("Imported", f"{len(imported)} service(s) imported from {spec.root} ({spec.format})",
                              ready=True, services=tuple(imported))
        self._report(key, obj, outcome)
        return Result()

    def _gather(self, spec: ImportSpec) -> dict[str, ImportedService]:
        """The winning service of every selected Service name, guarded (ZooKeeper reads, watched)."""
        source = get_source(spec.format)
        listing = self.reader.list(spec.root)
        excluded = self.gate.excluded(spec.root)
        by_name: dict[str, list[str]] = {}
        for node in listing.children if listing is not None else ():
            path = child_path(spec.root, node)
            if any(is_within(root, path) for root in excluded):
                continue  # a reserved root below: never read
            source_name = source.source_name(node)
            name = service_name(source_name, spec.prefix)
            if name is None or not spec.selects(source_name):
                continue
            by_name.setdefault(name, []).append(node)
        guard = self.guard()
        found: dict[str, ImportedService] = {}
        for name, nodes in by_name.items():
            candidates = []
            for node in nodes:
                source_node = self.reader.read_service(source, node, child_path(spec.root, node))
                if source_node is None:
                    continue
                parsed = source.parse(source_node)
                if not parsed.written_by_zkop:
                    candidates.append(guard_service(parsed, guard))
            best = winner(candidates)
            if best is not None:
                found[name] = best
        return found

    def _existing(self, namespace: str, name: str) -> JSON | None:
        """The Service ``namespace/name``: from the labelled cache, else from the API server (a foreign one)."""
        cached = self.services.get(f"{namespace}/{name}")
        if cached is not None:
            return cached
        try:
            return self.client.request("GET", resource_path("", "v1", "services", namespace, name))
        except ApiException as err:
            if err.status == 404:
                return None
            raise RetryableError(f"GET Service {namespace}/{name}: {err.status} {err.reason}") from err

    def _import(self, obj: JSON, writer: ApiWriter, namespace: str, owner: str, name: str,
                best: ImportedService) -> str:
        """Plan and apply one Service name; ``imported``, ``planned`` (dry run), ``conflict`` or ``waiting``."""
        existing = self._existing(namespace, name)
        slices = self.slices.by_index(SLICE_INDEX, f"{namespace}/{name}")
        plan: ImportPlan = plan_import(best, name, namespace, owner, existing, slices)  # decide once
        if plan.service.foreign:
            writer.execute(plan.slices.actions)  # slices of ours never attach to a Service not ours
            return "conflict"
        if plan.service.terminating or (existing is None and plan.service.action is None):
            return "waiting"  # being deleted; or never had an instance, so no port to give a Service
        action = with_owner(plan.service.action, existing, owner_reference(obj))
        live = writer.execute_one(action) if action is not None else existing
        live = live or existing
        uid = str(((live or {}).get("metadata") or {}).get("uid") or "") or None
        if isinstance(action, CreateObject) and uid is not None:
            self.recorder.event(live or action.body, "Normal", "Imported",
                                f"imported from ZooKeeper {best.path} ({len(best.instances)} instance(s)) for "
                                f"ZooKeeperServiceImport {obj['metadata']['name']}")
        report_metadata(self._metadata, f"{namespace}/{name}", plan.metadata_problems, best,
                        live if uid is not None else None, self.recorder)
        actions = bind_service_uid(plan.slices.actions, uid)
        failures = writer.execute_each(actions)
        if failures:
            raise RetryableError(f"{namespace}/{name}: {len(failures)} EndpointSlice write(s) failed: "
                                 f"{'; '.join(failures)}")
        return "imported" if uid is not None else "planned"

    def _collect(self, writer: ApiWriter, namespace: str, owner: str, wanted: set[str]) -> None:
        """Delete this object's Services and EndpointSlices of names no longer wanted (the importer's ``plan_gc``, over
        this namespace's owned objects; no breaker: one object's own selection)."""
        services = [s for s in self.services.list()
                    if (s.get("metadata") or {}).get("namespace") == namespace and is_owned(s, owner)]
        slices = [s for s in self.slices.list()
                  if (s.get("metadata") or {}).get("namespace") == namespace and is_owned(s, owner)]
        if not services and not slices:
            return
        plan = plan_gc(services, slices, wanted=wanted, cluster_id=owner, max_deletes=0)
        for action in plan.actions:
            writer.execute_one(action)

    def _report(self, key: str, obj: JSON, outcome: Outcome) -> None:
        """Patch the status when it changes; a Warning Event when a refusal or conflict is new."""
        old = obj.get("status") or {}
        new = desired_status(old, outcome, int(obj["metadata"].get("generation") or 0), now_rfc3339())
        with self._lock:
            previous = self._reported.get(key)
            self._reported[key] = (outcome.reason, outcome.conflicts)
        if previous != (outcome.reason, outcome.conflicts) and (outcome.stalled or outcome.conflicts):
            self.recorder.event(obj, "Warning", outcome.reason, outcome.message)
        if all(old.get(k) == v for k, v in new.items() if k != "conditions") and _same_conditions(
                old.get("conditions") or [], new["conditions"]):
            return
        patch_status(self.client, GROUP, VERSION, PLURAL, obj, new)


def _same_conditions(old: list[JSON], new: list[JSON]) -> bool:
    view = [(c.get("type"), c.get("status"), c.get("reason"), c.get("message"), c.get("observedGeneration"))
            for c in old if isinstance(c, dict)]
    return view == [(c["type"], c["status"], c["reason"], c["message"], c["observedGeneration"]) for c in new]
