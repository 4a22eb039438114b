"""The ZooKeeperEnsemble controller: one :class:`~zkop.ensembles.running.EnsembleRuntime` per ensemble,
its status, and the deletion order (``zkop run --zookeeper-ensembles``).

:func:`setup` adds, besides the ZooKeeperConfig controller of the flags' ensemble that ``zkop run``
sets up anyway:

* informers (every replica): the ZooKeeperEnsembles (cluster-scoped), indexed by the Secrets they
  name, and those Secrets, each watched on its own in the one namespace zkop trusts
  (``--ensemble-secret-namespace``): no other Secret is ever read for an ensemble;
* leader-only, the ``zookeeperensemble`` controller. A pass over an ensemble: add the finalizer (none under
  ``--dry-run``: every API write goes through the :mod:`~zkop.ensembles.writer` chosen here); parse
  the spec and read its Secrets; if either changed since its runtime was made (a fingerprint of
  both, but ``tenancy`` and ``adoption``), stop that runtime and make a new one (a new session: credentials
  rotate without a restart and without rewriting anything); a change of ``tenancy`` or ``adoption`` alone is
  applied in the same session, and every object of the ensemble is looked at again; write ``status``
  (``Ready`` = a session is established and the chroot exists, the server version, the watch mode in use,
  the objects naming it). Being deleted: the finalizer stays while a ZooKeeperConfig naming it still
  holds its own finalizer (it needs the ensemble to delete its znode); then the runtime is closed and
  the finalizer removed;
* leader-only, the ``zookeeperconfig-ensemble`` reporter: a ZooKeeperConfig whose ensemble does not
  run (absent, being deleted, invalid, a Secret missing) says so in its status
  (``EnsembleNotFound``, ``EnsembleNotUsable``); one stuck being deleted is released only by hand
  (``docs/operations.md``, "An object whose ensemble is gone").
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from zkop.ensembles import metrics
from zkop.ensembles.decide import (
    Condition,
    EnsembleFacts,
    Plan,
    RunningRuntime,
    RuntimeAction,
    decide,
    desired_status,
    needs_runtime_facts,
    runtime_condition,
)
from zkop.ensembles.options import EnsembleOptions
from zkop.ensembles.running import EnsembleRuntime, Ensembles, PolicySlot
from zkop.ensembles.spec import (
    FINALIZER,
    GROUP,
    PLURAL,
    VERSION,
    EnsembleSpec,
    InvalidEnsemble,
    SecretMissing,
    connection_options,
    fingerprint,
    parse_ensemble,
)
from zkop.ensembles.writer import ApiWriter, DryRunWriter, EnsembleWriter
from zkop.feature.context import DRY_RUN, FeatureContext
from zkop.feature.ensemble_lookup import EnsembleAccess, EnsembleHolds, EnsembleLookup, EnsembleMissing
from zkop.kube.client import JSON, KubeClient
from zkop.kube.events import EventRecorder, now_rfc3339
from zkop.ownership.declared import EnsembleDeclarations
from zkop.runtime.builder import ControllerBuilder
from zkop.runtime.cache import Informer, NamedObjectInformer, ResourceRef
from zkop.runtime.conditions import condition
from zkop.runtime.controller import Controller, Result
from zkop.runtime.manager import Manager
from zkop.runtime.ownwrites import OwnWrites
from zkop.zkconfig.apiwrites import StatusWriter
from zkop.zkconfig.controller import (
    ENSEMBLE_INDEX,
    SECRETS,
    SharedInformers,
    ZooKeeperConfigController,
    build_ensemble,
)
from zkop.zkconfig.objects import DEFAULT_ENSEMBLE, ensemble_of, finalizers
from zkop.zkconfig.plan import Outcome
from zkop.zkconfig.reconciler import ReconcilerOptions
from zkop.zkconfig.spec import FINALIZER as OBJECT_FINALIZER
from zkop.zookeeper.adapter import ZooKeeperAdapter
from zkop.zookeeper.connection import ConnectionOptions

__all__ = ["CONTROLLER_NAME", "REPORTER_NAME", "ZOOKEEPERENSEMBLES", "EnsembleController", "EnsembleReconciler",
           "MissingEnsembleReporter", "add_to_manager", "setup"]

log = logging.getLogger(__name__)

CONTROLLER_NAME = "zookeeperensemble"
REPORTER_NAME = "zookeeperconfig-ensemble"
ZOOKEEPERENSEMBLES = ResourceRef(GROUP, VERSION, PLURAL)
#: Informer index: a Secret's name → the ZooKeeperEnsembles naming it.
SECRET_INDEX = "secret"


def index_by_secret(obj: JSON) -> list[str]:
    """Index function for :data:`SECRET_INDEX` (none for an invalid spec)."""
    try:
        return sorted(parse_ensemble(obj.get("spec")).secret_names)
    except InvalidEnsemble:
        return []


class EnsembleReconciler:
    """Reconciles one ZooKeeperEnsemble (the module docstring says what a pass does).

    Args:
        cache: the ZooKeeperEnsemble informer's cache.
        objects: the ZooKeeperConfig caches every ensemble shares.
        secrets: the Secrets of the trusted namespace, tracked by name.
        secret_namespace: that namespace.
        writer: every change to the API server goes through it (:class:`~zkop.ensembles.writer.ApiWriter`, or
            :class:`~zkop.ensembles.writer.DryRunWriter` under ``zkop run --dry-run``).
        ensembles: where the runtimes are registered (the lookup tenancy and adoption read).
        make_runtime: ``(name, raw spec, parsed spec, fingerprint, options, directory)`` → a runtime, not started.
        on_removed: called with an ensemble's name after its runtime stopped (its objects' status must say so).
    """

    def __init__(self, cache: Any, objects: SharedInformers, secrets: NamedObjectInformer, secret_namespace: str,
                 writer: EnsembleWriter, ensembles: Ensembles, base: ConnectionOptions,
                 make_runtime: Callable[[str, JSON, EnsembleSpec, str, ConnectionOptions, Path], EnsembleRuntime],
                 on_removed: Callable[[str], None] = lambda name: None) -> None:
        self.cache, self.objects, self.secrets = cache, objects, secrets
        self.secret_namespace, self.writer, self.ensembles, self.base = secret_namespace, writer, ensembles, base
        self.make_runtime, self.on_removed = make_runtime, on_removed
        #: Other kinds' objects still needing an ensemble (:class:`~zkop.feature.ensemble_lookup.EnsembleHolds`).
        self.holders: list[Callable[[str], list[str]]] = []
        self._versions: dict[str, tuple[str, str | None]] = {}  # name -> (fingerprint, server version)

    def _secret(self, name: str) -> JSON | None:
        return self.secrets.get(f"{self.secret_namespace}/{name}")

    def referrers(self, name: str) -> list[str]:
        """Keys of the ZooKeeperConfigs naming ensemble ``name``."""
        return self.objects.informer.indexer.index_keys(ENSEMBLE_INDEX, name)

    def needing(self, name: str) -> list[str]:
        """Keys of the ZooKeeperConfigs naming ``name`` that still hold zkop's finalizer (they need the
        ensemble to delete their znode, or to release its ownership record), then the other kinds' such objects
        (``Kind namespace/name``, :attr:`holders`)."""
        cache = self.objects.informer.indexer
        return [key for key in self.referrers(name)
                if OBJECT_FINALIZER in finalizers(cache.get(key) or {})] + [
            other for holder in list(self.holders) for other in holder(name)]

    def reconcile(self, key: str) -> Result:
        """Reconcile the ZooKeeperEnsemble ``key`` (its name): gather, :func:`~zkop.ensembles.decide.decide`
        once, apply the plan through the writer.

        Raises:
            ApiException: a finalizer or status write failed (requeued with backoff).
        """
        obj, spec, facts = self._gather(key)
        self._apply(facts, decide(facts), obj, spec)
        return Result()

    def _gather(self, key: str) -> tuple[JSON | None, EnsembleSpec | None, EnsembleFacts]:
        """The object, its parsed spec (``None``: gone or invalid) and every fact :func:`decide` needs."""
        obj = self.cache.get(key)
        if obj is None:
            return None, None, EnsembleFacts(key, None)
        spec: EnsembleSpec | None = None
        error: str | None = None
        try:
            spec = parse_ensemble(obj.get("spec"))
        except InvalidEnsemble as err:
            error = str(err)
        deleting = bool(obj["metadata"].get("deletionTimestamp"))
        facts = EnsembleFacts(
            key, obj, has_finalizer=FINALIZER in finalizers(obj), spec_error=error,
            hosts=spec.hosts if spec is not None else "",
            secret_names=spec.secret_names if spec is not None else frozenset(),
            needing=tuple(self.needing(key)) if deleting else ())
        if spec is not None and needs_runtime_facts(facts):
            current = self.ensembles.get(key)
            running = RunningRuntime(current.fingerprint, current.spec) if current is not None else None
            facts = replace(facts, fingerprint=fingerprint(obj.get("spec") or {}, self._secret, spec.secret_names),
                            running=running)
        return obj, spec, facts

    def _apply(self, facts: EnsembleFacts, plan: Plan, obj: JSON | None, spec: EnsembleSpec | None) -> None:
        """Apply ``plan`` in its order: the finalizer, the Secrets' watches, the runtime, the status."""
        name = facts.name
        if plan.finalizer == "add":
            assert obj is not None
            updated = self.writer.add_finalizer(obj)
            if updated is None:
                return  # gone meanwhile
            obj = updated
        runtime: EnsembleRuntime | None = None
        cannot_run: str | None = None
        action = plan.runtime
        if action is not None and action.kind == "close":
            self._close(name, action.reason)
        if plan.finalizer == "remove":
            assert obj is not None
            self.writer.remove_finalizer(obj)
        if plan.watch_secrets:
            self.secrets.track(f"{self.secret_namespace}/{secret}" for secret in sorted(plan.watch_secrets))
        if action is not None and action.kind != "close":
            assert obj is not None and spec is not None and facts.fingerprint is not None
            made = self._runtime(name, obj, spec, action, facts.fingerprint)
            if made is None:
                return  # the run is ending: nothing to report
            if isinstance(made, str):
                cannot_run = made
            else:
                runtime = made
        if plan.status is None:
            return
        assert obj is not None
        ready = plan.status if isinstance(plan.status, Condition) else runtime_condition(
            plan.status, cannot_run, runtime.not_ready_reason() if runtime is not None else None)
        self._report(obj, ready, runtime)

    def _runtime(self, name: str, obj: JSON, spec: EnsembleSpec, action: RuntimeAction,
                 print_: str) -> EnsembleRuntime | str | None:
        """The ensemble's runtime after ``action`` (``keep``, ``change-policy``, ``rebuild``); or why it cannot run;
        ``None`` once the runtimes have been stopped (:meth:`Ensembles.stop_all`: the run is ending)."""
        raw = obj.get("spec") or {}
        current = self.ensembles.get(name)
        if action.kind != "rebuild" and current is not None:
            if action.kind == "change-policy":  # only its tenancy or adoption: the same session
                current.change_policy(raw, spec.policy)
                self.ensembles.changed(name)
            return current
        directory = Path(tempfile.mkdtemp(prefix=f"zkop-ensemble-{name}-"))
        try:
            options = connection_options(spec, self._secret, self.base, directory)
        except (SecretMissing, InvalidEnsemble) as err:
            shutil.rmtree(directory, ignore_errors=True)
            self._close(name, f"ZooKeeperEnsemble {name} cannot be used: {err}")
            return str(err)
        if current is not None:
            log.info("ensemble %s: spec or Secrets changed; opening a new session", name)
            self._close(name, None, notify=False)
        runtime = self.make_runtime(name, raw, spec, print_, options, directory)
        if not self.ensembles.put_unless_closed(runtime):
            runtime.stop(0.0)  # never started: its session closed and its private files removed
            return None
        runtime.start()
        return runtime

    def _close(self, name: str, reason: str | None, *, notify: bool = True) -> None:
        runtime = self.ensembles.remove(name, reason)
        self._versions.pop(name, None)
        if runtime is not None:
            runtime.stop()
        if reason is not None:
            metrics.forget(name)
        if notify:
            self.on_removed(name)

    def _report(self, obj: JSON, ready: Condition, runtime: EnsembleRuntime | None) -> None:
        meta = obj["metadata"]
        name = str(meta["name"])
        old = obj.get("status") or {}
        generation = int(meta.get("generation") or 0)
        condition_ = condition(old.get("conditions") or [], "Ready", ready.ready, ready.reason, ready.message,
                               generation, now_rfc3339())
        status = desired_status(
            generation, len(self.referrers(name)), condition_,
            watch_mode=runtime.adapter.watch_mode if runtime is not None else None,
            server_version=self._server_version(runtime) if runtime is not None else None)
        metrics.ENSEMBLE_READY.labels(name).set(1 if ready.ready == "True" else 0)
        metrics.ENSEMBLE_MANAGED_OBJECTS.labels(name).set(status["managedObjects"])
        if all(old.get(k) == v for k, v in status.items()):
            return
        self.writer.patch_status(obj, status)

    def _server_version(self, runtime: EnsembleRuntime) -> str | None:
        """The server's version, asked once per session made (``srvr``)."""
        known = self._versions.get(runtime.name)
        if known is not None and known[0] == runtime.fingerprint and known[1]:
            return known[1]
        version = runtime.adapter.server_version() if runtime.ready else None
        self._versions[runtime.name] = (runtime.fingerprint, version)
        return version


