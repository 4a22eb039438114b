"""The ZooKeeperConfig controller's writes — ZooKeeper, finalizer, status, Events — and its dry-run seam.

The reconciler makes every change through the :class:`ObjectWriter` it was built with: this one
writes; :class:`~zkop.zkconfig.dryrun.DryRunWriter` (``zkop run --dry-run``) plans and records
instead, so the reconciler never branches on the dry run. ZooKeeper writes go through the
adapter, whose :attr:`~zkop.zookeeper.adapter.ZooKeeperAdapter.refuse_writes` is the safety net.

Every API write of the object goes through :class:`~zkop.runtime.ownwrites.OwnWrites`, so
its watch event (the echo) is not enqueued again, and a reconcile that reads the object
before the informer caught up with the write goes on with the write's response instead
(:meth:`OwnWrites.newest`): the same status is never written twice.

Both patches are JSON merge patches (RFC 7386); the finalizer patch carries
``metadata.resourceVersion`` (optimistic concurrency: a stale object is refused with
409 Conflict and the reconcile is retried, API conventions "Concurrency Control and
Consistency"); the status patch goes to the ``/status`` subresource.
"""

from __future__ import annotations

from collections.abc import Sequence

from zkop.kube.client import JSON, MERGE_PATCH, ApiException, KubeClient, resource_path
from zkop.kube.events import EventRecorder, now_rfc3339
from zkop.ownership.registry import OwnershipRegistry, OwnerStamp
from zkop.runtime.cache.indexer import meta_namespace_key
from zkop.runtime.ownwrites import OwnWrites
from zkop.zkconfig.decide import Decision, Event
from zkop.zkconfig.objects import finalizers
from zkop.zkconfig.plan import Outcome
from zkop.zkconfig.spec import FINALIZER, GROUP, PLURAL, VERSION
from zkop.zkconfig.status import desired_status, status_patch
from zkop.zookeeper.actions import Action, CheckVersion
from zkop.zookeeper.adapter import ZooKeeperAdapter

__all__ = ["ECHO_WAIT", "ObjectWriter", "StatusWriter"]

#: Seconds a status write waits for the echo of our finalizer write of the same pass to reach the cache
#: (:meth:`~zkop.runtime.ownwrites.OwnWrites.await_echo`); it is a few milliseconds while the watch is healthy.
ECHO_WAIT = 1.0


class StatusWriter:
    """Writes finalizers, status and Events of ZooKeeperConfig objects (no ZooKeeper: :class:`ObjectWriter`).

    Args:
        client: JSON client.
        own_writes: where the writes are announced (shared with the controller's update filter).
    """

    def __init__(self, client: KubeClient, recorder: EventRecorder, own_writes: OwnWrites) -> None:
        self.client = client
        self.recorder = recorder
        self.own_writes = own_writes

    # --- API server ------------------------------------------------------------------------------

    def add_finalizer(self, obj: JSON) -> JSON | None:
        """Add zkop's finalizer (:meth:`set_finalizers`); the updated object, or ``None`` if it is gone."""
        return self.set_finalizers(obj, [*finalizers(obj), FINALIZER])

    def remove_finalizer(self, obj: JSON) -> None:
        """Remove zkop's finalizer (:meth:`set_finalizers`)."""
        self.set_finalizers(obj, [f for f in finalizers(obj) if f != FINALIZER])

    def event(self, obj: JSON, event: Event) -> None:
        """Send ``event`` about ``obj`` (queued; the recorder deduplicates and rate-limits)."""
        self.recorder.event(obj, event.type, event.reason, event.message)

    def report(self, obj: JSON, outcome: Outcome, *, wrote: bool, retrying: bool = False, warn: bool = False,
               znode_version: int | None = None) -> bool:
        """Write the status for ``outcome`` if it differs from ``obj``'s; return True if written.

        Args:
            obj: the object as last seen (cache or our own latest write).
            outcome: what the pass achieved.
            wrote: ZooKeeper changed in this pass (moves ``lastSyncedTime``).
            retrying: a retry is queued (``Reconciling=True``).
            warn: also send a Warning Event (``outcome.reason``) if the status was written.
            znode_version: ``status.znodeVersion`` when Synced (``None`` keeps the recorded one).

        Raises:
            ApiException: the PATCH failed (404 excepted: the object is gone, nothing to report on).
        """
        meta = obj["metadata"]
        old = obj.get("status")
        new = desired_status(old, outcome, int(meta.get("generation") or 0), now_rfc3339(),
                             wrote=wrote, retrying=retrying, znode_version=znode_version)
        patch = status_patch(old, new)
        if patch is None:
            return False
        key = meta_namespace_key(obj)
        # Our finalizer write of this pass first reaches kube-apiserver's watch cache, so that the status PATCH is
        # applied once (OwnWrites.await_echo); a write whose echo is slower than ECHO_WAIT goes ahead anyway.
        self.own_writes.await_echo(key, obj, ECHO_WAIT)
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
        if warn:
            self.event(obj, Event("Warning", outcome.reason, outcome.message))
        return True

    def set_finalizers(self, obj: JSON, finalizers: list[str]) -> JSON | None:
        """Write ``metadata.finalizers`` with optimistic locking on ``resourceVersion``.

        Returns:
            The updated object, or ``None`` if it no longer exists.

        Raises:
            ApiException: the PATCH failed (409 for a stale ``obj``); 404 excepted.
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


class ObjectWriter(StatusWriter):
    """Writes ZooKeeper (plans, ownership releases), finalizers, status and Events of ZooKeeperConfig objects.

    Args:
        client: JSON client.
        own_writes: where the writes are announced (shared with the controller's update filter).
        zookeeper: the adapter that executes plans.
        registry: the ownership records.
    """

    def __init__(self, client: KubeClient, recorder: EventRecorder, own_writes: OwnWrites,
                 zookeeper: ZooKeeperAdapter, registry: OwnershipRegistry) -> None:
        super().__init__(client, recorder, own_writes)
        self.zookeeper = zookeeper
        self.registry = registry

    # --- ZooKeeper ---------------------------------------------------------------------------

    def execute(self, actions: Sequence[Action], *, atomic: bool = False, require: Sequence[CheckVersion] = ()) -> None:
        """Execute a decision's ZooKeeper writes, arming a data watch on every node created
        (:meth:`ZooKeeperAdapter.execute`, whose errors it raises)."""
        self.zookeeper.execute(actions, atomic=atomic, arm_watches=True, require=require)

    def release(self, path: str, ours: OwnerStamp) -> None:
        """Release the ownership record of ``path`` (:meth:`OwnershipRegistry.release`)."""
        self.registry.release(path, ours)

    def children_gone(self, path: str) -> bool:
        """Watch the children of ``path`` (a deletion waits for them); True if none are left meanwhile."""
        return self.zookeeper.watch_children(path) == []

    # --- the pass as applied -------------------------------------------------------------------

    def synced(self, key: str, record_path: str, decision: Decision) -> Decision:
        """What is applied to the API server after a live object's pass: ``decision`` itself."""
        return decision

    def deleting(self, key: str, obj: JSON, record_path: str, decision: Decision,
                 cause: BaseException | None = None) -> Decision:
        """What is applied to the API server after a pass over ``obj`` being deleted: ``decision`` itself
        (``cause``: the ZooKeeper error the pass failed with, if it did)."""
        return decision
