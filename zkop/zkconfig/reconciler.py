"""Reconcile one ZooKeeperConfig: read the cache, check ownership, plan, execute, report.

``reconcile(key)`` is level-triggered and idempotent (controller-runtime's
``Reconciler`` contract): it reads the object from the informer cache, never
from the event that woke it, so any number of events for a key collapse into
one pass that converges whatever changed. The order of a pass:

1. object gone from the cache → nothing to do (the finalizer already ran);
2. being deleted → :func:`plan_delete`, execute, release ownership, then the finalizer;
3. parse the spec (resolving ``dataFrom`` from the ConfigMap/Secret caches); an
   invalid spec is reported (Stalled) and never retried hot; the oldest object
   declaring a path owns it in the cluster;
4. start the watched reads of the registry record (:mod:`zkop.ownership.registry`)
   and of the znode, and add the finalizer while they are in flight — before
   anything is written;
5. plan the claim (the record must be ours across installations) and
   :func:`plan_sync`, and write both in one ``multi`` with compare-and-set (a
   record that is not written is checked at its version); a concurrent change
   re-reads and re-plans;
6. write status only if it changed, and an Event for every change made. The watch
   events of our own finalizer and status writes are not enqueued again
   (:class:`~zkop.runtime.ownwrites.OwnWrites`).

This module is the external-dns "source → plan → registry → provider" chain for znodes.
"""

from __future__ import annotations

import base64
import binascii
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from zkop.kube.client import JSON, MERGE_PATCH, ApiException, KubeClient, resource_path
from zkop.kube.events import EventRecorder, now_rfc3339
from zkop.ownership.registry import DEFAULT_REGISTRY_ROOT, Claim, OwnershipRegistry, OwnerStamp
from zkop.runtime.cache import Indexer, meta_namespace_key
from zkop.runtime.controller import Result, RetryableError
from zkop.runtime.ownwrites import OwnWrites
from zkop.zkconfig import metrics
from zkop.zkconfig.plan import Outcome, Plan, plan_delete, plan_sync
from zkop.zkconfig.spec import (
    DEFAULT_MAX_DATA_BYTES,
    FINALIZER,
    GROUP,
    PLURAL,
    VERSION,
    DataRef,
    DesiredZnode,
    InvalidSpec,
    RefNotFound,
    parse_data_ref,
    parse_spec,
)
from zkop.zkconfig.status import desired_status, status_patch
from zkop.zookeeper.actions import Observed
from zkop.zookeeper.adapter import (
    ConcurrentModification,
    PendingRead,
    ZooKeeperAdapter,
    ZooKeeperError,
    ZooKeeperNoAuth,
    ZooKeeperUnavailable,
)
from zkop.zookeeper.paths import validate_path

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

