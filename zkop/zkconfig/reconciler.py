"""Reconcile one ZooKeeperConfig: read the cache, plan, execute, report.

``reconcile(key)`` is level-triggered and idempotent (controller-runtime's
``Reconciler`` contract): it reads the object from the informer cache, never
from the event that woke it, so any number of events for a key collapse into
one pass that converges whatever changed. The order of a pass:

1. object gone from the cache → nothing to do (the finalizer already ran);
2. being deleted → :func:`plan_delete`, execute, then release the finalizer;
3. add the finalizer before ZooKeeper is touched;
4. parse the spec; an invalid one is reported (Stalled) and never retried hot;
5. read the znode, :func:`plan_sync`, execute (compare-and-set; a concurrent
   change re-reads and re-plans), then write status only if it changed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from zkop.kube.client import JSON, MERGE_PATCH, ApiException, KubeClient, resource_path
from zkop.kube.events import EventRecorder, now_rfc3339
from zkop.machinery.controller import Result
from zkop.machinery.informer import Indexer, split_key
from zkop.zkconfig.plan import Outcome, Plan, plan_delete, plan_sync
from zkop.zkconfig.spec import (
    DEFAULT_MAX_DATA_BYTES,
    FINALIZER,
    GROUP,
    PLURAL,
    VERSION,
    DesiredZnode,
    InvalidSpec,
    parse_spec,
)
from zkop.zkconfig.status import desired_status, status_patch
from zkop.zookeeper.adapter import (
    ConcurrentModification,
    ZooKeeperAdapter,
    ZooKeeperError,
    ZooKeeperNoAuth,
    ZooKeeperUnavailable,
)

__all__ = ["RetryableError", "ZooKeeperConfigReconciler"]

log = logging.getLogger(__name__)

#: Plans re-made after a concurrent change before giving up to the rate limiter.
MAX_REPLANS = 3


class RetryableError(Exception):
    """A failure already reported in status; the key goes back to the rate limiter."""

    expected = True


@dataclass
class ReconcilerOptions:
    """Settings of the ZooKeeperConfig reconciler.

    Attributes:
        max_data_bytes: largest decoded ``spec.data``, bytes.
    """

    max_data_bytes: int = DEFAULT_MAX_DATA_BYTES


class ZooKeeperConfigReconciler:
    """Converges ZooKeeper to the ZooKeeperConfig objects in ``cache``.

    Args:
        cache: the informer's indexer (read-only use).
        client: JSON client for finalizer and status writes.
        zookeeper: the adapter that executes plans.
        recorder: Kubernetes Events.
        options: limits.
    """

    def __init__(self, cache: Indexer, client: KubeClient, zookeeper: ZooKeeperAdapter,
                 recorder: EventRecorder, options: ReconcilerOptions | None = None) -> None:
        self.cache = cache
        self.client = client
        self.zookeeper = zookeeper
        self.recorder = recorder
        self.options = options or ReconcilerOptions()

    # --- entry point -------------------------------------------------------------------------

    def reconcile(self, key: str) -> Result:
        """Reconcile the ZooKeeperConfig ``namespace/name``.

        Raises:
            RetryableError: ZooKeeper unavailable or refused, or a write conflict persisted;
                status says so and the controller requeues with backoff.
            ApiException: an API write failed (409 on a stale object included); requeued.
        """
        obj = self.cache.get(key)
        if obj is None:
            return Result()
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            return self._finalize(obj)
        if FINALIZER not in _finalizers(obj):
            obj = self._set_finalizers(obj, [*_finalizers(obj), FINALIZER])
        try:
            desired = parse_spec(obj.get("spec"), max_data_bytes=self.options.max_data_bytes)
        except InvalidSpec as err:
            outcome = Outcome("Error", "InvalidSpec", f"invalid spec: {err}", False, stalled=True)
            if self._report(obj, outcome, wrote=False):
                self.recorder.event(obj, "Warning", "InvalidSpec", outcome.message)
            return Result()
        try:
            plan = self._converge(desired, plan_sync)
        except ZooKeeperError as err:
            self._report_failure(obj, err)
            raise RetryableError(str(err)) from err
        self._announce(obj, plan)
        self._report(obj, plan.outcome, wrote=plan.writes)
        return Result()

    # --- steps -------------------------------------------------------------------------------

    def _converge(self, desired: DesiredZnode, planner: Any) -> Plan:
        """Read, plan, execute; re-plan on a concurrent change up to :data:`MAX_REPLANS` times."""
        for attempt in range(MAX_REPLANS):
            observed = self.zookeeper.read(desired.path)
            plan: Plan = planner(desired, observed)
            try:
                self.zookeeper.execute(plan.actions)
                return plan
            except ConcurrentModification as err:
                log.info("%s changed during reconcile (attempt %d): %s", desired.path, attempt + 1, err)
                last = err
        raise last

    def _finalize(self, obj: JSON) -> Result:
        if FINALIZER not in _finalizers(obj):
            return Result()
        try:
            desired = parse_spec(obj.get("spec"), max_data_bytes=self.options.max_data_bytes)
        except InvalidSpec:
            # Nothing was ever written for an invalid spec: just let the object go.
            self._set_finalizers(obj, [f for f in _finalizers(obj) if f != FINALIZER])
            return Result()
        try:
            plan = self._converge(desired, plan_delete)
        except ZooKeeperError as err:
            self._report_failure(obj, err)
            raise RetryableError(str(err)) from err
        if not plan.outcome.ready:
            if self._report(obj, plan.outcome, wrote=False, retrying=True):
                self.recorder.event(obj, "Warning", plan.outcome.reason, plan.outcome.message)
            raise RetryableError(plan.outcome.message)
        self._announce(obj, plan)
        self._set_finalizers(obj, [f for f in _finalizers(obj) if f != FINALIZER])
        return Result()

    def _announce(self, obj: JSON, plan: Plan) -> None:
        if not plan.changes:
            return
        reason = {"created": "Created", "updated": "Updated", "deleted": "Deleted"}[plan.changes[0]]
        if reason == "Updated" and _was_synced_at_generation(obj):
            # The spec did not change since the last sync: someone edited the znode by hand.
            reason = "DriftCorrected"
            from zkop.machinery import metrics

            metrics.DRIFT_CORRECTIONS.labels("zookeeperconfig").inc()
        self.recorder.event(obj, "Normal", reason, plan.outcome.message)

    def _report_failure(self, obj: JSON, err: ZooKeeperError) -> None:
        if isinstance(err, ZooKeeperNoAuth):
            outcome = Outcome("Error", "NoAuth", str(err), False)
        elif isinstance(err, ZooKeeperUnavailable):
            outcome = Outcome("Error", "ZooKeeperUnavailable", str(err), False)
        else:
            outcome = Outcome("Error", "Conflict", f"znode kept changing during reconcile: {err}", False)
        if self._report(obj, outcome, wrote=False, retrying=True):
            self.recorder.event(obj, "Warning", outcome.reason, outcome.message)

    def _report(self, obj: JSON, outcome: Outcome, *, wrote: bool, retrying: bool = False) -> bool:
        """Write status if it differs from what is stored; return True if written."""
        meta = obj["metadata"]
        old = obj.get("status")
        new = desired_status(old, outcome, int(meta.get("generation") or 0), now_rfc3339(),
                             wrote=wrote, retrying=retrying)
        patch = status_patch(old, new)
        if patch is None:
            return False
        namespace, name = split_key(f"{meta.get('namespace')}/{meta['name']}")
        try:
            self.client.request(
                "PATCH", resource_path(GROUP, VERSION, PLURAL, namespace, name, "status"),
                body=patch, content_type=MERGE_PATCH,
            )
        except ApiException as err:
            if err.status == 404:
                return False  # deleted meanwhile; nothing to report on
            raise
        return True

    def _set_finalizers(self, obj: JSON, finalizers: list[str]) -> JSON:
        """Write ``metadata.finalizers`` with optimistic locking on ``resourceVersion``; return the new object."""
        meta = obj["metadata"]
        body = {"metadata": {"finalizers": finalizers or None, "resourceVersion": meta["resourceVersion"]}}
        try:
            return self.client.request(
                "PATCH", resource_path(GROUP, VERSION, PLURAL, meta["namespace"], meta["name"]),
                body=body, content_type=MERGE_PATCH,
            )
        except ApiException as err:
            if err.status == 404:
                return obj
            raise


def _finalizers(obj: JSON) -> list[str]:
    return list((obj.get("metadata") or {}).get("finalizers") or [])


def _was_synced_at_generation(obj: JSON) -> bool:
    status = obj.get("status") or {}
    return bool(
        status.get("state") == "Synced"
        and status.get("observedGeneration") == (obj.get("metadata") or {}).get("generation")
    )
