"""Table tests of every rule of the ZooKeeperConfig reconciler (:mod:`zkop.zkconfig.decide`; no I/O).

Each row names the rule and where it comes from; the assertion covers every field of the
:class:`Decision` (fields a row does not name must be at their defaults).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from zkop.ownership.registry import Claim, OwnerStamp
from zkop.zkconfig.acldrift import decide_acl_drift, declared_acls
from zkop.zkconfig.decide import (
    UNREAD,
    Decision,
    DeleteFacts,
    Fetch,
    SyncFacts,
    decide_delete,
    decide_failure,
    decide_sync,
    deletion_target,
)
from zkop.zkconfig.objects import oldest, unsynced_path
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


def sync(*, obj: dict[str, Any] | None = None, spec: DesiredZnode | InvalidSpec | RefNotFound = DESIRED,
         cluster_owner: str | None = KEY, exists: bool = True, **facts: Any) -> SyncFacts:
    return SyncFacts(obj or zkc(), spec, cluster_owner, OURS, RECORD, lambda _: exists, **facts)


def delete(*, obj: dict[str, Any] | None = None, target: DesiredZnode | None = DESIRED,
           cluster_owner: str | None = KEY, **facts: Any) -> DeleteFacts:
    return DeleteFacts(obj or zkc(deleting=True), target, cluster_owner, OURS, **facts)


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


# rule (source), facts → decision fields
SYNC: list[tuple[str, SyncFacts, dict[str, Any]]] = [
    ("invalid spec → Stalled/InvalidSpec, finalizer added first (kstatus Stalled; decide rule 2)",
     sync(obj=zkc(finalizer=False), spec=InvalidSpec("spec.path", "must be absolute")),
     {"add_finalizer": True, "warn": True, "status": ("Error", "InvalidSpec", True)}),
    ("spec.acl locking zkop out → Stalled/InvalidSpec before anything is read or written, Warning Event "
     "(ZooKeeperServer.checkACL against zkop's identities)",
     sync(spec=locked_out()), {"warn": True, "status": ("Error", "InvalidSpec", True)}),
    ("missing dataFrom key → RefNotFound, retrying, not stalled (the ConfigMap informer wakes it)",
     sync(spec=RefNotFound(REF)),
     {"warn": True, "retrying": True, "status": ("Error", "RefNotFound", False)}),
    ("older object declaring the path owns it in the cluster → Stalled/PathConflict (oldest wins)",
     sync(cluster_owner="default/older"),
     {"warn": True, "status": ("Error", "PathConflict", True)}),
    ("new object: read the record and the znode while the finalizer is written (finalizer before any write)",
     sync(obj=zkc(finalizer=False)), {"fetch": Fetch.RECORD, "add_finalizer": True}),
    ("known object: read the record and the znode", sync(), {"fetch": Fetch.RECORD}),
    ("foreign record (other cluster) → Stalled/PathConflict; the znode is never read (ownership registry)",
     sync(record=Observed(OTHER_CLUSTER.to_bytes(), 0)),
     {"warn": True, "status": ("Error", "PathConflict", True), "claim": Claim((), conflict=OTHER_CLUSTER)}),
    ("record of another object of this cluster that still exists → Stalled/PathConflict",
     sync(record=Observed(SAME_CLUSTER.to_bytes(), 0), exists=True),
     {"warn": True, "status": ("Error", "PathConflict", True)}),
    ("unreadable record → Stalled/PathConflict", sync(record=Observed(b"<xml/>", 0)),
     {"warn": True, "status": ("Error", "PathConflict", True)}),
    ("record ours: now the znode", sync(record=ours()), {"fetch": Fetch.ZNODE}),
    ("nothing yet: create the record and the znode in one multi → Created",
     sync(record=None, observed=None),
     {"writes": (CreateNode(RECORD, OURS.to_bytes()), CreateNode(PATH, b"true")), "wrote": True,
      "znode_version": 0, "status": ("Synced", "Synced", False), "events": [("Normal", "Created")]}),
    ("adoption of a legacy znode: its ACL is read first (a node created with another ACL shows no aversion)",
     sync(record=None, observed=Observed(b"true", 4)), {"fetch": Fetch.ACL}),
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
     "Error/AclRedacted, nothing written",
     sync(spec=dataclasses.replace(DESIRED, acl=OPS_ACL), record=ours(),
          observed=Observed(b"true", 3, acl_version=1, acl=(AclEntry("digest", "ops:x", 31),))),
     {"require": (CheckVersion(RECORD, 2),), "status": ("Error", "AclRedacted", False)}),
    ("an ephemeral znode is not zkop's → Stalled/EphemeralNode, a Warning Event, nothing written",
     sync(record=ours(), observed=Observed(b"x", 0, ephemeral_owner=0x99)),
     {"warn": True, "status": ("Error", "EphemeralNode", True)}),
    ("an ephemeral znode is never claimed nor adopted (docs/operations.md: zkop manages persistent znodes only)",
     sync(record=None, observed=Observed(b"x", 0, ephemeral_owner=0x99, acl=DESIRED.acl)),
     {"warn": True, "status": ("Error", "EphemeralNode", True)}),
]


@pytest.mark.parametrize(("rule", "facts", "fields"), SYNC, ids=[row[0] for row in SYNC])
def test_decide_sync(rule: str, facts: SyncFacts, fields: dict[str, Any]) -> None:
    expect(decide_sync(facts), **fields)


DELETE: list[tuple[str, DeleteFacts, dict[str, Any]]] = [
    ("no finalizer of ours → nothing", delete(obj=zkc(deleting=True, finalizer=False)), {}),
    ("invalid spec → nothing was ever written: the finalizer goes", delete(target=None),
     {"remove_finalizer": True}),
    ("read the record's owner first", delete(), {"fetch": Fetch.RECORD}),
    ("record of another object → never ours to delete: the finalizer goes", delete(record_owner=SAME_CLUSTER),
     {"remove_finalizer": True}),
    ("no record → the finalizer goes", delete(record_owner=None), {"remove_finalizer": True}),
    ("an older object owns the path in the cluster → the finalizer goes", delete(record_owner=OURS,
                                                                                  cluster_owner="default/older"),
     {"remove_finalizer": True}),
    ("ours: read the znode afresh (numChildren is not covered by data watches)", delete(record_owner=OURS),
     {"fetch": Fetch.ZNODE}),
    ("ours, childless → deleted at its version, record released, Deleted, finalizer removed",
     delete(record_owner=OURS, observed=Observed(b"true", 6)),
     {"writes": (DeleteNode(PATH, 6),), "release": True, "remove_finalizer": True,
      "events": [("Normal", "Deleted")]}),
    ("ours, already gone → record released, finalizer removed, no Event",
     delete(record_owner=OURS, observed=None), {"release": True, "remove_finalizer": True}),
    ("deletionPolicy Orphan → znode kept, record released",
     delete(target=ORPHAN, record_owner=OURS, observed=Observed(b"true", 6)),
     {"release": True, "remove_finalizer": True}),
    ("deletion with children → arm a children watch first (never delete recursively)",
     delete(record_owner=OURS, observed=Observed(b"true", 6, num_children=2)), {"fetch": Fetch.CHILDREN}),
    ("deletion with children, watched → Error/HasChildren, retried, finalizer kept",
     delete(record_owner=OURS, observed=Observed(b"true", 6, num_children=2), children=("a", "b")),
     {"retrying": True, "warn": True, "retry": ..., "status": ("Error", "HasChildren", False)}),
    ("children gone once watched (znode read again) → deleted",
     delete(record_owner=OURS, observed=Observed(b"true", 7), children=()),
     {"writes": (DeleteNode(PATH, 7),), "release": True, "remove_finalizer": True,
      "events": [("Normal", "Deleted")]}),
]


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


def test_every_fetch_is_asked_once() -> None:
    """Filling in the fact a decision asked for never asks for it again (the reconciler loops on ``fetch``)."""
    facts = sync(obj=zkc(finalizer=False))
    asked = []
    answers: dict[Fetch, dict[str, Any]] = {
        Fetch.RECORD: {"record": None}, Fetch.ZNODE: {"observed": Observed(b"true", 4)},
        Fetch.ACL: {"observed": Observed(b"true", 4, acl=DESIRED.acl)},
    }
    while (decision := decide_sync(facts)).fetch is not None:
        asked.append(decision.fetch)
        facts = dataclasses.replace(facts, **answers[decision.fetch])
    assert asked == [Fetch.RECORD, Fetch.ZNODE, Fetch.ACL]
    assert decision.add_finalizer and decision.writes == (CreateNode(RECORD, OURS.to_bytes()),)
    assert facts.observed is not UNREAD


def _created(name: str, at: str, namespace: str = "default") -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "creationTimestamp": at}}


def test_oldest_object_owns_the_path_then_namespace_and_name() -> None:
    assert oldest([]) is None
    assert oldest([_created("b", "2026-01-02T00:00:00Z"), _created("a", "2026-01-03T00:00:00Z")]) == "default/b"
    assert oldest([_created("b", "2026-01-02T00:00:00Z"), _created("a", "2026-01-02T00:00:00Z", "team")]) \
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
    (delete(), {"record_owner": OURS}),
    (delete(record_owner=OURS), {"children": ("a",)}),
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
    # The reconciler hands over a znode answered from memory together with the record: the decision
    # must be the one the record alone would have led to (a conflict never looks at the znode).
    facts = sync(record=record, exists=exists)
    stepwise = decide_sync(facts)
    if stepwise.fetch is Fetch.ZNODE:
        stepwise = decide_sync(fast_replace(facts, observed=observed))
    assert decide_sync(fast_replace(facts, observed=observed)) == stepwise
