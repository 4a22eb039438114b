"""Table tests of every rule of the ZooKeeperConfig reconciler (:mod:`zkop.zkconfig.decide`; no I/O).

Each row names the rule and where it comes from; the assertion covers every field of the
:class:`Decision` (fields a row does not name must be at their defaults).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from zkop.feature.tenancy import Refusal, TenancyPolicy
from zkop.ownership.oldest import object_age, oldest
from zkop.ownership.registry import Claim, OwnerStamp
from zkop.runtime.cache import meta_namespace_key
from zkop.zkconfig.acldrift import decide_acl_drift, declared_acls
from zkop.zkconfig.decide import (
    Decision,
    DeleteFacts,
    SyncFacts,
    claim_of,
    decide_delete,
    decide_failure,
    decide_sync,
    deletion_target,
    needs_acl,
    needs_children,
    needs_znode,
    owns_for_deletion,
    precheck_delete,
    precheck_sync,
)
from zkop.zkconfig.objects import unsynced_path
from zkop.zkconfig.spec import FINALIZER, DataRef, DesiredZnode, InvalidSpec, RefNotFound, parse_spec
from zkop.zookeeper.acls import identities
from zkop.zookeeper.actions import AclEntry, CheckVersion, CreateNode, DeleteNode, Observed, SetAcl, SetData
from zkop.zookeeper.adapter import (
    AclRead,
    ConcurrentModification,
    ZooKeeperError,
    ZooKeeperNoAuth,
    ZooKeeperUnavailable,
)
from zkop.zookeeper.frozen import fast_replace

PATH = "/app/flag"
RECORD = "/zkop/owners/app/flag"
KEY = "default/flag"
OURS = OwnerStamp("prod-eu", "default", "flag", "uid-1")
OTHER_CLUSTER = OwnerStamp("prod-us", "default", "flag", "uid-9")
SAME_CLUSTER = OwnerStamp("prod-eu", "team-b", "flag", "uid-7")
DESIRED = DesiredZnode(path=PATH, data=b"true")
CREATE_ONLY = dataclasses.replace(DESIRED, sync_policy="createOnly")
ORPHAN = dataclasses.replace(DESIRED, deletion_policy="Orphan")
READ_ONLY_ACL = (AclEntry("world", "anyone", 1),)
REF = DataRef("ConfigMap", "flags", "flag")
FROM_CM = dataclasses.replace(DESIRED, source=REF)
OPS_ID = "ops:Rmvt8l8VUbmpurbNUjest0kMlgU="  # make_digest_acl_credential("ops", "ops-password")
OPS_ACL = (AclEntry("digest", OPS_ID, 31),)
OPS_SPEC_ACL = [{"scheme": "digest", "id": OPS_ID, "permissions": ["read", "write", "create", "delete", "admin"]}]


def locked_out() -> InvalidSpec:
    """The classic: zkop's credential file holds the hashed id; the ACL names the real one."""
    try:
        parse_spec({"path": PATH, "stringData": "true", "acl": OPS_SPEC_ACL},
                   identities=lambda: identities([("digest", OPS_ID)], address="10.0.0.5"))
    except InvalidSpec as err:
        return err
    raise AssertionError("not refused")


def zkc(*, finalizer: bool = True, synced_at: int | None = None, generation: int = 1, deleting: bool = False,
        spec: dict[str, Any] | None = None, znode_version: int | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": "default", "name": "flag", "uid": "uid-1", "generation": generation,
                            "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:00Z"}
    if finalizer:
        meta["finalizers"] = [FINALIZER]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    obj: dict[str, Any] = {"metadata": meta, "spec": spec or {"path": PATH, "stringData": "true"}}
    if synced_at is not None:
        obj["status"] = {"state": "Synced", "observedGeneration": synced_at}
        if znode_version is not None:
            obj["status"]["znodeVersion"] = znode_version
    return obj


def sync(*, obj: dict[str, Any] | None = None, spec: DesiredZnode = DESIRED, exists: bool = True,
         record: Observed | None = None, observed: Observed | None = None,
         adoption: Refusal | None = None) -> SyncFacts:
    return SyncFacts(obj or zkc(), spec, RECORD, record, claim_of(RECORD, OURS, record, lambda _: exists), observed,
                     adoption)


