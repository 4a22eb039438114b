"""Every rule of the ZooKeeperConfig reconciler, as pure functions from facts to a :class:`Decision`.

Pre-checks before any read (:func:`precheck_sync`, :func:`precheck_delete`), what to gather
(:func:`needs_znode`, :func:`needs_acl`, :func:`needs_children`), then one :func:`decide_sync` or
:func:`decide_delete` over the complete facts (docs/architecture.md, "One reconcile shape"). No I/O,
no clock.

Rules of a live object, in order:

1. the finalizer is added before anything is written to ZooKeeper;
2. an invalid spec is reported ``Stalled`` (``InvalidSpec``), and so is a value from a Secret
   without ``spec.acl`` while zkop holds no authenticated identity to keep it to (``SecretNeedsAcl``:
   it is never written world-readable unless ``spec.acl`` says so); an object the ensemble's tenancy
   rules do not admit (:meth:`zkop.feature.tenancy.TenancyPolicy.admit`) is ``Stalled``
   (``NamespaceNotAllowed``/``PathNotAllowed``, a Warning Event), gets no finalizer and reads and
   writes nothing; a missing ``dataFrom`` key is reported as retrying (``RefNotFound``: the
   ConfigMap/Secret informer wakes the object);
3. the oldest object declaring a path owns it in the cluster (:func:`zkop.ownership.oldest.oldest`):
   any other is ``Stalled/PathConflict`` and reads and writes nothing;
4. the ownership record decides across installations (:func:`zkop.ownership.registry.plan_claim`):
   a foreign record is ``Stalled/PathConflict``; the znode, read with the record in the same
   round trip, is not looked at (:func:`needs_znode`);
5. adopting an existing znode (first claim) reads its ACL too (:func:`needs_acl`) and says
   ``Adopted``, if the ensemble's adoption mode lets it
   (:meth:`zkop.feature.tenancy.TenancyPolicy.may_adopt`); otherwise it is ``Stalled``
   (``AdoptionNotRequested``/``AdoptionRefused``), the znode untouched; a znode zkop does not
   manage (an ephemeral one: ``Stalled/EphemeralNode``, a Warning Event) is neither claimed nor
   adopted;
6. :func:`zkop.zkconfig.plan.plan_sync` plans the znode; the claim and the plan are written in one
   ``multi``, conditional on the record as read (:func:`zkop.ownership.registry.claim_requires`):
   a record changed behind our back fails the write as a whole and the pass is planned again;
7. every change is an Event (``Created``/``Updated``; ``DriftCorrected`` only when the spec is
   unchanged since the last sync and the znode is not at the version zkop last synced, so a new
   referenced value is ``Updated``); failures are Warning Events, sent only when the status changes.

Rules of an object being deleted: no finalizer of ours → nothing; an invalid spec → the
finalizer goes (nothing was ever written); the znode is deleted only if this object owns the
path both in the cluster and in the record (:func:`owns_for_deletion`), then the record is
released; an owner the tenancy rules no longer admit leaves its znode in place and only releases
the record (a namespace that lost a path may not delete it either: a Warning Event says so); a
znode with children is never deleted recursively: a children watch wakes the object when they go
(:func:`needs_children`), meanwhile it is retried; deletionPolicy Orphan keeps the znode.

Failures (:func:`decide_failure`): ``NoAuth`` and a write conflict that outlived the replans are
reported at once; an unavailable ZooKeeper only once the same object has failed ``threshold``
times in a row over at least ``grace`` seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from zkop.feature.tenancy import Refusal
from zkop.kube.types import JSON
from zkop.ownership.registry import Claim, OwnerStamp, claim_requires, plan_claim
from zkop.runtime.cache.keys import meta_namespace_key
from zkop.zkconfig.objects import finalizers, synced_znode_version, was_synced_at_generation
from zkop.zkconfig.plan import Outcome, Plan, plan_delete, plan_sync
from zkop.zkconfig.spec import FINALIZER, DesiredZnode, InvalidSpec, RefNotFound, SecretNeedsAcl
from zkop.zookeeper.actions import OPEN_ACL, Action, CheckVersion, CreateNode, Observed, SetAcl, SetData
from zkop.zookeeper.errors import ZooKeeperError, ZooKeeperNoAuth, ZooKeeperUnavailable
from zkop.zookeeper.frozen import fast_init

__all__ = [
    "Decision",
    "DeleteFacts",
    "Event",
    "SyncFacts",
    "claim_of",
    "decide_delete",
    "decide_failure",
    "decide_sync",
    "deletion_target",
    "needs_acl",
    "needs_children",
    "needs_znode",
    "owns_for_deletion",
    "precheck_delete",
    "precheck_sync",
    "refused",
]

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
    """What :func:`decide_sync` decides from, once :func:`precheck_sync` let the object through.

    Attributes:
        obj: the ZooKeeperConfig (a dict, as the API server returns it).
        spec: the parsed spec.
        record_path: the registry znode of ``spec.path``.
        record: the ownership record as read (``None``: absent).
        claim: :func:`claim_of` the record.
        observed: the znode as read (``None``: absent, or not needed: :func:`needs_znode`).
        adoption: why adopting a pre-existing unowned znode is refused
            (:meth:`~zkop.feature.tenancy.TenancyPolicy.may_adopt`; ``None``: it may be adopted).
    """

    obj: JSON
    spec: DesiredZnode
    record_path: str
    record: Observed | None
    claim: Claim
    observed: Observed | None
    adoption: Refusal | None = None


@fast_init
@dataclass(frozen=True)
class DeleteFacts:
    """What :func:`decide_delete` decides from, once :func:`precheck_delete` let the object through.

    Attributes:
        obj: the ZooKeeperConfig being deleted (``metadata.deletionTimestamp`` set).
        target: the znode it declares (:func:`deletion_target`).
        owned: :func:`owns_for_deletion`.
        observed: the znode read afresh (``None``: absent, or not read since not owned or refused); read
            again after a children watch found no children left.
        refusal: the tenancy rules no longer admit the object (``None``: admitted): the znode stays.
    """

    obj: JSON
    target: DesiredZnode
    owned: bool
    observed: Observed | None
    refusal: Refusal | None = None


@fast_init
@dataclass(frozen=True)
class Decision:
    """One reconcile pass, as values; the reconciler applies the fields in this order.

    Attributes:
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


