"""``status`` of a ZooKeeperConfig: the prototype's fields plus kstatus conditions.

Fields: ``state`` (Pending|Synced|Error|OutOfSync), ``message``, ``lastSyncedTime``,
``observedGeneration`` and ``conditions`` (``metav1.Condition``): ``Ready`` (True/False with a
CamelCase reason), ``Reconciling`` (only while a retry is queued), ``Stalled`` (only for failures
retrying cannot fix).

``lastTransitionTime`` changes only when a condition's status flips (apimachinery
``meta.SetStatusCondition``, :func:`zkop.runtime.conditions.condition`); kstatus (cli-utils
``pkg/kstatus/status``) reads Reconciling → InProgress, Stalled → Failed, Ready=True → Current.
``lastSyncedTime`` moves only when something is written, so an unchanged outcome writes no status.
"""

from __future__ import annotations

from zkop.kube.client import JSON
from zkop.runtime.conditions import condition
from zkop.zkconfig.plan import Outcome

__all__ = ["desired_status", "status_patch"]

def desired_status(old: JSON | None, outcome: Outcome, generation: int, now: str, *, wrote: bool,
                   retrying: bool = False, znode_version: int | None = None) -> JSON:
    """Return the status a ZooKeeperConfig should have after a reconcile.

    Args:
        old: the current ``status`` (may be ``None`` or schema-defaulted).
        outcome: what the reconcile achieved.
        generation: ``metadata.generation`` that was acted on.
        now: RFC 3339 timestamp for changed fields.
        wrote: ZooKeeper was changed in this reconcile (moves ``lastSyncedTime``).
        retrying: a retry is queued (sets ``Reconciling=True``).
        znode_version: the znode's data version now that it matches the spec
            (``status.znodeVersion``); ``None`` keeps the last one recorded.
    """
    old = old or {}
    old_conditions: list[JSON] = [c for c in old.get("conditions") or [] if isinstance(c, dict)]
    conditions = [
        condition(old_conditions, "Ready", "True" if outcome.ready else "False", outcome.reason,
                  outcome.message, generation, now)
    ]
    if retrying and not outcome.stalled:
        conditions.append(condition(old_conditions, "Reconciling", "True", "ProgressingWithRetry",
                                    outcome.message, generation, now))
    if outcome.stalled:
        conditions.append(condition(old_conditions, "Stalled", "True", outcome.reason, outcome.message,
                                    generation, now))
    status: JSON = {
        "state": outcome.state,
        "message": outcome.message,
        "observedGeneration": generation,
        "conditions": conditions,
    }
    if znode_version is not None:
        status["znodeVersion"] = znode_version
    elif "znodeVersion" in old:
        status["znodeVersion"] = old["znodeVersion"]
    if old.get("lastSyncedTime"):
        status["lastSyncedTime"] = old["lastSyncedTime"]
    if outcome.state in ("Synced", "OutOfSync") and (wrote or _changed(old, status)):
        status["lastSyncedTime"] = now
    return status


def _changed(old: JSON, new: JSON) -> bool:
    """True if ``old`` and ``new`` differ in anything but ``lastSyncedTime``."""
    return {k: v for k, v in old.items() if k != "lastSyncedTime"} != {
        k: v for k, v in new.items() if k != "lastSyncedTime"}


def status_patch(old: JSON | None, new: JSON) -> JSON | None:
    """A JSON merge patch (RFC 7386) body for ``/status`` turning ``old`` into ``new``, or ``None`` if equal.

    Keys present in ``old`` but not in ``new`` are set to ``null`` so they are removed. The patch
    shares its nested values with ``new`` (a copy of the top level only: neither is modified).
    """
    old = old or {}
    if old == new:
        return None
    patch: JSON = dict(new)
    for key in old:
        if key not in new:
            patch[key] = None
    return {"status": patch}
