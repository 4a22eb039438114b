"""The ZooKeeperConfig controller's writes to the API server: finalizer, status, Events.

Every write of the object goes through :class:`~zkop.runtime.ownwrites.OwnWrites`, so
its watch event (the echo) is not enqueued again, and a reconcile that reads the object
before the informer caught up with the write goes on with the write's response instead
(:meth:`OwnWrites.newest`): the same status is never written twice.

Both patches are JSON merge patches (RFC 7386); the finalizer patch carries
``metadata.resourceVersion`` (optimistic concurrency: a stale object is refused with
409 Conflict and the reconcile is retried, API conventions "Concurrency Control and
Consistency"); the status patch goes to the ``/status`` subresource.
"""

from __future__ import annotations

from zkop.kube.client import JSON, MERGE_PATCH, ApiException, KubeClient, resource_path
from zkop.kube.events import EventRecorder, now_rfc3339
from zkop.runtime.cache.indexer import meta_namespace_key
from zkop.runtime.ownwrites import OwnWrites
from zkop.zkconfig.decide import Event
from zkop.zkconfig.plan import Outcome
from zkop.zkconfig.spec import GROUP, PLURAL, VERSION
from zkop.zkconfig.status import desired_status, status_patch

__all__ = ["ObjectWriter"]


class ObjectWriter:
    """Writes finalizers, status and Events of ZooKeeperConfig objects.

    Args:
        client: JSON client.
        own_writes: where the writes are announced (shared with the controller's update filter).
    """

    def __init__(self, client: KubeClient, recorder: EventRecorder, own_writes: OwnWrites) -> None:
        self.client = client
        self.recorder = recorder
        self.own_writes = own_writes

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
        try:
            with self.own_writes.writing(meta_namespace_key(obj), obj) as respond:
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
