"""Every rule of the ZooKeeperConfig reconciler, as pure functions from facts to a :class:`Decision`.

controller-runtime's ``Reconcile`` reads, decides and writes in one function;
external-dns keeps the deciding apart (``plan.Calculate`` over what the source wants
and what the registry and provider hold). This module is that part for znodes: the
reconciler (:mod:`zkop.zkconfig.reconciler`) gathers the facts — the object, its parsed
spec (or the spec error), the oldest object in the cluster declaring the same path,
the ownership record, the znode — calls :func:`decide_sync` or :func:`decide_delete`,
and applies the :class:`Decision` it gets. Nothing here does I/O or reads a clock.

Facts are gathered lazily: a fact not read yet is :data:`UNREAD`, and a decision that
needs it names it in :attr:`Decision.fetch`; the reconciler reads it and decides again
(each fetch is asked for at most once per pass). So the order of the reads is itself a
rule here: a path owned elsewhere is never read, the ACL of a znode is read only when
it is adopted.

Rules of a live object (:func:`decide_sync`), in order:

1. the finalizer is added before anything is written to ZooKeeper;
2. an invalid spec is reported ``Stalled`` (``InvalidSpec``), a missing ``dataFrom``
   key as retrying (``RefNotFound``: the ConfigMap/Secret informer wakes the object);
3. the oldest object declaring a path owns it in the cluster (creationTimestamp, then
   namespace/name): any other is ``Stalled/PathConflict`` and writes nothing;
4. the ownership record decides across installations (:func:`zkop.ownership.registry.plan_claim`);
   a foreign record is ``Stalled/PathConflict`` and the znode is not even read;
5. adopting an existing znode (first claim) reads its ACL too, and says ``Adopted``; a znode zkop
   does not manage (an ephemeral one: ``Stalled/EphemeralNode``, a Warning Event) is neither
   claimed nor adopted;
6. :func:`zkop.zkconfig.plan.plan_sync` plans the znode; the claim and the plan are
   written in one ``multi``, conditional on the record as read
   (:func:`zkop.ownership.registry.claim_requires`: a record changed behind our back
   fails the write as a whole and the pass is planned again);
7. every change is an Event (``Created``/``Updated``; ``DriftCorrected`` when the spec
   did not change since the last sync and the znode is not at the version zkop last
   synced — ``status.znodeVersion`` — so a new value of the referenced ConfigMap or
   Secret is ``Updated``, naming its source, never drift); failures are Warning Events,
   sent only when the status changes.

Rules of an object being deleted (:func:`decide_delete`): no finalizer of ours → nothing;
an invalid spec → the finalizer goes (nothing was ever written); the znode is deleted
only if this object owns the path both in the cluster and in the record, then the
record is released; a znode with children is never deleted recursively: a children
watch wakes the object when they go (if none are left, the znode is read again at
once), meanwhile the object is retried; deletionPolicy Orphan keeps the znode.

ACL drift (:func:`declared_acls`, :func:`decide_acl_drift`): ZooKeeper fires no watch on
``setACL`` (Programmer's Guide, "ZooKeeper Watches": only getData, exists and getChildren set
one), so a periodic check reads the ACL of every managed znode whose owner declares
``spec.acl`` (one pipelined ``getACL`` each) and enqueues the owner of every znode whose ACL
differs from the declared one, or is redacted or unreadable (the pass then reports why). The
pass corrects it like any drift (``DriftCorrected``). Znodes with the open ACL are not checked:
their ``aversion`` is read with every data read, and a data watch covers the rest.

Failures (:func:`decide_failure`): ``NoAuth`` and a write conflict that outlived the
replans are reported at once; an unavailable ZooKeeper only once the same object has failed
``threshold`` times in a row over at least ``grace`` seconds: a connection lost for a moment (a
write whose reply never came, the session back within its timeout) is retried quietly.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from zkop.ownership.registry import Claim, OwnerStamp, claim_requires, plan_claim
from zkop.zkconfig.objects import finalizers, object_key, synced_znode_version, was_synced_at_generation
from zkop.zkconfig.plan import Outcome, Plan, plan_delete, plan_sync
from zkop.zkconfig.spec import FINALIZER, DesiredZnode, InvalidSpec, RefNotFound
from zkop.zookeeper.actions import Action, CheckVersion, CreateNode, Observed, SetData
from zkop.zookeeper.adapter import ZooKeeperError, ZooKeeperNoAuth, ZooKeeperUnavailable
from zkop.zookeeper.frozen import fast_init

__all__ = [
    "UNREAD",
    "Decision",
    "DeleteFacts",
    "Event",
    "Fetch",
    "SyncFacts",
    "Unread",
    "decide_delete",
    "decide_failure",
    "decide_sync",
    "deletion_target",
]

JSON = dict[str, Any]


class Unread(enum.Enum):
    """The type of :data:`UNREAD`."""

    UNREAD = "unread"


#: A fact not gathered yet.
UNREAD: Final = Unread.UNREAD


class Fetch(enum.Enum):
    """A fact a decision needs before it can be made.

    * ``RECORD``: the ownership record of the path (sync: started together with the znode
      read, both in flight while the finalizer is written; deletion: its owner stamp);
    * ``ZNODE``: the znode (sync: the read started with the record; deletion: a fresh
      read, since deletion depends on ``numChildren``, which data watches do not cover);
    * ``ACL``: the znode read again with its ACL (adoption of an existing znode);
    * ``CHILDREN``: arm a children watch on the znode; if it has no children left, read
      the znode again (deletion waiting for children).
    """

    RECORD = "record"
    ZNODE = "znode"
    ACL = "acl"
    CHILDREN = "children"


@fast_init
@dataclass(frozen=True)
class Event:
    """A Kubernetes Event about the object: ``type`` Normal or Warning, CamelCase ``reason``, a sentence."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@fast_init
