"""The full sync both service directions run: the synced gate, the delete circuit breaker, the
"wanted again" guard and the re-check schedule.

A full sync deletes what zkop owns and nothing wants, so it follows three rules (the failures
consul-k8s and external-dns users met first):

* never on a partial cache (:func:`postpone_until_synced`): a half-listed cache looks like mass deletion;
* never too much at once (:func:`breaker_trips`, :class:`DeleteCircuitBreaker`): above
  ``max_deletes`` services nothing is deleted; it logs, counts and sends an Event;
* never what is wanted again (:func:`delete_unless_wanted`): each candidate is checked against a
  fresh view right before its delete, which is also conditional on what was read.

The first full sync after a start waits for every known service's first pass (:class:`FirstPass`),
so the state gauges it sets count what the passes published. :func:`next_full_sync` says when the
next one runs: soon while the breaker is open or a race was lost, else after the period.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from zkop.kube.client import JSON
from zkop.kube.events import EventRecorder
from zkop.runtime.controller import Result
from zkop.runtime.retry import RetryBoundary
from zkop.zookeeper.errors import ZooKeeperError

__all__ = [
    "BREAKER_RECHECK",
    "CONFLICT_RECHECK",
    "SYNC_POLL",
    "DeleteCircuitBreaker",
    "FirstPass",
    "FullSyncReconciler",
    "Gauge",
    "Outcome",
    "breaker_trips",
    "default_event_object",
    "delete_unless_wanted",
    "next_full_sync",
    "postpone_until_synced",
]

A = TypeVar("A")

#: Seconds until a full sync that the circuit breaker stopped runs again (the breaker re-judges then).
BREAKER_RECHECK = 30.0
#: Seconds until a full sync that lost a race (a node or object changed, a service came back) re-plans.
CONFLICT_RECHECK = 5.0
#: Seconds between checks whether the informers have synced.
SYNC_POLL = 1.0


class Gauge(Protocol):
    """What is needed of a Prometheus gauge."""

    def set(self, value: float) -> None: ...


def default_event_object() -> JSON:
    """What breaker Events are about: zkop's Pod (``POD_NAME``/``POD_NAMESPACE`` set), else Namespace ``default``."""
    name, namespace = os.environ.get("POD_NAME"), os.environ.get("POD_NAMESPACE")
    if name and namespace:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}


def postpone_until_synced(synced: Callable[[], bool], log: logging.Logger, who: str) -> Result | None:
    """``Result(requeue_after=SYNC_POLL)`` (and an info line) while ``synced()`` is False, else ``None``."""
    if synced():
        return None
    log.info("%s: informers not synced yet; full sync postponed", who)
    return Result(requeue_after=SYNC_POLL)


def breaker_trips(count: int, max_deletes: int) -> bool:
    """True if deleting the objects of ``count`` services exceeds ``max_deletes`` (``0``: no limit)."""
    return max_deletes > 0 and count > max_deletes


class DeleteCircuitBreaker:
    """The breaker's state, its gauge, its log lines and Events across full syncs.

    Args:
        who: the log prefix (``service-bridge``, ``service-import``).
        log: the logger of the reconciler module (so its lines keep their logger name).
        gauge: set to 1 while open, 0 while closed.
        recorder: Kubernetes Events (``DeleteCircuitBreakerOpen`` / ``DeleteCircuitBreakerClosed``).
        event_object: what the Events are about (:func:`default_event_object`).
        closed_message: the ``DeleteCircuitBreakerClosed`` Event's message.
    """

    def __init__(self, who: str, log: logging.Logger, gauge: Gauge, recorder: EventRecorder, event_object: JSON,
                 closed_message: str) -> None:
        self.who = who
        self.log = log
        self.gauge = gauge
        self.recorder = recorder
        self.event_object = event_object
        self.closed_message = closed_message
        self.open = False

    def judge(self, tripped: bool, message: str, examples: Sequence[str]) -> None:
        """Record one full sync's verdict.

        Args:
            tripped: the plan exceeded the limit (nothing is deleted this time).
            message: why, for the log line and the Event (used only when ``tripped``).
            examples: a few of the paths or names that would have gone (the first five are logged).

        Opening logs an error (a warning while it stays open) and sends a Warning Event on each
        judgement; closing logs a warning and sends one Normal Event.
        """
        self.gauge.set(1 if tripped else 0)
        was_open, self.open = self.open, tripped
        if tripped:
            self.log.log(logging.WARNING if was_open else logging.ERROR, "%s: %s (e.g. %s)", self.who, message,
                         ", ".join(examples[:5]))
            self.recorder.event(self.event_object, "Warning", "DeleteCircuitBreakerOpen", message)
        elif was_open:
            self.log.warning("%s: delete circuit breaker closed", self.who)
            self.recorder.event(self.event_object, "Normal", "DeleteCircuitBreakerClosed", self.closed_message)


@dataclass(frozen=True)
class Outcome:
    """What :func:`delete_unless_wanted` did: ``deleted`` deletions, ``complete`` if none was held back;
    ``planned``: a dry run planned the deletions instead (nothing was deleted, the orphans remain)."""

    deleted: int = 0
    complete: bool = True
    planned: bool = False


