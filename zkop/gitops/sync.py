"""``zkop sync``: apply manifests straight to ZooKeeper, as the operator would.

Each object goes through the operator's own steps (:func:`zkop.zkconfig.spec.parse_spec`, read,
:func:`zkop.zkconfig.plan.plan_sync`, :meth:`ZooKeeperAdapter.execute` with up to :data:`MAX_REPLANS`
replans), parents first, so ``syncPolicy``, ACL, size and path rules are the operator's. The ACL is
always read, so an ACL set by hand at creation is restored too. Not done: ownership records (no
Kubernetes object to stamp), ``deletionPolicy`` (only ``--prune`` deletes: :mod:`zkop.gitops.prune`),
``dataFrom`` (reported as skipped, never read or printed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from zkop.gitops.tree import ZNode, path_key
from zkop.gitops.validate import CheckedObject
from zkop.zkconfig.plan import Plan, plan_delete, plan_sync
from zkop.zkconfig.spec import DataRef, DesiredZnode, InvalidSpec, check_lockout
from zkop.zookeeper.acls import expand_auth
from zkop.zookeeper.actions import CreateNode, DeleteNode, Observed, describe
from zkop.zookeeper.adapter import ConcurrentModification, ZooKeeperAdapter, ZooKeeperError, ZooKeeperNoAuth
from zkop.zookeeper.replan import MAX_REPLANS, with_replans

__all__ = ["MAX_REPLANS", "SyncResult", "prune_znodes", "skipped_ref", "sync_objects"]

ResultKind = Literal["unchanged", "created", "updated", "outOfSync", "pruned", "skipped", "error"]


@dataclass(frozen=True)
class SyncResult:
    """What happened (or, in a dry run, would happen) to one znode.

    Attributes:
        path: the znode.
        result: ``unchanged``, ``created``, ``updated``, ``outOfSync`` (createOnly, left alone),
            ``pruned``, ``skipped`` (``dataFrom``) or ``error``.
        message: a sentence; never contains znode data.
        object: ``file:line ZooKeeperConfig ns/name``; empty for pruned znodes.
        actions: the actions as text (:func:`zkop.zookeeper.actions.describe`, zkCli form), e.g.
            ``set /a (5 bytes, if version 2)``.
    """

    path: str
    result: ResultKind
    message: str
    object: str = ""
    actions: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The result as a JSON object with the attribute names as keys."""
        return {"path": self.path, "result": self.result, "message": self.message, "object": self.object,
                "actions": list(self.actions)}


def skipped_ref(ref: DataRef) -> str:
    """The message for an unresolvable ``dataFrom`` (names the key, never any bytes)."""
    kind = "Secret" if ref.secret else "ConfigMap"
    redacted = " (redacted)" if ref.secret else ""
    return (f"data from {kind} {ref.name!r} key {ref.key!r} cannot be resolved without a cluster; "
            f"skipped{redacted}")


#: A read made in advance: the znode, absent (``None``), or the error reading it.
PreRead = Observed | ZooKeeperError | None


def _converge(adapter: ZooKeeperAdapter, desired: DesiredZnode,
              planner: Callable[[DesiredZnode, Observed | None], Plan], dry_run: bool,
              pre_read: PreRead | Literal[False] = False) -> Plan:
    """Read (or take ``pre_read`` the first time), plan, execute; re-read and re-plan on a conflict."""
    def attempt(n: int) -> Plan:
        if n == 0 and pre_read is not False:
            if isinstance(pre_read, ZooKeeperError):
                raise pre_read
            observed = pre_read
        else:
            observed = adapter.read(desired.path, None)
        plan = planner(desired, observed)
        if not dry_run:
            adapter.execute(plan.actions)
        return plan

    return with_replans(attempt)


def _result(plan: Plan, path: str, what: str) -> SyncResult:
    actions = tuple(describe(a, zkcli=True) for a in plan.actions)
    outcome = plan.outcome
    if outcome.state == "Error":
        return SyncResult(path, "error", outcome.message, what, actions)
    if outcome.state == "OutOfSync":
        return SyncResult(path, "outOfSync", outcome.message, what, actions)
    if not plan.actions:
        return SyncResult(path, "unchanged", outcome.message, what)
    if any(isinstance(a, DeleteNode) for a in plan.actions):
        return SyncResult(path, "pruned", outcome.message, what, actions)
    kind: ResultKind = "created" if any(isinstance(a, CreateNode) for a in plan.actions) else "updated"
    return SyncResult(path, kind, outcome.message, what, actions)


