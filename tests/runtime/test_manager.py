"""The generic Manager: start order, cache wait, probes, fatal stops, shutdown order, leader election, and
runnables that stop working (a thread they need ends: the run ends with 1, the Lease given up)."""

from __future__ import annotations

import logging
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from zkop_testing.apiserver import ApiServer
from zkop_testing.waiting import EVENTUALLY, wait_for

from zkop.kube.client import JSON, ApiException, KubeClient, resource_path
from zkop.runtime.cache import Informer, ResourceRef
from zkop.runtime.cache.transform import default_transform
from zkop.runtime.controller import Controller, Result
from zkop.runtime.manager import LeaderElectionOptions, Manager, ManagerOptions, Runnable


class Fake:
    """A runnable that records its calls in a shared log; optionally with a cache and a health check."""

    def __init__(self, name: str, log: list[str], *, synced: threading.Event | None = None,
                 health: str | None = None) -> None:
        self.name = name
        self.log = log
        self.synced = synced
        self.health = health
        self.stop_timeouts: list[float] = []

    def start(self) -> None:
        self.log.append(f"start {self.name}")

    def stop(self, timeout: float, /) -> None:
        self.stop_timeouts.append(timeout)
        self.log.append(f"stop {self.name}")


class Cached(Fake):
    """``has_synced`` follows the ``synced`` event; ``unsynced_polls`` counts the Manager's polls that got False."""

    unsynced_polls = 0

    def has_synced(self) -> bool:
        assert self.synced is not None
        synced = self.synced.is_set()
        if not synced and threading.current_thread() is not threading.main_thread():  # not the test's own calls
            self.unsynced_polls += 1
        return synced


class Checked(Fake):
    def health_check(self) -> str | None:
        return self.health


def quiet(**kw: object) -> ManagerOptions:
    return ManagerOptions(metrics_bind_address="0", health_probe_bind_address="0", cache_sync_poll=0.01,
                          **kw)  # type: ignore[arg-type]


def run_in_thread(manager: Manager) -> tuple[threading.Thread, list[int]]:
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(manager.run()), daemon=True)
    thread.start()
    return thread, codes


def run_leader(client: KubeClient, lease: str, runnable: Runnable, *, lease_duration: float, renew_deadline: float,
               ) -> tuple[Manager, threading.Thread, list[int]]:
    """Run a Manager electing ``me`` for the Lease ``default/<lease>`` (retry period 0.2 s, a 60 s drain) with
    ``runnable`` as its leader runnable; returns it once elected, with its thread and exit codes."""
    election = LeaderElectionOptions(namespace="default", name=lease, identity="me", lease_duration=lease_duration,
                                     renew_deadline=renew_deadline, retry_period=0.2)
    manager = Manager(quiet(leader_election=election, graceful_shutdown_timeout=EVENTUALLY), client)
    manager.add(runnable, needs_leader=True)
    thread, codes = run_in_thread(manager)
    assert manager.elected.wait(EVENTUALLY)
    return manager, thread, codes


def test_start_order_waits_for_caches_and_stops_in_reverse() -> None:
    log: list[str] = []
    synced = threading.Event()
    manager = Manager(quiet(graceful_shutdown_timeout=5.0))
    cache = Cached("cache", log, synced=synced)
    manager.add(Fake("controller", log), needs_leader=True)
    manager.add(cache, needs_leader=False)
    manager.add(Fake("recorder", log), needs_leader=False)
    thread, codes = run_in_thread(manager)
    wait_for(lambda: log == ["start cache", "start recorder"])
    assert manager.not_synced() == ["cache"]
    # The Manager polled an unsynced cache again after a False: it is waiting, so nothing was elected.
    wait_for(lambda: cache.unsynced_polls >= 2, message="the Manager polls the unsynced cache")
    assert not manager.elected.is_set(), "leader runnables must wait for the caches"
    synced.set()
    assert manager.elected.wait(EVENTUALLY)
    assert log[-1] == "start controller"
    manager.stop()
    thread.join(EVENTUALLY)
    assert codes == [0]
    assert log[3:] == ["stop controller", "stop recorder", "stop cache"]
    assert cache.stop_timeouts[0] >= 1.0


