"""client-go's ``EventCorrelator`` (``tools/record/events_cache.go``): aggregate, count and rate-limit Events.

Three steps for every Event, in client-go's order (``EventCorrelator.EventCorrelate``):

1. **Aggregate** (``EventAggregator.EventAggregate``, ``EventAggregatorByReasonFunc``): Events about one
   object with the same source, type and reason that differ only in their message are grouped; from the
   10th distinct message within 10 minutes of the previous one on, an Event becomes the group's one
   aggregate Event, message ``(combined from similar events): <latest message>``.
2. **Count** (``eventLogger.eventObserve``): an Event seen before under the same key (exact, or the
   aggregate's) is a patch of the earlier Event object: ``count`` + 1, ``lastTimestamp``, ``message``.
3. **Rate-limit** (``EventSourceObjectSpamFilter.Filter``, ``getSpamKey``): one token bucket per source,
   object and type, burst 25, refilled one token every 5 minutes; an Event (create or patch) without a
   token is skipped. The count was taken first, so the next Event written carries the skipped ones too.

Caches are LRUs of 4096 entries, as client-go's (``maxLruCacheEntries``). Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from zkop.kube.flowcontrol import TokenBucket

__all__ = [
    "AGGREGATE_INTERVAL",
    "AGGREGATE_MAX_EVENTS",
    "AGGREGATE_PREFIX",
    "LRU_ENTRIES",
    "SPAM_BURST",
    "SPAM_QPS",
    "Correlated",
    "EventCorrelator",
    "EventFields",
]

#: ``maxLruCacheEntries``.
LRU_ENTRIES = 4096
#: ``defaultAggregateMaxEvents``: distinct messages before aggregation.
AGGREGATE_MAX_EVENTS = 10
#: ``defaultAggregateIntervalInSeconds``, seconds.
AGGREGATE_INTERVAL = 600.0
#: ``defaultSpamBurst``: Events a source may send about one object at once.
SPAM_BURST = 25
#: ``defaultSpamQPS``: refill, tokens per second (one every 5 minutes).
SPAM_QPS = 1.0 / 300.0
#: ``EventAggregatorByReasonMessageFunc``'s prefix.
AGGREGATE_PREFIX = "(combined from similar events): "

K = TypeVar("K")
V = TypeVar("V")


class _Lru(Generic[K, V]):
    """``k8s.io/utils/lru.Cache``: at most ``size`` entries, the least recently used evicted."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def add(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        if len(self._items) > self._size:
            self._items.popitem(last=False)


@dataclass(frozen=True)
class EventFields:
    """What identifies an Event for correlation: a ``core/v1`` Event's source, object, type, reason, message."""

    component: str
    kind: str
    namespace: str
    name: str
    uid: str
    api_version: str
    type: str
    reason: str
    message: str

    def spam_key(self) -> tuple[str, ...]:
        """``getSpamKey``: source, object and type."""
        return (self.component, self.kind, self.namespace, self.name, self.uid, self.api_version, self.type)

    def aggregate_key(self) -> tuple[str, ...]:
        """``EventAggregatorByReasonFunc``'s aggregate key: the spam key and the reason."""
        return (*self.spam_key(), self.reason)

    def event_key(self) -> tuple[str, ...]:
        """``getEventKey``: the aggregate key and the message."""
        return (*self.aggregate_key(), self.message)


@dataclass(frozen=True)
class Correlated:
    """The Event to write: create it when ``count == 1``, else patch the Event object ``name``.

    Attributes:
        key: the cache key to report the written Event under (:meth:`EventCorrelator.update_state`).
        name: the Event object's name (new, or the earlier one's).
        message: the message to write (the aggregate's when aggregated).
        count: how often it has been seen, this one included.
        first_timestamp: ``firstTimestamp`` of the Event object (RFC 3339), or ``None`` for a new one.
    """

    key: tuple[str, ...]
    name: str
    message: str
    count: int
    first_timestamp: str | None


@dataclass(frozen=True)
class _Observed:
    name: str
    count: int
    first_timestamp: str | None


@dataclass
class _Aggregate:
    messages: set[str]
    last: float


class EventCorrelator:
    """Correlate Events as client-go's ``NewEventCorrelator`` does (see the module docstring).

    Args:
        clock: monotonic seconds (tests pass a fake one).
        burst, qps: the per-object spam filter (``defaultSpamBurst``, ``defaultSpamQPS``).
        max_events, interval: the aggregator's threshold and window, seconds.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, burst: int = SPAM_BURST,
                 qps: float = SPAM_QPS, max_events: int = AGGREGATE_MAX_EVENTS,
                 interval: float = AGGREGATE_INTERVAL) -> None:
        self._clock = clock
        self._burst = burst
        self._qps = qps
        self._max_events = max_events
        self._interval = interval
        self._lock = threading.Lock()
        self._aggregates: _Lru[tuple[str, ...], _Aggregate] = _Lru(LRU_ENTRIES)
        self._observed: _Lru[tuple[str, ...], _Observed] = _Lru(LRU_ENTRIES)
        self._spam: _Lru[tuple[str, ...], TokenBucket] = _Lru(LRU_ENTRIES)

    def correlate(self, event: EventFields, new_name: str) -> Correlated | None:
        """The Event to write for ``event`` (named ``new_name`` if it is new), or ``None`` to skip it (spam).

        client-go ``EventCorrelator.EventCorrelate``: ``EventAggregate``, then ``eventObserve``, then
        the spam filter on the result.
        """
        with self._lock:
            now = self._clock()
            message, key = self._aggregate(event, now)
            last = self._observed.get(key)
            if last is not None and last.count > 0:
                observed = _Observed(last.name, last.count + 1, last.first_timestamp)
            else:
                observed = _Observed(new_name, 1, None)
            self._observed.add(key, observed)
            spam_key = event.spam_key()
            bucket = self._spam.get(spam_key)
            if bucket is None:
                bucket = TokenBucket(self._qps, self._burst, clock=self._clock)
            self._spam.add(spam_key, bucket)
            if not bucket.allow():
                return None
            return Correlated(key, observed.name, message, observed.count, observed.first_timestamp)

    def _aggregate(self, event: EventFields, now: float) -> tuple[str, tuple[str, ...]]:
        """``EventAggregate``: the message and cache key to use."""
        aggregate_key = event.aggregate_key()
        record = self._aggregates.get(aggregate_key)
        if record is None or now - record.last > self._interval:
            record = _Aggregate(set(), now)
        record.messages.add(event.message)
        record.last = now
        self._aggregates.add(aggregate_key, record)
        if len(record.messages) < self._max_events:
            return event.message, event.event_key()
        record.messages.pop()  # "do not grow our local key set any larger than max"
        return AGGREGATE_PREFIX + event.message, aggregate_key

    def update_state(self, key: tuple[str, ...], name: str, count: int, first_timestamp: str | None) -> None:
        """Remember the Event object the API server answered with (``EventCorrelator.UpdateState``)."""
        with self._lock:
            self._observed.add(key, _Observed(name, count, first_timestamp))