def delete(*, obj: dict[str, Any] | None = None, target: DesiredZnode = DESIRED, owned: bool = True,
           observed: Observed | None = None, refusal: Refusal | None = None) -> DeleteFacts:
    return DeleteFacts(obj or zkc(deleting=True), target, owned, observed, refusal)


#: What :class:`~zkop.feature.tenancy.TenancyPolicy` says to an object of namespace ``default`` at ``PATH``.
OUTSIDE = TenancyPolicy.from_spec({"tenancy": {"rules": [{"namespaces": ["team-a"], "pathPrefixes": ["/app"]}]}}
                                  ).admit("default", {}, PATH)
NOT_REQUESTED = TenancyPolicy.from_spec({"adoption": "IfRequested"}).may_adopt(False)


def ours() -> Observed:
    return Observed(OURS.to_bytes(), 2)


def expect(decision: Decision, **fields: Any) -> None:
    """Compare every field; ``status`` is ``(state, reason, stalled)`` of the outcome, ``events`` ``(type, reason)``."""
    status = fields.pop("status", None)
    events = fields.pop("events", [])
    claim = fields.pop("claim", None)
    assert (None if decision.outcome is None else
            (decision.outcome.state, decision.outcome.reason, decision.outcome.stalled)) == status
    assert [(e.type, e.reason) for e in decision.events] == events
    if claim is not None:
        assert decision.claim == claim
    ignored = {"outcome", "events", "claim", "plan"}
    actual = {f.name: getattr(decision, f.name) for f in dataclasses.fields(Decision) if f.name not in ignored}
    defaults = {f.name: getattr(Decision(), f.name) for f in dataclasses.fields(Decision) if f.name not in ignored}
    if "retry" in fields and fields["retry"] is ...:  # any message
        assert actual["retry"] is not None
        fields["retry"] = actual["retry"]
    assert actual == {**defaults, **fields}


# rule (source), (object, spec, cluster owner) → decision fields, or None: gather the facts
PRECHECK: list[tuple[str, tuple[dict[str, Any], DesiredZnode | InvalidSpec | RefNotFound, str | None],
                     dict[str, Any] | None]] = [
    ("invalid spec → Stalled/InvalidSpec, finalizer added first, nothing read (kstatus Stalled; decide rule 2)",
     (zkc(finalizer=False), InvalidSpec("spec.path", "must be absolute"), KEY),
     {"add_finalizer": True, "warn": True, "status": ("Error", "InvalidSpec", True)}),
    ("spec.acl locking zkop out → Stalled/InvalidSpec before anything is read or written, Warning Event "
     "(ZooKeeperServer.checkACL against zkop's identities)",
     (zkc(), locked_out(), KEY), {"warn": True, "status": ("Error", "InvalidSpec", True)}),
    ("missing dataFrom key → RefNotFound, retrying, not stalled (the ConfigMap informer wakes it)",
     (zkc(), RefNotFound(REF), KEY),
     {"warn": True, "retrying": True, "status": ("Error", "RefNotFound", False)}),
    ("older object declaring the path owns it in the cluster → Stalled/PathConflict (oldest wins), nothing read",
     (zkc(), DESIRED, "default/older"), {"warn": True, "status": ("Error", "PathConflict", True)}),
    ("new object: read the record and the znode while the finalizer is written (finalizer before any write)",
     (zkc(finalizer=False), DESIRED, KEY), None),
    ("known object: read the record and the znode", (zkc(), DESIRED, KEY), None),
    ("the only object declaring the path (not yet in the path index): read", (zkc(), DESIRED, None), None),
]


@pytest.mark.parametrize(("rule", "facts", "fields"), PRECHECK, ids=[row[0] for row in PRECHECK])
def test_precheck_sync(rule: str, facts: tuple[dict[str, Any], DesiredZnode | InvalidSpec | RefNotFound, str | None],
                       fields: dict[str, Any] | None) -> None:
    decision = precheck_sync(*facts)
    if fields is None:
        assert decision is None
    else:
        assert decision is not None
        expect(decision, **fields)