#: Seconds before the reporter looks again at an object whose ensemble exists but does not run yet.
STARTING_RECHECK = 5.0


class EnsembleMembership:
    """The ZooKeeperConfig events a ZooKeeperEnsemble's reconcile depends on, as an informer event handler.

    The reconcile reads its ZooKeeperConfigs for two things only: how many name it (``managedObjects``)
    and, while it is being deleted, which still hold zkop's finalizer (:meth:`EnsembleReconciler.needing`).
    So an object's creation and deletion enqueue its ensemble; an update enqueues the ensemble it left and
    the one it joined when ``spec.ensembleRef`` changed, and its ensemble when zkop's finalizer was removed;
    every other update (data, status, labels: a cold sync's two echoes per object) is none of the ensemble's
    business (controller-runtime's ``handler.EnqueueRequestsFromMapFunc`` behind a predicate). The flags'
    ensemble has no ZooKeeperEnsemble and is never enqueued.
    """

    def __init__(self, enqueue: Callable[[str], None]) -> None:
        self._enqueue = enqueue

    def _add(self, name: str) -> None:
        if name != DEFAULT_ENSEMBLE:
            self._enqueue(name)

    def on_add(self, obj: JSON) -> None:
        self._add(ensemble_of(obj))

    def on_update(self, old: JSON, new: JSON) -> None:
        before, after = ensemble_of(old), ensemble_of(new)
        if before != after:
            self._add(before)
            self._add(after)
        elif OBJECT_FINALIZER in finalizers(old) and OBJECT_FINALIZER not in finalizers(new):
            self._add(after)

    def on_delete(self, obj: JSON) -> None:
        self._add(ensemble_of(obj))


