"""Ownership claims (pure)."""

from __future__ import annotations

from zkop.ownership.registry import OwnerStamp, plan_claim
from zkop.zookeeper.actions import CreateNode, Observed, SetData

OURS = OwnerStamp("prod-eu", "default", "flag", "uid-1")
RECORD = "/zkop/owners/app/flag"


def never(_: OwnerStamp) -> bool:
    return False


def always(_: OwnerStamp) -> bool:
    return True


def test_absent_record_is_created() -> None:
    claim = plan_claim(RECORD, OURS, None, always)
    assert claim.actions == (CreateNode(RECORD, OURS.to_bytes()),)
    assert claim.new and claim.conflict is None


def test_empty_record_means_unowned() -> None:
    claim = plan_claim(RECORD, OURS, Observed(b"", 3, num_children=1), always)
    assert claim.actions == (SetData(RECORD, OURS.to_bytes(), 3),) and claim.new


def test_own_record_needs_nothing() -> None:
    assert plan_claim(RECORD, OURS, Observed(OURS.to_bytes(), 0), always).actions == ()


def test_recreated_object_refreshes_uid() -> None:
    old = OwnerStamp("prod-eu", "default", "flag", "uid-0")
    claim = plan_claim(RECORD, OURS, Observed(old.to_bytes(), 4), always)
    assert claim.actions == (SetData(RECORD, OURS.to_bytes(), 4),) and claim.conflict is None


def test_other_cluster_conflicts_even_if_object_is_unknown_here() -> None:
    theirs = OwnerStamp("prod-us", "default", "flag", "uid-9")
    claim = plan_claim(RECORD, OURS, Observed(theirs.to_bytes(), 0), never)
    assert claim.conflict == theirs and claim.actions == ()


def test_same_cluster_other_object_conflicts_while_it_exists() -> None:
    theirs = OwnerStamp("prod-eu", "team-b", "flag", "uid-7")
    assert plan_claim(RECORD, OURS, Observed(theirs.to_bytes(), 0), always).conflict == theirs
    # Its object is gone (finalizer removed by hand): take over.
    claim = plan_claim(RECORD, OURS, Observed(theirs.to_bytes(), 2), never)
    assert claim.conflict is None and claim.actions == (SetData(RECORD, OURS.to_bytes(), 2),)


def test_foreign_data_is_a_conflict() -> None:
    claim = plan_claim(RECORD, OURS, Observed(b"not json", 0), never)
    assert claim.conflict is not None and claim.actions == ()


def test_stamp_round_trip_is_canonical() -> None:
    data = OURS.to_bytes()
    assert OwnerStamp.from_bytes(data) == OURS
    assert data == b'{"clusterId":"prod-eu","managedBy":"zkop","name":"flag","namespace":"default","uid":"uid-1"}'
