"""ZooKeeperConfigTrees in the GitOps commands: ``sync`` and ``diff`` through the operator's own planner.

A tree's plan is :func:`zkop.configtree.decide.decide`, the operator's pure rules, given what ``zkop sync`` and
``zkop diff`` read: every child's znode with its ACL (pipelined, :func:`zkop.gitops.tree.read_nodes`). Without a
Kubernetes object there is no ownership record to stamp (as for a ZooKeeperConfig, :mod:`zkop.gitops.sync`): the
planner is told each child is already this tree's, so it neither claims nor checks records, and no record is
read or written. What follows from that:

* the writes of one tree go in one ``multi`` where they fit in one request (the operator's batches), so a reader
  never sees half of a commit; an ACL change follows (``multi`` has no ``setACL``);
* ``prune`` of the tree's own children needs the records (a child is deleted only if its record names the tree),
  so ``sync`` deletes nothing of a tree by itself: ``--prune --prune-root`` does, with the tree's children
  counted as declared;
* an ephemeral znode on a child's path, a NoAuth read, or an ACL that would lock this session out is an ``error``
  for that child; the others are still applied;
* a tree whose source is a Secret, or a ConfigMap not in the input, is ``skipped`` (nothing read or printed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from zkop.configtree.decide import ChildFacts, Plan, TreeFacts, decide
from zkop.configtree.spec import KIND, Child
from zkop.gitops.diff import ZnodeDiff, acl_diff, data_diff, hidden_diff
from zkop.gitops.sync import SyncResult
from zkop.gitops.validate import CheckedTree
from zkop.ownership.registry import OwnerStamp
from zkop.zkconfig.spec import DesiredZnode, InvalidSpec, check_lockout
from zkop.zookeeper.acls import expand_auth, world_readable
from zkop.zookeeper.actions import Observed, SetAcl, describe
from zkop.zookeeper.adapter import ConcurrentModification, ZooKeeperAdapter, ZooKeeperError
from zkop.zookeeper.replan import with_replans

__all__ = ["TreePlan", "diff_tree", "plan_tree", "sync_trees"]

#: The cluster id of the stamp ``sync`` plans with (never written: records are not touched).
SYNC_CLUSTER = "zkop-sync"


@dataclass(frozen=True)
class TreePlan:
    """What the operator's planner decided for one tree from the reads (pure data).

    Attributes:
        tree: the validated tree.
        children: the children planned, ACLs as the server will store them (``auth`` expanded).
        observed: each planned child's znode as read (``None``: absent).
        plan: :func:`zkop.configtree.decide.decide`'s plan.
        errors: children not planned: path → why (NoAuth, lock-out).
    """

    tree: CheckedTree
    children: tuple[Child, ...]
    observed: dict[str, Observed | None]
    plan: Plan
    errors: dict[str, str]


def _stamp(tree: CheckedTree) -> OwnerStamp:
    return OwnerStamp(SYNC_CLUSTER, tree.manifest.namespace or "", tree.manifest.name or "", "", KIND)


def plan_tree(adapter: ZooKeeperAdapter, tree: CheckedTree) -> TreePlan:
    """Read the children of ``tree`` (expanded: ``tree.children`` set) and plan with the operator's rules.

    Raises:
        ZooKeeperUnavailable: the session was lost.
    """
    assert tree.children is not None
    ids = adapter.identities
    errors: dict[str, str] = {}
    children: list[Child] = []
    for child in tree.children:
        try:
            check_lockout(DesiredZnode(child.path, child.data, acl=child.acl), ids,
                          address_known=any(i.scheme == "ip" for i in ids))
        except InvalidSpec as err:
            errors[child.path] = str(err)
            continue
        children.append(dataclasses.replace(child, acl=expand_auth(child.acl, ids)))
    reads = adapter.read_many([c.path for c in children])
    stamp = _stamp(tree)
    ours = Observed(data=stamp.to_bytes(), version=0, num_children=0)  # "already this tree's": no claim
    facts: list[ChildFacts] = []
    observed: dict[str, Observed | None] = {}
    planned: list[Child] = []
    for child in children:
        read = reads[child.path]
        if isinstance(read, ZooKeeperError):
            errors[child.path] = str(read)
            continue
        observed[child.path] = read
        planned.append(child)
        facts.append(ChildFacts(child, record=ours, znode=read))
    plan = decide(TreeFacts(stamp, tree.spec, tuple(facts)), registry_path=lambda path: path)
    return TreePlan(tree, tuple(planned), observed, plan, errors)


def _apply(adapter: ZooKeeperAdapter, planned: TreePlan) -> None:
    """Execute the plan's batches (each one ``multi``), then its ACL writes; records are not required."""
    for batch in planned.plan.batches:
        adapter.execute(batch.actions, atomic=True)
    if planned.plan.acl_writes:
        adapter.execute(planned.plan.acl_writes)


