"""The services core: policies over Changes, report-once memos, oldest wins, the full-sync helpers."""

from __future__ import annotations

import logging

import pytest

from zkop.ownership.oldest import oldest
from zkop.services.fullsync import (
    BREAKER_RECHECK,
    CONFLICT_RECHECK,
    DeleteCircuitBreaker,
    breaker_trips,
    delete_unless_wanted,
    next_full_sync,
    postpone_until_synced,
)
from zkop.services.naming import port_name, squash
from zkop.services.policy import Changes, apply_policy
from zkop.services.reporting import ReportOnce


class _Gauge:
    def __init__(self) -> None:
        self.value = -1.0

    def set(self, value: float) -> None:
        self.value = value


class _Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, obj: object, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))


# --- policy ------------------------------------------------------------------------------------

PLANNED = Changes.of([("update", "u1"), ("create", "c1"), ("delete", "d1"), ("create", "c2")])


@pytest.mark.parametrize(("policy", "kept", "dropped"), [
    ("sync", ("u1", "c1", "d1", "c2"), ()),
    ("upsert-only", ("u1", "c1", "c2"), ("d1",)),
    ("create-only", ("c1", "c2"), ("u1", "d1")),
])
def test_policies_filter_changes_and_keep_planning_order(policy: str, kept: tuple[str, ...],
                                                         dropped: tuple[str, ...]) -> None:
    allowed, suppressed = apply_policy(policy, PLANNED)  # type: ignore[arg-type]
    assert allowed.ordered() == kept and suppressed.ordered() == dropped
    assert PLANNED.creates == ("c1", "c2") and PLANNED.updates == ("u1",) and PLANNED.deletes == ("d1",)


# --- reporting, naming -------------------------------------------------------------------------


def test_report_once_reports_new_and_changed_values_only() -> None:
    memo: ReportOnce[str, int] = ReportOnce()
    assert memo.note("a", 1) and not memo.note("a", 1) and memo.note("a", 2)
    assert memo.swap("a", 3) == 2 and memo.swap("b", 1) is None and len(memo) == 2
    memo.clear("a")
    assert "a" not in memo and memo.note("a", 3)


def test_oldest_wins_and_ties_keep_the_first() -> None:
    items = [("b", 2), ("a", 1), ("c", 1)]
    assert oldest(items, lambda i: (i[1], "")) == ("a", 1)
    assert oldest(items, lambda i: (i[1], i[0])) == ("a", 1)
    assert oldest([], lambda i: (0, "")) is None


def test_squash_and_port_name() -> None:
    assert squash("--Org.Apache__Dubbo--") == "org-apache-dubbo" and port_name("___") is None
    assert port_name("HTTP_Admin") == "http-admin" and len(port_name("p" * 80) or "") == 63


# --- full sync ---------------------------------------------------------------------------------


def test_breaker_trips_above_the_limit_and_zero_disables_it() -> None:
    assert not breaker_trips(10, 10) and breaker_trips(11, 10) and not breaker_trips(10**6, 0)


def test_breaker_opens_and_closes_once_with_events(caplog: pytest.LogCaptureFixture) -> None:
    gauge, recorder = _Gauge(), _Recorder()
    breaker = DeleteCircuitBreaker("svc", logging.getLogger("t"), gauge, recorder, {}, "closed again")  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="t"):
        breaker.judge(True, "too many", ["a", "b"])
        breaker.judge(True, "too many", ["a"])
        breaker.judge(False, "", [])
        breaker.judge(False, "", [])
    assert [r.levelname for r in caplog.records] == ["ERROR", "WARNING", "WARNING"]
    assert "svc: too many (e.g. a, b)" in caplog.text and not breaker.open and gauge.value == 0
    assert [e[1] for e in recorder.events] == ["DeleteCircuitBreakerOpen", "DeleteCircuitBreakerOpen",
                                               "DeleteCircuitBreakerClosed"]


def test_delete_unless_wanted_skips_the_wanted_and_survives_lost_races() -> None:
    deleted: list[str] = []

    def delete(action: str) -> None:
        if action == "raced":
            raise KeyError(action)
        deleted.append(action)

    outcome = delete_unless_wanted(
        ["a", "back", "raced", "b"], wanted_again=lambda a: "back again" if a == "back" else None, delete=delete,
        lost_race=KeyError, lost=lambda a, err: f"{a} lost", log=logging.getLogger("t"), who="svc")
    assert deleted == ["a", "b"] and outcome.deleted == 2 and not outcome.complete


def test_next_full_sync_schedule() -> None:
    gauge = _Gauge()
    assert next_full_sync(600, breaker_open=True, complete=True, last_full_sync=gauge).requeue_after == BREAKER_RECHECK
    assert next_full_sync(600, breaker_open=False, complete=False, last_full_sync=gauge).requeue_after == \
        CONFLICT_RECHECK
    assert gauge.value == -1
    assert next_full_sync(2, breaker_open=True, complete=True, last_full_sync=gauge).requeue_after == 2
    assert next_full_sync(600, breaker_open=False, complete=True, last_full_sync=gauge).requeue_after == 600
    assert gauge.value > 0


def test_full_sync_waits_for_the_informers() -> None:
    log = logging.getLogger("t")
    assert postpone_until_synced(lambda: True, log, "svc") is None
    waiting = postpone_until_synced(lambda: False, log, "svc")
    assert waiting is not None and waiting.requeue_after == 1.0
