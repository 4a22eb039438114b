"""An ensemble's runtime connects by the one policy (:func:`zkop.zookeeper.connect_retry.connect_retrying`):
its workers start after the first attempt whatever its result, the attempts go on 0.5 s doubling to 10 s, each
reason is logged once in a row, and a stop ends the waiting with no attempt after it. Its health check says which
thread its work needs ended, until it is stopped (the Manager's supervision, end to end:
``tests/integration/test_ensembles.py``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, cast

import pytest
from zkop_testing.waiting import wait_for

from zkop.ensembles import running
from zkop.ensembles.controller import running_ensembles
from zkop.ensembles.running import EnsembleRuntime, Ensembles
from zkop.feature.ensemble_lookup import EnsembleAccess, EnsembleMissing
from zkop.feature.gate import Gate
from zkop.runtime.cache import Indexer
from zkop.zkconfig.controller import ZooKeeperConfigController
from zkop.zookeeper.adapter import ZooKeeperAdapter
from zkop.zookeeper.connect_retry import connect_retrying
from zkop.zookeeper.errors import ZooKeeperUnavailable


class Fault(BaseException):
    """What ends a thread that nothing catches (as a ``KeyboardInterrupt`` or a dependency's bug would)."""


class FakeAdapter:
    """Fails ``start`` with ``errors`` in turn (a :class:`Fault` raised as it is), then connects."""

    def __init__(self, *errors: str | Fault) -> None:
        self.errors = list(errors)
        self.why: str | None = None  # what its health check answers
        self.attempts = 0
        self.connected = False
        self.unavailable_reason: str | None = None
        self.last_connect_error: str | None = None
        self.listeners: list[Callable[[str], None]] = []
        self.stopped: Callable[[], bool] = lambda: False  # the runtime's stop event
        self.after_stop = 0  # attempts made once the runtime was stopped

    def add_session_listener(self, listener: Callable[[str], None]) -> None:
        self.listeners.append(listener)

    def start(self) -> None:
        self.attempts += 1
        self.after_stop += self.stopped()
        if self.errors:
            error = self.errors.pop(0)
            raise error if isinstance(error, Fault) else ZooKeeperUnavailable(error)
        self.connected = True

    def stop(self, timeout: float) -> None:
        self.connected = False

    def health_check(self) -> str | None:
        return self.why


class Part:
    """A worker of the ensemble's controller: records the calls it gets."""

    def __init__(self, calls: list[str], name: str) -> None:
        self.calls, self.name = calls, name
        self.started = threading.Event()
        self.queue = self
        self.why: str | None = None  # what its health check answers
        self.drained = True  # what its stop answers

    def health_check(self) -> str | None:
        return self.why

    def start(self) -> None:
        self.started.set()
        self.calls.append(f"{self.name}.start")

    def stop(self, timeout: float) -> bool:
        self.calls.append(f"{self.name}.stop")
        return self.drained

    def shutdown(self) -> None:
        self.calls.append(f"{self.name}.shutdown")

    def learn_absent(self) -> None:
        self.calls.append(f"{self.name}.learn_absent")


class FakeParts:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.watch_roots, self.controller = Part(self.calls, "watch_roots"), Part(self.calls, "controller")
        self.reconciler = Part(self.calls, "reconciler")
        self.acl_check = None

    def detach(self) -> None:
        self.calls.append("detach")


def runtime(adapter: FakeAdapter, parts: FakeParts, changes: list[str], name: str = "eu") -> EnsembleRuntime:
    return EnsembleRuntime(name, {}, "fp", cast(ZooKeeperAdapter, adapter), cast(ZooKeeperConfigController, parts),
                           on_change=lambda: changes.append(str(adapter.attempts)))


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The runtime's waits between attempts, recorded instead of waited."""
    recorded: list[float] = []

    def policy(stop: threading.Event, **kwargs: Any) -> Any:
        return connect_retrying(stop, sleep=recorded.append, **kwargs)

    monkeypatch.setattr(running, "connect_retrying", policy)
    return recorded


def test_workers_start_after_a_failed_first_attempt_and_the_attempts_go_on(
        waits: list[float], caplog: pytest.LogCaptureFixture) -> None:
    adapter, parts = FakeAdapter("refused", "refused", "TLS: untrusted", "refused"), FakeParts()
    changes: list[str] = []
    ensemble = runtime(adapter, parts, changes)
    caplog.set_level(logging.WARNING, logger="zkop.ensembles.running")
    ensemble.start()
    assert ensemble._thread is not None
    ensemble._thread.join(10)
    assert not ensemble._thread.is_alive()
    assert adapter.attempts == 5 and waits == [0.5, 1.0, 2.0, 4.0]
    assert parts.calls == ["watch_roots.start", "controller.start"]  # no learn_absent: not connected then
    assert changes == ["1", "2", "3", "4", "5"]  # each failure, then the session
    assert [r.getMessage() for r in caplog.records] == [  # once per reason in a row
        "ensemble eu: ZooKeeper not reachable yet: refused", "ensemble eu: ZooKeeper not reachable yet: TLS: untrusted",
        "ensemble eu: ZooKeeper not reachable yet: refused"]
    assert ensemble.last_error == "refused"  # cleared by the session's CONNECTED event, not by the attempt
    ensemble.stop(1.0)


def test_a_first_attempt_that_connects_learns_the_absent_paths(waits: list[float]) -> None:
    adapter, parts = FakeAdapter(), FakeParts()
    changes: list[str] = []
    ensemble = runtime(adapter, parts, changes)
    ensemble.start()
    assert ensemble._thread is not None
    ensemble._thread.join(10)
    assert parts.calls == ["watch_roots.start", "reconciler.learn_absent", "controller.start"]
    assert adapter.attempts == 1 and waits == [] and changes == ["1"]
    ensemble.stop(1.0)


def test_a_stop_ends_the_waiting_and_no_attempt_follows() -> None:
    adapter, parts = FakeAdapter(*["refused"] * 100), FakeParts()
    changes: list[str] = []
    ensemble = runtime(adapter, parts, changes)
    adapter.stopped = ensemble._stop.is_set
    ensemble.start()
    wait_for(lambda: adapter.attempts >= 2, message="a second attempt (after 0.5 s)")
    thread = ensemble._thread
    assert thread is not None
    ensemble.stop(5.0)  # the runtime waits (1 s, then 2 s ...) on its stop event
    assert not thread.is_alive()
    assert adapter.after_stop == 0 and "controller.stop" in parts.calls


def test_a_runtime_says_which_thread_it_needs_ended_until_it_is_stopped(waits: list[float]) -> None:
    adapter, parts = FakeAdapter(), FakeParts()
    ensemble = runtime(adapter, parts, [])
    assert ensemble.health_check() is None  # not started
    ensemble.start()
    assert ensemble._thread is not None
    ensemble._thread.join(10)
    assert ensemble.health_check() is None  # the start-up thread's work is done once the workers run
    parts.controller.why, adapter.why = "worker threads died: w-0 (ended by Fault)", "session threads ended: events"
    assert ensemble.health_check() == "session threads ended: events; controller: worker threads died: w-0 (ended by " \
                                      "Fault)"
    ensemble.stop(1.0)
    assert ensemble.health_check() is None


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_start_up_thread_that_dies_before_the_workers_start_is_reported(waits: list[float]) -> None:
    adapter, parts = FakeAdapter(Fault("in the attempt")), FakeParts()
    ensemble = runtime(adapter, parts, [])
    ensemble.start()
    assert ensemble._thread is not None
    ensemble._thread.join(10)
    assert parts.calls == []
    assert ensemble.health_check() == "its thread ensemble-eu ended (ended by Fault: in the attempt) before " \
                                      "starting its workers"
    ensemble.stop(1.0)
    assert ensemble.health_check() is None


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_start_up_thread_that_dies_after_the_workers_started_is_reported(waits: list[float]) -> None:
    """The workers run, but no attempt follows: the ensemble's objects would wait for a session for ever."""
    adapter, parts = FakeAdapter("refused", Fault("in the second attempt")), FakeParts()
    ensemble = runtime(adapter, parts, [])
    ensemble.start()
    assert ensemble._thread is not None
    ensemble._thread.join(10)
    assert parts.calls == ["watch_roots.start", "controller.start"]
    assert ensemble.health_check() == "its thread ensemble-eu ended (ended by Fault: in the second attempt)"
    ensemble.stop(1.0)


def test_the_ensembles_report_every_zookeeperensembles_runtime_but_not_the_flags(waits: list[float]) -> None:
    """The flags' ensemble's parts are runnables of the Manager's own: not reported twice. Stopping them all says
    whether every in-flight reconcile ended in time (the Manager releases the Lease only then)."""
    ensembles = Ensembles()
    flags, eu, us = FakeParts(), FakeParts(), FakeParts()
    for name, parts in (("", flags), ("eu", eu), ("us", us)):
        ensembles.put(runtime(FakeAdapter(), parts, [], name))
    for parts in (flags, eu, us):
        parts.controller.why = "worker threads died: w-0"
    running = [ensembles.get(name) for name in ("eu", "us")]
    for each in running:
        assert each is not None
        each.start()
        assert each._thread is not None
        each._thread.join(10)
    assert ensembles.health_check() == "ensemble eu: controller: worker threads died: w-0; ensemble us: controller: " \
                                       "worker threads died: w-0"
    us.controller.drained = False  # a reconcile outlived its drain
    assert ensembles.stop_all(1.0) is False
    assert "controller.stop" in eu.calls and "controller.stop" in us.calls and "controller.stop" not in flags.calls
    assert ensembles.health_check() is None


def test_the_lookup_gives_a_running_ensembles_adapter_and_gate_or_why_not_and_tells_of_every_change() -> None:
    """What the mirror asks (:func:`zkop.ensembles.controller.running_ensembles`): the running ensemble's adapter and
    its ZooKeeperConfig controller's gate; else ``EnsembleNotFound`` (no such object), ``EnsembleNotUsable`` (the
    reason it was removed with) or no reason while it is being made; and a listener hears each registration,
    removal and tenancy change."""
    ensembles, cache = Ensembles(), Indexer()
    heard: list[str] = []
    lookup = running_ensembles(ensembles, cache)
    lookup.on_change(heard.append)
    assert lookup.find("eu") == EnsembleMissing("EnsembleNotFound", "ZooKeeperEnsemble 'eu' not found")
    cache.upsert({"metadata": {"name": "eu"}})
    assert lookup.find("eu").reason is None  # type: ignore[union-attr]  # exists, its runtime not made yet
    parts, adapter = FakeParts(), FakeAdapter()
    gate = Gate()
    parts.reconciler.gate = gate  # type: ignore[attr-defined]
    ensembles.put(runtime(adapter, parts, [], "eu"))
    assert lookup.find("eu") == EnsembleAccess(cast(ZooKeeperAdapter, adapter), gate)
    ensembles.changed("eu")
    ensembles.remove("eu", "ZooKeeperEnsemble eu cannot be used: Secret eu-auth not found")
    assert lookup.find("eu") == EnsembleMissing("EnsembleNotUsable",
                                                "ZooKeeperEnsemble eu cannot be used: Secret eu-auth not found")
    assert heard == ["eu", "eu", "eu"]
