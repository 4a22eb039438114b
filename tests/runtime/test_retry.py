"""The one retry boundary (:class:`zkop.runtime.retry.RetryBoundary`): the quiet rule and the failure streaks."""

from __future__ import annotations

import pytest

from zkop.runtime.controller import RetryableError
from zkop.runtime.retry import RetryBoundary
from zkop.zookeeper.errors import ConcurrentModification, ZooKeeperError, ZooKeeperNoAuth, ZooKeeperUnavailable


def test_a_failure_of_the_dependency_leaves_the_body_as_a_retry_naming_the_key() -> None:
    boundary = RetryBoundary(ZooKeeperError)
    with pytest.raises(RetryableError, match=r"^default/web: not connected$") as raised, \
            boundary.retrying("default/web"):
        raise ZooKeeperUnavailable("not connected")
    assert isinstance(raised.value.__cause__, ZooKeeperUnavailable)


def test_other_errors_pass_through_unchanged() -> None:
    boundary = RetryBoundary(ZooKeeperError)
    with pytest.raises(KeyError), boundary.retrying("default/web"):
        raise KeyError("not ZooKeeper's")


def test_a_streak_counts_consecutive_failures_of_its_kind_and_their_duration() -> None:
    now = [100.0]
    boundary = RetryBoundary(ZooKeeperError, streak_of=ZooKeeperUnavailable, clock=lambda: now[0])
    assert boundary.failed("a", ZooKeeperUnavailable("down")) == (1, 0.0)
    now[0] = 101.5
    assert boundary.failed("a", ZooKeeperUnavailable("down")) == (2, 1.5)
    assert boundary.failed("b", ZooKeeperUnavailable("down")) == (1, 0.0)  # per key
    now[0] = 103.0
    assert boundary.failed("a", ZooKeeperUnavailable("down")) == (3, 3.0)


@pytest.mark.parametrize("ending", ["passed", "other failure"])
def test_any_other_ending_ends_the_streak(ending: str) -> None:
    now = [0.0]
    boundary = RetryBoundary(ZooKeeperError, streak_of=ZooKeeperUnavailable, clock=lambda: now[0])
    boundary.failed("a", ZooKeeperUnavailable("down"))
    now[0] = 5.0
    if ending == "passed":
        boundary.passed("a")
    else:
        assert boundary.failed("a", ZooKeeperNoAuth("no")) == (0, 0.0)
        assert boundary.failed("a", ConcurrentModification("changed")) == (0, 0.0)
    assert boundary.failed("a", ZooKeeperUnavailable("down")) == (1, 0.0)