@dataclass(frozen=True)
class SyncFacts:
    """What :func:`decide_sync` decides from.

    Attributes:
        obj: the ZooKeeperConfig (a dict, as the API server returns it).
        spec: the parsed spec, or why it could not be parsed.
        cluster_owner: ``namespace/name`` of the oldest object declaring ``spec.path`` (:func:`oldest`).
        stamp: this object's ownership stamp.
        record_path: the registry znode of ``spec.path``.
        owner_exists: whether the object named in a stamp of our cluster still exists (an
            in-memory lookup in the informer cache).
        record: the ownership record as read (``None``: absent), or :data:`UNREAD`.
        observed: the znode as read (``None``: absent), or :data:`UNREAD`.
    """

    obj: JSON
    spec: DesiredZnode | InvalidSpec | RefNotFound
    cluster_owner: str | None
    stamp: OwnerStamp
    record_path: str
    owner_exists: Callable[[OwnerStamp], bool]
    record: Observed | Unread | None = UNREAD
    observed: Observed | Unread | None = UNREAD


@fast_init
@dataclass(frozen=True)
class DeleteFacts:
    """What :func:`decide_delete` decides from.

    Attributes:
        obj: the ZooKeeperConfig being deleted (``metadata.deletionTimestamp`` set).
        target: the znode it declares (:func:`deletion_target`), ``None`` for an invalid spec.
        cluster_owner: ``namespace/name`` of the oldest object declaring the path.
        stamp: this object's ownership stamp.
        record_owner: the stamp in the ownership record (``None``: none or unreadable), or :data:`UNREAD`.
        observed: the znode read afresh (``None``: absent), or :data:`UNREAD`.
        children: the children found when the children watch was armed (``None``: the znode
            is gone), or :data:`UNREAD`.
    """

    obj: JSON
    target: DesiredZnode | None
    cluster_owner: str | None
    stamp: OwnerStamp
    record_owner: OwnerStamp | Unread | None = UNREAD
    observed: Observed | Unread | None = UNREAD
    children: tuple[str, ...] | Unread | None = UNREAD


@fast_init
@dataclass(frozen=True)
class Decision:
    """One reconcile pass, as values; the reconciler applies the fields in this order.

    Attributes:
        fetch: a fact still missing: read it and decide again. Only ``add_finalizer`` is
            applied meanwhile (while the reads are in flight).
        add_finalizer: add the finalizer first; if the object is gone, stop.
        claim: the ownership claim the writes are made under.
        writes: ZooKeeper actions (the claim's record writes, then the znode's), in one ``multi``
            for a live object.
        require: preconditions checked in the same ``multi`` (the record's version).
        plan: the znode plan ``writes`` came from (``None`` when nothing was planned).
        release: release the ownership record (after a deletion).
        events: Normal Events, sent after the writes.
        drift: count a drift correction (``zkop_drift_corrections_total``).
        znode_version: the znode's data version (ZooKeeper ``Stat.version``) once the writes
            succeed, for ``status.znodeVersion``; ``None`` unless the outcome is Synced.
        outcome: the status to show (``None``: leave status alone); written only if it changed.
        wrote: ZooKeeper changed in this pass (moves ``lastSyncedTime``).
        retrying: a retry is queued (``Reconciling=True``).
        warn: send a Warning Event (``outcome.reason``) if the status was written.
        remove_finalizer: let the object go.
        retry: requeue with backoff, with this message (the controller's ``RetryableError``).
    """

    fetch: Fetch | None = None
    add_finalizer: bool = False
    claim: Claim | None = None
    writes: tuple[Action, ...] = ()
    require: tuple[CheckVersion, ...] = ()
    plan: Plan | None = None
    release: bool = False
    events: tuple[Event, ...] = field(default=())
    drift: bool = False
    znode_version: int | None = None
    outcome: Outcome | None = None
    wrote: bool = False
    retrying: bool = False
    warn: bool = False
    remove_finalizer: bool = False
    retry: str | None = None