def why_missing(name: str, ensembles: Ensembles, ensemble_cache: Any) -> EnsembleMissing:
    """Why ZooKeeperEnsemble ``name`` has no runtime: ``EnsembleNotFound`` (not in ``ensemble_cache``),
    ``EnsembleNotUsable`` (the reason :meth:`Ensembles.remove` recorded), or reason ``None`` while it exists and
    nothing is decided yet (its runtime is being made). The one rule for every kind naming an ensemble."""
    if ensemble_cache.get(name) is None:
        return EnsembleMissing("EnsembleNotFound", f"ZooKeeperEnsemble {name!r} not found")
    unusable = ensembles.unusable_reason(name)
    if unusable is None:
        return EnsembleMissing(None, f"ZooKeeperEnsemble {name!r} is starting")
    return EnsembleMissing("EnsembleNotUsable", unusable)


def running_ensembles(ensembles: Ensembles, ensemble_cache: Any) -> EnsembleLookup:
    """The :class:`~zkop.feature.ensemble_lookup.EnsembleLookup` this feature provides to the features built after it
    (the mirror): a running ensemble's adapter and its ZooKeeperConfig controller's gate (its ``spec.tenancy``),
    else :func:`why_missing`; its listeners hear of every runtime registered, replaced or removed and every
    tenancy change (:meth:`Ensembles.add_listener`)."""

    def find(name: str) -> EnsembleAccess | EnsembleMissing:
        runtime = ensembles.get(name)
        if runtime is not None:
            return EnsembleAccess(runtime.adapter, runtime.parts.reconciler.gate)
        return why_missing(name, ensembles, ensemble_cache)

    return EnsembleLookup(find, ensembles.add_listener)


