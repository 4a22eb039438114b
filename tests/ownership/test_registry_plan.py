"""Ownership rules (pure): claims, the precondition a claim puts on the znode write, release."""

from __future__ import annotations

import json

import pytest

from zkop.ownership.registry import Claim, OwnerStamp, claim_requires, plan_claim, plan_release, record_owner
from zkop.zookeeper.actions import Action, CheckVersion, CreateNode, DeleteNode, Observed, SetData

OURS = OwnerStamp("prod-eu", "default", "flag", "uid-1")
RECORD = "/zkop/owners/app/flag"
RECREATED = OwnerStamp("prod-eu", "default", "flag", "uid-0")
SAME_CLUSTER = OwnerStamp("prod-eu", "team-b", "flag", "uid-7")
OTHER_CLUSTER = OwnerStamp("prod-us", "default", "flag", "uid-9")


def never(_: OwnerStamp) -> bool:
    return False


def always(_: OwnerStamp) -> bool:
    return True


@pytest.mark.parametrize("stamp", [OURS, OwnerStamp('c"1\\', "ns\u00e9", "n\u2028\x00\x1f", "\U0001d11e")])
def test_stamp_bytes_are_canonical_json(stamp: OwnerStamp) -> None:
    # Byte-identical to the sorted, compact json.dumps records were always written with: an
    # unchanged stamp must never look changed to a record written by an earlier zkop.
    expected = json.dumps({"clusterId": stamp.cluster_id, "managedBy": "zkop", "name": stamp.name,
                           "namespace": stamp.namespace, "uid": stamp.uid}, sort_keys=True, separators=(",", ":"))
    assert stamp.to_bytes() == expected.encode()
    assert OwnerStamp.from_bytes(stamp.to_bytes()) == stamp


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


def test_unreadable_record_is_a_conflict_named_as_such() -> None:
    claim = plan_claim(RECORD, OURS, Observed(b"{not json", 1), never)
    assert claim.actions == () and claim.conflict is not None
    assert "unreadable ownership record" in claim.conflict.describe()


# rule, claim, record → preconditions of the znode write
REQUIRES: list[tuple[str, Claim, Observed | None, tuple[CheckVersion, ...]]] = [
    ("a record written by the claim is its own precondition", Claim((CreateNode(RECORD, b"x"),), new=True), None, ()),
    ("a refreshed record (set at a version) is its own precondition", Claim((SetData(RECORD, b"x", 4),)),
     Observed(b"y", 4), ()),
    ("an unchanged record must still be at the version read (changed behind our back → replan)", Claim(()),
     Observed(OURS.to_bytes(), 7), (CheckVersion(RECORD, 7),)),
]


@pytest.mark.parametrize(("rule", "claim", "record", "require"), REQUIRES, ids=[row[0] for row in REQUIRES])
def test_claim_requires(rule: str, claim: Claim, record: Observed | None, require: tuple[CheckVersion, ...]) -> None:
    assert claim_requires(RECORD, claim, record) == require


# rule, record → the release write
RELEASES: list[tuple[str, Observed | None, Action | None]] = [
    ("no record: nothing", None, None),
    ("our record: deleted at its version", Observed(OURS.to_bytes(), 3), DeleteNode(RECORD, 3)),
    ("our record of a re-created object (other uid): deleted", Observed(RECREATED.to_bytes(), 1),
     DeleteNode(RECORD, 1)),
    ("our record with children (a parent of other records): emptied", Observed(OURS.to_bytes(), 2, num_children=1),
     SetData(RECORD, b"", 2)),
    ("another object's record: left alone", Observed(SAME_CLUSTER.to_bytes(), 0), None),
    ("another cluster's record: left alone", Observed(OTHER_CLUSTER.to_bytes(), 0), None),
    ("an empty record: left alone", Observed(b"", 0, num_children=3), None),
    ("unreadable data: left alone", Observed(b"not json", 0), None),
]


@pytest.mark.parametrize(("rule", "record", "action"), RELEASES, ids=[row[0] for row in RELEASES])
def test_release(rule: str, record: Observed | None, action: Action | None) -> None:
    assert plan_release(RECORD, OURS, record) == action


@pytest.mark.parametrize(("record", "owner"), [
    (None, None), (Observed(b"", 0), None), (Observed(b"junk", 0), None), (Observed(OURS.to_bytes(), 0), OURS),
])
def test_record_owner(record: Observed | None, owner: OwnerStamp | None) -> None:
    assert record_owner(record) == owner


BRIDGE = OwnerStamp("prod-eu", "default", "flag", "uid-3", "Service")


def test_another_kinds_stamp_says_its_kind_and_a_zookeeperconfigs_is_unchanged() -> None:
    # A ZooKeeperConfig's stamp has no "kind" key (byte for byte what every zkop wrote); another owner's has one.
    assert b'"kind"' not in OURS.to_bytes()
    expected = json.dumps({"clusterId": "prod-eu", "kind": "Service", "managedBy": "zkop", "name": "flag",
                           "namespace": "default", "uid": "uid-3"}, sort_keys=True, separators=(",", ":"))
    assert BRIDGE.to_bytes() == expected.encode()
    assert OwnerStamp.from_bytes(BRIDGE.to_bytes()) == BRIDGE
    assert OwnerStamp.from_bytes(OURS.to_bytes()) == OURS
    assert BRIDGE.describe() == "Service default/flag in cluster 'prod-eu'"
    assert not BRIDGE.same_object(OURS)


@pytest.mark.parametrize(("rule", "ours", "theirs"), [
    ("a ZooKeeperConfig never takes over the bridge's record of its own cluster", OURS, BRIDGE),
    ("the bridge never takes over a ZooKeeperConfig's record of its own cluster", BRIDGE, OURS),
])
def test_an_owner_of_another_kind_is_never_taken_over(rule: str, ours: OwnerStamp, theirs: OwnerStamp) -> None:
    # owner_exists answers for objects of the claimant's kind: it cannot vouch for another kind's owner.
    claim = plan_claim(RECORD, ours, Observed(theirs.to_bytes(), 4), never)
    assert claim.actions == () and claim.conflict == theirs, rule
    assert plan_release(RECORD, ours, Observed(theirs.to_bytes(), 4)) is None, rule