def secret_acl_tightened(obj: JSON, spec: DesiredZnode, observed: Observed | None, plan: Plan) -> bool:
    """True if ``plan`` takes the open ACL an older zkop gave a Secret's value away (not a hand edit).

    The znode is at the version zkop last synced and its ACL is still the one it was created with
    (``aversion`` 0: a hand ``setAcl`` bumps it), the open ACL; zkop now keeps a Secret's value to
    ``spec.acl`` or to its own identities (:func:`zkop.zkconfig.spec.parse_spec`).
    """
    return (spec.source is not None and spec.source.secret and observed is not None
            and observed.acl == OPEN_ACL and observed.acl_version == 0 and spec.acl != OPEN_ACL
            and synced_znode_version(obj) == observed.version
            and any(isinstance(action, SetAcl) for action in plan.actions))


def change_event(obj: JSON, plan: Plan, spec: DesiredZnode | None = None,
                 observed: Observed | None = None) -> tuple[Event | None, bool]:
    """The Normal Event for what ``plan`` changes, and whether it is a drift correction.

    ``Created``/``Updated``/``Deleted``; a create or update while the object is Synced at
    its generation means someone edited or deleted the znode by hand (``DriftCorrected``),
    unless the znode is at the version zkop last synced and the data comes from a
    ConfigMap/Secret: then that source changed, an ``Updated`` that names it; or an older zkop's open
    ACL on a Secret's value is tightened (:func:`secret_acl_tightened`), an ``Updated`` too.
    """
    if not plan.changes:
        return None, False
    reason = {"created": "Created", "updated": "Updated", "deleted": "Deleted"}[plan.changes[0]]
    message = plan.note or plan.outcome.message
    if reason not in ("Updated", "Created") or not was_synced_at_generation(obj):
        return Event("Normal", reason, message), False
    if spec is not None and secret_acl_tightened(obj, spec, observed, plan):
        assert spec.source is not None
        return Event("Normal", "Updated", f"{message}: the value comes from Secret {spec.source.name}, so the "
                                          "ACL an older zkop wrote (world:anyone) was tightened"), False
    if spec is not None and spec.source is not None and source_changed(obj, spec, observed, plan):
        ref = spec.source
        return Event("Normal", "Updated", f"{ref.kind} {ref.name} key {ref.key} changed: {message}"), False
    return Event("Normal", "DriftCorrected", message), True


