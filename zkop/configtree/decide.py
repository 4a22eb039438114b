"""Every rule of a ZooKeeperConfigTree pass, pure: the complete facts → one :class:`Plan`.

Per declared child, in order (the rules of a ZooKeeperConfig, child by child):

1. the admission gate refused it (reserved root, tenancy): ``refused``, nothing read or written;
2. an older object of either kind declares the path (:class:`zkop.ownership.declared.DeclaredPaths`):
   ``conflicted`` (``PathConflict``, the owner named), nothing written;
3. the ownership record (:func:`zkop.ownership.registry.plan_claim`): another installation's, another kind's or
   another live object's → ``conflicted``; none → the child is claimed, and an existing znode is adopted only if the
   ensemble's adoption mode allows it (``AdoptionNotRequested``/``AdoptionRefused`` otherwise), never an ephemeral
   one (``EphemeralNode``);
4. the znode: absent → create (with its ACL); different bytes → set at the version read (not with
   ``createOnly``); a different ACL → set the ACL (after the data: ZooKeeper's ``multi`` has no setACL).

Every existing znode below the root that is no longer declared is deleted (with ``prune``) if, and only if, its
record names this tree, and its record released; a node that keeps children it does not delete is emptied and
released instead. A record that is not rewritten is checked at its version in the same ``multi``.

**One commit, one transaction**: the writes are grouped into ZooKeeper ``multi`` requests of at most
:data:`MAX_TRANSACTION_BYTES` each (``jute.maxbuffer`` minus headroom). They fit in one almost always; when
they do not, the batches go in this order: creates and updates by path (a parent before its children), then
deletions deepest first; each child's claim travels in its own child's batch. The status says so
(``Atomic=False``, reason ``SplitTransactions``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from zkop.configtree.spec import Child, TreeSpec
from zkop.feature.tenancy import Refusal
from zkop.ownership.declared import Declarer
from zkop.ownership.registry import OwnerStamp, claim_requires, plan_claim, plan_release, record_owner
from zkop.zookeeper.actions import (
    Action,
    CheckVersion,
    CreateNode,
    DeleteNode,
    Observed,
    SetAcl,
    SetData,
    acl_matches,
)

__all__ = [
    "MAX_PROBLEMS_IN_STATUS",
    "MAX_TRANSACTION_BYTES",
    "Batch",
    "ChildFacts",
    "ExistingFacts",
    "Plan",
    "Problem",
    "TreeFacts",
    "batches",
    "decide",
    "decide_delete",
    "request_bytes",
]

#: ZooKeeper's default ``jute.maxbuffer`` (1,048,575 bytes) minus 64 KiB of headroom for the request header and
#: the missing parents the writer creates inside the same ``multi``.
MAX_TRANSACTION_BYTES = 0xFFFFF - 64 * 1024
#: At most this many conflicted or refused children are named in ``status.problems``.
MAX_PROBLEMS_IN_STATUS = 10


@dataclass(frozen=True)
class Problem:
    """A child the tree does not keep: its path, a CamelCase reason and a sentence."""

    path: str
    reason: str
    message: str


@dataclass(frozen=True)
class ChildFacts:
    """One declared child and what was read for it (nothing when refused or conflicted before the reads)."""

    child: Child
    refusal: Refusal | None = None
    owner: Declarer | None = None  # the oldest declarer of any kind when it is not this tree
    record: Observed | None = None
    znode: Observed | None = None


@dataclass(frozen=True)
class ExistingFacts:
    """A znode below the root the spec no longer declares, and its ownership record."""

    path: str
    znode: Observed
    record: Observed | None


@dataclass(frozen=True)
class TreeFacts:
    """Everything one pass decides from.

    Attributes:
        stamp: this tree's owner stamp (kind ``ZooKeeperConfigTree``).
        spec: the parsed spec.
        children: every declared child with its facts.
        existing: the znodes below the root that no child declares (prune candidates).
        adoption: why an existing unowned znode may not be adopted (``None``: it may).
        owner_exists: whether the object of our cluster and kind a stamp names still exists (cache).
    """

    stamp: OwnerStamp
    spec: TreeSpec
    children: tuple[ChildFacts, ...]
    existing: tuple[ExistingFacts, ...] = ()
    adoption: Refusal | None = None
    owner_exists: Callable[[OwnerStamp], bool] = lambda stamp: True


@dataclass(frozen=True)
class Batch:
    """One ZooKeeper ``multi``: the writes and the records they rely on (checked in the same request)."""

    actions: tuple[Action, ...]
    require: tuple[CheckVersion, ...] = ()


@dataclass(frozen=True)
class Plan:
    """What one pass writes and reports.

    Attributes:
        batches: the ``multi`` requests, in order (empty: nothing to write).
        acl_writes: ACL changes, after the batches (``setACL`` cannot be part of a ``multi``).
        declared, synced: children declared, and equal to the spec once the plan is applied.
        conflicted, refused: the children another object owns, and those refused, each with why.
        created, updated, deleted: the paths the plan creates, rewrites and deletes (for the one Event).
    """

    batches: tuple[Batch, ...] = ()
    acl_writes: tuple[SetAcl, ...] = ()
    declared: int = 0
    synced: int = 0
    conflicted: tuple[Problem, ...] = ()
    refused: tuple[Problem, ...] = ()
    created: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    released: tuple[str, ...] = field(default=())

    @property
    def writes(self) -> int:
        """How many znode writes the plan makes (creates, updates, deletions, ACLs; claims not counted)."""
        return len(self.created) + len(self.updated) + len(self.deleted) + len(self.acl_writes)


def request_bytes(action: Action | CheckVersion) -> int:
    """An upper estimate of the bytes ``action`` adds to a ``multi`` request (jute: a header, length-prefixed
    path and data, the ACL entries, the version)."""
    size = 32 + len(action.path.encode())
    if isinstance(action, CreateNode):
        size += len(action.data) + sum(16 + len(e.scheme) + len(e.id.encode()) for e in action.acl)
    elif isinstance(action, SetData):
        size += len(action.data)
    return size


def batches(groups: Sequence[tuple[tuple[Action, ...], tuple[CheckVersion, ...]]],
            limit: int = MAX_TRANSACTION_BYTES) -> tuple[Batch, ...]:
    """Pack ``groups`` (each a child's writes with its claim and checks, kept together) into as few ``multi``
    requests of at most ``limit`` bytes as their order allows (one, unless they do not fit)."""
    out: list[Batch] = []
    actions: list[Action] = []
    require: list[CheckVersion] = []
    size = 0
    for group_actions, group_require in groups:
        group_size = sum(request_bytes(a) for a in (*group_actions, *group_require))
        if actions and size + group_size > limit:
            out.append(Batch(tuple(actions), tuple(require)))
            actions, require, size = [], [], 0
        actions.extend(group_actions)
        require.extend(group_require)
        size += group_size
    if actions:
        out.append(Batch(tuple(actions), tuple(require)))
    return tuple(out)


def _depth(path: str) -> int:
    return path.count("/")


def decide(facts: TreeFacts, registry_path: Callable[[str], str]) -> Plan:
    """The plan of a live tree (the module docstring's rules).

    Args:
        registry_path: a managed path → its ownership record's path (the registry root's prefix added).
    """
    spec, stamp = facts.spec, facts.stamp
    writes: list[tuple[tuple[Action, ...], tuple[CheckVersion, ...]]] = []
    acl_writes: list[SetAcl] = []
    conflicted: list[Problem] = []
    refused: list[Problem] = []
    created: list[str] = []
    updated: list[str] = []
    synced = 0
    for cf in facts.children:
        child = cf.child
        if cf.refusal is not None:
            refused.append(Problem(child.path, cf.refusal.reason, cf.refusal.message))
            continue
        if cf.owner is not None:
            conflicted.append(Problem(child.path, "PathConflict",
                                      f"owned by {cf.owner.describe()} (older object in this cluster)"))
            continue
        record_path = registry_path(child.path)
        claim = plan_claim(record_path, stamp, cf.record, facts.owner_exists)
        if claim.conflict is not None:
            conflicted.append(Problem(child.path, "PathConflict", f"owned by {claim.conflict.describe()}"))
            continue
        znode = cf.znode
        if znode is not None and znode.ephemeral_owner:
            refused.append(Problem(child.path, "EphemeralNode",
                                   "an ephemeral znode (a session's) is there: zkop does not manage it"))
            continue
        if claim.new and znode is not None and facts.adoption is not None:
            refused.append(Problem(child.path, facts.adoption.reason, facts.adoption.message))
            continue
        actions: list[Action] = list(claim.actions)
        if znode is None:
            actions.append(CreateNode(child.path, child.data, child.acl))
            created.append(child.path)
        else:
            if znode.data != child.data and spec.sync_policy == "createOrUpdate":
                actions.append(SetData(child.path, child.data, znode.version))
                updated.append(child.path)
            if (spec.sync_policy == "createOrUpdate" and znode.acl is not None
                    and not acl_matches(znode.acl, child.acl)):
                acl_writes.append(SetAcl(child.path, child.acl, znode.acl_version))
        synced += 1
        if len(actions) > len(claim.actions) or claim.actions:
            writes.append((tuple(actions), claim_requires(record_path, claim, cf.record)))
    deleted: list[str] = []
    released: list[str] = []
    deletions: list[tuple[tuple[Action, ...], tuple[CheckVersion, ...]]] = []
    if spec.prune:
        removable = {e.path for e in facts.existing if _ours(e.record, stamp) and not e.znode.ephemeral_owner}
        for existing in sorted(facts.existing, key=lambda e: (-_depth(e.path), e.path)):
            if existing.path not in removable:
                continue
            record_path = registry_path(existing.path)
            release = plan_release(record_path, stamp, existing.record)
            if release is None:
                continue
            below = [p for p in removable if p.startswith(existing.path + "/")]
            if existing.znode.num_children > len([p for p in below if p.count("/") == _depth(existing.path) + 1]):
                # It keeps children this tree does not delete: emptied and released, not deleted.
                deletions.append(((SetData(existing.path, b"", existing.znode.version), release), ()))
                released.append(existing.path)
                continue
            deletions.append(((DeleteNode(existing.path, existing.znode.version), release), ()))
            deleted.append(existing.path)
    return Plan(batches(writes + deletions), tuple(acl_writes), len(facts.children), synced, tuple(conflicted),
                tuple(refused), tuple(created), tuple(updated), tuple(deleted), tuple(released))


def _ours(record: Observed | None, stamp: OwnerStamp) -> bool:
    owner = record_owner(record)
    return owner is not None and owner.same_object(stamp)


def decide_delete(stamp: OwnerStamp, existing: Sequence[ExistingFacts], *, delete: bool,
                  registry_path: Callable[[str], str]) -> tuple[Batch, ...]:
    """The writes of a tree being deleted: every znode below its root whose record names it deleted (``delete``:
    ``deletionPolicy: Delete``; deepest first, a node keeping others' children only released) or, with
    ``Orphan``, only its record released; another owner's node is never touched."""
    groups: list[tuple[tuple[Action, ...], tuple[CheckVersion, ...]]] = []
    ours = {e.path for e in existing if _ours(e.record, stamp)}
    for e in sorted(existing, key=lambda e: (-_depth(e.path), e.path)):
        if e.path not in ours:
            continue
        release = plan_release(registry_path(e.path), stamp, e.record)
        if release is None:
            continue
        direct = [p for p in ours if p.startswith(e.path + "/") and p.count("/") == _depth(e.path) + 1]
        if delete and not e.znode.ephemeral_owner and e.znode.num_children <= len(direct):
            groups.append(((DeleteNode(e.path, e.znode.version), release), ()))
        else:
            groups.append(((release,), ()))
    return batches(groups)
