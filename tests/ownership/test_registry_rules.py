"""Ownership rules as tables (pure): claim, the precondition a claim puts on the znode write, release."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from zkop.ownership.registry import Claim, OwnerStamp, claim_requires, plan_claim, plan_release, record_owner
from zkop.zookeeper.actions import Action, CheckVersion, CreateNode, DeleteNode, Observed, SetData

OURS = OwnerStamp("prod-eu", "default", "flag", "uid-1")
RECREATED = OwnerStamp("prod-eu", "default", "flag", "uid-0")
SAME_CLUSTER = OwnerStamp("prod-eu", "team-b", "flag", "uid-7")
OTHER_CLUSTER = OwnerStamp("prod-us", "default", "flag", "uid-9")
RECORD = "/zkop/owners/app/flag"


def exists(_: OwnerStamp) -> bool:
    return True


def gone(_: OwnerStamp) -> bool:
    return False


# rule (source: the module docstring of zkop.ownership.registry, external-dns TXT registry), record, owner exists,
# → actions, conflict, new
CLAIMS: list[tuple[str, Observed | None, Callable[[OwnerStamp], bool], tuple[Action, ...], OwnerStamp | None, bool]] = [
    ("no record: create ours (adoption)", None, exists, (CreateNode(RECORD, OURS.to_bytes()),), None, True),
    ("empty record: nobody owns the path", Observed(b"", 3, num_children=2), exists,
     (SetData(RECORD, OURS.to_bytes(), 3),), None, True),
    ("our record: nothing", Observed(OURS.to_bytes(), 5), gone, (), None, False),
    ("re-created object: refresh the uid", Observed(RECREATED.to_bytes(), 4), exists,
     (SetData(RECORD, OURS.to_bytes(), 4),), None, False),
    ("same cluster, owner still exists: conflict", Observed(SAME_CLUSTER.to_bytes(), 0), exists, (), SAME_CLUSTER,
     False),
    ("same cluster, owner gone (finalizer removed by hand): take over", Observed(SAME_CLUSTER.to_bytes(), 2), gone,
     (SetData(RECORD, OURS.to_bytes(), 2),), None, False),
    ("other cluster: conflict even if unknown here", Observed(OTHER_CLUSTER.to_bytes(), 0), gone, (), OTHER_CLUSTER,
     False),
]


@pytest.mark.parametrize(("rule", "record", "owner_exists", "actions", "conflict", "new"), CLAIMS,
                         ids=[row[0] for row in CLAIMS])
def test_claim(rule: str, record: Observed | None, owner_exists: Callable[[OwnerStamp], bool],
               actions: tuple[Action, ...], conflict: OwnerStamp | None, new: bool) -> None:
    assert plan_claim(RECORD, OURS, record, owner_exists) == Claim(actions, conflict, new)


def test_unreadable_record_is_a_conflict_named_as_such() -> None:
    claim = plan_claim(RECORD, OURS, Observed(b"{not json", 1), gone)
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
