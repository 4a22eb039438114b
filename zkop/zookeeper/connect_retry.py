"""Connect until stopped: the one retry policy for opening a ZooKeeper session (tenacity).

``zkop run``'s start-up (the flags' ensemble) and every ZooKeeperEnsemble's runtime try to connect the
same way: attempts 0.5 s apart, the wait doubling to 10 s (an ensemble electing a leader answers within
seconds; one that is down is asked about every 10 s), for as long as it takes, until the owner stops.
A stop ends the waiting at once and no attempt is made after it: the last attempt's error is raised
(tenacity's ``reraise``), so the caller tells "stopped" from "connected" by the exception alone.

Usage::

    try:
        for attempt in connect_retrying(stop, retry_on=ZooKeeperUnavailable, before_sleep=report):
            with attempt:
                connect()
    except ZooKeeperUnavailable:
        return  # stopped before a session was made
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from tenacity import RetryCallState, Retrying, retry_if_exception_type, wait_exponential
from tenacity.stop import stop_base

__all__ = ["FIRST_DELAY", "MAX_DELAY", "connect_retrying"]

#: Seconds before the second attempt; each later wait doubles, up to :data:`MAX_DELAY`.
FIRST_DELAY = 0.5
#: The longest wait between two attempts, seconds.
MAX_DELAY = 10.0


class _StopWhenSet(stop_base):
    """tenacity stop strategy: give up once ``event`` is set."""

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.event.is_set()


def connect_retrying(stop: threading.Event, *, retry_on: type[BaseException] | tuple[type[BaseException], ...],
                     before_sleep: Callable[[RetryCallState], None] | None = None,
                     sleep: Callable[[float], object] | None = None) -> Retrying:
    """A tenacity :class:`~tenacity.Retrying` that repeats an attempt raising ``retry_on`` every
    :data:`FIRST_DELAY` seconds doubling to :data:`MAX_DELAY` seconds, until it succeeds or ``stop`` is set.

    Args:
        stop: once set, no further attempt is made and the wait in progress ends (when ``sleep`` is
            ``stop.wait``, the default, or itself returns early on it).
        retry_on: the errors that mean "not reachable yet"; any other error ends the retries at once.
        before_sleep: called after each failed attempt that will be retried (tenacity's hook), e.g. to log
            each distinct reason once.
        sleep: waits the given seconds (default ``stop.wait``).

    Raises (from the iteration):
        ``retry_on``: the last attempt's error, when ``stop`` was set before an attempt succeeded.
        Any other error an attempt raised.
    """
    wait = sleep if sleep is not None else stop.wait
    failures: list[BaseException] = []  # the last failed attempt's error, raised when a stop ends a wait

    def before_sleeping(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        failures[:] = [error] if error is not None else []
        if before_sleep is not None:
            before_sleep(state)

    def wait_unless_stopped(seconds: float) -> None:
        wait(seconds)
        if stop.is_set() and failures:
            raise failures[0]

    return Retrying(
        retry=retry_if_exception_type(retry_on),
        wait=wait_exponential(multiplier=FIRST_DELAY, max=MAX_DELAY),
        stop=_StopWhenSet(stop),
        sleep=wait_unless_stopped,
        reraise=True,
        before_sleep=before_sleeping,
    )