# rule (source), predicate → what is read
READS: list[tuple[str, bool, bool]] = [
    ("foreign record (other cluster): the znode read with it is not looked at (ownership registry)",
     needs_znode(claim_of(RECORD, OURS, Observed(OTHER_CLUSTER.to_bytes(), 0), lambda _: True)), False),
    ("record ours: the znode is needed", needs_znode(claim_of(RECORD, OURS, ours(), lambda _: True)), True),
    ("no record yet: the znode is needed", needs_znode(claim_of(RECORD, OURS, None, lambda _: True)), True),
    ("adoption of a legacy znode: its ACL is read too (a node created with another ACL shows no aversion)",
     needs_acl(claim_of(RECORD, OURS, None, lambda _: True), Observed(b"true", 4)), True),
    ("adoption whose ACL was read already: not again",
     needs_acl(claim_of(RECORD, OURS, None, lambda _: True), Observed(b"true", 4, acl=DESIRED.acl)), False),
    ("nothing to adopt (no znode): no ACL read", needs_acl(claim_of(RECORD, OURS, None, lambda _: True), None),
     False),
    ("a znode already ours: no ACL read", needs_acl(claim_of(RECORD, OURS, ours(), lambda _: True),
                                                   Observed(b"true", 4)), False),
    ("deletion, ours: read the znode afresh (numChildren is not covered by data watches)",
     owns_for_deletion(zkc(deleting=True), KEY, OURS, OURS), True),
    ("deletion, record of another object → never ours to delete",
     owns_for_deletion(zkc(deleting=True), KEY, OURS, SAME_CLUSTER), False),
    ("deletion, no record → never ours to delete", owns_for_deletion(zkc(deleting=True), KEY, OURS, None), False),
    ("deletion, an older object owns the path in the cluster → never ours to delete",
     owns_for_deletion(zkc(deleting=True), "default/older", OURS, OURS), False),
    ("deletion with children → arm a children watch first (never delete recursively)",
     needs_children(DESIRED, Observed(b"true", 6, num_children=2)), True),
    ("deletion of a childless znode: no children watch", needs_children(DESIRED, Observed(b"true", 6)), False),
    ("deletionPolicy Orphan keeps a znode with children: no children watch",
     needs_children(ORPHAN, Observed(b"true", 6, num_children=2)), False),
]


@pytest.mark.parametrize(("rule", "actual", "expected"), READS, ids=[row[0] for row in READS])
def test_what_is_read(rule: str, actual: bool, expected: bool) -> None:
    assert actual is expected


