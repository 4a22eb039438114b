"""The dry-run form of ZooKeeperConfig decisions (pure functions of :mod:`zkop.zkconfig.dryrun`)."""

from __future__ import annotations

from typing import Any

import pytest

from zkop.ownership.registry import Claim
from zkop.zkconfig.decide import Decision, Event
from zkop.zkconfig.dryrun import DRY_RUN_REASON, PlannedChange, dry_run_delete, dry_run_sync, planned_changes
from zkop.zkconfig.plan import Outcome, Plan
from zkop.zkconfig.spec import FINALIZER
from zkop.zookeeper.actions import CheckVersion, CreateNode, DeleteNode, SetAcl, SetData

SYNCED = Outcome("Synced", "Synced", "znode /app/x matches the spec", True)


def obj(*finalizers: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "default", "name": "x", "finalizers": list(finalizers)}}


def test_planned_changes_name_every_write_and_the_release_without_data() -> None:
    decision = Decision(writes=(CreateNode("/zkop/owners/app/x", b"stamp"), SetData("/app/x", b"s3cret", 4),
                                SetAcl("/app/x", (), 2), DeleteNode("/app/y", 1)), release=True)
    assert planned_changes(decision, "/zkop/owners/app/y") == (
        PlannedChange("create", "create /zkop/owners/app/x (5 bytes)"),
        PlannedChange("update", "update /app/x (version 4, 6 bytes)"),
        PlannedChange("update_acl", "set the ACL of /app/x (aversion 2, 0 entries)"),
        PlannedChange("delete", "delete /app/y (version 1)"),
        PlannedChange("release", "release the ownership record /zkop/owners/app/y"),
    )
    assert planned_changes(Decision(), "/r") == ()


def test_a_planned_change_becomes_a_dry_run_status_and_nothing_else() -> None:
    plan = Plan((CreateNode("/app/x", b"abc"),), SYNCED, ("created",), "znode /app/x created (3 bytes)")
    decision = Decision(add_finalizer=True, claim=Claim(actions=(CreateNode("/zkop/owners/app/x", b"s"),)),
                        writes=(CreateNode("/zkop/owners/app/x", b"s"), *plan.actions),
                        require=(CheckVersion("/zkop/owners/app/x", 0),), plan=plan,
                        events=(Event("Normal", "Created", "znode /app/x created (3 bytes)"),), drift=True,
                        znode_version=0, outcome=SYNCED, wrote=True)
    dry = dry_run_sync(decision, planned_changes(decision, "/zkop/owners/app/x"))
    assert dry == Decision(outcome=Outcome(
        "Pending", DRY_RUN_REASON,
        "dry run, nothing written: would create /zkop/owners/app/x (1 byte); would create /app/x (3 bytes)", False))


@pytest.mark.parametrize("decision", [
    Decision(add_finalizer=True, outcome=SYNCED, znode_version=3),  # nothing to change
    Decision(add_finalizer=True, warn=True, outcome=Outcome("Error", "InvalidSpec", "invalid", False, stalled=True)),
    Decision(outcome=Outcome("Error", "NoAuth", "refused", False), retrying=True, warn=True, retry="refused"),
])
def test_without_changes_a_dry_run_reports_what_a_real_run_would_but_adds_no_finalizer(decision: Decision) -> None:
    dry = dry_run_sync(decision, ())
    assert not dry.add_finalizer
    assert dry.outcome == decision.outcome and dry.retry == decision.retry and dry.warn == decision.warn


def test_deletion_in_a_dry_run_never_blocks() -> None:
    assert dry_run_delete(obj()) == Decision()  # no finalizer of ours: nothing
    assert dry_run_delete(obj("other/finalizer")) == Decision()
    assert dry_run_delete(obj(FINALIZER, "other/finalizer")) == Decision(remove_finalizer=True)
