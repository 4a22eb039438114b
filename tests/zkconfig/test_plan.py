"""Table tests of the pure planning functions (no I/O)."""

from __future__ import annotations

import pytest

from zkop.zkconfig.plan import plan_delete, plan_sync
from zkop.zkconfig.spec import DesiredZnode
from zkop.zookeeper.actions import CreateNode, DeleteNode, Observed, SetData

PATH = "/app/features/new-recommendation-engine/enabled"


def desired(data: bytes = b"true", **kw: object) -> DesiredZnode:
    return DesiredZnode(path=PATH, data=data, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("policy", "observed", "actions", "state", "reason", "ready"),
    [
        ("createOrUpdate", None, (CreateNode(PATH, b"true"),), "Synced", "Synced", True),
        ("createOnly", None, (CreateNode(PATH, b"true"),), "Synced", "Synced", True),
        ("createOrUpdate", Observed(b"true", 3), (), "Synced", "Synced", True),
        ("createOnly", Observed(b"true", 3), (), "Synced", "Synced", True),
        ("createOrUpdate", Observed(b"false", 3), (SetData(PATH, b"true", 3),), "Synced", "Synced", True),
        ("createOnly", Observed(b"false", 3), (), "OutOfSync", "CreateOnly", True),
        ("createOrUpdate", Observed(b"x", 0, ephemeral_owner=0x1234), (), "Error", "EphemeralNode", False),
    ],
)
def test_plan_sync_table(policy: str, observed: Observed | None, actions: tuple[object, ...], state: str,
                         reason: str, ready: bool) -> None:
    plan = plan_sync(desired(sync_policy=policy), observed)
    assert plan.actions == actions
    assert (plan.outcome.state, plan.outcome.reason, plan.outcome.ready) == (state, reason, ready)
    assert plan.writes == bool(actions)


def test_plan_sync_messages_never_contain_data() -> None:
    secret = b"s3cr3t-value"
    for observed in (None, Observed(b"other", 1), Observed(secret, 1)):
        plan = plan_sync(desired(secret), observed)
        assert "s3cr3t" not in plan.outcome.message and "s3cr3t" not in plan.note


def test_outcome_does_not_depend_on_whether_this_pass_wrote() -> None:
    # Converging and then confirming must produce the same status (no second status write).
    created = plan_sync(desired(), None)
    confirmed = plan_sync(desired(), Observed(b"true", 0))
    updated = plan_sync(desired(), Observed(b"old", 0))
    assert created.outcome == confirmed.outcome == updated.outcome
    assert created.changes == ("created",) and "created" in created.note
    assert updated.changes == ("updated",) and "updated" in updated.note
    assert confirmed.changes == () and confirmed.note == ""


def test_update_is_compare_and_set_on_the_read_version() -> None:
    plan = plan_sync(desired(b"new"), Observed(b"old", 41))
    assert plan.actions == (SetData(PATH, b"new", 41),)


@pytest.mark.parametrize(
    ("deletion_policy", "observed", "actions", "reason", "ready"),
    [
        ("Delete", None, (), "Deleted", True),
        ("Delete", Observed(b"true", 7), (DeleteNode(PATH, 7),), "Deleted", True),
        ("Delete", Observed(b"true", 7, num_children=2), (), "HasChildren", False),
        ("Orphan", Observed(b"true", 7), (), "Orphaned", True),
        ("Delete", Observed(b"true", 7, ephemeral_owner=5), (), "Orphaned", True),
    ],
)
def test_plan_delete_table(deletion_policy: str, observed: Observed | None, actions: tuple[object, ...],
                           reason: str, ready: bool) -> None:
    plan = plan_delete(desired(deletion_policy=deletion_policy), observed)
    assert plan.actions == actions
    assert (plan.outcome.reason, plan.outcome.ready) == (reason, ready)