# rule (source), complete facts → decision fields
SYNC: list[tuple[str, SyncFacts, dict[str, Any]]] = [
    ("foreign record (other cluster) → Stalled/PathConflict, nothing written (ownership registry)",
     sync(record=Observed(OTHER_CLUSTER.to_bytes(), 0)),
     {"warn": True, "status": ("Error", "PathConflict", True), "claim": Claim((), conflict=OTHER_CLUSTER)}),
    ("record of another object of this cluster that still exists → Stalled/PathConflict",
     sync(record=Observed(SAME_CLUSTER.to_bytes(), 0), exists=True),
     {"warn": True, "status": ("Error", "PathConflict", True)}),
    ("unreadable record → Stalled/PathConflict", sync(record=Observed(b"<xml/>", 0)),
     {"warn": True, "status": ("Error", "PathConflict", True)}),
    ("new object: the finalizer is added before the record and the znode are created",
     sync(obj=zkc(finalizer=False), record=None, observed=None),
     {"add_finalizer": True, "writes": (CreateNode(RECORD, OURS.to_bytes()), CreateNode(PATH, b"true")),
      "wrote": True, "znode_version": 0, "status": ("Synced", "Synced", False), "events": [("Normal", "Created")]}),
    ("nothing yet: create the record and the znode in one multi → Created",
     sync(record=None, observed=None),
     {"writes": (CreateNode(RECORD, OURS.to_bytes()), CreateNode(PATH, b"true")), "wrote": True,
      "znode_version": 0, "status": ("Synced", "Synced", False), "events": [("Normal", "Created")]}),
    ("adoption of a legacy znode in sync → record created, znode untouched, Adopted",
     sync(record=None, observed=Observed(b"true", 4, acl=DESIRED.acl)),
     {"writes": (CreateNode(RECORD, OURS.to_bytes()),), "znode_version": 4, "status": ("Synced", "Synced", False),
      "events": [("Normal", "Adopted")]}),
    ("adoption of a legacy znode with other data and ACL → set both, Adopted then Updated",
     sync(record=None, observed=Observed(b"false", 4, acl=READ_ONLY_ACL)),
     {"writes": (CreateNode(RECORD, OURS.to_bytes()), SetData(PATH, b"true", 4), SetAcl(PATH, DESIRED.acl, 0)),
      "wrote": True, "znode_version": 5,
      "status": ("Synced", "Synced", False), "events": [("Normal", "Adopted"), ("Normal", "Updated")]}),
    ("in sync → nothing written; the znode write would be checked at the record's version",
     sync(record=ours(), observed=Observed(b"true", 3)),
     {"require": (CheckVersion(RECORD, 2),), "znode_version": 3, "status": ("Synced", "Synced", False)}),
    ("record changed behind our back → the write is conditional on the record as read, a change replans",
     sync(record=ours(), observed=Observed(b"false", 3), obj=zkc(synced_at=0)),
     {"writes": (SetData(PATH, b"true", 3),), "require": (CheckVersion(RECORD, 2),), "wrote": True,
      "znode_version": 4, "status": ("Synced", "Synced", False), "events": [("Normal", "Updated")]}),
    ("hand edit while Synced at this generation → DriftCorrected, counted",
     sync(record=ours(), observed=Observed(b"false", 3), obj=zkc(synced_at=1)),
     {"writes": (SetData(PATH, b"true", 3),), "require": (CheckVersion(RECORD, 2),), "wrote": True, "drift": True,
      "znode_version": 4, "status": ("Synced", "Synced", False), "events": [("Normal", "DriftCorrected")]}),
    ("hand edit of a znode whose data comes from a ConfigMap → DriftCorrected (not at the synced version)",
     sync(spec=FROM_CM, record=ours(), observed=Observed(b"false", 4), obj=zkc(synced_at=1, znode_version=3)),
     {"writes": (SetData(PATH, b"true", 4),), "require": (CheckVersion(RECORD, 2),), "wrote": True, "drift": True,
      "znode_version": 5, "status": ("Synced", "Synced", False), "events": [("Normal", "DriftCorrected")]}),
    ("the referenced ConfigMap changed, znode untouched since the last sync → Updated, never drift",
     sync(spec=FROM_CM, record=ours(), observed=Observed(b"false", 3), obj=zkc(synced_at=1, znode_version=3)),
     {"writes": (SetData(PATH, b"true", 3),), "require": (CheckVersion(RECORD, 2),), "wrote": True,
      "znode_version": 4, "status": ("Synced", "Synced", False), "events": [("Normal", "Updated")]}),
    ("ConfigMap data but no recorded version (synced by an older zkop) → DriftCorrected, as before",
     sync(spec=FROM_CM, record=ours(), observed=Observed(b"false", 3), obj=zkc(synced_at=1)),
     {"writes": (SetData(PATH, b"true", 3),), "require": (CheckVersion(RECORD, 2),), "wrote": True, "drift": True,
      "znode_version": 4, "status": ("Synced", "Synced", False), "events": [("Normal", "DriftCorrected")]}),
    ("an ACL edited by hand is drift even at the synced data version (sources only carry data)",
     sync(spec=FROM_CM, record=ours(), observed=Observed(b"true", 3, acl_version=1, acl=READ_ONLY_ACL),
          obj=zkc(synced_at=1, znode_version=3)),
     {"writes": (SetAcl(PATH, DESIRED.acl, 1),), "require": (CheckVersion(RECORD, 2),), "wrote": True,
      "drift": True, "znode_version": 3, "status": ("Synced", "Synced", False),
      "events": [("Normal", "DriftCorrected")]}),
    ("hand delete while Synced at this generation → re-created, DriftCorrected",
     sync(record=ours(), observed=None, obj=zkc(synced_at=1)),
     {"writes": (CreateNode(PATH, b"true"),), "require": (CheckVersion(RECORD, 2),), "wrote": True, "drift": True,
      "znode_version": 0, "status": ("Synced", "Synced", False), "events": [("Normal", "DriftCorrected")]}),
    ("createOnly never overwrites → OutOfSync/CreateOnly, nothing written (spec syncPolicy)",
     sync(spec=CREATE_ONLY, record=ours(), observed=Observed(b"false", 3), obj=zkc(synced_at=1)),
     {"require": (CheckVersion(RECORD, 2),), "status": ("OutOfSync", "CreateOnly", False)}),
    ("re-created object (same name, new uid) → the record's uid is refreshed in the same multi",
     sync(record=Observed(dataclasses.replace(OURS, uid="uid-0").to_bytes(), 5), observed=Observed(b"true", 3)),
     {"writes": (SetData(RECORD, OURS.to_bytes(), 5),), "znode_version": 3, "status": ("Synced", "Synced", False)}),
    ("hand setACL while Synced (found by the periodic ACL check) → setACL at its aversion, DriftCorrected",
     sync(spec=dataclasses.replace(DESIRED, acl=OPS_ACL), record=ours(), obj=zkc(synced_at=1),
          observed=Observed(b"true", 3, acl_version=1, acl=(*OPS_ACL, AclEntry("world", "anyone", 31)))),
     {"writes": (SetAcl(PATH, OPS_ACL, 1),), "require": (CheckVersion(RECORD, 2),), "wrote": True, "drift": True,
      "znode_version": 3, "status": ("Synced", "Synced", False), "events": [("Normal", "DriftCorrected")]}),
    ("ACL read back redacted (zkop lost ADMIN, ZOOKEEPER-1392) → never taken for the desired one: "
     "Error/AclRedacted, nothing written, a Warning Event (docs/operations.md: every Error reason is one)",
     sync(spec=dataclasses.replace(DESIRED, acl=OPS_ACL), record=ours(),
          observed=Observed(b"true", 3, acl_version=1, acl=(AclEntry("digest", "ops:x", 31),))),
     {"require": (CheckVersion(RECORD, 2),), "warn": True, "status": ("Error", "AclRedacted", False)}),
    ("an ephemeral znode is not zkop's → Stalled/EphemeralNode, a Warning Event, nothing written",
     sync(record=ours(), observed=Observed(b"x", 0, ephemeral_owner=0x99)),
     {"warn": True, "status": ("Error", "EphemeralNode", True)}),
    ("an ephemeral znode is never claimed nor adopted (docs/operations.md: zkop manages persistent znodes only)",
     sync(record=None, observed=Observed(b"x", 0, ephemeral_owner=0x99, acl=DESIRED.acl)),
     {"warn": True, "status": ("Error", "EphemeralNode", True)}),
    ("adoption refused (adoption IfRequested, no spec.adoptExisting) → Stalled, nothing claimed nor written",
     sync(record=None, observed=Observed(b"false", 4, acl=READ_ONLY_ACL), adoption=NOT_REQUESTED),
     {"warn": True, "status": ("Error", "AdoptionNotRequested", True)}),
    ("adoption refused: a released record (empty) is no owner either → Stalled, record untouched",
     sync(record=Observed(b"", 1), observed=Observed(b"true", 4, acl=DESIRED.acl), adoption=NOT_REQUESTED),
     {"warn": True, "status": ("Error", "AdoptionNotRequested", True)}),
    ("adoption refusal does not matter when nothing exists: the znode is created (no adoption)",
     sync(record=None, observed=None, adoption=NOT_REQUESTED),
     {"writes": (CreateNode(RECORD, OURS.to_bytes()), CreateNode(PATH, b"true")), "wrote": True,
      "znode_version": 0, "status": ("Synced", "Synced", False), "events": [("Normal", "Created")]}),
    ("adoption refusal does not matter for a znode this object already owns",
     sync(record=ours(), observed=Observed(b"true", 3), adoption=NOT_REQUESTED),
     {"require": (CheckVersion(RECORD, 2),), "znode_version": 3, "status": ("Synced", "Synced", False)}),
]


