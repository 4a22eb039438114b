"""The service bridge's claims in zkop's ownership registry (:mod:`zkop.ownership.registry`); pure.

Every record the bridge writes (a ``json`` record, a Curator instance) is claimed in the ownership
registry by the same rules as a ZooKeeperConfig's znode (:func:`~zkop.ownership.registry.plan_claim`),
for an owner that says it is the bridge: an :class:`~zkop.ownership.registry.OwnerStamp` of kind
``Service`` naming the Service. :func:`claim_service_plan` turns a
:func:`~zkop.services.bridge.plan.plan_service` plan into :class:`Write` s, one ZooKeeper ``multi``
each: a record's write with its claim's (or, when the claim writes nothing, a ``check`` of the
claim's version), a deletion with its release. Rules per record node:

=====================================  ==============================================================
claim as read                           what the bridge does
=====================================  ==============================================================
absent or empty                         claim it with the record's write; an existing record of this
                                        zkop (an older zkop's, unclaimed) is adopted: claimed alone
ours (this Service, this cluster)       write as planned, the claim checked at its version
this cluster's bridge, another Service  take it over unless that Service still publishes the path
anything else                           conflict: nothing written, reported as ``RecordConflict``
=====================================  ==============================================================

A deletion (a Curator instance no longer wanted, a full sync's orphan) goes only where the claim
is absent, empty or this cluster's bridge's (:func:`may_release`), and releases that claim in the
same ``multi``; a node claimed by anyone else is never deleted, nor the containers above it.
Containers (shared by a namespace's Services) are not claimed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from zkop.ownership.registry import OwnerStamp, claim_requires, plan_claim, plan_release, record_owner
from zkop.services.bridge.formats import DesiredNode
from zkop.services.bridge.plan import ObservedNode, ServicePlan
from zkop.zookeeper.actions import Action, CheckVersion, DeleteNode, Observed
from zkop.zookeeper.paths import parent_paths

__all__ = [
    "SERVICE_KIND",
    "ClaimedPlan",
    "Claims",
    "Write",
    "claim_service_plan",
    "may_release",
    "release_orphans",
    "service_stamp",
]

#: The ``kind`` of the bridge's owner stamps.
SERVICE_KIND = "Service"


def service_stamp(cluster_id: str, namespace: str, name: str, uid: str) -> OwnerStamp:
    """The bridge's owner stamp for Service ``namespace/name`` (``uid``) of installation ``cluster_id``."""
    return OwnerStamp(cluster_id, namespace, name, uid, SERVICE_KIND)


@dataclass(frozen=True)
class Write:
    """One node's change and its claim's, made in one ZooKeeper ``multi`` (all or nothing).

    Attributes:
        path: the bridge's node.
        node: the node's write; ``None`` when only the claim is written (an older zkop's record adopted).
        claim: the registry writes (claim, take-over, uid refresh or release).
        require: versions checked in the same ``multi`` (the claim as read, or the adopted node).
    """

    path: str
    node: Action | None
    claim: tuple[Action, ...] = ()
    require: tuple[CheckVersion, ...] = ()

    @property
    def actions(self) -> tuple[Action, ...]:
        """Everything the ``multi`` writes: the node's write first, then the registry's."""
        return ((self.node,) if self.node is not None else ()) + self.claim


@dataclass(frozen=True)
class Claims:
    """The registry as the bridge read it for one Service.

    Attributes:
        stamp: this Service's stamp (:func:`service_stamp`).
        root: the registry root (``--registry-root``).
        records: the registry records read, by the bridge's node path (absent: no record).
        publishes: whether a Service of this cluster named in a stamp still publishes the path (the take-over rule).
    """

    stamp: OwnerStamp
    root: str
    records: Mapping[str, Observed]
    publishes: Callable[[OwnerStamp], bool]

    def record_path(self, path: str) -> str:
        """The registry znode of the bridge's node ``path``."""
        return self.root.rstrip("/") + path


@dataclass(frozen=True)
class ClaimedPlan:
    """The result of :func:`claim_service_plan`.

    Attributes:
        writes: the ``multi`` s to make, in the plan's order (containers, records, deletions).
        foreign: the plan's foreign paths and the records another owner claims, left alone.
        claimed_by: ``(path, owner)`` for each record another owner claims, for the report.
        adopted: records of this zkop without a claim that are now claimed.
    """

    writes: tuple[Write, ...]
    foreign: tuple[str, ...] = ()
    claimed_by: tuple[tuple[str, str], ...] = ()
    adopted: tuple[str, ...] = ()


