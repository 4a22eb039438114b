"""What a ZooKeeperConfig pass does under ``zkop run --dry-run``: the :class:`DryRunWriter`.

The reconciler decides exactly as in a real run (:mod:`zkop.zkconfig.decide`); the writer it was
built with (:class:`DryRunWriter` instead of :class:`~zkop.zkconfig.apiwrites.ObjectWriter`) writes
nothing to ZooKeeper, adds no finalizer, and turns each decision into its dry-run form: for a live
object the ZooKeeper writes become planned changes (:func:`planned_changes`) and the status says so
(:func:`dry_run_sync`: ``Pending``, ``Ready=False``/``DryRun``; no change Events); for one being
deleted with zkop's finalizer the znode delete and record release are planned and the finalizer
goes (:func:`dry_run_delete`), so a deletion never blocks. docs/operations.md, "Dry run", is the
user's contract.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

from zkop.kube.client import JSON
from zkop.ownership.registry import OwnerStamp
from zkop.runtime import dryrun
from zkop.zkconfig.apiwrites import ObjectWriter
from zkop.zkconfig.decide import Decision
from zkop.zkconfig.objects import finalizers
from zkop.zkconfig.plan import Outcome
from zkop.zkconfig.spec import FINALIZER
from zkop.zookeeper.actions import Action, CheckVersion, describe, operation

__all__ = ["CONTROLLER", "DRY_RUN_REASON", "DryRunWriter", "PlannedChange", "dry_run_delete", "dry_run_sync",
           "log_planned", "planned_changes"]

log = logging.getLogger(__name__)

#: The ``controller`` label of the planned changes (the controller's name).
CONTROLLER = "zookeeperconfig"

#: ``Ready`` condition reason of a live object whose changes a dry run planned.
DRY_RUN_REASON = "DryRun"

@dataclass(frozen=True)
class PlannedChange:
    """One change a real run would make: ``operation`` (the metric label) and a line for people."""

    operation: str
    description: str


def planned_changes(decision: Decision, record_path: str) -> tuple[PlannedChange, ...]:
    """The ZooKeeper changes of ``decision``, in order: its writes, then the release of ``record_path``."""
    changes = [PlannedChange(operation(action), describe(action)) for action in decision.writes]
    if decision.release:
        changes.append(PlannedChange("release", f"release the ownership record {record_path}"))
    return tuple(changes)


def log_planned(key: str, decision: Decision, record_path: str) -> tuple[PlannedChange, ...]:
    """Log and count the changes of ``decision`` about object ``key`` (:func:`zkop.runtime.dryrun.planned`).

    A deletion waiting for children is logged too (a wait, not a change: not counted).
    """
    changes = planned_changes(decision, record_path)
    for change in changes:
        dryrun.planned(log, CONTROLLER, key, change.operation, change.description)
    if decision.plan is not None and not decision.plan.outcome.ready:
        log.info("dry-run %s %s: would wait: %s", CONTROLLER, key, decision.plan.outcome.message)
    return changes


def dry_run_sync(decision: Decision, changes: tuple[PlannedChange, ...]) -> Decision:
    """The dry-run form of a live object's ``decision`` whose ZooKeeper changes are ``changes``.

    Nothing to change: the decision as it is, without the finalizer. Otherwise only a status:
    ``Pending``, ``Ready=False``/``DryRun``, the message naming every planned change.
    """
    if not changes:
        return replace(decision, add_finalizer=False)
    message = "dry run, nothing written: would " + "; would ".join(change.description for change in changes)
    return Decision(outcome=Outcome("Pending", DRY_RUN_REASON, message, False))


def dry_run_delete(obj: JSON) -> Decision:
    """The dry-run form of any pass over ``obj`` being deleted: drop zkop's finalizer if it is there."""
    return Decision(remove_finalizer=FINALIZER in finalizers(obj))


class DryRunWriter(ObjectWriter):
    """The writer of ``zkop run --dry-run``: no ZooKeeper write, no finalizer added, each pass applied in its
    dry-run form (status and Events still go to the API server, see the module docstring)."""

    def execute(self, actions: Sequence[Action], *, atomic: bool = False, require: Sequence[CheckVersion] = ()) -> None:
        """Nothing: the writes are planned when the pass is applied (:meth:`synced`, :meth:`deleting`)."""

    def release(self, path: str, ours: OwnerStamp) -> None:
        """Nothing: the release is planned when the pass is applied (:meth:`deleting`)."""

    def children_gone(self, path: str) -> bool:
        """False without watching: a dry run plans the wait for the children, it does not wait."""
        return False

    def add_finalizer(self, obj: JSON) -> JSON | None:
        """``obj`` unchanged: nothing is written, so there is nothing to clean up."""
        return obj

    def synced(self, key: str, record_path: str, decision: Decision) -> Decision:
        """Log and count ``decision``'s changes; apply its dry-run form (:func:`dry_run_sync`)."""
        return dry_run_sync(decision, log_planned(key, decision, record_path))

    def deleting(self, key: str, obj: JSON, record_path: str, decision: Decision,
                 cause: BaseException | None = None) -> Decision:
        """Log and count ``decision``'s changes (or that ZooKeeper could not be read: ``cause``); apply
        :func:`dry_run_delete`."""
        if cause is not None:
            log.info("dry-run %s %s: could not read ZooKeeper to plan the deletion (%s)", CONTROLLER, key, cause)
        else:
            log_planned(key, decision, record_path)
        return dry_run_delete(obj)
