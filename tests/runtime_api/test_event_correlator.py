"""zkop's Event correlation against client-go's ``EventCorrelator`` rules (``tools/record/events_cache.go``),
on a fake clock: what is created, what is a patch of a count, what is aggregated, what is skipped."""

from __future__ import annotations

from zkop.kube.correlator import (
    AGGREGATE_INTERVAL,
    AGGREGATE_MAX_EVENTS,
    AGGREGATE_PREFIX,
    SPAM_BURST,
    Correlated,
    EventCorrelator,
    EventFields,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fields(message: str, *, name: str = "a", reason: str = "ZooKeeperUnavailable",
           type_: str = "Warning") -> EventFields:
    return EventFields("zkop", "ZooKeeperConfig", "default", name, f"uid-{name}", "platform.example.com/v1alpha1",
                       type_, reason, message)


def written(correlator: EventCorrelator, event: EventFields, n: int) -> Correlated | None:
    """Correlate ``event`` as the recorder does: the result is written and reported back."""
    result = correlator.correlate(event, f"{event.name}.{n:x}")
    if result is not None:
        correlator.update_state(result.key, result.name, result.count, result.first_timestamp or "t0")
    return result


def test_the_same_event_is_one_event_object_whose_count_goes_up() -> None:
    correlator = EventCorrelator(clock=Clock())
    results = [written(correlator, fields("session lost"), n) for n in range(5)]
    assert [r.count for r in results if r] == [1, 2, 3, 4, 5]
    assert {r.name for r in results if r} == {"a.0"}


def test_the_tenth_distinct_message_is_aggregated_into_one_event() -> None:
    """EventAggregatorByReasonFunc: same object, type and reason, messages that differ (a SUSPENDED
    session's age in the message) -- nine Events of their own, then one aggregate whose count goes up."""
    clock = Clock()
    correlator = EventCorrelator(clock=clock)
    results = []
    for n in range(20):
        clock.now += 1
        results.append(written(correlator, fields(f"ZooKeeper session SUSPENDED for {n} s"), n))
    names = [r.name for r in results if r]
    assert len(set(names[:AGGREGATE_MAX_EVENTS - 1])) == AGGREGATE_MAX_EVENTS - 1  # 9 Events of their own
    aggregated = [r for r in results[AGGREGATE_MAX_EVENTS - 1:] if r]
    assert {r.name for r in aggregated} == {names[AGGREGATE_MAX_EVENTS - 1]}  # then one Event object
    assert [r.count for r in aggregated] == list(range(1, 12))
    assert aggregated[-1].message == AGGREGATE_PREFIX + "ZooKeeper session SUSPENDED for 19 s"
    # Another reason about the same object is not part of that aggregate.
    other = written(correlator, fields("x", reason="NoAuth"), 99)
    assert other is not None and other.count == 1 and other.message == "x"


def test_aggregation_starts_afresh_after_ten_quiet_minutes() -> None:
    clock = Clock()
    correlator = EventCorrelator(clock=clock)
    for n in range(AGGREGATE_MAX_EVENTS):
        written(correlator, fields(f"m{n}"), n)
    clock.now += AGGREGATE_INTERVAL + 1
    result = written(correlator, fields("m-new"), 100)
    assert result is not None and result.message == "m-new" and result.count == 1


def test_each_object_has_a_budget_of_25_refilled_one_every_five_minutes_and_counts_go_on() -> None:
    clock = Clock()
    correlator = EventCorrelator(clock=clock)
    results = [written(correlator, fields("same"), n) for n in range(SPAM_BURST + 10)]
    assert sum(r is not None for r in results) == SPAM_BURST
    assert results[SPAM_BURST] is None
    # Another object, and the other type about the same object, have budgets of their own.
    assert written(correlator, fields("same", name="b"), 1) is not None
    assert written(correlator, fields("fine", type_="Normal", reason="Synced"), 1) is not None
    clock.now += 300
    refilled = written(correlator, fields("same"), 200)
    assert refilled is not None and refilled.count == SPAM_BURST + 11  # the skipped ones are in the count
    assert written(correlator, fields("same"), 201) is None