def test_added_while_running_starts_with_its_group() -> None:
    log: list[str] = []
    manager = Manager(quiet())
    thread, _ = run_in_thread(manager)
    try:
        assert manager.elected.wait(EVENTUALLY)
        manager.add(Fake("late-informer", log), needs_leader=False)
        manager.add(Fake("late-controller", log), needs_leader=True)
        assert log == ["start late-informer", "start late-controller"]
    finally:
        manager.stop()
        thread.join(EVENTUALLY)


def test_fail_before_sync_ends_the_run_without_leader_runnables() -> None:
    log: list[str] = []
    manager = Manager(quiet())
    manager.add(Cached("zookeeper", log, synced=threading.Event()), needs_leader=False)
    manager.add(Fake("controller", log), needs_leader=True)
    thread, codes = run_in_thread(manager)
    wait_for(lambda: "start zookeeper" in log)
    manager.fail(2, "probe refused")
    thread.join(EVENTUALLY)
    assert codes == [2]
    assert "start controller" not in log
    assert log[-2:] == ["stop controller", "stop zookeeper"]  # a never-started controller's queue is shut too


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode()


def test_probes_serve_named_checks_and_runnable_health() -> None:
    log: list[str] = []
    manager = Manager(ManagerOptions(metrics_bind_address="127.0.0.1:0", health_probe_bind_address="127.0.0.1:0"))
    worker = Checked("controller", log)
    manager.add(worker, needs_leader=True)
    manager.add_healthz_check("ping", lambda: None)
    manager.add_healthz_check("workers", manager.runnables_healthy)
    ready: list[str | None] = ["not yet"]
    manager.add_readyz_check("things", lambda: ready[0])
    with pytest.raises(ValueError, match="already exists"):
        manager.add_readyz_check("things", lambda: None)
    thread, _ = run_in_thread(manager)
    try:
        assert manager.elected.wait(EVENTUALLY)
        assert manager.health is not None and manager.metrics_server is not None
        base = f"http://127.0.0.1:{manager.health.port}"
        assert get(f"{base}/readyz") == (500, "[-]things failed: not yet\n")
        ready[0] = None
        assert get(f"{base}/readyz") == (200, "ok\n")
        assert get(f"{base}/healthz?verbose") == (200, "[+]ping ok\n[+]workers ok\n")
        worker.health = "worker threads died: w-0"
        assert get(f"{base}/healthz") == (500, "[+]ping ok\n[-]workers failed: worker threads died: w-0\n")
        assert get(f"{base}/nope")[0] == 404
        assert get(manager.metrics_server.url)[0] == 200
    finally:
        manager.stop()
        thread.join(EVENTUALLY)