@pytest.mark.parametrize(("rule", "facts", "fields"), SYNC, ids=[row[0] for row in SYNC])
def test_decide_sync(rule: str, facts: SyncFacts, fields: dict[str, Any]) -> None:
    expect(decide_sync(facts), **fields)


PRECHECK_DELETE: list[tuple[str, dict[str, Any], DesiredZnode | None, Decision | None]] = [
    ("no finalizer of ours → nothing", zkc(deleting=True, finalizer=False), DESIRED, Decision()),
    ("invalid spec → nothing was ever written: the finalizer goes", zkc(deleting=True), None,
     Decision(remove_finalizer=True)),
    ("read the record's owner first", zkc(deleting=True), DESIRED, None),
]


@pytest.mark.parametrize(("rule", "obj", "target", "decision"), PRECHECK_DELETE,
                         ids=[row[0] for row in PRECHECK_DELETE])
def test_precheck_delete(rule: str, obj: dict[str, Any], target: DesiredZnode | None,
                         decision: Decision | None) -> None:
    assert precheck_delete(obj, target) == decision


DELETE: list[tuple[str, DeleteFacts, dict[str, Any]]] = [
    ("not ours (record of another object, no record, or an older object) → the finalizer goes",
     delete(owned=False), {"remove_finalizer": True}),
    ("ours, childless → deleted at its version, record released, Deleted, finalizer removed",
     delete(observed=Observed(b"true", 6)),
     {"writes": (DeleteNode(PATH, 6),), "release": True, "remove_finalizer": True,
      "events": [("Normal", "Deleted")]}),
    ("ours, already gone → record released, finalizer removed, no Event",
     delete(observed=None), {"release": True, "remove_finalizer": True}),
    ("deletionPolicy Orphan → znode kept, record released",
     delete(target=ORPHAN, observed=Observed(b"true", 6)),
     {"release": True, "remove_finalizer": True}),
    ("deletion with children, watched → Error/HasChildren, retried, finalizer kept",
     delete(observed=Observed(b"true", 6, num_children=2)),
     {"retrying": True, "warn": True, "retry": ..., "status": ("Error", "HasChildren", False)}),
    ("children gone once watched (znode read again) → deleted",
     delete(observed=Observed(b"true", 7)),
     {"writes": (DeleteNode(PATH, 7),), "release": True, "remove_finalizer": True,
      "events": [("Normal", "Deleted")]}),
    ("ours, but the tenancy rules no longer admit it → znode kept, record released, a Warning Event",
     delete(refusal=OUTSIDE), {"release": True, "remove_finalizer": True,
                               "events": [("Warning", "NamespaceNotAllowed")]}),
    ("not ours and outside the rules → the finalizer goes, nothing else",
     delete(owned=False, refusal=OUTSIDE), {"remove_finalizer": True}),
]