#: The first decision of every pass over a live object: only the record is asked for. Decisions are
#: frozen values, so these two are shared instead of built each time (16 fields set one by one).
_FETCH_RECORD: Final = {flag: Decision(fetch=Fetch.RECORD, add_finalizer=flag) for flag in (False, True)}


def version_after(path: str, plan: Plan, observed: Observed | None) -> int | None:
    """The data version the znode at ``path`` has once ``plan`` succeeds (``None`` if it is not Synced).

    ZooKeeper gives a created node version 0 and bumps the version by one on each ``setData``;
    zkop's ``SetData`` is conditional on the version it read (``DataTree.setData``), so the
    result is exact without reading it back.
    """
    if plan.outcome.state != "Synced":
        return None
    version = observed.version if observed is not None else None
    for action in plan.actions:
        if isinstance(action, CreateNode) and action.path == path:
            version = 0
        elif isinstance(action, SetData) and action.path == path:
            version = action.expected_version + 1
    return version


def deletion_target(obj: JSON, spec: DesiredZnode | InvalidSpec | RefNotFound) -> DesiredZnode | None:
    """The znode a deleted object declares; ``None`` for an invalid spec (nothing was ever written).

    A ``dataFrom`` key that is missing does not matter for deletion: the bytes are not needed.
    """
    if isinstance(spec, InvalidSpec):
        return None
    if isinstance(spec, RefNotFound):
        return DesiredZnode(path=obj["spec"]["path"], data=b"", source=spec.ref,
                            deletion_policy=obj["spec"].get("deletionPolicy", "Delete"))
    return spec


def path_conflict(obj: JSON, owner: str) -> Outcome:
    """The outcome of an object that loses its path to ``owner`` (``Stalled``: writes nothing)."""
    path = (obj.get("spec") or {}).get("path")
    message = f"path {path} is owned by {owner}; this object writes nothing"
    return Outcome("Error", "PathConflict", message, False, stalled=True)


def source_changed(obj: JSON, spec: DesiredZnode, observed: Observed | None, plan: Plan) -> bool:
    """True if only the data changes and the znode is still at the version zkop last synced.

    Then nobody touched the znode: the bytes of the referenced ConfigMap/Secret changed.
    Without a recorded version (objects synced before zkop recorded it) this is ``False``.
    """
    return (spec.source is not None and observed is not None
            and synced_znode_version(obj) == observed.version
            and all(isinstance(action, SetData) for action in plan.actions))


def change_event(obj: JSON, plan: Plan, spec: DesiredZnode | None = None,
                 observed: Observed | None = None) -> tuple[Event | None, bool]:
    """The Normal Event for what ``plan`` changes, and whether it is a drift correction.

    ``Created``/``Updated``/``Deleted``; a create or update while the object is Synced at
    its generation means someone edited or deleted the znode by hand (``DriftCorrected``),
    unless the znode is at the version zkop last synced and the data comes from a
    ConfigMap/Secret: then that source changed, an ``Updated`` that names it.
    """
    if not plan.changes:
        return None, False
    reason = {"created": "Created", "updated": "Updated", "deleted": "Deleted"}[plan.changes[0]]
    message = plan.note or plan.outcome.message
    if reason not in ("Updated", "Created") or not was_synced_at_generation(obj):
        return Event("Normal", reason, message), False
    if spec is not None and spec.source is not None and source_changed(obj, spec, observed, plan):
        ref = spec.source
        return Event("Normal", "Updated", f"{ref.kind} {ref.name} key {ref.key} changed: {message}"), False
    return Event("Normal", "DriftCorrected", message), True


# --- decisions -----------------------------------------------------------------------------------

