"""The plain work queue: client-go ``util/workqueue/queue.go``.

Guarantees [CG util/workqueue/doc.go, the package comment]: **fair** (FIFO), **stingy** (an item
is never handed to two workers at once, and repeated adds before pickup collapse into one), an
item added again while processed is processed once more after :meth:`WorkQueue.done`, and workers
learn about shutdown from :meth:`WorkQueue.get`. A queue with a ``name`` records the
``workqueue_*`` metrics [CG util/workqueue/metrics.go ``newQueueMetrics``].

A worker loops ``get`` → reconcile → ``forget`` or ``add_rate_limited`` → ``done`` (controller-runtime's
``processNextWorkItem``, :class:`zkop.runtime.controller.Controller`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from zkop.runtime.workqueue.metrics import MetricsProvider, NoopMetricsProvider, QueueMetrics, global_provider

__all__ = ["Clock", "WorkQueue"]

T = TypeVar("T", bound=Hashable)

#: Monotonic seconds.
Clock = Callable[[], float]


class WorkQueue(Generic[T]):
    """FIFO work queue with client-go's dedup / never-twice-at-once / requeue-on-done rules.

    State, all guarded by one :class:`threading.Condition` (client-go's ``Typed`` struct):
    ``queue`` (order of pickup; every entry is dirty and not processing), ``dirty`` (items that
    need work) and ``processing`` (items handed out by :meth:`get` and not yet :meth:`done`; an
    item can be dirty at the same time).

    ``name`` -- non-empty to record the ``workqueue_*`` metrics under that name, through
    ``metrics_provider`` (default: the one :func:`~zkop.runtime.workqueue.metrics.set_provider`
    installed). ``clock`` -- monotonic seconds for metrics and ready times; blocking waits use real time.
    """

    def __init__(
        self,
        name: str = "",
        *,
        clock: Clock = time.monotonic,
        metrics_provider: MetricsProvider | None = None,
    ) -> None:
        self.name = name
        self._clock = clock
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._shutting_down = False
        self._drain = False
        #: Told of each item put up for pickup (:meth:`set_ready_listener`); ``None``: nobody.
        self._on_ready: Callable[[], None] | None = None
        provider: MetricsProvider
        if not name:
            provider = NoopMetricsProvider()
        elif metrics_provider is None:
            provider = global_provider()
        else:
            provider = metrics_provider
        self._metrics: QueueMetrics[T] = QueueMetrics(name, provider, clock, self._cond)

    def add(self, item: T) -> None:
        """Mark ``item`` as needing processing.  Never blocks.

        Dropped while shutting down; a no-op if ``item`` is already dirty (waiting, or re-added
        while processing).  If ``item`` is being processed it is only marked dirty and goes back
        in the queue on :meth:`done`.  [CG util/workqueue/queue.go ``Add``]
        """
        with self._cond:
            if self._shutting_down or item in self._dirty:
                return
            self._metrics.add(item)
            self._dirty.add(item)
            if item in self._processing:
                return
            self._queue.append(item)
            self._cond.notify()
            if self._on_ready is not None:
                self._on_ready()

    def get(self, timeout: float | None = None) -> tuple[T | None, bool]:
        """Take the next item: returns ``(item, shutdown)``.

        Blocks while the queue is empty and not shut down.  Returns ``(None, True)`` only when
        the queue is empty *and* shutting down (queued items are still handed out after
        :meth:`shutdown`); the worker should then exit.  With ``timeout`` (seconds) it returns
        ``(None, False)`` if nothing arrived in time (``timeout=0`` polls).  The caller must
        call :meth:`done` with the item when finished.  [CG util/workqueue/queue.go ``Get``]
        """
        with self._cond:
            if timeout is None:
                while not self._queue and not self._shutting_down:
                    self._cond.wait()
            else:
                deadline = time.monotonic() + timeout
                while not self._queue and not self._shutting_down:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None, False
                    self._cond.wait(remaining)
            if not self._queue:
                return None, True
            item = self._queue.popleft()
            self._metrics.get(item)
            self._processing.add(item)
            self._dirty.discard(item)
            return item, False

    def done(self, item: T) -> None:
        """Mark ``item`` as finished; if it was added again meanwhile, queue it (once) at the back.

        Calling it for an item that is not being processed is harmless.
        [CG util/workqueue/queue.go ``Done``]
        """
        with self._cond:
            self._metrics.done(item)
            self._processing.discard(item)
            if item in self._dirty:
                self._queue.append(item)
                self._cond.notify()
                if self._on_ready is not None:
                    self._on_ready()
            if self._drain and not self._processing:
                # Wake every shutdown_with_drain() waiter (getters do not wait once shut down).
                self._cond.notify_all()

    def set_ready_listener(self, listener: Callable[[], None] | None) -> int:
        """Call ``listener`` once for each item put up for pickup from now on (an add, or a re-add released by
        :meth:`done`), under the queue's lock: it must not block nor call back into this queue (a
        :class:`threading.Semaphore`'s ``release``). ``None`` removes it. Returns how many items wait for pickup now,
        so that the caller counts them too. (Not in client-go: a shared worker pool's wake-up,
        :class:`zkop.runtime.workerpool.WorkerPool`.)"""
        with self._cond:
            self._on_ready = listener
            return len(self._queue)

    def __len__(self) -> int:
        """Number of items waiting for pickup.  Informational only: never gate add/get on it."""
        with self._cond:
            return len(self._queue)

    def shutdown(self) -> None:
        """Stop accepting adds; :meth:`get` hands out what is queued, then reports shutdown.

        Also ends any :meth:`shutdown_with_drain` wait.  Idempotent.
        [CG util/workqueue/queue.go ``ShutDown``]
        """
        with self._cond:
            self._drain = False
            self._shutting_down = True
            self._cond.notify_all()
        self._on_shutdown()

    def shutdown_with_drain(self, timeout: float | None = None) -> bool:
        """Like :meth:`shutdown`, then wait until no item is being processed.

        Returns ``True`` once ``processing`` is empty, ``False`` if ``timeout`` (seconds) passed
        first or a concurrent :meth:`shutdown` cancelled the drain.  Items still waiting in the
        queue do not hold it up (workers keep receiving them from :meth:`get`).  Without a
        timeout a worker that never calls :meth:`done` blocks it forever, as in client-go.
        [CG util/workqueue/queue.go ``ShutDownWithDrain``]
        """
        with self._cond:
            self._drain = True
            self._shutting_down = True
            self._cond.notify_all()
        self._on_shutdown()
        with self._cond:
            deadline = None if timeout is None else time.monotonic() + timeout
            while self._processing:
                if not self._drain:
                    return False
                if deadline is None:
                    self._cond.wait()
                else:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._cond.wait(remaining)
            return True

    def shutting_down(self) -> bool:
        """Whether :meth:`shutdown` or :meth:`shutdown_with_drain` has been called."""
        with self._cond:
            return self._shutting_down

    def _on_shutdown(self) -> None:
        """Hook for subclasses; called (without the lock) after every shutdown call."""
