"""The service bridge's ZooKeeper writes — its dry-run seam.

The reconciler makes every ZooKeeper change through the writer it was built with, chosen once by
:func:`zkop.services.bridge.builder.build_service_bridge`: :class:`ZooKeeperWriter` writes;
:class:`DryRunWriter` (``zkop run --dry-run``) sends nothing and logs and counts each change
(:func:`zkop.runtime.dryrun.planned`) instead, as the importer's and the mirror's dry-run writers do; the
reconciler never branches on the dry run, and the adapter's
:attr:`~zkop.zookeeper.adapter.ZooKeeperAdapter.refuse_writes` is the safety net under it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from zkop.runtime import dryrun
from zkop.services.bridge import metrics
from zkop.services.bridge.plan import describe
from zkop.services.fullsync import Outcome, delete_unless_wanted
from zkop.zookeeper.actions import Action, CreateNode, DeleteNode, Observed, SetData, operation
from zkop.zookeeper.errors import ConcurrentModification

__all__ = ["CONTROLLER", "FULL_SYNC", "DryRunWriter", "ZooKeeperClient", "ZooKeeperWriter"]

log = logging.getLogger("zkop.services.bridge.reconciler")  # the reconciler's log: one place to read a pass

#: The ``controller`` label of dry-run planned changes (the controller's name, as in :mod:`.builder`).
CONTROLLER = "service-bridge"
#: The key the full sync's planned deletions are logged under.
FULL_SYNC = "full-sync"


class ZooKeeperClient(Protocol):
    """What the bridge needs from :class:`~zkop.zookeeper.adapter.ZooKeeperAdapter`."""

    def read(self, path: str) -> Observed | None: ...

    def children(self, path: str) -> list[str] | None: ...

    def execute(self, actions: Sequence[Action]) -> None: ...


class ZooKeeperWriter:
    """Executes the bridge's planned actions one by one (the writer of a real run).

    Args:
        zookeeper: the adapter (or anything with ``execute``).
    """

    def __init__(self, zookeeper: ZooKeeperClient) -> None:
        self.zookeeper = zookeeper

    def write(self, key: str, actions: Sequence[Action]) -> bool:
        """Execute a Service's ``actions`` in order; True if they were made (False: a dry run planned them).

        Raises:
            ZooKeeperError: from :meth:`zkop.zookeeper.adapter.ZooKeeperAdapter.execute` (ConcurrentModification:
                plan again).
        """
        for action in actions:
            self._execute(action)
        return True

    def delete_orphans(self, actions: Sequence[DeleteNode],
                       wanted_again: Callable[[DeleteNode], str | None]) -> Outcome:
        """Delete the full sync's orphans, each only if :func:`~zkop.services.fullsync.delete_unless_wanted`
        still finds it unwanted."""
        outcome = delete_unless_wanted(
            actions, wanted_again=wanted_again, delete=self._execute, lost_race=ConcurrentModification,
            lost=lambda action, err: f"{action.path} changed since the scan; not deleted ({err})",
            log=log, who="service-bridge",
        )
        if outcome.deleted:
            log.info("service-bridge: full sync deleted %d orphaned node(s)", outcome.deleted)
        return outcome

    def _execute(self, action: Action) -> None:
        self.zookeeper.execute([action])
        log.debug("service-bridge: %s", describe(action))
        if isinstance(action, CreateNode):
            metrics.SERVICE_BRIDGE_WRITES.labels("create").inc()
        elif isinstance(action, SetData):
            metrics.SERVICE_BRIDGE_WRITES.labels("update").inc()
        elif isinstance(action, DeleteNode):
            metrics.SERVICE_BRIDGE_DELETES.inc()


class DryRunWriter(ZooKeeperWriter):
    """The writer of ``zkop run --dry-run``: sends nothing; logs and counts each action
    (:func:`zkop.runtime.dryrun.planned`)."""

    def write(self, key: str, actions: Sequence[Action]) -> bool:
        """Plan ``actions`` (one log line and one count each); False: nothing was made."""
        for action in actions:
            dryrun.planned(log, CONTROLLER, key, operation(action), describe(action))
        return False

    def delete_orphans(self, actions: Sequence[DeleteNode],
                       wanted_again: Callable[[DeleteNode], str | None]) -> Outcome:
        """Plan every deletion (``Outcome.planned``); nothing is deleted."""
        for action in actions:
            dryrun.planned(log, CONTROLLER, FULL_SYNC, operation(action), describe(action))
        return Outcome(planned=True)
