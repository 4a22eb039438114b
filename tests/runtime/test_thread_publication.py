"""A runnable's thread is published only once it runs: a liveness check made while it is being started must not
read it as ended (``is_alive()`` is False until ``start()`` has returned), or the Manager would end the run.

Each case makes ``threading.Thread.start`` ask the runnable's ``health_check`` just before the thread really
starts, the moment a concurrent liveness check could fall into.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest

from zkop.kube.client import KubeClient
from zkop.kube.events import EventRecorder
from zkop.runtime.cache import Indexer
from zkop.runtime.workqueue.delaying import DelayingQueue
from zkop.zkconfig.aclcheck import AclCheck
from zkop.zookeeper.adapter import ZooKeeperAdapter

Watch = Callable[[Callable[[], str | None]], list[Any]]


@pytest.fixture
def answers_while_starting(monkeypatch: pytest.MonkeyPatch) -> Iterator[Watch]:
    """``watch(check)``: from now on every ``Thread.start`` first records ``check()``; returns the record."""
    real = threading.Thread.start
    seen: list[Any] = []
    checks: list[Callable[[], str | None]] = []

    def start(thread: threading.Thread) -> None:
        seen.extend(check() for check in checks)
        real(thread)

    def watch(check: Callable[[], str | None]) -> list[Any]:
        checks.append(check)
        return seen

    monkeypatch.setattr(threading.Thread, "start", start)
    yield watch


def test_acl_check(answers_while_starting: Watch) -> None:
    check = AclCheck(Indexer({}), cast(ZooKeeperAdapter, None), lambda key: None, period=3600)
    seen = answers_while_starting(check.health_check)
    check.start()
    check.stop(5)
    assert seen == [None]


def test_event_recorder(answers_while_starting: Watch) -> None:
    recorder = EventRecorder(cast(KubeClient, object()))
    seen = answers_while_starting(recorder.health_check)
    recorder.start()
    recorder.stop(5)
    assert seen == [None]


def test_delaying_queue(answers_while_starting: Watch) -> None:
    queue: DelayingQueue[str] = DelayingQueue("publication")
    seen = answers_while_starting(queue.health_check)
    queue.add_after("later", 3600)
    queue.shutdown()
    assert seen == [None]
