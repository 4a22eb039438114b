"""The shared task loop (:mod:`zkop.runtime.taskloop`): one thread runs the due tasks of several owners, a burst of
wake-ups costs one run, a task that raises or blocks neither ends the thread nor starves the others, removing one
owner's task leaves the others running and never leaves the removed task running afterwards, and a thread that
ended is reported by the loop and by every task on it. Real threads; each wait is for a condition."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator

import pytest
from zkop_testing.waiting import EVENTUALLY, wait_for

from zkop.runtime.taskloop import Task, TaskLoop


class Fatal(BaseException):
    """What a dependency's bug or an interrupt would raise: not an ``Exception``."""


@pytest.fixture
def loop(request: pytest.FixtureRequest) -> Iterator[TaskLoop]:
    """A loop named after the test; stopped (its thread joined) afterwards."""
    made = TaskLoop(f"test-loop-{request.node.name}"[:60])
    yield made
    made.stop(EVENTUALLY)
    thread = next((t for t in threading.enumerate() if t.name == made.name), None)
    assert thread is None or not thread.is_alive(), "the loop's thread outlived stop()"


def recorder(log: list[str], name: str, then: Callable[[], object] = lambda: None) -> Callable[[], None]:
    """A task body appending ``name`` to ``log``, then calling ``then``."""
    def run() -> None:
        log.append(name)
        then()
    return run


def threads_named(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name and t.is_alive()]


def test_every_owners_task_runs_on_one_thread_started_by_the_first(loop: TaskLoop) -> None:
    assert threads_named(loop.name) == []  # nothing added: no thread (a replica that never leads runs none)
    ran_on: dict[str, str] = {}

    def body(name: str) -> Callable[[], object]:
        return lambda: ran_on.setdefault(name, threading.current_thread().name)

    tasks = [loop.add(name, body(name)) for name in ("ensemble-a", "ensemble-b", "ensemble-c")]
    for task in tasks:
        task.wake()
    wait_for(lambda: len(ran_on) == 3, message="every task ran")
    assert ran_on == dict.fromkeys(("ensemble-a", "ensemble-b", "ensemble-c"), loop.name)
    assert len(threads_named(loop.name)) == 1
    assert loop.tasks() == ["ensemble-a", "ensemble-b", "ensemble-c"]


def test_a_burst_of_wake_ups_costs_one_run_and_a_later_due_time_never_postpones_it(loop: TaskLoop) -> None:
    gate, log = threading.Event(), list[str]()
    blocker = loop.add("blocker", recorder(log, "blocker", lambda: gate.wait(EVENTUALLY)))
    debounced = loop.add("debounced", recorder(log, "debounced"))
    sentinel = loop.add("sentinel", recorder(log, "sentinel"))
    blocker.wake()
    wait_for(lambda: log == ["blocker"], message="the loop busy with the blocker")
    for _ in range(5):
        debounced.wake()
    debounced.wake(3600)  # already due sooner: keeps its time
    sentinel.wake()  # due after the burst: when it has run, every run the burst caused has too
    gate.set()
    wait_for(lambda: "sentinel" in log, message="the sentinel ran")
    assert log == ["blocker", "debounced", "sentinel"]
    assert debounced.runs == 1


def test_a_task_woken_later_runs_once_woken_sooner(loop: TaskLoop) -> None:
    log: list[str] = []
    task = loop.add("later", recorder(log, "later"))
    task.wake(3600)
    task.wake(0)  # sooner wins
    wait_for(lambda: task.runs == 1, message="the task ran")
    sentinel = loop.add("sentinel", recorder(log, "sentinel"))
    sentinel.wake()
    wait_for(lambda: "sentinel" in log, message="the sentinel ran")
    assert log == ["later", "sentinel"]  # the hour-later due time was dropped, not run as well


def test_a_periodic_task_runs_again_after_each_period(loop: TaskLoop) -> None:
    task = loop.add("periodic", lambda: None, period=0.01)
    wait_for(lambda: task.runs >= 3, message="three periodic runs")


@pytest.mark.parametrize("period", [0, -1.0])
def test_a_period_must_be_positive(loop: TaskLoop, period: float) -> None:
    with pytest.raises(ValueError, match="period > 0"):
        loop.add("bad", lambda: None, period=period)
    assert loop.tasks() == []


def test_a_task_that_raises_is_logged_and_the_others_go_on(loop: TaskLoop, caplog: pytest.LogCaptureFixture) -> None:
    def boom() -> None:
        raise RuntimeError("a bad object")

    failing = loop.add("ensemble-bad", boom, period=0.01)
    healthy = loop.add("ensemble-good", lambda: None, period=0.01)
    with caplog.at_level(logging.ERROR, logger="zkop.runtime.taskloop"):
        wait_for(lambda: failing.runs >= 3 and healthy.runs >= 3, message="both go on running")
    assert f"{loop.name}: task ensemble-bad failed" in caplog.text
    assert loop.health_check() is None and failing.health_check() is None and healthy.health_check() is None


