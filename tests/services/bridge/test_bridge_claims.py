"""The bridge's claims in the ownership registry (pure): one rule a row, named by the rule."""

from __future__ import annotations

import pytest

from zkop.ownership.registry import OwnerStamp
from zkop.services.bridge.claims import Claims, Write, claim_service_plan, release_orphans, service_stamp
from zkop.services.bridge.formats import DesiredNode, Owner
from zkop.services.bridge.plan import ObservedNode, plan_service
from zkop.zookeeper.actions import CheckVersion, CreateNode, DeleteNode, Observed, SetData

ME = "prod"
REG = "/zkop/owners"
KEY = "/svc/default-web"
INSTANCE = f"{KEY}/10.0.0.1"
STAMP = service_stamp(ME, "default", "web", "uid-1")
CONFIG = OwnerStamp(ME, "default", "web", "uid-9")  # a ZooKeeperConfig of this installation
OTHER_BRIDGE = service_stamp("staging", "default", "web", "uid-2")
GONE = service_stamp(ME, "team", "a-web", "uid-0")  # this bridge's, for a Service that no longer publishes here


def ours(path: str, data: bytes = b"old", version: int = 3) -> ObservedNode:
    return ObservedNode(path, data, version, owner=Owner("zkop", ME, "uid-1"))


def claimed(*records: tuple[str, OwnerStamp | bytes]) -> Claims:
    found = {path: Observed(stamp if isinstance(stamp, bytes) else stamp.to_bytes(), 5) for path, stamp in records}
    return Claims(STAMP, REG, found, lambda stamp: stamp != GONE)


def plan(desired: list[DesiredNode], observed: dict[str, ObservedNode], claims: Claims,
         children: list[ObservedNode] | None = None) -> tuple[tuple[Write, ...], tuple[str, ...], tuple[str, ...]]:
    service = plan_service(desired, observed, children or [], cluster_id=ME, policy="sync")
    result = claim_service_plan(service, desired, observed, claims)
    return result.writes, result.foreign, result.adopted


@pytest.mark.parametrize(("rule", "observed", "claims", "writes", "foreign", "adopted"), [
    ("a new record is created with its claim in one multi",
     {}, claimed(),
     (Write(KEY, CreateNode(KEY, b"new"), (CreateNode(REG + KEY, STAMP.to_bytes()),)),), (), ()),
    ("a changed record is set with its claim checked at the version read",
     {KEY: ours(KEY)}, claimed((KEY, STAMP)),
     (Write(KEY, SetData(KEY, b"new", 3), (), (CheckVersion(REG + KEY, 5),)),), (), ()),
    ("an unchanged, claimed record writes nothing",
     {KEY: ours(KEY, b"new")}, claimed((KEY, STAMP)), (), (), ()),
    ("an older zkop's unclaimed record of this cluster is adopted: claimed alone, at the record's version",
     {KEY: ours(KEY, b"new")}, claimed(),
     (Write(KEY, None, (CreateNode(REG + KEY, STAMP.to_bytes()),), (CheckVersion(KEY, 3),)),), (), (KEY,)),
    ("an emptied claim (a registry parent) is unowned and claimed",
     {}, claimed((KEY, b"")),
     (Write(KEY, CreateNode(KEY, b"new"), (SetData(REG + KEY, STAMP.to_bytes(), 5),)),), (), ()),
    ("a record a ZooKeeperConfig claims is never written",
     {}, claimed((KEY, CONFIG)), (), (KEY,), ()),
    ("a record of ours a ZooKeeperConfig claims is neither written nor claimed",
     {KEY: ours(KEY)}, claimed((KEY, CONFIG)), (), (KEY,), ()),
    ("a record another installation's bridge claims is never written",
     {}, claimed((KEY, OTHER_BRIDGE)), (), (KEY,), ()),
    ("an unreadable claim is a conflict",
     {}, claimed((KEY, b"not json")), (), (KEY,), ()),
    ("this bridge's claim for a Service that no longer publishes the path is taken over",
     {KEY: ours(KEY)}, claimed((KEY, GONE)),
     (Write(KEY, SetData(KEY, b"new", 3), (SetData(REG + KEY, STAMP.to_bytes(), 5),)),), (), ()),
    ("this bridge's claim for a Service still publishing the path is a conflict",
     {}, claimed((KEY, service_stamp(ME, "team", "a-web-2", "uid-5"))), (), (KEY,), ()),
    ("a re-created Service (new uid) refreshes its claim",
     {KEY: ours(KEY)}, claimed((KEY, service_stamp(ME, "default", "web", "uid-0"))),
     (Write(KEY, SetData(KEY, b"new", 3), (SetData(REG + KEY, STAMP.to_bytes(), 5),)),), (), ()),
])
def test_a_records_claim(rule: str, observed: dict[str, ObservedNode], claims: Claims, writes: tuple[Write, ...],
                         foreign: tuple[str, ...], adopted: tuple[str, ...]) -> None:
    assert plan([DesiredNode(KEY, b"new")], observed, claims) == (writes, foreign, adopted), rule