def test_an_object_outside_the_tenancy_rules_is_stalled_before_anything_is_read() -> None:
    """No finalizer is added: deleting an object that never wrote is immediate and deletes nothing."""
    assert OUTSIDE is not None
    for obj in (zkc(finalizer=False), zkc()):
        decision = precheck_sync(obj, DESIRED, KEY, OUTSIDE)
        assert decision is not None
        expect(decision, warn=True, status=("Error", "NamespaceNotAllowed", True))
        assert decision.outcome is not None and decision.outcome.message == (
            "namespace default is not admitted by any tenancy rule (tenancy.rules[0] (namespaces team-a; "
            "pathPrefixes /app)); nothing is written")
    # A missing dataFrom key does not hide the refusal; an invalid spec is reported first (its path may be bad).
    refused = precheck_sync(zkc(), RefNotFound(REF), KEY, OUTSIDE)
    assert refused is not None and refused.outcome is not None and refused.outcome.reason == "NamespaceNotAllowed"
    invalid = precheck_sync(zkc(), InvalidSpec("spec.path", "must be absolute"), None, OUTSIDE)
    assert invalid is not None and invalid.outcome is not None and invalid.outcome.reason == "InvalidSpec"


@pytest.mark.parametrize(("rule", "facts", "fields"), DELETE, ids=[row[0] for row in DELETE])
def test_decide_delete(rule: str, facts: DeleteFacts, fields: dict[str, Any]) -> None:
    expect(decide_delete(facts), **fields)


def test_deletion_needs_no_bytes_from_a_missing_data_ref() -> None:
    obj = zkc(deleting=True, spec={"path": PATH, "dataFrom": {"configMapKeyRef": {"name": "flags", "key": "flag"}},
                                   "deletionPolicy": "Orphan"})
    assert deletion_target(obj, RefNotFound(REF)) == DesiredZnode(path=PATH, data=b"", source=REF,
                                                                  deletion_policy="Orphan")
    assert deletion_target(obj, InvalidSpec("spec", "x")) is None
    assert deletion_target(obj, DESIRED) is DESIRED


