"""Polling helper for tests: wait for a condition instead of sleeping.

Tests across the project use :func:`wait_for` rather than ``time.sleep`` so that
they finish as soon as the condition holds and fail with a clear message when it
never does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["wait_for"]

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T | None],
    timeout: float = 10.0,
    interval: float = 0.02,
    message: str = "",
    *,
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``predicate`` repeatedly until it returns a truthy value; return that value.

    :param predicate: zero-argument callable; any truthy return value ends the wait
        and is returned unchanged (so it can hand back the thing it found).
    :param timeout: longest time to keep polling, in seconds (monotonic clock). The
        predicate is always called at least once, and once more at the deadline.
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
