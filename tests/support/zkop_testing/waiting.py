"""Polling helper for tests: wait for a condition instead of sleeping.

Tests across the project use :func:`wait_for` rather than ``time.sleep`` so that
they finish as soon as the condition holds and fail with a clear message when it
never does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar, cast

__all__ = ["EVENTUALLY", "result_within", "wait_for"]

T = TypeVar("T")

#: The bound, in seconds, on a wait for something that merely must happen eventually (a watch
#: opens, a reconcile lands, a thread ends): generous under any load, since it only says when a
#: test stops waiting and fails; it is never a claim about how fast anything is. A wait whose
#: length is the point of the test (a window in which something must *not* happen) uses its own.
EVENTUALLY = 60.0


def wait_for(
    predicate: Callable[[], T | None],
    timeout: float = EVENTUALLY,
    interval: float = 0.02,
    message: str = "",
    *,
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``predicate`` repeatedly until it returns a truthy value; return that value.

    :param predicate: zero-argument callable; any truthy return value ends the wait
        and is returned unchanged (so it can hand back the thing it found).
    :param timeout: longest time to keep polling, in seconds (monotonic clock); by default
        :data:`EVENTUALLY`. The predicate is always called at least once, and once more at the
        deadline.
    :param interval: pause between calls, in seconds.
    :param message: text put first in the ``TimeoutError`` message.
    :param ignore: exception types that count as "not yet" (e.g. kazoo's
        ``ConnectionLoss`` while a server restarts). Any other exception raised by
        the predicate propagates immediately.
    :returns: the first truthy value returned by ``predicate``.
    :raises TimeoutError: if no call returned a truthy value within ``timeout``; the
        message includes the last value returned or the last ignored exception.
    :raises ValueError: if ``timeout`` or ``interval`` is negative.
    """
    if timeout < 0 or interval < 0:
        raise ValueError(f"timeout and interval must be >= 0, got {timeout=} {interval=}")
    deadline = time.monotonic() + timeout
    last: object = None
    last_exc: BaseException | None = None
    while True:
        try:
            value = predicate()
        except ignore as exc:
            last_exc = exc
        else:
            if value:
                return value
            last, last_exc = value, None
        now = time.monotonic()
        if now >= deadline:
            break
        time.sleep(min(interval, deadline - now))
    what = message or f"condition {getattr(predicate, '__qualname__', predicate)!r}"
    detail = f"last exception: {last_exc!r}" if last_exc is not None else f"last value: {last!r}"
    raise TimeoutError(f"{what} not met within {timeout:g} s ({detail})") from last_exc


def result_within(call: Callable[[], T], timeout: float = 120.0, message: str = "") -> T:
    """``call()`` on a daemon thread of its own; its return value, or its exception raised here, once it returns.

    For a call that must return because of something it notices, not because a timer ran out: give the
    timer it must not wait for a length no wait of the test can be (an hour), and ``timeout`` only says
    when to stop waiting (minutes, generous under any load). The thread of a call still running then is
    left behind (a daemon: it cannot keep the run from ending).

    :raises TimeoutError: ``call`` still running after ``timeout`` seconds.
    """
    outcome: list[tuple[bool, object]] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # handed to the caller
            outcome.append((False, exc))

    thread = threading.Thread(target=run, name=f"result-within-{getattr(call, '__name__', 'call')}", daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        what = message or f"{getattr(call, '__qualname__', call)!r}"
        raise TimeoutError(f"{what}: still running after {timeout:g} s")
    returned, value = outcome[0]
    if not returned:
        raise cast(BaseException, value)
    return cast(T, value)
