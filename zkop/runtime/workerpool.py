"""One pool of worker threads shared by several controllers, fair between them.

A controller built with a pool (:class:`~zkop.runtime.controller.Controller` ``pool=``) starts no worker threads of
its own: while it runs, the pool's workers take its keys, one at a time, from its rate-limited work queue and
reconcile them exactly as its own workers would (the same :meth:`~zkop.runtime.controller.Controller.process`, the
same queue rules: an item is never handed to two workers at once, ``done`` always follows). So the threads of every
ensemble's ZooKeeperConfig controller are the pool's ``--workers``, whatever the number of ensembles.

Fairness: each worker, once woken, looks at the controllers round-robin from where the last pick left off and takes
the first key it finds, so a controller with a long backlog gets one worker turn per turn of every other controller
that has keys waiting: one busy ensemble cannot starve another. (controller-runtime has no shared pool; each
controller's ``MaxConcurrentReconciles`` workers are its own.)

Wake-ups are counted, never lost: each queue tells the pool of every key it puts up for pickup
(:meth:`~zkop.runtime.workqueue.queue.WorkQueue.set_ready_listener`), each such call releases one permit of a
semaphore, and a worker takes one permit per pick. A permit whose key went elsewhere (a queue detached meanwhile,
a key dropped at shutdown) costs one look round the controllers, nothing more.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from zkop.kube.cancel import cancel_scope
from zkop.runtime.threads import OwnedThreads

if TYPE_CHECKING:
    from zkop.runtime.controller import Controller

__all__ = ["WorkerPool"]

#: Seconds :meth:`WorkerPool.stop` waits for the worker threads.
WORKER_JOIN = 1.0


class WorkerPool:
    """``workers`` threads reconciling the keys of every attached controller, round-robin between them.

    Args:
        name: names the threads (``<name>-worker-<i>``) and the pool in health reports.
        workers: the number of threads (``--workers``), at least 1.

    Raises:
        ValueError: ``workers`` < 1.
    """

    def __init__(self, name: str, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"a worker pool needs at least one worker, not {workers}")
        self.name = name
        self.workers = workers
        self._lock = threading.Lock()
        self._controllers: list[Controller] = []
        self._next = 0  # where the next round-robin look starts
        self._permits = threading.Semaphore(0)
        self._stopping = threading.Event()
        self._threads = OwnedThreads()
        self._started = False

    # --- controllers -----------------------------------------------------------------------------

    def attach(self, controller: Controller) -> None:
        """Reconcile ``controller``'s keys from now on (its queue's waiting keys included); starts the threads the
        first time."""
        with self._lock:
            if controller in self._controllers:
                return
            self._controllers.append(controller)
            start = not self._started
            self._started = True
        waiting = controller.queue.set_ready_listener(self._permits.release)
        if waiting:
            self._permits.release(waiting)
        if start:
            for index in range(self.workers):
                self._threads.start(self._work, f"{self.name}-worker-{index}")

    def detach(self, controller: Controller) -> None:
        """Take no more keys of ``controller`` (a reconcile of it running now finishes); idempotent."""
        controller.queue.set_ready_listener(None)
        with self._lock:
            if controller in self._controllers:
                self._controllers.remove(controller)

    def attached(self) -> list[str]:
        """The names of the attached controllers, in round-robin order."""
        with self._lock:
            return [c.name for c in self._controllers]

    # --- workers ---------------------------------------------------------------------------------

    def _pick(self) -> tuple[Controller, str] | None:
        """The next key, round-robin over the controllers from where the last pick left off; ``None``: none waits."""
        with self._lock:
            controllers = list(self._controllers)
            start = self._next % len(controllers) if controllers else 0
        for offset in range(len(controllers)):
            controller = controllers[(start + offset) % len(controllers)]
            key, _ = controller.queue.get(timeout=0)
            if key is not None:
                with self._lock:
                    self._next = start + offset + 1
                return controller, key
        return None

    def _work(self) -> None:
        while True:
            self._permits.acquire()
            if self._stopping.is_set():
                return
            picked = self._pick()
            if picked is None:
                continue
            controller, key = picked
            try:
                with cancel_scope(controller.cancel):
                    controller.work_on(key)
            finally:
                controller.queue.done(key)

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Nothing: the threads start with the first controller attached (:meth:`attach`), so a replica that never
        leads runs none (a Manager runnable, added before the controllers it serves)."""

    def health_check(self) -> str | None:
        """``None``, or which worker threads ended while the pool runs (a ``BaseException`` escaping a reconcile
        ends one, as it ends a controller's own worker)."""
        if self._stopping.is_set():
            return None
        dead = self._threads.ended()
        return f"worker threads died: {', '.join(dead)}" if dead else None

    def stop(self, timeout: float = WORKER_JOIN) -> None:
        """End the threads once they finish what they run (each attached controller drains its own keys first:
        :meth:`~zkop.runtime.controller.Controller.stop`); waits up to ``timeout`` seconds for them. Idempotent."""
        self._stopping.set()
        self._permits.release(self.workers)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout)