def test_bind_takes_both_addresses_before_either_server_listens() -> None:
    """``zkop run`` binds before anything starts (docs/operations.md, "Exit codes": an address that cannot be
    bound is a usage error, nothing started): bound is not yet listening, and a failed bind keeps nothing."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        failing = Manager(ManagerOptions(metrics_bind_address=f"127.0.0.1:{port}",
                                         health_probe_bind_address="127.0.0.1:0"))
        with pytest.raises(OSError, match=f"cannot serve metrics on 127.0.0.1:{port}: Address already in use"):
            failing.bind()
        assert failing.health is not None
        with socket.socket() as again:  # the probe address it had bound is free again
            again.bind(("127.0.0.1", failing.health.port))

    manager = Manager(ManagerOptions(metrics_bind_address="127.0.0.1:0", health_probe_bind_address="127.0.0.1:0"))
    manager.bind()
    assert manager.health is not None and manager.metrics_server is not None
    for bound in (manager.health.port, manager.metrics_server.port):
        with socket.socket() as client, pytest.raises(ConnectionRefusedError):
            client.connect(("127.0.0.1", bound))  # bound, not listening: nobody gets in before run()
    thread, _ = run_in_thread(manager)
    try:
        assert manager.elected.wait(EVENTUALLY)  # after the servers started
        assert get(f"http://127.0.0.1:{manager.health.port}/healthz")[0] == 200
        assert get(manager.metrics_server.url)[0] == 200
    finally:
        manager.stop()
        thread.join(EVENTUALLY)


@pytest.fixture
def kube() -> Iterator[KubeClient]:
    with ApiServer() as server:
        client = KubeClient(server.api_client())
        yield client
        client.close()


def test_leader_runnables_start_only_when_leading_and_a_clean_stop_releases_the_lease(kube: KubeClient) -> None:
    log: list[str] = []
    election = LeaderElectionOptions(namespace="default", name="mgr-test", identity="me", lease_duration=3.0,
                                     renew_deadline=2.0, retry_period=0.5)
    manager = Manager(quiet(leader_election=election), kube)
    manager.add(Fake("controller", log), needs_leader=True)
    thread, codes = run_in_thread(manager)
    assert manager.elected.wait(EVENTUALLY)
    lease = kube.request("GET", resource_path("coordination.k8s.io", "v1", "leases", "default", "mgr-test"))
    assert lease["spec"]["holderIdentity"] == "me"
    manager.stop()
    thread.join(EVENTUALLY)
    assert codes == [0]
    assert log == ["start controller", "stop controller"]
    lease = kube.request("GET", resource_path("coordination.k8s.io", "v1", "leases", "default", "mgr-test"))
    assert lease["spec"].get("holderIdentity") is None  # released: the null holder is dropped
    assert lease["spec"]["leaseDurationSeconds"] == 1


def test_leader_election_needs_a_client() -> None:
    with pytest.raises(ValueError, match="client"):
        Manager(quiet(leader_election=LeaderElectionOptions(namespace="d", name="n", identity="i")))


class Draining(Fake):
    """A leader runnable whose stop drains until the test lets it finish (bounded by its timeout)."""

    def __init__(self, name: str, log: list[str]) -> None:
        super().__init__(name, log)
        self.draining = threading.Event()
        self.finish = threading.Event()

    def stop(self, timeout: float, /) -> None:
        super().stop(timeout)
        self.draining.set()
        self.finish.wait(timeout)


def test_the_lease_is_renewed_while_leader_runnables_drain(kube: KubeClient) -> None:
    """controller-runtime cancels leader election only after the runnables stopped (internal.go
    ``engageStopProcedure``: "Cancel leader election only after we waited"): a drain longer than
    the Lease must not let a standby take over while the last reconciles still write."""
    path = resource_path("coordination.k8s.io", "v1", "leases", "default", "drain-test")
    election = LeaderElectionOptions(namespace="default", name="drain-test", identity="me", lease_duration=2.0,
                                     renew_deadline=1.5, retry_period=0.2)
    manager = Manager(quiet(leader_election=election, graceful_shutdown_timeout=EVENTUALLY), kube)
    controller = Draining("controller", [])
    manager.add(controller, needs_leader=True)
    thread, codes = run_in_thread(manager)
    assert manager.elected.wait(EVENTUALLY)
    standby = Manager(quiet(leader_election=LeaderElectionOptions(
        namespace="default", name="drain-test", identity="standby", lease_duration=2.0, renew_deadline=1.5,
        retry_period=0.2)), kube)
    standby_controller = Fake("standby-controller", [])
    standby.add(standby_controller, needs_leader=True)
    standby_thread, standby_codes = run_in_thread(standby)
    try:
        manager.stop()
        assert controller.draining.wait(EVENTUALLY)
        first = kube.request("GET", path)["spec"]
        # Renewed again and again while draining: at least two Lease durations' worth of renewals
        # (10 renewals at the 0.2 s retry period), the holder never changing.
        renewals: set[str] = set()

        def renewed_while_draining() -> bool:
            spec = kube.request("GET", path)["spec"]
            assert spec["holderIdentity"] == "me", spec
            renewals.add(spec["renewTime"])
            return len(renewals) > 10

        wait_for(renewed_while_draining, message="the Lease renewed while the leader drains")
        assert not standby.elected.is_set()
        assert kube.request("GET", path)["spec"]["acquireTime"] == first["acquireTime"]
        controller.finish.set()
        thread.join(EVENTUALLY)
        assert codes == [0]
        # Released once drained: the standby takes over.
        assert standby.elected.wait(EVENTUALLY)
        assert kube.request("GET", path)["spec"]["holderIdentity"] == "standby"
    finally:
        controller.finish.set()
        manager.stop()
        standby.stop()
        thread.join(EVENTUALLY)
        standby_thread.join(EVENTUALLY)
    assert standby_codes == [0]


def steal(kube: KubeClient, path: str, holder: str) -> None:
    """Make ``holder`` the Lease's holder for 60 s, as another replica that judged it expired would.

    GET and PUT again after a 409: the leader renews every retry period, maybe between the two.
    """
    def put() -> bool:
        lease = kube.request("GET", path)
        lease["spec"].update(holderIdentity=holder, leaseDurationSeconds=60)
        try:
            kube.request("PUT", path, body=lease)
        except ApiException as err:
            if err.status != 409:
                raise
            return False
        return True

    wait_for(put, message=f"{holder} holds the Lease")


def test_a_lease_lost_while_draining_stops_leader_runnables_at_once_and_exits_1(kube: KubeClient) -> None:
    path = resource_path("coordination.k8s.io", "v1", "leases", "default", "lost-drain-test")
    controller = Draining("controller", [])
    manager, thread, codes = run_leader(kube, "lost-drain-test", controller, lease_duration=2.0, renew_deadline=1.5)
    try:
        manager.stop()
        assert controller.draining.wait(EVENTUALLY)
        steal(kube, path, "thief")
        wait_for(lambda: 0.0 in controller.stop_timeouts, message="leader runnables stopped at once")
        controller.finish.set()  # the in-flight reconcile ends
        thread.join(EVENTUALLY)
        assert codes == [1]
        assert kube.request("GET", path)["spec"]["holderIdentity"] == "thief"  # not released: not ours
    finally:
        controller.finish.set()
        manager.stop()
        thread.join(EVENTUALLY)


# --- runnables that stop working ------------------------------------------------------------------

#: The tests below end threads with an exception on purpose; pytest would warn about each.
ends_a_thread = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")


class Fault(BaseException):
    """What ends a thread from inside: a BaseException, as a KeyboardInterrupt, a SystemExit or a dependency's bug."""