FAILURES: list[tuple[str, ZooKeeperError, int, float, dict[str, Any]]] = [
    ("NoAuth is reported at once", ZooKeeperNoAuth("refused"), 0, 0.0,
     {"retrying": True, "warn": True, "retry": "refused", "status": ("Error", "NoAuth", False)}),
    ("an unavailable ZooKeeper below the threshold is a blip: retried quietly", ZooKeeperUnavailable("down"), 2,
     5.0, {"retry": "down"}),
    ("an unavailable ZooKeeper at the threshold but within the grace is a blip: retried quietly",
     ZooKeeperUnavailable("down"), 9, 2.9, {"retry": "down"}),
    ("an unavailable ZooKeeper at the threshold and past the grace is reported", ZooKeeperUnavailable("down"), 3,
     3.0, {"retrying": True, "warn": True, "retry": "down", "status": ("Error", "ZooKeeperUnavailable", False)}),
    ("a write conflict that outlived the replans is reported", ConcurrentModification("changed"), 0, 0.0,
     {"retrying": True, "warn": True, "retry": "changed", "status": ("Error", "Conflict", False)}),
]


@pytest.mark.parametrize(("rule", "err", "failures", "failing_for", "fields"), FAILURES,
                         ids=[row[0] for row in FAILURES])
def test_decide_failure(rule: str, err: ZooKeeperError, failures: int, failing_for: float,
                        fields: dict[str, Any]) -> None:
    expect(decide_failure(err, failures, failing_for, threshold=3, grace=3.0), **fields)


def test_a_first_pass_reads_the_record_the_znode_and_its_acl_then_adopts() -> None:
    """The reads of an adoption, in order: record and znode (one round trip), then the ACL; one decision."""
    obj = zkc(finalizer=False)
    assert precheck_sync(obj, DESIRED, KEY) is None
    claim = claim_of(RECORD, OURS, None, lambda _: True)
    assert needs_znode(claim) and needs_acl(claim, Observed(b"true", 4))
    decision = decide_sync(SyncFacts(obj, DESIRED, RECORD, None, claim, Observed(b"true", 4, acl=DESIRED.acl)))
    assert decision.add_finalizer and decision.writes == (CreateNode(RECORD, OURS.to_bytes()),)


def _created(name: str, at: str, namespace: str = "default") -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "creationTimestamp": at}}


def test_oldest_object_owns_the_path_then_namespace_and_name() -> None:
    def owner(candidates: list[dict[str, Any]]) -> str | None:
        first = oldest(candidates, object_age)
        return meta_namespace_key(first) if first is not None else None

    assert owner([]) is None
    assert owner([_created("b", "2026-01-02T00:00:00Z"), _created("a", "2026-01-03T00:00:00Z")]) == "default/b"
    assert owner([_created("b", "2026-01-02T00:00:00Z"), _created("a", "2026-01-02T00:00:00Z", "team")]) \
        == "default/b"


@pytest.mark.parametrize(("obj", "path"), [
    (zkc(), PATH),  # never synced: a first start
    (zkc(synced_at=1), None),  # synced at its generation: a warm restart
    (zkc(synced_at=1, generation=2), PATH),  # the spec changed since
    (zkc(deleting=True), None),
    (zkc(spec={"path": "relative"}), None),
    (zkc(spec={"path": 3}), None),
])
def test_unsynced_path(obj: dict[str, Any], path: str | None) -> None:
    assert unsynced_path(obj) == path


def test_lockout_message_names_both_identities() -> None:
    message = str(locked_out())
    assert message.startswith(f"spec.acl: would lock zkop out of {PATH}: the ACL would deny zkop read, write, admin")
    assert f"the ACL grants digest:{OPS_ID} read, write, create, delete, admin" in message
    assert "zkop authenticates as digest:ops:" in message and "ip:10.0.0.5" in message
    assert "is the hashed id itself" in message


def _obj(name: str, path: str, acl: Any = None, *, created: str = "2026-01-01T00:00:00Z",
         deleting: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"path": path, "stringData": "x"}
    if acl is not None:
        spec["acl"] = acl
    meta: dict[str, Any] = {"namespace": "default", "name": name, "creationTimestamp": created}
    if deleting:
        meta["deletionTimestamp"] = created
    return {"metadata": meta, "spec": spec}


