"""Stopping the ZooKeeper layer leaves nothing running: every owner joins the threads it started.

Each test takes the threads that appeared while the owner started (kazoo's connection thread and
its handler's two workers included) and asserts that none of them is alive when ``stop`` returns:
not eventually, at once. A step that is busy when ``stop`` comes (a listener, a refusal check, a
rotation handler) takes a fixed 0.3 s, standing for real work: ``stop`` must wait for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.zookeeper.adapter import ConnectionOptions, ZooKeeperAdapter
from zkop.zookeeper.reset import SuspensionWatchdog
from zkop.zookeeper.security import RotationWatcher, WatchedFiles

#: Seconds a busy step lasts when ``stop`` comes.
BUSY = 0.3


def threads_started_by(start: Callable[[], object]) -> list[threading.Thread]:
    """Call ``start`` and return the threads that appeared meanwhile (still alive)."""
    before = set(threading.enumerate())
    start()
    return [t for t in threading.enumerate() if t not in before]


def alive(threads: list[threading.Thread]) -> list[str]:
    return [t.name for t in threads if t.is_alive()]


def test_session_stop_joins_its_threads_and_delivers_the_last_state_first(zk_server: ZooKeeperServer,
                                                                          tmp_path: Path) -> None:
    # An auth file (absent: no credentials) makes the session watch it, so its rotation thread runs too.
    adapter = ZooKeeperAdapter(ConnectionOptions(hosts=zk_server.hosts, auth_file=str(tmp_path / "digest"),
                                                 credentials_check_period=0.05))
    delivered: list[str] = []

    def slow_listener(state: str) -> None:
        if state == "LOST":
            threading.Event().wait(BUSY)
        delivered.append(state)

    adapter.add_session_listener(slow_listener)
    started = threads_started_by(adapter.start)
    names = {t.name for t in started}
    assert {"zk-session-events", "zk-session-watchdog", "zk-credentials-watch"} <= names, names
    assert len(started) >= 6, names  # and kazoo's: the connection thread and the handler's two workers
    adapter.stop()
    assert alive(started) == []
    assert delivered[-1] == "LOST"  # the dispatcher drained its queue before it ended
    adapter.stop()  # idempotent


def test_session_stop_delivers_the_final_lost_even_when_a_listener_ends_while_the_client_closes(
        zk_server: ZooKeeperServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # The dispatcher finishes delivering CONNECTED while kazoo is still closing the session (its
    # close waits for the server's reply): it must wait for the LOST that the close brings, not
    # end because a stop began.
    adapter = ZooKeeperAdapter(ConnectionOptions(hosts=zk_server.hosts))
    delivering = threading.Event()
    delivered: list[str] = []

    def listener(state: str) -> None:
        if state == "CONNECTED":
            delivering.set()
            threading.Event().wait(BUSY / 3)
        delivered.append(state)

    adapter.add_session_listener(listener)
    started = threads_started_by(adapter.start)
    client = adapter.client
    close = client.stop

    def slow_close() -> None:
        threading.Event().wait(BUSY)
        close()

    monkeypatch.setattr(client, "stop", slow_close)
    assert delivering.wait(EVENTUALLY)
    adapter.stop()
    assert alive(started) == []
    assert delivered == ["CONNECTED", "LOST"]


def test_session_stop_called_by_a_listener_does_not_join_its_own_thread(zk_server: ZooKeeperServer) -> None:
    adapter = ZooKeeperAdapter(ConnectionOptions(hosts=zk_server.hosts))
    returned = threading.Event()
    errors: list[BaseException] = []

    def stop_on_connect(state: str) -> None:
        if state != "CONNECTED":
            return
        try:
            adapter.stop()  # on the dispatcher thread: closes the session, joins everything but this thread
        except BaseException as err:
            errors.append(err)
        returned.set()

    adapter.add_session_listener(stop_on_connect)
    started = threads_started_by(adapter.start)
    assert returned.wait(EVENTUALLY)
    assert errors == []
    assert not adapter.connected
    wait_for(lambda: alive(started) == [], message="the dispatcher ends after its listener returns")


def test_watchdog_stop_waits_for_a_refusal_check_in_flight() -> None:
    checking = threading.Event()

    def slow_refusal_check() -> bool:
        checking.set()
        threading.Event().wait(BUSY)
        return False

    watchdog = SuspensionWatchdog(None, lambda reason: None, refused=slow_refusal_check, check_interval=0.01)
    started = threads_started_by(watchdog.start)
    assert [t.name for t in started] == ["zk-session-watchdog"]
    watchdog.on_state("SUSPENDED")
    assert checking.wait(EVENTUALLY)
    watchdog.stop()
    assert alive(started) == []
    watchdog.stop()  # idempotent
    watchdog.start()  # never starts again once stopped
    assert alive(started) == []


def test_watchdog_stopped_by_its_own_reset_does_not_join_itself() -> None:
    errors: list[BaseException] = []
    watchdog: SuspensionWatchdog

    def reset(reason: str) -> None:
        try:
            watchdog.stop()  # on the watchdog's thread
        except BaseException as err:
            errors.append(err)

    watchdog = SuspensionWatchdog(0.01, reset, check_interval=None)
    started = threads_started_by(watchdog.start)
    watchdog.on_state("SUSPENDED")
    wait_for(lambda: alive(started) == [], message="the watchdog ends after its reset")
    assert errors == []


def test_rotation_watcher_stop_waits_for_a_change_in_progress(tmp_path: Path) -> None:
    path = tmp_path / "ca.pem"
    path.write_text("one")
    handling = threading.Event()

    def slow_on_change(paths: list[str]) -> None:
        handling.set()
        threading.Event().wait(BUSY)

    watcher = RotationWatcher(WatchedFiles([str(path)]), 0.01, slow_on_change)
    started = threads_started_by(watcher.start)
    assert [t.name for t in started] == ["zk-credentials-watch"]
    path.write_text("two, rotated")
    assert handling.wait(EVENTUALLY)
    watcher.stop()
    assert alive(started) == []
    watcher.stop()  # idempotent


def test_rotation_watcher_stopped_by_its_own_handler_does_not_join_itself(tmp_path: Path) -> None:
    path = tmp_path / "ca.pem"
    path.write_text("one")
    errors: list[BaseException] = []
    watcher: RotationWatcher

    def stop_on_change(paths: list[str]) -> None:
        try:
            watcher.stop()
        except BaseException as err:
            errors.append(err)

    watcher = RotationWatcher(WatchedFiles([str(path)]), 0.01, stop_on_change)
    started = threads_started_by(watcher.start)
    path.write_text("two, rotated")
    wait_for(lambda: alive(started) == [], message="the watcher ends after its handler")
    assert errors == []


def test_rotation_watcher_being_started_has_not_ended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a health check sees while ``start()`` runs: the thread is not alive yet, and has not ended either
    (``zkop run`` exited 1 at start-up, "ZooKeeper session threads ended: zk-credentials-watch", under load)."""
    path = tmp_path / "ca.pem"
    path.write_text("one")
    watcher = RotationWatcher(WatchedFiles([str(path)]), 0.01, lambda paths: None)
    seen: list[tuple[bool, bool]] = []
    real_start = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        seen.append((thread.is_alive(), watcher.ended()))
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    watcher.start()
    monkeypatch.undo()
    assert seen == [(False, False)]
    assert not watcher.ended()
    watcher.stop()
    assert not watcher.ended()