def test_containers_are_not_claimed_and_curator_instances_are() -> None:
    desired = [DesiredNode(KEY, b"c", container=True), DesiredNode(INSTANCE, b"i")]
    writes, foreign, _ = plan(desired, {}, claimed())
    assert writes == (Write(KEY, CreateNode(KEY, b"c")),
                      Write(INSTANCE, CreateNode(INSTANCE, b"i"), (CreateNode(REG + INSTANCE, STAMP.to_bytes()),)))
    assert foreign == ()


@pytest.mark.parametrize(("rule", "claim", "writes", "foreign"), [
    ("an instance no longer wanted is deleted with its claim",
     STAMP, (Write(INSTANCE, DeleteNode(INSTANCE, 3), (DeleteNode(REG + INSTANCE, 5),)),), ()),
    ("an older zkop's unclaimed instance is deleted alone", None, (Write(INSTANCE, DeleteNode(INSTANCE, 3)),), ()),
    ("an instance a ZooKeeperConfig claims is never deleted", CONFIG, (), (INSTANCE,)),
    ("an instance another installation's bridge claims is never deleted", OTHER_BRIDGE, (), (INSTANCE,)),
])
def test_a_stale_instances_deletion(rule: str, claim: OwnerStamp | None, writes: tuple[Write, ...],
                                    foreign: tuple[str, ...]) -> None:
    desired = [DesiredNode(KEY, b"c", container=True)]
    observed = {KEY: ObservedNode(KEY, b"c", 0, num_children=1, owner=Owner("zkop", ME, None))}
    claims = claimed(*((INSTANCE, claim),) if claim is not None else ())
    got, got_foreign, _ = plan(desired, observed, claims, children=[ours(INSTANCE)])
    assert (got, got_foreign) == (writes, foreign), rule


@pytest.mark.parametrize(("rule", "claims", "writes", "held"), [
    ("an orphan is deleted with this bridge's claim, whichever Service it names",
     {INSTANCE: GONE}, (Write(INSTANCE, DeleteNode(INSTANCE, 1), (DeleteNode(REG + INSTANCE, 5),)),
                        Write(KEY, DeleteNode(KEY, 2))), ()),
    ("an unclaimed orphan (an older zkop's) is deleted alone",
     {}, (Write(INSTANCE, DeleteNode(INSTANCE, 1)), Write(KEY, DeleteNode(KEY, 2))), ()),
    ("an orphan another owner claims is held, and the container above it too",
     {INSTANCE: CONFIG}, (), (INSTANCE, KEY)),
])
def test_the_full_syncs_deletions(rule: str, claims: dict[str, OwnerStamp], writes: tuple[Write, ...],
                                  held: tuple[str, ...]) -> None:
    records = {path: Observed(stamp.to_bytes(), 5) for path, stamp in claims.items()}
    actions = [DeleteNode(INSTANCE, 1), DeleteNode(KEY, 2)]
    assert release_orphans(actions, records, root=REG, cluster_id=ME) == (writes, held), rule
