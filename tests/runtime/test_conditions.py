"""The one condition builder, rule by rule (apimachinery ``meta.SetStatusCondition``)."""

from __future__ import annotations

import pytest

from zkop.runtime.conditions import condition

NOW = "2026-01-02T00:00:00Z"
EARLIER = "2025-12-31T00:00:00Z"
OLDEST = "2025-01-01T00:00:00Z"


def ready(status: str, transition: str | None = EARLIER, **fields: object) -> dict[str, object]:
    """An existing condition as the API server holds it."""
    found: dict[str, object] = {"type": "Ready", "status": status, "reason": "Before", "message": "before",
                                "observedGeneration": 1, **fields}
    if transition is not None:
        found["lastTransitionTime"] = transition
    return found


# rule (source), existing conditions → the new condition's lastTransitionTime
TRANSITIONS: list[tuple[str, list[object], str]] = [
    ("no condition of the type yet → now (SetStatusCondition: a new condition)", [], NOW),
    ("only conditions of other types → now",
     [{"type": "Stalled", "status": "True", "lastTransitionTime": EARLIER}], NOW),
    ("same status → the existing transition time is kept", [ready("True")], EARLIER),
    ("status flipped → now", [ready("False")], NOW),
    ("same status but no transition time recorded → now (the schema requires one)", [ready("True", None)], NOW),
    ("same status, empty transition time → now", [ready("True", "")], NOW),
    ("several of the type: only the first is looked at (FindStatusCondition), its status flipped → now",
     [ready("False"), ready("True", OLDEST)], NOW),
    ("several of the type: only the first is looked at, same status → its transition time",
     [ready("True"), ready("True", OLDEST)], EARLIER),
    ("an entry that is not an object is ignored", ["garbage", None, ready("True")], EARLIER),
]


@pytest.mark.parametrize(("rule", "old", "transition"), TRANSITIONS, ids=[row[0] for row in TRANSITIONS])
def test_last_transition_time(rule: str, old: list[object], transition: str) -> None:
    assert condition(old, "Ready", "True", "Connected", "up", 2, NOW)["lastTransitionTime"] == transition


@pytest.mark.parametrize("old", [[], [ready("True")], [ready("False")]],
                         ids=["new condition", "same status", "status flipped"])
def test_reason_message_and_observed_generation_always_take_the_new_values(old: list[object]) -> None:
    built = condition(old, "Ready", "True", "Connected", "session established", 7, NOW)
    assert {k: v for k, v in built.items() if k != "lastTransitionTime"} == {
        "type": "Ready", "status": "True", "reason": "Connected", "message": "session established",
        "observedGeneration": 7}


def test_the_existing_conditions_are_not_modified() -> None:
    old: list[object] = [ready("True")]
    before = [dict(c) for c in old if isinstance(c, dict)]
    condition(old, "Ready", "False", "Down", "no session", 2, NOW)
    assert old == before
