"""The pure planning functions of the ZooKeeperConfig controller.

``plan_sync`` and ``plan_delete`` take what a ZooKeeperConfig declares and what
ZooKeeper holds, and return the actions to execute plus the outcome to report.
No I/O happens here: the reconciler reads, plans, hands the actions to the
ZooKeeper adapter, and writes status from the outcome (the external-dns
"source → plan → provider" split). The same functions serve ``zkop sync``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from zkop.zkconfig.spec import DesiredZnode
from zkop.zookeeper.acls import is_redacted
from zkop.zookeeper.actions import Action, CreateNode, DeleteNode, Observed, SetAcl, SetData, acl_matches, size
from zkop.zookeeper.frozen import fast_init

__all__ = ["Outcome", "Plan", "plan_delete", "plan_sync"]

State = Literal["Pending", "Synced", "Error", "OutOfSync"]


@fast_init
@dataclass(frozen=True)
class Outcome:
    """What a reconcile achieved, in the words of ``status``.

    Attributes:
        state: ``status.state`` (the prototype's field): Pending, Synced, Error or OutOfSync.
        reason: one CamelCase word for the ``Ready`` condition (API conventions, "Typical status properties").
        message: a sentence for people; never contains znode data.
        ready: the ``Ready`` condition's status.
        stalled: retrying cannot help until the spec or the world changes (kstatus ``Stalled``).
    """

    state: State
    reason: str
    message: str
    ready: bool
    stalled: bool = False


@fast_init
@dataclass(frozen=True)
class Plan:
    """Actions to execute, in order, and the outcome once they succeed.

    ``outcome`` is what status shows and is the same whether this pass wrote or not
    (so converging and then confirming never rewrites status); ``changes`` and
    ``note`` describe what this pass changed, for Events.
    """

    actions: tuple[Action, ...]
    outcome: Outcome
    changes: tuple[str, ...] = field(default=())
    note: str = ""

    @property
    def writes(self) -> bool:
        """True if executing the plan changes ZooKeeper."""
        return bool(self.actions)


def plan_sync(desired: DesiredZnode, observed: Observed | None) -> Plan:
    """Plan the convergence of one znode towards ``desired``.

    Table (``observed`` → actions, state):

    ======================  =================  ==========================================
    observed                createOrUpdate     createOnly
    ======================  =================  ==========================================
    absent                  create             create
    same bytes              nothing, Synced    nothing, Synced
    other bytes             set (CAS), Synced  nothing, OutOfSync (left alone on purpose)
    other ACL               setACL (CAS)       nothing
    ACL redacted (no ADMIN) nothing, Error     nothing, Error
    ephemeral node          nothing, Error     nothing, Error
    ======================  =================  ==========================================

    ``observed.acl is None`` means the adapter knows the ACL is unchanged since
    creation and did not read it; it is then taken to match.

    Args:
        desired: parsed spec.
        observed: the znode as read, or ``None`` if it does not exist.
    """
    path = desired.path
    in_sync = Outcome("Synced", "Synced", f"znode {path} matches the spec", True)
    if observed is None:
        return Plan(
            (CreateNode(path, desired.data, desired.acl),), in_sync, ("created",),
            f"znode {path} created ({size(desired.data)})",
        )
    if observed.ephemeral_owner:
        return Plan(
            (),
            Outcome(
                "Error", "EphemeralNode",
                f"znode {path} is an ephemeral node owned by session 0x{observed.ephemeral_owner:x}; "
                "zkop manages persistent znodes only",
                False, stalled=True,
            ),
        )
    redacted = [e for e in observed.acl or () if is_redacted(e)]
    if redacted:
        # getACL without ADMIN (ZOOKEEPER-1392): the digests are hidden, so the ACL can be neither
        # compared nor restored; writing anything on that basis could lock its real owner out.
        return Plan(
            (),
            Outcome(
                "Error", "AclRedacted",
                f"cannot compare the ACL of znode {path}: ZooKeeper redacted its digest ids "
                f"({', '.join(f'digest:{e.id}' for e in redacted)}) because zkop's credentials lack ADMIN on it; "
                "run with credentials that have ADMIN on the znode",
                False,
            ),
        )
    acl_drift = observed.acl is not None and not acl_matches(observed.acl, desired.acl)
    if observed.data == desired.data and not acl_drift:
        return Plan((), in_sync)
    if desired.sync_policy == "createOnly":
        return Plan(
            (),
            Outcome(
                "OutOfSync", "CreateOnly",
                f"znode {path} exists with other {'data' if observed.data != desired.data else 'ACL'} "
                f"({size(observed.data)}, version {observed.version}); syncPolicy createOnly leaves it unchanged",
                True,
            ),
        )
    actions: list[Action] = []
    changed: list[str] = []
    if observed.data != desired.data:
        actions.append(SetData(path, desired.data, observed.version))
        changed.append(f"data {len(observed.data)} → {size(desired.data)}, "
                       f"version {observed.version} → {observed.version + 1}")
    if acl_drift:
        actions.append(SetAcl(path, desired.acl, observed.acl_version))
        changed.append(f"ACL restored (aversion {observed.acl_version})")
    return Plan(tuple(actions), in_sync, ("updated",), f"znode {path} updated ({'; '.join(changed)})")


def plan_delete(desired: DesiredZnode, observed: Observed | None) -> Plan:
    """Plan what deleting a ZooKeeperConfig does to its znode.

    ``Delete`` removes a childless znode (compare-and-set on its version); a
    znode with children is never deleted (no recursive delete), so the plan
    is empty and the outcome says why. ``Orphan`` and an absent znode need nothing.
    Parents are never deleted.
    """
    path = desired.path
    if observed is None:
        return Plan((), Outcome("Synced", "Deleted", f"znode {path} does not exist", True))
    if desired.deletion_policy == "Orphan":
        return Plan((), Outcome("Synced", "Orphaned", f"znode {path} left in place (deletionPolicy Orphan)", True))
    if observed.ephemeral_owner:
        return Plan((), Outcome("Synced", "Orphaned", f"znode {path} is ephemeral and not zkop's; left in place", True))
    if observed.num_children:
        return Plan(
            (),
            Outcome(
                "Error", "HasChildren",
                f"znode {path} has {observed.num_children} "
                f"{'child' if observed.num_children == 1 else 'children'}; zkop never deletes recursively, "
                "waiting for them to be removed",
                False,
            ),
        )
    return Plan(
        (DeleteNode(path, observed.version),),
        Outcome("Synced", "Deleted", f"znode {path} deleted", True),
        ("deleted",),
        f"znode {path} deleted (version {observed.version})",
    )