# --- pre-checks and predicates: what to read -------------------------------------------------

def refusal_outcome(refusal: Refusal, message: str) -> Outcome:
    """The ``Stalled`` outcome of a tenancy or adoption refusal (:mod:`zkop.feature.tenancy`), with ``message``.

    One line per reason, so that every status reason zkop reports is a literal here (docs/operations.md,
    "Troubleshooting by status reason", is checked against them).
    """
    if refusal.reason == "ReservedPath":
        return Outcome("Error", "ReservedPath", message, False, stalled=True)
    if refusal.reason == "NamespaceNotAllowed":
        return Outcome("Error", "NamespaceNotAllowed", message, False, stalled=True)
    if refusal.reason == "PathNotAllowed":
        return Outcome("Error", "PathNotAllowed", message, False, stalled=True)
    if refusal.reason == "AdoptionRefused":
        return Outcome("Error", "AdoptionRefused", message, False, stalled=True)
    return Outcome("Error", "AdoptionNotRequested", message, False, stalled=True)


def refused(refusal: Refusal) -> Decision:
    """The decision of a live object the tenancy rules do not admit: ``Stalled``, a Warning Event, no finalizer.

    No finalizer: an object that never wrote has nothing to clean up, so deleting it is immediate.
    One that wrote before the rules changed keeps the finalizer it has (see :func:`decide_delete`).
    """
    return Decision(warn=True, outcome=refusal_outcome(refusal, f"{refusal.message}; nothing is written"))


def precheck_sync(obj: JSON, spec: DesiredZnode | InvalidSpec | RefNotFound,
                  cluster_owner: str | None, refusal: Refusal | None = None) -> Decision | None:
    """The decision of a live object that needs no read (rules 1–3), or ``None``: gather the facts.

    ``cluster_owner`` is the key of the oldest admitted object in the cluster declaring ``spec.path``;
    ``refusal``: why the tenancy rules do not admit this object (``None``: admitted).
    """
    add_finalizer = FINALIZER not in finalizers(obj)
    if isinstance(spec, SecretNeedsAcl):  # a Secret's value, no spec.acl, no identity of zkop's to keep it to
        return Decision(add_finalizer=add_finalizer, warn=True,
                        outcome=Outcome("Error", "SecretNeedsAcl", f"refused: {spec}; nothing is written", False,
                                        stalled=True))
    if isinstance(spec, InvalidSpec):
        return Decision(add_finalizer=add_finalizer, warn=True,
                        outcome=Outcome("Error", "InvalidSpec", f"invalid spec: {spec}", False, stalled=True))
    if refusal is not None:
        return refused(refusal)
    if isinstance(spec, RefNotFound):
        # Not stalled: the ConfigMap/Secret informer re-enqueues this object when the key appears.
        return Decision(add_finalizer=add_finalizer, warn=True, retrying=True,
                        outcome=Outcome("Error", "RefNotFound", str(spec), False))
    if cluster_owner is not None and cluster_owner != meta_namespace_key(obj):
        return Decision(add_finalizer=add_finalizer, warn=True,
                        outcome=path_conflict(obj, f"{cluster_owner} (older object in this cluster)"))
    return None


def claim_of(record_path: str, stamp: OwnerStamp, record: Observed | None,
             owner_exists: Callable[[OwnerStamp], bool]) -> Claim:
    """The claim this object makes on ``record_path`` given the record as read (:func:`plan_claim`)."""
    return plan_claim(record_path, stamp, record, owner_exists)


