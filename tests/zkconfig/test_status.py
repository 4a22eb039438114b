"""Status computation: conditions, transition times, and no write for an unchanged outcome."""

from __future__ import annotations

from zkop.zkconfig.plan import Outcome
from zkop.zkconfig.status import desired_status, status_patch

SYNCED = Outcome("Synced", "Synced", "znode /a matches the spec", True)
DOWN = Outcome("Error", "ZooKeeperUnavailable", "no session", False)
INVALID = Outcome("Error", "InvalidSpec", "bad path", False, stalled=True)


def conditions(status: dict[str, object]) -> dict[str, dict[str, object]]:
    return {c["type"]: c for c in status["conditions"]}  # type: ignore[attr-defined]


def test_fresh_object_gets_ready_and_last_synced_time() -> None:
    status = desired_status({"state": "Pending", "observedGeneration": -1}, SYNCED, 1, "T1", wrote=True)
    assert status["state"] == "Synced"
    assert status["observedGeneration"] == 1
    assert status["lastSyncedTime"] == "T1"
    assert conditions(status)["Ready"]["status"] == "True"
    assert set(conditions(status)) == {"Ready"}


def test_unchanged_outcome_writes_nothing() -> None:
    first = desired_status(None, SYNCED, 1, "T1", wrote=True)
    again = desired_status(first, SYNCED, 1, "T2", wrote=False)
    assert again == first
    assert status_patch(first, again) is None


def test_transition_time_moves_only_when_status_flips() -> None:
    first = desired_status(None, SYNCED, 1, "T1", wrote=True)
    second = desired_status(first, Outcome("Synced", "Updated", "updated", True), 2, "T2", wrote=True)
    assert conditions(second)["Ready"]["lastTransitionTime"] == "T1"
    assert second["lastSyncedTime"] == "T2"
    third = desired_status(second, DOWN, 2, "T3", wrote=False, retrying=True)
    assert conditions(third)["Ready"]["lastTransitionTime"] == "T3"
    assert conditions(third)["Reconciling"]["status"] == "True"
    assert third["lastSyncedTime"] == "T2"


def test_stalled_only_for_unfixable_errors() -> None:
    status = desired_status(None, INVALID, 1, "T1", wrote=False)
    assert conditions(status)["Stalled"]["status"] == "True"
    assert "Reconciling" not in conditions(status)
    recovered = desired_status(status, SYNCED, 2, "T2", wrote=True)
    assert set(conditions(recovered)) == {"Ready"}
    patch = status_patch(status, recovered)
    assert patch is not None and patch["status"]["conditions"] == recovered["conditions"]
