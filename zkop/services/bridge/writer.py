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
from zkop.services.bridge.claims import Write
from zkop.services.bridge.plan import describe
from zkop.services.fullsync import Outcome, delete_unless_wanted
from zkop.zookeeper.actions import Action, CheckVersion, CreateNode, DeleteNode, Observed, SetData, operation
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

    def execute(self, actions: Sequence[Action], *, atomic: bool = False,
                require: Sequence[CheckVersion] = ()) -> None: ...


class ZooKeeperWriter:
    """Executes the bridge's planned writes, each node's with its claim's in one ``multi`` (the writer of a real run).

    Args:
        zookeeper: the adapter (or anything with ``execute``).
    """

    def __init__(self, zookeeper: ZooKeeperClient) -> None:
        self.zookeeper = zookeeper

    def write(self, key: str, writes: Sequence[Write]) -> bool:
        """Make a Service's ``writes`` in order, each one ``multi``; True if they were made (False: a dry run
        planned them).

        Raises:
            ZooKeeperError: from :meth:`zkop.zookeeper.adapter.ZooKeeperAdapter.execute` (ConcurrentModification:
                plan again).
        """
        for write in writes:
            self._execute(write)
        return True

    def delete_orphans(self, actions: Sequence[Write],
                       wanted_again: Callable[[Write], str | None]) -> Outcome:
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

    def _execute(self, write: Write) -> None:
        self.zookeeper.execute(write.actions, atomic=True, require=write.require)
        for action in write.actions:
            log.debug("service-bridge: %s", describe(action))
        node = write.node
        if isinstance(node, CreateNode):
            metrics.SERVICE_BRIDGE_WRITES.labels("create").inc()
        elif isinstance(node, SetData):
            metrics.SERVICE_BRIDGE_WRITES.labels("update").inc()
        elif isinstance(node, DeleteNode):
            metrics.SERVICE_BRIDGE_DELETES.inc()


class DryRunWriter(ZooKeeperWriter):
    """The writer of ``zkop run --dry-run``: sends nothing; logs and counts each action
    (:func:`zkop.runtime.dryrun.planned`)."""

    def write(self, key: str, writes: Sequence[Write]) -> bool:
        """Plan ``writes`` (one log line and one count per action, claims included); False: nothing was made."""
        for write in writes:
            for action in write.actions:
                dryrun.planned(log, CONTROLLER, key, operation(action), describe(action))
        return False

    def delete_orphans(self, actions: Sequence[Write],
                       wanted_again: Callable[[Write], str | None]) -> Outcome:
        """Plan every deletion and release (``Outcome.planned``); nothing is deleted."""
        for write in actions:
            for action in write.actions:
                dryrun.planned(log, CONTROLLER, FULL_SYNC, operation(action), describe(action))
        return Outcome(planned=True)