def needs_znode(claim: Claim) -> bool:
    """True unless the record is foreign: a conflict writes nothing, so the znode's answer is not looked at."""
    return claim.conflict is None


def needs_acl(claim: Claim, observed: Observed | None) -> bool:
    """True when a first claim adopts an existing znode whose ACL was not read.

    A node created with another ACL shows no ``aversion`` change, so without the ACL it would look in sync.
    """
    return claim.new and observed is not None and observed.acl is None


def precheck_delete(obj: JSON, target: DesiredZnode | None) -> Decision | None:
    """The decision of an object being deleted that needs no read, or ``None``: gather the facts.

    No finalizer of ours → nothing; an invalid spec (``target`` ``None``) → the finalizer goes.
    """
    if FINALIZER not in finalizers(obj):
        return Decision()
    if target is None:
        return Decision(remove_finalizer=True)  # nothing was ever written for an invalid spec
    return None


def owns_for_deletion(obj: JSON, cluster_owner: str | None, stamp: OwnerStamp,
                      record_owner: OwnerStamp | None) -> bool:
    """True if the object owns its path in the cluster and in the record: only then is the znode read and deleted."""
    ours = record_owner is not None and record_owner.same_object(stamp)
    return ours and cluster_owner in (None, meta_namespace_key(obj))


def needs_children(target: DesiredZnode, observed: Observed | None) -> bool:
    """True if the deletion waits for children: arm a children watch (and read again if none are left)."""
    return plan_delete(target, observed).outcome.reason == "HasChildren"


# --- decisions -----------------------------------------------------------------------------------

def decide_sync(facts: SyncFacts) -> Decision:
    """Decide one pass over a live ZooKeeperConfig from complete facts (rules 1, 4–7 of the module docstring)."""
    obj, spec, claim, observed = facts.obj, facts.spec, facts.claim, facts.observed
    add_finalizer = FINALIZER not in finalizers(obj)
    if claim.conflict is not None:
        return Decision(add_finalizer=add_finalizer, claim=claim, warn=True,
                        outcome=path_conflict(obj, claim.conflict.describe()))
    plan = plan_sync(spec, observed)
    if plan.outcome.stalled:
        # A znode zkop does not manage (ephemeral): nothing is claimed, nothing announced as adopted.
        return Decision(add_finalizer=add_finalizer, warn=True, outcome=plan.outcome)
    events: list[Event] = []
    if claim.new and observed is not None and facts.adoption is not None:
        # Nobody owns the znode and this ensemble does not let this object adopt it: leave it as it is.
        return Decision(add_finalizer=add_finalizer, warn=True,
                        outcome=refusal_outcome(facts.adoption, f"znode {spec.path}: {facts.adoption.message}"))
    if claim.new and observed is not None:
        events.append(Event("Normal", "Adopted", f"adopted existing znode {spec.path} (version {observed.version})"))
    change, drift = change_event(obj, plan, spec, observed)
    events += [change] if change is not None else []
    return Decision(
        add_finalizer=add_finalizer, claim=claim, writes=(*claim.actions, *plan.actions),
        require=claim_requires(facts.record_path, claim, facts.record), plan=plan, events=tuple(events),
        drift=drift, znode_version=version_after(spec.path, plan, observed), outcome=plan.outcome,
        wrote=plan.writes, warn=not plan.outcome.ready,  # AclRedacted: every Error reason is a Warning Event too
    )


def decide_delete(facts: DeleteFacts) -> Decision:
    """Decide one pass over a ZooKeeperConfig being deleted from complete facts (see the module docstring)."""
    if not facts.owned:
        return Decision(remove_finalizer=True)  # never ours to delete
    if facts.refusal is not None:
        note = Event("Warning", facts.refusal.reason, f"znode {facts.target.path} left in place, not deleted: "
                                                      f"{facts.refusal.message}")
        return Decision(release=True, events=(note,), remove_finalizer=True)
    plan = plan_delete(facts.target, facts.observed)
    if not plan.outcome.ready:
        return Decision(plan=plan, outcome=plan.outcome, retrying=True, warn=True, retry=plan.outcome.message)
    change, _ = change_event(facts.obj, plan)
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
