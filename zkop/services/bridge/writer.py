"""The service bridge's ZooKeeper writes — its dry-run seam.

The reconciler makes every ZooKeeper change through the :class:`ZooKeeperWriter` it was built
with. Built with ``dry_run`` (``zkop run --dry-run``) the writer sends nothing and logs and counts
each change (:func:`zkop.runtime.dryrun.planned`) instead, as the importer's and the mirror's
writers do; the reconciler never branches on the dry run, and the adapter's
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

__all__ = ["CONTROLLER", "FULL_SYNC", "ZooKeeperClient", "ZooKeeperWriter"]

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
    """Executes the bridge's planned actions one by one (or, with ``dry_run``, only plans them).

    Args:
        zookeeper: the adapter (or anything with ``execute``).
        dry_run: send nothing; log and count each action instead.
    """

    def __init__(self, zookeeper: ZooKeeperClient, *, dry_run: bool = False) -> None:
        self.zookeeper = zookeeper
        self.dry_run = dry_run

    def write(self, key: str, actions: Sequence[Action]) -> bool:
        """Execute a Service's ``actions`` in order; True if they were made (False: a dry run planned them).

        Raises:
            ZooKeeperError: from :meth:`zkop.zookeeper.adapter.ZooKeeperAdapter.execute` (ConcurrentModification:
                plan again).
        """
        if self.dry_run:
            for action in actions:
                dryrun.planned(log, CONTROLLER, key, operation(action), describe(action))
            return False
        for action in actions:
            self._execute(action)
        return True

    def delete_orphans(self, actions: Sequence[DeleteNode],
                       wanted_again: Callable[[DeleteNode], str | None]) -> Outcome:
        """Delete the full sync's orphans, each only if :func:`~zkop.services.fullsync.delete_unless_wanted`
        still finds it unwanted; a dry run plans every one of them (``Outcome.planned``)."""
        if self.dry_run:
            for action in actions:
                dryrun.planned(log, CONTROLLER, FULL_SYNC, operation(action), describe(action))
            return Outcome(planned=True)
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
