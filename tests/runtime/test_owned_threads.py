"""``OwnedThreads.ended`` and the ZooKeeper session watchdog's ``ended``: decided by the thread's work having finished.

``threading.Thread.is_alive()`` is False twice in a thread's life: once it has ended, and in the moment
between its ident being set and its start being signalled (``Thread._bootstrap_inner``). A health check
that read "has an ident and is not alive" as "ended" took a thread being started for a dead one, and the
Manager ended the run. Here ``is_alive()`` answers False throughout, as in that moment: nothing running
may be named.
"""

from __future__ import annotations

import threading

import pytest
from zkop_testing.waiting import EVENTUALLY, wait_for

from zkop.runtime.threads import OwnedThreads
from zkop.zookeeper.reset import SuspensionWatchdog

# the threads that die here die of a KeyboardInterrupt on purpose; threading.excepthook reports it
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")


def test_a_running_thread_is_not_ended_whatever_is_alive_says(monkeypatch: pytest.MonkeyPatch) -> None:
    release, failing = threading.Event(), threading.Event()
    owned = OwnedThreads()

    def fail() -> None:
        failing.wait(EVENTUALLY)
        raise KeyboardInterrupt

    worker = owned.start(lambda: release.wait(EVENTUALLY), "worker")
    faulty = owned.start(fail, "faulty")
    monkeypatch.setattr(threading.Thread, "is_alive", lambda self: False)
    assert worker.ident is not None and owned.ended() == []
    release.set()
    worker.join(EVENTUALLY)
    assert owned.ended() == ["worker"]
    failing.set()
    faulty.join(EVENTUALLY)
    assert owned.ended() == ["worker", "faulty (ended by KeyboardInterrupt)"]
    owned.forget(worker)
    assert owned.ended() == ["faulty (ended by KeyboardInterrupt)"]


def test_the_session_watchdog_being_started_has_not_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    watchdog = SuspensionWatchdog(None, lambda reason: None, check_interval=None)
    watchdog.start()
    try:
        monkeypatch.setattr(threading.Thread, "is_alive", lambda self: False)
        assert not watchdog.ended()
    finally:
        monkeypatch.undo()
        watchdog.stop(EVENTUALLY)
    assert not watchdog.ended()


def test_the_session_watchdog_that_died_has_ended() -> None:
    def reset(reason: str) -> None:
        raise KeyboardInterrupt  # not an Exception: nothing in the loop catches it

    watchdog = SuspensionWatchdog(0.0, reset, check_interval=None)
    watchdog.start()
    watchdog.on_state("SUSPENDED")
    wait_for(watchdog.ended, message="the watchdog's thread ended")
