"""One thread running the due tasks of several owners, one run at a time: periodic tasks and tasks woken after a delay.

A Go controller gives each background loop a goroutine of its own (``wait.Until`` for a periodic one, a timer for a
debounced one); a Python thread costs a stack and a share of the interpreter lock, so loops that each run briefly
now and then (every ensemble's watch-root follower, every ensemble's ACL check) share one :class:`TaskLoop` per
kind: threads then grow with the kinds of loop, not with the ensembles (issue 42, item 4).

Order: the loop runs the task due first (due time, then the order in which tasks became due); a task woken or due
again while it runs becomes due after every task already due. So between two runs of one task every other task
already due runs once: a task that blocks (each of its requests bounded, e.g. by the session timeout) delays the
others by its run, and never starves them. Wake-ups are coalesced as client-go's delaying queue coalesces
``AddAfter`` (a task already due sooner keeps its time).

An ``Exception`` a task raises is logged and the loop goes on with the next task; a ``BaseException`` ends the
thread, which :meth:`TaskLoop.health_check` and each task's :meth:`Task.health_check` then report (the Manager ends
the run: :mod:`zkop.runtime.threads`).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

from zkop.runtime.threads import LoopThread

__all__ = ["Task", "TaskLoop"]

log = logging.getLogger(__name__)


class Task:
    """One owner's task on a :class:`TaskLoop` (made by :meth:`TaskLoop.add`).

    Attributes:
        name: names the task in logs and :meth:`TaskLoop.tasks` (e.g. its ensemble's controller).
        period: seconds from the end of one run to the next due time; ``None``: runs only when woken.
        runs: runs completed, whether they returned or raised (tests wait on it).
    """

    def __init__(self, loop: TaskLoop, name: str, run: Callable[[], object], period: float | None) -> None:
        self.name, self.period = name, period
        self.runs = 0
        self._loop, self._run = loop, run
        self._due: float | None = None  # the due time of its live heap entry; None: not scheduled
        self._removed = False

    @property
    def removed(self) -> bool:
        """True once :meth:`remove` was called: the task never starts again."""
        return self._removed

    def wake(self, delay: float = 0.0) -> None:
        """Run once ``delay`` seconds from now (>= 0), unless already due sooner; a no-op once removed. Never blocks
        on a run (callable from an informer's event handler)."""
        self._loop._schedule(self, delay)

    def remove(self, timeout: float) -> bool:
        """Never start this task again, and wait up to ``timeout`` seconds for a run of it in flight to end (not when
        called from the loop's own thread, i.e. from a task). Idempotent.

        Returns:
            True if no run of it is in flight any more.
        """
        return self._loop._remove(self, timeout)

    def health_check(self) -> str | None:
        """``None``, or that the loop's thread ended while this task is on it (it would never run again)."""
        return None if self._removed else self._loop.health_check()


class TaskLoop:
    """A thread (called ``name``) running the due tasks of every owner that added one, one run at a time.

    The thread starts with the first :meth:`add`, so a replica that never leads runs none; a Manager runnable
    (leader only), added before the owners of its tasks so that it is stopped after them. Thread-safe.

    Args:
        name: the thread's name (what ``py-spy dump`` and ``threading.enumerate()`` show) and the loop's in reports.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Task]] = []
        self._order = itertools.count()
        self._tasks: list[Task] = []
        self._running: Task | None = None
        self._ident: int | None = None  # the loop thread's, once it runs
        self._thread = LoopThread(name, self._loop)
        self._started = False

    # --- tasks ----------------------------------------------------------------------------------

    def add(self, name: str, run: Callable[[], object], *, period: float | None = None) -> Task:
        """A new task calling ``run()`` on the loop's thread: every ``period`` seconds (> 0; the first run one
        period from now, the next one period after each run ends) and whenever woken (:meth:`Task.wake`);
        ``period=None``: only when woken. Starts the thread the first time. Added after :meth:`stop`, it never runs.

        Raises:
            ValueError: ``period`` is not > 0.
        """
        if period is not None and not period > 0:
            raise ValueError(f"a periodic task needs a period > 0, not {period}")
        task = Task(self, name, run, period)
        with self._cond:
            self._tasks.append(task)
            start = not self._started
            self._started = True
        if period is not None:
            self._schedule(task, period)
        if start:  # outside the lock: a liveness check made while the thread starts takes none either
            self._thread.start()
        return task

    def tasks(self) -> list[str]:
        """The names of the tasks on the loop, in the order they were added."""
        with self._cond:
            return [task.name for task in self._tasks]

    @property
    def running(self) -> str | None:
        """The name of the task running now, ``None`` between runs (diagnostics; no lock)."""
        task = self._running
        return None if task is None else task.name

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called: no task starts any more."""
        return self._thread.stopping.is_set()

    def _schedule(self, task: Task, delay: float) -> None:
        due = time.monotonic() + max(0.0, delay)
        with self._cond:
            if task._removed or (task._due is not None and task._due <= due):
                return
            task._due = due
            heapq.heappush(self._heap, (due, next(self._order), task))
            self._cond.notify()

    def _remove(self, task: Task, timeout: float) -> bool:
        with self._cond:
            task._removed, task._due = True, None  # its heap entries are skipped from now on
            if task in self._tasks:
                self._tasks.remove(task)
            if threading.get_ident() != self._ident:
                self._cond.wait_for(lambda: self._running is not task, timeout)
            return self._running is not task

    # --- the thread -----------------------------------------------------------------------------

    def _next(self) -> Task | None:
        """Wait (under the lock) for the next due task; ``None``: the loop is stopping."""
        while not self._thread.stopping.is_set():
            heap = self._heap
            while heap and heap[0][2]._due != heap[0][0]:  # removed, or rescheduled sooner: a stale entry
                heapq.heappop(heap)
            if heap and heap[0][0] <= time.monotonic():
                _, _, task = heapq.heappop(heap)
                task._due = None
                self._running = task
                return task
            self._cond.wait(heap[0][0] - time.monotonic() if heap else None)
        return None

    def _loop(self) -> None:
        self._ident = threading.get_ident()
        while True:
            with self._cond:
                task = self._next()
            if task is None:
                return
            try:
                task._run()
            except Exception:  # one owner's failure never ends the others' thread
                log.exception("%s: task %s failed", self.name, task.name)
            finally:
                with self._cond:
                    self._running = None
                    task.runs += 1
                    self._cond.notify_all()  # a remove() waiting for this run
                if task.period is not None:
                    self._schedule(task, task.period)

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Nothing: the thread starts with the first task (:meth:`add`)."""

    def health_check(self) -> str | None:
        """``None``, or ``its thread <name> ended`` when the thread ended before :meth:`stop` (no lock taken)."""
        return self._thread.health_check()

    def stop(self, timeout: float, /) -> None:
        """End the thread once the run in flight (if any) returns, waiting up to ``timeout`` seconds; no task runs
        afterwards. Idempotent."""
        self._thread.request_stop()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(timeout)
