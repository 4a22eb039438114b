"""Work queue guarantees (client-go util/workqueue semantics), single- and multi-threaded."""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Hashable

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from zkop_testing.waiting import EVENTUALLY, wait_for

from zkop.runtime.workqueue import DelayingQueue, RateLimitingQueue, WorkQueue
from zkop.runtime.workqueue import delaying as delaying_module
from zkop.runtime.workqueue.ratelimit import ItemExponentialFailureRateLimiter

pytestmark = pytest.mark.timeout(60)


def start(target: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def drain_now(q: WorkQueue[str]) -> list[str]:
    """Get (and finish) everything currently queued, without blocking."""
    out: list[str] = []
    while True:
        item, _ = q.get(timeout=0)
        if item is None:
            return out
        out.append(item)
        q.done(item)


# ------------------------------------------------------------------ basics


def test_fifo_and_dedup_before_pickup() -> None:
    q: WorkQueue[str] = WorkQueue()
    for item in ["a", "b", "a", "c", "b", "a"]:
        q.add(item)
    assert len(q) == 3
    assert drain_now(q) == ["a", "b", "c"]
    assert len(q) == 0


def test_get_times_out_without_shutdown() -> None:
    q: WorkQueue[str] = WorkQueue()
    assert q.get(timeout=0) == (None, False)
    t0 = time.monotonic()
    assert q.get(timeout=0.05) == (None, False)
    assert time.monotonic() - t0 >= 0.04


def test_blocked_get_wakes_on_add() -> None:
    q: WorkQueue[str] = WorkQueue()
    got: list[tuple[str | None, bool]] = []
    t = start(lambda: got.append(q.get()))
    q.add("x")
    t.join(EVENTUALLY)
    assert got == [("x", False)]


def test_item_being_processed_is_not_handed_out_again() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    item, _ = q.get()
    assert item == "a"
    q.add("a")
    q.add("a")
    q.add("a")
    assert len(q) == 0
    assert q.get(timeout=0) == (None, False)  # still processing: not available
    q.done("a")
    assert len(q) == 1
    assert q.get(timeout=0) == ("a", False)  # exactly one more run ...
    q.done("a")
    assert q.get(timeout=0) == (None, False)  # ... and no more


def test_readd_during_processing_goes_to_the_back() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    assert q.get(timeout=0) == ("a", False)
    q.add("a")
    q.add("b")
    q.done("a")
    assert drain_now(q) == ["b", "a"]


def test_done_without_get_is_harmless() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.done("ghost")
    q.add("a")
    assert drain_now(q) == ["a"]


# ------------------------------------------------------------------ shutdown


def test_shutdown_hands_out_queued_items_then_reports_shutdown() -> None:
    q: WorkQueue[str] = WorkQueue()
    for item in "abc":
        q.add(item)
    q.shutdown()
    assert q.shutting_down()
    q.add("d")  # dropped
    got = [q.get(timeout=1) for _ in range(4)]
    assert got == [("a", False), ("b", False), ("c", False), (None, True)]
    assert q.get() == (None, True)  # does not block once shut down and empty


def test_shutdown_wakes_every_blocked_getter() -> None:
    q: WorkQueue[str] = WorkQueue()
    results: list[tuple[str | None, bool]] = []
    lock = threading.Lock()

    def worker() -> None:
        r = q.get()
        with lock:
            results.append(r)

    threads = [start(worker) for _ in range(5)]
    q.shutdown()
    for t in threads:
        t.join(EVENTUALLY)
        assert not t.is_alive()
    assert results == [(None, True)] * 5


def test_readd_while_processing_during_shutdown_is_still_handed_out() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.get()
    q.add("a")
    q.shutdown()
    q.done("a")
    assert q.get(timeout=1) == ("a", False)
    q.done("a")
    assert q.get(timeout=1) == (None, True)


def test_shutdown_with_drain_waits_for_in_flight_items() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    assert q.get(timeout=0) == ("a", False)
    assert q.get(timeout=0) == ("b", False)
    result: list[bool] = []
    drainer = start(lambda: result.append(q.shutdown_with_drain()))
    wait_for(q.shutting_down, interval=0.002)
    q.add("c")  # dropped: shutting down
    q.done("a")
    drainer.join(0.1)
    assert drainer.is_alive(), "returned while 'b' was still being processed"
    q.done("b")
    drainer.join(EVENTUALLY)
    assert result == [True]
    assert q.get(timeout=0) == (None, True)


def test_shutdown_with_drain_returns_at_once_when_idle() -> None:
    q: WorkQueue[str] = WorkQueue()
    assert q.shutdown_with_drain(timeout=0) is True


def test_shutdown_with_drain_times_out() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.get()
    assert q.shutdown_with_drain(timeout=0.05) is False
    q.done("a")
    assert q.shutdown_with_drain(timeout=0) is True


def test_shutdown_cancels_a_drain() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.get()
    result: list[bool] = []
    drainer = start(lambda: result.append(q.shutdown_with_drain()))
    wait_for(q.shutting_down, interval=0.002)
    q.shutdown()
    drainer.join(EVENTUALLY)
    assert result == [False]


def test_drain_with_several_waiters_and_a_requeued_item() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.get()
    q.add("a")  # dirty while processing
    results: list[bool] = []
    lock = threading.Lock()

    def drain() -> None:
        r = q.shutdown_with_drain()
        with lock:
            results.append(r)

    drainers = [start(drain) for _ in range(3)]
    wait_for(q.shutting_down, interval=0.002)
    q.done("a")  # processing empties; "a" goes back in the queue
    for d in drainers:
        d.join(EVENTUALLY)
        assert not d.is_alive()
    assert results == [True, True, True]
    assert q.get(timeout=0) == ("a", False)


# ------------------------------------------------------------------ model-based (hypothesis)


class WorkQueueModel(RuleBasedStateMachine):
    """Random single-threaded add/get/done/shutdown sequences against a reference model."""

    def __init__(self) -> None:
        super().__init__()
        self.q: WorkQueue[int] = WorkQueue()
        self.queue: deque[int] = deque()
        self.dirty: set[int] = set()
        self.processing: set[int] = set()
        self.shut = False

    @rule(item=st.integers(0, 5))
    def add(self, item: int) -> None:
        self.q.add(item)
        if self.shut or item in self.dirty:
            return
        self.dirty.add(item)
        if item not in self.processing:
            self.queue.append(item)

    @rule()
    def get(self) -> None:
        got = self.q.get(timeout=0)
        if self.queue:
            item = self.queue.popleft()
            assert got == (item, False)
            self.processing.add(item)
            self.dirty.discard(item)
        else:
            assert got == (None, self.shut)

    @precondition(lambda self: bool(self.processing))
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        item = data.draw(st.sampled_from(sorted(self.processing)))
        self.q.done(item)
        self.processing.discard(item)
        if item in self.dirty:
            self.queue.append(item)

    @rule()
    def shutdown(self) -> None:
        self.q.shutdown()
        self.shut = True

    @invariant()
    def same_length(self) -> None:
        assert len(self.q) == len(self.queue)
        assert self.q.shutting_down() == self.shut


TestWorkQueueModel = WorkQueueModel.TestCase
TestWorkQueueModel.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


# ------------------------------------------------------------------ concurrency


def test_many_workers_never_share_an_item_and_see_every_last_add() -> None:
    """Stingy + 'added while processing is processed again', under contention.

    Producers bump an item's version and then add it; a worker records the version it saw when
    it picked the item up.  After the queue is drained every item must have been seen at its
    final version, and no item may ever be active in two workers at once.
    """
    q: WorkQueue[int] = WorkQueue()
    n_items, n_producers, adds_per_producer, n_workers = 40, 4, 600, 8
    lock = threading.Lock()
    version = [0] * n_items
    seen = [0] * n_items
    active: set[int] = set()
    overlaps: list[int] = []
    runs: Counter[int] = Counter()

    def producer(seed: int) -> None:
        for k in range(adds_per_producer):
            item = (seed * 7919 + k * 31) % n_items
            with lock:
                version[item] += 1
            q.add(item)

    def worker() -> None:
        while True:
            item, shutdown = q.get()
            if shutdown:
                return
            assert item is not None
            with lock:
                if item in active:
                    overlaps.append(item)
                active.add(item)
                seen[item] = max(seen[item], version[item])
                runs[item] += 1
            time.sleep(0)  # let others run while "processing"
            with lock:
                active.discard(item)
            q.done(item)

    workers = [start(worker) for _ in range(n_workers)]
    producers = [start(functools.partial(producer, s)) for s in range(n_producers)]
    for p in producers:
        p.join(EVENTUALLY)
    assert q.shutdown_with_drain(timeout=30)
    for w in workers:
        w.join(EVENTUALLY)
        assert not w.is_alive()
    assert overlaps == []
    assert seen == version
    assert sum(runs.values()) <= n_producers * adds_per_producer
    assert all(runs[i] >= 1 for i in range(n_items) if version[i])


def test_fifo_across_threads_single_worker() -> None:
    q: WorkQueue[int] = WorkQueue()
    out: list[int] = []

    def worker() -> None:
        while True:
            item, shutdown = q.get()
            if shutdown:
                return
            assert item is not None
            out.append(item)
            q.done(item)

    w = start(worker)
    for i in range(2000):
        q.add(i)
    q.shutdown()
    w.join(EVENTUALLY)
    assert out == list(range(2000))


# ------------------------------------------------------------------ delaying queue


def shut_down(q: DelayingQueue[str]) -> None:
    """Shut ``q`` down; its delay thread, if it started one, has ended when shutdown returns."""
    q.shutdown()
    thread = q._delay_thread
    assert thread is None or not thread.is_alive(), "the delay thread outlived shutdown"


def test_add_after_non_positive_delay_adds_immediately() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    q.add_after("a", 0)
    q.add_after("b", -3)
    assert drain_now(q) == ["a", "b"]
    assert q._delay_thread is None  # no waiting needed, no thread started


def test_add_after_releases_in_ready_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # The queue's own clock, frozen while the items are added: on the real one, a test thread paused
    # for 100 ms between two add_after calls (a busy machine) made "late" ready before "early".
    monkeypatch.setattr(delaying_module, "MAX_WAIT", 0.02)  # the heartbeat that notices the clock moved
    now = [0.0]
    q: DelayingQueue[str] = DelayingQueue(clock=lambda: now[0])
    q.add_after("late", 0.15)
    q.add_after("early", 0.05)
    q.add_after("middle", 0.10)
    assert q.get(timeout=0.1) == (None, False)
    now[0] = 0.15  # all three ready at once: released by deadline, not by insertion
    got = [q.get(timeout=EVENTUALLY)[0] for _ in range(3)]
    assert got == ["early", "middle", "late"]
    shut_down(q)


def test_add_after_earliest_deadline_wins() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    q.add_after("a", 60.0)
    q.add_after("a", 0.05)  # earlier: replaces the 60 s deadline
    q.add_after("b", 0.05)
    q.add_after("b", 60.0)  # later: ignored, does not postpone
    assert q._num_waiting() == 2
    got = {q.get(timeout=EVENTUALLY)[0], q.get(timeout=EVENTUALLY)[0]}
    assert got == {"a", "b"}
    assert q._num_waiting() == 0  # nothing left waiting at 60 s
    shut_down(q)


def test_add_after_waiting_item_is_not_duplicated_in_queue() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    q.add_after("a", 0.02)
    q.add_after("a", 0.03)
    item, _ = q.get(timeout=EVENTUALLY)
    assert item == "a"
    q.done("a")
    assert q.get(timeout=0.1) == (None, False)
    shut_down(q)


def test_add_after_ignored_after_shutdown_and_loop_stops() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    q.add_after("a", 30.0)
    thread = q._delay_thread
    assert thread is not None
    q.shutdown()
    assert not thread.is_alive()  # joined by shutdown
    q.add_after("b", 0.0)
    q.add_after("c", 0.01)
    assert q.get(timeout=0.05) == (None, True)
    assert q._num_waiting() == 0


def test_delaying_loop_wakes_at_least_every_max_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a fake clock nothing notifies the loop when time jumps; only the heartbeat does."""
    monkeypatch.setattr(delaying_module, "MAX_WAIT", 0.02)
    now = [0.0]
    q: DelayingQueue[str] = DelayingQueue(clock=lambda: now[0])
    q.add_after("a", 3600.0)
    assert q.get(timeout=0.1) == (None, False)
    now[0] += 3600.0
    assert q.get(timeout=EVENTUALLY) == ("a", False)
    shut_down(q)


# ------------------------------------------------------------------ rate limiting queue


class RecordingLimiter:
    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.whens: list[Hashable] = []
        self.forgotten: list[Hashable] = []

    def when(self, item: Hashable) -> float:
        self.whens.append(item)
        return self.delay

    def forget(self, item: Hashable) -> None:
        self.forgotten.append(item)

    def num_requeues(self, item: Hashable) -> int:
        return self.whens.count(item)


def test_rate_limited_add_uses_the_limiter_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    # The queue's own clock: on the real one "not ready yet" was a 50 ms window a busy machine can miss.
    monkeypatch.setattr(delaying_module, "MAX_WAIT", 0.02)
    now = [0.0]
    limiter = RecordingLimiter(30.0)
    q: RateLimitingQueue[str] = RateLimitingQueue(rate_limiter=limiter, clock=lambda: now[0])
    q.add_rate_limited("a")
    assert limiter.whens == ["a"]
    now[0] = 29.9
    assert q.get(timeout=0.1) == (None, False)  # not before the limiter's 30 s
    now[0] = 30.0
    assert q.get(timeout=EVENTUALLY)[0] == "a"
    assert q.num_requeues("a") == 1
    q.forget("a")
    assert limiter.forgotten == ["a"]
    shut_down(q)


def test_rate_limited_requeue_grows_and_forget_resets() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue(
        rate_limiter=ItemExponentialFailureRateLimiter[str](0.001, 0.004)
    )
    for expected in range(1, 5):
        q.add_rate_limited("a")
        assert q.get(timeout=EVENTUALLY)[0] == "a"
        q.done("a")
        assert q.num_requeues("a") == expected
    q.forget("a")
    assert q.num_requeues("a") == 0
    shut_down(q)


def test_default_rate_limiting_queue_retries_quickly_at_first() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    q.add_rate_limited("a")  # 5 ms
    assert q.get(timeout=EVENTUALLY)[0] == "a"
    assert q.num_requeues("a") == 1
    q.forget("a")
    assert q.num_requeues("a") == 0
    shut_down(q)