def may_release(record: Observed | None, cluster_id: str) -> bool:
    """True if the bridge of ``cluster_id`` may delete a node whose claim is ``record``: no claim, an empty one,
    or one of this cluster's bridge (pure)."""
    if record is None or record.data == b"":
        return True
    owner = record_owner(record)
    return owner is not None and owner.cluster_id == cluster_id and owner.kind == SERVICE_KIND


def _owner(record: Observed | None) -> str:
    owner = record_owner(record)
    return owner.describe() if owner is not None else "an unreadable ownership record"


def _release(record_path: str, record: Observed | None) -> tuple[Action, ...]:
    owner = record_owner(record)
    if owner is None:
        return ()
    action = plan_release(record_path, owner, record)
    return (action,) if action is not None else ()


def claim_service_plan(plan: ServicePlan, desired: Sequence[DesiredNode], observed: Mapping[str, ObservedNode],
                       claims: Claims) -> ClaimedPlan:
    """Claim every record ``plan`` writes and release every one it deletes, by the module's rules (pure).

    Args:
        plan: :func:`~zkop.services.bridge.plan.plan_service`'s plan for the Service.
        desired: the Service's nodes (containers are not claimed).
        observed: the existing nodes among the desired paths, by path.
        claims: the registry records of the desired records and of the key path's children.
    """
    cluster_id = claims.stamp.cluster_id
    records = {node.path for node in desired if not node.container}
    foreign = list(plan.foreign)
    claimed_by: list[tuple[str, str]] = []
    adopted: list[str] = []
    writes: list[Write] = []
    planned = {action.path for action in plan.actions}
    for action in plan.actions:
        record_path = claims.record_path(action.path)
        record = claims.records.get(action.path)
        if isinstance(action, DeleteNode):
            if may_release(record, cluster_id):
                writes.append(Write(action.path, action, _release(record_path, record)))
            else:
                foreign.append(action.path)
                claimed_by.append((action.path, _owner(record)))
            continue
        if action.path not in records:
            writes.append(Write(action.path, action))  # a container
            continue
        claim = plan_claim(record_path, claims.stamp, record, claims.publishes)
        if claim.conflict is not None:
            foreign.append(action.path)
            claimed_by.append((action.path, claim.conflict.describe()))
            continue
        writes.append(Write(action.path, action, claim.actions, claim_requires(record_path, claim, record)))
    for node in desired:
        current = observed.get(node.path)
        if node.container or node.path in planned or node.path in plan.foreign or current is None:
            continue
        if not current.ours(cluster_id):
            continue
        record_path = claims.record_path(node.path)
        record = claims.records.get(node.path)
        claim = plan_claim(record_path, claims.stamp, record, claims.publishes)
        if claim.conflict is not None:
            foreign.append(node.path)
            claimed_by.append((node.path, claim.conflict.describe()))
        elif claim.actions:
            # Our record, unchanged: claimed alone, only as it was read (an older zkop's record is adopted).
            writes.append(Write(node.path, None, claim.actions, (CheckVersion(node.path, current.version),)))
            if claim.new:
                adopted.append(node.path)
    return ClaimedPlan(tuple(writes), tuple(foreign), tuple(claimed_by), tuple(adopted))


def release_orphans(actions: Sequence[DeleteNode], records: Mapping[str, Observed], *, root: str,
                    cluster_id: str) -> tuple[tuple[Write, ...], tuple[str, ...]]:
    """The full sync's deletions with their releases, and the paths held because another owner claims them (pure).

    Args:
        actions: :func:`~zkop.services.bridge.plan.plan_sweep`'s deletions, deepest first.
        records: the registry records of those paths, by the bridge's node path (absent: no record).
        root: the registry root.
        cluster_id: this installation's ``--cluster-id``.

    A held node's ancestors are held too (they would not be empty).
    """
    held = [a.path for a in actions if not may_release(records.get(a.path), cluster_id)]
    above = {p for path in held for p in parent_paths(path)}
    writes = tuple(Write(a.path, a, _release(root.rstrip("/") + a.path, records.get(a.path)))
                   for a in actions if a.path not in held and a.path not in above)
    return writes, tuple(p for p in (a.path for a in actions) if p in held or p in above)

