"""kstatus conditions (``metav1.Condition``), set the way apimachinery's ``meta.SetStatusCondition`` sets them.

One builder for every controller's ``status.conditions``: ``reason``, ``message`` and
``observedGeneration`` always take the new values; ``lastTransitionTime`` moves only when the
condition's ``status`` flips, so kstatus (cli-utils ``pkg/kstatus/status``) and ``kubectl wait``
see when a condition last changed, not when it was last written. As ``meta.FindStatusCondition``,
only the first condition of a type is looked at.
"""

from __future__ import annotations

from collections.abc import Sequence

from zkop.kube.client import JSON

__all__ = ["condition"]


def condition(old: Sequence[object], type_: str, status: str, reason: str, message: str, generation: int,
              now: str) -> JSON:
    """The condition ``type_`` with ``status``, ``reason``, ``message`` and ``observedGeneration`` ``generation``,
    whose ``lastTransitionTime`` is that of the first ``type_`` condition in ``old`` if that one has the same
    ``status`` and a transition time, else ``now`` (entries of ``old`` that are not objects are ignored)."""
    transition = now
    previous = next((c for c in old if isinstance(c, dict) and c.get("type") == type_), None)
    if previous is not None and previous.get("status") == status and previous.get("lastTransitionTime"):
        transition = previous["lastTransitionTime"]
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "observedGeneration": generation, "lastTransitionTime": transition}