class MissingEnsembleReporter:
    """Reconciler of the ZooKeeperConfigs whose ensemble does not run: their status says why
    (``EnsembleNotFound``: no such ZooKeeperEnsemble; ``EnsembleNotUsable``: being deleted, an invalid spec,
    a Secret missing), and nothing is written to any ZooKeeper. Objects of a running ensemble are left to it.
    """

    def __init__(self, objects: SharedInformers, ensembles: Ensembles, ensemble_cache: Any,
                 writer: StatusWriter) -> None:
        self.objects, self.ensembles, self.ensemble_cache, self.writer = objects, ensembles, ensemble_cache, writer

    def reconcile(self, key: str) -> Result:
        """Report on the ZooKeeperConfig ``key`` if its ensemble does not run.

        Raises:
            ApiException: the status write failed (requeued).
        """
        obj = self.objects.informer.indexer.get(key)
        if obj is None:
            return Result()
        name = ensemble_of(obj)
        if name == DEFAULT_ENSEMBLE or self.ensembles.get(name) is not None:
            return Result()
        missing = why_missing(name, self.ensembles, self.ensemble_cache)
        if missing.reason is None:
            # Not decided yet: the ensemble's controller is still opening its session (or has not reconciled it).
            # Its runtime reconciles the object once it runs; a reason it cannot run re-enqueues the object here
            # (on_removed). Looked at again meanwhile, never reported as unusable while merely starting.
            return Result(requeue_after=STARTING_RECHECK)
        message = missing.message
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            message += ("; the znode cannot be deleted until the ensemble is back (docs/operations.md, "
                        "\"An object whose ensemble is gone\")")
        outcome = Outcome("Error", "EnsembleNotUsable", message, False) if missing.reason == "EnsembleNotUsable" \
            else Outcome("Error", "EnsembleNotFound", message, False)
        self.writer.report(obj, outcome, wrote=False, warn=True)  # every Error reason is a Warning Event too
        return Result()


