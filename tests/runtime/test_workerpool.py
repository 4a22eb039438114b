"""The shared worker pool (:mod:`zkop.runtime.workerpool`): its threads are the only workers of every controller
attached to it, it is fair between them (a controller with a backlog cannot starve another), it keeps the work
queue's rules (a key is never reconciled twice at once; one added while reconciled is reconciled once more), and a
worker that dies is reported by the pool and by every controller it serves."""

from __future__ import annotations

import threading

import pytest
from zkop_testing.waiting import EVENTUALLY, wait_for

from zkop.runtime.controller import Controller, Result
from zkop.runtime.workerpool import WorkerPool


class Recording:
    """Records each key with its controller's name; holds every reconcile until ``release`` is set."""

    def __init__(self, name: str, log: list[str], lock: threading.Lock, release: threading.Event) -> None:
        self.name, self.log, self.lock, self.release = name, log, lock, release
        self.running: set[str] = set()
        self.overlaps = 0

    def reconcile(self, key: str) -> Result:
        with self.lock:
            if key in self.running:
                self.overlaps += 1
            self.running.add(key)
            self.log.append(f"{self.name}:{key}")
        self.release.wait(EVENTUALLY)
        with self.lock:
            self.running.discard(key)
        return Result()


def new_threads(before: set[threading.Thread]) -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t not in before and t.is_alive())


def test_a_controller_with_a_backlog_does_not_starve_another() -> None:
    log: list[str] = []
    lock, release = threading.Lock(), threading.Event()
    release.set()
    pool = WorkerPool("test-pool-fair", 1)
    busy = Controller("test-busy", Recording("busy", log, lock, release), pool=pool)
    quiet = Controller("test-quiet", Recording("quiet", log, lock, release), pool=pool)
    release.clear()  # the first pick is held until every key is queued
    for index in range(100):
        busy.queue.add(f"b{index}")
    busy.start()
    wait_for(lambda: len(log) == 1, message="the one worker holds busy's first key")
    for index in range(5):
        quiet.queue.add(f"q{index}")
    quiet.start()
    release.set()
    try:
        wait_for(lambda: len(log) == 105, message="every key reconciled")
        # Round-robin: once quiet has keys, each of its keys comes within one turn of busy's.
        last_quiet = max(i for i, entry in enumerate(log) if entry.startswith("quiet:"))
        assert last_quiet <= 1 + 2 * 5, log[:15]
        assert sorted(e for e in log if e.startswith("quiet:")) == [f"quiet:q{i}" for i in range(5)]
    finally:
        busy.stop(EVENTUALLY)
        quiet.stop(EVENTUALLY)
        pool.stop(EVENTUALLY)


def test_the_pools_threads_are_every_attached_controllers_only_workers() -> None:
    before = set(threading.enumerate())
    log: list[str] = []
    lock, release = threading.Lock(), threading.Event()
    release.set()
    pool = WorkerPool("test-pool-bounded", 2)
    controllers = [Controller(f"test-bounded-{i}", Recording(str(i), log, lock, release), workers=8, pool=pool)
                   for i in range(10)]
    for controller in controllers:
        controller.start()
        controller.queue.add("k")
    try:
        wait_for(lambda: len(log) == 10, message="each controller's key reconciled")
        workers = [name for name in new_threads(before) if "worker" in name]
        assert workers == ["test-pool-bounded-worker-0", "test-pool-bounded-worker-1"]
        assert all(c.workers == 2 for c in controllers) and pool.attached() == [c.name for c in controllers]
    finally:
        for controller in controllers:
            controller.stop(EVENTUALLY)
        pool.stop(EVENTUALLY)
    assert pool.attached() == []
    assert [name for name in new_threads(before) if "worker" in name] == []


def test_a_key_is_never_reconciled_twice_at_once_and_a_re_add_runs_once_more() -> None:
    log: list[str] = []
    lock, release = threading.Lock(), threading.Event()
    reconciler = Recording("c", log, lock, release)
    pool = WorkerPool("test-pool-stingy", 4)
    controller = Controller("test-stingy", reconciler, pool=pool)
    controller.start()
    try:
        controller.queue.add("k")
        wait_for(lambda: len(log) == 1, message="the first reconcile runs")
        for _ in range(3):  # added while it runs: once more afterwards, never beside it
            controller.queue.add("k")
        release.set()
        wait_for(lambda: len(log) == 2 and controller.settled(), message="one more reconcile")
        assert reconciler.overlaps == 0 and log == ["c:k", "c:k"]
    finally:
        release.set()
        controller.stop(EVENTUALLY)
        pool.stop(EVENTUALLY)


class Fault(BaseException):
    """What ends a thread from inside: a BaseException, as a KeyboardInterrupt or a dependency's bug."""


class Dies:
    def reconcile(self, key: str) -> Result:
        raise Fault("from inside the worker")  # ends the pool's worker, as it ends a controller's own


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_dead_worker_is_reported_by_the_pool_and_every_controller_it_serves() -> None:
    pool = WorkerPool("test-pool-dies", 1)
    dying = Controller("test-dies", Dies(), pool=pool)
    other = Controller("test-served", Recording("o", [], threading.Lock(), threading.Event()), pool=pool)
    dying.start()
    other.start()
    try:
        dying.queue.add("k")
        wait_for(lambda: pool.health_check() is not None, message="the worker ended")
        assert pool.health_check() == ("worker threads died: test-pool-dies-worker-0 "
                                       "(ended by Fault: from inside the worker)")
        assert dying.health_check() == other.health_check() == pool.health_check()
    finally:
        dying.stop(0.1)
        other.stop(0.1)
        pool.stop(0.1)


def test_a_pool_needs_a_worker() -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        WorkerPool("test-pool-none", 0)
