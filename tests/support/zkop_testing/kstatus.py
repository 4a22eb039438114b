"""kstatus's ``Compute`` for custom resources, to check what Flux's ``wait: true`` would conclude.

A transcription of kubernetes-sigs/cli-utils ``pkg/kstatus/status`` (``generic.go``,
``status.go``) for resources without built-in rules: Terminating, then
generation vs ``observedGeneration``, then ``Reconciling``/``Stalled``, then
``Ready``, else Current.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["compute"]

Status = Literal["InProgress", "Failed", "Current", "Terminating"]


def compute(obj: dict[str, Any]) -> Status:
    """The kstatus status of a custom resource (dict as returned by the API)."""
    meta = obj.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return "Terminating"
    status = obj.get("status") or {}
    generation = meta.get("generation")
    observed = status.get("observedGeneration")
    if generation is not None and observed is not None and generation != observed:
        return "InProgress"
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    if conditions.get("Reconciling") == "True":
        return "InProgress"
    if conditions.get("Stalled") == "True":
        return "Failed"
    if "Ready" in conditions:
        return "Current" if conditions["Ready"] == "True" else "InProgress"
    return "Current"