def delete_unless_wanted(
    actions: Iterable[A], *, wanted_again: Callable[[A], str | None], delete: Callable[[A], object],
    lost_race: type[Exception] | tuple[type[Exception], ...], lost: Callable[[A, Exception], str],
    log: logging.Logger, who: str,
) -> Outcome:
    """Execute planned deletions one by one, each only if it is still unwanted.

    Args:
        actions: the deletions, in order.
        wanted_again: asked right before each one with fresh data; a log message (the action is
            skipped, the sync is incomplete) or ``None`` (go ahead).
        lost_race: the errors that mean the object changed since it was read (the deletion is
            skipped, the sync is incomplete); others propagate.
        lost: the log message for a lost race, from the action and the error.
        log, who: where and under which prefix to log.
    """
    deleted, complete = 0, True
    for action in actions:
        reason = wanted_again(action)
        if reason is not None:
            log.info("%s: %s", who, reason)
            complete = False
            continue
        try:
            delete(action)
            deleted += 1
        except lost_race as err:
            log.info("%s: %s", who, lost(action, err))
            complete = False
    return Outcome(deleted, complete)


def next_full_sync(period: float, *, breaker_open: bool, complete: bool, last_full_sync: Gauge) -> Result:
    """When the next full sync runs: :data:`BREAKER_RECHECK` while the breaker is open,
    :data:`CONFLICT_RECHECK` after a lost race, else ``period`` (each capped at ``period``); only a
    complete sync with the breaker closed sets ``last_full_sync`` to the current Unix time."""
    if breaker_open:
        return Result(requeue_after=min(period, BREAKER_RECHECK))
    if not complete:
        return Result(requeue_after=min(period, CONFLICT_RECHECK))
    last_full_sync.set(time.time())
    return Result(requeue_after=period)


class FirstPass:
    """Which services have had their first pass since the start, until the first full sync is done.

    Right after a start the full-sync key and every service's key are queued together, so the first
    full sync would count the state of a ZooKeeper (bridge) or a namespace (importer) the passes have
    not written yet, and its gauges would read 0 until the next full sync, ``--sync-period`` later.
    The first full sync therefore waits, polling every :data:`SYNC_POLL` seconds, until every key it
    knows has ended one pass (successful or not: a failing key is retried with backoff
    and must not hold garbage collection back); later full syncs never wait. Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._passed: set[str] = set()
        self._over = False
        self._waiting = False

    def passed(self, key: str) -> None:
        """Key ``key`` ended a pass (call it from the pass, also when it raised)."""
        with self._lock:
            if not self._over:
                self._passed.add(key)

    def pending(self, keys: Iterable[str]) -> list[str]:
        """Those of ``keys`` whose first pass has not ended; always empty after :meth:`done`."""
        with self._lock:
            if self._over:
                return []
            return [key for key in keys if key not in self._passed]

    def wait(self, pending: Sequence[str], log: logging.Logger, who: str) -> Result:
        """The first full sync's answer while ``pending`` keys have not passed: poll again soon.

        Logs (at info) once that the first full sync waits, and for how many keys.
        """
        with self._lock:
            first, self._waiting = not self._waiting, True
        if first:
            log.info("%s: the first full sync waits for the first pass of %d service(s)", who, len(pending))
        return Result(requeue_after=SYNC_POLL)

    @property
    def waiting(self) -> bool:
        """True while the first full sync is waiting (it already did what it does once per sync)."""
        with self._lock:
            return self._waiting and not self._over

    def done(self) -> None:
        """The first full sync is done: no full sync waits any more, and nothing is tracked."""
        with self._lock:
            self._over, self._waiting = True, False
            self._passed.clear()


class FullSyncReconciler:
    """What a reconciler with a full sync holds: the synced gate, the full-sync request and period,
    the delete circuit breaker with its Events' object, and the retry boundary for ZooKeeper
    failures (:attr:`retry`). Both directions' reconcilers extend it.

    Args:
        who, log, breaker_gauge, closed_message: the breaker's (see :class:`DeleteCircuitBreaker`).
        synced: True once every informer the reconciler reads has listed.
        request_full_sync: ``f(delay_seconds)`` enqueues the full-sync key.
        full_sync_period: seconds between full syncs.
        event_object: what breaker Events are about (default :func:`default_event_object`).

    Attributes:
        first_pass: the first full sync's wait for every service's first pass (:class:`FirstPass`).
    """

    def __init__(self, *, who: str, log: logging.Logger, breaker_gauge: Gauge, closed_message: str,
                 recorder: EventRecorder, synced: Callable[[], bool],
                 request_full_sync: Callable[[float], None], full_sync_period: float,
                 event_object: JSON | None) -> None:
        self.recorder = recorder
        self.synced = synced
        self.request_full_sync = request_full_sync
        self.full_sync_period = full_sync_period
        self.event_object = event_object or default_event_object()
        self.breaker = DeleteCircuitBreaker(who, log, breaker_gauge, recorder, self.event_object, closed_message)
        self.first_pass = FirstPass()
        #: Every ZooKeeper failure of a pass leaves it as a RetryableError (kazoo's own exceptions never
        #: reach the services: the ZooKeeper layer maps them once, ``zkop.zookeeper.errors.map_kazoo_error``).
        self.retry = RetryBoundary(ZooKeeperError)

    @property
    def breaker_open(self) -> bool:
        """True while the delete circuit breaker holds garbage collection back."""
        return self.breaker.open