def sync_objects(adapter: ZooKeeperAdapter, objects: Sequence[CheckedObject], *, dry_run: bool = False,
                 pre_read: Mapping[str, PreRead] | None = None,
                 on_done: Callable[[], None] | None = None) -> list[SyncResult]:
    """Converge ZooKeeper to ``objects`` (validated), parents first; with ``dry_run`` only read and plan.

    ``pre_read`` (from :func:`zkop.gitops.tree.read_nodes`) saves the first read of
    each znode; a stale entry only costs a conflict and a re-read, as writes are conditional.

    Returns:
        One result per object, in path order. A znode that cannot be converged
        (ephemeral in the way, NoAuth, an ACL that would lock this session out or that
        ZooKeeper returned redacted, still changing after :data:`MAX_REPLANS` plans) is an
        ``error`` result; the others are still applied.

    Raises:
        ZooKeeperUnavailable: the session was lost; results so far are not returned.
    """
    results = []
    ids = adapter.identities
    for checked in sorted(objects, key=lambda c: path_key(c.path)):
        what = checked.describe()
        if checked.desired is None:
            assert checked.unresolved is not None
            results.append(SyncResult(checked.path, "skipped", skipped_ref(checked.unresolved), what))
        else:
            try:
                # The operator's lock-out rule, against the identities this session holds; ``auth``
                # entries are desired as the server will store them (fixupACL).
                check_lockout(checked.desired, ids, address_known=any(i.scheme == "ip" for i in ids))
                desired = dataclasses.replace(checked.desired, acl=expand_auth(checked.desired.acl, ids))
                first: PreRead | Literal[False] = False
                if pre_read is not None and checked.path in pre_read:
                    first = pre_read[checked.path]
                plan = _converge(adapter, desired, plan_sync, dry_run, first)
                results.append(_result(plan, checked.path, what))
            except InvalidSpec as err:
                results.append(SyncResult(checked.path, "error", str(err), what))
            except (ConcurrentModification, ZooKeeperNoAuth) as err:
                results.append(SyncResult(checked.path, "error", str(err), what))
        if on_done is not None:
            on_done()
    return results


def prune_znodes(adapter: ZooKeeperAdapter, candidates: Sequence[ZNode], *, dry_run: bool = False,
                 on_done: Callable[[], None] | None = None) -> list[SyncResult]:
    """Delete ``candidates`` (from :func:`zkop.gitops.prune.plan_prune`, leaves first) one by one.

    Each deletion is :func:`zkop.zkconfig.plan.plan_delete` on a fresh read: never
    recursive, conditional on the version read; a znode that gained a child or turned
    out ephemeral is kept and reported as an ``error``. A dry run plans from the walked
    state, taking the candidates' children as already deleted.

    Raises:
        ZooKeeperUnavailable: the session was lost.
    """
    results = []
    for node in candidates:
        desired = DesiredZnode(path=node.path, data=b"", deletion_policy="Delete")
        walked = Observed(data=node.data, version=node.version, num_children=0,
                          ephemeral_owner=node.ephemeral_owner, acl_version=node.acl_version, acl=node.acl)
        try:
            plan = _converge(adapter, desired, plan_delete, dry_run, walked if dry_run else False)
        except (ConcurrentModification, ZooKeeperNoAuth) as err:
            results.append(SyncResult(node.path, "error", str(err)))
        else:
            if not plan.outcome.ready:
                results.append(SyncResult(node.path, "error", plan.outcome.message))
            elif plan.actions:
                results.append(SyncResult(node.path, "pruned", "no manifest declares it",
                                          actions=tuple(describe(a, zkcli=True) for a in plan.actions)))
            else:
                results.append(SyncResult(node.path, "unchanged", plan.outcome.message))
        if on_done is not None:
            on_done()
    return results
