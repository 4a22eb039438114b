"""What a ZooKeeperConfig pass does under ``zkop run --dry-run``, as pure functions over a :class:`Decision`.

The decision is made exactly as in a real run (:mod:`zkop.zkconfig.decide`); its writes then
become planned changes (:func:`planned_changes`) and its status the dry-run one: for a live object
:func:`dry_run_sync` (with changes planned ``Pending``, ``Ready=False``/``DryRun``, else what a real
run reports; no finalizer, no change Events), for
one being deleted with zkop's finalizer :func:`dry_run_delete` (the finalizer goes, the znode and
record stay). docs/operations.md, "Dry run", is the user's contract.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from zkop.kube.client import JSON
from zkop.runtime import dryrun
from zkop.zkconfig.decide import Decision
from zkop.zkconfig.objects import finalizers
from zkop.zkconfig.plan import Outcome
from zkop.zkconfig.spec import FINALIZER
from zkop.zookeeper.actions import describe, operation

__all__ = ["CONTROLLER", "DRY_RUN_REASON", "PlannedChange", "dry_run_delete", "dry_run_sync", "log_planned",
           "planned_changes"]

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