def _results(planned: TreePlan) -> list[SyncResult]:
    """One result per child, in path order."""
    what = planned.tree.describe()
    plan = planned.plan
    actions: dict[str, list[str]] = {}
    for batch in plan.batches:
        for action in batch.actions:
            actions.setdefault(action.path, []).append(describe(action, zkcli=True))
    for acl in plan.acl_writes:
        actions.setdefault(acl.path, []).append(describe(acl, zkcli=True))
    refused = {p.path: f"{p.reason}: {p.message}" for p in (*plan.refused, *plan.conflicted)}
    created, updated = set(plan.created), set(plan.updated) | {a.path for a in plan.acl_writes}
    results = []
    for child in sorted(planned.tree.children or (), key=lambda c: c.path):
        path, done = child.path, tuple(actions.get(child.path, ()))
        if path in planned.errors:
            results.append(SyncResult(path, "error", planned.errors[path], what))
        elif path in refused:
            results.append(SyncResult(path, "error", refused[path], what))
        elif path in created:
            results.append(SyncResult(path, "created", "created", what, done))
        elif path in updated:
            results.append(SyncResult(path, "updated", "updated", what, done))
        else:
            live = planned.observed.get(path)
            if live is not None and live.data != child.data:
                results.append(SyncResult(path, "outOfSync", "syncPolicy createOnly: the live data differs and is "
                                                             "left alone", what))
            else:
                results.append(SyncResult(path, "unchanged", "in sync", what))
    return results


def sync_trees(adapter: ZooKeeperAdapter, trees: Sequence[CheckedTree], *, dry_run: bool = False,
               on_done: Callable[[], None] | None = None) -> list[SyncResult]:
    """Converge ZooKeeper to each tree (see the module docstring); with ``dry_run`` only read and plan.

    A concurrent change re-reads and re-plans the tree (up to :data:`zkop.zookeeper.replan.MAX_REPLANS` plans).

    Returns:
        One result per child (a tree that cannot be expanded offline: one ``skipped`` result for its root).

    Raises:
        ZooKeeperUnavailable: the session was lost; results so far are not returned.
    """
    results: list[SyncResult] = []
    for tree in trees:
        if tree.children is None:
            results.append(SyncResult(tree.path, "skipped", f"the tree reads {tree.unresolved}, which cannot be "
                                                            "resolved without a cluster; skipped", tree.describe()))
        else:
            def attempt(n: int, tree: CheckedTree = tree) -> TreePlan:
                planned = plan_tree(adapter, tree)
                if not dry_run:
                    _apply(adapter, planned)
                return planned

            try:
                results.extend(_results(with_replans(attempt)))
            except ConcurrentModification as err:
                results.append(SyncResult(tree.path, "error", str(err), tree.describe()))
        if on_done is not None:
            on_done()
    return results


def diff_tree(planned: TreePlan) -> list[ZnodeDiff]:
    """What applying the tree would change, one comparison per child, in path order; pure.

    A child whose znode's ACL does not grant ``world:anyone`` read has its live bytes summarised, never shown.
    """
    what = planned.tree.describe()
    plan = planned.plan
    acls: dict[str, SetAcl] = {a.path: a for a in plan.acl_writes}
    refused = {p.path: f"{p.reason}: {p.message}" for p in (*plan.refused, *plan.conflicted)}
    created, updated = set(plan.created), set(plan.updated)
    out = []
    for child in sorted(planned.tree.children or (), key=lambda c: c.path):
        path = child.path
        if path in planned.errors or path in refused:
            out.append(ZnodeDiff(path, "error", message=planned.errors.get(path) or refused[path], object=what))
            continue
        live = planned.observed.get(path)
        label = f"live, version {live.version}" if live is not None else "absent"
        readable = live is None or live.acl is None or world_readable(live.acl)
        changes: list[str] = []
        parts: list[str] = []
        if path in created:
            changes.append("create")
            parts.append(data_diff(path, None, child.data, old_label=label, new_label=what))
        elif path in updated and live is not None:
            changes.append("data")
            parts.append(data_diff(path, live.data, child.data, old_label=label, new_label=what) if readable
                         else hidden_diff(path, live.data, child.data))
        if path in acls and live is not None and live.acl is not None:
            changes.append("acl")
            parts.append(acl_diff(path, live.acl, acls[path].acl))
        if changes:
            out.append(ZnodeDiff(path, "differs", tuple(changes),
                                 f"diff zk:{path} {planned.tree.manifest.location}\n" + "".join(parts),
                                 f"znode {path}: {', '.join(changes)} differ{'s' if len(changes) == 1 else ''}",
                                 what))
        elif live is not None and live.data != child.data:
            text = (data_diff(path, live.data, child.data, old_label=label, new_label=what) if readable
                    else hidden_diff(path, live.data, child.data))
            out.append(ZnodeDiff(path, "outOfSync", (), text, "syncPolicy createOnly: the live data differs and is "
                                                              "left alone", what))
        else:
            out.append(ZnodeDiff(path, "equal", message="in sync", object=what))
    return out
