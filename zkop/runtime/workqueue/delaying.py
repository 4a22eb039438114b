"""A work queue that can add an item later: client-go ``util/workqueue/delaying_queue.go``."""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Hashable
from typing import Generic, TypeVar

from zkop.runtime.workqueue.metrics import MetricsProvider
from zkop.runtime.workqueue.queue import Clock, WorkQueue

__all__ = ["MAX_WAIT", "SHUTDOWN_JOIN", "DelayingQueue"]

T = TypeVar("T", bound=Hashable)

#: The delaying loop wakes at least this often (seconds) [CG util/workqueue/delaying_queue.go ``maxWait``].
MAX_WAIT = 10.0

#: Seconds a shutdown waits for the delaying thread to end (it only ever waits on its condition or
#: adds a few ready items, so it ends at once; the bound guards against a wedged ``add``).
SHUTDOWN_JOIN = 5.0


class _WaitFor(Generic[T]):
    """A heap entry: ``item`` becomes ready at ``ready_at``; ``seq`` keeps equal times FIFO."""

    __slots__ = ("item", "ready_at", "seq")

    def __init__(self, item: T, ready_at: float, seq: int) -> None:
        self.item = item
        self.ready_at = ready_at
        self.seq = seq

    def __lt__(self, other: _WaitFor[T]) -> bool:
        return (self.ready_at, self.seq) < (other.ready_at, other.seq)


class DelayingQueue(WorkQueue[T]):
    """A :class:`WorkQueue` that can add an item later: :meth:`add_after`.

    A daemon thread (started on the first delayed add) moves ready items into the queue, waking
    when the earliest is due, on every delayed add, and at least every :data:`MAX_WAIT` seconds
    [CG util/workqueue/delaying_queue.go ``waitingLoop``]. Items still waiting at shutdown are
    dropped, and every shutdown call returns only once that thread has ended (at most
    :data:`SHUTDOWN_JOIN` seconds; never on that thread itself): client-go only closes the loop's
    stop channel, zkop joins it so a stopped controller leaves nothing running (controller-runtime's
    shutdown order [CR pkg/manager/internal.go ``engageStopProcedure``]).
    """

    def __init__(
        self,
        name: str = "",
        *,
        clock: Clock = time.monotonic,
        metrics_provider: MetricsProvider | None = None,
    ) -> None:
        super().__init__(name, clock=clock, metrics_provider=metrics_provider)
        self._delay_cond = threading.Condition(threading.Lock())
        self._heap: list[_WaitFor[T]] = []
        self._waiting: dict[T, _WaitFor[T]] = {}
        self._seq = itertools.count()
        self._delay_stopped = False
        self._delay_thread: threading.Thread | None = None

    def add_after(self, item: T, delay: float) -> None:
        """Add ``item`` once ``delay`` seconds have passed.

        Ignored while shutting down.  Otherwise counts one ``workqueue_retries_total`` (every
        call, as client-go does) and: ``delay <= 0`` -> :meth:`add` now; else if ``item`` is
        already waiting, the **earlier** of the two ready times wins
        [CG util/workqueue/delaying_queue.go ``AddAfter``, ``insert``].  A waiting item can still be
        added directly with :meth:`add`; the delayed add then fires too (usually a dedup no-op).
        """
        if self.shutting_down():
            return
        with self._cond:
            self._metrics.retries.inc()
        if delay <= 0:
            self.add(item)
            return
        with self._delay_cond:
            if self._delay_stopped:
                return
            ready_at = self._clock() + delay
            existing = self._waiting.get(item)
            if existing is not None:
                if ready_at < existing.ready_at:
                    existing.ready_at = ready_at
                    heapq.heapify(self._heap)
            else:
                entry = _WaitFor(item, ready_at, next(self._seq))
                self._waiting[item] = entry
                heapq.heappush(self._heap, entry)
            if self._delay_thread is None:
                thread = threading.Thread(
                    target=self._waiting_loop, name=f"workqueue-delay-{self.name or 'unnamed'}", daemon=True
                )
                thread.start()  # then published: is_alive() is False until start()
                self._delay_thread = thread
            self._delay_cond.notify()

    def _waiting_loop(self) -> None:
        """Move ready items into the queue until shutdown."""
        while True:
            ready: list[T] = []
            with self._delay_cond:
                if self._delay_stopped:
                    return
                now = self._clock()
                while self._heap and self._heap[0].ready_at <= now:
                    entry = heapq.heappop(self._heap)
                    del self._waiting[entry.item]
                    ready.append(entry.item)
                if not ready:
                    wait = MAX_WAIT
                    if self._heap:
                        wait = min(wait, self._heap[0].ready_at - now)
                    self._delay_cond.wait(wait)
                    continue
            # Outside the delay lock, so the two locks are never held together.
            for item in ready:
                self.add(item)

    def _on_shutdown(self) -> None:
        with self._delay_cond:
            self._delay_stopped = True
            self._heap.clear()
            self._waiting.clear()
            self._delay_cond.notify_all()
            thread = self._delay_thread  # no thread starts once _delay_stopped is set
        if thread is not None and thread is not threading.current_thread():
            thread.join(SHUTDOWN_JOIN)

    def health_check(self) -> str | None:
        """``None``, or that the delaying thread ended while the queue is open: no delayed add (a
        retry after a backoff) would ever be added again."""
        thread, stopped = self._delay_thread, self._delay_stopped  # no lock: a thread that died may hold it
        if thread is None or stopped or thread.is_alive():
            return None
        return f"its delaying thread {thread.name} ended"

    def _num_waiting(self) -> int:
        """Items waiting for their ready time (for tests and debugging)."""
        with self._delay_cond:
            return len(self._waiting)
