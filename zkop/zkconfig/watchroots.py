"""Keep the persistent recursive watches on the roots of every path ZooKeeperConfigs declare (leader only).

It tells the adapter (:meth:`~zkop.zookeeper.adapter.ZooKeeperAdapter.watch_subtrees`) every valid
``spec.path`` in the informer cache and its ownership record: once before the workers start
(waiting, bounded, until the roots are watched), then at most every :data:`DEBOUNCE` seconds as
paths come and go. A path no wanted root covers yet is registered at once, from the event
handler, so its root's ``addWatch`` is on the wire before the object's first reconcile.

The debounced passes run as a task on a :class:`~zkop.runtime.taskloop.TaskLoop`: the one every ensemble's
follower shares (a thread called ``zookeeperconfig-watch-roots`` for all of them), or one of its own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from zkop.kube.client import JSON
from zkop.ownership.registry import OwnershipRegistry
from zkop.runtime.cache import Indexer
from zkop.runtime.taskloop import Task, TaskLoop
from zkop.zkconfig.reconciler import index_by_path
from zkop.zookeeper.adapter import ZooKeeperAdapter
from zkop.zookeeper.paths import InvalidPath, validate_path
from zkop.zookeeper.watches import covered

__all__ = ["DEBOUNCE", "OWNER", "WatchRoots", "managed_paths"]

log = logging.getLogger(__name__)

#: Seconds between re-registrations after a change (a burst of new objects costs one).
DEBOUNCE = 0.2
#: The owner name of these paths in the adapter.
OWNER = "zookeeperconfig"


def managed_paths(objects: list[JSON], registry: OwnershipRegistry,
                  admits: Callable[[JSON], bool] = lambda obj: True) -> set[str]:
    """Every valid ``spec.path`` of the ``objects`` that ``admits`` and its ownership record path (pure;
    invalid paths and objects the tenancy rules refuse are skipped)."""
    paths: set[str] = set()
    for obj in objects:
        if not admits(obj):
            continue
        for path in index_by_path(obj):
            try:
                validate_path(path)
            except InvalidPath:
                continue
            if not registry.is_registry_path(path):
                paths.add(path)
                paths.add(registry.record_path(path))
    return paths


class WatchRoots:
    """Leader runnable and informer event handler: registers the managed paths with the adapter.

    Args:
        indexer: the ZooKeeperConfig informer's cache.
        zookeeper: the adapter.
        registry: where ownership records live.
        wait: seconds :meth:`start` waits for the server to watch the roots (the session timeout).
        admits: whether an object's path may be watched for it
            (:meth:`~zkop.zkconfig.reconciler.ZooKeeperConfigReconciler.admits`); default: every object.
        loop: the loop its debounced passes run on, shared with other ensembles' followers (its owner starts and
            stops it); ``None``: a loop of its own, called :attr:`name`, ended by :meth:`stop`.
        task: its task's name on ``loop`` (its ensemble's controller); default :attr:`name`.
    """

    name = "zookeeperconfig-watch-roots"

    def __init__(self, indexer: Indexer, zookeeper: ZooKeeperAdapter, registry: OwnershipRegistry,
                 wait: float, admits: Callable[[JSON], bool] = lambda obj: True, *,
                 loop: TaskLoop | None = None, task: str | None = None) -> None:
        self._indexer = indexer
        self._admits = admits
        self._zookeeper = zookeeper
        self._registry = registry
        self._wait = wait
        self._registered: frozenset[str] = frozenset()
        self._register_lock = threading.Lock()  # one registration at a time: the newest set wins
        self._dirty = threading.Event()
        self._own_loop = loop is None
        self._loop = loop if loop is not None else TaskLoop(self.name)
        self._task_name = task or self.name
        self._task: Task | None = None
        self._started = False

    def register(self) -> int:
        """Register the paths of every cached object now; returns how many paths."""
        with self._register_lock:
            paths = managed_paths(self._indexer.list(), self._registry, self._admits)
            self._registered = frozenset(paths)
            self._zookeeper.watch_subtrees(OWNER, paths)
            return len(paths)

    def start(self) -> None:
        """Register, wait (bounded) for the roots to be watched, then follow changes on a thread."""
        # The informer's initial list marked the set dirty; this registration covers every object
        # cached so far, and one added from here on marks it again (it is not in _registered yet).
        self._dirty.clear()
        count = self.register()
        if count and not self._zookeeper.wait_watches(self._wait) and self._zookeeper.watch_mode != "per-node":
            log.info("persistent watches not all in place after %g s; reads arm their own watches meanwhile",
                     self._wait)
        log.info("ZooKeeper watch mode %s; %d managed paths under roots %s", self._zookeeper.watch_mode, count,
                 ", ".join(sorted(self._zookeeper.watches.roots)) or "-")
        self._task = self._loop.add(self._task_name, self._pass)
        self._started = True
        if self._dirty.is_set():
            # Objects added while the roots above were registered and awaited: registered now, before the workers
            # (started after this runnable) read them and arm one-shot watches that would outlive the root's.
            self._task.wake(DEBOUNCE)
            try:
                self.register()
            except Exception:  # the debounced pass tries again
                log.exception("could not update the watched roots")

    def health_check(self) -> str | None:
        """``None``, or that the loop's thread ended before :meth:`stop` (new paths would go unwatched)."""
        task = self._task
        if task is None:  # not started, or started by another thread just now: nothing of ours ended
            return None
        return task.health_check()

    def stop(self, timeout: float, /) -> None:
        """Take its task off the loop, waiting up to ``timeout`` seconds for a pass in flight (the watches stay until
        the session closes); a loop of its own ends too. Other ensembles' followers on a shared loop go on."""
        if self._task is not None:
            self._task.remove(timeout)
        if self._own_loop:
            self._loop.stop(timeout)

    def _pass(self) -> None:
        """The debounced pass (on the loop's thread)."""
        self._dirty.clear()
        try:
            self.register()
        except Exception:  # never let a bad object end the thread; the next change tries again
            log.exception("could not update the watched roots")

    def _changed(self) -> None:
        """The set may have changed: one registration :data:`DEBOUNCE` seconds from now (a burst costs one)."""
        self._dirty.set()
        task = self._task
        if task is not None:
            task.wake(DEBOUNCE)

    # --- informer events (cheap: a set lookup) ----------------------------------------------------

    def on_add(self, obj: JSON) -> None:
        """A path not registered yet marks the set for re-registration; once started, a path no
        wanted root covers is registered at once (see the module docstring)."""
        paths = [p for p in index_by_path(obj) if p not in self._registered]
        if not paths or not self._admits(obj):
            return
        roots = self._zookeeper.watches.roots
        if self._started and any(not covered(p, roots) for p in paths):
            try:
                self.register()
                return
            except Exception:  # the debounced pass tries again
                log.exception("could not update the watched roots")
        self._changed()

    def on_update(self, old: JSON, new: JSON) -> None:
        """A changed ``spec.path`` marks the set for re-registration."""
        if index_by_path(old) != index_by_path(new):
            self._changed()

    def on_delete(self, obj: JSON) -> None:
        """A deleted object may shrink the roots."""
        self._changed()

    def admission_changed(self, namespace: JSON | None = None) -> None:
        """Which objects are admitted may have changed (a Namespace appeared, went or changed its labels, or the
        tenancy policy changed): re-register."""
        self._changed()
