"""A runnable's thread is published only once it runs: a liveness check made while it is being started must not
read it as ended (``is_alive()`` is False until ``start()`` has returned), or the Manager would end the run.

Each case makes ``threading.Thread.start`` ask the runnable's ``health_check`` just before the thread really
starts, the moment a concurrent liveness check could fall into; the session's, inside the new thread before it
counts as alive (it has an ident by then).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from zkop_testing.zookeeper import free_port

from zkop.kube.client import KubeClient
from zkop.kube.events import EventRecorder
from zkop.runtime.cache import Indexer
from zkop.runtime.workqueue.delaying import DelayingQueue
from zkop.zkconfig.aclcheck import AclCheck
from zkop.zookeeper.adapter import ConnectionOptions, ZooKeeperAdapter
from zkop.zookeeper.errors import ZooKeeperError

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


def test_zookeeper_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """The session's event thread, asked about from inside it while it starts (``ident`` set, ``is_alive()``
    still False): a ZooKeeperEnsemble's session starts while the Manager checks liveness."""
    adapter = ZooKeeperAdapter(ConnectionOptions(hosts=f"127.0.0.1:{free_port()}", connect_timeout=0.2))
    real = vars(threading.Thread)["_set_native_id"]  # Thread._bootstrap_inner: after _set_ident, before _started
    seen: list[str | None] = []

    def set_native_id(thread: threading.Thread) -> None:
        if thread.name == "zk-session-events":
            seen.append(adapter.health_check())
        real(thread)

    monkeypatch.setattr(threading.Thread, "_set_native_id", set_native_id)
    with pytest.raises(ZooKeeperError):  # nothing listens: the event thread starts all the same
        adapter.start()
    adapter.stop(1.0)
    assert seen == [None]
