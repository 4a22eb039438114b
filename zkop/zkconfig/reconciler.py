"""Reconcile one ZooKeeperConfig: pre-check, gather the facts, :mod:`~zkop.zkconfig.decide` once, apply.

``reconcile(key)`` is level-triggered and idempotent (controller-runtime's ``Reconciler``
contract): it reads the object from the informer cache (or our own newer write of it,
:meth:`~zkop.runtime.ownwrites.OwnWrites.newest`), never from the event that woke it. Every rule
is in :mod:`zkop.zkconfig.decide`; this module reads and writes:

1. object gone from the cache → nothing to do (the finalizer already ran);
2. parse the spec (``dataFrom`` from the ConfigMap/Secret caches), ask the object's tenancy policy
   (``policy_for(obj)``, :mod:`zkop.feature.tenancy`; namespace labels from a cache) whether it is
   admitted, find the oldest admitted object declaring the path (the informer's path index) and run
   the pre-checks, which read nothing;
3. being deleted → the record owner, then (if owned) the znode afresh and its children if
   needed, :func:`~zkop.zkconfig.decide.decide_delete`, delete, release the record, the finalizer;
4. otherwise the watched reads of the ownership record and of the znode go out at once, the ACL is
   read if needed, and :func:`~zkop.zkconfig.decide.decide_sync` decides from the complete facts;
5. the decision is applied in its order: the finalizer if it plans one, then the claim and the znode
   in one ``multi`` with compare-and-set; a concurrent change gathers and decides again
   (:func:`~zkop.zookeeper.replan.with_replans`);
6. status is written only if it changed, Events for every change (:mod:`zkop.zkconfig.apiwrites`).

Every change goes through the writer chosen at construction: an
:class:`~zkop.zkconfig.apiwrites.ObjectWriter`, or with ``dry_run`` a
:class:`~zkop.zkconfig.dryrun.DryRunWriter`, which reads the same facts and makes the same
decisions but writes nothing to ZooKeeper and adds no finalizer; the changes are logged and
counted and the decision applied in its dry-run form.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

from zkop.feature.gate import Gate, ReservedRoot, reserved_roots
from zkop.feature.tenancy import ADMIT_ALL, Refusal, TenancyPolicy
from zkop.kube.client import JSON, KubeClient
from zkop.kube.events import EventRecorder
from zkop.ownership.declared import DeclaredPaths, Declarer
from zkop.ownership.oldest import creation_seconds, object_age, oldest
from zkop.ownership.registry import DEFAULT_REGISTRY_ROOT, OwnershipRegistry, OwnerStamp
from zkop.runtime.cache import Indexer, ObjectGetter, meta_namespace_key
from zkop.runtime.controller import Result, RetryableError
from zkop.runtime.ownwrites import OwnWrites
from zkop.runtime.retry import RetryBoundary
from zkop.zkconfig import decide, metrics
from zkop.zkconfig.apiwrites import ObjectWriter
from zkop.zkconfig.decide import Decision, DeleteFacts, SyncFacts
from zkop.zkconfig.dryrun import DryRunWriter
from zkop.zkconfig.objects import adopt_existing, unsynced_path
from zkop.zkconfig.refs import ref_data
from zkop.zkconfig.spec import (
    DEFAULT_MAX_DATA_BYTES,
    KIND,
    DataRef,
    DesiredZnode,
    InvalidSpec,
    RefNotFound,
    parse_data_ref,
    parse_spec,
)
from zkop.zookeeper.acls import AclId
from zkop.zookeeper.adapter import (
    ConcurrentModification,
    Observed,
    PendingRead,
    ZooKeeperAdapter,
    ZooKeeperError,
    ZooKeeperUnavailable,
)
from zkop.zookeeper.replan import with_replans

__all__ = [
    "PATH_INDEX",
    "REF_INDEX",
    "ReconcilerOptions",
    "ZooKeeperConfigReconciler",
    "index_by_path",
    "index_by_ref",
]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: Informer index: ``spec.path`` → ZooKeeperConfigs declaring it.
PATH_INDEX = "path"
#: Informer index: ``ConfigMap/<ns>/<name>`` or ``Secret/<ns>/<name>`` → ZooKeeperConfigs reading it.
REF_INDEX = "ref"


def index_by_path(obj: JSON) -> list[str]:
    """Index function for :data:`PATH_INDEX` (the raw string, valid or not)."""
    path = (obj.get("spec") or {}).get("path")
    return [path] if isinstance(path, str) else []


def index_by_ref(obj: JSON) -> list[str]:
    """Index function for :data:`REF_INDEX`."""
    data_from = (obj.get("spec") or {}).get("dataFrom")
    if data_from is None:  # most objects: no exception raised and caught per event
        return []
    try:
        ref = parse_data_ref(data_from)
    except InvalidSpec:
        return []
    return [f"{ref.kind}/{(obj.get('metadata') or {}).get('namespace')}/{ref.name}"]


@dataclass
class ReconcilerOptions:
    """Settings of the ZooKeeperConfig reconciler.

    Attributes:
        max_data_bytes: largest decoded data, bytes.
        cluster_id: this installation's id in ownership records (``--cluster-id``).
        registry_root: where ownership records live.
        failure_threshold: consecutive ZooKeeper failures of one object before its status
            shows ``ZooKeeperUnavailable`` (a blip is retried quietly).
        unavailable_grace: seconds those failures must have lasted too (see
            :func:`~zkop.zkconfig.decide.decide_failure`); the status then says so at the next retry.
        dry_run: build the reconciler with a :class:`~zkop.zkconfig.dryrun.DryRunWriter`: plan, log
            and count, write nothing to ZooKeeper and add no finalizer (``zkop run --dry-run``).
        reserved: the roots no object may write (:func:`zkop.feature.gate.reserved_roots`); empty: ``/zookeeper``
            and :attr:`registry_root`.
    """

    max_data_bytes: int = DEFAULT_MAX_DATA_BYTES
    cluster_id: str = "default"
    registry_root: str = DEFAULT_REGISTRY_ROOT
    failure_threshold: int = 3
    unavailable_grace: float = 3.0
    dry_run: bool = False
    reserved: tuple[ReservedRoot, ...] = ()


class ZooKeeperConfigReconciler:
    """Converges ZooKeeper to the ZooKeeperConfig objects in ``cache``.

    Args:
        cache: the ZooKeeperConfig informer's indexer, with :data:`PATH_INDEX` and :data:`REF_INDEX`.
        client: JSON client for finalizer and status writes.
        zookeeper: the adapter that executes plans.
        recorder: Kubernetes Events.
        options: limits and identity.
        configmaps, secrets: where ``spec.dataFrom`` ConfigMaps and Secrets are read (``get("ns/name")``;
            ``None``: refs unresolvable).
        own_writes: our own writes of the objects, shared with the controller's queue and the
            informer (:class:`~zkop.runtime.ownwrites.OwnWrites`); a fresh one if ``None``.
        policy_for: the tenancy policy an object is held to (its ensemble's); ``None``: every object
            is admitted and adopts (:data:`~zkop.feature.tenancy.ADMIT_ALL`). Called on every pass:
            it must read only memory.
        namespace_labels: a namespace's labels from a cache (``None``: unknown), for policies with a
            ``namespaceSelector``; ``None``: no namespace has labels.
    """

    def __init__(self, cache: Indexer, client: KubeClient, zookeeper: ZooKeeperAdapter,
                 recorder: EventRecorder, options: ReconcilerOptions | None = None, *,
                 configmaps: ObjectGetter | None = None, secrets: ObjectGetter | None = None,
                 own_writes: OwnWrites | None = None, policy_for: Callable[[JSON], TenancyPolicy] | None = None,
                 namespace_labels: Callable[[str], Mapping[str, str] | None] | None = None,
                 declared: DeclaredPaths | None = None) -> None:
        self.cache, self.client, self.zookeeper, self.recorder = cache, client, zookeeper, recorder
        #: The paths objects of other kinds (ZooKeeperConfigTrees) declare: the oldest declarer of any kind wins.
        self.declared = declared
        self.policy_for: Callable[[JSON], TenancyPolicy] = policy_for or (lambda obj: ADMIT_ALL)
        self.namespace_labels = namespace_labels
        self.options = options or ReconcilerOptions()
        #: Reserved roots, then the tenancy rules: what zkop may write or watch for an object.
        self.gate = Gate(self.options.reserved or reserved_roots(registry_root=self.options.registry_root),
                         self.policy_for, namespace_labels)
        self.registry = OwnershipRegistry(zookeeper, self.options.registry_root)
        self.configmaps, self.secrets = configmaps, secrets
        #: Our finalizer and status writes: :meth:`wants_update` drops the watch events that only echo
        #: them, and a reconcile reading an object the cache has not updated yet goes on with our write.
        self.own_writes = own_writes if own_writes is not None else OwnWrites()
        #: Every change is made through it: the dry-run seam, chosen once.
        self.writer = (DryRunWriter if self.options.dry_run else ObjectWriter)(
            client, recorder, self.own_writes, zookeeper, self.registry)
        #: ZooKeeper failures: each key's streak of passes that found ZooKeeper unavailable.
        self.retry = RetryBoundary(ZooKeeperError, streak_of=ZooKeeperUnavailable)

    # --- entry point -------------------------------------------------------------------------

    def reconcile(self, key: str) -> Result:
        """Reconcile the ZooKeeperConfig ``namespace/name``.

        Raises:
            RetryableError: ZooKeeper unavailable or refused, a write conflict persisted, or a
                znode with children blocks deletion; the controller requeues with backoff.
            ApiException: an API write failed (409 on a stale object included); requeued.
        """
        obj = self.own_writes.newest(key, lambda: self.cache.get(key))
        if obj is None:
            self.own_writes.forget(key)
            self.retry.passed(key)
            return Result()
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            return self._reconcile_delete(key, obj)
        spec = self._parse(obj)
        desired = spec if isinstance(spec, DesiredZnode) else None
        refusal = None if isinstance(spec, InvalidSpec) else self._refusal(obj, str(obj["spec"]["path"]))
        if refusal is not None and self._namespace_unseen(obj):
            # A namespace created with its objects (one Flux apply) may reach the Namespace cache after them:
            # not a refusal yet. Its add event enqueues its objects (``keys_in_namespace``).
            log.debug("%s: namespace not in the Namespace cache yet; waiting for it", key)
            return Result()
        decision = decide.precheck_sync(obj, spec, self._cluster_owner(desired) if refusal is None else None, refusal)
        if decision is not None:
            return self._apply(obj, self.writer.synced(key, "", decision))
        assert desired is not None
        record_path = self.registry.record_path(desired.path)
        try:
            converged = self._converge(obj, desired, record_path)
        except ZooKeeperError as err:
            return self._apply(obj, self.writer.synced(key, record_path, self._failure(key, err)), cause=err)
        if converged is None:  # gone while its finalizer was being added
            return Result()
        obj, decision = converged
        self.retry.passed(key)
        return self._apply(obj, self.writer.synced(key, record_path, decision))

    def learn_absent(self) -> int:
        """Before the workers start: learn which znodes and records of unsynced objects do not exist yet.

        The objects of :func:`~zkop.zkconfig.objects.unsynced_path` are the ones whose first
        reconcile would read a znode and a record that are probably absent;
        :meth:`ZooKeeperAdapter.learn_absent` lists their parents once instead. Best effort:
        a failure only means those reads happen one by one.

        Returns:
            How many paths were learned absent.
        """
        paths: list[str] = []
        for path in filter(None, map(unsynced_path, filter(self.admits, self.cache.list()))):
            if not self.registry.is_registry_path(path):
                paths += [path, self.registry.record_path(path)]
        if not paths:
            return 0
        try:
            absent = self.zookeeper.learn_absent(paths)
        except ZooKeeperError as err:
            log.info("could not list the parents of unsynced znodes (reading them one by one): %s", err)
            return 0
        log.info("%d of %d znodes and ownership records of unsynced objects do not exist yet",
                 absent, len(paths))
        return absent

    def wants_update(self, old: JSON, new: JSON) -> bool:
        """Update-event filter for the controller: False for an event that only echoes our own write.

        The reconcile that wrote the finalizer or status went on with the API server's
        response, so the watch event of that very write holds nothing it did not see
        (:class:`zkop.runtime.ownwrites.OwnWrites`). Any other change is delivered.
        """
        return not self.own_writes.is_echo(meta_namespace_key(new), old, new)

    # --- facts -------------------------------------------------------------------------------

    def _parse(self, obj: JSON, *, check_access: bool = True) -> DesiredZnode | InvalidSpec | RefNotFound:
        """The parsed spec, or the error that says why it cannot be parsed.

        With ``check_access`` a ``spec.acl`` that would lock zkop out (evaluated against the
        session's identities, :attr:`ZooKeeperAdapter.identities`) is an :class:`InvalidSpec`.
        """
        namespace = str((obj.get("metadata") or {}).get("namespace"))
        path = str((obj.get("spec") or {}).get("path"))

        def lookup(ref: DataRef) -> bytes | None:
            return self._lookup(namespace, ref, writes_to=path)

        def identities() -> frozenset[AclId]:
            return self.zookeeper.identities

        try:
            return parse_spec(obj.get("spec"), max_data_bytes=self.options.max_data_bytes, lookup=lookup,
                              identities=identities if check_access else None)
        except (InvalidSpec, RefNotFound) as err:
            return err

    def _lookup(self, namespace: str, ref: DataRef, *, writes_to: str | None = None) -> bytes | None:
        """The bytes of ``ref`` from the ConfigMap/Secret caches (``InvalidSpec`` for a mirror loop: ``ref_data``)."""
        cache = self.secrets if ref.secret else self.configmaps
        return ref_data(cache.get(f"{namespace}/{ref.name}") if cache is not None else None, ref,
                        writes_to=writes_to)

    def _refusal(self, obj: JSON, path: str) -> Refusal | None:
        """Why the gate does not admit ``obj`` to write ``path`` (a reserved root, its tenancy policy), or ``None``."""
        return self.gate.admit(obj, path, "write")

    def admits(self, obj: JSON) -> bool:
        """True if zkop may read ``obj``'s ``spec.path`` on its behalf: its tenancy policy admits it there.

        The watched roots, the ACL check and :meth:`learn_absent` ask this, so an object the rules refuse
        cannot make zkop watch or read a path outside its tenant's prefixes. An object whose namespace is
        not in the Namespace cache yet is not admitted until it is (its add event re-registers).
        """
        path = (obj.get("spec") or {}).get("path")
        if isinstance(path, str) and self.gate.reserved_refusal(path, "write") is not None:
            return False
        if self.policy_for(obj).rules is None:  # no tenancy: the common case reads no labels
            return True
        return isinstance(path, str) and not self._namespace_unseen(obj) and self._refusal(obj, path) is None

    def _namespace_unseen(self, obj: JSON) -> bool:
        """True if ``obj``'s policy selects namespaces by label and its namespace is not in the cache yet."""
        namespace = str((obj.get("metadata") or {}).get("namespace"))
        return (self.namespace_labels is not None and self.policy_for(obj).needs_namespace_labels
                and self.namespace_labels(namespace) is None)

    def _cluster_owner(self, desired: DesiredZnode | None) -> str | None:
        """The key of the oldest ZooKeeperConfig in the cache declaring ``desired.path`` that its tenancy
        policy admits: an object refused there cannot keep the path from an admitted one."""
        if desired is None:
            return None
        declaring = self.cache.by_index(PATH_INDEX, desired.path)
        admitted = [o for o in declaring if self._refusal(o, desired.path) is None] if len(declaring) > 1 else declaring
        owner = oldest(admitted, object_age)
        if self.declared is not None and owner is not None:
            ours = Declarer(object_age(owner)[0], KIND, meta_namespace_key(owner))
            other = self.declared.owner(desired.path)
            if other is not None and other.kind != KIND and (other.created, other.kind, other.key) < (
                    ours.created, ours.kind, ours.key):
                return other.describe()  # an older object of another kind (a ZooKeeperConfigTree) owns the path
        return meta_namespace_key(owner) if owner is not None else None

    def declarers(self, path: str) -> list[Declarer]:
        """The admitted ZooKeeperConfigs declaring ``path`` (:class:`~zkop.ownership.declared.DeclaredPaths`' source
        for this kind; memory only)."""
        found = []
        for obj in self.cache.by_index(PATH_INDEX, path):
            if self._refusal(obj, path) is None:
                created = creation_seconds(obj)
                found.append(Declarer(math.inf if created is None else created, KIND, meta_namespace_key(obj)))
        return found

    def _stamp(self, obj: JSON) -> OwnerStamp:
        meta = obj["metadata"]
        return OwnerStamp(self.options.cluster_id, str(meta.get("namespace")), str(meta["name"]), str(meta.get("uid")))

    def _stamp_exists(self, stamp: OwnerStamp) -> bool:
        return self.cache.get(f"{stamp.namespace}/{stamp.name}") is not None

    def _start_reads(self, desired: DesiredZnode) -> tuple[PendingRead, PendingRead]:
        """Start the watched reads of the ownership record and of the znode (answered from memory if known)."""
        # An absent znode is about to be created: no exists watch, a data watch after the create.
        return (self.registry.read_record_async(desired.path),
                self.zookeeper.read_async(desired.path, desired.acl, watch=True, watch_absent=False))

    # --- fetch, decide, write ZooKeeper ------------------------------------------------------

    def _with_replans(self, path: str, attempt: Callable[[int], _T], *, forget: tuple[str, ...]) -> _T:
        """:func:`~zkop.zookeeper.replan.with_replans`, forgetting ``forget`` after each concurrent change."""
        def on_conflict(n: int, err: ConcurrentModification) -> None:
            log.info("%s changed during reconcile (attempt %d): %s", path, n + 1, err)
            for stale in forget:
                self.zookeeper.forget(stale)

        return with_replans(attempt, on_conflict)

    def _gather(self, obj: JSON, desired: DesiredZnode, record_path: str,
                pending: tuple[PendingRead, PendingRead]) -> SyncFacts:
        """The facts of a live object: the record and the znode (one round trip), the ACL if needed
        (:func:`~zkop.zkconfig.decide.needs_acl`)."""
        self.zookeeper.settle(pending)
        record = pending[0].result()
        claim = decide.claim_of(record_path, self._stamp(obj), record, self._stamp_exists)
        observed = pending[1].result() if decide.needs_znode(claim) else None
        if decide.needs_acl(claim, observed):
            self.zookeeper.forget(desired.path)
            observed = self.zookeeper.read(desired.path, None, watch=True)
        adoption = self.policy_for(obj).may_adopt(adopt_existing(obj)) if claim.new and observed is not None else None
        return SyncFacts(obj, desired, record_path, record, claim, observed, adoption)

    def _converge(self, obj: JSON, desired: DesiredZnode, record_path: str) -> tuple[JSON, Decision] | None:
        """Gather, :func:`~zkop.zkconfig.decide.decide_sync`, then apply the ZooKeeper half of the decision: the
        finalizer first if it plans one (a znode never outlives its object), then the claim and the znode in one
        ``multi``. Returns the object (with the finalizer) and the decision, or ``None`` if the object went while its
        finalizer was being added.

        One transaction makes the claim and the write atomic: a record is never left
        without its znode, nor a znode written without the record. A concurrent change
        (the multi fails as a whole) gathers and decides again.
        """
        current = obj

        def attempt(n: int) -> tuple[JSON, Decision] | None:
            nonlocal current
            decision = decide.decide_sync(self._gather(current, desired, record_path, self._start_reads(desired)))
            if decision.add_finalizer:
                updated = self.writer.add_finalizer(current)
                if updated is None:
                    return None
                current, decision = updated, replace(decision, add_finalizer=False)
            # The record and the znode in one multi (nothing for a conflict). Both get a data watch
            # when created (drift, and a record changed behind zkop's back).
            self.writer.execute(decision.writes, atomic=True, require=decision.require)
            return current, decision

        return self._with_replans(desired.path, attempt, forget=(desired.path, record_path))

    def _reconcile_delete(self, key: str, obj: JSON) -> Result:
        """Decide and apply the deletion of ``obj``: pre-check, read the record owner, then the znode."""
        # No lock-out check here: whatever was written is deleted (if it is ours), whoever zkop is now.
        target = decide.deletion_target(obj, self._parse(obj, check_access=False))
        record_path = self.registry.record_path(target.path) if target is not None else ""
        decision = decide.precheck_delete(obj, target)
        if decision is None:
            assert target is not None
            try:
                owned = decide.owns_for_deletion(obj, self._cluster_owner(target), self._stamp(obj),
                                          self.registry.owner(target.path))
                refusal = self._refusal(obj, target.path) if owned else None
                decision = self._converge_delete(obj, target) if owned and refusal is None else decide.decide_delete(
                    DeleteFacts(obj, target, owned, None, refusal))
                if decision.release:
                    self.writer.release(target.path, self._stamp(obj))
            except ZooKeeperError as err:
                return self._apply(obj, self.writer.deleting(key, obj, record_path, self._failure(key, err), cause=err),
                                   cause=err)
        self.retry.passed(key)
        return self._apply(obj, self.writer.deleting(key, obj, record_path, decision))

    def _converge_delete(self, obj: JSON, target: DesiredZnode) -> Decision:
        """Read the znode afresh (and watch its children if :func:`~zkop.zkconfig.decide.needs_children`),
        decide, delete; a concurrent change reads and decides again."""
        def read_fresh() -> Observed | None:
            # Deletion depends on numChildren, which data watches do not cover: read afresh.
            self.zookeeper.forget(target.path)
            return self.zookeeper.read(target.path, target.acl, watch=True, watch_absent=False)

        def attempt(n: int) -> Decision:
            observed = read_fresh()
            if decide.needs_children(target, observed) and self.writer.children_gone(target.path):
                observed = read_fresh()  # the children went meanwhile: go on at once
            decision = decide.decide_delete(DeleteFacts(obj, target, True, observed))
            self.writer.execute(decision.writes)
            return decision

        return self._with_replans(target.path, attempt, forget=(target.path,))

    # --- apply -------------------------------------------------------------------------------

    def _apply(self, obj: JSON, decision: Decision, cause: BaseException | None = None) -> Result:
        """Apply the API-server half of ``decision`` (ZooKeeper is written by then)."""
        if decision.add_finalizer:
            updated = self.writer.add_finalizer(obj)
            if updated is None:
                return Result()
            obj = updated
        for event in decision.events:
            self.writer.event(obj, event)
        if decision.drift:
            metrics.DRIFT_CORRECTIONS.labels("zookeeperconfig").inc()
        if decision.outcome is not None:
            self.writer.report(obj, decision.outcome, wrote=decision.wrote, retrying=decision.retrying,
                               warn=decision.warn, znode_version=decision.znode_version)
        if decision.remove_finalizer:
            self.writer.remove_finalizer(obj)
        if decision.retry is not None:
            if decision.outcome is None:  # a ZooKeeper blip: retried before telling anyone
                metrics.ZOOKEEPER_QUIET_RETRIES.labels("zookeeperconfig").inc()
            raise RetryableError(decision.retry) from cause
        return Result()

    def _failure(self, key: str, err: ZooKeeperError) -> Decision:
        """What a pass that ZooKeeper failed reports and retries (:func:`~zkop.zkconfig.decide.decide_failure`)."""
        failures, failing_for = self.retry.failed(key, err)
        return decide.decide_failure(err, failures, failing_for, threshold=self.options.failure_threshold,
                                     grace=self.options.unavailable_grace)