#: Plans re-made after a concurrent change before giving up to the rate limiter.
MAX_REPLANS = 3
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
    try:
        ref = parse_data_ref((obj.get("spec") or {}).get("dataFrom"))
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
        failure_threshold: consecutive ZooKeeper failures before status shows
            ``ZooKeeperUnavailable`` (a blip is retried quietly).
    """

    max_data_bytes: int = DEFAULT_MAX_DATA_BYTES
    cluster_id: str = "default"
    registry_root: str = DEFAULT_REGISTRY_ROOT
    failure_threshold: int = 3


class ZooKeeperConfigReconciler:
    """Converges ZooKeeper to the ZooKeeperConfig objects in ``cache``.

    Args:
        cache: the ZooKeeperConfig informer's indexer, with :data:`PATH_INDEX` and :data:`REF_INDEX`.
        client: JSON client for finalizer and status writes.
        zookeeper: the adapter that executes plans.
        recorder: Kubernetes Events.
        options: limits and identity.
        configmaps, secrets: caches of ConfigMaps and Secrets for ``spec.dataFrom`` (``None``: refs unresolvable).
    """

    def __init__(self, cache: Indexer, client: KubeClient, zookeeper: ZooKeeperAdapter,
                 recorder: EventRecorder, options: ReconcilerOptions | None = None, *,
                 configmaps: Indexer | None = None, secrets: Indexer | None = None) -> None:
        self.cache = cache
        self.client = client
        self.zookeeper = zookeeper
        self.recorder = recorder
        self.options = options or ReconcilerOptions()
        self.registry = OwnershipRegistry(zookeeper, self.options.registry_root)
        self.configmaps = configmaps
        self.secrets = secrets
        # Status we wrote, per key, and the resourceVersions that are older than that write. The informer
        # cache lags our own writes; a reconcile that still sees one of those versions must not write
        # the same status again (the idea of client-go's MutationCache, without comparing versions).
        self._written: dict[str, tuple[frozenset[str], JSON]] = {}
        self._lock = threading.Lock()
        #: Our finalizer and status writes; :meth:`wants_update` drops the watch events that only echo them.
        self.own_writes = OwnWrites()

    # --- entry point -------------------------------------------------------------------------

    def reconcile(self, key: str) -> Result:
        """Reconcile the ZooKeeperConfig ``namespace/name``.

        Raises:
            RetryableError: ZooKeeper unavailable or refused, a write conflict persisted, or a
                znode with children blocks deletion; the controller requeues with backoff.
            ApiException: an API write failed (409 on a stale object included); requeued.
        """
        obj = self.cache.get(key)
        if obj is None:
            with self._lock:
                self._written.pop(key, None)
            self.own_writes.forget(key)
            return Result()
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            return self._finalize(obj)
        try:
            desired = self._parse(obj)
        except InvalidSpec as err:
            return self._report_unsynced(key, obj, Outcome("Error", "InvalidSpec", f"invalid spec: {err}", False,
                                                           stalled=True))
        except RefNotFound as err:
            # Not stalled: the ConfigMap/Secret informer re-enqueues this object when the key appears.
            return self._report_unsynced(key, obj, Outcome("Error", "RefNotFound", str(err), False), retrying=True)
        owner = self._cluster_owner(desired.path)
        if owner is not None and meta_namespace_key(owner) != key:
            return self._report_unsynced(key, obj, self._conflict(obj, f"{meta_namespace_key(owner)} "
                                                                        "(older object in this cluster)"))
        # Both reads go out at once and are answered while the finalizer is written (if it must be):
        # the first reconcile of an object waits for one ZooKeeper round trip less, or two.
        try:
            reads: tuple[PendingRead, PendingRead] | ZooKeeperError = self._start_reads(desired)
        except ZooKeeperError as err:
            reads = err
        updated = self._ensure_finalizer(key, obj)
        if updated is None:
            return Result()
        obj = updated
        try:
            if isinstance(reads, ZooKeeperError):
                raise reads
            claim, plan, observed = self._claim_and_converge(desired, self._stamp(obj), reads)
        except ZooKeeperError as err:
            self._report_failure(obj, err)
            raise RetryableError(str(err)) from err
        if plan is None:
            assert claim.conflict is not None
            self._report_with_event(obj, self._conflict(obj, claim.conflict.describe()))
            return Result()
        if claim.new and observed is not None:
            self.recorder.event(obj, "Normal", "Adopted",
                                f"adopted existing znode {desired.path} (version {observed.version})")
        self._announce(obj, plan)
        self._report(obj, plan.outcome, wrote=plan.writes)
        return Result()

    def _ensure_finalizer(self, key: str, obj: JSON) -> JSON | None:
        """Add the finalizer if missing (before ZooKeeper is written); the object to go on with, or None if gone."""
        if FINALIZER in _finalizers(obj):
            return obj
        updated = self._set_finalizers(obj, [*_finalizers(obj), FINALIZER])
        if updated is not None:
            self._remember_stale(key, obj)
        return updated

    def _report_unsynced(self, key: str, obj: JSON, outcome: Outcome, *, retrying: bool = False) -> Result:
        """Report an outcome that writes nothing to ZooKeeper (the finalizer is added all the same)."""
        updated = self._ensure_finalizer(key, obj)
        if updated is not None:
            self._report_with_event(updated, outcome, retrying=retrying)
        return Result()

    def learn_absent(self) -> int:
        """Before the workers start: learn which znodes and records of unsynced objects do not exist yet.

        The objects not Synced at their generation (all of them on a first start, none
        on a warm restart) are the ones whose first reconcile would read a znode and
        a record that are probably absent; :meth:`ZooKeeperAdapter.learn_absent` lists
        their parents once instead. Best effort: a failure only means those reads
        happen one by one.

        Returns:
            How many paths were learned absent.
        """
        paths: list[str] = []
        for obj in self.cache.list():
            if (obj.get("metadata") or {}).get("deletionTimestamp") or _was_synced_at_generation(obj):
                continue
            path = (obj.get("spec") or {}).get("path")
            try:
                valid = validate_path(path) if isinstance(path, str) else None
            except ValueError:
                valid = None
            if valid is not None and not self.registry.is_registry_path(valid):
                paths += [valid, self.registry.record_path(valid)]
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

    # --- parsing and ownership ---------------------------------------------------------------

    def _parse(self, obj: JSON) -> DesiredZnode:
        namespace = str((obj.get("metadata") or {}).get("namespace"))

        def lookup(ref: DataRef) -> bytes | None:
            return self._lookup(namespace, ref)

        return parse_spec(obj.get("spec"), max_data_bytes=self.options.max_data_bytes, lookup=lookup)

    def _lookup(self, namespace: str, ref: DataRef) -> bytes | None:
        cache = self.secrets if ref.secret else self.configmaps
        if cache is None:
            return None
        source = cache.get(f"{namespace}/{ref.name}")
        if source is None:
            return None
        if ref.kind == "ConfigMap":
            text = (source.get("data") or {}).get(ref.key)
            if isinstance(text, str):
                return text.encode("utf-8")
            encoded = (source.get("binaryData") or {}).get(ref.key)
        else:
            encoded = (source.get("data") or {}).get(ref.key)
        if not isinstance(encoded, str):
            return None
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            return None

    def _cluster_owner(self, path: str) -> JSON | None:
        """The oldest ZooKeeperConfig in the cache declaring ``path`` (creationTimestamp, then namespace/name)."""
        candidates = self.cache.by_index(PATH_INDEX, path)
        if not candidates:
            return None
        return min(candidates, key=lambda o: (str(o["metadata"].get("creationTimestamp", "")), meta_namespace_key(o)))

    def _stamp(self, obj: JSON) -> OwnerStamp:
        meta = obj["metadata"]
        return OwnerStamp(self.options.cluster_id, str(meta.get("namespace")), str(meta["name"]), str(meta.get("uid")))

    def _stamp_exists(self, stamp: OwnerStamp) -> bool:
        return self.cache.get(f"{stamp.namespace}/{stamp.name}") is not None

    @staticmethod
    def _conflict(obj: JSON, owner: str) -> Outcome:
        path = (obj.get("spec") or {}).get("path")
        message = f"path {path} is owned by {owner}; this object writes nothing"
        return Outcome("Error", "PathConflict", message, False, stalled=True)

    # --- steps -------------------------------------------------------------------------------

    def _start_reads(self, desired: DesiredZnode) -> tuple[PendingRead, PendingRead]:
        """Start the watched reads of the ownership record and of the znode (answered from memory if known)."""
        # An absent znode is about to be created: no exists watch, a data watch after the create.
        return (self.registry.read_record_async(desired.path),
                self.zookeeper.read_async(desired.path, desired.acl, watch=True, watch_absent=False))

    def _with_replans(self, path: str, attempt: Callable[[int], _T], *, forget: tuple[str, ...]) -> _T:
        """Run ``attempt(n)``; after a concurrent change forget ``forget`` and try again, up to
        :data:`MAX_REPLANS` times in all.

        Raises:
            ConcurrentModification: the last attempt's, when every attempt met a concurrent change.
        """
        last: ConcurrentModification | None = None
        for n in range(MAX_REPLANS):
            try:
                return attempt(n)
            except ConcurrentModification as err:
                log.info("%s changed during reconcile (attempt %d): %s", path, n + 1, err)
                for stale in forget:
                    self.zookeeper.forget(stale)
                last = err
        assert last is not None
        raise last

    def _claim_and_converge(self, desired: DesiredZnode, stamp: OwnerStamp, reads: tuple[PendingRead, PendingRead]
                            ) -> tuple[Claim, Plan | None, Observed | None]:
        """Plan the ownership record and the znode from ``reads``; write both in one ``multi``.

        One transaction makes the claim and the write atomic: a record is never left
        without its znode, nor a znode written without the record. A concurrent change
        (the multi fails as a whole) re-reads both and re-plans, up to :data:`MAX_REPLANS` times.

        Returns:
            ``(claim, plan, observed)``; ``plan`` is ``None`` when the claim is a conflict.
        """
        def attempt(n: int) -> tuple[Claim, Plan | None, Observed | None]:
            pending = reads if n == 0 else self._start_reads(desired)
            self.zookeeper.settle(pending)
            record = pending[0].result()
            claim = self.registry.plan(desired.path, stamp, record, self._stamp_exists)
            if claim.conflict is not None:
                return claim, None, None
            observed = pending[1].result()
            if claim.new and observed is not None and observed.acl is None:
                # First claim (adoption of a legacy znode): read the ACL too; a node created
                # with another ACL shows no ACL version change, so it would otherwise look in sync.
                self.zookeeper.forget(desired.path)
                observed = self.zookeeper.read(desired.path, None, watch=True)
            plan = plan_sync(desired, observed)
            # The record and the znode in one multi; a record that is not written is checked instead.
            # Both get a data watch when created (drift, and a record changed behind zkop's back).
            self.zookeeper.execute([*claim.actions, *plan.actions], atomic=True, arm_watches=True,
                                   require=self.registry.require(desired.path, claim, record))
            return claim, plan, observed

        return self._with_replans(desired.path, attempt,
                                  forget=(desired.path, self.registry.record_path(desired.path)))

    def _converge(self, desired: DesiredZnode, planner: Callable[[DesiredZnode, Observed | None], Plan]
                  ) -> tuple[Plan, Observed | None]:
        """Read (watched), plan, execute; re-plan on a concurrent change up to :data:`MAX_REPLANS` times."""
        def attempt(n: int) -> tuple[Plan, Observed | None]:
            observed = self.zookeeper.read(desired.path, desired.acl, watch=True, watch_absent=False)
            plan = planner(desired, observed)
            self.zookeeper.execute(plan.actions, arm_watches=True)
            return plan, observed

        return self._with_replans(desired.path, attempt, forget=(desired.path,))

    def _finalize(self, obj: JSON) -> Result:
        if FINALIZER not in _finalizers(obj):
            return Result()
        try:
            desired = self._parse(obj)
        except InvalidSpec:
            # Nothing was ever written for an invalid spec: just let the object go.
            self._set_finalizers(obj, [f for f in _finalizers(obj) if f != FINALIZER])
            return Result()
        except RefNotFound as err:
            # The bytes do not matter for deletion.
            desired = DesiredZnode(path=obj["spec"]["path"], data=b"", source=err.ref,
                                   deletion_policy=obj["spec"].get("deletionPolicy", "Delete"))
        key = meta_namespace_key(obj)
        owner = self._cluster_owner(desired.path)
        try:
            stamp = self._stamp(obj)
            record_owner = self.registry.owner(desired.path)
            ours = record_owner is not None and record_owner.same_object(stamp)
            if (owner is None or meta_namespace_key(owner) == key) and ours:
                # Deletion depends on numChildren, which data watches do not cover: read afresh.
                self.zookeeper.forget(desired.path)
                plan, _ = self._converge(desired, plan_delete)
                # Wake up when the children go (a namespace deleting a whole tree converges leaves
                # first), not only when the backoff expires; if they went meanwhile, go on at once.
                if plan.outcome.reason == "HasChildren" and self.zookeeper.watch_children(desired.path) == []:
                    self.zookeeper.forget(desired.path)
                    plan, _ = self._converge(desired, plan_delete)
                if not plan.outcome.ready:
                    self._report_with_event(obj, plan.outcome, retrying=True)
                    raise RetryableError(plan.outcome.message)
                self.registry.release(desired.path, stamp)
                self._announce(obj, plan)
        except ZooKeeperError as err:
            self._report_failure(obj, err)
            raise RetryableError(str(err)) from err
        self._set_finalizers(obj, [f for f in _finalizers(obj) if f != FINALIZER])
        return Result()

    def _announce(self, obj: JSON, plan: Plan) -> None:
        if not plan.changes:
            return
        reason = {"created": "Created", "updated": "Updated", "deleted": "Deleted"}[plan.changes[0]]
        if reason in ("Updated", "Created") and _was_synced_at_generation(obj):
            # The spec did not change since the last sync: someone edited or deleted the znode by hand.
            reason = "DriftCorrected"
            metrics.DRIFT_CORRECTIONS.labels("zookeeperconfig").inc()
        self.recorder.event(obj, "Normal", reason, plan.note or plan.outcome.message)

    def _report_failure(self, obj: JSON, err: ZooKeeperError) -> None:
        if isinstance(err, ZooKeeperNoAuth):
            outcome = Outcome("Error", "NoAuth", str(err), False)
        elif isinstance(err, ZooKeeperUnavailable):
            if self.zookeeper.consecutive_failures < self.options.failure_threshold:
                return  # a blip: retry quietly before telling anyone
            outcome = Outcome("Error", "ZooKeeperUnavailable", str(err), False)
        else:
            outcome = Outcome("Error", "Conflict", f"znode kept changing during reconcile: {err}", False)
        self._report_with_event(obj, outcome, retrying=True)

    def _report_with_event(self, obj: JSON, outcome: Outcome, *, retrying: bool = False) -> None:
        if self._report(obj, outcome, wrote=False, retrying=retrying):
            self.recorder.event(obj, "Warning", outcome.reason, outcome.message)

    def _remember_stale(self, key: str, obj: JSON) -> None:
        """Record that ``obj``'s resourceVersion is older than a write this reconciler just made."""
        rv = str(obj["metadata"].get("resourceVersion"))
        with self._lock:
            stale, written = self._written.get(key, (frozenset(), {}))
            self._written[key] = (stale | {rv}, written)

    def _report(self, obj: JSON, outcome: Outcome, *, wrote: bool, retrying: bool = False) -> bool:
        """Write status if it differs from what is stored; return True if written."""
        meta = obj["metadata"]
        key = f"{meta.get('namespace')}/{meta['name']}"
        old = obj.get("status")
        new = desired_status(old, outcome, int(meta.get("generation") or 0), now_rfc3339(),
                             wrote=wrote, retrying=retrying)
        patch = status_patch(old, new)
        if patch is None:
            return False
        with self._lock:
            stale, written = self._written.get(key, (frozenset(), {}))
        if str(meta.get("resourceVersion")) in stale and _same_outcome(written, new):
            return False  # the cache has not caught up with the identical status we already wrote
        try:
            with self.own_writes.writing(key, obj) as respond:
                respond(self.client.request(
                    "PATCH", resource_path(GROUP, VERSION, PLURAL, meta["namespace"], meta["name"], "status"),
                    body=patch, content_type=MERGE_PATCH,
                ))
        except ApiException as err:
            if err.status == 404:
                return False  # deleted meanwhile; nothing to report on
            raise
        with self._lock:
            self._written[key] = (stale | {str(meta.get("resourceVersion"))}, new)
        return True

    def _set_finalizers(self, obj: JSON, finalizers: list[str]) -> JSON | None:
        """Write ``metadata.finalizers`` with optimistic locking on ``resourceVersion``.

        Returns:
            The updated object, or ``None`` if it no longer exists.
        """
        meta = obj["metadata"]
        body = {"metadata": {"finalizers": finalizers or None, "resourceVersion": meta["resourceVersion"]}}
        try:
            with self.own_writes.writing(meta_namespace_key(obj), obj) as respond:
                updated: JSON = self.client.request(
                    "PATCH", resource_path(GROUP, VERSION, PLURAL, meta["namespace"], meta["name"]),
                    body=body, content_type=MERGE_PATCH,
                )
                respond(updated)
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        return updated


def _same_outcome(a: JSON, b: JSON) -> bool:
    """Statuses equal but for ``lastSyncedTime``."""
    def strip(status: JSON) -> JSON:
        return {k: v for k, v in status.items() if k != "lastSyncedTime"}

    return strip(a) == strip(b)


def _finalizers(obj: JSON) -> list[str]:
    return list((obj.get("metadata") or {}).get("finalizers") or [])


def _was_synced_at_generation(obj: JSON) -> bool:
    status: dict[str, Any] = obj.get("status") or {}
    return bool(
        status.get("state") == "Synced"
        and status.get("observedGeneration") == (obj.get("metadata") or {}).get("generation")
    )
