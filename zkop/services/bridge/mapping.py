"""The Dubbo interface → application mapping the bridge shares with other applications; pure.

Dubbo 3's ``ZookeeperMetadataReport`` keeps, per interface, one node ``<dubbo root>/mapping/<interface>`` whose data
is the comma-separated names of the applications providing it; a consumer with application-level discovery reads
it first. The node is shared: real Dubbo providers append their own names (compare-and-set on its version), and
several zkop Services may each provide the interface under another application. So the node is never a record of
one Service: the bridge *merges* its application's name into it and claims that one **entry** in the ownership
registry, at the entry's own path ``<registry root><mapping node>/<application>`` (no znode of that name exists
in the mapping), with the Service's stamp. Rules (:func:`plan_mapping`):

=========================================  ====================================================================
as read                                    what the bridge does
=========================================  ====================================================================
the mapping node claimed by anyone         nothing (a ZooKeeperConfig or another installation owns the whole
(a record at the node's own registry path)  node); reported as a conflict
the name wanted, absent                    append it (``old,app``; create the node holding ``app`` if missing) at
                                           the version read, and claim the entry in the same ``multi``
the name wanted, present, entry ours       nothing (the claim refreshed if the Service was re-created)
the name wanted, present, entry unclaimed  nothing: another provider registered that name; not ours to claim
entry claimed by another owner             nothing; reported as a conflict
entry ours, name no longer wanted          remove only that name (the others kept in order) and release the claim
=========================================  ====================================================================

The mapping node itself is never deleted (Dubbo never deletes one either; an empty node names no application).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from zkop.ownership.registry import OwnerStamp, claim_requires, plan_claim, plan_release, record_owner
from zkop.services.bridge.claims import Write
from zkop.services.codecs import dubbo
from zkop.zookeeper.actions import Action, CheckVersion, CreateNode, Observed, SetData

__all__ = ["MappingPlan", "entry_path", "plan_mapping", "unwanted_entries"]


def entry_path(mapping_node: str, application: str) -> str:
    """The path (below the registry root) at which the entry ``application`` of ``mapping_node`` is claimed."""
    return f"{mapping_node}/{application}"


@dataclass(frozen=True)
class MappingPlan:
    """The result of :func:`plan_mapping`.

    Attributes:
        writes: one ``multi`` each: the mapping node's change with the entry's claim or release.
        conflicts: ``(path, owner)`` for each node or entry another owner holds, left alone.
    """

    writes: tuple[Write, ...] = ()
    conflicts: tuple[tuple[str, str], ...] = ()


def _describe(record: Observed | None) -> str:
    owner = record_owner(record)
    return owner.describe() if owner is not None else "an unreadable ownership record"


def plan_mapping(
    mapping_node: str, node: Observed | None, node_claim: Observed | None, entries: Mapping[str, Observed],
    *, want: str | None, stamp: OwnerStamp, registry_root: str, publishes: Callable[[OwnerStamp], bool],
    merge: bool = True, remove: bool = True,
) -> MappingPlan:
    """Plan one mapping node for one Service by the module's rules (pure).

    Args:
        mapping_node: ``<dubbo root>/mapping/<interface>``.
        node: the mapping node as read (``None``: absent).
        node_claim: the registry record at the node's own path (``None`` or empty: nobody claims the whole node).
        entries: the registry records of the node's entries, by application name (only those read).
        want: the application whose name the Service wants in the node; ``None``: none.
        stamp: the Service's owner stamp.
        registry_root: the ownership registry's root.
        publishes: whether a Service of this cluster named in a stamp still publishes (the take-over rule).
        merge: whether a name may be added (``False`` under ``create-only`` once the node exists).
        remove: whether a name may be removed (``False`` under ``upsert-only`` and ``create-only``).
    """
    root = registry_root.rstrip("/")
    if node_claim is not None and node_claim.data:
        return MappingPlan(conflicts=((mapping_node, _describe(node_claim)),))
    if node is not None and node.ephemeral_owner:
        return MappingPlan(conflicts=((mapping_node, "an ephemeral znode"),))
    data = node.data if node is not None else b""
    names = dubbo.mapping_names(data)
    writes: list[Write] = []
    conflicts: list[tuple[str, str]] = []
    version = node.version if node is not None else -1
    # Removals first: several entries of one node are written one after another, each at the version it leaves.
    for application, record in sorted(entries.items()):
        if application == want:
            continue
        theirs = record_owner(record)
        if theirs is None or not theirs.same_object(stamp) or not remove:
            continue
        release = plan_release(root + entry_path(mapping_node, application), theirs, record)
        claim: tuple[Action, ...] = (release,) if release is not None else ()
        if application in names and node is not None:
            data = dubbo.mapping_without(data, application)
            names = dubbo.mapping_names(data)
            writes.append(Write(mapping_node, SetData(mapping_node, data, version), claim))
            version += 1
        elif claim:
            writes.append(Write(entry_path(mapping_node, application), None, claim))
    if want is not None:
        record_path = root + entry_path(mapping_node, want)
        wanted_record = entries.get(want)
        planned = plan_claim(record_path, stamp, wanted_record, publishes)
        if planned.conflict is not None:
            conflicts.append((entry_path(mapping_node, want), planned.conflict.describe()))
        elif want in names:
            if wanted_record is not None and wanted_record.data and planned.actions:
                # Ours (this Service re-created, or taken over): the claim follows, the node's data is unchanged.
                writes.append(Write(entry_path(mapping_node, want), None, planned.actions,
                                    (CheckVersion(mapping_node, version),)))
        elif node is None:
            writes.append(Write(mapping_node, CreateNode(mapping_node, want.encode("utf-8")), planned.actions,
                                claim_requires(record_path, planned, wanted_record)))
        elif node is not None and merge:
            writes.append(Write(mapping_node, SetData(mapping_node, dubbo.mapping_with(data, want), version),
                                planned.actions, claim_requires(record_path, planned, wanted_record)))
    return MappingPlan(tuple(writes), tuple(conflicts))


def unwanted_entries(claims: Sequence[tuple[str, str, Observed]], wanted: frozenset[tuple[str, str]],
                     cluster_id: str, kind: str) -> list[tuple[str, str, Observed]]:
    """The entries ``(mapping node, application, claim)`` of ``claims`` that this cluster's bridge (stamps of
    ``kind``) holds and no Service wants any more (``wanted``: ``(mapping node, application)``), for the full sync."""
    found = []
    for mapping_node, application, record in claims:
        owner = record_owner(record)
        if owner is None or owner.cluster_id != cluster_id or owner.kind != kind:
            continue
        if (mapping_node, application) not in wanted:
            found.append((mapping_node, application, record))
    return found