def decide_sync(facts: SyncFacts) -> Decision:
    """Decide one pass over a live ZooKeeperConfig (rules 1–7 of the module docstring).

    Returns:
        A decision; with ``fetch`` set, only ``add_finalizer`` may be set besides.
    """
    obj, spec = facts.obj, facts.spec
    add_finalizer = FINALIZER not in finalizers(obj)
    if isinstance(spec, InvalidSpec):
        return Decision(add_finalizer=add_finalizer, warn=True,
                        outcome=Outcome("Error", "InvalidSpec", f"invalid spec: {spec}", False, stalled=True))
    if isinstance(spec, RefNotFound):
        # Not stalled: the ConfigMap/Secret informer re-enqueues this object when the key appears.
        return Decision(add_finalizer=add_finalizer, warn=True, retrying=True,
                        outcome=Outcome("Error", "RefNotFound", str(spec), False))
    if facts.cluster_owner is not None and facts.cluster_owner != object_key(obj):
        return Decision(add_finalizer=add_finalizer, warn=True,
                        outcome=path_conflict(obj, f"{facts.cluster_owner} (older object in this cluster)"))
    if isinstance(facts.record, Unread):
        return _FETCH_RECORD[add_finalizer]
    claim = plan_claim(facts.record_path, facts.stamp, facts.record, facts.owner_exists)
    if claim.conflict is not None:
        return Decision(add_finalizer=add_finalizer, claim=claim, warn=True,
                        outcome=path_conflict(obj, claim.conflict.describe()))
    observed = facts.observed
    if isinstance(observed, Unread):
        return Decision(fetch=Fetch.ZNODE, add_finalizer=add_finalizer, claim=claim)
    if claim.new and observed is not None and observed.acl is None:
        # First claim (adoption of a legacy znode): read the ACL too; a node created
        # with another ACL shows no ACL version change, so it would otherwise look in sync.
        return Decision(fetch=Fetch.ACL, add_finalizer=add_finalizer, claim=claim)
    plan = plan_sync(spec, observed)
    if plan.outcome.stalled:
        # A znode zkop does not manage (ephemeral): nothing is claimed, nothing announced as adopted.
        return Decision(add_finalizer=add_finalizer, warn=True, outcome=plan.outcome)
    events: list[Event] = []
    if claim.new and observed is not None:
        events.append(Event("Normal", "Adopted", f"adopted existing znode {spec.path} (version {observed.version})"))
    change, drift = change_event(obj, plan, spec, observed)
    events += [change] if change is not None else []
    return Decision(
        add_finalizer=add_finalizer, claim=claim, writes=(*claim.actions, *plan.actions),
        require=claim_requires(facts.record_path, claim, facts.record), plan=plan, events=tuple(events),
        drift=drift, znode_version=version_after(spec.path, plan, observed), outcome=plan.outcome,
        wrote=plan.writes,
    )


def decide_delete(facts: DeleteFacts) -> Decision:
    """Decide one pass over a ZooKeeperConfig being deleted (see the module docstring)."""
    obj, target = facts.obj, facts.target
    if FINALIZER not in finalizers(obj):
        return Decision()
    if target is None:
        # Nothing was ever written for an invalid spec: just let the object go.
        return Decision(remove_finalizer=True)
    if isinstance(facts.record_owner, Unread):
        return Decision(fetch=Fetch.RECORD)
    ours = facts.record_owner is not None and facts.record_owner.same_object(facts.stamp)
    if facts.cluster_owner not in (None, object_key(obj)) or not ours:
        return Decision(remove_finalizer=True)  # never ours to delete
    if isinstance(facts.observed, Unread):
        return Decision(fetch=Fetch.ZNODE)
    plan = plan_delete(target, facts.observed)
    if plan.outcome.reason == "HasChildren" and isinstance(facts.children, Unread):
        # Wake up when the children go (a namespace deleting a whole tree converges leaves
        # first), not only when the backoff expires; if they went meanwhile, go on at once.
        return Decision(fetch=Fetch.CHILDREN, plan=plan)
    if not plan.outcome.ready:
        return Decision(plan=plan, outcome=plan.outcome, retrying=True, warn=True, retry=plan.outcome.message)
    change, _ = change_event(obj, plan)
    return Decision(writes=plan.actions, plan=plan, release=True, events=(change,) if change is not None else (),
                    remove_finalizer=True)


def decide_failure(err: ZooKeeperError, failures: int, failing_for: float, *, threshold: int,
                   grace: float) -> Decision:
    """Decide what a pass that ZooKeeper failed reports; it is always retried with backoff.

    Args:
        err: the failure.
        failures: consecutive passes of this object that failed with :class:`ZooKeeperUnavailable`,
            this one included.
        failing_for: seconds since the first of those passes failed (0 for the first).
        threshold: from how many such failures on the status says ``ZooKeeperUnavailable``.
        grace: seconds the failures must have lasted, too, before the status says so: kazoo
            reconnects after 0.2 s doubling (jittered), so a connection lost for less than a second
            is back within about three.
    """
    if isinstance(err, ZooKeeperNoAuth):
        outcome = Outcome("Error", "NoAuth", str(err), False)
    elif isinstance(err, ZooKeeperUnavailable):
        if failures < threshold or failing_for < grace:
            return Decision(retry=str(err))  # a blip: retry quietly before telling anyone
        outcome = Outcome("Error", "ZooKeeperUnavailable", str(err), False)
    else:
        outcome = Outcome("Error", "Conflict", f"znode kept changing during reconcile: {err}", False)
    return Decision(outcome=outcome, retrying=True, warn=True, retry=str(err))