def lease_path(name: str) -> str:
    return resource_path("coordination.k8s.io", "v1", "leases", "default", name)


def stopped_working(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The Manager's error lines saying a runnable stopped working."""
    return [r.getMessage() for r in caplog.records
            if r.name == "zkop.runtime.manager" and r.levelno == logging.ERROR and "stopped working" in r.getMessage()]


class Reconciles:
    """A reconciler: key ``die`` raises :class:`Fault` in the worker; key ``slow`` runs until ``finish`` is set."""

    def __init__(self) -> None:
        self.slow_started = threading.Event()
        self.finish = threading.Event()
        self.slow_done = threading.Event()

    def reconcile(self, key: str) -> Result:
        if key == "die":
            raise Fault("from inside the worker")
        if key == "slow":
            self.slow_started.set()
            self.finish.wait(EVENTUALLY)
            self.slow_done.set()
        return Result()


@ends_a_thread
def test_a_dead_worker_ends_the_run_with_1_and_the_lease_goes_once_in_flight_work_ended(
        kube: KubeClient, caplog: pytest.LogCaptureFixture) -> None:
    """controller-runtime's manager stops when a runnable fails and gives up leadership with it; here
    a worker thread ended by a BaseException is that failure. The other worker's reconcile finishes
    first, the Lease renewed meanwhile; then it is released and the standby takes over."""
    path = lease_path("liveness-test")
    options = {"namespace": "default", "name": "liveness-test", "lease_duration": 20.0, "renew_deadline": 16.0,
               "retry_period": 0.2}
    manager = Manager(quiet(leader_election=LeaderElectionOptions(identity="me", **options),  # type: ignore[arg-type]
                            graceful_shutdown_timeout=EVENTUALLY), kube)
    reconciler = Reconciles()
    controller = Controller("liveness", reconciler, workers=2)
    manager.add(controller, needs_leader=True)
    thread, codes = run_in_thread(manager)
    assert manager.elected.wait(EVENTUALLY)
    standby = Manager(quiet(leader_election=LeaderElectionOptions(identity="standby", **options)),  # type: ignore[arg-type]
                      kube)
    standby.add(Fake("standby-controller", []), needs_leader=True)
    standby_thread, standby_codes = run_in_thread(standby)
    try:
        controller.queue.add("slow")
        assert reconciler.slow_started.wait(EVENTUALLY)
        controller.queue.add("die")
        wait_for(lambda: stopped_working(caplog), message="the Manager noticed the dead worker")
        # Still the holder, still renewing while the in-flight reconcile goes on.
        renewed = kube.request("GET", path)["spec"]["renewTime"]
        wait_for(lambda: kube.request("GET", path)["spec"]["renewTime"] != renewed, message="renewed while draining")
        assert thread.is_alive() and not reconciler.slow_done.is_set()
        reconciler.finish.set()
        thread.join(EVENTUALLY)
        assert codes == [1]
        assert standby.elected.wait(EVENTUALLY), "released: the standby takes over"
        assert kube.request("GET", path)["spec"]["holderIdentity"] == "standby"
        (line,) = stopped_working(caplog)
        assert line.startswith("liveness stopped working (worker threads died: liveness-worker-"), line
        assert line.endswith(" (ended by Fault: from inside the worker)); stopping and giving up the Lease, "
                             "exit code 1"), line
    finally:
        reconciler.finish.set()
        manager.stop()
        standby.stop()
        thread.join(EVENTUALLY)
        standby_thread.join(EVENTUALLY)
    assert standby_codes == [0]


@ends_a_thread
def test_in_flight_work_that_outlives_the_bound_keeps_the_lease_from_being_released(
        kube: KubeClient, caplog: pytest.LogCaptureFixture) -> None:
    """After a failure the leader runnables get half the renew deadline, not the graceful shutdown
    timeout (60 s here): the run ends while a reconcile still runs, and the Lease is left to expire."""
    path = lease_path("liveness-bound-test")
    reconciler = Reconciles()
    controller = Controller("bounded", reconciler, workers=2)
    manager, thread, codes = run_leader(kube, "liveness-bound-test", controller, lease_duration=3.0,
                                        renew_deadline=2.0)
    try:
        controller.queue.add("slow")
        assert reconciler.slow_started.wait(EVENTUALLY)
        controller.queue.add("die")
        thread.join(EVENTUALLY)
        assert codes == [1]
        assert not reconciler.slow_done.is_set(), "the run waited for the in-flight reconcile"
        spec = kube.request("GET", path)["spec"]
        assert spec["holderIdentity"] == "me" and spec["leaseDurationSeconds"] == 3, "released while work went on"
        assert len(stopped_working(caplog)) == 1
        assert any("not releasing the Lease" in r.getMessage() for r in caplog.records)
    finally:
        reconciler.finish.set()
        manager.stop()
        thread.join(EVENTUALLY)


def poison(obj: JSON) -> JSON:
    """The informer's transform: ends the reflector thread (a BaseException) on the object named ``poison``."""
    if obj.get("metadata", {}).get("name") == "poison":
        raise Fault("poisoned")
    return default_transform(obj)


@ends_a_thread
def test_a_standby_whose_informer_dies_stops_campaigning_and_exits_1(kube: KubeClient,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """A standby with a dead informer would take over with a stale cache: it ends too, never leading."""
    path = lease_path("liveness-standby-test")
    kube.request("POST", resource_path("coordination.k8s.io", "v1", "leases", "default"), body={
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "liveness-standby-test", "namespace": "default"},
        "spec": {"holderIdentity": "other", "leaseDurationSeconds": 60, "renewTime": "2026-01-01T00:00:00.000000Z"},
    })
    log: list[str] = []
    informer = Informer(kube, ResourceRef("", "v1", "configmaps"), namespaces=["default"], name="configmaps",
                        resync_period=0, transform=poison)
    election = LeaderElectionOptions(namespace="default", name="liveness-standby-test", identity="me",
                                     lease_duration=3.0, renew_deadline=2.0, retry_period=0.2)
    manager = Manager(quiet(leader_election=election), kube)
    manager.add(informer, needs_leader=False)
    manager.add(Fake("controller", log), needs_leader=True)
    thread, codes = run_in_thread(manager)
    try:
        wait_for(informer.has_synced, message="the informer listed")
        kube.request("POST", resource_path("", "v1", "configmaps", "default"), body={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "poison", "namespace": "default"}})
        thread.join(EVENTUALLY)
        assert codes == [1]
        assert "start controller" not in log
        assert kube.request("GET", path)["spec"]["holderIdentity"] == "other"
        assert stopped_working(caplog) == [
            "configmaps stopped working (informer threads ended: informer-configmaps-default (ended by Fault: "
            "poisoned)); stopping, exit code 1"]
    finally:
        manager.stop()
        thread.join(EVENTUALLY)