@dataclass
class EnsembleController:
    """What :func:`setup` built."""

    informer: Informer
    secrets: NamedObjectInformer
    controller: Controller
    reconciler: EnsembleReconciler
    reporter: Controller
    ensembles: Ensembles


class _Runtimes:
    """Leader runnable: supervises every ZooKeeperEnsemble's runtime for the Manager (a thread one needs that ended
    ends the run and gives up the Lease, as one of the flags' ensemble does) and stops them all when leadership or
    the run ends."""

    name = "zookeeperensemble-runtimes"

    def __init__(self, ensembles: Ensembles) -> None:
        self._ensembles = ensembles

    def start(self) -> None:
        """The runtimes are started by the controller; from now on it may register them again."""
        self._ensembles.reopen()

    def health_check(self) -> str | None:
        """``None``, or which runtimes stopped working and why (:meth:`Ensembles.health_check`)."""
        return self._ensembles.health_check()

    def stop(self, timeout: float, /) -> bool:
        """Stop every runtime, each draining for at most ``timeout`` (≤ 5) seconds; False if a reconcile was still
        running then (the Manager does not release the Lease)."""
        return self._ensembles.stop_all(min(timeout, 5.0))


def setup(context: FeatureContext, options: EnsembleOptions) -> EnsembleController:
    """Build the ZooKeeperEnsemble controller and the missing-ensemble reporter over the ZooKeeperConfig
    feature's informers (built before it: :meth:`~zkop.feature.context.FeatureContext.part`), and add them to
    ``context.manager``; each ensemble's runtime hooks its own session's resync. The features built after it find
    the running ensembles through the :class:`~zkop.feature.ensemble_lookup.EnsembleLookup` it provides
    (:func:`running_ensembles`)."""
    default = context.part(ZooKeeperConfigController)
    settings = context.settings
    parts = add_to_manager(context.manager, context.client, context.recorder, default, context.zookeeper,
                           default.reconciler.options, secret_namespace=options.secret_namespace,
                           workers=settings.workers, acl_check_period=settings.acl_check_period,
                           inactivity_timeout=settings.inactivity_timeout, sync_period=settings.sync_period,
                           dry_run=settings.dry_run, declared=context.part(EnsembleDeclarations))
    context.built(running_ensembles(parts.ensembles, parts.informer.indexer))
    context.built(EnsembleHolds(parts.reconciler.holders.append, parts.controller.queue.add))
    return parts


