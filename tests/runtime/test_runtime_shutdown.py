"""Stopping the runtime leaves nothing running: the delaying queue, the controller and the Manager join their threads.

Each test takes the threads that appeared while the owner ran and asserts that none is alive when
``shutdown``/``stop``/``run`` returns (not eventually). A step busy when the stop comes (an add
of the delaying thread, a leader runnable's start) takes a fixed 0.3 s, standing for real work.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import TypeVar

import pytest
from zkop_testing.apiserver import ApiServer
from zkop_testing.threads import zkop_threads
from zkop_testing.waiting import EVENTUALLY, wait_for

from zkop.kube.client import KubeClient
from zkop.runtime.controller import Controller, Result
from zkop.runtime.manager import LeaderElectionOptions, Manager, ManagerOptions
from zkop.runtime.workqueue import DelayingQueue, RateLimitingQueue

T = TypeVar("T", bound=Hashable)

#: Seconds a busy step lasts when the stop comes.
BUSY = 0.3


def new_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t not in before]


def alive(threads: list[threading.Thread]) -> list[str]:
    return [t.name for t in threads if t.is_alive()]


class SlowDelayedAdd(DelayingQueue[T]):
    """A delaying queue whose delaying thread takes :data:`BUSY` seconds to add a ready item."""

    moving = threading.Event()

    def add(self, item: T) -> None:
        if threading.current_thread().name.startswith("workqueue-delay-"):
            self.moving.set()
            threading.Event().wait(BUSY)
        super().add(item)


@pytest.mark.parametrize("drain", [False, True], ids=["shutdown", "shutdown_with_drain"])
def test_delaying_queue_shutdown_joins_its_delay_thread(drain: bool) -> None:
    q: SlowDelayedAdd[str] = SlowDelayedAdd("slow")
    q.moving = threading.Event()
    before = set(threading.enumerate())
    q.add_after("waiting", 60.0)
    q.add_after("ready", 0.01)
    started = new_threads(before)
    assert [t.name for t in started] == ["workqueue-delay-slow"]
    assert q.moving.wait(EVENTUALLY)  # the delaying thread is adding "ready" when the shutdown comes
    if drain:
        assert q.shutdown_with_drain(1.0)
    else:
        q.shutdown()
    assert alive(started) == []
    q.shutdown()  # idempotent
    q.add_after("late", 0.01)  # no thread starts after shutdown
    assert new_threads(before) == []


def test_controller_stop_joins_workers_and_the_delay_thread() -> None:
    reconciled = threading.Event()

    class Requeue:
        def reconcile(self, key: str) -> Result:
            reconciled.set()
            return Result(requeue_after=60.0)  # a key waiting in the delaying queue at stop

    controller = Controller("shutdown-test", Requeue(), workers=3, queue=RateLimitingQueue("shutdown-test"))
    before = set(threading.enumerate())
    controller.start()
    controller.queue.add("ns/a")
    assert reconciled.wait(EVENTUALLY)
    wait_for(lambda: "workqueue-delay-shutdown-test" in {t.name for t in new_threads(before)},
             message="the delaying thread")
    started = new_threads(before)
    assert len(started) == 4  # three workers and the delaying thread
    assert controller.stop(5.0)
    assert alive(started) == []
    assert controller.stop(5.0)  # idempotent


def test_controller_stopped_by_its_own_reconcile_does_not_join_its_worker() -> None:
    errors: list[BaseException] = []
    controller: Controller

    class StopFromReconcile:
        def reconcile(self, key: str) -> Result:
            try:
                controller.stop(0.0)  # on a worker thread: the one thing it must not join
            except BaseException as err:
                errors.append(err)
            return Result()

    controller = Controller("stop-from-reconcile", StopFromReconcile(), workers=2,
                            queue=RateLimitingQueue("stop-from-reconcile"))
    before = set(threading.enumerate())
    controller.start()
    started = new_threads(before)
    controller.queue.add("ns/a")
    wait_for(lambda: alive(started) == [], message="workers end after the reconcile returns")
    assert errors == []


class SlowStart:
    """A leader runnable whose start takes :data:`BUSY` seconds; records its calls."""

    name = "slow-start"

    def __init__(self) -> None:
        self.log: list[str] = []
        self.starting = threading.Event()

    def start(self) -> None:
        self.starting.set()
        threading.Event().wait(BUSY)
        self.log.append("start")

    def stop(self, timeout: float, /) -> None:
        self.log.append("stop")


def test_manager_run_returns_with_its_election_and_start_threads_ended(apiserver: ApiServer) -> None:
    kube = KubeClient(apiserver.api_client())
    election = LeaderElectionOptions(namespace="default", name="shutdown-test", identity="me", lease_duration=30.0,
                                     renew_deadline=20.0, retry_period=0.5)
    manager = Manager(ManagerOptions(metrics_bind_address="0", health_probe_bind_address="0", cache_sync_poll=0.01,
                                     leader_election=election), kube)
    runnable = SlowStart()
    manager.add(runnable, needs_leader=True)
    codes: list[int] = []
    before = set(threading.enumerate())
    runner = threading.Thread(target=lambda: codes.append(manager.run()), name="test-manager-run")
    runner.start()
    assert runnable.starting.wait(EVENTUALLY)  # leading, and the leader runnable is starting when the stop comes
    started = [t for t in new_threads(before) if t is not runner]
    assert {"leader-election", "start-leader-runnables"} <= {t.name for t in started}
    manager.stop()
    runner.join(EVENTUALLY)
    kube.close()
    assert codes == [0]
    assert alive([t for t in started if t.name in ("leader-election", "start-leader-runnables")]) == []
    assert zkop_threads(before) == []  # and nothing else of the Manager's (the API server's threads aside)
    assert runnable.log == ["start", "stop"]  # stopped only once its start returned


class HeldStart:
    """A leader runnable whose start returns only once :attr:`release` is set; records its calls."""

    name = "held-start"

    def __init__(self) -> None:
        self.log: list[str] = []
        self.starting = threading.Event()
        self.release = threading.Event()

    def start(self) -> None:
        self.starting.set()
        self.release.wait(EVENTUALLY)
        self.log.append("start")

    def stop(self, timeout: float, /) -> None:
        self.log.append("stop")


#: Seconds the run is watched after the stop while a start is held: beyond the 2 s the Manager
#: used to give a start in progress (on a starved machine, a 0.3 s start outlived it).
HELD = 3.0


def test_a_clean_stop_waits_for_a_leader_runnable_start_in_progress_within_the_drain(apiserver: ApiServer) -> None:
    kube = KubeClient(apiserver.api_client())
    election = LeaderElectionOptions(namespace="default", name="held-start-test", identity="me", lease_duration=30.0,
                                     renew_deadline=20.0, retry_period=0.5)
    manager = Manager(ManagerOptions(metrics_bind_address="0", health_probe_bind_address="0", cache_sync_poll=0.01,
                                     graceful_shutdown_timeout=60.0, leader_election=election), kube)
    runnable = HeldStart()
    manager.add(runnable, needs_leader=True)
    codes: list[int] = []
    runner = threading.Thread(target=lambda: codes.append(manager.run()), name="test-manager-run")
    runner.start()
    try:
        assert runnable.starting.wait(EVENTUALLY)
        manager.stop()
        runner.join(HELD)
        assert runner.is_alive(), "the run returned while a leader runnable was still starting"
        assert runnable.log == []  # not stopped before its start returned
    finally:
        runnable.release.set()
        runner.join(EVENTUALLY)
        kube.close()
    assert codes == [0]
    assert runnable.log == ["start", "stop"]