class Unstartable(Fake):
    def start(self) -> None:
        raise RuntimeError("cannot start")


def test_a_runnable_whose_start_raises_ends_the_run_with_1(caplog: pytest.LogCaptureFixture) -> None:
    log: list[str] = []
    manager = Manager(quiet())
    manager.add(Fake("cache", log), needs_leader=False)
    manager.add(Unstartable("broken", log), needs_leader=False)
    manager.add(Fake("controller", log), needs_leader=True)
    thread, codes = run_in_thread(manager)
    thread.join(EVENTUALLY)
    assert codes == [1]
    assert "start controller" not in log and "stop cache" in log
    assert stopped_working(caplog) == [
        "broken stopped working (start() raised RuntimeError: cannot start); stopping, exit code 1"]


class RenewalRaises(KubeClient):
    """A client whose Lease PUTs raise :class:`Fault` once ``armed`` is set: the election thread ends."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.armed = threading.Event()

    def request(self, method: str, path: str, **kwargs: Any) -> JSON:
        if self.armed.is_set() and method == "PUT" and "/leases/" in path:
            raise Fault("in the election thread")
        return super().request(method, path, **kwargs)


@ends_a_thread
def test_a_dead_election_thread_stops_the_leader_runnables_at_once(renewal_raises: RenewalRaises,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """Nobody renews any more, so the Lease may soon be another's: as with a lost Lease, the leader runnables
    stop at once (no drain) and nothing is released."""
    controller = Draining("controller", [])
    manager, thread, codes = run_leader(renewal_raises, "liveness-election-test", controller, lease_duration=3.0,
                                        renew_deadline=2.0)
    try:
        renewal_raises.armed.set()
        thread.join(EVENTUALLY)
        assert codes == [1]
        assert controller.stop_timeouts == [0.0]
        assert stopped_working(caplog) == [
            "leader election stopped working (its thread leader-election ended); stopping the leader runnables at "
            "once; the Lease is no longer renewed, exit code 1"]
        spec = renewal_raises.request("GET", lease_path("liveness-election-test"))["spec"]
        assert spec["holderIdentity"] == "me"  # not released
    finally:
        controller.finish.set()
        manager.stop()
        thread.join(EVENTUALLY)


@pytest.fixture
def renewal_raises(apiserver: ApiServer) -> Iterator[RenewalRaises]:
    client = RenewalRaises(apiserver.api_client())
    yield client
    client.close()
