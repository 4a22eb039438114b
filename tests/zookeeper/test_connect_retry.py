"""Connect until stopped (:func:`zkop.zookeeper.connect_retry.connect_retrying`), the one retry policy of
``zkop run``'s start-up and every ZooKeeperEnsemble's runtime: the waits, the stop, what is raised."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from tenacity import RetryCallState

from zkop.zookeeper.connect_retry import FIRST_DELAY, MAX_DELAY, connect_retrying
from zkop.zookeeper.errors import ZooKeeperError, ZooKeeperUnavailable


class Connect:
    """An attempt that fails with ``errors`` in turn, then succeeds; ``on_attempt`` runs at each."""

    def __init__(self, *errors: BaseException, on_attempt: Callable[[int], None] = lambda n: None) -> None:
        self.errors = list(errors)
        self.attempts = 0
        self.on_attempt = on_attempt

    def __call__(self) -> str:
        self.attempts += 1
        self.on_attempt(self.attempts)
        if self.errors:
            raise self.errors.pop(0)
        return "connected"


def run(connect: Connect, stop: threading.Event, sleep: Callable[[float], object],
        before_sleep: Callable[[RetryCallState], None] | None = None) -> str:
    for attempt in connect_retrying(stop, retry_on=ZooKeeperUnavailable, before_sleep=before_sleep, sleep=sleep):
        with attempt:
            result = connect()
    return result


def test_the_waits_double_from_half_a_second_to_ten_seconds_until_an_attempt_succeeds() -> None:
    waits: list[float] = []
    reasons: list[str] = []
    connect = Connect(*(ZooKeeperUnavailable(f"down {n}") for n in range(8)))
    result = run(connect, threading.Event(), waits.append,
                 before_sleep=lambda s: reasons.append(str(s.outcome.exception() if s.outcome else None)))
    assert result == "connected" and connect.attempts == 9
    assert (FIRST_DELAY, MAX_DELAY) == (0.5, 10.0)
    assert waits == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]
    assert reasons == [f"down {n}" for n in range(8)]  # the hook sees each failure, before its wait


def test_a_stop_during_a_wait_ends_it_and_no_attempt_follows() -> None:
    stop = threading.Event()
    waits: list[float] = []

    def wait(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 2:
            stop.set()

    connect = Connect(*(ZooKeeperUnavailable(f"down {n}") for n in range(5)))
    with pytest.raises(ZooKeeperUnavailable, match="down 1"):  # the last attempt's error
        run(connect, stop, wait)
    assert connect.attempts == 2 and waits == [0.5, 1.0]


def test_the_default_wait_is_the_stop_event_so_a_stop_ends_it_at_once() -> None:
    stop = threading.Event()
    connect = Connect(ZooKeeperUnavailable("down"), ZooKeeperUnavailable("down"))
    started = time.monotonic()
    with pytest.raises(ZooKeeperUnavailable, match="down"):
        # set just before the 0.5 s wait (after tenacity's own stop check): the wait returns at once
        for attempt in connect_retrying(stop, retry_on=ZooKeeperUnavailable, before_sleep=lambda s: stop.set()):
            with attempt:
                connect()
    assert connect.attempts == 1
    assert time.monotonic() - started < FIRST_DELAY


def test_a_stop_during_an_attempt_raises_its_error_without_waiting() -> None:
    stop = threading.Event()
    waits: list[float] = []
    connect = Connect(ZooKeeperUnavailable("down"), on_attempt=lambda n: stop.set())
    with pytest.raises(ZooKeeperUnavailable, match="down"):
        run(connect, stop, waits.append)
    assert connect.attempts == 1 and waits == []


def test_a_success_after_a_stop_is_still_a_success() -> None:
    stop = threading.Event()
    connect = Connect(on_attempt=lambda n: stop.set())
    assert run(connect, stop, lambda s: None) == "connected"


@pytest.mark.parametrize("error", [ZooKeeperError("probe refused"), RuntimeError("bug")])
def test_an_error_that_is_not_retried_ends_the_retries_at_once(error: BaseException) -> None:
    waits: list[float] = []
    connect = Connect(ZooKeeperUnavailable("down"), error)
    with pytest.raises(type(error), match=str(error)):
        run(connect, threading.Event(), waits.append)
    assert connect.attempts == 2 and waits == [0.5]