def test_a_task_that_blocks_delays_another_by_one_run_never_starves_it(loop: TaskLoop) -> None:
    """The hog wakes itself at once on every run and each of its runs blocks (bounded) until the test lets it go:
    the task woken meanwhile still runs before the hog's run after next."""
    log: list[str] = []
    let_go = threading.Semaphore(0)

    def hog_run() -> None:
        log.append("hog")
        hog.wake()  # due again at once, forever
        assert let_go.acquire(timeout=EVENTUALLY)

    hog = loop.add("hog", hog_run)
    other = loop.add("other", recorder(log, "other"))
    hog.wake()
    wait_for(lambda: log == ["hog"], message="the hog runs")
    other.wake()
    for _ in range(3):
        let_go.release()
    wait_for(lambda: "other" in log, message="the other task ran")
    assert log.index("other") <= 2, log  # at most one more run of the hog before it
    hog.remove(0)
    let_go.release(100)  # whatever run of the hog is in flight ends
    wait_for(lambda: hog.remove(0), message="the hog's last run ended")


def test_removing_a_task_waits_for_its_run_and_it_never_starts_again(loop: TaskLoop) -> None:
    gate, log = threading.Event(), list[str]()
    removed = loop.add("ensemble-deleted", recorder(log, "deleted", lambda: gate.wait(EVENTUALLY)), period=0.01)
    kept = loop.add("ensemble-kept", recorder(log, "kept"), period=0.01)
    wait_for(lambda: loop.running == "ensemble-deleted", message="the doomed task runs")
    assert removed.remove(0) is False  # its run is still in flight
    result: list[bool] = []
    remover = threading.Thread(target=lambda: result.append(removed.remove(EVENTUALLY)), name="test-remover")
    remover.start()
    gate.set()
    remover.join(EVENTUALLY)
    assert result == [True] and removed.removed
    runs = removed.runs
    removed.wake()  # a no-op once removed
    before = kept.runs
    wait_for(lambda: kept.runs >= before + 3, message="the kept task goes on")
    assert removed.runs == runs and loop.tasks() == ["ensemble-kept"]
    assert removed.health_check() is None


def test_a_task_removing_itself_does_not_wait_for_its_own_run(loop: TaskLoop) -> None:
    answers: list[bool] = []
    task: list[Task] = []
    task.append(loop.add("self-removing", lambda: answers.append(task[0].remove(3600))))
    task[0].wake()
    wait_for(lambda: task[0].runs == 1, message="the run that removed its task ended")  # not after an hour
    assert answers == [False] and loop.tasks() == []


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_thread_that_ended_is_reported_by_the_loop_and_each_task_on_it_until_stopped(loop: TaskLoop) -> None:
    def fatal() -> None:
        raise Fatal

    bystander = loop.add("ensemble-a", lambda: None)
    gone = loop.add("ensemble-gone", lambda: None)
    gone.remove(EVENTUALLY)
    culprit = loop.add("ensemble-b", fatal)
    assert loop.health_check() is None
    culprit.wake()
    expected = f"its thread {loop.name} ended"
    assert wait_for(loop.health_check) == expected
    assert bystander.health_check() == expected and culprit.health_check() == expected
    assert gone.health_check() is None  # not on the loop any more
    loop.stop(EVENTUALLY)
    assert loop.health_check() is None and bystander.health_check() is None


def test_stop_ends_the_thread_after_the_run_in_flight_and_nothing_runs_afterwards(loop: TaskLoop) -> None:
    gate, log = threading.Event(), list[str]()
    slow = loop.add("slow", recorder(log, "slow", lambda: gate.wait(EVENTUALLY)))
    other = loop.add("other", recorder(log, "other"))
    slow.wake()
    wait_for(lambda: loop.running == "slow", message="the slow task runs")
    other.wake()
    stopper = threading.Thread(target=loop.stop, args=(EVENTUALLY,), name="test-stopper")
    stopper.start()
    wait_for(lambda: loop.stopping, message="the stop asked for")
    gate.set()
    stopper.join(EVENTUALLY)
    assert threads_named(loop.name) == []
    assert log == ["slow"]  # the other, due, never started once the stop was asked for
    late = loop.add("late", recorder(log, "late"))
    late.wake()
    assert log == ["slow"] and loop.health_check() is None and late.health_check() is None
