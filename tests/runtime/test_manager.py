"""The generic Manager: start order, cache wait, probes, fatal stops, shutdown order, leader election."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from zkop_testing.apiserver import ApiServer
from zkop_testing.waiting import EVENTUALLY, wait_for

from zkop.kube.client import ApiException, KubeClient, resource_path
from zkop.runtime.manager import LeaderElectionOptions, Manager, ManagerOptions


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
    election = LeaderElectionOptions(namespace="default", name="lost-drain-test", identity="me",
                                     lease_duration=2.0, renew_deadline=1.5, retry_period=0.2)
    manager = Manager(quiet(leader_election=election, graceful_shutdown_timeout=EVENTUALLY), kube)
    controller = Draining("controller", [])
    manager.add(controller, needs_leader=True)
    thread, codes = run_in_thread(manager)
    try:
        assert manager.elected.wait(EVENTUALLY)
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