def test_declared_acls_are_the_cluster_owners() -> None:
    objects = [
        _obj("guarded", "/a", OPS_SPEC_ACL),
        _obj("open", "/b"),  # no spec.acl: the data watch and aversion cover it
        _obj("younger", "/a", None, created="2026-02-01T00:00:00Z"),  # not the owner of /a
        _obj("older", "/c", OPS_SPEC_ACL, created="2025-01-01T00:00:00Z"),
        _obj("newer", "/c", None, created="2026-01-01T00:00:00Z"),
        _obj("going", "/d", OPS_SPEC_ACL, deleting=True),
        _obj("bad-acl", "/e", [{"scheme": "digest", "id": "ops:x", "permissions": ["read"]}]),
        _obj("bad-path", "a/../b", OPS_SPEC_ACL),
    ]
    assert declared_acls(objects) == {"/a": ("default/guarded", OPS_ACL), "/c": ("default/older", OPS_ACL)}


WORLD_ALL = (AclEntry("world", "anyone", 31),)
ACL_DRIFT: list[tuple[str, dict[str, AclRead | ZooKeeperError | None], list[tuple[str, str]]]] = [
    ("ACL as declared → nothing", {"/a": AclRead(OPS_ACL, 0)}, []),
    ("hand setACL (ZooKeeper fires no watch on it) → the owner is reconciled",
     {"/a": AclRead((*OPS_ACL, *WORLD_ALL), 1)}, [("/a", "default/guarded")]),
    ("redacted (zkop lost ADMIN) → reconciled, so its status says so",
     {"/a": AclRead((AclEntry("digest", "ops:x", 31),), 1)}, [("/a", "default/guarded")]),
    ("unreadable (zkop lost READ and ADMIN) → reconciled", {"/a": ZooKeeperNoAuth("refused")},
     [("/a", "default/guarded")]),
    ("absent → nothing (its exists watch covers it)", {"/a": None}, []),
]


@pytest.mark.parametrize(("rule", "read", "keys"), ACL_DRIFT, ids=[row[0] for row in ACL_DRIFT])
def test_decide_acl_drift(rule: str, read: dict[str, AclRead | ZooKeeperError | None],
                          keys: list[tuple[str, str]]) -> None:
    assert decide_acl_drift({"/a": ("default/guarded", OPS_ACL)}, read) == keys


@pytest.mark.parametrize(("facts", "changes"), [
    (sync(), {"record": None}),
    (sync(record=None), {"observed": Observed(b"x", 3), "obj": zkc()}),
    (delete(), {"owned": False}),
    (delete(), {"observed": Observed(b"true", 6)}),
])
def test_facts_learned_with_fast_replace_are_replace(facts: SyncFacts | DeleteFacts,
                                                     changes: dict[str, Any]) -> None:
    before = dataclasses.replace(facts)
    got = fast_replace(facts, **changes)
    assert got == dataclasses.replace(facts, **changes) and type(got) is type(facts)
    assert facts == before  # a new object; the facts it came from are unchanged
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.obj = {}  # type: ignore[misc]
    with pytest.raises(TypeError, match="no field nonsense"):
        fast_replace(facts, nonsense=1)


@pytest.mark.parametrize("record", [None, Observed(b"", 1), ours(), Observed(OTHER_CLUSTER.to_bytes(), 0),
                                    Observed(SAME_CLUSTER.to_bytes(), 0), Observed(b"not json", 0)])
@pytest.mark.parametrize("observed", [None, Observed(b"true", 3), Observed(b"old", 3),
                                      Observed(b"true", 0, acl=READ_ONLY_ACL, acl_version=1)])
@pytest.mark.parametrize("exists", [True, False])
def test_a_znode_known_in_advance_decides_as_if_fetched(record: Observed | None, observed: Observed | None,
                                                        exists: bool) -> None:
    # The znode is read with the record (one round trip): where the record alone decides (a
    # conflict, needs_znode False), the znode as read never changes the decision.
    facts = sync(record=record, exists=exists)
    if not needs_znode(facts.claim):
        assert decide_sync(fast_replace(facts, observed=observed)) == decide_sync(facts)
    else:
        assert decide_sync(fast_replace(facts, observed=observed)).claim == facts.claim
