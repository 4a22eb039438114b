"""Ending the ZooKeeper layer's own threads: a bounded join that never joins the caller's thread.

Every owner of a thread here (:class:`~zkop.zookeeper.session.Session`'s event dispatcher, the
:class:`~zkop.zookeeper.reset.SuspensionWatchdog`, the
:class:`~zkop.zookeeper.security.RotationWatcher`) joins it in its ``stop``, as controller-runtime's
manager waits for what it started before it returns (``engageStopProcedure``: stop, then
``StopAndWait`` each runnable group within the graceful-shutdown period, then wait for the leader
election goroutine, ``<-cm.leaderElectionStopped``) [CR pkg/manager/internal.go].
"""

from __future__ import annotations

import logging
import threading

__all__ = ["join_bounded"]

log = logging.getLogger(__name__)


def join_bounded(thread: threading.Thread | None, timeout: float) -> bool:
    """Wait at most ``timeout`` seconds for ``thread`` to end; True if it is not running when this returns.

    A thread never started, or ``None``, counts as ended. The calling thread itself is never
    joined (a ``stop`` called from the thread it would join returns instead of deadlocking; that
    thread ends once its current step returns) and counts as still running. A thread still
    running after ``timeout`` is logged at warning with its name.
    """
    if thread is None or thread.ident is None:
        return True
    if thread is threading.current_thread():
        return False
    thread.join(max(0.0, timeout))
    if thread.is_alive():
        log.warning("thread %s still running %g s after it was asked to stop", thread.name, timeout)
        return False
    return True