def add_to_manager(
    manager: Manager, client: KubeClient, recorder: EventRecorder, default: ZooKeeperConfigController,
    default_zookeeper: ZooKeeperAdapter, options: ReconcilerOptions, *, secret_namespace: str, workers: int,
    acl_check_period: float, inactivity_timeout: float, sync_period: float, dry_run: bool,
    declared: EnsembleDeclarations | None = None,
) -> EnsembleController:
    """Build the ZooKeeperEnsemble controller and the missing-ensemble reporter, and add them to ``manager``.

    Args:
        default: the flags' ensemble's ZooKeeperConfig controller (its informers are shared by every ensemble).
        default_zookeeper: the flags' adapter: each ensemble's options start from its options.
        options: the ZooKeeperConfig reconciler settings every ensemble uses (cluster id, registry root, ...).
        secret_namespace: the one namespace the ensembles' Secrets are read from.
        workers: each ensemble's concurrent reconciles.
        dry_run: ``zkop run --dry-run``: the ZooKeeperEnsemble controller is built with the
            :class:`~zkop.ensembles.writer.DryRunWriter` (no finalizer added; status still reported).
        declared: the paths every kind declares, per ensemble: each ensemble's ZooKeeperConfigs register in its own
            (a ZooKeeperConfigTree naming it sees them; the same path on another ensemble is another znode).
    """
    shared = SharedInformers(default.informer, default.configmaps, default.secrets, default.namespaces)
    ensembles = Ensembles()
    ensembles.put(EnsembleRuntime(DEFAULT_ENSEMBLE, None, "", default_zookeeper, default))
    informer = Informer(client, ZOOKEEPERENSEMBLES, name="zookeeperensembles", indexers={SECRET_INDEX: index_by_secret},
                        resync_period=sync_period, inactivity_timeout=inactivity_timeout)
    secrets = NamedObjectInformer(client, SECRETS, name="ensemble-secrets", inactivity_timeout=inactivity_timeout)
    # Both builders' queues exist before their controllers, for whoever enqueues first (docs/architecture.md, "Wiring").
    builder = ControllerBuilder(CONTROLLER_NAME, workers=2)
    reporting = ControllerBuilder(REPORTER_NAME, workers=1)
    queue, reporter_queue = builder.queue, reporting.queue

    def report_on(name: str) -> None:
        for key in shared.informer.indexer.index_keys(ENSEMBLE_INDEX, name):
            reporter_queue.add(key)

    def make_runtime(name: str, raw: JSON, spec: EnsembleSpec, print_: str, connection: ConnectionOptions,
                     directory: Path) -> EnsembleRuntime:
        adapter = ZooKeeperAdapter(
            connection, refuse_writes=DRY_RUN if options.dry_run else default_zookeeper.refuse_writes,
            known_max_age=default_zookeeper.known_max_age)
        policy = PolicySlot(spec.policy)
        # Its keys are reconciled by the flags' ensemble's worker pool, its watched roots and ACL check run on the
        # flags' ensemble's shared loops: no thread nor API connection of its own besides its session's.
        parts = build_ensemble(shared, client, adapter, recorder, options, ensemble=name, workers=workers,
                               acl_check_period=acl_check_period, policy_for=policy, pool=default.pool,
                               declared=declared.of(name) if declared is not None else None, loops=default.loops)
        return EnsembleRuntime(name, raw, print_, adapter, parts, policy=policy, directory=directory,
                               on_change=lambda: queue.add(name))

    ensemble_writer = (DryRunWriter if dry_run else ApiWriter)(client)  # the dry-run seam, chosen once
    reconciler = EnsembleReconciler(informer.indexer, shared, secrets, secret_namespace, ensemble_writer, ensembles,
                                    default_zookeeper.options, make_runtime, on_removed=report_on)
    controller = (builder.for_(informer)
                  .watches(secrets, lambda secret: informer.indexer.index_keys(
                      SECRET_INDEX, str((secret.get("metadata") or {}).get("name"))))
                  .handles(shared.informer, EnsembleMembership(queue.add))
                  .complete(reconciler).controller)
    writer = StatusWriter(client, recorder, OwnWrites())
    reporter = (reporting
                .watches(shared.informer, lambda obj: [] if ensemble_of(obj) == DEFAULT_ENSEMBLE or ensembles.of(obj)
                         else [f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"])
                .watches(informer, lambda ens: shared.informer.indexer.index_keys(
                    ENSEMBLE_INDEX, str((ens.get("metadata") or {}).get("name"))))
                .complete(MissingEnsembleReporter(shared, ensembles, informer.indexer, writer)).controller)
    manager.add(informer, needs_leader=False)
    manager.add(secrets, needs_leader=False)
    manager.add(_Runtimes(ensembles), needs_leader=True)
    manager.add(controller, needs_leader=True)
    manager.add(reporter, needs_leader=True)
    return EnsembleController(informer, secrets, controller, reconciler, reporter, ensembles)
