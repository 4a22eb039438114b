"""The periodic ACL check of managed znodes, since ZooKeeper fires no watch on ``setACL``.

(Programmer's Guide, "ZooKeeper Watches".) Every ``--acl-check-period`` seconds the leader reads,
with one pipelined ``getACL`` each, the ACL of every managed znode whose owner declares
``spec.acl`` or takes its value from a Secret (open-ACL znodes need no read: their ``aversion``
comes with every data read), forgets what the watch cache holds of the ones that differ
(:func:`~zkop.zkconfig.acldrift.decide_acl_drift`) and enqueues their owners, whose pass restores
the ACL with a ``DriftCorrected`` Event.

Each check is a periodic task on a :class:`~zkop.runtime.taskloop.TaskLoop`: the one every ensemble's ACL check
shares (a thread called ``zookeeperconfig-acl-check`` for all of them, each ensemble's check run in turn), or one
of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from zkop.kube.client import JSON
from zkop.runtime.cache import Indexer
from zkop.runtime.taskloop import Task, TaskLoop
from zkop.zkconfig.acldrift import decide_acl_drift, declared_acls
from zkop.zookeeper.adapter import ZooKeeperAdapter, ZooKeeperError

__all__ = ["AclCheck"]

log = logging.getLogger(__name__)


class AclCheck:
    """Leader runnable: every ``period`` seconds, enqueue the ZooKeeperConfigs whose znode's ACL drifted.

    Args:
        cache: the ZooKeeperConfig informer's indexer.
        zookeeper: the adapter (its ``read_acls``).
        enqueue: the controller queue's ``add``.
        period: seconds between checks (> 0).
        admits: whether an object's znode may be read for it
            (:meth:`~zkop.zkconfig.reconciler.ZooKeeperConfigReconciler.admits`); default: every object.
        loop: the loop its checks run on, shared with other ensembles' checks (its owner starts and stops it);
            ``None``: a loop of its own, called :attr:`name`, ended by :meth:`stop`.
        task: its task's name on ``loop`` (its ensemble's controller); default :attr:`name`.

    Attributes:
        checks: checks completed (tests wait on it).
    """

    name = "zookeeperconfig-acl-check"

    def __init__(self, cache: Indexer, zookeeper: ZooKeeperAdapter, enqueue: Callable[[str], None],
                 period: float, admits: Callable[[JSON], bool] = lambda obj: True, *,
                 loop: TaskLoop | None = None, task: str | None = None) -> None:
        self.cache, self.zookeeper, self.enqueue, self.period = cache, zookeeper, enqueue, period
        self.admits = admits
        self.checks = 0
        self._own_loop = loop is None
        self._loop = loop if loop is not None else TaskLoop(self.name)
        self._task_name = task or self.name
        self._task: Task | None = None

    def start(self) -> None:
        """Add the periodic check to its loop; the first check runs one period from now."""
        self._task = self._loop.add(self._task_name, self._check, period=self.period)

    def health_check(self) -> str | None:
        """``None``, or that the loop's thread ended before :meth:`stop` (no ACL would be checked again)."""
        task = self._task
        return None if task is None else task.health_check()

    def stop(self, timeout: float, /) -> None:
        """Take the check off its loop (a check in flight finishes, waited for up to ``timeout`` seconds; each
        request waits at most the session timeout); a loop of its own ends too. Other ensembles' checks go on."""
        if self._task is not None:
            self._task.remove(timeout)
        if self._own_loop:
            self._loop.stop(timeout)

    def _check(self) -> None:
        """One periodic check (on the loop's thread): skipped while disconnected, never raising an ``Exception``."""
        if not self.zookeeper.connected:
            return  # the reconnect resync covers what happened meanwhile
        try:
            self.check_once()
        except ZooKeeperError as err:
            log.info("ACL check skipped: %s", err)
        except Exception:
            log.exception("ACL check failed")

    def check_once(self) -> list[str]:
        """Read the declared ACLs once and enqueue the owners of the znodes that drifted.

        Returns:
            The keys enqueued.

        Raises:
            ZooKeeperUnavailable: the session went away during the check.
        """
        declared = declared_acls(list(filter(self.admits, self.cache.list())), self.zookeeper.identities)
        if not declared:
            self.checks += 1
            return []
        drifted = decide_acl_drift(declared, self.zookeeper.read_acls(sorted(declared)))
        for path, key in drifted:
            log.info("ACL of znode %s differs from the one %s declares; reconciling", path, key)
            self.zookeeper.forget(path)
            self.enqueue(key)
        self.checks += 1
        return [key for _, key in drifted]
